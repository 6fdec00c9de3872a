#include <gtest/gtest.h>

#include "planner/decomposition.hpp"
#include "planner/topology.hpp"
#include "planner/verify_decomposition.hpp"

using namespace tasp::planner;

TEST(CompleteDigraph, EveryOrderExcept4And6HasNMinus1Rings) {
  for (int n = 2; n <= 128; ++n) {
    if (n == 4 || n == 6) continue;
    Decomposition d = decompose_complete(n);
    ASSERT_EQ(int(d.cycles.size()), n - 1) << "n=" << n << " " << d.method;
    EXPECT_EQ(check_cycles(Digraph::complete(n), d.cycles), "") << "n=" << n;
    EXPECT_TRUE(d.optimal);
  }
}

TEST(CompleteDigraph, LargeOrders) {
  for (int n : {255, 256, 257, 512, 1023, 1024}) {
    Decomposition d = decompose_complete(n);
    ASSERT_EQ(int(d.cycles.size()), n - 1) << n;
    EXPECT_EQ(check_cycles(Digraph::complete(n), d.cycles), "") << n;
  }
}

TEST(CompleteDigraph, WaleckiOddAndTaspFamilySeparately) {
  for (int n = 3; n < 60; n += 2) EXPECT_EQ(check_cycles(Digraph::complete(n), walecki_cycles(n)), "") << n;
  for (int n = 8; n <= 200; n += 4) {
    auto c = insertion_cycles(n);
    ASSERT_EQ(int(c.size()), n - 1);
    EXPECT_EQ(check_cycles(Digraph::complete(n), c), "") << n;
  }
}

// n = 2 mod 4 is the closed form of complete_digraph.cpp, no search: every such n to 1026 through the independent
// verifier, and spot checks beyond (the planner's own bound: n - 1 rings, every arc once).
TEST(CompleteDigraph, TwoModFourByConstructionTo1026AndBeyond) {
  for (int n = 10; n <= 1026; n += 4) {
    Decomposition d = decompose_complete(n);
    ASSERT_EQ(int(d.cycles.size()), n - 1) << n;
    ASSERT_EQ(check_cycles(Digraph::complete(n), d.cycles), "") << n;
    EXPECT_TRUE(d.optimal);
    EXPECT_TRUE(d.note.empty()) << n;
  }
  for (int n : {1030, 2050, 3002}) {
    Decomposition d = decompose_complete(n);
    ASSERT_EQ(int(d.cycles.size()), n - 1) << n;
    EXPECT_EQ(check_cycles(Digraph::complete(n), d.cycles), "") << n;
  }
}

// Tillson's exceptions, proven by exhaustive search over every Hamiltonian cycle.
TEST(CompleteDigraph, FourAndSixHaveNoDecomposition) {
  std::vector<Cycle> best;
  EXPECT_EQ(max_disjoint_hamiltonian_cycles_exhaustive(4, &best), 2);
  EXPECT_EQ(check_cycles(Digraph::complete(4), best), "");
  int six = max_disjoint_hamiltonian_cycles_exhaustive(6, &best);
  EXPECT_LT(six, 5);
  EXPECT_GE(six, 3);
  EXPECT_EQ(check_cycles(Digraph::complete(6), best), "");
  // ...while the same search does find full decompositions where they exist.
  EXPECT_EQ(max_disjoint_hamiltonian_cycles_exhaustive(5, nullptr), 4);
  EXPECT_EQ(max_disjoint_hamiltonian_cycles_exhaustive(3, nullptr), 2);
  Decomposition d4 = decompose_complete(4), d6 = decompose_complete(6);
  EXPECT_EQ(d4.cycles.size(), 2u);
  EXPECT_EQ(int(d6.cycles.size()), six);
  EXPECT_NE(d4.note.find("idle"), std::string::npos);
}

TEST(HamiltonianPaths, EvenOrdersDecomposeFully) {
  for (int m : {2, 4, 6, 8, 10, 16, 64, 100}) {
    PathSet s = hamiltonian_paths_complete(m);
    ASSERT_EQ(int(s.paths.size()), m);
    EXPECT_EQ(check_paths(Digraph::complete(m), s.paths), "") << m;
  }
  // m = 8 is TASP's hard-coded table.
  EXPECT_EQ(hamiltonian_paths_complete(8).paths[0], (Path{0, 1, 7, 2, 6, 3, 5, 4}));
}

TEST(HamiltonianPaths, OddOrders) {
  // m = 3, 5: m paths do not exist; m - 1.
  for (int m : {3, 5}) {
    PathSet s = hamiltonian_paths_complete(m);
    ASSERT_EQ(int(s.paths.size()), m - 1);
    EXPECT_EQ(check_paths(Digraph::complete(m), s.paths), "") << m;
  }
  // Every odd m >= 7: m paths (K_{m+1}* by construction for m+1 = 0 and 2 mod 4).
  for (int m = 7; m <= 255; m += 2) {
    PathSet s = hamiltonian_paths_complete(m);
    ASSERT_EQ(int(s.paths.size()), m) << m;
    EXPECT_EQ(check_paths(Digraph::complete(m), s.paths), "") << m;
    EXPECT_TRUE(s.note.empty()) << m;
  }
}

TEST(Cluster, RingsAreHamiltonianDisjointAndFollowRails) {
  for (auto [u, m] : std::vector<std::pair<int, int>>{{2, 8}, {4, 8}, {3, 6}, {2, 5}, {3, 8}, {2, 2}, {5, 4}, {3, 7}, {2, 9}, {4, 11}}) {
    Topology t = load_topology("cluster:" + std::to_string(u) + "x" + std::to_string(m));
    Digraph g = rank_digraph(t);
    ClusterRings r = cluster_rings(u, m);
    EXPECT_EQ(int(r.rings.size()), m == 5 ? m - 1 : m);
    EXPECT_EQ(check_cycles(g, r.rings), "") << u << "x" << m;
    // Count inter-node hops that leave their rail.
    int off = 0;
    for (auto& ring : r.rings)
      for (size_t i = 0; i < ring.size(); ++i) {
        int a = ring[i], b = ring[(i + 1) % ring.size()];
        if (a / m != b / m && a % m != b % m) ++off;
      }
    EXPECT_EQ(off, r.off_rail_hops);
    EXPECT_EQ(off, u % 2 ? int(r.rings.size()) : 0);
  }
}

TEST(Search, TorusFindsTheBound) {
  Topology t = load_topology("torus:4x4");
  Digraph g = rank_digraph(t);
  EXPECT_EQ(g.degree_bound(), 4);
  Decomposition d = search_cycles(g);
  EXPECT_EQ(int(d.cycles.size()), 4);
  EXPECT_EQ(check_cycles(g, d.cycles), "");
}

TEST(Search, ExactOnSmallGraphsAndBoundReported) {
  // A 6-cycle with both directions: exactly two Hamiltonian cycles (the two orientations).
  Digraph g = Digraph::empty(6);
  for (int i = 0; i < 6; ++i) g.add(i, (i + 1) % 6), g.add((i + 1) % 6, i);
  g.add(0, 3);  // a chord does not raise the bound
  Decomposition d = search_cycles(g);
  EXPECT_EQ(d.upper_bound, 2);
  EXPECT_EQ(d.cycles.size(), 2u);
  EXPECT_EQ(check_cycles(g, d.cycles), "");
  // A digraph with no Hamiltonian cycle at all.
  Digraph star = Digraph::empty(4);
  for (int i = 1; i < 4; ++i) star.add(0, i), star.add(i, 0);
  EXPECT_TRUE(search_cycles(star).cycles.empty());
}
