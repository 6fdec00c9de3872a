#pragma once
// The token-parallel plans the slot-plan tests replay: ring, zigzag (causal only), allgather (also in 2 pieces a rank,
// PlanOptions::gather_pieces, and in 4 gathered in steps of 2, 1, 1: PlanOptions::gather_steps) and hamilton on
// complete:2 to complete:5, full and causal.
#include <gtest/gtest.h>

#include <string>

#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"

namespace tasp::testing {

// f(plan, scheme) for each, under a SCOPED_TRACE naming it.
template <class F>
void for_each_scheme_plan(F f) {
  for (const char* scheme : {"ring", "zigzag", "allgather", "hamilton"})
    for (int n : {2, 3, 4, 5})
      for (bool causal : {false, true})
        for (int pieces : {1, 2, 4}) {
          if ((std::string(scheme) == "zigzag" && !causal) || (pieces > 1 && std::string(scheme) != "allgather")) continue;
          SCOPED_TRACE(std::string(scheme) + " on " + std::to_string(n) + (causal ? " causal" : "") +
                       (pieces > 1 ? " in " + std::to_string(pieces) + " pieces" : "") + (pieces == 4 ? " (steps 2, 1, 1)" : ""));
          planner::PlanOptions o;
          o.causal = causal, o.gather_pieces = pieces;
          if (pieces == 4) o.gather_steps = {2, 1, 1};
          f(planner::build_plan(planner::load_topology("complete:" + std::to_string(n)), scheme, o), std::string(scheme));
        }
}

}  // namespace tasp::testing
