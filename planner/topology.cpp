#include "planner/topology.hpp"

#include <deque>

namespace tasp::planner {

Vertex add_gpu(Topology& t, const std::string& id, int node) {
  Vertex v = boost::add_vertex(Device{id, DeviceKind::Gpu, node, t.ranks()}, t.graph);
  t.gpu_vertex.push_back(v);
  return v;
}

Vertex add_switch(Topology& t, const std::string& id, int node) {
  return boost::add_vertex(Device{id, DeviceKind::Switch, node, -1}, t.graph);
}

void add_link(Topology& t, Vertex a, Vertex b, double gbps, double latency_us, const std::string& kind,
              bool both_ways) {
  boost::add_edge(a, b, Link{gbps, latency_us, kind}, t.graph);
  if (both_ways) boost::add_edge(b, a, Link{gbps, latency_us, kind}, t.graph);
}

Digraph rank_digraph(const Topology& t) {
  const int n = t.ranks();
  Digraph d = Digraph::empty(n);
  const auto nv = boost::num_vertices(t.graph);
  std::vector<int> seen(nv, -1);
  for (int r = 0; r < n; ++r) {
    // BFS that expands only the source and switches: a GPU is an end point, never a hop.
    std::deque<Vertex> q{t.gpu_vertex[r]};
    seen[t.gpu_vertex[r]] = r;
    while (!q.empty()) {
      Vertex v = q.front();
      q.pop_front();
      for (auto [e, end] = boost::out_edges(v, t.graph); e != end; ++e) {
        Vertex w = boost::target(*e, t.graph);
        if (seen[w] == r) continue;
        seen[w] = r;
        const Device& dw = t.graph[w];
        if (dw.kind == DeviceKind::Gpu) {
          d.add(r, dw.rank);
        } else {
          q.push_back(w);
        }
      }
    }
  }
  return d;
}

}  // namespace tasp::planner
