// Hamiltonian paths of K_m* and the two-level rings of U x M clusters.
#include <algorithm>
#include <stdexcept>

#include "planner/decomposition.hpp"

namespace tasp::planner {

PathSet hamiltonian_paths_complete(int m) {
  if (m < 1) throw std::invalid_argument("a node needs at least one GPU");
  PathSet s;
  if (m == 1) {
    s.paths = {{0}};
    return s;
  }
  if (m % 2 == 0) {
    // Translates of 0, 1, -1, 2, -2, ..., m/2: its steps +1, -2, +3, ... hit every non-zero residue once,
    // so the m translates use every arc of K_m* exactly once.
    for (int c = 0; c < m; ++c) {
      Path p;
      for (int i = 0; i < m; ++i) {
        int z = i == 0 ? 0 : (i % 2 ? (i + 1) / 2 : -(i / 2));
        p.push_back(((c + z) % m + m) % m);
      }
      s.paths.push_back(std::move(p));
    }
    return s;
  }
  // Odd m >= 7: delete vertex m from each of K_{m+1}*'s m Hamiltonian cycles; each becomes a Hamiltonian
  // path of K_m* (it loses the two arcs at m) and the m paths use every arc once. The paths start at m's
  // successors and end at its predecessors, distinct across cycles, so rails stay distinct.
  if (m >= 7) {
    for (const Cycle& c : decompose_complete(m + 1).cycles) {
      const size_t at = size_t(std::find(c.begin(), c.end(), m) - c.begin());
      Path p;
      for (size_t i = 1; i < c.size(); ++i) p.push_back(c[(at + i) % c.size()]);
      s.paths.push_back(std::move(p));
    }
    return s;
  }
  // m = 3, 5: m - 1 paths: open each of Walecki's cycles at the arc j -> j+1 (distinct tails and heads).
  std::vector<Cycle> cycles = walecki_cycles(m);
  for (const Cycle& c : cycles) {
    // c = [inf, j, j+1, ...]: start after position 1, end at position 1.
    Path p;
    for (size_t i = 0; i < c.size(); ++i) p.push_back(c[(2 + i) % c.size()]);
    s.paths.push_back(std::move(p));
  }
  s.note = "K_" + std::to_string(m) + "* (odd m): " + std::to_string(m - 1) +
           " Hamiltonian paths (Walecki cycles opened); m paths are impossible for m = 3, 5";
  return s;
}

ClusterRings cluster_rings(int u, int m) {
  if (u < 2) throw std::invalid_argument("a cluster needs at least two nodes");
  PathSet ps = hamiltonian_paths_complete(m);
  ClusterRings r;
  r.note = ps.note;
  for (const Path& p : ps.paths) {
    Cycle ring;
    Path rev(p.rbegin(), p.rend());
    for (int node = 0; node < u; ++node) {
      // Alternate directions so that each node ends on the rail the next node starts on.
      const Path& here = node % 2 == 0 ? p : rev;
      for (int local : here) ring.push_back(node * m + local);
    }
    r.rings.push_back(std::move(ring));
  }
  if (u % 2 == 1 && m > 1) {
    r.off_rail_hops = int(r.rings.size());
    if (!r.note.empty()) r.note += "; ";
    r.note += "odd node count: each ring's closing hop crosses rails (through the spine)";
  }
  return r;
}

}  // namespace tasp::planner
