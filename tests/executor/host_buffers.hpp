#pragma once
// Rank buffers for work lists made on the host (make_pass_work): every pointer into one host block, the K/V slots
// `kv_at` bytes in, never dereferenced; and the GPUs they belong to (all of the plan's).
#include <utility>
#include <vector>

#include "executor/cuda_pass.hpp"

namespace tasp::executor::cuda {

// `moves`: the plan's query moves (Plan::query_moves), whose owner and `at` get their moved rows' buffers as
// alloc_rank_buffers gives them (the rows' length from `lens`, one a move).
inline std::pair<std::vector<RankBuffers>, std::vector<int>> host_buffers(int ranks, std::vector<char>& mem, size_t kv_at = 0,
                                                                          const std::vector<planner::QueryMove>& moves = {},
                                                                          const std::vector<int>& lens = {}) {
  std::vector<RankBuffers> bufs(ranks);
  std::vector<int> local;
  for (int r = 0; r < ranks; ++r) {
    local.push_back(r);
    RankBuffers& b = bufs[r];
    b.q = b.dout = mem.data(), b.kv = mem.data() + kv_at;
    b.out = b.lse = b.dsum = b.dq = b.dq_accum = b.grad = reinterpret_cast<float*>(mem.data());
  }
  for (size_t i = 0; i < moves.size(); ++i)
    for (int r : {moves[i].owner, moves[i].at}) {
      RankBuffers::MovedRows& mv = bufs[r].moved;
      mv.move = int(i), mv.owner = r == moves[i].owner, mv.len = lens.at(i);
      mv.send = mv.recv = mem.data();
      if (!mv.owner) mv.q = mv.in = mem.data(), mv.out = mv.lse = mv.dq_accum = reinterpret_cast<float*>(mem.data());
    }
  return {bufs, local};
}

}  // namespace tasp::executor::cuda
