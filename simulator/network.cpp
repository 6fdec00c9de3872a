#include "simulator/network.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace tasp::simulator {

using planner::DeviceKind;
using planner::InputError;

Network build_network(const planner::Topology& t, double link_efficiency) {
  Network net;
  net.name = t.name;
  const auto& g = t.graph;
  const int n = t.ranks();
  net.ranks = n;
  const size_t V = boost::num_vertices(g);
  std::vector<int> sw_index(V, -1), rank_of(V, -1);
  for (size_t v = 0; v < V; ++v) {
    if (g[v].kind == DeviceKind::Switch) sw_index[v] = net.switches++;
    else rank_of[v] = g[v].rank;
  }
  // Parallel links between the same two devices are one resource with their summed bandwidth.
  std::map<std::pair<size_t, size_t>, int> res;
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    auto key = std::make_pair(boost::source(*e, g), boost::target(*e, g));
    auto [it, fresh] = res.emplace(key, net.links());
    if (fresh) {
      net.capacity_gbps.push_back(0);
      net.latency_us.push_back(g[*e].latency_us);
    }
    net.capacity_gbps[it->second] += g[*e].bandwidth_gbps * link_efficiency;
  }
  net.up.assign(n, {});
  net.down.assign(n, {});
  net.ingress_gbps.assign(n, 0);
  net.egress_gbps.assign(n, 0);
  net.node.assign(n, 0);
  for (int r = 0; r < n; ++r) net.node[r] = t.gpu(r).node;
  int nodes = 0;
  for (int r = 0; r < n; ++r) nodes = std::max(nodes, net.node[r] + 1);
  net.node_ingress_gbps.assign(nodes, 0);
  const int S = net.switches;
  std::vector<std::vector<std::pair<int, int>>> sw_adj(S);  // switch -> (switch, link)
  for (const auto& [key, id] : res) {
    auto [a, b] = key;
    if (rank_of[a] >= 0) net.egress_gbps[rank_of[a]] += net.capacity_gbps[id];
    if (rank_of[b] >= 0) net.ingress_gbps[rank_of[b]] += net.capacity_gbps[id];
    if (rank_of[b] >= 0 && g[a].node != g[b].node) net.node_ingress_gbps[g[b].node] += net.capacity_gbps[id];
    if (rank_of[a] >= 0 && rank_of[b] >= 0) net.direct[uint64_t(rank_of[a]) * n + rank_of[b]] = id;
    else if (rank_of[a] >= 0) net.up[rank_of[a]].push_back({sw_index[b], id});
    else if (rank_of[b] >= 0) net.down[rank_of[b]].push_back({sw_index[a], id});
    else sw_adj[sw_index[a]].push_back({sw_index[b], id});
  }
  // Fewest-hop paths between switches (BFS from each; switch counts are small next to GPU counts).
  net.sw_dist.assign(size_t(S) * S, -1);
  net.sw_next_link.assign(size_t(S) * S, -1);
  net.sw_next.assign(size_t(S) * S, -1);
  std::vector<int> first_link(S), first_sw(S);
  for (int a = 0; a < S; ++a) {
    int32_t* dist = &net.sw_dist[size_t(a) * S];
    std::deque<int> q{a};
    dist[a] = 0;
    while (!q.empty()) {
      int x = q.front();
      q.pop_front();
      for (auto [y, link] : sw_adj[x]) {
        if (dist[y] >= 0) continue;
        dist[y] = dist[x] + 1;
        first_link[y] = x == a ? link : first_link[x];
        first_sw[y] = x == a ? y : first_sw[x];
        net.sw_next_link[size_t(a) * S + y] = first_link[y];
        net.sw_next[size_t(a) * S + y] = first_sw[y];
        q.push_back(y);
      }
    }
  }
  return net;
}

void Network::route(int src, int dst, std::vector<int>& out) const {
  if (auto it = direct.find(uint64_t(src) * ranks + dst); it != direct.end()) {
    out.push_back(it->second);
    return;
  }
  int best = std::numeric_limits<int>::max(), ua = -1, ul = -1, db = -1, dl = -1;
  for (auto [a, la] : up[src])
    for (auto [b, lb] : down[dst]) {
      int d = sw_dist[size_t(a) * switches + b];
      if (d >= 0 && d < best) best = d, ua = a, ul = la, db = b, dl = lb;
    }
  if (ua < 0)
    throw InputError(name + ": no path from rank " + std::to_string(src) + " to rank " + std::to_string(dst) +
                     " through switches (is the plan for this topology?)");
  out.push_back(ul);
  for (int x = ua; x != db;) {
    size_t k = size_t(x) * switches + db;
    out.push_back(sw_next_link[k]);
    x = sw_next[k];
  }
  out.push_back(dl);
}

}  // namespace tasp::simulator
