// cuTensorMapEncodeTiled through the runtime's driver entry point: linking libcuda directly would make
// every binary fail to start on machines without a driver (CI), where the GPU tests must skip instead.
#include "kernels/tensor_map.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace tasp::kernels {
namespace {

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeFn encode_fn() {
  static EncodeFn fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
#else  // older toolkits: the unversioned lookup (deprecated since 12.5)
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q);
#endif
    if (e == cudaSuccess && q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<EncodeFn>(p);
  });
  if (!fn) throw std::runtime_error("attention: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12+)");
  return fn;
}

// A tiled map (by default with the 128-byte swizzle); `what` names the tensor in the error.
void encode(void* dst, CUtensorMapDataType type, int rank, const void* base, const cuuint64_t* dims, const cuuint64_t* strides,
            const cuuint32_t* box, const std::string& what, CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  static_assert(sizeof(CUtensorMap) == kTensorMapBytes, "CUtensorMap size");
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode_fn()(static_cast<CUtensorMap*>(dst), type, rank, const_cast<void*>(base), dims, strides, box, elem_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("attention: cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ") for " + what);
}

std::string shape_text(int B, long long rows, int heads, int D) {
  return "a [" + std::to_string(B) + ", " + std::to_string(rows) + ", " + std::to_string(heads) + ", " + std::to_string(D) + "] tensor";
}

}  // namespace

void encode_bshd_map(void* dst, const void* base, bool bf16, int B, long long rows, int heads, int D,
                     long long batch_stride, int box_rows, int col_blocks) {
  const CUtensorMapDataType type = bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  // [B][rows][heads][D] in boxes of 64 columns; with col_blocks > 1, [B][D / 64 blocks][rows][heads][64]: the
  // column blocks a dimension of their own, 128 bytes apart, col_blocks of them a box.
  const int rank = col_blocks > 1 ? 5 : 4;
  cuuint64_t dims[5] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(rows), cuuint64_t(B), 0};
  cuuint64_t strides[4] = {cuuint64_t(D) * 2, cuuint64_t(heads) * D * 2, cuuint64_t(batch_stride) * 2, 0};
  cuuint32_t box[5] = {64, 1, cuuint32_t(box_rows), 1, 0};
  if (rank == 5) {
    dims[0] = 64, dims[3] = cuuint64_t(D / 64), dims[4] = cuuint64_t(B);
    strides[3] = strides[2], strides[2] = 128;
    box[3] = cuuint32_t(col_blocks), box[4] = 1;
  }
  encode(dst, type, rank, base, dims, strides, box, shape_text(B, rows, heads, D));
}

void encode_bshd_f32_map(void* dst, const float* base, int B, long long rows, int heads, int D, int box_rows) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(rows), cuuint64_t(B)};
  const cuuint64_t strides[3] = {cuuint64_t(D) * 4, cuuint64_t(heads) * D * 4, cuuint64_t(rows) * heads * D * 4};
  const cuuint32_t box[4] = {32, 1, cuuint32_t(box_rows), 1};
  encode(dst, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, dims, strides, box, "the fp32 output, " + shape_text(B, rows, heads, D));
}

void encode_f32_rows_map(void* dst, const float* base, long long n, int box, const char* what) {
  const cuuint64_t dims[1] = {cuuint64_t(n)};
  const cuuint64_t none[1] = {cuuint64_t(n) * 4};  // a rank-1 map has no strides (the array is not read)
  const cuuint32_t boxes[1] = {cuuint32_t(box)};
  encode(dst, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, base, dims, none, boxes,
         std::string(what) + " (" + std::to_string(n) + " floats)", CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace tasp::kernels
