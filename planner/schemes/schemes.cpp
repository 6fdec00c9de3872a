#include "planner/schemes/schemes.hpp"

#include "planner/head_parallel.hpp"
#include "planner/prune.hpp"
#include "planner/query_moves.hpp"
#include "planner/rank_memory.hpp"

#include <algorithm>
#include <cstdio>

namespace tasp::planner {

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> s{"ring", "zigzag", "allgather", "hamilton", "two-level", "ulysses", "usp"};
  return s;
}

bool scheme_applies(const std::string& scheme, const Topology& t, bool causal, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (scheme == "zigzag" && !causal) return no("zigzag is the causal variant of ring (use --causal)");
  if (scheme == "two-level" && !(t.nodes >= 2 && t.gpus_per_node > 0)) return no("two-level needs a cluster of equal nodes");
  if ((scheme == "allgather" || scheme == "ulysses") && !rank_digraph(t).is_complete())
    return no(scheme + " needs every GPU pair connected directly or through switches; this topology is not");
  if (scheme == "usp" && !(t.ranks() >= 4 && rank_digraph(t).is_complete()))
    return no("usp needs at least 4 GPUs, every pair connected (Ulysses groups and a ring scheme across them)");
  if (scheme == "ring" || scheme == "allgather" || scheme == "hamilton" || scheme == "zigzag" || scheme == "two-level" ||
      scheme == "ulysses" || scheme == "usp")
    return true;
  return no("unknown scheme '" + scheme + "'");
}

double plan_memory_bytes(const Topology& t, const std::string& scheme, const PlanOptions& o) {
  const double n = t.ranks();
  // Rings: as many as the ranks' degree allows (n - 1 on a complete fabric), a piece per ring and rank.
  const double k = scheme == "hamilton" || scheme == "two-level" ? std::max(1.0, n - 1) : 1;
  const bool listed = t.ranks() <= o.expand_max_ranks;
  // A listed step holds every rank's transfers and computes (about 32 bytes each), the backward about twice.
  const double pieces = scheme == "allgather" ? n * std::max(1, o.gather_pieces) : k;
  const double steps = listed ? n * n * pieces * 32 * (o.backward ? 3 : 1) : 0;
  return n * n + k * n * 4 + steps;
}

Plan build_plan(const Topology& t, const std::string& scheme, const PlanOptions& o) {
  const int n = t.ranks();
  const bool ex = n <= o.expand_max_ranks;
  if (const double need = plan_memory_bytes(t, scheme, o); need > o.max_bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f GiB (limit %.1f GiB)", need / (1 << 30), o.max_bytes / (1 << 30));
    throw InputError(t.source + ": a " + scheme + " plan for " + std::to_string(n) + " ranks would take about " + buf +
                     " of memory to build; use fewer ranks, or raise the limit (--max-memory)");
  }
  // A window keeps a query near its keys: contiguous shards need only neighbours' pieces, zigzag ones would
  // need pieces from the far side of the ring.
  const Layout layout = o.layout_given ? o.layout : (o.causal && !o.workload.windowed() ? Layout::Zigzag : Layout::Contiguous);
  std::string why;
  if (!scheme_applies(scheme, t, o.causal, &why)) throw InputError(t.source + ": " + why);
  if (scheme == "ulysses") return build_ulysses(t, o);
  if (scheme == "usp") {
    PlanOptions inner = o;
    inner.layout_given = true, inner.layout = layout;
    if (o.ulysses <= 0 && t.nodes < 2)
      throw InputError(t.source + ": usp on one node: give the group size (--ulysses U, dividing " + std::to_string(t.ranks()) + ")");
    return build_usp(t, o.inner, o.ulysses > 0 ? o.ulysses : t.gpus_per_node, inner);
  }
  Plan p;
  if (scheme == "ring") p = build_ring(t, o.causal, layout, ex);
  else if (scheme == "zigzag") {
    // Its layout is its name: a contiguous one given would be ignored, and a caller holding contiguous shards would
    // get a plan for zigzag ones.
    if (o.layout_given && layout == Layout::Contiguous)
      throw InputError("zigzag: the zigzag scheme lays tokens out in zigzag chunks; for contiguous shards use ring");
    p = build_zigzag(t, ex);
  }
  else if (scheme == "allgather") {
    if (o.gather_pieces < 1 || o.gather_pieces > 64) throw InputError("allgather: gather pieces must be 1 to 64");
    if (const std::string e = gather_steps_error(o.gather_steps, o.gather_pieces); !e.empty()) throw InputError("allgather: " + e);
    // Pruned for the causal mask (below), a zigzag shard's pieces are cut by chunk: 1 piece is one a chunk.
    const bool by_chunk = o.prune_plain && o.causal && layout == Layout::Zigzag && n > 1 && !o.workload.windowed() &&
                          !o.workload.packed();
    const int pieces = by_chunk && o.gather_pieces == 1 ? 2 : o.gather_pieces;
    p = build_allgather(n, o.causal, layout, ex, pieces, o.gather_steps);
  }
  else if (scheme == "hamilton") p = build_hamilton(t, o.causal, layout, ex);
  else p = build_two_level(t, o.causal, layout, ex);
  if (p.topology.empty()) p.topology = t.source;
  p.ulysses = std::max(1, o.head_slots);
  if (layout == Layout::ZigzagDocs) {
    if (o.workload.S <= 0) throw InputError("the zigzag-docs layout needs the workload (its documents and S)");
    p.layout = layout;  // also for the zigzag scheme: ring flow over either zigzag
    p.layout_docs = o.workload.docs.empty() ? std::vector<long>{o.workload.S} : o.workload.docs;
  }
  // allgather prunes for the plain mask only when causal, its pieces cut by chunk (Plan::pieces_by_chunk): on 2 ranks a
  // zigzag rank's late chunk is then whole pieces the other rank never sees, half of what it sends, and the backward
  // keeps the forward's K/V as unpruned (no piece it computes on was left behind). Through host memory both
  // directions share one medium: a 64 MiB broadcast took 2.42 ms beside 64 MiB the other way, 1.93 beside 32
  // (2x H200, 2026-11-27, docs/measurements/fabrics.md).
  const bool gather = scheme == "allgather";
  const bool prune_plain = o.prune_plain && (!gather || o.causal);
  const bool mask_given = o.workload.windowed() || o.workload.packed();
  const bool masked = o.workload.S > 0 && (mask_given || prune_plain);
  if (gather && prune_plain && !mask_given && n > 1) {
    if (layout == Layout::Zigzag && p.pieces_per_rank % 2 != 0)
      throw InputError("allgather: pruned for the causal mask, its pieces are cut by zigzag chunk: gather pieces must be "
                       "even (or 1: one a chunk), not " + std::to_string(p.pieces_per_rank));
    p.pieces_by_chunk = layout == Layout::Zigzag;
  }
  if (o.backward) {
    const int acc = o.accumulator_bytes ? o.accumulator_bytes : gather && n > 1 ? 2 : 4;
    // Kept K/V: not with a mask's pruning, whose backward moves K/V pieces on its own terms (planner/prune.hpp), but
    // with allgather's for the plain causal mask (above).
    add_backward(p, acc, o.keep_kv && (!masked || (gather && !mask_given)));
    if (p.backward.keeps_kv && o.memory_budget_bytes > 0 && o.workload.S > 0 &&
        peak_rank_memory(p, o.workload, {true, true}).total() > o.memory_budget_bytes)
      add_backward(p, acc, false);
  }
  if (masked && o.workload.causal != o.causal) throw InputError("workload and plan options disagree on causal");
  if (masked || layout == Layout::ZigzagDocs)
    if (const std::string e = check_split(split_of(p, o.workload.S)); !e.empty()) throw InputError("workload: " + e);
  if (masked) {
    const Digraph arcs = rank_digraph(t);
    prune(p, o.workload, &arcs, o.expand_max_ranks, prune_plain);
  }
  if (o.move_queries) {
    if (!gather || !prune_plain || mask_given || o.workload.S <= 0)
      throw InputError("move queries: needs allgather pruned for a workload's plain causal mask (--prune-plain and -w)");
    if (const std::string e = move_queries_refusal(p, o.workload); !e.empty()) throw InputError("move queries: " + e);
    move_late_queries(p, o.workload);
  }
  return p;
}

}  // namespace tasp::planner
