#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> s{"ring", "zigzag", "allgather", "hamilton", "two-level"};
  return s;
}

bool scheme_applies(const std::string& scheme, const Topology& t, bool causal, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (scheme == "zigzag" && !causal) return no("zigzag is the causal variant of ring (use --causal)");
  if (scheme == "two-level" && !(t.nodes >= 2 && t.gpus_per_node > 0)) return no("two-level needs a cluster of equal nodes");
  if (scheme == "allgather" && !rank_digraph(t).is_complete())
    return no("allgather needs every GPU pair connected directly or through switches; this topology is not");
  if (scheme == "ring" || scheme == "allgather" || scheme == "hamilton" || scheme == "zigzag" || scheme == "two-level")
    return true;
  return no("unknown scheme '" + scheme + "'");
}

Plan build_plan(const Topology& t, const std::string& scheme, const PlanOptions& o) {
  const int n = t.ranks();
  const bool ex = n <= o.expand_max_ranks;
  const Layout layout = o.layout_given ? o.layout : (o.causal ? Layout::Zigzag : Layout::Contiguous);
  std::string why;
  if (!scheme_applies(scheme, t, o.causal, &why)) throw InputError(t.source + ": " + why);
  Plan p;
  if (scheme == "ring") p = build_ring(t, o.causal, layout, ex);
  else if (scheme == "zigzag") p = build_zigzag(t, ex);
  else if (scheme == "allgather") p = build_allgather(n, o.causal, layout, ex);
  else if (scheme == "hamilton") p = build_hamilton(t, o.causal, layout, ex);
  else p = build_two_level(t, o.causal, layout, ex);
  if (p.topology.empty()) p.topology = t.source;
  if (o.backward) add_backward(p, o.accumulator_bytes);
  return p;
}

}  // namespace tasp::planner
