// Constructions of K_n* into n-1 arc-disjoint directed Hamiltonian cycles.
//   n odd:        Walecki's cycles over {inf} + Z_{n-1}, all translates of one base cycle.
//   n even >= 8:  insert vertex n-1 into each cycle of the odd K_{n-1}* at one arc; the removed arcs
//                 must form a Hamiltonian path using one arc of every cycle (a "rainbow" path), which
//                 closes the last cycle through the new vertex.
//                 n % 4 == 0: the cut positions are TASP's closed form (default cut, four exceptions).
//                 n % 4 == 2: our closed form (step_two_path below), proven there and checked by the verifier.
//   n = 2:        the single 2-cycle.  n = 4, 6: no decomposition; the most disjoint cycles (exhaustive).
#include <algorithm>
#include <map>
#include <stdexcept>

#include "planner/decomposition.hpp"

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

// n % 4 == 2, q = n - 2 (a multiple of 4), h = q / 2: the rainbow path
//   inf, h+1, h+3, ..., q-1, 0, 1, 3, ..., h-1, h, h+2, ..., q-2, 2, 4, ..., h-2
// (four runs of step 2 over the odd and even halves, joined by steps of 1 and one step of 4).
// Why it is rainbow: in Walecki's K_{q+1}* the arc u -> u+d (d in 1..q-1) lies in cycle
// u + floor(d/2) + (d even ? h : 0) mod q, inf -> y in cycle y, x -> inf in x + h. The step-2 arcs of the four
// runs lie in u + h + 1: the evens 2..h-2 and h+2..q-2 and the odds 1..h-3 and h+3..q-3; the joins
// inf -> h+1, q-1 -> 0, 0 -> 1, h-1 -> h and q-2 -> 2 lie in h+1, q-1, 0, h-1 and h. With h even that is
// every cycle once. (Found by searching paths made of a few arithmetic runs; checked for every such n to 3002.)
std::vector<int> step_two_path(int n) {
  const int q = n - 2, h = q / 2;
  std::vector<int> path{q};  // q is Walecki's infinity
  for (int v = h + 1; v < q; v += 2) path.push_back(v);
  path.push_back(0);
  for (int v = 1; v < h; v += 2) path.push_back(v);
  for (int v = h; v < q; v += 2) path.push_back(v);
  for (int v = 2; v < h; v += 2) path.push_back(v);
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
  return insert_along_path(base, n % 4 == 0 ? tasp_path(base, n) : step_two_path(n), n - 1);
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
                          : "insertion into walecki K_{n-1}*, step-two rainbow path (n%4==2)";
  }
  d.optimal = int(d.cycles.size()) == d.upper_bound;
  return d;
}

}  // namespace tasp::planner
