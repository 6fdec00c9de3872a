#pragma once
// CUDA runtime errors as exceptions that name the call and where it was made.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define TASP_CUDA(call)                                                                                     \
  do {                                                                                                      \
    cudaError_t tasp_err_ = (call);                                                                         \
    if (tasp_err_ != cudaSuccess)                                                                           \
      throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(tasp_err_) + " in " #call " (" + \
                               __FILE__ + ":" + std::to_string(__LINE__) + ")");                            \
  } while (0)
