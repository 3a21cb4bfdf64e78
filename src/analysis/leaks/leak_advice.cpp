// leak_advice(): the holders that fit a leak's evidence (docs/leaks.md,
// "Allocated at, and what keeps it").
#include "analysis/leaks/leak_advice.h"

#include <string_view>

namespace memsight {
namespace {

// The usual holders of blocks made in `phase` (LeakSite::made_in) that
// outlive every iteration.
std::string_view holders_of(std::string_view phase) {
  if (phase == "forward" || phase == "recomputed forward")
    return "Blocks allocated in the forward survive every iteration: something keeps a "
           "reference to an output or activation of each step: a list appended each step, a "
           "dict cache keyed by step, a logged tensor not converted with .item(), or an "
           "evaluation loop without torch.no_grad() whose outputs keep their graphs.";
  if (phase == "backward")
    return "Blocks allocated in the backward survive every iteration: gradients are kept each "
           "step: a list of .grad tensors or of torch.autograd.grad()'s results, or a graph "
           "kept by backward(create_graph=True).";
  if (phase == "optimizer step")
    return "Blocks allocated in the optimizer step survive every iteration: the optimizer gains "
           "state each step: parameters added to it every step, or a new optimizer made each "
           "step while the old ones are kept.";
  if (phase == "moving the model")
    return "Blocks allocated while moving a model to the GPU survive every iteration: a model "
           "or a copy of one is moved each step and kept.";
  if (phase.starts_with("outside"))
    return "Blocks allocated outside the forward, backward and optimizer step survive every "
           "iteration: a tensor the loop makes each step is kept: a loss appended to a list, a "
           "running total (total += loss keeps every step's graph), an input batch or a "
           "metric stored per step.";
  return "A block allocated each iteration survives every iteration: something keeps a "
         "reference to a tensor made each step: a list appended each step, a dict cache keyed "
         "by step, a logged tensor not converted with .item(), or an evaluation loop without "
         "torch.no_grad() keeping its graphs.";
}

}  // namespace

std::string leak_advice(const LeakSite& site, size_t sites, bool holders_recorded) {
  std::string out =
      "The snapshot records where these blocks were allocated, not what keeps them alive. ";
  if (sites > 1)
    out +=
        "In most iterations the newest surviving allocation is made there; what the iteration "
        "made before it and kept is likely held through it (a tensor's autograd graph holds the "
        "tensors it was computed from). ";
  out += holders_of(site.made_in);
  out +=
      " Keep a Python number (.item()) or a CPU copy (.cpu()) of what is logged, or drop the "
      "reference (del, or a bounded container); tensor.detach() does not free them: it shares "
      "the same memory.";
  // Where memsight.torch recorded the holders, they are the answer; else say
  // how to get them.
  out += holders_recorded
             ? " This snapshot carries memsight.torch's record of who holds its live tensors "
               "(memsight_holders): look these blocks up there."
             : " To find the holder: dump the snapshot with memsight.torch, whose who-holds-it "
               "record names the Python objects holding each live tensor, or call "
               "gc.get_referrers() on one of these tensors in the running job.";
  return out;
}

}  // namespace memsight
