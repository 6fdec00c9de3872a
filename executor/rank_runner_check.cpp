// The plan checks of a rank runner (rank_runner.hpp), the same with or without CUDA.
#include <string>
#include <vector>

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

std::string remask_refusal(const planner::Plan& p, const planner::Workload& w, const std::vector<long>& docs) {
  if (p.ulysses > 1) return "plan: head-parallel (ulysses, usp): its documents are its plan's";
  if (p.pruned.any()) return "plan: pruned for its own mask (documents or a window): its steps skip what that mask hides";
  if (p.layout == planner::Layout::ZigzagDocs) return "plan: its token order follows its documents (layout zigzag-docs)";
  long sum = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (docs[i] <= 0) return "documents: length " + std::to_string(i) + " is " + std::to_string(docs[i]) + " (must be positive)";
    sum += docs[i];
  }
  if (!docs.empty() && sum != w.S)
    return "documents: lengths sum to " + std::to_string(sum) + ", the workload's S is " + std::to_string(w.S);
  return "";
}

std::vector<long> document_lengths(const long long* cu, size_t count) {
  if (count == 0) return {};
  if (!cu) throw planner::InputError("cu_seqlens: NULL with " + std::to_string(count) + " offsets");
  if (count == 1) throw planner::InputError("cu_seqlens: one offset; expected [0, ..., S] (none: one sequence)");
  if (cu[0] != 0) throw planner::InputError("cu_seqlens: starts at " + std::to_string(cu[0]) + ", not 0");
  std::vector<long> docs;
  for (size_t i = 1; i < count; ++i) {
    if (cu[i] <= cu[i - 1])
      throw planner::InputError("cu_seqlens: offset " + std::to_string(i) + " (" + std::to_string(cu[i]) +
                                ") is not past offset " + std::to_string(i - 1) + " (" + std::to_string(cu[i - 1]) + ")");
    docs.push_back(long(cu[i] - cu[i - 1]));
  }
  return docs;
}

void check_rank_group(int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw planner::InputError("rank: " + std::to_string(rank) + " is not one of " + std::to_string(ranks) + " ranks");
}

}  // namespace tasp::executor
