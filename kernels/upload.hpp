#pragma once
// Packing a launch's work list (items, pieces, tiles, tensor maps) into one host buffer and copying it into
// the reused device workspace; shared by the forward and backward launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/staging.hpp"

namespace tasp::kernels {

// Appends v at the next `align`-byte boundary of buf; returns its offset.
template <class T>
size_t append(std::vector<unsigned char>& buf, const std::vector<T>& v, size_t align = 16) {
  size_t at = (buf.size() + align - 1) / align * align;
  buf.resize(at + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(buf.data() + at, v.data(), v.size() * sizeof(T));
  return at;
}

inline bool misaligned(const void* p, size_t a = 16) { return reinterpret_cast<uintptr_t>(p) % a != 0; }

// Copies ws.host to the device workspace (grown when needed) on `s`, through pinned staging (no wait for `s`);
// returns its device base. Launches on `s` run in order, so the next upload overwrites the list only after the
// launch that read it.
inline unsigned char* upload(Workspace& ws, cudaStream_t s) {
  if (ws.bytes < ws.host.size()) {
    if (ws.device) {  // launches queued on s may still read the old list
      TASP_CUDA(cudaStreamSynchronize(s));
      TASP_CUDA(cudaFree(ws.device));
    }
    TASP_CUDA(cudaGetDevice(&ws.device_id));
    ws.bytes = std::max(ws.host.size(), size_t(1) << 16);
    TASP_CUDA(cudaMalloc(&ws.device, ws.bytes));
  }
  // TASP_UPLOAD_PAGEABLE=1: straight from the std::vector, as before the staging ring (A/B runs, tools/gpu/ab.sh).
  static const bool pageable = env_int("TASP_UPLOAD_PAGEABLE", 0) != 0;
  if (pageable)
    TASP_CUDA(cudaMemcpyAsync(ws.device, ws.host.data(), ws.host.size(), cudaMemcpyHostToDevice, s));
  else
    copy_to_device(staging_of(ws), ws.device, ws.host.data(), ws.host.size(), s);
  return static_cast<unsigned char*>(ws.device);
}

}  // namespace tasp::kernels
