// Out/LSE fold, the final cast, a random fill and the backward's row sums and accumulator adds: elementwise,
// memory-bound.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

namespace tasp::kernels {
namespace {

using float16_pack_t = uint4;  // eight 16-bit values

// Both pointers on the 16-byte grid: the kernels below move 8 elements a thread as whole vectors.
bool vectors(const void* a, const void* b) { return (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % 16 == 0; }

// Rows are (b, row, h) of width D; lse is [B, H, rows].
__global__ void merge_kernel(float* acc_out, float* acc_lse, const float* blk_out, const float* blk_lse, int rows, int H,
                             int D, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const bool live = i < n;
  long long li = 0;
  float lse = -INFINITY;
  if (live) {
    const long long row = i / D;  // (b * rows + r) * H + h
    const int h = int(row % H);
    const long long br = row / H;
    const int r = int(br % rows);
    const long long b = br / rows;
    li = (b * H + h) * rows + r;
    const float a = acc_lse[li], c = blk_lse[li];
    const float mx = fmaxf(a, c);
    float wa = 0.f, wc = 0.f;
    if (mx != -INFINITY) {
      const float ea = __expf(a - mx), ec = __expf(c - mx);
      wa = ea / (ea + ec), wc = ec / (ea + ec);
      lse = mx + __logf(ea + ec);
    }
    acc_out[i] = wa * acc_out[i] + wc * blk_out[i];
  }
  // A block holds whole rows: every element has read its row's old lse before one of them writes it.
  __syncthreads();
  if (live && i % D == D - 1) acc_lse[li] = lse;
}

// A warp per row (b, r, h) of the partial: its weights from the two LSEs, its D values folded in, lane 0 writing the
// row's new LSE once every lane has read the old one.
template <typename T>
__global__ void merge_rows_kernel(float* acc_out, float* acc_lse, int acc_rows, int row0, const T* blk, const float* blk_lse,
                                  int len, int H, int D, long long nrows) {
  const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= nrows) return;
  const int h = int(w % H);
  const long long br = w / H;
  const int r = int(br % len);
  const long long b = br / len;
  const long long ai = (b * H + h) * acc_rows + row0 + r, bi = (b * H + h) * len + r;
  const float a = acc_lse[ai], c = blk_lse[bi];
  const float mx = fmaxf(a, c);
  float wa = 0.f, wc = 0.f, lse = -INFINITY;
  if (mx != -INFINITY) {
    const float ea = __expf(a - mx), ec = __expf(c - mx);
    wa = ea / (ea + ec), wc = ec / (ea + ec);
    lse = mx + __logf(ea + ec);
  }
  float* o = acc_out + ((b * acc_rows + row0 + r) * H + h) * (long long)D;
  const T* p = blk + w * D;
  for (int d = lane; d < D; d += 32) o[d] = wa * o[d] + wc * float(p[d]);
  __syncwarp();
  if (lane == 0) acc_lse[ai] = lse;
}

// Eight floats rounded into eight 16-bit values (one 16-byte store).
__device__ inline float16_pack_t pack8(const float* v, __nv_bfloat16*) {
  float16_pack_t p;
  auto* h = reinterpret_cast<__nv_bfloat162*>(&p);
  for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
  return p;
}
__device__ inline float16_pack_t pack8(const float* v, __half*) {
  float16_pack_t p;
  auto* h = reinterpret_cast<__half2*>(&p);
  for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
  return p;
}

// Eight values added to v: fp32 as two float4 loads, bf16 as one 16-byte load.
__device__ inline void add8(float* v, const float* a) {
  const float4 x = *reinterpret_cast<const float4*>(a), y = *reinterpret_cast<const float4*>(a + 4);
  v[0] += x.x, v[1] += x.y, v[2] += x.z, v[3] += x.w, v[4] += y.x, v[5] += y.y, v[6] += y.z, v[7] += y.w;
}
__device__ inline void add8(float* v, const __nv_bfloat16* a) {
  const float16_pack_t p = *reinterpret_cast<const float16_pack_t*>(a);
  const auto* h = reinterpret_cast<const __nv_bfloat16*>(&p);
  for (int j = 0; j < 8; ++j) v[j] += float(h[j]);
}

__device__ inline void add8(float* v, const __half* a) {
  const float16_pack_t p = *reinterpret_cast<const float16_pack_t*>(a);
  const auto* h = reinterpret_cast<const __half*>(&p);
  for (int j = 0; j < 8; ++j) v[j] += float(h[j]);
}

// dst += add, both 16-bit rows of `width` elements (`dst_pitch` and `add_pitch` apart, a row per blockIdx.y), each sum
// made in fp32 and rounded once; 8 elements a thread as 16-byte loads and stores where the rows stay on that grid.
template <typename T>
__global__ void add_rows16_kernel(T* dst, long long dst_pitch, const T* add, long long add_pitch, long long width, bool vec) {
  T* d = dst + blockIdx.y * dst_pitch;
  const T* a = add + blockIdx.y * add_pitch;
  const long long i = 8 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (vec && i + 8 <= width) {
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    add8(v, d + i), add8(v, a + i);
    *reinterpret_cast<float16_pack_t*>(d + i) = pack8(v, d);
    return;
  }
  for (long long j = i; j < width && j < i + 8; ++j) d[j] = T(float(d[j]) + float(a[j]));
}

// fp32 (plus `add`'s values, where given; `in` NULL: zero) -> 16 bits over `rows` rows of `width` elements, in and
// add rows `in_pitch` and out rows `out_pitch` elements apart (a row per blockIdx.y; one row: a flat cast), 8 elements
// a thread as 16-byte loads and one 16-byte store where pointers and pitches keep the rows on the 16-byte grid (one
// element a thread ran at 1.9-2.2 TB/s on an H200, 2026-11-26 profile of the PyTorch path: 90 us to cast 32M).
template <typename T, typename A>
__global__ void cast_rows_kernel(const float* in, const A* add, long long in_pitch, T* out, long long out_pitch,
                                 long long width, bool vec) {
  const long long row = blockIdx.y;
  const float* src = in ? in + row * in_pitch : nullptr;
  const A* plus = add ? add + row * in_pitch : nullptr;
  T* dst = out + row * out_pitch;
  const long long i = 8 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (vec && i + 8 <= width) {
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (src) add8(v, src + i);
    if (plus) add8(v, plus + i);
    *reinterpret_cast<float16_pack_t*>(dst + i) = pack8(v, dst);
    return;
  }
  for (long long j = i; j < width && j < i + 8; ++j) dst[j] = T((src ? src[j] : 0.f) + (plus ? float(plus[j]) : 0.f));
}

template <typename T>
__global__ void fill_kernel(T* out, long long n, unsigned long long seed) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const float u = float(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
  out[i] = T(u);
}

// dsum[b][h][r] = sum_d dout * out over one (b, r, h) row of D values: a warp per row; out fp32 or dout's type.
template <typename O, typename T>
__global__ void row_dot_kernel(const O* out, const T* dout, int rows, int H, int D, long long nrows, float* dsum) {
  const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;  // (b * rows + r) * H + h
  const int lane = threadIdx.x % 32;
  if (row >= nrows) return;
  float acc = 0.f;
  for (int d = lane; d < D; d += 32) acc += float(out[row * D + d]) * float(dout[row * D + d]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (lane == 0) {
    const int h = int(row % H);
    const long long br = row / H;
    dsum[(br / rows * H + h) * rows + br % rows] = acc;
  }
}

__global__ void add_kernel(float* acc, const float* add, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) acc[i] += add[i];
}

template <class T>
__global__ void add_half_kernel(float* acc, const T* add, long long n, bool overwrite, bool vec) {
  const long long i = 8 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
  if (vec && i + 8 <= n) {
    const float16_pack_t p = *reinterpret_cast<const float16_pack_t*>(add + i);
    const T* h = reinterpret_cast<const T*>(&p);
    float4 a = overwrite ? make_float4(0, 0, 0, 0) : *reinterpret_cast<const float4*>(acc + i);
    float4 b = overwrite ? make_float4(0, 0, 0, 0) : *reinterpret_cast<const float4*>(acc + i + 4);
    a.x += float(h[0]), a.y += float(h[1]), a.z += float(h[2]), a.w += float(h[3]);
    b.x += float(h[4]), b.y += float(h[5]), b.z += float(h[6]), b.w += float(h[7]);
    *reinterpret_cast<float4*>(acc + i) = a;
    *reinterpret_cast<float4*>(acc + i + 4) = b;
    return;
  }
  for (long long j = i; j < n && j < i + 8; ++j) acc[j] = (overwrite ? 0.f : acc[j]) + float(add[j]);
}

unsigned blocks_of8(size_t n, int threads) { return unsigned((n + 8ull * threads - 1) / (8ull * threads)); }

}  // namespace

namespace {
template <typename O>
void row_dots(const O* out, const void* dout, DType dtype, int B, int q_rows, int H, int D, float* dsum, void* stream) {
  const long long nrows = (long long)B * q_rows * H;
  if (nrows == 0) return;
  const int threads = 256;
  const unsigned blocks = unsigned((nrows * 32 + threads - 1) / threads);
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::BF16)
    row_dot_kernel<<<blocks, threads, 0, s>>>(out, static_cast<const __nv_bfloat16*>(dout), q_rows, H, D, nrows, dsum);
  else row_dot_kernel<<<blocks, threads, 0, s>>>(out, static_cast<const __half*>(dout), q_rows, H, D, nrows, dsum);
  TASP_CUDA(cudaGetLastError());
}
}  // namespace

void attention_backward_prepare(const float* out, const void* dout, DType dtype, int B, int q_rows, int H, int D,
                                float* dsum, void* stream) {
  row_dots(out, dout, dtype, B, q_rows, H, D, dsum, stream);
}

void attention_backward_prepare16(const void* out, const void* dout, DType dtype, int B, int q_rows, int H, int D,
                                  float* dsum, void* stream) {
  if (dtype == DType::BF16) row_dots(static_cast<const __nv_bfloat16*>(out), dout, dtype, B, q_rows, H, D, dsum, stream);
  else row_dots(static_cast<const __half*>(out), dout, dtype, B, q_rows, H, D, dsum, stream);
}

void add_into(float* acc, const float* add, size_t n, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  add_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(acc, add, (long long)n);
  TASP_CUDA(cudaGetLastError());
}

void add_half_into(float* acc, const void* add, DType dtype, size_t n, bool overwrite, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  const bool vec = vectors(acc, add);
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::BF16)
    add_half_kernel<<<blocks_of8(n, threads), threads, 0, s>>>(acc, static_cast<const __nv_bfloat16*>(add), (long long)n,
                                                                overwrite, vec);
  else add_half_kernel<<<blocks_of8(n, threads), threads, 0, s>>>(acc, static_cast<const __half*>(add), (long long)n,
                                                                    overwrite, vec);
  TASP_CUDA(cudaGetLastError());
}

void fill_random(void* dst, DType dtype, size_t n, uint64_t seed, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  const unsigned blocks = unsigned((n + threads - 1) / threads);
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::BF16) fill_kernel<<<blocks, threads, 0, s>>>(static_cast<__nv_bfloat16*>(dst), (long long)n, seed);
  else fill_kernel<<<blocks, threads, 0, s>>>(static_cast<__half*>(dst), (long long)n, seed);
  TASP_CUDA(cudaGetLastError());
}

void merge_out_lse(float* acc_out, float* acc_lse, const float* blk_out, const float* blk_lse, int B, int rows, int H,
                   int D, void* stream) {
  const long long n = (long long)B * rows * H * D;
  if (n == 0) return;
  if (D > 1024 || 1024 % D) throw std::invalid_argument("merge: D must divide 1024");
  const int threads = 1024;
  merge_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      acc_out, acc_lse, blk_out, blk_lse, rows, H, D, n);
  TASP_CUDA(cudaGetLastError());
}

void merge_rows16(float* acc_out, float* acc_lse, int acc_rows, int row0, const void* blk_out, const float* blk_lse,
                  DType dtype, int B, int len, int H, int D, void* stream) {
  const long long rows = (long long)B * len * H;
  if (rows == 0) return;
  if (row0 < 0 || row0 + len > acc_rows) throw std::invalid_argument("merge_rows16: rows outside the running out");
  const int threads = 256;
  const unsigned blocks = unsigned((rows * 32 + threads - 1) / threads);
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::BF16)
    merge_rows_kernel<<<blocks, threads, 0, s>>>(acc_out, acc_lse, acc_rows, row0, static_cast<const __nv_bfloat16*>(blk_out),
                                                 blk_lse, len, H, D, rows);
  else
    merge_rows_kernel<<<blocks, threads, 0, s>>>(acc_out, acc_lse, acc_rows, row0, static_cast<const __half*>(blk_out), blk_lse,
                                                 len, H, D, rows);
  TASP_CUDA(cudaGetLastError());
}

void cast_out(const float* out, void* dst, DType dtype, size_t n, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  const bool vec = vectors(out, dst);
  auto s = static_cast<cudaStream_t>(stream);
  const float* none = nullptr;
  if (dtype == DType::BF16)
    cast_rows_kernel<<<blocks_of8(n, threads), threads, 0, s>>>(out, none, 0, static_cast<__nv_bfloat16*>(dst), 0,
                                                                 (long long)n, vec);
  else cast_rows_kernel<<<blocks_of8(n, threads), threads, 0, s>>>(out, none, 0, static_cast<__half*>(dst), 0,
                                                                     (long long)n, vec);
  TASP_CUDA(cudaGetLastError());
}

namespace {
template <typename A>
void cast_rows(const float* src, const A* add, size_t src_pitch, void* dst, size_t dst_pitch, DType dtype, size_t width,
               size_t rows, cudaStream_t s) {
  const int threads = 256;
  // Rows stay on the 16-byte grid when the bases do and the pitches are multiples of 8 elements.
  const bool vec = vectors(src, dst) && vectors(add, dst) && src_pitch % 8 == 0 && dst_pitch % 8 == 0;
  const dim3 grid(blocks_of8(width, threads), unsigned(rows));
  if (dtype == DType::BF16)
    cast_rows_kernel<<<grid, threads, 0, s>>>(src, add, (long long)src_pitch, static_cast<__nv_bfloat16*>(dst),
                                              (long long)dst_pitch, (long long)width, vec);
  else cast_rows_kernel<<<grid, threads, 0, s>>>(src, add, (long long)src_pitch, static_cast<__half*>(dst),
                                                 (long long)dst_pitch, (long long)width, vec);
  TASP_CUDA(cudaGetLastError());
}
}  // namespace

void cast_out_rows(const float* src, size_t src_pitch, void* dst, size_t dst_pitch, DType dtype, size_t width, size_t rows,
                   void* stream, const void* add, AddType add_type) {
  if (width == 0 || rows == 0) return;
  if (rows > 65535) throw std::invalid_argument("cast_out_rows: more than 65535 rows");
  if ((add == nullptr) != (add_type == AddType::None))
    throw std::invalid_argument("cast_out_rows: add and add_type name nothing or something together");
  if (!src && !add) throw std::invalid_argument("cast_out_rows: neither src nor add");
  auto s = static_cast<cudaStream_t>(stream);
  if (add_type == AddType::BF16) cast_rows(src, static_cast<const __nv_bfloat16*>(add), src_pitch, dst, dst_pitch, dtype, width, rows, s);
  else cast_rows(src, static_cast<const float*>(add), src_pitch, dst, dst_pitch, dtype, width, rows, s);
}

void add_rows16(void* dst, size_t dst_pitch, const void* add, size_t add_pitch, DType dtype, size_t width, size_t rows,
                void* stream) {
  if (width == 0 || rows == 0) return;
  if (rows > 65535) throw std::invalid_argument("add_rows16: more than 65535 rows");
  const int threads = 256;
  const bool vec = vectors(dst, add) && dst_pitch % 8 == 0 && add_pitch % 8 == 0;
  const dim3 grid(blocks_of8(width, threads), unsigned(rows));
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::BF16)
    add_rows16_kernel<<<grid, threads, 0, s>>>(static_cast<__nv_bfloat16*>(dst), (long long)dst_pitch,
                                               static_cast<const __nv_bfloat16*>(add), (long long)add_pitch, (long long)width, vec);
  else add_rows16_kernel<<<grid, threads, 0, s>>>(static_cast<__half*>(dst), (long long)dst_pitch, static_cast<const __half*>(add),
                                                  (long long)add_pitch, (long long)width, vec);
  TASP_CUDA(cudaGetLastError());
}

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace tasp::kernels
