// Block copies: one CTA row per descriptor (blockIdx.y), 8 elements per thread and iteration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/copy_blocks.hpp"
#include "kernels/cuda_check.hpp"

namespace tasp::kernels {
namespace {

__device__ void load8(const void* base, Elem t, int64_t off, float* v) {
  if (t == Elem::FP32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + off);
    const float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
  const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + off);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint16_t lo = uint16_t(w[i] & 0xffff), hi = uint16_t(w[i] >> 16);
    if (t == Elem::BF16) {
      v[2 * i] = __bfloat162float(__ushort_as_bfloat16(lo)), v[2 * i + 1] = __bfloat162float(__ushort_as_bfloat16(hi));
    } else {
      v[2 * i] = __half2float(__ushort_as_half(lo)), v[2 * i + 1] = __half2float(__ushort_as_half(hi));
    }
  }
}

__device__ void store8(void* base, Elem t, int64_t off, const float* v) {
  if (t == Elem::FP32) {
    float4* p = reinterpret_cast<float4*>(static_cast<float*>(base) + off);
    p[0] = make_float4(v[0], v[1], v[2], v[3]), p[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (t == Elem::BF16) {
      lo = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i])), hi = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]));
    } else {
      lo = __half_as_ushort(__float2half_rn(v[2 * i])), hi = __half_as_ushort(__float2half_rn(v[2 * i + 1]));
    }
    w[i] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  *reinterpret_cast<uint4*>(static_cast<uint16_t*>(base) + off) = make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void copy_blocks_kernel(const BlockCopy* list) {
  const BlockCopy c = list[blockIdx.y];
  const int64_t per_row = c.width / 8, n = int64_t(c.batches) * c.rows * per_row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = (i % per_row) * 8, br = i / per_row, r = br % c.rows, b = br / c.rows;
    const int64_t so = b * c.src_batch_stride + r * c.src_row_stride + x, d = b * c.dst_batch_stride + r * c.dst_row_stride + x;
    float v[8];
    load8(c.src, c.src_type, so, v);
    if (c.add) {
      float a[8];
      load8(c.dst, c.dst_type, d, a);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] += a[k];
    }
    store8(c.dst, c.dst_type, d, v);
  }
}

}  // namespace

void run_copies(const BlockCopy* device_list, int count, int64_t max_vectors, void* stream) {
  if (count <= 0 || max_vectors <= 0) return;
  if (count > 65535) throw std::invalid_argument("run_copies: more than 65535 copies in one launch");
  const int threads = 256;
  const int64_t want = (max_vectors + threads - 1) / threads;
  const dim3 grid(unsigned(std::min<int64_t>(want, std::max<int64_t>(8, 4096 / count))), unsigned(count));
  copy_blocks_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(device_list);
  TASP_CUDA(cudaGetLastError());
}

}  // namespace tasp::kernels
