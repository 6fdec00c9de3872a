// The plan checks of a rank runner (rank_runner.hpp), the same with or without CUDA.
#include <string>

#include "executor/rank_runner.hpp"
#include "planner/head_parallel.hpp"
#include "planner/topology.hpp"  // InputError

namespace tasp::executor {

void check_rank_plan(const planner::Plan& p, const planner::Workload& w, int group_ranks) {
  if (group_ranks != p.gpus())
    throw planner::InputError("plan: " + std::to_string(p.gpus()) + " GPUs, the group " + std::to_string(group_ranks));
  if (w.causal != p.causal) throw planner::InputError("workload and plan disagree on causal");
  if (p.ulysses > 1) {
    // Each GPU holds one token part of its group's rows as a [B][part][heads][D] tensor: the parts must be equal
    // (the all-to-alls' copies step batches by one part's rows).
    if (w.S % (2L * p.gpus()))
      throw planner::InputError("workload: S=" + std::to_string(w.S) + " is not a multiple of 2 x " + std::to_string(p.gpus()) +
                                " GPUs, which a head-parallel plan's rank needs (equal token parts per GPU)");
    if (const std::string e = planner::check_head_groups(p.ulysses, p.head_groups, w); !e.empty())
      throw planner::InputError("workload: " + e);
  }
}

void check_rank_group(int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw planner::InputError("rank: " + std::to_string(rank) + " is not one of " + std::to_string(ranks) + " ranks");
}

}  // namespace tasp::executor
