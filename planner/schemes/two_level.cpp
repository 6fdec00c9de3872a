// Two-level rings for U x M clusters: Hamiltonian paths inside nodes joined along the rails.
#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

Plan build_two_level(const Topology& t, bool causal, Layout layout, bool expand_steps, ClusterRings* used) {
  if (t.family != "cluster" && !(t.nodes >= 2 && t.gpus_per_node > 0))
    throw InputError(t.source + ": two-level needs a cluster (nodes of equal size)");
  const int u = t.nodes, m = t.gpus_per_node;
  if (u < 2) throw InputError(t.source + ": two-level needs at least two nodes");
  // Ranks are numbered node-major in clusters: rank = node*m + local.
  for (int r = 0; r < t.ranks(); ++r)
    if (t.gpu(r).node * m + r % m != r || t.gpu(r).node >= u)
      throw InputError(t.source + ": two-level needs GPUs listed node by node (rank = node*M + local)");
  ClusterRings cr = cluster_rings(u, m);
  Plan p = ring_flow_plan("two-level", cr.rings, causal, layout, expand_steps);
  p.topology = t.source;
  p.note = cr.note;
  if (used) *used = cr;
  return p;
}

}  // namespace tasp::planner
