// read_profile_trace: one pass over a torch.profiler Chrome trace, keeping a
// few numbers per event of the kinds the report needs (docs/formats.md,
// "torch.profiler traces"). Everything else is skipped without being built.
#include "profile/trace_reader.h"

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "input/input_kind.h"
#include "input/json_stream.h"
#include "input/source.h"
#include "memsight/error.h"
#include "memsight/input_limits.h"
#include "memsight/profile.h"
#include "util/parallel.h"

namespace memsight {

namespace profile_stats {
std::atomic<uint64_t> parts_taken{0};
}  // namespace profile_stats

namespace {

enum class Cat { Other, CpuOp, Annotation, Python, Instant, Kernel, Launch };

Cat category(std::string_view c) {
  if (c == "cpu_op") return Cat::CpuOp;
  if (c == "user_annotation") return Cat::Annotation;
  if (c == "python_function") return Cat::Python;
  if (c == "cpu_instant_event") return Cat::Instant;
  if (c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset") return Cat::Kernel;
  if (c == "cuda_runtime" || c == "cuda_driver") return Cat::Launch;
  return Cat::Other;
}

// A thread id: a number, or (Perfetto-style) a name, kept apart as negative.
int64_t thread_id(json::Reader& r, std::string& tmp) {
  if (r.peek() == json::Kind::Number) return r.integer();
  r.scalar_text(tmp);
  return -2 - static_cast<int64_t>(std::hash<std::string>{}(tmp)&0xFFFFFF);
}

// Records dropped for a number out of range (memsight/input_limits.h).
constexpr InputReason kBadTime{"event", "events",
                               "dropped: a time (ts) that is not a number of magnitude below 2^53 "
                               "\xC2\xB5s"};
constexpr InputReason kBadDuration{
    "event", "events",
    "dropped: a duration (dur) that is negative, not a number, or 2^53 \xC2\xB5s (285 years) or "
    "more"};
constexpr InputReason kBadBytes{
    "[memory] event", "[memory] events",
    "dropped: a byte count (Bytes, Total Allocated, Total Reserved) that is not an integer of "
    "magnitude below 2^53 (8 PiB), or a negative total"};
constexpr InputReason kBadAddr{"[memory] event", "[memory] events",
                               "dropped: an address (Addr) that is not an integer in 0..2^64"};
constexpr InputReason kBadDevice{"[memory] event", "[memory] events",
                                 "dropped: a CUDA device id outside 0..2^31-1"};

// A number, or `fallback` for anything else (null, a string, an object).
double number_or(json::Reader& r, double fallback) {
  if (r.peek() != json::Kind::Number) {
    r.skip();
    return fallback;
  }
  return r.number();
}

// A number as an integer, or `fallback` for anything else (null, a string,
// a number out of int64's range).
int64_t int_or(json::Reader& r, int64_t fallback) {
  if (r.peek() != json::Kind::Number) {
    r.skip();
    return fallback;
  }
  double v = r.number();
  return std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : fallback;
}

struct Event {
  Cat cat = Cat::Other;
  bool has_cat = false;
  int64_t tid = 0;
  double ts = 0, dur = 0;
  std::string name;
  // args
  int64_t py_id = -1, py_parent = -1, correlation = -1, device_type = -1;
  // Range-checked when the event is kept (a [memory] event's).
  double device = -1, bytes = 0, addr = 0, total_allocated = 0, total_reserved = 0;
};

void read_args(json::Reader& r, Event& e) {
  if (r.peek() != json::Kind::Object) {
    r.skip();
    return;
  }
  r.begin_object();
  std::string_view key;
  while (r.next_key_view(key)) {
    if (key == "Total Allocated")
      e.total_allocated = number_or(r, 0);
    else if (key == "Total Reserved")
      e.total_reserved = number_or(r, 0);
    else if (key == "Bytes")
      e.bytes = number_or(r, 0);
    else if (key == "Addr")
      e.addr = number_or(r, 0);
    else if (key == "Device Id" || key == "device")
      e.device = number_or(r, -1);
    else if (key == "Device Type")
      e.device_type = int_or(r, -1);
    else if (key == "Python id")
      e.py_id = int_or(r, -1);
    else if (key == "Python parent id")
      e.py_parent = int_or(r, -1);
    else if (key == "correlation")
      e.correlation = int_or(r, -1);
    else
      r.skip();
  }
}

// A [memory] event, kept when its numbers are in range.
void file_memory(ProfileTrace& t, const Event& e) {
  bool cuda = e.device_type == 1;
  if (!byte_change_ok(e.bytes) || !byte_count_ok(e.total_allocated) ||
      !byte_count_ok(e.total_reserved))
    t.notes.add(kBadBytes);
  else if (!(e.addr >= 0 && e.addr < 18446744073709551616.0) || e.addr != std::floor(e.addr))
    t.notes.add(kBadAddr);
  else if (cuda && !(e.device >= 0 && e.device < 2147483648.0))
    t.notes.add(kBadDevice);
  else  // an address above 2^63 keeps its bits, as the int64 it is in C++
    t.mems.push_back({e.tid, e.ts, static_cast<int64_t>(e.bytes),
                      static_cast<int64_t>(static_cast<uint64_t>(e.addr)),
                      static_cast<int64_t>(e.total_allocated),
                      static_cast<int64_t>(e.total_reserved),
                      cuda ? static_cast<int>(e.device) : -1});
}

// An event read: into the list of its category, or a note when a number is
// out of range; events of other categories are dropped.
void file_event(ProfileTrace& t, Event& e) {
  // torch.profiler without Kineto (the legacy exporter) writes no "cat":
  // its steps and ops are plain duration events.
  if (!e.has_cat && e.dur > 0)
    e.cat = e.name.starts_with("ProfilerStep#") ? Cat::Annotation : Cat::CpuOp;
  if (e.cat == Cat::Other) return;
  if (!time_ok(e.ts)) return t.notes.add(kBadTime);
  if (e.cat != Cat::Instant && e.cat != Cat::Launch && !duration_ok(e.dur))
    return t.notes.add(kBadDuration);
  switch (e.cat) {
    case Cat::CpuOp:
      t.ops.push_back({e.tid, e.ts, e.dur, t.names.intern(e.name)});
      break;
    case Cat::Annotation:
      t.annotations.push_back({e.tid, e.ts, e.dur, t.names.intern(e.name)});
      break;
    case Cat::Python:
      t.pycalls.push_back({e.tid, e.ts, e.dur, t.names.intern(e.name), e.py_id, e.py_parent});
      break;
    case Cat::Instant:
      if (e.name == "[memory]") file_memory(t, e);
      break;
    case Cat::Kernel: {
      bool known = e.device >= 0 && e.device < 2147483648.0;
      t.kernels.push_back({e.ts, e.dur, t.names.intern(e.name), e.correlation,
                           known ? static_cast<int>(e.device) : -1});
      break;
    }
    case Cat::Launch:
      if (e.correlation >= 0) t.launches.emplace_back(e.correlation, e.ts);
      break;
    default:
      break;
  }
}

// One event: its fields by a switch on the key's first letter, kept inline
// (every event of the trace passes here), then its filing.
void read_event(json::Reader& r, ProfileTrace& t, Event& e, std::string& tmp) {
  e = Event{};
  if (r.peek() != json::Kind::Object) {
    r.skip();
    return;
  }
  r.begin_object();
  std::string_view k;
  while (r.next_key_view(k)) {
    switch (k.size() ? k[0] : 0) {
      case 'c':
        if (k == "cat") {
          e.has_cat = true;
          if (r.peek() == json::Kind::String)
            e.cat = category(r.string_view());
          else
            r.skip();
          continue;
        }
        break;
      case 'n':
        if (k == "name") {
          if (r.peek() == json::Kind::String) {
            e.name = cut_name(r.string_view());
          } else {
            r.scalar_text(e.name);
            if (e.name.size() > kNameLimit) e.name = cut_name(e.name);
          }
          continue;
        }
        break;
      case 't':
        if (k == "ts") {
          e.ts = r.peek() == json::Kind::Number ? r.number() : (r.skip(), 0.0);
          continue;
        }
        if (k == "tid") {
          e.tid = thread_id(r, tmp);
          continue;
        }
        break;
      case 'd':
        if (k == "dur") {
          e.dur = r.peek() == json::Kind::Number ? r.number() : (r.skip(), 0.0);
          continue;
        }
        break;
      case 'a':
        if (k == "args") {
          read_args(r, e);
          continue;
        }
        break;
      default:
        break;
    }
    r.skip();
  }
  ++t.events;
  file_event(t, e);
}

void read_device_properties(json::Reader& r, ProfileTrace& t, std::string& key, std::string& tmp) {
  if (r.peek() != json::Kind::Array) {
    r.skip();
    return;
  }
  r.begin_array();
  while (r.next_item()) {
    if (r.peek() != json::Kind::Object) {
      r.skip();
      continue;
    }
    r.begin_object();
    int64_t id = -1;
    std::string name;
    while (r.next_key(key)) {
      if (key == "id")
        id = int_or(r, -1);
      else if (key == "name")
        r.scalar_text(name);
      else
        r.skip();
    }
    if (id >= 0 && id < 1024) {
      if (t.device_names.size() <= static_cast<size_t>(id)) t.device_names.resize(id + 1);
      t.device_names[static_cast<size_t>(id)] = name;
    }
  }
  (void)tmp;
}

// Items of the event list from the reader's position until the item that
// starts at or after `stop` (not read). Returns where that item starts, or
// npos when the list ended first.
size_t read_events_until(json::Reader& r, ProfileTrace& t, size_t stop) {
  Event e;
  std::string tmp;
  for (;;) {
    size_t at = r.next_item_at();
    if (at == std::string_view::npos || at >= stop) return at;
    read_event(r, t, e, tmp);
  }
}

// A likely item start at or after `from`: a '{' after a ',' after a '}'
// (white space aside). It may lie inside a string; the reading checks.
size_t candidate(std::string_view d, size_t from) {
  for (size_t i = d.find('{', from); i != std::string_view::npos; i = d.find('{', i + 1)) {
    size_t j = i;
    while (j > from &&
           (d[j - 1] == ' ' || d[j - 1] == '\n' || d[j - 1] == '\r' || d[j - 1] == '\t'))
      --j;
    if (j == from || d[j - 1] != ',') continue;
    --j;
    while (j > from &&
           (d[j - 1] == ' ' || d[j - 1] == '\n' || d[j - 1] == '\r' || d[j - 1] == '\t'))
      --j;
    if (j > from && d[j - 1] == '}') return i;
  }
  return std::string_view::npos;
}

void append(ProfileTrace& t, ProfileTrace&& part) {
  std::vector<StrId> id(part.names.size());
  for (StrId i = 0; i < part.names.size(); ++i) id[i] = t.names.intern(part.names.get(i));
  for (auto& o : part.ops) t.ops.push_back({o.tid, o.ts, o.dur, id[o.name]});
  for (auto& o : part.annotations) t.annotations.push_back({o.tid, o.ts, o.dur, id[o.name]});
  for (auto& p : part.pycalls)
    t.pycalls.push_back({p.tid, p.ts, p.dur, id[p.name], p.id, p.parent});
  for (auto& k : part.kernels)
    t.kernels.push_back({k.ts, k.dur, id[k.name], k.correlation, k.device});
  t.mems.insert(t.mems.end(), part.mems.begin(), part.mems.end());
  t.launches.insert(t.launches.end(), part.launches.begin(), part.launches.end());
  t.events += part.events;
  t.notes.merge(part.notes);
}

// The event list of a big mapped trace, on several threads: the list is cut
// at likely item starts; each thread reads from its cut to the next. The
// main thread reads the first part, and takes a thread's part when it lands
// exactly on that thread's cut (then the cut was a real item start);
// otherwise it reads that part itself. The result is the one-thread read's.
void read_events(json::Reader& r, ByteSource& src, ProfileTrace& t) {
  if (r.peek() != json::Kind::Array)
    throw Error("not a torch.profiler trace: traceEvents is not a list");
  r.begin_array();
  std::string_view d = r.input();
  size_t start = static_cast<size_t>(r.offset());
  size_t threads = std::min<size_t>(threads_allowed(), 32);
  constexpr size_t kMinShare = 8 << 20;
  if (!r.mapped() || threads < 2 || d.size() - start < 2 * kMinShare) {
    read_events_until(r, t, std::string_view::npos);
    return;
  }
  threads = std::min(threads, (d.size() - start) / kMinShare);
  std::vector<size_t> cuts{start};
  for (size_t k = 1; k < threads; ++k) {
    size_t c = candidate(d, std::max(cuts.back() + 1, start + (d.size() - start) * k / threads));
    if (c == std::string_view::npos) break;
    cuts.push_back(c);
  }
  cuts.push_back(std::string_view::npos);
  struct Part {
    ProfileTrace trace;
    size_t end = 0;    // where it stopped: the next cut, past it, or npos (list ended)
    size_t after = 0;  // with end == npos: the offset just after the list's ']'
    bool ok = false;   // read without an error
  };
  std::vector<Part> parts(cuts.size() - 1);
  std::vector<std::thread> pool;
  for (size_t k = 1; k + 1 < cuts.size(); ++k)
    pool.emplace_back([&, k] {
      try {
        json::Reader w(src);
        w.enter_array_at(cuts[k]);
        parts[k].end = read_events_until(w, parts[k].trace, cuts[k + 1]);
        parts[k].after = static_cast<size_t>(w.offset());
        parts[k].ok = true;
      } catch (...) {  // a cut inside a string, or bad input: the main thread reads it
      }
    });
  size_t at = read_events_until(r, t, cuts[1]);
  for (size_t k = 1; k + 1 < cuts.size() && at != std::string_view::npos; ++k) {
    pool[k - 1].join();
    if (at == cuts[k] && parts[k].ok) {
      append(t, std::move(parts[k].trace));
      parts[k].trace = ProfileTrace{};  // its columns are copied: give the memory back now
      ++profile_stats::parts_taken;
      at = parts[k].end;
      if (at == std::string_view::npos)
        r.leave_array_at(parts[k].after);
      else
        r.seek_item(at);
      continue;
    }
    if (at > cuts[k + 1]) continue;  // the main thread is already past this part
    r.seek_item(at);
    at = read_events_until(r, t, cuts[k + 1]);
  }
  for (auto& th : pool)
    if (th.joinable()) th.join();
  if (at != std::string_view::npos) {  // past the last cut
    r.seek_item(at);
    read_events_until(r, t, std::string_view::npos);
  }
}

ProfileTrace read_trace(ByteSource& src) {
  json::Reader r(src);
  ProfileTrace t;
  std::string key, tmp;
  bool events = false;
  json::Kind top = r.peek();
  if (top == json::Kind::Array) {  // a bare event list is a valid Chrome trace too
    read_events(r, src, t);
    events = true;
  } else if (top == json::Kind::Object) {
    r.begin_object();
    while (r.next_key(key)) {
      if (key == "traceEvents") {
        read_events(r, src, t);
        events = true;
      } else if (key == "deviceProperties") {
        read_device_properties(r, t, key, tmp);
      } else if (key == "with_stack" || key == "profile_memory" || key == "record_shapes") {
        bool on = int_or(r, 0) != 0;
        (key == "with_stack"       ? t.with_stack
         : key == "profile_memory" ? t.profile_memory
                                   : t.record_shapes) = on;
      } else if (key == "distributedInfo" && r.peek() == json::Kind::Object) {
        r.begin_object();
        while (r.next_key(key))
          if (key == "rank")
            t.rank = static_cast<int>(int_or(r, -1));
          else
            r.skip();
      } else {
        r.skip();
      }
    }
  } else {
    throw Error("not a torch.profiler trace: the JSON is not an object or a list of events");
  }
  r.finish();
  if (!events) throw Error("not a torch.profiler trace: no traceEvents");
  return t;
}

}  // namespace

ProfileTrace read_profile_trace(const std::string& path) {
  return read_named(path, [&] { return read_trace(*open_input(path, InputKind::ProfilerTrace)); });
}

}  // namespace memsight
