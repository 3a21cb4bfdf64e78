// The frame rule, case by case.
#include "memsight/frames.h"

#include <gtest/gtest.h>

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
