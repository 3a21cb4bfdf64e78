// read_profile_trace: one pass over a torch.profiler Chrome trace, keeping a
// few numbers per event of the kinds the report needs (docs/formats.md,
// "torch.profiler traces"). Everything else is skipped without being built.
#include <functional>
#include <string>

#include "memsight/error.h"
#include "memsight/profile.h"
#include "pickle/source.h"
#include "profile/json_stream.h"

namespace memsight {
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

int64_t int_or(json::Reader& r, int64_t fallback) {
  if (r.peek() == json::Kind::Number) return static_cast<int64_t>(r.number());
  r.skip();
  return fallback;
}

struct Event {
  Cat cat = Cat::Other;
  bool memory = false;
  int64_t tid = 0;
  double ts = 0, dur = 0;
  std::string name;
  // args
  int64_t py_id = -1, py_parent = -1, correlation = -1, device = -1, device_type = -1;
  int64_t bytes = 0, addr = 0, total_allocated = 0, total_reserved = 0;
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
      e.total_allocated = int_or(r, 0);
    else if (key == "Total Reserved")
      e.total_reserved = int_or(r, 0);
    else if (key == "Bytes")
      e.bytes = int_or(r, 0);
    else if (key == "Addr")
      e.addr = int_or(r, 0);
    else if (key == "Device Id" || key == "device")
      e.device = int_or(r, -1);
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
          if (r.peek() == json::Kind::String)
            e.cat = category(r.string_view());
          else
            r.skip();
          continue;
        }
        break;
      case 'n':
        if (k == "name") {
          if (r.peek() == json::Kind::String)
            e.name.assign(r.string_view());
          else
            r.scalar_text(e.name);
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
      if (e.name == "[memory]")
        t.mems.push_back({e.tid, e.ts, e.bytes, e.addr, e.total_allocated, e.total_reserved,
                          e.device_type == 1 ? static_cast<int>(e.device) : -1});
      break;
    case Cat::Kernel:
      t.kernels.push_back(
          {e.ts, e.dur, t.names.intern(e.name), e.correlation, static_cast<int>(e.device)});
      break;
    case Cat::Launch:
      if (e.correlation >= 0) t.launches.emplace_back(e.correlation, e.ts);
      break;
    default:
      break;
  }
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

void read_events(json::Reader& r, ProfileTrace& t, std::string& tmp) {
  if (r.peek() != json::Kind::Array)
    throw Error("not a torch.profiler trace: traceEvents is not a list");
  r.begin_array();
  Event e;
  while (r.next_item()) read_event(r, t, e, tmp);
}

}  // namespace

ProfileTrace read_profile_trace(const std::string& path) {
  auto src = open_source(path);
  json::Reader r(*src);
  ProfileTrace t;
  std::string key, tmp;
  bool events = false;
  json::Kind top = r.peek();
  if (top == json::Kind::Array) {  // a bare event list is a valid Chrome trace too
    read_events(r, t, tmp);
    events = true;
  } else if (top == json::Kind::Object) {
    r.begin_object();
    while (r.next_key(key)) {
      if (key == "traceEvents") {
        read_events(r, t, tmp);
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

}  // namespace memsight
