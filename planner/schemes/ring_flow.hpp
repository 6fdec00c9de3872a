#pragma once
// The flow shared by every ring-based scheme: with rings R_0..R_{k-1} and each rank's KV cut into k
// pieces, piece c of every rank travels around R_c. At step t rank x holds, on ring c, the piece of
// owner R_c[pos_c(x) - t], computes on it, and forwards it to its successor. Ring attention is k = 1.
#include "planner/plan.hpp"

namespace tasp::planner {

Plan ring_flow_plan(const std::string& scheme, std::vector<std::vector<int>> rings, bool causal, Layout layout,
                    bool expand_steps);
Step ring_flow_step(const Plan& p, int t);

}  // namespace tasp::planner
