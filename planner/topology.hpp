#pragma once
// A machine: GPUs and switches joined by directed links, as a Boost.Graph multigraph.
#include <boost/graph/adjacency_list.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/digraph.hpp"

namespace tasp::planner {

enum class DeviceKind { Gpu, Switch };

struct Device {
  std::string id;
  DeviceKind kind = DeviceKind::Gpu;
  int node = 0;   // the server a device sits in (switches of the network: -1)
  int rank = -1;  // GPUs: 0..n-1 in file order
};

struct Link {
  double bandwidth_gbps = 0;  // one direction, GB/s
  double latency_us = 0;
  std::string kind;           // nvlink, nvswitch, xgmi, network, ...
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Device, Link>;
using Vertex = Graph::vertex_descriptor;

struct Topology {
  std::string name;
  std::string source;             // file path or shorthand it came from
  Graph graph;
  std::vector<Vertex> gpu_vertex;  // rank -> vertex
  int nodes = 1;
  int gpus_per_node = 0;          // 0 when nodes differ in size
  std::string family;             // complete | mesh | cluster | torus | file
  std::vector<int> dims;          // torus {A, B}; cluster {U, M}

  int ranks() const { return int(gpu_vertex.size()); }
  const Device& gpu(int rank) const { return graph[gpu_vertex[rank]]; }
};

// Bad input: message already names file, line and field.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A whole text file; InputError "PATH: cannot open WHAT" when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);

// Arc a->b when GPU b is reachable from GPU a through switches only (no other GPU on the way).
Digraph rank_digraph(const Topology& t);

// Shorthands (complete:N, mesh:N, cluster:UxM, torus:AxB), a YAML file path, or the name of a
// built-in topology (the files in topologies/, compiled in) when no such file exists.
Topology load_topology(const std::string& spec);
std::vector<std::string> builtin_topology_names();
Topology topology_from_yaml_file(const std::string& path);
Topology topology_from_yaml_text(const std::string& text, const std::string& name_for_errors);
// Throws InputError for anything else than a shorthand; returns false when spec is not one.
bool topology_from_shorthand(const std::string& spec, Topology* out);

// Shared builders (used by shorthands, tests and the YAML loader's validation).
Vertex add_gpu(Topology& t, const std::string& id, int node);
Vertex add_switch(Topology& t, const std::string& id, int node);
void add_link(Topology& t, Vertex a, Vertex b, double gbps, double latency_us, const std::string& kind,
              bool both_ways = true);

}  // namespace tasp::planner
