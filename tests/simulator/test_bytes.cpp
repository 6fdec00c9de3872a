// Fewest bytes: what each scheme's plan makes the busiest GPU send, forward and backward, against what the
// problem needs. Every GPU must receive K/V of the other n-1 shards, so no token-moving forward sends less than
// (n-1) K/V shards; a backward that keeps the forward's K/V needs only the others' dK/dV partial sums back
// ((n-1) shards at the accumulator's width); Ulysses moves (n-1)/n of the GPU's Q, K, V, O shards forward and of
// dO, dQ, dK, dV backward.
#include <gtest/gtest.h>
#include <algorithm>
#include <string>
#include "planner/minimum_bytes.hpp"
#include "planner/schemes/schemes.hpp"
#include "simulator/choose.hpp"
#include "simulator/engine.hpp"
#include "simulator/profile.hpp"

using namespace tasp;

namespace {

using PassBytes = planner::Timeline::PassBytes;

PassBytes sent(const std::string& scheme, int n, const planner::Workload& w, planner::Plan* plan = nullptr,
               bool prune_plain = false, const std::string& accumulator = "auto", int gather_pieces = 1) {
  const auto prof = simulator::builtin_profile("h200-hgx-8");
  const auto t = planner::load_topology("complete:" + std::to_string(n));
  simulator::PlanChoices h;
  h.prune_plain = prune_plain, h.accumulator = accumulator, h.gather_pieces = gather_pieces;
  planner::Plan p = planner::build_plan(t, scheme, simulator::plan_options(scheme, w, h));
  simulator::SimOptions so;
  so.passes = {true, true};
  const PassBytes b = simulator::simulate(p, t, w, prof, so).timeline.busiest_sent();
  if (plan) *plan = std::move(p);
  return b;
}

}  // namespace

TEST(Bytes, EverySchemeAgainstTheMinimum) {
  const planner::Workload w = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal");
  for (int n : {2, 4, 8}) {
    const double shard = double(w.S) / n * w.D * 2;  // one head's bf16 rows of a GPU's shard
    const double kv = 2 * w.Hkv * shard;              // its K and V
    for (const std::string s : {"ring", "zigzag", "allgather", "hamilton"}) {
      SCOPED_TRACE(s + " on " + std::to_string(n));
      planner::Plan p;
      const PassBytes b = sent(s, n, w, &p);
      const double grad = kv * p.accumulator_bytes / 2;
      EXPECT_NEAR(b.fwd, (n - 1) * kv, 1e-6 * kv);
      if (p.backward.keeps_kv) {
        EXPECT_NEAR(b.bwd, (n - 1) * grad, 1e-6 * kv);                  // the minimum
      } else {
        // Ring-flow backwards send the K/V again and carry each accumulator home from the rank after its owner:
        // n-1 K/V hops, n-1 accumulator hops (the minimum for a backward that moves K/V again).
        EXPECT_NEAR(b.bwd, (n - 1) * kv + (n - 1) * grad, 1e-6 * kv);
      }
    }
    SCOPED_TRACE("ulysses on " + std::to_string(n));
    const PassBytes u = sent("ulysses", n, w);
    EXPECT_NEAR(u.fwd, (n - 1.0) / n * shard * (w.H + 2 * w.Hkv + w.H), 1e-6 * kv);
    // Backward: the forward's head-layout Q, K, V, O stay; dO goes in, dQ, dK, dV come out (16 bits).
    EXPECT_NEAR(u.bwd, (n - 1.0) / n * shard * (w.H + w.H + 2 * w.Hkv), 1e-6 * kv);
  }
}

// allgather's default backward keeps the forward's K/V and sends bf16 partial sums: the least any token-moving
// backward can send, and (n-1)/((n-1)(1+2)) of what a ring's backward sends with fp32 accumulators.
TEST(Bytes, AllgatherBackwardSendsOnlyTheOthersPartialSums) {
  const planner::Workload w = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal");
  planner::Plan ag, ring;
  const PassBytes a = sent("allgather", 8, w, &ag), r = sent("ring", 8, w, &ring);
  EXPECT_TRUE(ag.backward.keeps_kv);
  EXPECT_EQ(ag.accumulator_bytes, 2);
  EXPECT_NEAR(a.bwd / r.bwd, 7.0 / (7 + 7 * ring.accumulator_bytes / 2.0), 1e-9);
}

// Plain masks pruned on request (PlanOptions::prune_plain): under a full mask nothing is skipped (a ring-flow
// backward's accumulators take n-1 hops either way); under a causal zigzag layout a rank also gets only the K/V its
// queries see, never more than unpruned: on 2 GPUs the busiest GPU's backward is one K/V shard and one accumulator.
TEST(Bytes, PlainMasksPrunedOnRequest) {
  const planner::Workload full = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128");
  const planner::Workload causal = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal");
  for (int n : {2, 4, 8}) {
    const double kv = 2 * full.Hkv * double(full.S) / n * full.D * 2;  // a GPU's K and V shard, bf16
    for (const std::string s : {"ring", "hamilton"}) {
      SCOPED_TRACE(s + " on " + std::to_string(n));
      planner::Plan p;
      const PassBytes b = sent(s, n, full, &p, true);
      const double grad = kv * p.accumulator_bytes / 2;
      EXPECT_TRUE(p.pruned.any());
      EXPECT_NEAR(b.fwd, (n - 1) * kv, 1e-6 * kv);
      EXPECT_NEAR(b.bwd, (n - 1) * kv + (n - 1) * grad, 1e-6 * kv);
    }
    SCOPED_TRACE("zigzag, causal, on " + std::to_string(n));
    planner::Plan p;
    const PassBytes plain = sent("zigzag", n, causal, &p), pruned = sent("zigzag", n, causal, nullptr, true);
    const double grad = kv * p.accumulator_bytes / 2;
    EXPECT_LE(pruned.fwd, plain.fwd + 1e-6 * kv);
    EXPECT_LE(pruned.bwd, plain.bwd + 1e-6 * kv);
    if (n == 2) {
      EXPECT_NEAR(pruned.bwd, kv + grad, 1e-6 * kv);
    }
  }
}

// The bytes half of a run's bound (`tasp run`): a profile's fastest measured send rate on a communicator size, the
// highest point of its one-peer and whole-rank curves as a step of that size delivers it.
TEST(Bytes, PeakSendRateIsTheProfilesFastestPoint) {
  simulator::Profile p;
  simulator::CommProfile two, eight;
  two.latency_us = eight.latency_us = 0;  // (a step's latency: below)
  two.ranks = 2, two.flow_cap_gbps.points = {{1 << 20, 120}, {1 << 28, 310}}, two.rank_cap_gbps.points = {{1 << 20, 90}};
  eight.ranks = 8, eight.flow_cap_gbps.points = {{1 << 20, 40}}, eight.rank_cap_gbps.points = {{1 << 28, 350}, {1 << 30, 200}};
  p.comm = {two, eight};
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2), 310);
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(4), 310);  // the largest measured size not above 4
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(8), 350);
  p.comm[0].collective_gbps.points = {{1 << 28, 400}};  // NCCL's all-gather: counts only for a run that uses it
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2), 310);
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2, true), 400);
  // A reduce-scatter's own rate: the peak of a pass that only reduce-scatters, and no lower bound for one that gathers.
  p.comm[0].reduce_gbps.points = {{1 << 28, 330}};
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2, true, true), 330);
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2, true), 400);
  p.comm[0].reduce_gbps.points = {{1 << 28, 450}};
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2, true), 450);
  p.comm[0].reduce_gbps = {};
  EXPECT_DOUBLE_EQ(p.peak_send_gbps(2, true, true), 400);  // not measured apart: the gathers' rate
  // Each point as a step of its size delivers it, latency included: 256 KiB at 4.6 GB/s past 120 us of latency moved
  // 1.5 GB/s, 16 MiB at 4.3 moved 4.2 (sockets over loopback, 2026-11-27): the peak is the second.
  simulator::Profile s;
  simulator::CommProfile sock;
  sock.ranks = 2, sock.latency_us = 120, sock.collective_gbps.points = {{1 << 18, 4.6}, {1 << 24, 4.3}};
  s.comm = {sock};
  const double at16 = double(1 << 24) / (double(1 << 24) / 4.3e3 + 120) / 1e3;
  EXPECT_NEAR(s.peak_send_gbps(2, true), at16, 1e-9);
  EXPECT_LT(at16, 4.3);
  EXPECT_GT(at16, 4.1);
}

// Every accumulator choice (`--accumulator fp32|bf16`) moves what it says: the accumulators' bytes scale with their
// width, the K/V's do not.
TEST(Bytes, EveryAccumulatorChoiceAgainstTheMinimum) {
  const planner::Workload w = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal");
  for (int n : {2, 4, 8}) {
    const double kv = 2 * w.Hkv * double(w.S) / n * w.D * 2;
    for (const std::string acc : {"fp32", "bf16"})
      for (const std::string s : {"ring", "zigzag", "allgather", "hamilton"}) {
        SCOPED_TRACE(s + " on " + std::to_string(n) + " with " + acc + " accumulators");
        planner::Plan p;
        const PassBytes b = sent(s, n, w, &p, false, acc);
        ASSERT_EQ(p.accumulator_bytes, acc == "fp32" ? 4 : 2);
        const double grad = kv * p.accumulator_bytes / 2;
        EXPECT_NEAR(b.bwd, p.backward.keeps_kv ? (n - 1) * grad : (n - 1) * (kv + grad), 1e-6 * kv);
      }
  }
}

// The minimum `run` and `simulate` print (planner::minimum_sent_bytes): every scheme's plan, every accumulator and
// kept-K/V choice, on 2 to 8 GPUs, GQA and MHA, allgather in 1 to 3 pieces, sends it within 2% (ragged shards), except
// where a plan pruned for a mask that leaves blocks out sends less; hybrids have none.
TEST(Bytes, PlansSendThePrintedMinimum) {
  for (const char* text : {"B=1,S=64k,H=32,Hkv=8,D=128,causal", "B=2,S=30001,H=16,D=64"}) {
    const planner::Workload w = planner::parse_workload(text);
    for (int n : {2, 3, 4, 8})
      for (const std::string acc : {"fp32", "bf16"})
        for (const std::string s : {"ring", "zigzag", "allgather", "hamilton", "ulysses"})
          for (int P = 1; P <= (s == "allgather" ? 3 : 1); ++P) {
            if (s == "zigzag" && !w.causal) continue;
            if (s == "ulysses" && (w.H % n || acc == "fp32")) continue;
            SCOPED_TRACE(s + " on " + std::to_string(n) + " with " + acc + ", " + text + ", " + std::to_string(P) + " pieces");
            planner::Plan p;
            const PassBytes b = sent(s, n, w, &p, false, acc, P);
            if (s == "allgather") ASSERT_EQ(p.pieces_per_rank, P);
            const auto m = planner::minimum_sent_bytes(p, w);
            ASSERT_TRUE(m.has_value());
            EXPECT_NEAR(b.fwd / m->fwd, 1.0, 0.02);
            EXPECT_NEAR(b.bwd / m->bwd, 1.0, 0.02);
          }
  }
  // Queries moved (2 ranks): the owner's Q and early chunk's K/V, 3 chunk-tensors, against 4 for K/V alone.
  for (const char* text : {"B=1,S=8192,H=32,D=128,causal", "B=2,S=4096,H=16,Hkv=4,D=64,causal"}) {
    const planner::Workload w = planner::parse_workload(text);
    const auto t = planner::load_topology("complete:2");
    simulator::PlanChoices h;
    h.move_queries = true, h.gather_pieces = 2;
    const planner::Plan p = planner::build_plan(t, "allgather", simulator::plan_options("allgather", w, h));
    simulator::SimOptions so;
    so.passes = {true, true};
    const PassBytes b = simulator::simulate(p, t, w, simulator::builtin_profile("h200-hgx-8"), so).timeline.busiest_sent();
    const auto m = planner::minimum_sent_bytes(p, w);
    SCOPED_TRACE(text);
    ASSERT_TRUE(m.has_value());
    EXPECT_NEAR(b.fwd / m->fwd, 1.0, 0.02);
    EXPECT_NEAR(b.bwd / m->bwd, 1.0, 0.02);
    const double chunk = double(w.S) / 4 * w.B * w.D * 2;  // one head of a chunk, 16 bits
    if (w.H == w.Hkv) EXPECT_NEAR(m->fwd, 3 * w.H * chunk, 1e-6 * chunk);
  }
  planner::Plan pruned;
  const planner::Workload window = planner::parse_workload("B=1,S=64k,H=32,Hkv=8,D=128,causal,window=1024");
  const PassBytes b = sent("ring", 4, window, &pruned);
  EXPECT_LT(b.fwd, 0.5 * planner::minimum_sent_bytes(pruned, window)->fwd);  // a window needs less, and gets it
  const auto t = planner::load_topology("complete:8");
  planner::PlanOptions o;
  o.ulysses = 2;
  EXPECT_FALSE(planner::minimum_sent_bytes(planner::build_plan(t, "usp", o), window).has_value());
}
