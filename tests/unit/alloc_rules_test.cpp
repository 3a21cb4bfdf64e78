// torch's allocator rules (alloc_rules.h), case by case.
#include "allocator/alloc_rules.h"

#include <gtest/gtest.h>

#include "memsight/error.h"

namespace memsight::alloc {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

TEST(AllocRules, RoundSize) {
  Settings c;
  EXPECT_EQ(round_size(c, 1), 512);
  EXPECT_EQ(round_size(c, 512), 512);
  EXPECT_EQ(round_size(c, 513), 1024);
  EXPECT_EQ(round_size(c, 7 << 20), 7 << 20);
  // roundup_power2_divisions: 4 divisions of each power-of-two interval
  c.apply("roundup_power2_divisions:4");
  EXPECT_EQ(round_size(c, 1200), 1536);        // up to 512 * divisions bytes: 512-byte rounding
  EXPECT_EQ(round_size(c, 3000), 3072);        // between 2048 and 4096: steps of 512
  EXPECT_EQ(round_size(c, 1100000), 1310720);  // between 1 MiB and 2 MiB: steps of 256 KiB
  EXPECT_EQ(round_size(c, 1 << 21), 1 << 21);  // powers of two stay
}

TEST(AllocRules, SegmentSizesAndSplits) {
  Settings c;
  EXPECT_EQ(allocation_size(512), 2 * MiB);
  EXPECT_EQ(allocation_size(MiB), 2 * MiB);
  EXPECT_EQ(allocation_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB + 512), 12 * MiB);
  // small pool: any rest of 512 bytes; large pool: more than 1 MiB
  EXPECT_TRUE(should_split(c, true, 2 * MiB, 2 * MiB - 512));
  EXPECT_FALSE(should_split(c, false, 20 * MiB, 19 * MiB));
  EXPECT_TRUE(should_split(c, false, 20 * MiB, 19 * MiB - 512));
  c.apply("max_split_size_mb:64");
  EXPECT_FALSE(should_split(c, false, 200 * MiB, 64 * MiB));  // oversize: never split
  EXPECT_TRUE(should_split(c, false, 200 * MiB, 63 * MiB));
  EXPECT_FALSE(may_serve(c, 10 * MiB, 64 * MiB));  // no oversize block for a small request
  EXPECT_TRUE(may_serve(c, 64 * MiB, 83 * MiB));   // within max_non_split_rounding (20 MiB)
  EXPECT_FALSE(may_serve(c, 64 * MiB, 84 * MiB));
  c.apply("expandable_segments:True");
  EXPECT_TRUE(should_split(c, false, 20 * MiB, 20 * MiB - 512));
}

TEST(AllocRules, ParsesTorchsConfigurationStrings) {
  Settings c;
  c.apply("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, 128 * MiB);
  EXPECT_DOUBLE_EQ(c.gc_threshold, 0.6);
  c.apply("roundup_power2_divisions:[256:1,512:2,>:8]");
  EXPECT_EQ(c.divisions[0], 1);  // the first value fills the intervals below it
  EXPECT_EQ(c.divisions[8], 1);
  EXPECT_EQ(c.divisions[9], 8);  // '>' fills from the last named interval on
  EXPECT_EQ(c.divisions[15], 8);
  EXPECT_EQ(c.conf(),
            "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,"
            "roundup_power2_divisions:[1:1,2:1,4:1,8:1,16:1,32:1,64:1,128:1,256:1,512:8,1024:8,"
            "2048:8,4096:8,8192:8,16384:8,32768:8]");
  Settings d;
  d.apply(c.conf());
  EXPECT_TRUE(d == c);
  for (const char* bad :
       {"max_split_size_mb:10", "expandable_segments:yes", "nonsense:1",
        "garbage_collection_threshold:1.5", "roundup_power2_divisions:3", "max_split_size_mb",
        "backend:cudaMallocAsync", "per_process_memory_fraction:0",
        // torch refuses 0 ("must be in (0.0, 1.0)"); defaults takes no value
        "garbage_collection_threshold:0", "defaults:0", ":0", "per_process_memory_fraction:nan"})
    EXPECT_THROW(Settings().apply(bad), Error) << bad;
}

}  // namespace
}  // namespace memsight::alloc
