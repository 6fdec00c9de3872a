#include "planner/head_parallel.hpp"

#include <algorithm>

#include "planner/digraph.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

std::string check_heads(int u, const Workload& w) {
  const std::string uu = std::to_string(u);
  if (u < 1) return "head-parallel degree must be >= 1";
  if (w.H % u) return "H=" + std::to_string(w.H) + " does not split over " + uu + " GPUs (Ulysses needs H % degree == 0)";
  if (w.Hkv % u == 0) return {};
  if (u % w.Hkv)
    return "Hkv=" + std::to_string(w.Hkv) + " neither splits over " + uu + " GPUs nor divides " + uu +
           " (to replicate K/V heads)";
  // Replicated: a slot's H/u query heads must all belong to the one K/V head it holds.
  if ((w.H / w.Hkv) % (w.H / u)) return "the query heads of a slot would span two K/V heads";
  return {};
}

std::string check_head_groups(int u, int groups, const Workload& w) {
  const std::string gg = std::to_string(groups);
  if (groups < 1) return "head groups must be >= 1";
  if (w.H % groups || w.Hkv % groups)
    return "H=" + std::to_string(w.H) + " and Hkv=" + std::to_string(w.Hkv) + " do not both split into " + gg + " head groups";
  const std::string e = check_heads(u, head_group_workload(groups, w));
  return e.empty() || groups == 1 ? e : "in each of " + gg + " head groups: " + e;
}

Workload head_group_workload(int groups, const Workload& w) {
  Workload g = w;
  g.H = w.H / groups, g.Hkv = w.Hkv / groups;
  return g;
}

HeadSlice head_slice(int u, const Workload& w, int slot) {
  HeadSlice s;
  s.q_heads = w.H / u;
  s.q_begin = slot * s.q_heads;
  if (w.Hkv % u == 0) {
    s.kv_heads = w.Hkv / u;
    s.kv_begin = slot * s.kv_heads;
  } else {
    s.kv_heads = 1;
    s.kv_replicas = u / w.Hkv;
    s.kv_begin = s.q_begin / (w.H / w.Hkv);
  }
  return s;
}

Workload slot_workload(int u, const Workload& w) {
  Workload s = w;
  const HeadSlice h = head_slice(u, w, 0);
  s.H = h.q_heads;
  s.Hkv = h.kv_heads;
  return s;
}

A2aBytes a2a_bytes_per_peer(int u, const Workload& w, double tokens, bool grads16) {
  const HeadSlice h = head_slice(u, w, 0);
  const double row = double(w.B) * tokens * w.D * w.dtype_bytes;
  A2aBytes b;
  b.fwd_in = row * (h.q_heads + 2.0 * h.kv_heads);
  b.fwd_out = row * h.q_heads;
  b.bwd_in = row * h.q_heads;
  b.bwd_out = row * (h.q_heads + 2.0 * h.kv_heads);
  const double eq = double(u) * w.B * tokens * w.D * h.q_heads, ekv = double(u) * w.B * tokens * w.D * h.kv_heads;
  const double s = w.dtype_bytes;
  b.fwd_in_copy = (eq + 2 * ekv) * 4 * s;                              // pack and unpack: read and write
  b.fwd_out_copy = eq * ((4 + s) + 2 * s);                              // O leaves fp32
  b.bwd_in_copy = eq * 4 * s;
  // dQ leaves the kernels in 16 bits (attention_backward_finish16), dK/dV too with `grads16`, else from fp32.
  b.bwd_out_copy = eq * 4 * s + 2 * ekv * (grads16 ? 4 * s : (4 + s) + 2 * s);
  return b;
}

Digraph group_digraph(const Digraph& gpus, int u, std::string* why) {
  const int n = gpus.n / u;
  Digraph g = Digraph::empty(n);
  why->clear();
  for (int a = 0; a < n; ++a)
    for (int i = 0; i < u; ++i)
      for (int j = 0; j < u; ++j)
        if (i != j && !gpus.has(a * u + i, a * u + j)) {
          *why = "GPUs " + std::to_string(a * u) + ".." + std::to_string(a * u + u - 1) + " are not all connected pairwise";
          return Digraph::empty(n);
        }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      bool all = a != b;
      for (int i = 0; i < u && all; ++i) all = gpus.has(a * u + i, b * u + i);
      if (all) g.add(a, b);
    }
  return g;
}

Plan build_ulysses(const Topology& t, const PlanOptions& o) {
  if (!rank_digraph(t).is_complete())
    throw InputError(t.source + ": ulysses needs every GPU pair connected (its all-to-all); this topology is not");
  // One group: the steps are a single rank's local attention (an all-gather plan of one rank).
  PlanOptions one = o;
  one.head_slots = t.ranks();
  Plan p = build_plan(load_topology("complete:1"), "allgather", one);
  p.scheme = "ulysses";
  p.topology = t.source;
  p.ulysses = t.ranks();
  p.head_groups = std::max(1, o.head_groups);
  p.note = "Ulysses: all-to-all to head shards, local attention over all S tokens, all-to-all back";
  return p;
}

Plan build_usp(const Topology& t, const std::string& inner, int u, const PlanOptions& opt) {
  const int n = t.ranks();
  if (u < 1 || n % u) throw InputError(t.source + ": usp: ulysses " + std::to_string(u) + " does not divide the " + std::to_string(n) + " GPUs into groups");
  if (inner == "usp" || inner == "ulysses") throw InputError("usp: the scheme across groups must be a ring scheme, not " + inner);
  const int g = n / u;
  if (g < 2) throw InputError(t.source + ": usp needs at least two groups (use ulysses for one)");
  std::string why;
  const Digraph groups = group_digraph(rank_digraph(t), u, &why);
  if (!why.empty() || !groups.is_complete())
    throw InputError(t.source + ": usp with groups of " + std::to_string(u) +
                     " needs every pair inside a group and every same-slot pair across groups connected" +
                     (why.empty() ? "" : " (" + why + ")"));
  // Across groups the slots see a complete fabric (on a cluster: one rail each); the inner scheme is planned
  // there. Two-level keeps the node structure when groups are smaller than nodes.
  const bool nodes_of_groups = t.nodes >= 2 && t.gpus_per_node > u && t.gpus_per_node % u == 0;
  const Topology gt = load_topology(inner == "two-level" && nodes_of_groups
                         ? "cluster:" + std::to_string(t.nodes) + "x" + std::to_string(t.gpus_per_node / u)
                         : "complete:" + std::to_string(g));
  PlanOptions o = opt;
  o.expand_max_ranks = n <= opt.expand_max_ranks ? 1 << 30 : 0;
  o.head_slots = u;
  Plan p = build_plan(gt, inner, o);
  p.scheme = "usp";
  p.ulysses = u;
  p.head_groups = std::max(1, opt.head_groups);
  p.topology = t.source;
  p.note = "usp: Ulysses over groups of " + std::to_string(u) + " GPUs, " + inner + " across the " + std::to_string(g) +
           " groups" + (p.note.empty() ? "" : "; " + p.note);
  return p;
}

}  // namespace tasp::planner
