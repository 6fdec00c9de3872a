#pragma once
// Hamiltonian decompositions: constructions for complete digraphs and clusters, search for anything else.
#include <string>
#include <vector>

#include "planner/digraph.hpp"

namespace tasp::planner {

using Cycle = std::vector<int>;  // vertex order; the arc back from last to first is implied
using Path = std::vector<int>;

struct Decomposition {
  std::vector<Cycle> cycles;
  int upper_bound = 0;        // min in/out degree of the digraph
  bool optimal = false;       // cycles.size() == upper_bound, or proven maximum by exhaustive search
  std::string method;         // which construction or search produced it
  std::string note;           // what a user should know (fallbacks, idle arcs)
};

// K_n*: n-1 arc-disjoint directed Hamiltonian cycles for every n >= 2 except 4 and 6 (Tillson).
// For 4 and 6 the result holds the most arc-disjoint Hamiltonian cycles there are (proven by search).
Decomposition decompose_complete(int n);

// The pieces of decompose_complete, exposed for tests.
std::vector<Cycle> walecki_cycles(int n);           // n odd >= 3
std::vector<Cycle> insertion_cycles(int n);         // n even >= 8: one new vertex into K_{n-1}*
int max_disjoint_hamiltonian_cycles_exhaustive(int n, std::vector<Cycle>* best);  // small n only

// K_m* into m arc-disjoint directed Hamiltonian paths: m even by translates, odd m >= 7 from K_{m+1}*'s
// cycles less one vertex; m - 1 paths (cycles opened) for m = 3, 5 (none better exists).
struct PathSet {
  std::vector<Path> paths;
  std::string note;
};
PathSet hamiltonian_paths_complete(int m);

// U nodes x M GPUs (rank = node*M + local), intra-node K_M*, inter-node rails (local i <-> local i).
// TASP's (m-K_m-m)^u idea for any m and u >= 2: ring c walks path c through node 0, hops along a rail,
// walks path c reversed through node 1, and so on. With u odd the closing hop leaves the rails.
struct ClusterRings {
  std::vector<Cycle> rings;
  int off_rail_hops = 0;  // inter-node arcs that are not on one rail
  std::string note;
};
ClusterRings cluster_rings(int u, int m);

// Arbitrary digraph: as many arc-disjoint Hamiltonian cycles as the search finds.
// Exact (exhaustive) when the digraph is small enough, randomized with restarts otherwise.
struct SearchOptions {
  int exact_max_vertices = 8;
  double seconds = 2.0;
  unsigned seed = 1;
};
Decomposition search_cycles(const Digraph& g, const SearchOptions& opt = {});
// Every Hamiltonian cycle through vertex 0, then the largest arc-disjoint set of them (small digraphs only).
std::vector<Cycle> exhaustive_cycle_packing(const Digraph& g);

}  // namespace tasp::planner
