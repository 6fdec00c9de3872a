#pragma once
// Replays a plan step by step and checks DESIGN.md's semantics; knows no scheme by name.
#include <string>

#include "planner/digraph.hpp"
#include "planner/plan.hpp"

namespace tasp::planner {

struct PlanStats {
  int steps = 0;
  long transfers = 0, computes = 0;
  int max_arcs_per_step = 0;  // distinct directed rank pairs used in the busiest step
};

// Empty string when the plan is valid; otherwise the first violation, naming step and entry.
// With `arcs`, every transfer must also follow an arc of the topology's rank digraph.
// Compact ring-flow plans are checked by their rule's structure unless `replay_compact` asks for the
// step-by-step replay (tests use it to cross-check the two).
std::string verify_plan(const Plan& p, const Digraph* arcs = nullptr, PlanStats* stats = nullptr,
                        bool replay_compact = false);

}  // namespace tasp::planner
