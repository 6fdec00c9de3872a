#pragma once
// Diagnostics builds only (-DTASP_FWD_TRACE, -DTASP_BWD_TRACE; tools/gpu/trace.sh): a kernel's
// phase clocks, a __device__ array, cleared before a launch and written after it to the file that $ENV names.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda_check.hpp"

namespace tasp::kernels {

template <class Array>
void clear_trace(const Array& symbol, cudaStream_t s) {
  void* a = nullptr;
  TASP_CUDA(cudaGetSymbolAddress(&a, symbol));
  TASP_CUDA(cudaMemsetAsync(a, 0, sizeof(Array), s));
}

template <class Array>
void dump_trace(const Array& symbol, const char* env, cudaStream_t s) {
  const char* path = std::getenv(env);
  if (!path) return;
  std::vector<unsigned char> h(sizeof(Array));
  TASP_CUDA(cudaStreamSynchronize(s));
  TASP_CUDA(cudaMemcpyFromSymbol(h.data(), symbol, sizeof(Array)));
  if (FILE* f = std::fopen(path, "wb")) {
    std::fwrite(h.data(), 1, h.size(), f);
    std::fclose(f);
  }
}

}  // namespace tasp::kernels
