#pragma once
// Host-side TMA tensor maps for the warp-specialised attention path.
#include <cstddef>

namespace tasp::kernels {

constexpr size_t kTensorMapBytes = 128;

// Writes at `dst` (kTensorMapBytes, 64-byte aligned) the tensor map of a row-major [B, rows, heads, D]
// tensor of 2-byte elements (`bf16` or fp16) whose batches are `batch_stride` elements apart, read in boxes
// of 64 columns x `box_rows` rows of one head with the 128-byte swizzle; rows past the end read as zeros.
// col_blocks > 1 (D a multiple of 64): a 5-d map whose box is that many 64-column blocks, landing as
// [block][box_rows][64] (what one copy per tile brings at D=128; coordinates {0, head, row, block, batch}).
// Throws std::runtime_error when the driver refuses (alignment, sizes) or has no TMA.
void encode_bshd_map(void* dst, const void* base, bool bf16, int B, long long rows, int heads, int D,
                     long long batch_stride, int box_rows, int col_blocks = 1);

// The tensor map of a dense row-major [B, rows, heads, D] fp32 tensor written in boxes of 32 columns (128 bytes,
// the 128-byte swizzle) x `box_rows` rows of one head; writes past the tensor's ends are dropped.
void encode_bshd_f32_map(void* dst, const float* base, int B, long long rows, int heads, int D, int box_rows);

// The tensor map of `n` contiguous fp32 values read in boxes of `box` values (a multiple of 4, at most 256), each from
// a multiple of 4 (tma_load_1d), unswizzled; past the end reads as zeros. `base` 16-byte aligned.
void encode_f32_rows_map(void* dst, const float* base, long long n, int box, const char* what);

}  // namespace tasp::kernels
