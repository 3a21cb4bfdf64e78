// Pickle -> Snapshot model: the entry points, and the top-level dict once
// the pickle has ended. Trace entries and frames are converted while the
// pickle streams in (builder.h), segments and blocks at the end
// (read_segments.cpp), the values kept verbatim by read_values.cpp.
#include "memsight/reader.h"

#include "input/input_kind.h"
#include "input/source.h"
#include "snapshot/builder.h"
#include "snapshot/read_internal.h"

namespace memsight {
namespace build {

std::string Builder::type_name(Val v) const {
  switch (v.tag()) {
    case Val::None:
      return "None";
    case Val::False:
    case Val::True:
      return "a bool";
    case Val::Int:
    case Val::Big:
      return "an int";
    case Val::Float:
      return "a float";
    case Val::Str:
      return "a str";
    case Val::Bytes:
      return "bytes";
    case Val::List:
      return "a list";
    case Val::Tuple:
      return "a tuple";
    case Val::Dict:
      return "a dict";
    default:
      return "a dict";
  }
}

// A dict's items as Python holds them: a key written twice keeps its first
// place and its last value (pickle.loads would have overwritten it), so
// what memsight reads and writes back is what Python would see.
std::vector<Val> python_dict_items(std::span<const Val> items) {
  std::vector<Val> out;
  out.reserve(items.size());
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    size_t j = 0;
    while (j < out.size() && out[j] != items[i]) j += 2;
    if (j < out.size()) {
      out[j + 1] = items[i + 1];
    } else {
      out.push_back(items[i]);
      out.push_back(items[i + 1]);
    }
  }
  return out;
}

bool has_duplicate_keys(std::span<const Val> items) {
  for (size_t i = 0; i + 1 < items.size(); i += 2)
    for (size_t j = i + 2; j + 1 < items.size(); j += 2)
      if (items[i] == items[j]) return true;
  return false;
}

void Builder::finish(Unpickler& vm, Val root) {
  streaming_ = false;
  make_deferred(vm);
  root = vm.resolve(root);
  if (root.tag() == Val::List) {
    // memory_snapshot() output: a bare list of segments.
    snap_.legacy_segment_list = true;
    convert_segments(vm, root);
    return;
  }
  // A top-level dict whose first keys are a trace entry's or a frame's was
  // converted as one while it streamed in: only the read that converts
  // nothing before the end sees it as the dict it is.
  if (root.tag() == Val::Row || root.tag() == Val::FrameRef) throw NeedsExactRead{};
  if (root.tag() != Val::Dict)
    throw Error("not a memory snapshot: the pickle holds " + type_name(root) +
                ", expected a dict with 'segments' and 'device_traces'");
  // No node is created from here on, so the reference stays valid.
  const std::vector<Val>& items = vm.node(root).items;
  bool has_segments = false;
  Val traces{};
  bool has_traces = false;
  std::vector<std::string> keys;
  // Sized once: a file of many unknown keys costs a fixed amount per key.
  keys.reserve(items.size() / 2);
  snap_.top_level.reserve(items.size() / 2);
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].tag() != Val::Str)
      throw Error("not a memory snapshot: a top-level key is " + type_name(items[i]));
    keys.emplace_back(snap_.str(items[i].idx()));
  }
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    StrId k = items[i].idx();
    if (k == kSegments) {
      has_segments = true;
      convert_segments(vm, items[i + 1]);
    } else if (k == kDeviceTraces) {
      has_traces = true;
      traces = items[i + 1];
    }
  }
  if (!has_segments) {
    std::string list;
    for (auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    throw Error("not a memory snapshot: no 'segments' key (top-level keys: " +
                (list.empty() ? std::string("none") : list) + ")");
  }
  // Other top-level values are materialised before the trace table can be
  // reordered, since a Row value refers to the table as read.
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    StrId k = items[i].idx();
    if (k != kSegments && k != kDeviceTraces)
      snap_.top_level.emplace_back(std::string(snap_.str(k)), materialize(vm, items[i + 1]));
  }
  snap_.top_keys = std::move(keys);
  if (has_traces && vm.resolve(traces).tag() == Val::Skipped) {
    snap_.trace_skipped = true;
  } else if (has_traces) {
    convert_traces(vm, traces);
  }
}

}  // namespace build

Snapshot read_snapshot(ByteSource& src, const Progress& progress, ReadScope scope, bool exact) {
  Snapshot snap;
  build::Builder builder(snap);
  // The exact read converts nothing while the pickle streams in: every
  // container is a node until STOP, then converted as it is then.
  Unpickler vm(src, snap.strings, exact ? nullptr : &builder, progress);
  bool skip = scope == ReadScope::SegmentsOnly && !exact;
  if (!exact) vm.enable_fast_path(&snap.frames, build::kName);
  if (skip)
    vm.skip_value_of(build::kDeviceTraces);
  else if (!exact)
    vm.decode_in_parallel(build::kDeviceTraces, build::kFilename, build::kLine);
  if (src.total() > 0 && src.compression().empty()) {
    // Reserved, not touched: untouched pages cost no memory, and tables that
    // never reallocate never hold two copies at once. A trace entry takes
    // at least ~60 bytes of pickle.
    if (!skip) snap.trace.reserve(src.total() / 60);
    vm.reserve_memo(src.total() / 30);
  }
  try {
    Val root = vm.run();
    builder.finish(vm, root);
  } catch (const Error&) {
    // After a skip, only a full read may call the input broken.
    if (vm.skipped()) throw NeedsFullRead{};
    throw;
  }
  return snap;
}

namespace {
// The segments-only read, the full read, and the exact read (NeedsExactRead),
// each tried when the one before cannot vouch for the input. `open` gives
// the input anew each time.
template <typename Open>
Snapshot read_with_fallback(Open open, const Progress& progress, ReadScope scope) {
  bool exact = false;
  if (scope == ReadScope::SegmentsOnly) {
    try {
      auto src = open();
      return read_snapshot(*src, progress, scope, false);
    } catch (const NeedsFullRead&) {
    } catch (const NeedsExactRead&) {
      exact = true;
    }
  }
  if (!exact) {
    try {
      auto src = open();
      return read_snapshot(*src, progress, ReadScope::Everything, false);
    } catch (const NeedsExactRead&) {
    }
  }
  auto src = open();
  return read_snapshot(*src, progress, ReadScope::Everything, true);
}
}  // namespace

Snapshot read_snapshot_named(const OpenSource& open, const std::string& name,
                             const Progress& progress, ReadScope scope) {
  // Every message names the input once, here.
  // A file of another kind is named with the command that reads it
  // (input_kind.h), whoever opened it: the CLI or the standalone viewer.
  return read_named(name, [&] {
    return read_with_fallback(
        [&] {
          std::unique_ptr<ByteSource> src = open();
          expect_input(src->head(), InputKind::Snapshot, name);
          return src;
        },
        progress, scope);
  });
}

Snapshot read_snapshot_file(const std::string& path, const Progress& progress, ReadScope scope) {
  // Standard input cannot be read twice, so it is always read in full, and
  // a pickle that needs the exact read (NeedsExactRead) is refused there.
  if (path != "-")
    return read_snapshot_named([&] { return open_source(path); }, path, progress, scope);
  bool opened = false;
  auto open_once = [&] {
    if (opened)
      throw Error(
          "this pickle changes a list or dict after using it, which memsight reads only from a "
          "file (it reads such a pickle twice): save it to a file first");
    opened = true;
    return open_source(path);
  };
  return read_snapshot_named(open_once, path, progress, ReadScope::Everything);
}

Snapshot read_snapshot_bytes(std::string_view data, ReadScope scope) {
  return read_with_fallback(
      [&] {
        auto src = memory_source(data);
        expect_input(src->head(), InputKind::Snapshot, "");
        return src;
      },
      {}, scope);
}

}  // namespace memsight
