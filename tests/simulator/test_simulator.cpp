// The simulator against cases computable by hand (flows, kernels, whole passes), and its two engines against each
// other; its profiles and their fitting are test_calibrate.cpp's.
#include <gtest/gtest.h>

#include <cmath>

#include "cases.hpp"
#include "kernels/bwd_tail.hpp"
#include "simulator/compute_model.hpp"

using namespace tasp;
using simulator::FlowList;
using namespace tasp::simtest;

TEST(Fluid, OneFlowOneLink) {
  // 1 MB over a 100 GB/s direct link, starting at 5 us: 5 + 1e6 / 1e5 = 15 us.
  auto t = planner::topology_from_yaml_text(
      "name: pair\ngpus:\n  - {prefix: g, count: 2}\nlinks:\n  - {from: g0, to: g1, bandwidth_gbps: 100}\n", "pair");
  auto net = simulator::build_network(t);
  FlowList f;
  add(f, 0, 1, 1e6, 5, 1e9);
  auto r = simulator::run_fluid(net, f, {kNoCap[0], kNoCap[0]}, {kNoCap[0], kNoCap[0]});
  EXPECT_NEAR(r.rank_end_us[0], 15, 1e-9);
  EXPECT_NEAR(r.rank_end_us[1], 15, 1e-9);
  // Its own cap binds below the link: 40 GB/s -> 5 + 25.
  f.c[0] = 40;
  r = simulator::run_fluid(net, f, {kNoCap[0], kNoCap[0]}, {kNoCap[0], kNoCap[0]});
  EXPECT_NEAR(r.rank_end_us[1], 30, 1e-9);
}

TEST(Fluid, TwoFlowsShareALinkThenTheSurvivorSpeedsUp) {
  // g0 sends 1 MB to g1 and 3 MB to g2 through its 100 GB/s port: both at 50 until the first ends at
  // 20 us, then the second alone at 100 moves its last 2 MB in 20 us more.
  auto net = simulator::build_network(star(3, 100));
  FlowList f;
  add(f, 0, 1, 1e6, 0, 1e9);
  add(f, 0, 2, 3e6, 0, 1e9);
  auto r = simulator::run_fluid(net, f, kNoCap, kNoCap);
  EXPECT_NEAR(r.rank_end_us[1], 20, 1e-9);
  EXPECT_NEAR(r.rank_end_us[2], 40, 1e-9);
  EXPECT_NEAR(r.rank_end_us[0], 40, 1e-9);
  // Max-min with a capped flow: flow 1 capped at 30 leaves 70 to flow 2.
  f.c[0] = 30;
  f.b[1] = 7e6;
  r = simulator::run_fluid(net, f, kNoCap, kNoCap);
  EXPECT_NEAR(r.rank_end_us[1], 1e6 / 30e3, 1e-9);
  EXPECT_NEAR(r.rank_end_us[2], 1e6 / 30e3 + (7e6 - 70e3 * (1e6 / 30e3)) / 100e3, 1e-9);
  // A late flow joins: starts at 10 us, shares from then on.
  FlowList g;
  add(g, 0, 1, 2e6, 0, 1e9);
  add(g, 0, 2, 1e6, 10, 1e9);
  r = simulator::run_fluid(net, g, kNoCap, kNoCap);
  // 0..10: flow 1 alone moves 1 MB; 10..30: both at 50 finish together.
  EXPECT_NEAR(r.rank_end_us[1], 30, 1e-9);
  EXPECT_NEAR(r.rank_end_us[2], 30, 1e-9);
}

TEST(Fluid, RankAggregateCapIsShared) {
  auto net = simulator::build_network(star(3, 1000));
  FlowList f;
  add(f, 0, 1, 1e6, 0, 1e9);
  add(f, 0, 2, 1e6, 0, 1e9);
  std::vector<double> send = kNoCap;
  send[0] = 20;  // rank 0 may move 20 GB/s in total: 10 each, 100 us
  auto r = simulator::run_fluid(net, f, send, kNoCap);
  EXPECT_NEAR(r.rank_end_us[0], 100, 1e-9);
}

TEST(Compute, CausalPairsAndZigzagBlocks) {
  EXPECT_EQ(planner::visible_pairs({0, 4}, {0, 4}, true), 10);  // triangle with diagonal
  EXPECT_EQ(planner::visible_pairs({4, 8}, {0, 4}, true), 16);  // wholly below
  EXPECT_EQ(planner::visible_pairs({0, 4}, {4, 8}, true), 0);   // wholly above
  EXPECT_EQ(planner::visible_pairs({2, 6}, {3, 5}, true), 0 + 1 + 2 + 2);
  // Zigzag on 2 ranks, S = 8: rank 0 holds tokens {0,1,6,7}, rank 1 {2,3,4,5}.
  auto t = star(2, 100);
  planner::Plan p = planner::build_plan(t, "zigzag", [] {
    planner::PlanOptions o;
    o.causal = true;
    return o;
  }());
  planner::Workload w = planner::parse_workload("B=1,S=8,H=1,D=128,causal");
  const double per_pair = 4.0 * 128;
  auto off = simulator::block_work(p, w, 0, 1, 0);  // {6,7} see all of {2..5}; {0,1} see none
  EXPECT_EQ(off.full_flops, 8 * per_pair);
  EXPECT_EQ(off.causal_flops, 0);
  auto diag = simulator::block_work(p, w, 0, 0, 0);  // 3 + 3 on the two diagonals, 4 below
  EXPECT_EQ(diag.full_flops, 4 * per_pair);
  EXPECT_EQ(diag.causal_flops, 6 * per_pair);
  EXPECT_EQ(simulator::block_work(p, w, 1, 0, 0).flops(), 8 * per_pair);  // the other half, exactly
  // The step's kernel time: launch + full at 100 TF/s + causal at 50 TF/s.
  auto prof = simple_profile(0, 1e9, 1e9, 100);
  EXPECT_NEAR(simulator::compute_us(prof.compute, w, diag, false), 2 + (4 * per_pair / 100 + 6 * per_pair / 50) * 1e-6,
              1e-12);
}

TEST(Compute, TileRowsPerHeadDim) {
  // 66 heads x 192 rows on 132 SMs: 192-row tiles fill half a wave, 128-row tiles (two per head) a whole
  // one, so the same work takes twice the math time when the head dim's tiles are 192 rows.
  auto prof = simple_profile(0, 1e9, 1e9, 100);
  prof.compute.sms = 132, prof.compute.tile_m = 128;
  prof.compute.rates = {rate_of(64, 100, 50)};
  planner::Workload w = planner::parse_workload("B=1,S=192,H=66,D=64");
  simulator::BlockWork b;
  b.lq = b.lk = 192, b.full_flops = 4.0 * 192 * 192 * 66 * 64;
  const double t128 = simulator::compute_us(prof.compute, w, b, false) - prof.compute.launch_us;
  prof.compute.rates[0].tile_m = 192;
  const double t192 = simulator::compute_us(prof.compute, w, b, false) - prof.compute.launch_us;
  EXPECT_NEAR(t128, b.full_flops / 100 * 1e-6, 1e-9);
  EXPECT_NEAR(t192, 2 * t128, 1e-9);
}

// The backward's CTAs: one per 128-key tile and query head, two at D=256 (each half of the columns): 66 heads of one
// key tile fill half a wave of 132 SMs at D=128 and a whole one at D=256.
TEST(Compute, BackwardCtasPerHeadDim) {
  auto prof = simple_profile(0, 1e9, 1e9, 100);
  prof.compute.sms = 132;
  simulator::BlockWork b;
  b.lq = b.lk = 128, b.key_tiles = 1;
  EXPECT_NEAR(simulator::launch_fill(prof.compute, planner::parse_workload("B=1,S=128,H=66,D=128"), b, true), 0.5, 1e-12);
  EXPECT_NEAR(simulator::launch_fill(prof.compute, planner::parse_workload("B=1,S=128,H=66,D=256"), b, true), 1.0, 1e-12);
  EXPECT_NEAR(simulator::launch_fill(prof.compute, planner::parse_workload("B=1,S=128,H=66,D=256"), b, false), 0.5, 1e-12);
}

// The backward's last wave split in parts: the closed form against the kernels' own planner (which simulates the
// dispatch CTA by CTA and may split more than the last wave) on equal walks; never longer than whole waves.
TEST(Compute, BackwardTailGainFollowsThePlanner) {
  for (int ctas : {32, 100, 132, 133, 500, 4096, 4100, 8000})
    for (int visits : {8, 16, 26, 52, 103, 205}) {
      SCOPED_TRACE("ctas " + std::to_string(ctas) + " visits " + std::to_string(visits));
      const auto plan = kernels::bwd::plan_tail(std::vector<int>(size_t(ctas), visits), 1, 132);
      const double gain = simulator::backward_tail_gain(ctas, visits, 132), planned = plan.before / plan.after;
      EXPECT_GE(gain, 1.0);
      EXPECT_LE(gain, planned * 1.001);  // the planner's wider search finds at least as much
      EXPECT_GE(gain, 1 + (planned - 1) * 0.8);
    }
  // 4,096 walks of 103 visits on 132 SMs: 31.03 waves (of 103 + 4), the last 4 CTAs in 12 parts of 9 visits (+ 5):
  // 2.8% shorter.
  EXPECT_NEAR(simulator::backward_tail_gain(4096, 103, 132), 32.0 * 107 / (31 * 107 + 14), 1e-9);
}

TEST(Engine, RingOnCompleteGraphByHand) {
  // 4 GPUs, ring, full attention, S = 4096, H = 1, D = 128: pieces of 1024 tokens * 128 * 2 (K, V) * 2 B.
  auto t = star(4, 100);
  auto prof = simple_profile(10, 40, 1e9, 100);
  planner::Workload w = planner::parse_workload("B=1,S=4096,H=1,D=128");
  const double bytes = 1024.0 * 128 * 2 * 2;
  const double comm = 10 + bytes / 40e3;                     // latency + bytes at the flow cap
  const double comp0 = 2 + 4.0 * 1024 * 1024 * 128 / 100e6;  // launch + FLOPs at 100 TF/s
  // Every later step also merges into the running out and LSE: 1024 rows of 129 fp32, read and written.
  const double comp = comp0 + 2.0 * 1024 * 129 * 4 / (prof.compute.elementwise_gbps * 1e3);
  const double expect = std::max(comm, comp0) + 2 * std::max(comm, comp) + comp;  // 3 exchanging steps, the last computes only
  for (int expand : {128, 0}) {  // the general engine (expanded plan) and the ring-flow one (compact)
    planner::PlanOptions o;
    o.expand_max_ranks = expand;
    planner::Plan p = planner::build_plan(t, "ring", o);
    auto r = simulator::simulate(p, t, w, prof);
    EXPECT_EQ(r.symmetric_fast_path, expand == 0);
    EXPECT_NEAR(r.total_us, expect, 1e-6);
    EXPECT_NEAR(r.comm_us, 3 * comm, 1e-6);
    EXPECT_NEAR(r.compute_us, comp0 + 3 * comp, 1e-6);
    EXPECT_NEAR(r.exposed_comm_us, expect - comp0 - 3 * comp, 1e-6);
    EXPECT_NEAR(r.timeline.per_rank[2][1].comm_end_us - r.timeline.per_rank[2][1].comm_start_us, comm, 1e-6);
    // Bound: each rank receives 3 pieces through its 100 GB/s port.
    EXPECT_NEAR(r.bound.comm_us, 3 * bytes / 100e3, 1e-6);
  }
}

TEST(Engine, RingBackwardOnCompleteGraphByHand) {
  // The forward's case, backward: K/V pieces travel again (steps 0..2), each accumulator (fp32 dK and dV,
  // twice the piece's bytes) one step behind from the rank after its owner (steps 2..3) and home in step 4, which
  // computes nothing (the owner's own block stays with it): 3 hops an accumulator.
  auto t = star(4, 100);
  auto prof = simple_profile(10, 40, 1e9, 100);
  prof.compute.rates[0].bwd_full_tflops = 50;
  prof.compute.small_launch_us = 1;
  planner::Workload w = planner::parse_workload("B=1,S=4096,H=1,D=128");
  const double kv = 1024.0 * 128 * 2 * 2, grad = 2 * kv;
  auto comm = [](double bytes) { return 10 + bytes / 40e3; };
  const double comp = 2 + 2.5 * 4.0 * 1024 * 1024 * 128 / 50e6;  // launch + 2.5x the FLOPs at 50 TF/s
  const double dq = 1024.0 * 128 * 4, ew = prof.compute.elementwise_gbps * 1e3;
  const double pre = 2 + 1024.0 * (128 * 6 + 4) / 1e12 + dq / ew;  // dO.O row sums, dQ scratch cleared: first launch
  const double fin = 2 + 3 * dq / ew;                               // dQ cleared and read out: the last step
  const double add = 1 + 3 * grad / 1e12;                           // received accumulator added to the own one
  const double expect = std::max(comm(kv), comp + pre) + std::max(comm(kv), comp) + (std::max(comm(kv + grad), comp) + add) +
                        (std::max(comm(grad), comp) + add) + (std::max(comm(grad), fin) + add);
  for (int expand : {128, 0}) {
    planner::PlanOptions o;
    o.expand_max_ranks = expand;
    planner::Plan p = planner::build_plan(t, "ring", o);
    simulator::SimOptions so;
    so.passes = {false, true};
    auto r = simulator::simulate(p, t, w, prof, so);
    SCOPED_TRACE(expand ? "general" : "ring-flow");
    EXPECT_EQ(r.symmetric_fast_path, expand == 0);
    EXPECT_FALSE(r.bwd_rate_estimated);
    EXPECT_NEAR(r.total_us, expect, 1e-6);
    EXPECT_NEAR(r.bwd_us, expect, 1e-6);
    EXPECT_NEAR(r.comm_us, 2 * comm(kv) + comm(kv + grad) + 2 * comm(grad), 1e-6);
    EXPECT_NEAR(r.max_rank_bytes, 3 * kv + 3 * grad, 1e-6);
    EXPECT_EQ(r.timeline.pass, "bwd");
    ASSERT_EQ(r.timeline.per_rank[1].size(), 5u);
    EXPECT_NEAR(r.timeline.per_rank[1][2].flops, 2.5 * 4.0 * 1024 * 1024 * 128, 1);
    // fwd+bwd: the backward starts when the forward ends.
    so.passes = {true, true};
    auto both = simulator::simulate(p, t, w, prof, so);
    EXPECT_NEAR(both.total_us, both.fwd_us + expect, 1e-6);
    EXPECT_EQ(both.timeline.fwd_steps, 4);
    EXPECT_EQ(both.timeline.per_rank[0].size(), 9u);
    EXPECT_NEAR(both.timeline.per_rank[0][4].compute_start_us, both.fwd_us, 1e-6);
    // The timeline holds every interval of the total: the last accumulator add closes it.
    EXPECT_NEAR(both.timeline.total_us(), both.total_us, 1e-6);
    EXPECT_NEAR(r.timeline.total_us(), r.total_us, 1e-6);
    EXPECT_NEAR(r.timeline.per_rank[1][4].post_us(), add, 1e-6);
  }
  // bf16 accumulators move half the gradient bytes.
  planner::PlanOptions o;
  o.accumulator_bytes = 2;
  simulator::SimOptions so;
  so.passes = {false, true};
  auto half = simulator::simulate(planner::build_plan(t, "ring", o), t, w, prof, so);
  EXPECT_NEAR(half.max_rank_bytes, 3 * kv + 3 * kv, 1e-6);
  // Without measured backward rates the forward's are scaled, and the result says so.
  prof.compute.rates[0].bwd_full_tflops = 0;
  auto est = simulator::simulate(planner::build_plan(t, "ring", o), t, w, prof, so);
  EXPECT_TRUE(est.bwd_rate_estimated);
  // A plan without a backward part cannot be simulated backward.
  o.backward = false;
  EXPECT_THROW(simulator::simulate(planner::build_plan(t, "ring", o), t, w, prof, so), planner::InputError);
}

TEST(Engine, GeneralAndRingFlowEnginesAgree) {
  auto prof = simulator::builtin_profile("h200-hgx-8");
  for (planner::Passes passes : {planner::Passes{true, false}, planner::Passes{false, true}, planner::Passes{true, true}})
  for (const char* topo : {"h200-hgx-8", "cluster:2x4", "complete:12"})
    for (const char* scheme : {"ring", "hamilton", "two-level"})
      for (bool causal : {false, true}) {
        auto t = planner::load_topology(topo);
        if (!planner::scheme_applies(scheme, t, causal, nullptr)) continue;
        planner::Workload w = planner::parse_workload(std::string("B=1,S=96k,H=8,D=128") + (causal ? ",causal" : ""));
        planner::PlanOptions o;
        o.causal = causal;
        planner::Plan full = planner::build_plan(t, scheme, o);
        o.expand_max_ranks = 0;
        planner::Plan compact = planner::build_plan(t, scheme, o);
        simulator::SimOptions so;
        so.passes = passes;
        auto a = simulator::simulate(full, t, w, prof, so), b = simulator::simulate(compact, t, w, prof, so);
        SCOPED_TRACE(std::string(topo) + " " + scheme + (causal ? " causal " : " ") + planner::passes_name(passes));
        // The causal backward's work differs by rank in shape (see simulate()): the general engine runs it.
        EXPECT_EQ(b.symmetric_fast_path, !causal || !passes.bwd);
        // The ring-flow engine moves the mean piece; the general one each piece's exact size (pieces
        // of a shard differ by a token when they do not divide it).
        EXPECT_NEAR(a.total_us, b.total_us, 1e-3 * a.total_us);
        EXPECT_NEAR(a.comm_us, b.comm_us, 1e-3 * a.comm_us);
        EXPECT_NEAR(a.bound.us(), b.bound.us(), 1e-3 * a.bound.us());
      }
}

TEST(Engine, HamiltonBeatsRingWhenCommunicationBound) {
  auto t = planner::load_topology("h200-hgx-8");
  auto prof = simulator::builtin_profile("h200-hgx-8");
  planner::Workload w = planner::parse_workload("B=1,S=16k,H=32,D=128");
  auto ring = simulator::simulate(planner::build_plan(t, "ring", {}), t, w, prof);
  auto ham = simulator::simulate(planner::build_plan(t, "hamilton", {}), t, w, prof);
  EXPECT_GT(ring.comm_us, ring.compute_us);
  EXPECT_LT(ham.total_us, ring.total_us);
  EXPECT_GT(ham.efficiency(), 0);
  EXPECT_LE(ham.efficiency(), 1 + 1e-9);
}

TEST(Engine, RejectsMismatchedInput) {
  auto t = planner::load_topology("complete:4");
  auto prof = simulator::builtin_profile("h200-hgx-8");
  planner::Plan p = planner::build_plan(t, "ring", {});
  EXPECT_THROW(simulator::simulate(p, planner::load_topology("complete:5"), planner::parse_workload("S=1k,H=1,D=64"), prof),
               planner::InputError);
  EXPECT_THROW(simulator::simulate(p, t, planner::parse_workload("S=3,H=1,D=64"), prof), planner::InputError);  // < a token per rank
  EXPECT_NO_THROW(simulator::simulate(p, t, planner::parse_workload("S=1001,H=1,D=64"), prof));  // shards of 250 and 251
  EXPECT_THROW(simulator::simulate(p, t, planner::parse_workload("S=1k,H=1,D=64,causal"), prof), planner::InputError);
}

// A rank's backward starts at its own forward's end: allgather pruned for the causal mask leaves rank 1 nothing to
// compute in the forward's last step (rank 0's late chunk stays home), so its backward's first kernel starts before
// the forward's end, and the run ends sooner than with the ranks starting their backward together; the slowest rank's
// terms still add up to the total.
TEST(Engine, BackwardStartsAtEachRanksForwardEnd) {
  const auto t = star(2, 1000);
  const auto prof = simulator::builtin_profile("h200-hgx-8");
  const planner::Workload w = planner::parse_workload("B=1,S=8192,H=32,D=128,causal");
  planner::PlanOptions o;
  o.causal = true, o.prune_plain = true, o.gather_pieces = 4, o.gather_steps = {2, 1, 1}, o.workload = w;
  const planner::Plan p = planner::build_plan(t, "allgather", o);
  simulator::SimOptions so;
  so.passes = {true, true};
  const auto r = simulator::simulate(p, t, w, prof, so);
  const int F = p.num_steps();
  ASSERT_EQ(r.timeline.fwd_steps, F);
  const auto& rank1 = r.timeline.per_rank[1];
  EXPECT_LT(rank1[F].compute_start_us, r.fwd_us - 1);
  EXPECT_NEAR(r.total_us, r.fwd_us + r.bwd_us, 1e-6);
  EXPECT_NEAR(r.terms.sum(), r.total_us, 1e-6);
  so.passes = {false, true};  // the backward alone: every rank from 0
  EXPECT_GT(simulator::simulate(p, t, w, prof, so).total_us, r.bwd_us);
}

// Queries moved (planner/query_moves.hpp) against allgather pruned on 2 ranks at B=1 S=8192 H=32 causal: a unit is one
// zigzag chunk of one tensor (2048 x 32 x 128 x 2 bytes). The busiest GPU sends 3 units forward (Q of c3, K/V of c0)
// where pruning alone sends 4 (K/V of c1, c2), and rank 1 computes 3 times rank 0's blocks; the terms still add up.
TEST(Engine, MovedQueriesSendFewerBytesAndLoadRankOne) {
  const auto t = star(2, 1000);
  const auto prof = simulator::builtin_profile("h200-hgx-8");
  const planner::Workload w = planner::parse_workload("B=1,S=8192,H=32,D=128,causal");
  const double unit = 2048.0 * 32 * 128 * 2;
  simulator::SimOptions so;
  so.passes = {true, true};
  for (bool moved : {false, true}) {
    planner::PlanOptions o;
    o.causal = true, o.prune_plain = true, o.move_queries = moved, o.gather_pieces = 4, o.workload = w;
    const planner::Plan p = planner::build_plan(t, "allgather", o);
    const auto r = simulator::simulate(p, t, w, prof, so);
    SCOPED_TRACE(moved ? "moved" : "pruned");
    const planner::Timeline::PassBytes sent = r.timeline.busiest_sent();
    // (backward: dK/dV in bf16, dQ of c3 16-bit too; pruned returns c1's and c2's dK/dV)
    EXPECT_NEAR(sent.fwd, (moved ? 3 : 4) * unit, 1e-6 * unit);
    EXPECT_NEAR(sent.bwd, (moved ? 3 : 4) * unit, 1e-6 * unit);
    double flops[2] = {0, 0};
    for (int rk = 0; rk < 2; ++rk)
      for (const auto& st : r.timeline.per_rank[rk]) flops[rk] += st.flops;
    EXPECT_NEAR(flops[1] / flops[0], moved ? 3.0 : 1.0, 0.02);
    EXPECT_NEAR(r.terms.sum(), r.total_us, 1e-6);
  }
}

TEST(Engine, ExecutorGapsAndSustainedClockByHand) {
  // The ring of RingOnCompleteGraphByHand with the executor's start and step gaps and a GPU that holds half
  // its boost rate: the compute stream starts 7 us late in the first step, every later step 3 us after the
  // previous one ends, and the math takes twice as long.
  auto t = star(4, 100);
  auto prof = simple_profile(10, 40, 1e9, 100);
  prof.compute.rates[0].sustained = 0.5;
  prof.executor = {7, 0, 3};
  planner::Workload w = planner::parse_workload("B=1,S=4096,H=1,D=128");
  const double bytes = 1024.0 * 128 * 2 * 2, comm = 10 + bytes / 40e3, math = 4.0 * 1024 * 1024 * 128 / 100e6;
  const double merge = 2.0 * 1024 * 129 * 4 / (prof.compute.elementwise_gbps * 1e3);  // steps after the first (memory)
  for (simulator::Clock clock : {simulator::Clock::Sustained, simulator::Clock::Boost}) {
    const double m = clock == simulator::Clock::Sustained ? 2 * math : math, comp0 = 2 + m, comp = comp0 + merge;
    const double expect = std::max(comm, 7 + comp0) + 2 * std::max(comm, comp) + comp + 3 * 3;
    for (int expand : {128, 0}) {
      planner::PlanOptions o;
      o.expand_max_ranks = expand;
      planner::Plan p = planner::build_plan(t, "ring", o);
      simulator::SimOptions so;
      so.clock = clock;
      auto r = simulator::simulate(p, t, w, prof, so);
      SCOPED_TRACE(expand);
      EXPECT_NEAR(r.total_us, expect, 1e-6);
      EXPECT_NEAR(r.timeline.per_rank[1][0].compute_start_us, 7, 1e-9);
      EXPECT_NEAR(r.timeline.per_rank[1][1].comm_start_us, std::max(comm, 7 + comp0) + 3, 1e-9);
      const auto& x = r.terms;
      EXPECT_NEAR(x.launch_us, 4 * 2 + 3 * merge, 1e-9);
      EXPECT_NEAR(x.math_us, 4 * math, 1e-6);
      EXPECT_NEAR(x.clock_us, clock == simulator::Clock::Sustained ? 4 * math : 0, 1e-6);
      EXPECT_NEAR(x.executor_us, 7 + 3 * 3, 1e-9);
      EXPECT_NEAR(x.sum(), r.total_us, 1e-6);
    }
  }
}

// A causal all-gather's reduce-scatter on 128 GPUs (16k flows, ranks ready at different times) is past the
// flow model's per-start budget: its flows start with the last rank. The answer must stay what the
// per-start solve gives where both run (8x8 is solved per start).
TEST(Engine, HugeStaggeredStepsStepTogether) {
  auto prof = simulator::builtin_profile("h200-hgx-8");
  const planner::Workload w = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal");
  simulator::SimOptions so;
  so.passes = {true, true};
  planner::PlanOptions o;
  o.causal = true;
  auto small = planner::load_topology("cluster:4x8"), big = planner::load_topology("cluster:16x8");
  auto a = simulator::simulate(planner::build_plan(small, "allgather", o), small, w, prof, so);
  auto b = simulator::simulate(planner::build_plan(big, "allgather", o), big, w, prof, so);
  EXPECT_EQ(a.lockstep_steps, 0);
  EXPECT_EQ(b.lockstep_steps, 1);
  EXPECT_GT(b.total_us, 0);
  EXPECT_LT(b.network_solves, 10);
}

// Ulysses: the pass is the all-to-all in, local attention over all S tokens with H/n heads, the all-to-all
// out; its transfers are (n-1)/n of the GPU's Q, K, V and output shards, whatever n is.
TEST(Engine, UlyssesIsAllToAllsAroundLocalAttention) {
  const SimCase c("h200-hgx-8", "ulysses", "B=1,S=64k,H=32,Hkv=8,D=128,causal", {true, false});
  const auto& [prof, t, w, p, so] = c;
  const auto r = c.run();
  // Sent per GPU: 7/8 of its 8k-token shard's Q (32 heads) + K, V (8 heads each) + out (32 heads), bf16.
  const double shard = 8192.0 * 128 * 2;
  EXPECT_NEAR(r.max_rank_bytes, 7.0 / 8 * shard * (32 + 16 + 32), 1.0);
  EXPECT_GT(r.comm_us, 0);
  EXPECT_NEAR(r.total_us, r.comm_us + r.compute_us + r.terms.executor_us, 0.05 * r.total_us);  // nothing overlaps
  // The compute is one GPU's share: 4 query heads over all 64k tokens, about 1/8 of the whole on one GPU.
  const double one = simulator::single_gpu_us(w, prof, {true, false});
  EXPECT_NEAR(r.compute_us, one / 8, 0.15 * one / 8);
  EXPECT_EQ(r.timeline.per_rank.size(), 1u);
  EXPECT_EQ(r.timeline.per_rank[0].size(), 3u);  // in, attention, out
  // Heads that do not split over 8 GPUs: a clear error.
  EXPECT_THROW(simulator::simulate(p, t, planner::parse_workload("B=1,S=64k,H=12,Hkv=12,D=128,causal"), prof, so),
               planner::InputError);
}

// Head groups: each group's all-to-all in runs beside the previous group's attention. The same bytes move and
// the same FLOPs are computed in G pieces; the pass shortens where the exchanges were exposed, never below the
// longer of its exchanges and its attention, and the timeline lists G exchanges in, G groups' steps, G out.
TEST(Engine, HeadGroupsPipelineTheAllToAlls) {
  SimCase c("complete:2", "ulysses", "B=1,S=8192,H=32,D=128,causal", {true, true});
  auto& [prof, t, w, p, so] = c;
  p.head_groups = 1;
  const auto one = simulator::simulate(p, t, w, prof, so);
  for (int g : {2, 4}) {
    SCOPED_TRACE("head groups " + std::to_string(g));
    p.head_groups = g;
    const auto r = simulator::simulate(p, t, w, prof, so);
    EXPECT_NEAR(r.max_rank_bytes, one.max_rank_bytes, 1e-6 * one.max_rank_bytes);
    EXPECT_NEAR(r.max_rank_flops, one.max_rank_flops, 1e-6 * one.max_rank_flops);
    // At S=8192 on 2 GPUs the exchanges and their copies are about a quarter of the pass (less since the backward's
    // results leave in 16 bits): G groups hide some 5% of it.
    EXPECT_LT(r.total_us, 0.96 * one.total_us);
    // Not below either stream's own work in each pass (the executor's step gaps and launches are the floor's slack).
    EXPECT_GT(r.total_us, std::max(r.comm_us, r.compute_us) * 0.95);
    ASSERT_EQ(r.timeline.per_rank.size(), 1u);
    EXPECT_EQ(r.timeline.per_rank[0].size(), size_t(2 * 3 * g));  // fwd and bwd: G in, G groups' step, G out
    EXPECT_EQ(r.timeline.fwd_steps, 3 * g);
    // The exchanges in run back to back from the pass's start; a group's steps start once its own has arrived.
    const auto& row = r.timeline.per_rank[0];
    for (int k = 1; k < g; ++k) EXPECT_NEAR(row[k].comm_start_us, row[k - 1].comm_end_us, 1e-6);
    for (int k = 0; k < g; ++k) EXPECT_GE(row[g + k].compute_start_us, row[k].comm_end_us - 1e-6);
    for (int k = 0; k < g; ++k) EXPECT_GE(row[2 * g + k].comm_start_us, row[g + k].compute_end_us - 1e-6);
  }
  // Heads that do not split into the groups: a clear error.
  p.head_groups = 3;
  EXPECT_THROW(simulator::simulate(p, t, w, prof, so), planner::InputError);
}

// A plan run from a training framework (SimOptions::framework): each pass of a token-parallel rank adds its copies
// to and from the framework's tensors, written out here by hand (S=65536 H=32 D=128 on 2 GPUs: O cast in the forward,
// dK/dV cast with the last adds in the backward, at the profile's HBM rate), as executor time; the terms still add up.
// Head-parallel plans make no such copies.
TEST(Engine, FrameworkCopiesByHand) {
  SimCase c("complete:2", "allgather", "B=1,S=65536,H=32,D=128,causal", {true, true});
  const auto& prof = c.prof;
  const auto plain = c.run();
  c.so.framework = true;
  const auto fw = c.run();
  const double tokens = 32768, kv16 = tokens * 32 * 128 * 2 * 2, rate = prof.compute.hbm_gbps * 1e3;
  const double fwd = tokens * 32 * 128 * 6 / rate + prof.compute.small_launch_us;  // O's cast
  // The backward: both own pieces' last partials arrive in allgather's last step, so their casts make those adds,
  // writing 2 bytes an element where tasp run's adds write 4 (and no launch of their own).
  const double bwd = -kv16 / 2 * 2 / rate;
  EXPECT_NEAR(fw.fwd_us - plain.fwd_us, fwd, 1e-6 * fwd);
  EXPECT_NEAR(fw.bwd_us - plain.bwd_us, bwd, 1e-6 * std::abs(bwd));
  EXPECT_NEAR(fw.total_us, fw.terms.sum(), 1e-6 * fw.total_us);
  EXPECT_NEAR(fw.terms.executor_us - plain.terms.executor_us, fwd + bwd, 1e-6 * (fwd + bwd));
  EXPECT_GT(fwd, 150);  // about 0.2 ms of 110
  EXPECT_LT(bwd, -50);
  // A ring's accumulators come home in its last step to the owner's own block's, and that add is fused too.
  SimCase ring("complete:3", "ring", "B=1,S=65536,H=32,D=128", {true, true});
  ASSERT_EQ(ring.p.accumulator_bytes, 4);
  const double ring_plain = ring.run().bwd_us;
  ring.so.framework = true;
  EXPECT_LT(ring.run().bwd_us, ring_plain - 50);
  SimCase u("complete:2", "ulysses", "B=1,S=65536,H=32,D=128,causal", {true, true});
  const double before = u.run().total_us;
  u.so.framework = true;
  EXPECT_EQ(u.run().total_us, before);
}
