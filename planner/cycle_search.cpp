// Arc-disjoint Hamiltonian cycles in an arbitrary digraph (tori, partial fabrics).
// Small digraphs: exhaustive packing of all Hamiltonian cycles. Otherwise randomized:
//  - symmetric digraphs (every link both ways): look for an undirected Hamiltonian cycle whose
//    complement still holds another, and use each in both directions (Kotzig's tori need exactly this);
//  - any digraph: peel off Hamiltonian cycles one at a time with a Warnsdorff DFS, restarting to keep the best.
#include <algorithm>
#include <chrono>
#include <functional>
#include <random>

#include "planner/decomposition.hpp"

namespace tasp::planner {
namespace {

using Clock = std::chrono::steady_clock;

// One Hamiltonian cycle in arcs `g` (DFS, Warnsdorff order, random ties, node budget). Empty if none found.
Cycle find_cycle(const Digraph& g, std::mt19937& rng, long budget) {
  const int n = g.n;
  if (n == 1) return {0};
  std::vector<char> vis(n, 0);
  Cycle path{int(rng() % n)};
  vis[path[0]] = 1;
  std::function<bool(int)> dfs = [&](int x) -> bool {
    if (int(path.size()) == n) return g.has(x, path[0]);
    if (--budget < 0) return false;
    std::vector<std::pair<int, int>> cand;
    for (int y = 0; y < n; ++y) {
      if (vis[y] || !g.has(x, y)) continue;
      int d = 0;
      for (int z = 0; z < n; ++z) d += !vis[z] && z != y && g.has(y, z);
      cand.push_back({d * 64 + int(rng() % 64), y});
    }
    std::sort(cand.begin(), cand.end());
    for (auto [k, y] : cand) {
      vis[y] = 1;
      path.push_back(y);
      if (dfs(y)) return true;
      path.pop_back();
      vis[y] = 0;
      if (budget < 0) return false;
    }
    return false;
  };
  return dfs(path[0]) ? path : Cycle{};
}

void remove_cycle(Digraph& g, const Cycle& c, bool both_ways) {
  for (size_t i = 0; i < c.size(); ++i) {
    int a = c[i], b = c[(i + 1) % c.size()];
    g.remove(a, b);
    if (both_ways) g.remove(b, a);
  }
}

bool symmetric(const Digraph& g) {
  for (int a = 0; a < g.n; ++a)
    for (int b = 0; b < g.n; ++b)
      if (g.has(a, b) != g.has(b, a)) return false;
  return true;
}

}  // namespace

std::vector<Cycle> exhaustive_cycle_packing(const Digraph& g) {
  const int n = g.n;
  std::vector<Cycle> all;
  Cycle p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  do {
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) ok = g.has(p[i], p[(i + 1) % n]);
    if (ok) all.push_back(p);
  } while (std::next_permutation(p.begin() + 1, p.end()));
  std::vector<uint8_t> used(size_t(n) * n, 0);
  std::vector<int> chosen, best;
  const int bound = g.degree_bound();
  std::function<void(size_t)> rec = [&](size_t from) {
    if (chosen.size() > best.size()) best = chosen;
    for (size_t i = from; i < all.size() && int(best.size()) < bound; ++i) {
      bool ok = true;
      for (int t = 0; t < n && ok; ++t) ok = !used[size_t(all[i][t]) * n + all[i][(t + 1) % n]];
      if (!ok) continue;
      for (int t = 0; t < n; ++t) used[size_t(all[i][t]) * n + all[i][(t + 1) % n]] = 1;
      chosen.push_back(int(i));
      rec(i + 1);
      chosen.pop_back();
      for (int t = 0; t < n; ++t) used[size_t(all[i][t]) * n + all[i][(t + 1) % n]] = 0;
    }
  };
  rec(0);
  std::vector<Cycle> out;
  for (int i : best) out.push_back(all[i]);
  return out;
}

Decomposition search_cycles(const Digraph& g, const SearchOptions& opt) {
  Decomposition d;
  d.upper_bound = g.degree_bound();
  if (g.n <= opt.exact_max_vertices && g.n >= 2) {
    d.cycles = exhaustive_cycle_packing(g);
    d.method = "exhaustive search";
    d.optimal = true;
    return d;
  }
  std::mt19937 rng(opt.seed);
  const auto deadline = Clock::now() + std::chrono::duration<double>(opt.seconds);
  const long budget = 50L * g.n;
  const bool sym = symmetric(g);
  while (Clock::now() < deadline && int(d.cycles.size()) < d.upper_bound) {
    Digraph rest = g;
    std::vector<Cycle> got;
    if (sym) {
      // Undirected cycles, each used in both directions.
      for (;;) {
        Cycle c = find_cycle(rest, rng, budget);
        if (c.empty() || (c.size() == 2)) break;
        remove_cycle(rest, c, true);
        got.push_back(c);
        got.push_back(Cycle(c.rbegin(), c.rend()));
      }
    }
    for (;;) {  // then plain directed cycles from whatever is left
      Cycle c = find_cycle(rest, rng, budget);
      if (c.empty()) break;
      remove_cycle(rest, c, false);
      got.push_back(c);
    }
    if (got.size() > d.cycles.size()) d.cycles = got;
  }
  d.method = sym ? "randomized search (undirected pairs, then directed)" : "randomized search";
  d.optimal = int(d.cycles.size()) == d.upper_bound;
  if (!d.optimal)
    d.note = "search found " + std::to_string(d.cycles.size()) + " of at most " + std::to_string(d.upper_bound) +
             " cycles (bound: smallest in/out degree)";
  return d;
}

}  // namespace tasp::planner
