// The stack rule of the classifier: a forward re-run by activation
// checkpointing anywhere in the stack, else the innermost of
// Module.__call__ (forward), a function named `backward` or the autograd
// engine (backward), torch/optim (optimizer step), Module._apply (moving a
// model). Inside those, the innermost frame of a communication library
// names the block's kind outright (classify.h, KindHint).
#include "analysis/kinds/stack_phases.h"

namespace memsight {
namespace {

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// What the phase rules look for in a frame's file and function names, found
// once per string: a stack's frames share their strings, and a name can be
// long enough that searching it again for every stack would cost more than
// reading the snapshot.
enum FileBit : uint8_t {
  kPython = 1,
  kOptim = 2,
  kModulePy = 4,
  kCheckpoint = 8,
  kComm = 16,        // DDP, c10d collectives, FSDP2's all-gather and reduce-scatter
  kShardParam = 32,  // FSDP's parameter storage, sharded or unsharded
};
enum NameBit : uint8_t {
  kBackward = 1,      // exactly "backward"
  kRecomputeish = 2,  // "recompute" or "unpack" in it
  kAccumulate = 4,    // AccumulateGrad
  kAutograd = 8,      // the autograd engine or a generated backward
  kCallImpl = 16,     // Module._call_impl or _wrapped_call_impl
  kApply = 32,        // Module._apply
  kCommNative = 64,   // c10d's or NCCL's C++ (the reducer's buckets, NCCL's own buffers)
};

uint8_t file_bits_of(std::string_view f) {
  uint8_t b = 0;
  if (f.ends_with(".py") || f.starts_with("<")) b |= kPython;
  if (has(f, "torch/optim/")) b |= kOptim;
  if (has(f, "torch/nn/modules/module.py")) b |= kModulePy;
  if (has(f, "torch/utils/checkpoint.py")) b |= kCheckpoint;
  if (has(f, "torch/nn/parallel/distributed.py") ||
      has(f, "torch/distributed/distributed_c10d.py") || has(f, "torch/distributed/utils.py") ||
      has(f, "torch/distributed/algorithms/") ||
      has(f, "torch/distributed/_functional_collectives.py") ||
      has(f, "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py"))
    b |= kComm;
  if (has(f, "torch/distributed/fsdp/_fully_shard/_fsdp_param.py") ||
      has(f, "torch/distributed/fsdp/_flat_param.py"))
    b |= kShardParam;
  return b;
}

uint8_t name_bits_of(std::string_view n) {
  uint8_t b = 0;
  if (n == "backward") b |= kBackward;
  if (has(n, "recompute") || has(n, "unpack")) b |= kRecomputeish;
  if (has(n, "AccumulateGrad")) b |= kAccumulate;
  if (has(n, "torch::autograd::Engine") || has(n, "torch::autograd::generated::")) b |= kAutograd;
  if (n == "_call_impl" || n == "_wrapped_call_impl") b |= kCallImpl;
  if (n == "_apply") b |= kApply;
  if (has(n, "c10d::") || has(n, "nccl")) b |= kCommNative;
  return b;
}

Phase frame_phase(uint8_t name, uint8_t file) {
  if (file & kPython) {
    if (name & kBackward) return Phase::Backward;
    if (file & kOptim) return Phase::Optimizer;
    if (file & kModulePy) {
      if (name & kCallImpl) return Phase::Forward;
      if (name & kApply) return Phase::Init;
    }
    return Phase::None;
  }
  if (name & (kAutograd | kAccumulate)) return Phase::Backward;
  return Phase::None;
}

}  // namespace

StackPhases::StackPhases(const Snapshot& snap, size_t work)
    : snap_(snap),
      stacks_(snap.frames.stack_count(), work, kNotYet),
      file_bits_(snap.strings.size(), work, 0),
      name_bits_(snap.strings.size(), work, 0) {}

uint8_t StackPhases::bits(IdCache<uint8_t>& cache, StrId s, uint8_t (*of)(std::string_view)) {
  if (s >= snap_.strings.size()) return of(snap_.str(s));
  uint8_t& c = cache[s];
  if (!(c & 0x80)) c = static_cast<uint8_t>(0x80 | of(snap_.str(s)));
  return c & 0x7f;
}

// Innermost frame first.
uint8_t StackPhases::find(StackId s) {
  auto frames = snap_.frames.stack(s);
  if (frames.empty()) return static_cast<uint8_t>(Phase::Unknown);
  Phase inner = Phase::None;
  KindHint hint = KindHint::None;
  bool accumulate = false;
  for (FrameId id : frames) {
    const Frame& f = snap_.frames.frame(id);
    uint8_t name = bits(name_bits_, f.name, name_bits_of);
    uint8_t file = bits(file_bits_, f.filename, file_bits_of);
    if ((file & kCheckpoint) && (name & (kRecomputeish | kBackward)))
      return static_cast<uint8_t>(Phase::Recompute);
    accumulate = accumulate || (name & kAccumulate);
    if (inner != Phase::None) continue;
    // A library's frame inside the innermost phase (DDP's forward calls the
    // model's; FSDP's hooks run inside Module.__call__) names the kind.
    if (hint == KindHint::None && ((file & kComm) || (name & kCommNative)))
      hint = KindHint::Communication;
    if (hint == KindHint::None && (file & kShardParam)) hint = KindHint::Parameter;
    inner = frame_phase(name, file);
  }
  return static_cast<uint8_t>(static_cast<uint8_t>(inner) | (static_cast<uint8_t>(hint) << 4) |
                              (accumulate ? 0x80 : 0));
}

}  // namespace memsight
