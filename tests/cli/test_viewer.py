"""`memsight viewer` (the standalone page with the WebAssembly engine) and the
report's new views. What the page does with a file is tested in Chromium
(tests/browser/standalone.test.mjs)."""
import base64
import pathlib
import re
import zlib

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"

WASM_MAGIC = base64.b64encode(b"\0asm\x01\0\0\0").decode()[:8]


def assert_user_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = r.stderr.decode()
    assert err.count("\n") == 1, err
    for n in needles:
        assert n in err, err


def test_viewer_writes_one_offline_page_with_the_engine(run, tmp_path):
    r = run("viewer", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode() == "wrote memsight-viewer.html\n"
    page = (tmp_path / "memsight-viewer.html").read_text()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert "default-src 'none'" in csp  # no request of any kind
    assert "'wasm-unsafe-eval'" in csp and "worker-src blob:" in csp
    wasm = re.search(r'<script type="application/octet-stream" id="memsight-engine-wasm">\s*([A-Za-z0-9+/=]+)\s*</script>',
                     page).group(1)
    assert base64.b64decode(wasm)[:8] == b"\0asm\x01\0\0\0"
    assert wasm.startswith(WASM_MAGIC)
    assert 'id="memsight-engine-js"' in page and "MemsightEngine" in page
    # The same script as the report, plus the part that opens files.
    assert "class StandaloneViewer" in page and "class TimelineView" in page
    assert not re.search(r"<script[^>]* src=", page)


def test_viewer_to_stdout_and_errors(run, tmp_path):
    r = run("viewer", "-o", "-")
    assert r.returncode == 0 and r.stdout.startswith(b"<!DOCTYPE html>")
    assert_user_error(run("viewer", "snap.pickle"), "unexpected argument 'snap.pickle'")
    missing = tmp_path / "no" / "such" / "dir" / "v.html"
    assert_user_error(run("viewer", "-o", missing))
    assert not missing.parent.exists()
    help_text = run("viewer", "--help").stdout.decode()
    assert "WebAssembly" in help_text and ".zst" in help_text


def test_view_opens_on_the_new_views(run, tmp_path):
    for view in ("pools", "settings"):
        out = tmp_path / f"{view}.html"
        r = run("view", DATA / "cuda_graph.pickle", "-o", out, "--view", view)
        assert r.returncode == 0, r.stderr
        assert f'"view":"{view}"' in _meta(out)
    assert_user_error(run("view", DATA / "oom.pickle", "--view", "bogus"), "pools", "settings")


def _meta(path):
    """The JSON header of the page's data (docs/formats.md)."""
    text = path.read_text()
    payload = re.search(r'data-encoding="deflate"[^>]*>([^<]*)<', text).group(1)
    raw = b"".join(zlib.decompress(base64.b64decode(p)) for p in payload.strip().split("."))
    head_len = int.from_bytes(raw[4:8], "little")
    return raw[8:8 + head_len].decode()
