#pragma once
// The flow shared by every ring-based scheme: with rings R_0..R_{k-1} and each rank's KV cut into k
// pieces, piece c of every rank travels around R_c. At step t rank x holds, on ring c, the piece of
// owner R_c[pos_c(x) - t], computes on it, and forwards it to its successor. Ring attention is k = 1.
//
// Backward: the same K/V flow, and each piece's dK/dV accumulator one hop behind it from the first rank after its
// owner. At step t >= 2 rank R[i] sends the accumulator of the piece it computed at step t - 1 to R[i+1], which adds
// it to its own block's contribution at the end of the step; step n returns each accumulator from the last rank
// that used it to its owner, which adds it to the contribution of its own block (computed at step 0 and kept). n + 1
// steps, n - 1 hops an accumulator: the fewest that sum n ranks' parts at the owner. (ring-flash-attention's order
// starts the accumulator at the owner and carries it all around, n hops: twice the accumulator bytes on 2 GPUs,
// 320 against 192 MiB a GPU at B=1 S=8192 H=32 in fp32, for no step less.)
#include "planner/plan.hpp"

namespace tasp::planner {

Plan ring_flow_plan(const std::string& scheme, std::vector<std::vector<int>> rings, bool causal, Layout layout,
                    bool expand_steps);
Step ring_flow_step(const Plan& p, int t);
Step ring_flow_backward_step(const Plan& p, int t);

}  // namespace tasp::planner
