#pragma once
// CUDA runtime errors as exceptions that name the call and where it was made.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#define TASP_CUDA(call)                                                                                     \
  do {                                                                                                      \
    cudaError_t tasp_err_ = (call);                                                                         \
    if (tasp_err_ != cudaSuccess)                                                                           \
      throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(tasp_err_) + " in " #call " (" + \
                               __FILE__ + ":" + std::to_string(__LINE__) + ")");                            \
  } while (0)

namespace tasp::kernels {

// Device buffers that live as long as this object: what one-off timings and references allocate (a throw
// midway frees what was taken). Never fewer than 16 bytes, so an empty tensor still has an aligned address.
class DeviceAllocs {
 public:
  DeviceAllocs() = default;
  DeviceAllocs(const DeviceAllocs&) = delete;
  DeviceAllocs& operator=(const DeviceAllocs&) = delete;
  ~DeviceAllocs() {
    for (void* p : taken_) cudaFree(p);
  }
  void* operator()(size_t bytes) {
    void* p = nullptr;
    TASP_CUDA(cudaMalloc(&p, bytes < 16 ? 16 : bytes));
    taken_.push_back(p);
    return p;
  }
  template <class T>
  T* of(size_t count) { return static_cast<T*>((*this)(count * sizeof(T))); }

 private:
  std::vector<void*> taken_;
};

// Lets `Kernel` take `bytes` of dynamic shared memory on the current device. The attribute belongs to a
// device, and the cuda backend launches from a thread per GPU: set once per device (up to 64), thread-safe.
// (A plain `static bool` set it on the first GPU only, and other GPUs' launches failed: invalid argument.)
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> done{0};
  int dev = 0;
  TASP_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit)) return;
  TASP_CUDA(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_release);
}

// Streaming multiprocessors of the current device: the forward's persistent grid, the backward's last wave.
inline int sm_count() {
  int dev = 0, n = 0;
  TASP_CUDA(cudaGetDevice(&dev));
  TASP_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// CTAs of `Kernel` (threads, bytes of dynamic shared memory, allowed by allow_dynamic_smem) that one SM holds at once.
template <auto Kernel>
int ctas_per_sm(int threads, int bytes) {
  int n = 0;
  TASP_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, bytes));
  return n > 0 ? n : 1;
}

}  // namespace tasp::kernels
