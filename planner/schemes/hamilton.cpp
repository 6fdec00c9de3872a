// Hamilton attention (TASP): one piece per arc-disjoint Hamiltonian ring of the fabric, all rings at once.
#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

Plan build_hamilton(const Topology& t, bool causal, Layout layout, bool expand_steps, Decomposition* used) {
  const int n = t.ranks();
  Digraph g = rank_digraph(t);
  Decomposition d = g.is_complete() ? decompose_complete(n) : search_cycles(g);
  if (d.cycles.empty()) {
    if (n == 1) d.cycles = {{0}};
    else throw InputError(t.source + ": no Hamiltonian cycle found in the rank digraph: hamilton does not apply");
  }
  Plan p = ring_flow_plan("hamilton", d.cycles, causal, layout, expand_steps);
  p.topology = t.source;
  p.note = d.method + (d.note.empty() ? "" : "; " + d.note);
  if (used) *used = d;
  return p;
}

}  // namespace tasp::planner
