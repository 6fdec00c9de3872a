// Ring attention: one ring, one piece per rank. 0 -> 1 -> ... -> n-1 -> 0 where the topology has those
// arcs, otherwise any Hamiltonian cycle of its rank digraph (tori).
#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

static std::vector<int> ring_order(const Topology& t) {
  const int n = t.ranks();
  Digraph g = rank_digraph(t);
  bool identity = true;
  for (int r = 0; r < n && identity && n > 1; ++r) identity = g.has(r, (r + 1) % n);
  std::vector<int> ring(n);
  for (int r = 0; r < n; ++r) ring[r] = r;
  if (identity) return ring;
  SearchOptions o;
  o.exact_max_vertices = 0;
  o.seconds = 1.0;
  Decomposition d = search_cycles(g, o);
  if (d.cycles.empty()) throw InputError(t.source + ": the topology has no Hamiltonian cycle for a ring");
  return d.cycles[0];
}

Plan build_ring(const Topology& t, bool causal, Layout layout, bool expand_steps) {
  return ring_flow_plan("ring", {ring_order(t)}, causal, layout, expand_steps);
}

}  // namespace tasp::planner
