#pragma once
// Replays a plan step by step and checks DESIGN.md's semantics; knows no scheme by name.
#include <string>

#include "planner/digraph.hpp"
#include "planner/plan.hpp"

namespace tasp::planner {

struct PassStats {
  int steps = 0;
  long transfers = 0;       // K/V pieces
  long grad_transfers = 0;  // dK/dV accumulators (backward)
  long computes = 0;
  int max_arcs_per_step = 0;  // distinct directed rank pairs used in the busiest step
};

struct PlanStats : PassStats {  // the forward's figures, and the backward's when the plan has one
  PassStats backward;
};

// Empty string when the plan is valid; otherwise the first violation, naming pass, step and entry.
// With `arcs`, every transfer must also follow an arc of the topology's rank digraph.
// Compact ring-flow plans are checked by their rule's structure unless `replay_compact` asks for the
// step-by-step replay (tests use it to cross-check the two). The backward part, when the plan has one,
// is checked unless `check_backward` is false.
std::string verify_plan(const Plan& p, const Digraph* arcs = nullptr, PlanStats* stats = nullptr,
                        bool replay_compact = false, bool check_backward = true);

}  // namespace tasp::planner
