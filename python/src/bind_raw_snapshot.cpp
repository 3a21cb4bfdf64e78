// The native dumper's raw snapshots (python/memsight/torch/native): its
// arrays, handed over by address, turned into the model.
#include "binding.h"
#include "memsight/from_raw.h"
#include "memsight/reader.h"

namespace memsight::py_binding {

void bind_raw_snapshot(py::module_& m) {
  m.def(
      "snapshot_from_raw",
      [](uintptr_t address, const py::bytes& extra) {
        std::string extra_pickle = extra;
        py::gil_scoped_release nogil;
        Snapshot snap = snapshot_from_raw(*reinterpret_cast<const memsight_raw_snapshot*>(address));
        if (!extra_pickle.empty()) {
          // memsight's own keys beside torch's (memsight_tags, memsight_device_memory),
          // read by the one safe reader.
          Snapshot e = read_snapshot_bytes(extra_pickle);
          for (auto& [k, v] : e.top_level) {
            snap.top_keys.push_back(k);
            snap.top_level.emplace_back(k, std::move(v));
          }
        }
        return std::make_shared<Snapshot>(std::move(snap));
      },
      py::arg("address"), py::arg("extra") = py::bytes(),
      "The model of a raw allocator snapshot (the native dumper's arrays at `address`), with "
      "the top-level keys of `extra` (a pickled dict holding 'segments': [] and plain data).");
}

}  // namespace memsight::py_binding
