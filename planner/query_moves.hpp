#pragma once
// Queries moved to keys (Plan::query_moves): on 2 ranks under a plain causal mask, rank 0's late zigzag chunk (c3)
// sees the whole of rank 1's shard and nothing else of rank 1 does; sending those queries to rank 1 instead of rank
// 1's K/V to them, and their partial out (backward: dQ) back, moves 4 chunk-tensors a pass where allgather pruned moves
// 6 (docs/plan-format.md, "Queries moved"). Pure planning: no I/O.
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "planner/plan.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

// The global token range of move m's rows (its owner's query range `range`); S: the sequence's length.
Range moved_range(const Plan& p, long S, const QueryMove& m);
// Bytes a step's moved rows carry: forward out their Q, back their partial out in the workload's 16 bits and LSE in
// fp32; backward out their dO with fp32 LSE and D, back their partial dQ in 16 bits. `element_bytes` (0: the
// workload's): one width for everything, as the cpu backend moves its fp64 or fp32.
double rows_transfer_bytes(const Plan& p, const Workload& w, const RowsTransfer& x, Pass pass, int element_bytes = 0);
// Empty when the plan's query moves are well formed for sequence length S (each in range, owner != at, one move an
// owner range, the owner's other rows seeing none of `at`'s pieces under the plan's mask); else why not, naming the
// field.
std::string query_moves_error(const Plan& p, long S);
// Why allgather plan `p` (pruned for workload `w`, as allgather pruned is) cannot move its late queries (empty: it can):
// it must be allgather on 2 ranks, zigzag, causal with a plain mask, pieces cut by chunk, keeping K/V for a backward.
std::string move_queries_refusal(const Plan& p, const Workload& w);
// Rebuilds such a plan's steps with rank 0's late chunk computed at rank 1. In 2 pieces (a medium both directions
// share): forward, the rows' Q out beside the own blocks, rank 0's early piece out beside the moved rows' blocks, the
// partial out back beside rank 1's blocks on it; backward, dO out beside those blocks, their dK/dV home beside the moved
// rows' blocks, the dQ back beside rank 1's own. In 4 or more (directions apart): the early chunk in two halves, so
// that the partial out comes back beside the second going out, and the backward's dO going out beside the first half's
// dK/dV going home. Throws std::invalid_argument with move_queries_refusal's reason.
void move_late_queries(Plan& p, const Workload& w);

}  // namespace tasp::planner
