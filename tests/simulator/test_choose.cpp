// Choosing by simulating (simulator/choose.hpp): allgather's count of pieces is the one the model finds fastest, on
// the fabrics' own profiles, and asking for a count keeps it.
#include <gtest/gtest.h>

#include <string>

#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"
#include "simulator/choose.hpp"

using namespace tasp;

namespace {

struct Fabric {
  planner::Topology topo;
  simulator::Profile prof;
};

Fabric fabric(const std::string& name) {
  const std::string dir = std::string(TASP_SOURCE_DIR) + "/topologies/";
  return {planner::load_topology(dir + name + ".yaml"), simulator::load_profile(dir + name + ".profile.yaml")};
}

// Simulated fwd+bwd us of allgather in P pieces (in `steps` of several when given), planned on its own.
double allgather_us(const Fabric& f, const planner::Workload& w, int P, const simulator::SimOptions& so,
                    const std::vector<int>& steps = {}) {
  simulator::PlanChoices h;
  h.gather_pieces = P, h.gather_steps = steps;
  const planner::Plan p = planner::build_plan(f.topo, "allgather", simulator::plan_options("allgather", w, h));
  return simulator::simulate(p, f.topo, w, f.prof, so).total_us;
}

}  // namespace

TEST(Choose, GatherPiecesAreTheFastestSimulated) {
  const planner::Workload w = planner::parse_workload("B=4,S=16384,H=40,Hkv=8,D=128,causal");  // qwen3_14b
  simulator::SimOptions so;
  so.max_timeline_cells = 0;
  ASSERT_TRUE(planner::parse_passes("fwd+bwd", &so.passes));
  so.collectives = simulator::Collectives::Auto;  // as run and auto time allgather: the faster transport
  // Over sockets the exchange is exposed and pieces hide it (measured 8.5% faster at 2 pieces on 2x H200, 0.92x that
  // again in 4 in steps of 2+1+1 or 4+2+1+1; since a step's pieces are one walk of the kernel in the model, as measured
  // on NVLink, 4+2+1+1 is the model's fastest too); through shm it hides already and each piece costs (measured 6.5%
  // slower at 2, 8-14% in steps): the model, and so the choice, says both.
  struct Want {
    std::string fabric;
    int pieces;
    std::vector<int> steps;
    std::string named;
  };
  for (const Want& want : {Want{"h200x2-socket", 8, {4, 2, 1, 1}, "8 in steps of 4+2+1+1"}, Want{"h200x2-shm", 1, {}, "1"}}) {
    SCOPED_TRACE(want.fabric);
    const Fabric f = fabric(want.fabric);
    const auto runs = simulator::run_schemes(f.topo, w, {"allgather"}, f.prof, so);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].plan.pieces_per_rank, want.pieces);
    EXPECT_EQ(runs[0].plan.gather_steps, want.steps);
    EXPECT_NE(runs[0].detail.find("gather pieces " + want.named + " (tried, ms: 1: "), std::string::npos) << runs[0].detail;
    // Each candidate tried once (the whole ones; pruned ones are named so).
    const auto first = runs[0].detail.find(", 2: ");
    EXPECT_NE(first, std::string::npos) << runs[0].detail;
    EXPECT_EQ(runs[0].detail.find(", 2: ", first + 1), std::string::npos) << runs[0].detail;
    // Its time is its plan's, and no count from 1 to 4 one a step, nor steps of several, simulates 1% faster.
    EXPECT_DOUBLE_EQ(runs[0].sim.total_us, allgather_us(f, w, want.pieces, so, want.steps));
    for (int P = 1; P <= 4; ++P) EXPECT_GE(allgather_us(f, w, P, so), 0.99 * runs[0].sim.total_us) << P << " pieces";
    for (const std::vector<int>& s : {std::vector<int>{2, 1}, {3, 1}, {4, 2, 1, 1}})
      EXPECT_GE(allgather_us(f, w, 0, so, s), 0.99 * runs[0].sim.total_us) << s.size() << " steps";
    // A count asked for is kept, and other schemes are not cut.
    simulator::PlanChoices h;
    h.gather_pieces = 3;
    EXPECT_EQ(simulator::run_schemes(f.topo, w, {"allgather"}, f.prof, so, nullptr, h)[0].plan.pieces_per_rank, 3);
    EXPECT_EQ(simulator::run_schemes(f.topo, w, {"zigzag"}, f.prof, so)[0].plan.pieces_per_rank,
              planner::build_plan(f.topo, "zigzag", simulator::plan_options("zigzag", w)).pieces_per_rank);
  }
}

// Through host memory, whose profile measured one root's broadcast alone (a medium both directions share), the MHA
// rows take allgather pruned for the causal mask, its pieces by chunk (measured 0.82-0.89x the whole plans' time on
// 2x H200, 2026-11-27), with rank 0's late chunk's queries moved to rank 1 (0.91-0.94x pruned's time), and the GQA ones
// stay whole; the C ABI's ranks, which run no moved rows, take pruned; without that rate no pruned candidate is tried.
TEST(Choose, PrunedWhereTheMediumIsShared) {
  simulator::SimOptions so;
  so.max_timeline_cells = 0;
  ASSERT_TRUE(planner::parse_passes("fwd+bwd", &so.passes));
  so.collectives = simulator::Collectives::Auto;
  Fabric f = fabric("h200x2-shm");
  ASSERT_FALSE(f.prof.comm_for(2).one_root_gbps.empty());
  const auto mha = simulator::run_schemes(f.topo, planner::parse_workload("B=1,S=8192,H=32,D=128,causal"), {"allgather"}, f.prof, so);
  EXPECT_TRUE(mha[0].plan.pieces_by_chunk && mha[0].plan.pruned.any()) << mha[0].detail;
  EXPECT_NE(mha[0].detail.find(" pruned: "), std::string::npos) << mha[0].detail;
  EXPECT_EQ(mha[0].plan.query_moves.size(), 1u) << mha[0].detail;
  EXPECT_NE(mha[0].detail.find("gather pieces 2 queries moved"), std::string::npos) << mha[0].detail;
  const auto gqa = simulator::run_schemes(f.topo, planner::parse_workload("B=4,S=16384,H=40,Hkv=8,D=128,causal"), {"allgather"}, f.prof, so);
  EXPECT_FALSE(gqa[0].plan.pruned.any()) << gqa[0].detail;
  EXPECT_TRUE(gqa[0].plan.query_moves.empty());
  simulator::SimOptions framework = so;  // a training framework's ranks alike (tasp.torch's pruned plans checked on GPUs)
  framework.framework = true, framework.try_moved = false;
  const auto ranks = simulator::run_schemes(f.topo, planner::parse_workload("B=1,S=8192,H=32,D=128,causal"), {"allgather"},
                                            f.prof, framework);
  EXPECT_TRUE(ranks[0].plan.pruned.any()) << ranks[0].detail;
  EXPECT_TRUE(ranks[0].plan.query_moves.empty()) << ranks[0].detail;
  framework.try_pruned = false;  // the C ABI's "prune_plain": false
  EXPECT_FALSE(simulator::run_schemes(f.topo, planner::parse_workload("B=1,S=8192,H=32,D=128,causal"), {"allgather"}, f.prof,
                                      framework)[0].plan.pruned.any());
  // Directions apart (no root's broadcast measured alone): pruning alone gains nothing and is not tried; moved queries
  // are, where the collectives go one a root (sockets on 2x H200), and not with send/recv.
  f.prof.comm[0].one_root_gbps = {};
  const auto apart = simulator::run_schemes(f.topo, planner::parse_workload("B=1,S=8192,H=32,D=128,causal"), {"allgather"}, f.prof, so);
  EXPECT_EQ(apart[0].detail.find(" pruned"), std::string::npos) << apart[0].detail;
  EXPECT_NE(apart[0].detail.find("4 queries moved: "), std::string::npos) << apart[0].detail;
  simulator::SimOptions p2p = so;
  p2p.collectives = simulator::Collectives::Off;
  const auto whole = simulator::run_schemes(f.topo, planner::parse_workload("B=1,S=8192,H=32,D=128,causal"), {"allgather"}, f.prof, p2p);
  EXPECT_FALSE(whole[0].plan.pruned.any());
  EXPECT_EQ(whole[0].detail.find("queries moved"), std::string::npos) << whole[0].detail;
}

// Over sockets (the 2x H200 profile: directions apart, collectives one a root) allgather's MHA rows move rank 0's late
// queries in 4 pieces, what comes back crossing what goes out (measured 0.76x and 0.73x the whole exchange's time,
// 2026-11-27); the GQA rows, whose Q outweighs their K/V, do not.
TEST(Choose, QueriesMovedWhereDirectionsRunApart) {
  simulator::SimOptions so;
  ASSERT_TRUE(planner::parse_passes("fwd+bwd", &so.passes));
  so.collectives = simulator::Collectives::Auto;
  Fabric f = fabric("h200x2-socket");
  ASSERT_TRUE(f.prof.comm_for(2).one_root_gbps.empty());
  for (const char* w : {"B=1,S=8192,H=32,D=128,causal", "B=4,S=8192,H=24,D=128,causal"}) {
    const auto mha = simulator::run_schemes(f.topo, planner::parse_workload(w), {"allgather"}, f.prof, so);
    EXPECT_EQ(mha[0].plan.query_moves.size(), 1u) << mha[0].detail;
    EXPECT_EQ(mha[0].plan.pieces_per_rank, 4) << mha[0].detail;
  }
  const auto gqa = simulator::run_schemes(f.topo, planner::parse_workload("B=4,S=16384,H=40,Hkv=8,D=128,causal"), {"allgather"}, f.prof, so);
  EXPECT_TRUE(gqa[0].plan.query_moves.empty()) << gqa[0].detail;
}

TEST(Choose, GatherPiecesUnderAKernelTileAreNotTried) {
  // 2 ranks, zigzag halves of 512 tokens: 2 pieces of 256, 3 of 170, 4 of 128; at S=1024 halves of 256 and only 2
  // pieces hold a 128-token tile.
  const Fabric f = fabric("h200x2-socket");
  simulator::SimOptions so;
  for (const auto& [S, most] : {std::pair<long, int>{2048, 4}, {1024, 2}, {512, 1}}) {
    const planner::Workload w = planner::parse_workload("B=1,H=8,D=128,causal,S=" + std::to_string(S));
    planner::Plan p = planner::build_plan(f.topo, "allgather", simulator::plan_options("allgather", w));
    const std::string d = simulator::choose_gather_pieces(p, f.topo, w, f.prof, so, simulator::plan_options("allgather", w));
    EXPECT_NE(d.find(std::to_string(most) + ": "), std::string::npos) << S << ": " << d;
    EXPECT_EQ(d.find(std::to_string(most + 1) + ": "), std::string::npos) << S << ": " << d;
  }
  planner::Plan ring = planner::build_plan(f.topo, "ring", simulator::plan_options("ring", planner::parse_workload("B=1,S=4096,H=8,D=128")));
  EXPECT_EQ(simulator::choose_gather_pieces(ring, f.topo, planner::parse_workload("B=1,S=4096,H=8,D=128"), f.prof, so,
                                            simulator::plan_options("ring", planner::parse_workload("B=1,S=4096,H=8,D=128"))),
            "");
  simulator::PlanChoices bad;
  bad.gather_pieces = -1;
  EXPECT_THROW(simulator::plan_options("allgather", planner::parse_workload("B=1,S=4096,H=8,D=128"), bad), planner::InputError);
}
