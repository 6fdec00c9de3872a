#pragma once
// Strided block copies with a change of element type, many per launch: the head-parallel all-to-alls pack
// head slices of token rows into per-peer send buffers and unpack what arrives (fp32 results leave as 16-bit,
// replicated K/V heads' gradients are summed on arrival). Plain C++ interface; the CUDA is in copy_blocks.cu.
#include <cstdint>
#include <vector>

namespace tasp::kernels {

enum class Elem : int32_t { BF16, FP16, FP32 };

// dst[b][r][x] = src[b][r][x] (or += with `add`) for b < batches, r < rows, x < width; strides count elements
// of each side's own type. Widths, strides and addresses are multiples of 8 elements (vectors of 8).
struct BlockCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  Elem src_type = Elem::BF16, dst_type = Elem::BF16;
  int32_t batches = 1, add = 0;
  int64_t rows = 0, width = 0;
  int64_t src_batch_stride = 0, src_row_stride = 0, dst_batch_stride = 0, dst_row_stride = 0;
};

// Checks every copy (throws std::invalid_argument naming the copy and field) and returns the most 8-element
// vectors one copy moves (the launch's size).
int64_t check_copies(const std::vector<BlockCopy>& copies);
// Runs `count` copies whose descriptors the caller uploaded to `device_list`; max_vectors from check_copies.
void run_copies(const BlockCopy* device_list, int count, int64_t max_vectors, void* stream);

}  // namespace tasp::kernels
