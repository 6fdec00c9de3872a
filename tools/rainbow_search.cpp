// Regenerates planner/rainbow_paths.inc: rainbow Hamiltonian paths for n % 4 == 2 (see complete_digraph.cpp).
//   tasp-rainbow-search FIRST LAST [SECONDS_EACH] > planner/rainbow_paths.inc
#include <cstdio>
#include <cstdlib>

#include "planner/rainbow_path.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FIRST LAST [SECONDS_EACH]\n", argv[0]);
    return 2;
  }
  const int first = std::atoi(argv[1]), last = std::atoi(argv[2]);
  const double secs = argc > 3 ? std::atof(argv[3]) : 600.0;
  for (int n = first + (6 - first % 4 + 4) % 4; n <= last; n += 4) {
    if (n < 10) continue;
    std::vector<int> p = tasp::planner::search_rainbow_path(n, secs);
    std::fprintf(stderr, "n=%d %s\n", n, p.empty() ? "not found" : "found");
    if (p.empty()) continue;
    std::printf("{%d,{", n);
    for (size_t i = 0; i < p.size(); ++i) std::printf("%s%d", i ? "," : "", p[i]);
    std::printf("}},\n");
    std::fflush(stdout);
  }
  return 0;
}
