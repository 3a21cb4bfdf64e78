#include "model/torch_shapes.h"

#include <utility>
#include <vector>

namespace memsight {

TorchSegmentShapes::TorchSegmentShapes(Snapshot& snap) {
  using Keys = std::vector<std::pair<const char*, Field>>;
  auto shape = [&](const Keys& keys) {
    std::vector<ShapeKey> v;
    for (const auto& [k, f] : keys) v.push_back({snap.strings.intern(k), f});
    return snap.shapes.intern(v);
  };
  const Keys seg = {{"device", Field::Device},
                    {"address", Field::Address},
                    {"total_size", Field::TotalSize},
                    {"allocated_size", Field::AllocatedSize},
                    {"active_size", Field::ActiveSize},
                    {"requested_size", Field::RequestedSize},
                    {"stream", Field::Stream},
                    {"segment_type", Field::SegmentType},
                    {"segment_pool_id", Field::SegmentPoolId},
                    {"is_expandable", Field::IsExpandable}};
  Keys with = seg, without = seg;
  with.insert(with.end(), {{"blocks", Field::Blocks}, {"frames", Field::Frames}});
  without.insert(without.end(), {{"frames", Field::Frames}, {"blocks", Field::Blocks}});
  with_stack = shape(with);
  without_stack = shape(without);
  block = shape({{"address", Field::Address},
                 {"size", Field::Size},
                 {"requested_size", Field::RequestedSize},
                 {"state", Field::State},
                 {"frames", Field::Frames}});
  large = snap.strings.intern("large");
  small = snap.strings.intern("small");
  states[0] = snap.strings.intern("active_allocated");
  states[1] = snap.strings.intern("active_pending_free");
  states[2] = snap.strings.intern("inactive");
}

}  // namespace memsight
