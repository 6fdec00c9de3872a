#pragma once
// A KV piece and a work item as the kernel tests write them, and what its rows see from the definitions (no CUDA: the CPU tests of
// the kernels' mask arithmetic use it too).
#include <vector>

#include "kernels/attention.hpp"

namespace tasp::kernels::testing {

struct PieceSpec {
  int len;
  long long pos0;
};
struct ItemSpec {
  int q_row0, q_len;
  long long q_pos0;
  std::vector<int> pieces;  // indices into the case's pieces
  bool causal;
  long long k_begin = 0, k_end = 0x7fffffffffffffffLL;  // the rows' document
  int wl = -1, wr = -1;                                 // window sides (-1: unbounded)
};

// Whether row position q of the item sees key position k, from the definitions (not the kernels' Band).
inline bool sees(const ItemSpec& it, long long q, long long k) {
  return k >= it.k_begin && k < it.k_end && !(it.causal && k > q) && !(it.wl >= 0 && q - k > it.wl) &&
         !(it.wr >= 0 && k - q > it.wr);
}

inline WorkItem work_item(const ItemSpec& it) {
  WorkItem w;
  w.q_row0 = it.q_row0, w.q_len = it.q_len, w.q_pos0 = it.q_pos0, w.causal = it.causal;
  w.k_begin = it.k_begin, w.k_end = it.k_end, w.window_left = it.wl, w.window_right = it.wr;
  return w;
}

}  // namespace tasp::kernels::testing
