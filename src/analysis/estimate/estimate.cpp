// `memsight estimate` (memsight/estimate.h): each device's requests through
// the simulated allocator with its trail kept, the completed snapshot made
// from the runs (complete.cpp, top_level.cpp), and the answer beside the
// what-if table of the same requests.
#include "analysis/estimate/estimate.h"

#include "memsight/error.h"
#include "util/text_format.h"

namespace memsight {
namespace {

// A snapshot that already holds segments or segment events is a recording
// (or a completed estimate): there is nothing to complete.
void check_requests_only(const Snapshot& in) {
  size_t events = 0;
  for (size_t r = 0; r < in.trace.rows(); ++r) {
    const Action a = in.trace.action[r];
    events += a == Action::SegmentAlloc || a == Action::SegmentFree || a == Action::SegmentMap ||
              a == Action::SegmentUnmap;
  }
  if (!in.segments.empty() || events)
    throw Error("not a requests-only snapshot: it holds " +
                count_of(static_cast<int64_t>(in.segments.size()), "segment") + " and " +
                count_of(static_cast<int64_t>(events), "segment event") +
                " (memsight estimate completes the allocations and frees of an estimate, as "
                "memsight.torch.estimate writes them; a recording is already complete: try "
                "`memsight whatif`)");
  if (in.trace.rows() == 0) throw Error("the snapshot has no trace: no requests to estimate from");
}

}  // namespace

Estimated complete_estimate(const Snapshot& in, const EstimateRequest& req) {
  if (req.device_memory != -1 && req.device_memory <= 0)
    throw Error("the device's memory must be a positive number of bytes");
  alloc::Settings settings = alloc::Settings::recorded(in);
  if (!req.set.empty()) settings.apply(req.set);  // a bad setting fails first
  check_requests_only(in);
  whatif::Options opts;
  opts.device_memory = req.device_memory;
  opts.memory_fraction = req.memory_fraction;
  opts.base = req.set;

  std::vector<estimate::DeviceRun> runs;
  for (size_t d = 0; d < in.device_count(); ++d) {
    if (in.device_rows(d).first == in.device_rows(d).second) continue;
    estimate::DeviceRun& run = runs.emplace_back();
    run.device = d;
    run.plan = simulate::plan(in, d);
    run.memory = whatif::device_for(run.plan, opts, settings);
    simulate::Inputs inputs{settings, run.memory, true};
    run.result = simulate::run(in, run.plan, inputs, &run.trail);
  }
  Estimated out{estimate::copy_tables(in), {}, {}};
  estimate::complete_trace(in, runs, out.snapshot);
  estimate::complete_segments(in, runs, out.snapshot);
  estimate::complete_top_level(in, runs, settings, out.snapshot);

  estimate::Answer a;
  a.settings = settings.conf();
  for (const estimate::DeviceRun& run : runs) a.devices.push_back(&run);
  a.table = whatif::run(in, opts);
  out.text = estimate::answer_text(a);
  out.json = estimate::answer_json(a);
  return out;
}

}  // namespace memsight
