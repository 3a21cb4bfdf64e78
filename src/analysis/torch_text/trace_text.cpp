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

}  // namespace

std::string trace_text(const Snapshot& snap) {
  std::string out;
  // Fallback lookup over the snapshot's segments (all devices), extent
  // allocated_size, named seg_<index>.
  FirstIntervalIndex seg_index;
  for (size_t i = 0; i < snap.segments.size(); ++i)
    seg_index.add(snap.segments[i].address, snap.segments[i].allocated_size,
                  static_cast<uint32_t>(i));
  const TraceTable& t = snap.trace;
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    if (begin == end) continue;
    out += "Device " + std::to_string(d) + " ----------------\n";
    out += std::to_string(end - begin) + " entries\n";
    FirstIntervalIndex intervals;
    std::vector<std::pair<std::string, int64_t>> interval_info;  // name, start
    std::unordered_map<int64_t, std::string> alloc_name, seg_name;
    uint64_t next_name = 0;
    int64_t count = 0;
    for (uint32_t r = begin; r < end; ++r) {
      count = static_cast<int64_t>(r - begin);
      int64_t addr = t.addr[r], size = t.size[r];
      switch (t.action[r]) {
        case Action::Alloc: {
          std::string n = name_of(next_name++);
          std::string sname;
          int64_t offset;
          int64_t owner = intervals.find(addr);
          if (owner >= 0) {
            sname = interval_info[owner].first;
            offset = addr - interval_info[owner].second;
          } else if ((owner = seg_index.find(addr)) >= 0) {
            sname = "seg_" + std::to_string(owner);
            offset = addr - snap.segments[owner].address;
          } else {
            sname = "MEM";
            offset = addr;
          }
          out += n + " = " + sname + '[' + std::to_string(offset) + ':' +
                 format_size(static_cast<double>(size)) + "]\n";
          alloc_name[addr] = std::move(n);
          count += size;
          break;
        }
        case Action::FreeRequested:
        case Action::FreeCompleted: {
          auto it = alloc_name.find(addr);
          std::string name = it != alloc_name.end() ? it->second : std::to_string(addr);
          if (t.action[r] == Action::FreeRequested) {
            out += "del " + name + " # " + format_size(static_cast<double>(size)) + '\n';
          } else {
            count -= size;
            out += "# free completed for " + name + ' ' + format_size(static_cast<double>(size)) +
                   '\n';
          }
          break;
        }
        case Action::SegmentAlloc: {
          std::string n = name_of(next_name++);
          out += n + " = cudaMalloc(" + std::to_string(addr) + ", " +
                 format_size(static_cast<double>(size)) + ")\n";
          intervals.add(addr, size, static_cast<uint32_t>(interval_info.size()));
          interval_info.emplace_back(n, addr);
          seg_name[addr] = std::move(n);
          break;
        }
        case Action::SegmentFree: {
          auto it = seg_name.find(addr);
          std::string name = it != seg_name.end() ? it->second : std::to_string(addr);
          out += "cudaFree(" + name + ") # " + format_size(static_cast<double>(size)) + '\n';
          break;
        }
        case Action::Oom:
          out += "raise OutOfMemoryError # " + format_size(static_cast<double>(size)) +
                 " requested, " + format_size(static_cast<double>(addr)) + " free in CUDA\n";
          break;
        default:
          out += py_repr(row_to_pyvalue(snap, r));
          out += '\n';
          break;
      }
    }
    out += "TOTAL MEM: " + format_size(static_cast<double>(count));
  }
  return out;
}

}  // namespace memsight
