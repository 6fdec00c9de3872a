#include "planner/verify_decomposition.hpp"

#include <sstream>

namespace tasp::planner {
namespace {

std::string check_walks(const Digraph& g, const std::vector<std::vector<int>>& walks, bool closed) {
  const char* what = closed ? "cycle" : "path";
  std::vector<uint8_t> used(size_t(g.n) * g.n, 0);
  for (size_t w = 0; w < walks.size(); ++w) {
    const auto& c = walks[w];
    std::ostringstream err;
    if (int(c.size()) != g.n) {
      err << what << " " << w << " has " << c.size() << " vertices, the graph has " << g.n;
      return err.str();
    }
    std::vector<uint8_t> seen(g.n, 0);
    for (int v : c) {
      if (v < 0 || v >= g.n) {
        err << what << " " << w << " names vertex " << v << ", outside 0.." << g.n - 1;
        return err.str();
      }
      if (seen[v]) {
        err << what << " " << w << " visits vertex " << v << " twice";
        return err.str();
      }
      seen[v] = 1;
    }
    const size_t arcs = closed ? c.size() : c.size() - 1;
    if (closed && g.n == 1) continue;
    for (size_t i = 0; i < arcs; ++i) {
      int a = c[i], b = c[(i + 1) % c.size()];
      if (!g.has(a, b)) {
        err << what << " " << w << " uses arc " << a << "->" << b << ", which the topology lacks";
        return err.str();
      }
      uint8_t& u = used[size_t(a) * g.n + b];
      if (u) {
        err << what << " " << w << " reuses arc " << a << "->" << b;
        return err.str();
      }
      u = 1;
    }
  }
  return {};
}

}  // namespace

std::string check_cycles(const Digraph& g, const std::vector<std::vector<int>>& cycles) {
  return check_walks(g, cycles, true);
}
std::string check_paths(const Digraph& g, const std::vector<std::vector<int>>& paths) {
  return check_walks(g, paths, false);
}

}  // namespace tasp::planner
