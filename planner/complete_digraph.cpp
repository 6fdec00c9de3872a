// Constructions of K_n* into n-1 arc-disjoint directed Hamiltonian cycles.
//   n odd:        Walecki's cycles over {inf} + Z_{n-1}, all translates of one base cycle.
//   n even >= 8:  insert vertex n-1 into each cycle of the odd K_{n-1}* at one arc; the removed arcs
//                 must form a Hamiltonian path using one arc of every cycle (a "rainbow" path), which
//                 closes the last cycle through the new vertex.
//                 n % 4 == 0: the cut positions are TASP's closed form (default cut, four exceptions).
//                 n % 4 == 2: a rainbow path from the table in rainbow_paths.inc (found offline by
//                 tools/rainbow_search, checked here like any other), else a bounded search.
//   n = 2:        the single 2-cycle.  n = 4, 6: no decomposition; the most disjoint cycles (exhaustive).
#include <algorithm>
#include <map>
#include <stdexcept>

#include "planner/decomposition.hpp"
#include "planner/rainbow_path.hpp"

namespace tasp::planner {
namespace {

int mod(long x, long m) { return int(((x % m) + m) % m); }

// Walecki's base sequence over Z_q (q even): 0, 1, -1, 2, -2, ..., q/2.
std::vector<int> zigzag(int q) {
  std::vector<int> a(q);
  for (int p = 0; p < q; ++p) a[p] = p == 0 ? 0 : (p % 2 ? (p + 1) / 2 : mod(-(p / 2), q));
  return a;
}

// owner[x*m+y] = index of the cycle that uses arc x->y.
std::vector<int> arc_owner(const std::vector<Cycle>& cycles, int m) {
  std::vector<int> owner(size_t(m) * m, -1);
  for (size_t j = 0; j < cycles.size(); ++j)
    for (size_t i = 0; i < cycles[j].size(); ++i)
      owner[size_t(cycles[j][i]) * m + cycles[j][(i + 1) % cycles[j].size()]] = int(j);
  return owner;
}

// Given one removed arc per base cycle that together form a Hamiltonian path, build the n cycles.
std::vector<Cycle> insert_along_path(const std::vector<Cycle>& base, const std::vector<int>& path, int newv) {
  const int m = newv;  // base cycles live on 0..m-1
  std::vector<int> owner = arc_owner(base, m);
  std::vector<int> cut(base.size(), -1);  // position of the removed arc's head in each cycle
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    int j = owner[size_t(path[i]) * m + path[i + 1]];
    if (j < 0 || cut[j] >= 0) throw std::logic_error("insertion path is not rainbow");
    const Cycle& c = base[j];
    cut[j] = int(std::find(c.begin(), c.end(), path[i + 1]) - c.begin());
  }
  std::vector<Cycle> out;
  for (size_t j = 0; j < base.size(); ++j) {
    if (cut[j] < 0) throw std::logic_error("insertion path misses a cycle");
    Cycle c;
    const Cycle& b = base[j];
    for (size_t i = 0; i < b.size(); ++i) c.push_back(b[(cut[j] + i) % b.size()]);
    c.push_back(newv);  // ... x -> newv -> y ...
    out.push_back(std::move(c));
  }
  Cycle last{newv};
  last.insert(last.end(), path.begin(), path.end());
  out.push_back(std::move(last));
  return out;
}

// TASP's cut positions for n % 4 == 0 (cycle j drops the arc into position shift_j), as a path.
std::vector<int> tasp_path(const std::vector<Cycle>& base, int n) {
  const int k = n / 4 - 1, m = n - 1;
  std::map<int, int> exceptions{{0, 1}, {k + 1, 4 * k + 2}, {2 * k + 2, 3}, {3 * k + 2, 4 * k}};
  std::vector<int> next(m, -1), has_in(m, 0);
  for (int j = 0; j < int(base.size()); ++j) {
    int s = exceptions.count(j) ? exceptions[j] : 2 * k;
    int x = base[j][mod(s - 1, m)], y = base[j][mod(s, m)];
    next[x] = y;
    has_in[y] = 1;
  }
  int v = int(std::find(has_in.begin(), has_in.end(), 0) - has_in.begin());
  std::vector<int> path;
  while (v >= 0 && int(path.size()) <= m) {
    path.push_back(v);
    v = next[v];
  }
  return path;
}

}  // namespace

std::vector<Cycle> walecki_cycles(int n) {
  if (n < 3 || n % 2 == 0) throw std::invalid_argument("walecki_cycles needs odd n >= 3");
  const int q = n - 1, inf = n - 1;
  std::vector<int> a = zigzag(q);
  std::vector<Cycle> cycles;
  for (int j = 0; j < q; ++j) {
    Cycle c{inf};
    for (int p = 0; p < q; ++p) c.push_back(mod(a[p] + j, q));
    cycles.push_back(std::move(c));
  }
  return cycles;
}

std::vector<Cycle> insertion_cycles(int n) {
  if (n < 8 || n % 2) throw std::invalid_argument("insertion_cycles needs even n >= 8");
  std::vector<Cycle> base = walecki_cycles(n - 1);
  std::vector<int> path;
  if (n % 4 == 0) {
    path = tasp_path(base, n);
  } else {
    path = rainbow_path_from_table(n);
    if (path.empty()) path = search_rainbow_path(n, 5.0);
    if (path.empty()) return {};
  }
  return insert_along_path(base, path, n - 1);
}

int max_disjoint_hamiltonian_cycles_exhaustive(int n, std::vector<Cycle>* best) {
  std::vector<Cycle> found = exhaustive_cycle_packing(Digraph::complete(n));
  if (best) *best = found;
  return int(found.size());
}

Decomposition decompose_complete(int n) {
  if (n < 1) throw std::invalid_argument("a complete digraph needs at least one vertex");
  Decomposition d;
  d.upper_bound = n - 1;
  if (n == 1) {
    d.method = "trivial";
    d.optimal = true;
    return d;
  }
  if (n == 2) {
    d.cycles = {{0, 1}};
    d.method = "2-cycle";
  } else if (n % 2 == 1) {
    d.cycles = walecki_cycles(n);
    d.method = "walecki (n odd)";
  } else if (n == 4 || n == 6) {
    max_disjoint_hamiltonian_cycles_exhaustive(n, &d.cycles);
    d.method = "exhaustive search";
    d.optimal = true;
    const int idle = n * (n - 1) - n * int(d.cycles.size());
    d.note = "K_" + std::to_string(n) + "* has no decomposition into " + std::to_string(n - 1) +
             " Hamiltonian cycles (exhaustive search): using the maximum, " + std::to_string(d.cycles.size()) +
             " rings; the other " + std::to_string(idle) +
             " arcs cannot carry a piece to every rank and stay idle";
    return d;
  } else {
    d.cycles = insertion_cycles(n);
    d.method = n % 4 == 0 ? "insertion into walecki K_{n-1}*, TASP cut positions (n%4==0)"
                          : "insertion into walecki K_{n-1}*, rainbow path (n%4==2)";
    if (d.cycles.empty()) {
      // No rainbow path within the budget: insert the new vertex at a fixed position of every
      // cycle (distinct tails and heads), which gives n-2 rings, one short of the bound.
      std::vector<Cycle> base = walecki_cycles(n - 1);
      for (Cycle c : base) {
        c.insert(c.begin() + 2, n - 1);
        d.cycles.push_back(std::move(c));
      }
      d.method = "insertion into walecki K_{n-1}*, fixed cut (fallback)";
      d.note = "no rainbow path found within the search budget: n-2 rings, the bound is n-1";
    }
  }
  d.optimal = int(d.cycles.size()) == d.upper_bound;
  return d;
}

}  // namespace tasp::planner
