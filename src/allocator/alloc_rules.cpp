// torch's allocator settings and sizing rules (see alloc_rules.h).
#include "allocator/alloc_rules.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "memsight/error.h"
#include "util/float_chars.h"

namespace memsight::alloc {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// torch's lexer: ',', ':', '[' and ']' are tokens of their own; spaces vanish.
std::vector<std::string> tokens(std::string_view conf) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : conf) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
      out.emplace_back(1, c);
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

int64_t to_int(const std::string& key, const std::string& v) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < 0)
    throw Error("allocator setting " + key + ": '" + v + "' is not a whole number");
  return x;
}

double to_double(const std::string& key, const std::string& v) {
  double x = 0;
  if (!parse_double(v, x) || !std::isfinite(x))
    throw Error("allocator setting " + key + ": '" + v + "' is not a number");
  return x;
}

bool power_of_two(int64_t v) { return v > 0 && std::has_single_bit(static_cast<uint64_t>(v)); }

// Interval of roundup_power2_divisions for a size in MiB (1 -> 0, 2 -> 1, ...).
int interval_of_mib(int64_t mib) {
  return std::clamp(static_cast<int>(std::bit_width(static_cast<uint64_t>(mib))) - 1, 0,
                    kDivisionIntervals - 1);
}

}  // namespace

namespace {

// A recorded number as the snapshot holds it, for saying why it was ignored.
std::string value_text(const PyValue& v) {
  if (v.kind == PyValue::Kind::Int) return std::to_string(v.i);
  if (v.kind != PyValue::Kind::Float) return "(not a number)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v.f);
  return buf;
}

// Reads the recorded numbers, keeping only what torch could have run with.
struct RecordedReader {
  Settings& c;
  std::vector<std::string>* ignored;
  void ignore(const std::string& key, const PyValue& v, const char* why) const {
    if (ignored) ignored->push_back(key + " " + value_text(v) + ": " + why);
  }
  void max_split_size(const PyValue& v) const {
    // torch writes -1 (SIZE_MAX) or 0 when it is not set.
    if (v.kind == PyValue::Kind::Int && (v.i == -1 || v.i == 0)) return;
    if (v.kind != PyValue::Kind::Int || v.i < kLargeBuffer)
      return ignore("max_split_size", v, "not a size of at least 20 MiB (torch refuses less)");
    c.max_split_size = v.i;
  }
  void gc_threshold(const PyValue& v) const {
    double f = v.kind == PyValue::Kind::Float ? v.f
               : v.kind == PyValue::Kind::Int ? static_cast<double>(v.i)
                                              : -1;
    if (f == 0) return;  // not set
    if (!(f > 0 && f < 1)) return ignore("garbage_collection_threshold", v, "not in (0.0, 1.0)");
    c.gc_threshold = f;
  }
  void divisions(const PyValue& v) const {
    using K = PyValue::Kind;
    for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
      const PyValue &k = v.items[i], &val = v.items[i + 1];
      if (k.kind != K::Str) continue;
      int64_t mib = 0;
      for (char ch : k.s) mib = ch >= '0' && ch <= '9' && mib >= 0 ? mib * 10 + (ch - '0') : -1;
      if (!power_of_two(mib)) continue;
      if (val.kind != K::Int || (val.i != 0 && !power_of_two(val.i))) {
        ignore("roundup_power2_divisions[" + std::string(std::string_view(k.s)) + "]", val,
               "not 0 or a power of 2");
        continue;
      }
      c.divisions[interval_of_mib(mib)] = val.i;
    }
  }
};

}  // namespace

Settings Settings::recorded(const Snapshot& snap, std::vector<std::string>* ignored) {
  Settings c;
  const PyValue* st = snap.top("allocator_settings");
  if (!st) return c;
  using K = PyValue::Kind;
  const RecordedReader read{c, ignored};
  if (const PyValue* v = st->get("max_split_size")) read.max_split_size(*v);
  // Not a field of its own: only the configuration string says it.
  if (const PyValue* v = st->get("PYTORCH_CUDA_ALLOC_CONF"); v && v->kind == K::Str) {
    constexpr std::string_view kKey = "max_non_split_rounding_mb:";
    const std::string& conf = v->s;
    if (size_t at = conf.find(kKey); at != std::string::npos) {
      int64_t mb = 0;
      for (size_t i = at + kKey.size(); i < conf.size() && conf[i] >= '0' && conf[i] <= '9'; ++i)
        mb = std::min<int64_t>(mb * 10 + (conf[i] - '0'), kNoLimit / kMiB);
      if (mb >= kLargeBuffer / kMiB) c.max_non_split_rounding = mb * kMiB;
    }
  }
  if (const PyValue* v = st->get("expandable_segments"); v && v->kind == K::Bool)
    c.expandable_segments = v->b;
  if (const PyValue* v = st->get("garbage_collection_threshold")) read.gc_threshold(*v);
  if (const PyValue* v = st->get("roundup_power2_divisions"); v && v->kind == K::Dict)
    read.divisions(*v);
  c.rounds_up =
      std::any_of(std::begin(c.divisions), std::end(c.divisions), [](int64_t d) { return d > 1; });
  return c;
}

void Settings::apply(std::string_view conf) {
  std::vector<std::string> t = tokens(conf);
  struct Finish {  // whatever the way out
    Settings& s;
    ~Finish() {
      s.rounds_up = std::any_of(std::begin(s.divisions), std::end(s.divisions),
                                [](int64_t d) { return d > 1; });
    }
  } finish{*this};
  auto value_of = [&](size_t& i) -> const std::string& {
    if (i + 2 >= t.size() || t[i + 1] != ":")
      throw Error("allocator setting " + t[i] + " needs a value (" + t[i] + ":VALUE)");
    i += 2;
    return t[i];
  };
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string key = t[i];
    if (key == ",") continue;
    if (key == ":" || key == "[" || key == "]")
      throw Error("allocator settings '" + std::string(conf) + "': expected KEY:VALUE, found '" +
                  key + "' without a key before it");
    if (key == "defaults") {  // start again from torch's defaults
      if (i + 1 < t.size() && t[i + 1] != ",")
        throw Error(
            "allocator setting 'defaults' takes no value: give it alone, as in "
            "defaults,max_split_size_mb:128");
      *this = Settings{};
    } else if (key == "expandable_segments") {
      const std::string& v = value_of(i);
      if (v != "True" && v != "False")
        throw Error("allocator setting expandable_segments takes True or False, not '" + v + "'");
      expandable_segments = v == "True";
    } else if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      int64_t mb = to_int(key, value_of(i));
      if (mb < kLargeBuffer / kMiB)
        throw Error("allocator setting " + key + ":" + t[i] +
                    ": it must be at least 20 (torch refuses less)");
      int64_t bytes = mb > kNoLimit / kMiB ? kNoLimit : mb * kMiB;
      (key == "max_split_size_mb" ? max_split_size : max_non_split_rounding) = bytes;
    } else if (key == "garbage_collection_threshold") {
      double v = to_double(key, value_of(i));
      if (!(v > 0 && v < 1))
        throw Error("allocator setting garbage_collection_threshold:" + t[i] +
                    ": it must be in (0.0, 1.0), both ends excluded");
      gc_threshold = v;
    } else if (key == "per_process_memory_fraction") {
      double v = to_double(key, value_of(i));
      if (!(v > 0 && v <= 1))
        throw Error("allocator setting per_process_memory_fraction:" + t[i] +
                    ": it must be in (0.0, 1.0]");
      memory_fraction = v;
    } else if (key == "roundup_power2_divisions") {
      value_of(i);
      if (t[i] != "[") {
        int64_t d = to_int(key, t[i]);
        if (d != 0 && !power_of_two(d))
          throw Error("allocator setting roundup_power2_divisions must be a power of 2");
        std::fill(std::begin(divisions), std::end(divisions), d);
        continue;
      }
      // [MiB:divisions,...,>:divisions]: the first fills the intervals below it,
      // '>' those from the last one named (torch's parse).
      bool first = true;
      int last = 0;
      while (++i < t.size() && t[i] != "]") {
        if (t[i] == ",") continue;
        std::string at = t[i];
        if (i + 2 >= t.size() || t[i + 1] != ":")
          throw Error("allocator setting roundup_power2_divisions: expected MiB:divisions");
        i += 2;
        int64_t d = to_int(key, t[i]);
        if (d != 0 && !power_of_two(d))
          throw Error("allocator setting roundup_power2_divisions must be powers of 2");
        if (at == ">") {
          std::fill(divisions + last, std::end(divisions), d);
          continue;
        }
        int64_t mib = to_int(key, at);
        if (!power_of_two(mib))
          throw Error("allocator setting roundup_power2_divisions: intervals are powers of 2 MiB");
        int idx = interval_of_mib(mib);
        if (first) std::fill(divisions, divisions + idx, d);
        first = false;
        divisions[idx] = d;
        last = idx;
      }
      if (i >= t.size()) throw Error("allocator setting roundup_power2_divisions: missing ']'");
    } else if (key == "backend") {
      const std::string& v = value_of(i);
      if (v != "native")
        throw Error("backend:" + v + " is another allocator; memsight simulates the native one");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "pinned_reserve_segment_size_mb" ||
               key == "graph_capture_record_stream_reuse") {
      value_of(i);  // no effect on where device memory goes
    } else {
      throw Error("unknown allocator setting '" + key +
                  "' (expandable_segments, max_split_size_mb, max_non_split_rounding_mb, "
                  "garbage_collection_threshold, roundup_power2_divisions, "
                  "per_process_memory_fraction, defaults)");
    }
  }
}

std::string Settings::conf() const {
  Settings d;
  std::vector<std::string> parts;
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (expandable_segments) parts.push_back("expandable_segments:True");
  if (max_split_size != d.max_split_size)
    parts.push_back("max_split_size_mb:" + std::to_string(max_split_size / kMiB));
  if (max_non_split_rounding != d.max_non_split_rounding)
    parts.push_back("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding / kMiB));
  if (gc_threshold > 0) parts.push_back("garbage_collection_threshold:" + num(gc_threshold));
  if (!std::equal(std::begin(divisions), std::end(divisions), std::begin(d.divisions))) {
    if (std::all_of(std::begin(divisions), std::end(divisions),
                    [&](int64_t v) { return v == divisions[0]; })) {
      parts.push_back("roundup_power2_divisions:" + std::to_string(divisions[0]));
    } else {
      std::string s = "roundup_power2_divisions:[";
      for (int i = 0; i < kDivisionIntervals; ++i)
        s += (i ? "," : "") + std::to_string(int64_t{1} << i) + ":" + std::to_string(divisions[i]);
      parts.push_back(s + "]");
    }
  }
  if (memory_fraction > 0) parts.push_back("per_process_memory_fraction:" + num(memory_fraction));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

bool Settings::operator==(const Settings& o) const {
  return max_split_size == o.max_split_size && max_non_split_rounding == o.max_non_split_rounding &&
         expandable_segments == o.expandable_segments && gc_threshold == o.gc_threshold &&
         std::equal(std::begin(divisions), std::end(divisions), std::begin(o.divisions)) &&
         memory_fraction == o.memory_fraction;
}

int64_t round_power2_divisions(const Settings& s, int64_t size) {
  auto u = static_cast<uint64_t>(size);
  // Intervals start at 1 MiB (index 0); sizes of 32 GiB and more share the last.
  int idx = std::clamp(static_cast<int>(std::bit_width(u)) - 1 - 20, 0, kDivisionIntervals - 1);
  int64_t div = s.divisions[idx];
  if (div > 1 && size > kMinBlockSize * div) {
    if (std::has_single_bit(u)) return size;
    uint64_t floor = std::bit_floor(u);
    uint64_t step = floor >> (std::bit_width(static_cast<uint64_t>(div)) - 1);
    if (step == 0) return static_cast<int64_t>(floor << 1);
    uint64_t down = u & ~(step - 1);
    return static_cast<int64_t>(down == u ? u : down + step);
  }
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t allocation_size(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool may_serve(const Settings& s, int64_t size, int64_t block_size) {
  // No oversize block for a request below max_split_size; an oversize
  // request takes an oversize block only up to max_non_split_rounding more.
  if (size < s.max_split_size && block_size >= s.max_split_size) return false;
  if (size >= s.max_split_size && block_size >= size + s.max_non_split_rounding) return false;
  return true;
}

}  // namespace memsight::alloc
