#pragma once
// CUDA runtime errors as exceptions that name the call and where it was made.
#include <cuda_runtime.h>

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

}  // namespace tasp::kernels
