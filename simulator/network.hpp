#pragma once
// The topology as the flow model sees it: capacities of directed links (parallel links merged) and a
// route for every rank pair the plans may use (a direct link, or up into a switch, across the switch
// fabric by fewest hops, down to the GPU). Pure: built from a Topology, no I/O.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "planner/topology.hpp"

namespace tasp::simulator {

struct Network {
  int ranks = 0;
  std::vector<double> capacity_gbps;  // per link resource, after link_efficiency
  std::vector<double> latency_us;     // per link resource
  std::vector<double> ingress_gbps;   // per rank: capacity of the links into the GPU
  std::vector<double> egress_gbps;    // per rank: capacity of the links out of the GPU
  std::vector<int> node;              // per rank: its node (server)
  std::vector<double> node_ingress_gbps;  // per node: capacity of links into its GPUs from outside it

  // Appends the link resources of the route src -> dst to `out`; throws planner::InputError when the
  // topology has no path through switches (the plan is then not for this topology).
  void route(int src, int dst, std::vector<int>& out) const;
  int links() const { return int(capacity_gbps.size()); }

  // Routing tables (filled by build_network).
  std::vector<std::vector<std::pair<int, int>>> up, down;  // rank -> (switch, link) into / out of a switch
  std::unordered_map<uint64_t, int> direct;                 // src*ranks+dst -> link
  int switches = 0;
  std::vector<int32_t> sw_dist, sw_next_link, sw_next;      // [a*switches+b]
  std::string name;
};

Network build_network(const planner::Topology& t, double link_efficiency = 1.0);

}  // namespace tasp::simulator
