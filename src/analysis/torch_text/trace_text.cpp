// torch's `_memory_viz trace`: the event log as pseudo-Python, reproduced
// with its quirks (names never reused, the TOTAL MEM arithmetic, no newline
// after TOTAL MEM, repr() of entries it has no line for).
#include <map>
#include <unordered_map>

#include "memsight/text_tools.h"

namespace memsight {
namespace {

// First interval, in insertion order, that contains an address. Kept as
// disjoint pieces, each owned by the earliest interval covering it, so a
// lookup is one map search instead of torch's linear scan.
class FirstIntervalIndex {
 public:
  void add(int64_t start, int64_t size, uint32_t owner) {
    if (size <= 0) return;
    int64_t end = start + size, cur = start;
    auto it = pieces_.upper_bound(cur);
    if (it != pieces_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > cur) cur = prev->second.end;
    }
    while (cur < end) {
      it = pieces_.lower_bound(cur);
      int64_t next = it == pieces_.end() ? end : std::min(end, it->first);
      if (next > cur) pieces_.emplace(cur, Piece{next, owner});
      if (it == pieces_.end() || it->first >= end) break;
      cur = std::max(cur, it->second.end);
    }
  }
  // Owner of the piece containing addr, or -1.
  int64_t find(int64_t addr) const {
    auto it = pieces_.upper_bound(addr);
    if (it == pieces_.begin()) return -1;
    --it;
    return addr < it->second.end ? static_cast<int64_t>(it->second.owner) : -1;
  }

 private:
  struct Piece {
    int64_t end;
    uint32_t owner;
  };
  std::map<int64_t, Piece> pieces_;
};

std::string name_of(uint64_t n) {
  std::string s(1, static_cast<char>('a' + n % 26));
  if (n / 26) s += std::to_string(n / 26);
  return s;
}

// The fallback lookup over the snapshot's segments (all devices), extent
// allocated_size, named seg_<index>.
FirstIntervalIndex segment_index(const Snapshot& snap) {
  FirstIntervalIndex seg_index;
  for (size_t i = 0; i < snap.segments.size(); ++i)
    seg_index.add(snap.segments[i].address, snap.segments[i].allocated_size,
                  static_cast<uint32_t>(i));
  return seg_index;
}

// One device's entries, one line each. Names are handed out in order and
// never reused; an allocation is placed in the first segment this log
// cudaMalloc'd that holds it, else in the snapshot's segment, else in MEM.
class DeviceLog {
 public:
  DeviceLog(const Snapshot& snap, const FirstIntervalIndex& seg_index, std::string& out)
      : snap_(snap), seg_index_(seg_index), out_(out) {}

  // Appends row r's line; returns what it adds to TOTAL MEM's count.
  int64_t line(uint32_t r) {
    const TraceTable& t = snap_.trace;
    int64_t addr = t.addr[r], size = t.size[r];
    switch (t.action[r]) {
      case Action::Alloc:
        alloc(addr, size);
        return size;
      case Action::FreeRequested:
        out_ += "del " + alloc_called(addr) + " # " + format_size(static_cast<double>(size)) + '\n';
        return 0;
      case Action::FreeCompleted:
        out_ += "# free completed for " + alloc_called(addr) + ' ' +
                format_size(static_cast<double>(size)) + '\n';
        return -size;
      case Action::SegmentAlloc:
        segment_alloc(addr, size);
        return 0;
      case Action::SegmentFree: {
        auto it = seg_name_.find(addr);
        std::string name = it != seg_name_.end() ? it->second : std::to_string(addr);
        out_ += "cudaFree(" + name + ") # " + format_size(static_cast<double>(size)) + '\n';
        return 0;
      }
      case Action::Oom:
        out_ += "raise OutOfMemoryError # " + format_size(static_cast<double>(size)) +
                " requested, " + format_size(static_cast<double>(addr)) + " free in CUDA\n";
        return 0;
      default:
        out_ += py_repr(row_to_pyvalue(snap_, r));
        out_ += '\n';
        return 0;
    }
  }

 private:
  void alloc(int64_t addr, int64_t size) {
    std::string n = name_of(next_name_++);
    std::string sname;
    int64_t offset;
    int64_t owner = intervals_.find(addr);
    if (owner >= 0) {
      sname = interval_info_[owner].first;
      offset = addr - interval_info_[owner].second;
    } else if ((owner = seg_index_.find(addr)) >= 0) {
      sname = "seg_" + std::to_string(owner);
      offset = addr - snap_.segments[owner].address;
    } else {
      sname = "MEM";
      offset = addr;
    }
    out_ += n + " = " + sname + '[' + std::to_string(offset) + ':' +
            format_size(static_cast<double>(size)) + "]\n";
    alloc_name_[addr] = std::move(n);
  }

  void segment_alloc(int64_t addr, int64_t size) {
    std::string n = name_of(next_name_++);
    out_ += n + " = cudaMalloc(" + std::to_string(addr) + ", " +
            format_size(static_cast<double>(size)) + ")\n";
    intervals_.add(addr, size, static_cast<uint32_t>(interval_info_.size()));
    interval_info_.emplace_back(n, addr);
    seg_name_[addr] = std::move(n);
  }

  // The name an allocation at addr was given, or the bare address.
  std::string alloc_called(int64_t addr) const {
    auto it = alloc_name_.find(addr);
    return it != alloc_name_.end() ? it->second : std::to_string(addr);
  }

  const Snapshot& snap_;
  const FirstIntervalIndex& seg_index_;
  std::string& out_;
  FirstIntervalIndex intervals_;
  std::vector<std::pair<std::string, int64_t>> interval_info_;  // name, start
  std::unordered_map<int64_t, std::string> alloc_name_, seg_name_;
  uint64_t next_name_ = 0;
};

}  // namespace

std::string trace_text(const Snapshot& snap) {
  std::string out;
  FirstIntervalIndex seg_index = segment_index(snap);
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    if (begin == end) continue;
    out += "Device " + std::to_string(d) + " ----------------\n";
    out += std::to_string(end - begin) + " entries\n";
    DeviceLog log(snap, seg_index, out);
    // TOTAL MEM is torch's quirk: the last entry's index plus what that entry
    // alone added.
    int64_t count = 0;
    for (uint32_t r = begin; r < end; ++r) count = static_cast<int64_t>(r - begin) + log.line(r);
    out += "TOTAL MEM: " + format_size(static_cast<double>(count));
  }
  return out;
}

}  // namespace memsight
