#pragma once
// One builder per scheme; all of them produce plain tasp-plan/1 plans.
#include <string>
#include <vector>

#include "planner/decomposition.hpp"
#include "planner/plan.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

struct PlanOptions {
  bool causal = false;
  bool layout_given = false;  // otherwise zigzag when causal (without a window), contiguous when not
  Layout layout = Layout::Contiguous;
  int expand_max_ranks = 128;  // expanded steps up to this many ranks, compact above
  bool backward = true;        // also plan the backward (add_backward)
  // The backward's dK/dV accumulators in transit: 4 (fp32) or 2 (bf16); 0: by scheme, bf16 for allgather (each
  // accumulator is summed once, at its owner, from fp32 partial sums), fp32 for the rings (sums over many hops).
  int accumulator_bytes = 0;
  // allgather: keep the forward's gathered K/V for the backward (no second gather), unless the rank's memory for
  // the workload would then pass `memory_budget_bytes` (0: no limit; planner::rank_memory).
  bool keep_kv = true;
  double memory_budget_bytes = 0;
  // allgather: each rank's shard in this many pieces, gathered (and their dK/dV sent home) one piece a step beside
  // the compute on the pieces before it (planner/schemes/allgather.cpp); 1: the whole shard in one step.
  int gather_pieces = 1;
  // allgather: the pieces each forward step gathers, summing to gather_pieces, e.g. {3, 2, 1} (Plan::gather_steps);
  // empty: one a step.
  std::vector<int> gather_steps = {};
  double max_bytes = 8.0 * (1 << 30);  // refuse plans whose building would take more memory than this
  // usp: GPUs per head-parallel group (0: the GPUs of a node) and the scheme across groups.
  int ulysses = 0;
  std::string inner = "hamilton";
  // Head-parallel plans: heads cut into this many groups, pipelined against the all-to-alls (Plan::head_groups).
  int head_groups = 1;
  // With documents or a window (and its S), the plan is pruned for that mask (planner/prune.hpp).
  Workload workload{};
  // Prune for a plain mask too (a causal mask alone, or none; needs the workload's S): a rank gets only the K/V its
  // queries see and returns only the dK/dV they made (under a causal zigzag layout on 2 ranks, 3/4 of the bytes). Not for
  // allgather, whose backward keeps the forward's K/V instead (a pruned backward moves K/V on its own terms: it
  // would gather them again, doubling its bytes).
  bool prune_plain = false;
  // allgather pruned for the plain causal mask on 2 ranks: rank 0's late chunk's queries computed at rank 1 instead of
  // rank 1's K/V sent to them (planner/query_moves.hpp): 4 chunk-tensors a pass where pruning alone moves 6.
  bool move_queries = false;
  // Set by the head-parallel builders for the plan across groups: GPUs per rank (Plan::ulysses), so that its token
  // split, and any pruning for a mask, are the head-parallel plan's (planner/layout.hpp, Split::sub).
  int head_slots = 1;
};

// Memory that building (and verifying) a scheme's plan on a topology takes: the rank digraph (n^2 bytes),
// the rings, and the listed steps when the plan is expanded.
double plan_memory_bytes(const Topology& t, const std::string& scheme, const PlanOptions& o);

Plan build_ring(const Topology& t, bool causal, Layout layout, bool expand_steps);
Plan build_zigzag(const Topology& t, bool expand_steps);
Plan build_allgather(int n, bool causal, Layout layout, bool expand_steps, int pieces = 1, const std::vector<int>& steps = {});
// allgather's forward steps as piece ranges [begin, end) of every rank's shard (Plan::gather_steps; one piece a step
// without them); the keeping backward takes their sizes last first.
std::vector<std::pair<int, int>> gather_groups(const Plan& p);
// Why `steps` cannot be allgather's gather_steps for `pieces` pieces a rank ("" if it can): each at least 1, summing to
// `pieces` (empty: one a step).
std::string gather_steps_error(const std::vector<int>& steps, int pieces);
// "2+1+1": how `tasp run`, `simulate`'s choice and runs CSVs write gather steps.
std::string gather_steps_text(const std::vector<int>& steps);
Step allgather_step(const Plan& p, int t);
Step allgather_backward_step(const Plan& p, int t);
// Hamilton: rings from the topology's rank digraph (constructions for complete ones, search otherwise).
Plan build_hamilton(const Topology& t, bool causal, Layout layout, bool expand_steps, Decomposition* used = nullptr);
// Two-level: cluster rings (paths inside nodes, rails between them).
Plan build_two_level(const Topology& t, bool causal, Layout layout, bool expand_steps, ClusterRings* used = nullptr);

const std::vector<std::string>& scheme_names();  // ring, zigzag, allgather, hamilton, two-level, ulysses, usp
bool scheme_applies(const std::string& scheme, const Topology& t, bool causal, std::string* why);
// Any scheme by name; throws InputError naming the problem when the scheme does not fit.
Plan build_plan(const Topology& t, const std::string& scheme, const PlanOptions& o);

}  // namespace tasp::planner
