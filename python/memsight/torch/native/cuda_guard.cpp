// A CUDA device guard that does nothing, for a torch built without CUDA.
//
// An estimate runs a training step on CUDA fake tensors: no kernel runs and
// no memory is touched, but torch still sets the current CUDA device around
// some operators (autograd's, the `to` copies). A torch built without CUDA
// has no CUDA device guard and aborts the process there. Loaded by
// memsight/torch/fit/fake_cuda.py only where torch has no CUDA: it gives
// the CUDA device type a guard that keeps a current device and a default
// stream and does nothing else, so fake CUDA steps run on such a torch
// (a CPU-only wheel, a distribution's package) as on a GPU machine.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>

namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;

constexpr DeviceIndex kDevices = 64;

struct FakeCudaGuard final : c10::impl::DeviceGuardImplInterface {
  mutable std::atomic<DeviceIndex> current{0};

  DeviceType type() const override { return DeviceType::CUDA; }
  Device exchangeDevice(Device d) const override {
    return Device(DeviceType::CUDA, current.exchange(d.index() < 0 ? 0 : d.index()));
  }
  Device getDevice() const override { return Device(DeviceType::CUDA, current.load()); }
  void setDevice(Device d) const override { current.store(d.index() < 0 ? 0 : d.index()); }
  void uncheckedSetDevice(Device d) const noexcept override {
    current.store(d.index() < 0 ? 0 : d.index());
  }
  Stream getStream(Device d) const noexcept override { return Stream(Stream::DEFAULT, d); }
  Stream getDefaultStream(Device d) const override { return Stream(Stream::DEFAULT, d); }
  Stream getStreamFromGlobalPool(Device d, bool) const override {
    return Stream(Stream::DEFAULT, d);
  }
  Stream getNewStream(Device d, int) const override { return Stream(Stream::DEFAULT, d); }
  Stream exchangeStream(Stream s) const noexcept override { return s; }
  DeviceIndex deviceCount() const noexcept override { return kDevices; }
  // The rest keep the interface's defaults (every stream is the default one,
  // so autograd never records an event; fake_cuda.py answers torch.cuda.Event).
};

}  // namespace

// 1: this call gave CUDA the guard; 0: CUDA had one already (a CUDA build
// of torch, or an earlier call), left as it was.
extern "C" __attribute__((visibility("default"))) int memsight_fake_cuda_guard() {
  static FakeCudaGuard guard;
  auto& slot = c10::impl::device_guard_impl_registry[static_cast<size_t>(DeviceType::CUDA)];
  const c10::impl::DeviceGuardImplInterface* none = nullptr;
  return slot.compare_exchange_strong(none, &guard) ? 1 : 0;
}
