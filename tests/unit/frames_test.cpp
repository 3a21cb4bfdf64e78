// The frame rule, case by case.
#include "memsight/frames.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

using memsight::classify_frame;
using memsight::FrameKind;
using memsight::site_index;
using memsight::UserCode;

TEST(Frames, Kinds) {
  EXPECT_EQ(classify_frame("train", "/home/me/proj/train.py"), FrameKind::User);
  EXPECT_EQ(classify_frame("<module>", "<stdin>"), FrameKind::User);
  EXPECT_EQ(
      classify_frame("forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"),
      FrameKind::Library);
  EXPECT_EQ(classify_frame("run", "/usr/lib/python3.11/runpy.py"), FrameKind::Library);
  EXPECT_EQ(classify_frame("f", "/src/pytorch/torch/nn/functional.py"), FrameKind::Library);
  EXPECT_EQ(classify_frame("_find_and_load", "<frozen importlib._bootstrap>"), FrameKind::Library);
  EXPECT_EQ(classify_frame("forward", "<eval_with_key>.3"), FrameKind::Library);
  EXPECT_EQ(classify_frame("call", "/tmp/torchinductor_root/bk/cbkittah.py"), FrameKind::Library);
  EXPECT_EQ(classify_frame("linear", "torch/nn/functional.py"),
            FrameKind::Library);  // profiler paths
  EXPECT_EQ(classify_frame("torch::unwind::unwind()", "??"), FrameKind::Internal);
  EXPECT_EQ(
      classify_frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
                     "unsigned long, CUstream_st*)",
                     "CUDACachingAllocator.cpp"),
      FrameKind::Internal);
  EXPECT_EQ(
      classify_frame("std::vector<at::Tensor> at::native::foreach_sqrt(c10::ArrayRef<at::Tensor>)",
                     "ForeachOps.cu"),
      FrameKind::Internal);
  EXPECT_EQ(classify_frame("_PyEval_EvalFrameDefault", "ceval.c"), FrameKind::Internal);
  EXPECT_EQ(classify_frame("PyObject_Call", "call.c"), FrameKind::Internal);
  EXPECT_EQ(classify_frame("__libc_start_main", "libc-start.c"), FrameKind::Internal);
  EXPECT_EQ(classify_frame("anything", ""), FrameKind::Internal);
  // an extension's own code, even with torch types in its arguments
  EXPECT_EQ(classify_frame("my_ext::launch(at::Tensor const&)", "my_ext/kernels.cu"),
            FrameKind::Native);
  EXPECT_EQ(classify_frame("flat::concat(int)", "mylib.cpp"), FrameKind::Native);
}

TEST(Frames, UserCodePatterns) {
  auto wide = UserCode::parse("torch/nn/");
  EXPECT_EQ(classify_frame("f", "/venv/site-packages/torch/nn/functional.py", wide),
            FrameKind::User);
  EXPECT_EQ(classify_frame("f", "/venv/site-packages/torch/optim/adam.py", wide),
            FrameKind::Library);
  auto narrow = UserCode::parse("!vendor/,,");
  EXPECT_EQ(narrow.patterns.size(), 1u);
  EXPECT_EQ(classify_frame("f", "/proj/vendor/x.py", narrow), FrameKind::Library);
  EXPECT_EQ(classify_frame("f", "/proj/train.py", narrow), FrameKind::User);
  // later patterns win
  auto both = UserCode::parse("proj/,!proj/gen/");
  EXPECT_EQ(classify_frame("f", "/proj/gen/a.py", both), FrameKind::Library);
}

TEST(Frames, SiteRule) {
  using K = FrameKind;
  std::vector<K> a{K::Internal, K::Library, K::User, K::Library, K::User};
  EXPECT_EQ(site_index(a), 2);
  std::vector<K> b{K::Internal, K::Native, K::Library};
  EXPECT_EQ(site_index(b), 2);
  std::vector<K> c{K::Internal, K::Native, K::Internal};
  EXPECT_EQ(site_index(c), 1);
  std::vector<K> d{K::Internal};
  EXPECT_EQ(site_index(d), -1);
  EXPECT_EQ(memsight::frame_label("f", "/a/b/train.py", 12), "train.py:12:f");
}

// Labels compare, hash and read as the text their pieces spell, however the
// text is split into pieces; built, long pieces are cut.
TEST(Label, IsTheTextItSpells) {
  using memsight::Label;
  const std::string file = "train.py", name = "step";
  Label a, b, c;
  a.add(file).add(":").add(int64_t{12}).add(":").add(name);
  b.add("trai").add("n.py:1").add("2:st").add("ep");
  c.add(file).add(":").add(int64_t{13}).add(":").add(name);
  EXPECT_EQ(a.text(), "train.py:12:step");
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash(), Label::hash_text("train.py:12:step"));
  Label d;  // pieces whose hashes their owner knew
  d.add(file, Label::hash_text(file))
      .add(":")
      .add(int64_t{12})
      .add(":")
      .add(name, Label::hash_text(name));
  EXPECT_EQ(d.hash(), a.hash());
  // Texts that differ only far from both ends hash apart (a hash of the
  // ends alone would put a thousand such names in one bucket).
  std::set<size_t> hashes;
  for (int i = 0; i < 1000; ++i) {
    char mid[16];
    std::snprintf(mid, sizeof mid, "%04d", i);
    hashes.insert(Label::hash_text(std::string(40, 'a') + mid + std::string(40, 'b')));
  }
  EXPECT_EQ(hashes.size(), 1000u);
  EXPECT_TRUE(a.spells("train.py:12:step"));
  EXPECT_FALSE(a.spells("train.py:12:ste"));
  EXPECT_FALSE(a.spells("train.py:12:stepp"));
  // Ordered as the texts are (bytes compared unsigned, as std::string does).
  const std::vector<std::string> texts = {"", "a", "ab", "b", "train.py:12:step", "\xc3\xa9"};
  for (const auto& x : texts)
    for (const auto& y : texts) {
      Label lx, ly;
      const std::string head = y.substr(0, y.size() / 2), tail = y.substr(y.size() / 2);
      lx.add(x);
      ly.add(head).add(tail);  // pieces are views: they must outlive the label
      EXPECT_EQ(lx.compare(ly) < 0, x < y) << x << " " << y;
      EXPECT_EQ(lx == ly, x == y) << x << " " << y;
    }
  EXPECT_TRUE(a < c);
}

// hash_text reads eight bytes a step: it must be the byte-by-byte
// polynomial, for every length and split (pieces' hashes combine).
TEST(Label, HashIsThePolynomialOfTheBytes) {
  using memsight::Label;
  constexpr uint64_t kMod = (uint64_t{1} << 61) - 1, kBase = 0x1d2c3b4a59687f1ull % kMod;
  auto reference = [&](const std::string& s) {
    uint64_t h = 0;
    for (unsigned char c : s) {
      unsigned __int128 x = static_cast<unsigned __int128>(h) * kBase;
      h = static_cast<uint64_t>(x % kMod);
      h = (h + c + 1u) % kMod;
    }
    return h;
  };
  std::string text;
  uint32_t seed = 12345;
  for (size_t n = 0; n <= 70; ++n) {
    EXPECT_EQ(Label::hash_text(text), reference(text)) << n;
    for (size_t cut = 0; cut <= n; cut += 3) {
      const std::string a = text.substr(0, cut), b = text.substr(cut);
      Label l;
      l.add(a).add(b);
      EXPECT_EQ(l.hash(), Label::hash_text(text)) << n << " " << cut;
    }
    seed = seed * 1103515245u + 12345u;
    text += static_cast<char>(seed >> 16);  // every byte value, 0x00 and 0xff among them
  }
  EXPECT_EQ(Label::hash_text(std::string(1000, '\xff')), reference(std::string(1000, '\xff')));
}

// Each piece by the one rule for names (cut_name, input_limits_test).
TEST(Label, LongPiecesAreCutSayingHowMuch) {
  std::string big(20000, 'f');
  memsight::Label l;
  l.add(big).add(":").add(int64_t{1});
  EXPECT_EQ(l.text(), std::string(memsight::kNameLimit, 'f') +
                          "\xE2\x80\xA6 [cut at 16384 of 20000 bytes]:1");
  EXPECT_EQ(l.text(SIZE_MAX), big + ":1");
  EXPECT_EQ(l.text(100), std::string(100, 'f') + "\xE2\x80\xA6 [cut at 100 of 20000 bytes]:1");
}

// Frame kinds are found by a label's text without building the labels.
TEST(FrameLabelKinds, FindsEachFrameByItsLabel) {
  memsight::Snapshot snap;
  auto frame = [&](const char* name, const char* file, int64_t line) {
    memsight::Frame f;
    f.name = snap.strings.intern(name);
    f.filename = snap.strings.intern(file);
    f.line = line;
    return snap.frames.intern_frame(f);
  };
  frame("step", "/home/me/train.py", 12);
  frame("mm", "/usr/lib/python3/dist-packages/torch/functional.py", 3);
  memsight::FrameLabelKinds kinds;
  kinds.add(snap);
  EXPECT_EQ(kinds.find("train.py:12:step"), memsight::FrameKind::User);
  EXPECT_EQ(kinds.find("functional.py:3:mm"), memsight::FrameKind::Library);
  EXPECT_EQ(kinds.find("train.py:13:step"), std::nullopt);
}
