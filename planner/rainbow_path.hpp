#pragma once
// Rainbow Hamiltonian paths in Walecki's decomposition of K_{n-1}* (n % 4 == 2): the one piece of the
// even-order construction that has no closed form here yet. See complete_digraph.cpp.
#include <vector>

namespace tasp::planner {

// Path over vertices 0..n-2 (vertex n-2 is Walecki's infinity), or empty when the table has no entry.
std::vector<int> rainbow_path_from_table(int n);
// Backtracking with Warnsdorff ordering and budgeted restarts; empty if nothing within `seconds`.
std::vector<int> search_rainbow_path(int n, double seconds, unsigned seed = 0);

}  // namespace tasp::planner
