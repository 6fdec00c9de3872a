#pragma once
// The fewest bytes the busiest GPU can send per pass for a plan's kind of exchange, under a plain mask: what `tasp run`
// and `tasp simulate` print beside the plan's own bytes (issue 41's "bytes at the minimum, per scheme").
// - Token-parallel plans (rings, allgather, two-level): every GPU needs the other n-1 shards' K/V, so the GPUs send
//   (n-1) K/V shards each on average, the busiest at least that. A backward that keeps the forward's K/V needs only
//   the others' partial dK/dV sums back at their owners ((n-1) shards at the accumulators' width); one that does not
//   moves the K/V again as well.
// - Ulysses (head-parallel on every GPU): (n-1)/n of each GPU's Q, K, V and O shards forward, of dO, dQ, dK and dV
//   backward, in their 16 bits (each head's gradients are whole on one GPU).
// - Queries moved to keys (Plan::query_moves, 2 ranks): the owner sends the moved rows' Q (backward: dO, LSE and D)
//   and the K/V its `at`'s own rows see; `at` sends their partial out and LSE (backward: their partial dQ and the
//   dK/dV of those K/V at the accumulators' width); each tensor once, in its storage type.
// Masks that leave blocks out (documents, windows; a causal mask on a contiguous layout) need less, and a plan pruned
// for them may send less than this. Hybrids of both (usp) have none here.
#include <optional>

#include "planner/plan.hpp"
#include "planner/timeline.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

// `element_bytes` (0: the workload's 16 bits and the plan's accumulators): one width for everything that moves, as
// the cpu backend moves its fp64 or fp32.
std::optional<Timeline::PassBytes> minimum_sent_bytes(const Plan& p, const Workload& w, int element_bytes = 0);

}  // namespace tasp::planner
