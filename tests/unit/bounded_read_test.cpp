// Reads are bounded by the input: forged lengths, expansion limits, and the
// pickle stack.
#include <gtest/gtest.h>

#include <string>

#include "input/source.h"
#include "memsight/reader.h"

namespace {

using memsight::Error;

// A snapshot dict whose extra key "blob" holds `n` bytes (BINBYTES8).
std::string snapshot_with_blob(size_t n) {
  std::string p =
      "\x80\x04}(\x8c\x08segments]\x8c\x0d"
      "device_traces]\x8c\x04"
      "blob\x8e";
  for (int i = 0; i < 8; ++i) p += static_cast<char>((uint64_t{n} >> (8 * i)) & 0xff);
  p += std::string(n, 'x');
  p += "u.";
  return p;
}

struct LimitGuard {
  ~LimitGuard() { memsight::set_max_expanded(0); }
};

TEST(BoundedRead, LongStringFromADecompressorGrowsAsItArrives) {
  std::string gz = memsight::compress(snapshot_with_blob(5 << 20), "gzip");
  memsight::Snapshot s = memsight::read_snapshot_bytes(gz);
  const memsight::PyValue* blob = s.top("blob");
  ASSERT_NE(blob, nullptr);
  EXPECT_EQ(blob->s.size(), size_t{5} << 20);
}

TEST(BoundedRead, ForgedLengthIsTruncatedNotAllocated) {
  std::string p = snapshot_with_blob(0);
  p = p.substr(0, p.size() - 10) + std::string("\x00\x00\x00\x00\x05\x00\x00\x00", 8);
  for (const std::string& in : {p, memsight::compress(p, "gzip"), memsight::compress(p, "zstd")}) {
    try {
      (void)memsight::read_snapshot_bytes(in);
      FAIL() << "read a forged length";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("truncated pickle"), std::string::npos) << e.what();
    }
  }
}

TEST(BoundedRead, ExpansionLimitStopsADecompressor) {
  LimitGuard guard;
  std::string zst = memsight::compress(snapshot_with_blob(8 << 20), "zstd");
  memsight::set_max_expanded(1 << 20);
  try {
    (void)memsight::read_snapshot_bytes(zst);
    FAIL() << "expanded past the limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zstd: the input expands past 1048576 bytes (1.0 MiB), "
                                         "the --max-expanded limit;"),
              std::string::npos)
        << e.what();
  }
  memsight::set_max_expanded(16 << 20);
  EXPECT_EQ(memsight::read_snapshot_bytes(zst).top("blob")->s.size(), size_t{8} << 20);
}

TEST(BoundedRead, DefaultRatioAppliesToTinyBombs) {
  // 200 MiB of zeros compress to ~200 KB of zstd: past 100x plus 64 MiB.
  std::string z = memsight::compress(snapshot_with_blob(200 << 20), "zstd");
  ASSERT_LT(z.size(), 1u << 20);
  auto src = memsight::memory_source(z);
  std::string buf(1 << 20, '\0');
  uint64_t total = 0;
  std::string message;
  try {
    while (size_t k = src->read(buf.data(), buf.size())) total += k;
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_LE(total, memsight::kExpansionAllowance + memsight::kExpansionRatio * z.size());
  // The message states the rule and the numbers it applied them to: the
  // whole compressed input's size, known here.
  const std::string past = "zstd: the input expands past ", after = "the limit for ",
                    rule =
                        " of compressed file: 100 times its size plus 64 MiB, at most 32 GiB; "
                        "--max-expanded SIZE allows more";
  ASSERT_EQ(message.rfind(past, 0), 0u) << message;
  ASSERT_NE(message.find(after), std::string::npos) << message;
  ASSERT_TRUE(message.ends_with(rule)) << message;
  uint64_t limit = std::stoull(message.substr(past.size()));
  uint64_t size = std::stoull(message.substr(message.find(after) + after.size()));
  EXPECT_EQ(size, z.size());
  EXPECT_EQ(limit, memsight::kExpansionAllowance + memsight::kExpansionRatio * size);
  EXPECT_EQ(total, limit);
}

TEST(BoundedRead, StackOfPushesIsCapped) {
  std::string p = "\x80\x04" + std::string((size_t{1} << 24) + 16, 'N') + ".";
  try {
    (void)memsight::read_snapshot_bytes(p);
    FAIL() << "no stack limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("values wait on the pickle stack"), std::string::npos)
        << e.what();
  }
}

}  // namespace
