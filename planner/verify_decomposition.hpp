#pragma once
// Independent checks of decompositions: written without reference to how any construction works.
#include <string>
#include <vector>

#include "planner/digraph.hpp"

namespace tasp::planner {

// Empty string when every cycle is Hamiltonian in g and no arc is used twice; else the first violation.
std::string check_cycles(const Digraph& g, const std::vector<std::vector<int>>& cycles);
// Same for Hamiltonian paths (no closing arc).
std::string check_paths(const Digraph& g, const std::vector<std::vector<int>>& paths);

}  // namespace tasp::planner
