"""`memsight profile` against `json.load` of the same torch.profiler trace.

    python3 bench/profile_bench.py [--trace F] [--steps 40] [--layers 12] [--repeat 3]

Without --trace it first records one on the GPU: a 12-layer transformer
trained under torch.profiler with record_shapes, profile_memory and
with_stack for --steps active steps, exported as plain JSON (the usual
size is several hundred MB). Then it times, alternating, `memsight profile
--json TRACE` and `python3 -c "import json; json.load(open(TRACE))"` (the
first thing any Python tool does with a trace), and prints wall times,
their ratio and memsight's peak RSS against the file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def record(path: str, steps: int, layers: int) -> None:
    import torch

    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 256, 512, device="cuda")
    sched = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True, profile_memory=True,
                                with_stack=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()


def timed(cmd: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    # ru_maxrss of children is the largest so far: run memsight first, fresh
    return wall, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memsight", default=os.environ.get("MEMSIGHT_BIN", "build/release/memsight"))
    ap.add_argument("--json")
    args = ap.parse_args()
    trace = args.trace
    if not trace:
        trace = os.path.abspath("bench_trace.pt.trace.json")
        t0 = time.perf_counter()
        record(trace, args.steps, args.layers)
        print(f"recorded {trace} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    size = os.path.getsize(trace)
    with open(trace, "rb") as f:  # warm the page cache for both
        while f.read(1 << 24):
            pass
    ms, js, rss = [], [], 0
    for _ in range(args.repeat):
        w, r = timed([args.memsight, "profile", "--json", trace])
        ms.append(w)
        rss = max(rss, r)
        js.append(timed([sys.executable, "-c", f"import json; json.load(open({trace!r}))"])[0])
    # memsight's own peak RSS, measured alone (the children's maximum above includes json.load)
    out = subprocess.run(["/usr/bin/time", "-f", "%M", args.memsight, "profile", "--json", trace],
                         capture_output=True, text=True)
    own_rss = int(out.stderr.strip().splitlines()[-1]) * 1024 if out.returncode == 0 else rss
    steps = len(json.loads(out.stdout)["steps"]) if out.returncode == 0 else -1
    res = {
        "trace_bytes": size, "steps_in_trace": steps,
        "memsight_s": statistics.median(ms), "json_load_s": statistics.median(js),
        "ratio": statistics.median(js) / statistics.median(ms),
        "memsight_peak_rss": own_rss, "rss_over_file": own_rss / size,
    }
    print("| trace | steps | memsight profile --json (median s) | json.load (median s) | ratio | memsight peak RSS | RSS / file |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {size / 1e6:.1f} MB | {steps} | {res['memsight_s']:.3f} | {res['json_load_s']:.3f} | "
          f"{res['ratio']:.1f}x | {own_rss / 1e6:.1f} MB | {res['rss_over_file']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
