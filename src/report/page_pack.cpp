#include "report/page_pack.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "memsight/error.h"
#include "util/json_writer.h"

namespace memsight::report {
namespace {

template <class T, class In>
std::string narrow(std::span<const In> v) {
  std::string out(v.size() * sizeof(T), '\0');
  T* p = reinterpret_cast<T*>(out.data());
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(static_cast<int64_t>(v[i]));
  return out;
}

}  // namespace

void PagePacker::add(const std::string& name, const char* type, size_t count, std::string bytes) {
  size_t at = store(std::move(bytes));
  entry(name, {type, static_cast<int64_t>(at), static_cast<int64_t>(count)});
}

namespace {

// The narrowest plain type holding [lo, hi].
const char* plain_type(int64_t lo, int64_t hi) {
  if (lo >= 0 && hi <= 0xff) return "u8";
  if (lo >= -128 && hi <= 127) return "i8";
  if (lo >= 0 && hi <= 0xffff) return "u16";
  if (lo >= -32768 && hi <= 32767) return "i16";
  if (lo >= 0 && hi <= 0xffffffffll) return "u32";
  if (lo >= std::numeric_limits<int32_t>::min() && hi <= std::numeric_limits<int32_t>::max())
    return "i32";
  return "f64";
}

size_t type_size(std::string_view t) {
  return t == "f64" ? 8 : (t == "u32" || t == "i32") ? 4 : (t == "u16" || t == "i16") ? 2 : 1;
}

template <class In>
std::string encode(std::string_view type, std::span<const In> v) {
  if (type == "u8") return narrow<uint8_t>(v);
  if (type == "i8") return narrow<int8_t>(v);
  if (type == "u16") return narrow<uint16_t>(v);
  if (type == "i16") return narrow<int16_t>(v);
  if (type == "u32") return narrow<uint32_t>(v);
  if (type == "i32") return narrow<int32_t>(v);
  return narrow<double>(v);
}

}  // namespace

template <class T>
PagePacker::Spec PagePacker::column(std::string_view type, std::span<const T> v) {
  size_t at = store(encode(type, v));
  return {type, static_cast<int64_t>(at)};
}

size_t PagePacker::store(std::string bytes) {
  size_t at = offset_;
  bytes.resize((bytes.size() + 7) & ~size_t{7}, '\0');
  offset_ += bytes.size();
  if (sink_)
    sink_(bytes);
  else
    data_.push_back(std::move(bytes));
  return at;
}

namespace {

// Dictionary: few distinct values (addresses and sizes repeat a lot in an
// allocator's trace) stored once, rows hold small indices.
struct Dictionary {
  std::vector<int64_t> values;
  std::vector<uint16_t> index;  // indices below kMaxDict
  size_t cost = std::numeric_limits<size_t>::max();
};

template <class T>
Dictionary dictionary(std::span<const T> v, const char* plain) {
  constexpr size_t kMaxDict = 65536;
  const size_t n = v.size();
  auto at = [&](size_t i) { return static_cast<int64_t>(v[i]); };
  Dictionary dict;
  if (n >= 64 && type_size(plain) > 1) {
    std::unordered_map<int64_t, uint32_t> ids;
    ids.reserve(1024);
    dict.index.resize(n);
    for (size_t i = 0; i < n && dict.values.size() <= kMaxDict; ++i) {
      auto [it, inserted] = ids.try_emplace(at(i), static_cast<uint32_t>(dict.values.size()));
      if (inserted) dict.values.push_back(at(i));
      dict.index[i] = static_cast<uint16_t>(it->second);
    }
    if (dict.values.size() > kMaxDict) {
      dict.values.clear();
      std::vector<uint16_t>().swap(dict.index);
    }
  }
  if (!dict.values.empty())
    dict.cost = n * (dict.values.size() <= 256 ? 1 : 2) + dict.values.size() * type_size(plain);
  return dict;
}

// Small values with rare large ones (time deltas): a narrow column whose
// top value marks an exception, listed separately.
struct Exceptions {
  size_t cost = std::numeric_limits<size_t>::max();
  const char* type = nullptr;
  size_t count = 0;
};

template <class T>
Exceptions exceptions(std::span<const T> v, int64_t lo, const char* plain) {
  const size_t n = v.size();
  auto at = [&](size_t i) { return static_cast<int64_t>(v[i]); };
  Exceptions exc;
  if (lo >= 0 && type_size(plain) > 1) {
    size_t over8 = 0, over16 = 0;
    for (size_t i = 0; i < n; ++i) {
      over8 += at(i) >= 0xff;
      over16 += at(i) >= 0xffff;
    }
    size_t c8 = n + over8 * 12, c16 = 2 * n + over16 * 12;
    if (c8 <= c16) {
      exc = {c8, "u8", over8};
    } else {
      exc = {c16, "u16", over16};
    }
  }
  return exc;
}

// The narrow column (exceptions at the top value), the exceptions' rows and
// their values.
struct ExceptionColumns {
  std::vector<uint16_t> small;
  std::vector<int64_t> where, value;
};

template <class T>
ExceptionColumns split_exceptions(std::span<const T> v, const Exceptions& exc) {
  const size_t n = v.size();
  auto at = [&](size_t i) { return static_cast<int64_t>(v[i]); };
  const int64_t top = std::string_view(exc.type) == "u8" ? 0xff : 0xffff;
  ExceptionColumns c;
  c.small.resize(n);
  c.where.reserve(exc.count);
  c.value.reserve(exc.count);
  for (size_t i = 0; i < n; ++i) {
    if (at(i) >= top) {
      c.small[i] = static_cast<uint16_t>(top);
      c.where.push_back(static_cast<int64_t>(i));
      c.value.push_back(at(i));
    } else {
      c.small[i] = static_cast<uint16_t>(at(i));
    }
  }
  return c;
}

}  // namespace

// The cheapest of a constant, a dictionary, a narrow column with exceptions
// and the narrowest plain type holding every value.
template <class T>
void PagePacker::ints(const std::string& name, std::span<const T> v) {
  const size_t n = v.size();
  int64_t lo = 0, hi = 0;
  if (n) {
    auto [a, b] = std::minmax_element(v.begin(), v.end());
    lo = static_cast<int64_t>(*a);
    hi = static_cast<int64_t>(*b);
  }
  if (!n || lo == hi) return entry(name, {"const", static_cast<int64_t>(n), lo});
  const char* plain = plain_type(lo, hi);
  size_t best = n * type_size(plain);
  Dictionary dict = dictionary(v, plain);
  Exceptions exc = exceptions(v, lo, plain);

  if (dict.cost < best && dict.cost <= exc.cost) {
    // Separate statements: the order of the arrays in the blob stays fixed.
    Spec spec{"dict", static_cast<int64_t>(n)};
    Spec index_spec =
        column(dict.values.size() <= 256 ? "u8" : "u16", std::span<const uint16_t>(dict.index));
    Spec values_spec = column(plain, std::span<const int64_t>(dict.values));
    spec.insert(spec.end(), index_spec.begin(), index_spec.end());
    spec.insert(spec.end(), values_spec.begin(), values_spec.end());
    spec.push_back(static_cast<int64_t>(dict.values.size()));
    return entry(name, std::move(spec));
  }
  std::vector<uint16_t>().swap(dict.index);
  if (exc.cost < best) {
    ExceptionColumns c = split_exceptions(v, exc);
    Spec spec{"exc", static_cast<int64_t>(n)};
    for (Spec part : {column(exc.type, std::span<const uint16_t>(c.small)),
                      column("u32", std::span<const int64_t>(c.where)),
                      column("f64", std::span<const int64_t>(c.value))})
      spec.insert(spec.end(), part.begin(), part.end());
    spec.push_back(static_cast<int64_t>(exc.count));
    return entry(name, std::move(spec));
  }
  Spec spec = column(plain, v);
  spec.push_back(static_cast<int64_t>(n));
  return entry(name, std::move(spec));
}

template void PagePacker::ints(const std::string&, std::span<const int64_t>);
template void PagePacker::ints(const std::string&, std::span<const int32_t>);
template void PagePacker::ints(const std::string&, std::span<const uint32_t>);
template void PagePacker::ints(const std::string&, std::span<const uint8_t>);

void PagePacker::f64(const std::string& name, std::span<const double> v) {
  std::string bytes(v.size() * sizeof(double), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  add(name, "f64", v.size(), std::move(bytes));
}

void PagePacker::u8(const std::string& name, std::string_view bytes) {
  add(name, "u8", bytes.size(), std::string(bytes));
}

std::string PagePacker::finish(std::string_view meta_json) {
  // Written in place: the metadata of 100,000 devices is tens of megabytes.
  // The header's length is set once it is written.
  std::string out;
  out.reserve(8 + meta_json.size() + 64 * entries_.size() + 64 + (sink_ ? 0 : offset_));
  out.append("MSV1\0\0\0\0", 8);
  JsonWriter w(out);
  w.begin_object().field("v", 1).key("columns").begin_object();
  for (const auto& [name, spec] : entries_) {
    w.key(name).begin_array();
    for (const auto& item : spec) std::visit([&](auto x) { w.value(x); }, item);
    w.end_array();
  }
  w.end_object().raw_field("meta", meta_json).end_object();
  decltype(entries_)().swap(entries_);
  out.append(((out.size() + 7) & ~size_t{7}) - out.size(), ' ');  // JSON allows trailing whitespace
  const uint32_t h = static_cast<uint32_t>(out.size() - 8);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>(h >> (8 * i));
  for (auto& d : data_) {
    out += d;
    std::string().swap(d);
  }
  data_.clear();
  return out;
}

void DeviceColumns::begin_device() {
  ++devices_;
  next_ = 0;
}

DeviceColumns::Column& DeviceColumns::column(const std::string& name, bool real, size_t n) {
  // Every device packs the same columns in the same order.
  if (devices_ == 1 && next_ == columns_.size()) columns_.push_back({name, real, {}, {}, {}});
  if (next_ >= columns_.size() || columns_[next_].name != name || columns_[next_].real != real)
    throw Error("internal: device columns packed out of order (" + name + ")");
  if (n > UINT32_MAX) throw Error("html: a device's column is too long for the page");
  Column& c = columns_[next_++];
  c.lengths.push_back(static_cast<uint32_t>(n));
  return c;
}

template <class T>
void DeviceColumns::put(const std::string& name, std::vector<T> v) {
  constexpr bool real = std::is_same_v<T, double>;
  Column& c = column(name, real, v.size());
  std::vector<T>& gathered = [&]() -> std::vector<T>& {
    if constexpr (real)
      return c.reals;
    else
      return c.ints;
  }();
  if (direct_) {
    if constexpr (real)
      packer_.f64("dev." + name, v);
    else
      packer_.ints("dev." + name, v);
  } else if (gathered.empty()) {
    gathered = std::move(v);  // the first device's part, as it is
  } else {
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
}

void DeviceColumns::ints(const std::string& name, std::vector<int64_t> v) {
  put(name, std::move(v));
}
void DeviceColumns::f64(const std::string& name, std::vector<double> v) { put(name, std::move(v)); }

void DeviceColumns::finish() {
  for (Column& c : columns_) {
    if (!direct_) {
      if (c.real)
        packer_.f64("dev." + c.name, c.reals);
      else
        packer_.ints("dev." + c.name, c.ints);
    }
    std::vector<int64_t>().swap(c.ints);
    std::vector<double>().swap(c.reals);
    packer_.ints_of("dev.len." + c.name, c.lengths);
    std::vector<uint32_t>().swap(c.lengths);
  }
}

std::string base64(std::string_view raw) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out((raw.size() + 2) / 3 * 4, '=');
  const auto* in = reinterpret_cast<const unsigned char*>(raw.data());
  char* o = out.data();
  size_t n = raw.size() / 3 * 3, i = 0;
  for (; i < n; i += 3, o += 4) {
    uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
    o[3] = kAlphabet[v & 63];
  }
  if (size_t rest = raw.size() - n) {
    uint32_t v = uint32_t{in[i]} << 16;
    if (rest == 2) v |= uint32_t{in[i + 1]} << 8;
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    if (rest == 2) o[2] = kAlphabet[(v >> 6) & 63];
  }
  return out;
}

namespace {

std::string deflate_one(std::string_view raw, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("html: zlib deflateInit failed");
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error("html: zlib deflate failed");
  return base64(out);
}

}  // namespace

std::string deflate_base64(std::string_view raw, int parts, int level) {
  // zlib's avail_in is 32-bit: pieces stay well below 4 GiB.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  size_t n = std::max<size_t>(1, std::min<size_t>(parts, raw.size() / (1 << 20) + 1));
  n = std::max(n, (raw.size() + kMaxPiece - 1) / kMaxPiece);
  size_t step = (raw.size() + n - 1) / n;
  std::vector<std::string> out(n);
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex failure_mu;
  for (size_t k = 1; k < n; ++k)
    threads.emplace_back([&, k] {
      try {
        size_t b = std::min(raw.size(), k * step);
        out[k] = deflate_one(raw.substr(b, std::min(step, raw.size() - b)), level);
      } catch (...) {
        std::lock_guard lock(failure_mu);
        failure = std::current_exception();
      }
    });
  out[0] = deflate_one(raw.substr(0, std::min(step, raw.size())), level);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  std::string joined;
  size_t total = n;
  for (auto& s : out) total += s.size();
  joined.reserve(total);
  for (size_t k = 0; k < n; ++k) {
    if (k) joined += '.';
    joined += out[k];
  }
  return joined;
}

}  // namespace memsight::report
