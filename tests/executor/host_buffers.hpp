#pragma once
// Rank buffers for work lists made on the host (make_pass_work): every pointer into one host block, the K/V slots
// `kv_at` bytes in, never dereferenced; and the GPUs they belong to (all of the plan's).
#include <utility>
#include <vector>

#include "executor/cuda_pass.hpp"

namespace tasp::executor::cuda {

inline std::pair<std::vector<RankBuffers>, std::vector<int>> host_buffers(int ranks, std::vector<char>& mem, size_t kv_at = 0) {
  std::vector<RankBuffers> bufs(ranks);
  std::vector<int> local;
  for (int r = 0; r < ranks; ++r) {
    local.push_back(r);
    RankBuffers& b = bufs[r];
    b.q = b.dout = mem.data(), b.kv = mem.data() + kv_at;
    b.out = b.lse = b.dsum = b.dq = b.dq_accum = b.grad = reinterpret_cast<float*>(mem.data());
  }
  return {bufs, local};
}

}  // namespace tasp::executor::cuda
