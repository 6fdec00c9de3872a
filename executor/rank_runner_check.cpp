// The plan checks of a rank runner (rank_runner.hpp), the same with or without CUDA.
#include <string>

#include "executor/rank_runner.hpp"
#include "planner/topology.hpp"  // InputError

namespace tasp::executor {

void check_rank_plan(const planner::Plan& p, const planner::Workload& w, int group_ranks) {
  if (p.ulysses > 1)
    throw planner::InputError("plan: head-parallel plans (" + p.scheme +
                              ") do not run in a rank runner yet; pick ring, zigzag, allgather or hamilton");
  if (group_ranks != p.ranks)
    throw planner::InputError("plan: " + std::to_string(p.ranks) + " ranks, the group " + std::to_string(group_ranks));
  if (w.causal != p.causal) throw planner::InputError("workload and plan disagree on causal");
}

void check_rank_group(int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw planner::InputError("rank: " + std::to_string(rank) + " is not one of " + std::to_string(ranks) + " ranks");
}

}  // namespace tasp::executor
