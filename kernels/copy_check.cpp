// The block copies' descriptors checked on the host (pure C++: built and tested without CUDA).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/copy_blocks.hpp"

namespace tasp::kernels {

int64_t check_copies(const std::vector<BlockCopy>& copies) {
  int64_t most = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    const BlockCopy& c = copies[i];
    auto bad = [&](const char* field) {
      throw std::invalid_argument("block copy " + std::to_string(i) + ": " + field);
    };
    const int64_t elem_src = c.src_type == Elem::FP32 ? 4 : 2, elem_dst = c.dst_type == Elem::FP32 ? 4 : 2;
    if (!c.src || !c.dst) bad("null address");
    if (c.batches < 0 || c.rows < 0 || c.width < 0) bad("negative size");
    if (c.width % 8) bad("width not a multiple of 8 elements");
    for (int64_t s : {c.src_batch_stride, c.src_row_stride, c.dst_batch_stride, c.dst_row_stride})
      if (s % 8) bad("stride not a multiple of 8 elements");
    if (reinterpret_cast<uintptr_t>(c.src) % (8 * elem_src) || reinterpret_cast<uintptr_t>(c.dst) % (8 * elem_dst))
      bad("address not aligned to 8 elements");
    most = std::max(most, int64_t(c.batches) * c.rows * (c.width / 8));
  }
  return most;
}

}  // namespace tasp::kernels
