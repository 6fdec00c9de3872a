#pragma once
// Rank-level directed graph: which GPU can send to which directly (one link or through switches only).
// Dense bit matrix, because rank digraphs are small and usually complete.
#include <cstdint>
#include <vector>

namespace tasp::planner {

struct Digraph {
  int n = 0;
  std::vector<uint8_t> adj;  // adj[a*n+b] = 1 when a->b is an arc

  static Digraph empty(int n) { return Digraph{n, std::vector<uint8_t>(size_t(n) * n, 0)}; }
  static Digraph complete(int n) {
    Digraph g = empty(n);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) g.add(a, b);
    return g;
  }
  bool has(int a, int b) const { return adj[size_t(a) * n + b] != 0; }
  void add(int a, int b) { adj[size_t(a) * n + b] = 1; }
  void remove(int a, int b) { adj[size_t(a) * n + b] = 0; }
  int out_degree(int a) const {
    int d = 0;
    for (int b = 0; b < n; ++b) d += has(a, b);
    return d;
  }
  int in_degree(int b) const {
    int d = 0;
    for (int a = 0; a < n; ++a) d += has(a, b);
    return d;
  }
  long arc_count() const {
    long c = 0;
    for (uint8_t x : adj) c += x;
    return c;
  }
  bool is_complete() const { return arc_count() == long(n) * (n - 1); }
  // No set of arc-disjoint Hamiltonian cycles can be larger than the smallest in- or out-degree.
  int degree_bound() const {
    if (n == 0) return 0;
    int b = n;
    for (int v = 0; v < n; ++v) b = std::min(b, std::min(out_degree(v), in_degree(v)));
    return b;
  }
};

}  // namespace tasp::planner
