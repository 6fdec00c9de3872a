// Machine profiles: fitted from measurements (tasp calibrate) back to the profile that made them, read and written as
// YAML with errors that name line and field, and the shipped H200 profile against the steps it was fitted to.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cases.hpp"
#include "simulator/calibrate.hpp"
#include "simulator/compute_model.hpp"
#include "simulator/microbench.hpp"
#include "tests/input_errors.hpp"

using namespace tasp;
using namespace tasp::simtest;

// The shipped H200 profile replays the measured ring and 7-peer steps at 4..256 MiB within 15%.
TEST(Profile, H200MatchesMeasuredSteps) {
  std::ifstream in(std::string(TASP_SOURCE_DIR) + "/docs/measurements/data/nccl/h200x8-steps-2026-11-22.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  auto samples = simulator::read_samples_csv(ss.str(), "h200x8-steps-2026-11-22.csv");
  auto prof = simulator::builtin_profile("h200-hgx-8");
  auto net = simulator::build_network(planner::load_topology("h200-hgx-8"), prof.link_efficiency);
  int checked = 0;
  for (const auto& c : samples.comm) {
    if (c.ranks != 8 || (c.kind != "ring" && c.kind != "multi") || c.bytes < 4 * 1048576.0) continue;
    const double us = simulator::predict_comm_step_us(net, prof, c.kind, 8, c.bytes);
    EXPECT_NEAR(us / c.us, 1.0, 0.15) << c.kind << " " << c.bytes;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(Calibrate, RecoversAKnownProfile) {
  auto net = simulator::build_network(star(8, 450));
  simulator::Profile truth = simple_profile(0, 1, 1, 1);
  simulator::CommProfile c;
  c.ranks = 8;
  c.latency_us = 20;
  c.peer_latency_us = 3;
  c.flow_cap_gbps.points = {{1 << 20, 40}, {1 << 26, 90}, {1 << 28, 300}};
  c.rank_cap_gbps.points = {{1 << 20, 60}, {1 << 28, 170}};
  truth.comm = {c};
  truth.compute.launch_us = 5;
  truth.compute.half_len = 80;
  truth.compute.sms = 132;
  truth.compute.tile_m = 128;
  truth.compute.rates = {rate_of(128, 350, 320)};
  truth.compute.rates[0].bwd_full_tflops = 290, truth.compute.rates[0].bwd_causal_tflops = 260;
  simulator::Samples s;
  for (double mib : {1, 4, 16, 64, 256})
    for (const char* kind : {"ring", "multi"})
      s.comm.push_back({kind, 8, mib * 1048576, simulator::predict_comm_step_us(net, truth, kind, 8, mib * 1048576)});
  for (int S : {1024, 2048, 4096, 8192, 16384})
    for (bool causal : {false, true}) {
      simulator::KernelSample k;
      k.B = 1, k.H = 16, k.D = 128, k.lq = k.lk = S, k.causal = causal;
      planner::Workload w;
      w.B = 1, w.H = 16, w.Hkv = 16, w.D = 128;
      const simulator::BlockWork b = simulator::whole_block(w, S, S, causal);
      k.us = simulator::compute_us(truth.compute, w, b, false);
      s.kernel.push_back(k);
      k.backward = true;
      k.us = simulator::backward_alone_us(truth.compute, w, b);
      s.kernel.push_back(k);
    }
  std::vector<simulator::FitCheck> checks;
  simulator::Profile base = simple_profile(1, 1, 1, 1);
  base.compute.sms = 132, base.compute.tile_m = 128;  // hardware facts the fit takes from its base
  auto fit = simulator::fit_profile(s, base, net, &checks);
  ASSERT_EQ(fit.comm_for(8).ranks, 8);
  EXPECT_NEAR(fit.compute.rate(128).full_tflops, 350, 0.5);
  EXPECT_NEAR(fit.compute.rate(128).causal_tflops, 320, 0.5);
  EXPECT_NEAR(fit.compute.launch_us, 5, 0.05);
  EXPECT_NEAR(fit.compute.rate(128).full_half_len, 80, 0.5);
  EXPECT_NEAR(fit.compute.rate(128).causal_half_len, 80, 0.5);
  EXPECT_FALSE(fit.compute.bwd_rate(128).estimated);
  EXPECT_NEAR(fit.compute.bwd_rate(128).full_tflops, 290, 0.5);
  EXPECT_NEAR(fit.compute.bwd_rate(128).causal_tflops, 260, 0.5);
  for (const auto& ch : checks) EXPECT_NEAR(ch.error(), 0, 0.01) << ch.what;
}

TEST(Calibrate, SustainedFractionsAndExecutorTermsFromMeasurements) {
  auto net = simulator::build_network(star(2, 450));
  simulator::Profile truth = simple_profile(5, 100, 100, 1);
  truth.compute.launch_us = 5, truth.compute.half_len = 80, truth.compute.sms = 132, truth.compute.tile_m = 128;
  truth.compute.rates = {rate_of(128, 600, 560)};
  truth.compute.rates[0].bwd_full_tflops = 420, truth.compute.rates[0].bwd_causal_tflops = 390;
  const simulator::Profile hot = [&] {
    simulator::Profile h = truth;
    h.compute.rates[0].sustained = 0.9, h.compute.rates[0].bwd_sustained = 0.97;
    return h.at_clock(simulator::Clock::Sustained);
  }();
  simulator::Samples s;
  for (int S : {2048, 4096, 8192, 16384})
    for (bool causal : {false, true})
      for (bool bwd : {false, true})
        for (double heat : {0.0, 500.0}) {
          simulator::KernelSample k;
          k.B = 1, k.H = 32, k.D = 128, k.lq = k.lk = S, k.causal = causal, k.backward = bwd, k.heat_ms = heat;
          planner::Workload w;
          w.B = 1, w.H = 32, w.Hkv = 32, w.D = 128, w.causal = causal;
          const simulator::BlockWork b = simulator::whole_block(w, S, S, causal);
          const auto& cp = heat > 0 ? hot.compute : truth.compute;
          k.us = bwd ? simulator::backward_alone_us(cp, w, b) : simulator::compute_us(cp, w, b, false);
          s.kernel.push_back(k);
        }
  simulator::Profile base = simple_profile(1, 1, 1, 1);
  base.compute.sms = 132, base.compute.tile_m = 128;
  std::vector<simulator::FitCheck> checks;
  auto fit = simulator::fit_profile(s, base, net, &checks);
  EXPECT_NEAR(fit.compute.rate(128).full_tflops, 600, 0.5);  // the peaks from the cold rows only
  EXPECT_NEAR(fit.compute.rate(128).sustained, 0.9, 2e-3);
  EXPECT_NEAR(fit.compute.rate(128).bwd_sustained, 0.97, 2e-3);
  for (const auto& ch : checks) EXPECT_NEAR(ch.error(), 0, 0.01) << ch.what;

  // A measured fwd+bwd timeline: forward launch 40 us in, steps 4 us apart, the backward's launch 6 us after
  // the forward's end.
  planner::Timeline tl;
  tl.source = "cuda", tl.pass = "fwd+bwd", tl.fwd_steps = 2;
  auto step = [](double c0, double c1, double k0, double k1, double bytes) {
    planner::StepTiming x;
    x.comm_start_us = c0, x.comm_end_us = c1, x.compute_start_us = k0, x.compute_end_us = k1, x.bytes = bytes, x.flops = 1;
    return x;
  };
  tl.per_rank = {{step(5, 300, 40, 500, 1), step(504, 504, 504, 900, 0), step(910, 1200, 906, 1500, 1),
                  step(1504, 1800, 1505, 2000, 1)}};
  const auto e = simulator::fit_executor({tl}, {});
  EXPECT_NEAR(e.fwd_start_us, 40, 1e-9);
  EXPECT_NEAR(e.bwd_start_us, 6, 1e-9);
  EXPECT_NEAR(e.step_gap_us, 4, 1e-9);
}

TEST(Calibrate, GqaCurvesFromRowsBesideTheirMhaShapes) {
  // A kernel whose backward keeps 95% of its MHA rate at groups of 4 and 80% at 8, and whose forward gains 4% at 4;
  // a second file has MHA rows only, 5% faster (another GPU): it must not pass for a GQA cost.
  auto net = simulator::build_network(star(2, 450));
  simulator::Profile truth = simple_profile(5, 100, 100, 1);
  truth.compute.launch_us = 5, truth.compute.half_len = 80, truth.compute.sms = 132, truth.compute.tile_m = 128;
  truth.compute.rates = {rate_of(128, 600, 560)};
  auto& tr = truth.compute.rates[0];
  tr.bwd_full_tflops = 420, tr.bwd_causal_tflops = 390, tr.sustained = 0.9, tr.bwd_sustained = 0.95;
  tr.bwd_gqa.points = {{1, 1}, {4, 0.95}, {8, 0.8}};
  tr.gqa.points = {{1, 1}, {4, 1.04}};
  simulator::Profile other = truth;
  for (auto& r : other.compute.rates)
    r.full_tflops *= 1.05, r.causal_tflops *= 1.05, r.bwd_full_tflops *= 1.05, r.bwd_causal_tflops *= 1.05;
  simulator::Samples s;
  for (int source : {0, 1})
    for (int S : {2048, 4096, 8192, 16384})
      for (int hkv : {32, 8, 4})
        for (bool causal : {false, true})
          for (bool bwd : {false, true})
            for (double heat : {0.0, 500.0}) {
              if (source == 1 && hkv != 32) continue;
              simulator::KernelSample k;
              k.B = 1, k.H = 32, k.Hkv = hkv, k.D = 128, k.lq = k.lk = S, k.causal = causal, k.backward = bwd, k.heat_ms = heat;
              k.source = source;
              planner::Workload w;
              w.B = 1, w.H = 32, w.Hkv = hkv, w.D = 128, w.causal = causal;
              const simulator::BlockWork b = simulator::whole_block(w, S, S, causal);
              const simulator::Profile at = (source ? other : truth).at_clock(heat > 0 ? simulator::Clock::Sustained : simulator::Clock::Boost);
              k.us = bwd ? simulator::backward_alone_us(at.compute, w, b) : simulator::compute_us(at.compute, w, b, false);
              s.kernel.push_back(k);
            }
  simulator::Profile base = simple_profile(1, 1, 1, 1);
  base.compute.sms = 132, base.compute.tile_m = 128;
  std::vector<simulator::FitCheck> checks;
  auto fit = simulator::fit_profile(s, base, net, &checks);
  const auto& r = fit.compute.rate(128);
  ASSERT_EQ(r.bwd_gqa.points.size(), 3u);
  EXPECT_EQ(r.bwd_gqa.points[0], (std::pair<double, double>{1, 1}));
  EXPECT_NEAR(r.bwd_gqa.at(4), 0.95, 2e-3);
  EXPECT_NEAR(r.bwd_gqa.at(8), 0.8, 2e-3);
  EXPECT_NEAR(r.gqa.at(4), 1.04, 2e-3);
  EXPECT_NEAR(r.gqa.at(8), 1.04, 2e-3);  // the truth's curve is flat past its last point
  EXPECT_NEAR(fit.compute.gqa_fraction(128, 32, 32, true), 1, 1e-12);
  EXPECT_NEAR(fit.compute.gqa_fraction(128, 40, 8, true), 0.95 - 0.15 * (std::log2(5) - 2), 2e-3);  // between 4 and 8
  // The MHA rows of both files fit the rates between the two GPUs'; every row is predicted within that spread.
  EXPECT_GT(r.full_tflops, 600);
  EXPECT_LT(r.full_tflops, 630);
  for (const auto& ch : checks) EXPECT_NEAR(ch.error(), 0, 0.04) << ch.what;
}

TEST(ProfileYaml, RoundTripAndErrorsNameLineAndField) {
  auto p = simulator::builtin_profile("h200-hgx-8");
  std::ostringstream o;
  simulator::write_profile_yaml(o, p);
  auto q = simulator::profile_from_yaml_text(o.str(), "rt.yaml");
  ASSERT_EQ(q.comm.size(), p.comm.size());
  EXPECT_EQ(q.compute.tile_rows(64), 192);  // the kernel's D=64 tiles, per head dim
  EXPECT_EQ(q.compute.tile_rows(128), 128);
  EXPECT_NEAR(q.comm.back().flow_cap_gbps.at(3e7), p.comm.back().flow_cap_gbps.at(3e7), 1e-3 * p.comm.back().flow_cap_gbps.at(3e7));
  ASSERT_FALSE(p.comm.back().collective_gbps.empty());  // NCCL's all-gather, fitted from the step table's rows
  EXPECT_NEAR(q.comm.back().collective_gbps.at(3e7), p.comm.back().collective_gbps.at(3e7), 1e-3 * p.comm.back().collective_gbps.at(3e7));
  // Measured backward rates survive the round trip; without them the rate is the forward's, scaled.
  EXPECT_FALSE(q.compute.bwd_rate(128).estimated);  // the shipped H200 profile has the backward kernel's
  EXPECT_NEAR(q.compute.bwd_rate(128).full_tflops, p.compute.bwd_rate(128).full_tflops, 1e-2);
  for (auto& r : p.compute.rates) r.bwd_full_tflops = r.bwd_causal_tflops = 0;
  EXPECT_TRUE(p.compute.bwd_rate(128).estimated);
  EXPECT_NEAR(p.compute.bwd_rate(128).full_tflops, p.compute.rate(128).full_tflops * p.compute.bwd_estimate, 1e-3);
  p.compute.rates.back().bwd_full_tflops = 500, p.compute.rates.back().bwd_causal_tflops = 480;
  std::ostringstream o2;
  simulator::write_profile_yaml(o2, p);
  q = simulator::profile_from_yaml_text(o2.str(), "rt2.yaml");
  EXPECT_FALSE(q.compute.bwd_rate(p.compute.rates.back().head_dim).estimated);
  EXPECT_NEAR(q.compute.bwd_rate(p.compute.rates.back().head_dim).causal_tflops, 480, 1e-9);
  // Sustained fractions and the executor's terms survive it too, and at_clock applies the fractions.
  p.compute.rates.back().sustained = 0.9, p.compute.rates.back().bwd_sustained = 0.95;
  p.executor = {41.5, 3.25, 4.5};
  std::ostringstream o3;
  simulator::write_profile_yaml(o3, p);
  q = simulator::profile_from_yaml_text(o3.str(), "rt3.yaml");
  const int hd = p.compute.rates.back().head_dim;
  EXPECT_NEAR(q.compute.rate(hd).sustained, 0.9, 1e-9);
  EXPECT_NEAR(q.executor.fwd_start_us, 41.5, 1e-9);
  EXPECT_NEAR(q.executor.bwd_start_us, 3.25, 1e-9);
  EXPECT_NEAR(q.executor.step_gap_us, 4.5, 1e-9);
  const auto hot = q.at_clock(simulator::Clock::Sustained), cool = q.at_clock(simulator::Clock::Boost);
  EXPECT_NEAR(hot.compute.rate(hd).full_tflops, 0.9 * q.compute.rate(hd).full_tflops, 1e-9);
  EXPECT_NEAR(hot.compute.bwd_rate(hd).causal_tflops, 0.95 * 480, 1e-9);
  EXPECT_NEAR(cool.compute.rate(hd).full_tflops, q.compute.rate(hd).full_tflops, 1e-9);
  // So do the GQA curves.
  p.compute.rates.back().bwd_gqa.points = {{1, 1}, {4, 0.93}, {8, 0.81}};
  std::ostringstream o4;
  simulator::write_profile_yaml(o4, p);
  q = simulator::profile_from_yaml_text(o4.str(), "rt4.yaml");
  EXPECT_NEAR(q.compute.gqa_fraction(hd, 64, 8, true), 0.81, 1e-9);
  EXPECT_NEAR(q.compute.gqa_fraction(hd, 64, 8, false), 1, 1e-12);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty profile"},
      {"name: x\ncomm: []\ncompute: {rates: [{head_dim: 128, full_tflops: 1}]}\n", "comm"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: -1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 128, full_tflops: 1}]}\n",
       ":3:"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[4, 2], [2, 3]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 128, full_tflops: 1}]}\n",
       "flow_cap_gbps[1]"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 128}]}\n",
       "full_tflops"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, tile_m: 0}]}\n",
       "rates[0].tile_m"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, bwd_causal_tflops: 3}]}\n",
       "rates[0].bwd_full_tflops"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {bwd_estimate: 0, rates: [{head_dim: 64, full_tflops: 1}]}\n",
       "compute.bwd_estimate"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, sustained: 1.5}]}\n",
       "rates[0].sustained"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1}]}\nexecutor: {step_gap_us: -2}\n",
       "executor.step_gap_us"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1}]}\nexecutor: {gap: 2}\n",
       "gap"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, bwd_gqa: [[1, 1], [0.5, 0.9]]}]}\n",
       "rates[0].bwd_gqa[1]"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, gqa: [[4, 3]]}]}\n",
       "rates[0].gqa[0][1]"},
      {"name: x\ncomm:\n  - {ranks: 8, latency_us: 1, flow_cap_gbps: [[1, 2]], rank_cap_gbps: [[1, 2]]}\ncompute: {rates: [{head_dim: 64, full_tflops: 1, gqa: 0.9}]}\n",
       "[group, fraction]"},
      {"name: x\nbogus: 1\n", "bogus"},
      {"name: [x\n", "syntax"},
  };
  test_support::expect_input_errors([](const std::string& t) { simulator::profile_from_yaml_text(t, "bad.yaml"); }, bad,
                                    "bad.yaml");
}

// Mutations of a valid profile: each is accepted or rejected with InputError, never a crash.
TEST(ProfileYaml, Fuzz) {
  const std::string good = simulator::builtin_profile_text("h200-hgx-8");
  ASSERT_FALSE(good.empty());
  const std::string alphabet = "[]{}:,-#'\" \n0123456789.eaxz";
  uint64_t seed = 12345;
  auto rnd = [&] { return seed = seed * 6364136223846793005ULL + 1442695040888963407ULL, seed >> 33; };
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string t = good;
    for (int k = 0, m = 1 + int(rnd() % 4); k < m; ++k) {
      size_t at = rnd() % t.size();
      switch (rnd() % 3) {
        case 0: t[at] = alphabet[rnd() % alphabet.size()]; break;
        case 1: t.erase(at, 1 + rnd() % 8); break;
        default: t.insert(at, 1, alphabet[rnd() % alphabet.size()]);
      }
    }
    try {
      auto p = simulator::profile_from_yaml_text(t, "fuzz.yaml");
      for (const auto& c : p.comm) EXPECT_GT(c.flow_cap_gbps.at(1e6), 0);
    } catch (const planner::InputError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
}

TEST(CalibrateCsv, ErrorsNameLineAndColumn) {
  EXPECT_NO_THROW(simulator::read_samples_csv("kind,ranks,bytes,ms\nring,8,1048576,0.07\n", "a.csv"));
  // As `tasp calibrate --measure --csv` writes them: the rounds' median, then their range, which the fit leaves.
  const auto ranged = simulator::read_samples_csv("kind,ranks,bytes,ms,ms_min,ms_max\nring,2,1048576,0.07,0.06,0.09\n", "a.csv");
  ASSERT_EQ(ranged.comm.size(), 1u);
  EXPECT_DOUBLE_EQ(ranged.comm[0].us, 70);
  const auto gqa = simulator::read_samples_csv("kind,B,H,Hkv,S,D,causal,ms\nattention_bwd,1,32,8,1024,128,0,1\nattention,1,32,,1024,128,0,1\n", "a.csv");
  ASSERT_EQ(gqa.kernel.size(), 2u);
  EXPECT_EQ(gqa.kernel[0].kv_heads(), 8);
  EXPECT_TRUE(gqa.kernel[0].grouped());
  EXPECT_EQ(gqa.kernel[1].kv_heads(), 32);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"kind,ranks,bytes,ms\nring,8,abc,0.07\n", "a.csv:2: bytes"},
      {"kind,ranks,bytes,ms\nring,8,1024\n", "a.csv:2: (row)"},
      {"kind,ranks,bytes\nring,8,1024\n", "missing column 'ms'"},
      {"kind,ranks,bytes,ms\nwarp,8,1024,1\n", "a.csv:2: kind"},
      {"kind,ranks,bytes,ms\n", "no measurement rows"},
      {"kind,B,H,S,D,causal,ms\nattention,1,8,1024,128,maybe,1\n", "a.csv:2: causal"},
      {"kind,B,H,Hkv,S,D,causal,ms\nattention,1,32,5,1024,128,0,1\n", "a.csv:2: Hkv: must divide H"},
      {"kind,B,H,S,D,causal,ms\nattention,1,38888888882,1024,128,0,1\n", "a.csv:2: H: expected a positive integer up to 2^30"},
  };
  test_support::expect_input_errors([](const std::string& t) { simulator::read_samples_csv(t, "a.csv"); }, bad);
}

namespace {

// A 2-rank fabric's truth for the collectives' fits: point-to-point 2 -> 1.7 GB/s past 20 us, the collectives at
// `coll` (and the reduce-scatters at `reduce`), and its microbenchmark rows of `kinds` at 1 to 256 MiB.
simulator::Profile two_rank_truth(simulator::Curve coll, simulator::Curve reduce = {}) {
  simulator::Profile truth = simple_profile(20, 1, 1, 1);
  simulator::CommProfile& c = truth.comm[0];
  c.flow_cap_gbps.points = {{1 << 20, 2}, {1 << 28, 1.7}};
  c.rank_cap_gbps = c.flow_cap_gbps;
  c.collective_gbps = coll, c.reduce_gbps = reduce;
  return truth;
}
// `fit` with kernels short beside the exchange, so that the comm decides; options that time collectives.
simulator::Profile comm_decides(const simulator::Profile& fit) {
  simulator::Profile fast = fit;
  fast.compute = simple_profile(0, 1, 1, 1e4).compute;
  return fast;
}
simulator::SimOptions with_collectives(bool fwd, bool bwd) {
  simulator::SimOptions so;
  so.passes = {fwd, bwd};
  so.collectives = simulator::Collectives::On;
  return so;
}
simulator::Samples replayed_rows(const simulator::Network& net, const simulator::Profile& truth,
                                 std::initializer_list<const char*> kinds) {
  simulator::Samples s;
  for (double mib : {1, 4, 16, 64, 256})
    for (const char* kind : kinds)
      s.comm.push_back({kind, 2, mib * 1048576, simulator::predict_comm_step_us(net, truth, kind, 2, mib * 1048576)});
  return s;
}

}  // namespace

// NCCL's all-gather rate (CommProfile::collective_gbps): fitted from the `allgather` microbenchmark rows past the
// step's latency, and what a simulation with collectives times allgather's all-gather and reduce-scatter steps at;
// point-to-point steps, and every step of a plan that is not allgather's, keep the point-to-point caps.
TEST(Calibrate, CollectiveRateFromAllGatherRows) {
  auto net = simulator::build_network(star(2, 1000));
  const simulator::Profile truth = two_rank_truth({{{1 << 20, 2.3}, {1 << 28, 2.5}}});
  const simulator::CommProfile& c = truth.comm[0];
  const simulator::Samples s = replayed_rows(net, truth, {"ring", "allgather"});
  std::vector<simulator::FitCheck> checks;
  const auto fit = simulator::fit_profile(s, simple_profile(1, 1, 1, 1), net, &checks);
  const auto& fc = fit.comm_for(2);
  ASSERT_FALSE(fc.collective_gbps.empty());
  // The rate past the fitted latency (the ring rows', a little off the truth's at the smallest size), so the steps
  // replay: every all-gather row within 1%.
  for (double b : {1 << 20, 1 << 24, 1 << 28}) EXPECT_NEAR(fc.collective_gbps.at(b), c.collective_gbps.at(b), 0.05 * c.collective_gbps.at(b)) << b;
  for (const auto& x : s.comm) {
    if (x.kind != "allgather") continue;
    EXPECT_NEAR(simulator::predict_comm_step_us(net, fit, "allgather", 2, x.bytes), x.us, 0.01 * x.us) << x.bytes;
  }
  for (const auto& ch : checks) EXPECT_NEAR(ch.error(), 0, 0.02) << ch.what;

  const auto t = star(2, 1000);
  planner::PlanOptions o;
  o.causal = true;
  const planner::Workload w = planner::parse_workload("B=1,S=8192,H=32,D=128,causal");
  simulator::SimOptions so;
  so.passes = {true, true};
  const auto ag = planner::build_plan(t, "allgather", o), ring = planner::build_plan(t, "ring", o);
  using simulator::Collectives;
  const auto p2p = simulator::simulate(ag, t, w, fit, so);
  EXPECT_FALSE(p2p.collectives);
  so.collectives = Collectives::On;
  const auto coll = simulator::simulate(ag, t, w, fit, so);
  EXPECT_TRUE(coll.collectives);
  EXPECT_LT(coll.comm_us, 0.9 * p2p.comm_us);  // 2.3-2.5 GB/s against 1.7-2
  so.collectives = Collectives::Off;
  const double ring_p2p = simulator::simulate(ring, t, w, fit, so).comm_us;
  so.collectives = Collectives::On;
  EXPECT_DOUBLE_EQ(simulator::simulate(ring, t, w, fit, so).comm_us, ring_p2p);
  EXPECT_FALSE(simulator::simulate(ring, t, w, fit, so).collectives);
  // Without a measured collective rate, collectives change nothing.
  simulator::Profile bare = fit;
  bare.comm[0].collective_gbps = {};
  EXPECT_DOUBLE_EQ(simulator::simulate(ag, t, w, bare, so).comm_us, p2p.comm_us);
  EXPECT_FALSE(simulator::simulate(ag, t, w, bare, so).collectives);

  // Auto (tasp run's default): the collectives where they are clearly faster, and says which, where the exchange
  // decides the total (kernels short beside it). Here the collectives; with a collective rate under the point-to-point
  // one (NVLink between 2 GPUs) or barely above it, send/recv; a ring's steps are never collectives.
  simulator::Profile fast = fit;
  fast.compute = simple_profile(0, 1, 1, 1e4).compute;
  auto total = [&](const simulator::Profile& prof, const planner::Plan& plan, Collectives c) {
    so.collectives = c;
    return simulator::simulate(plan, t, w, prof, so);
  };
  const auto picked = total(fast, ag, Collectives::Auto);
  EXPECT_TRUE(picked.collectives);
  EXPECT_DOUBLE_EQ(picked.total_us, total(fast, ag, Collectives::On).total_us);
  EXPECT_LT(picked.total_us, 0.95 * total(fast, ag, Collectives::Off).total_us);
  simulator::Profile slow = fast;
  slow.comm[0].collective_gbps.points = {{1 << 20, 1.0}, {1 << 28, 1.2}};
  const auto not_picked = total(slow, ag, Collectives::Auto);
  EXPECT_FALSE(not_picked.collectives);
  EXPECT_DOUBLE_EQ(not_picked.total_us, total(slow, ag, Collectives::Off).total_us);
  // Collectives a little faster (the point-to-point rate plus 2%), within the model's error: send/recv kept.
  simulator::Profile barely = fast;
  barely.comm[0].collective_gbps = barely.comm[0].flow_cap_gbps;
  for (auto& pt : barely.comm[0].collective_gbps.points) pt.second *= 1.02;
  const double on = total(barely, ag, Collectives::On).total_us, off = total(barely, ag, Collectives::Off).total_us;
  EXPECT_LT(on, off);
  EXPECT_GT(on, (1 - simulator::kCollectivesMargin) * off);
  EXPECT_FALSE(total(barely, ag, Collectives::Auto).collectives);
  EXPECT_FALSE(total(fast, ring, Collectives::Auto).collectives);
  EXPECT_DOUBLE_EQ(total(fast, ring, Collectives::Auto).total_us, total(fast, ring, Collectives::Off).total_us);
}

// A gather measured as one broadcast a root (kind allgather-roots, executor::CudaOptions::root_comms) fits the same
// collectives' rate and marks the profile so that `tasp run` moves its collectives that way; the mark survives the
// profile's YAML, and a profile fitted from one all-gather's rows has no mark.
TEST(Calibrate, PerRootGatherMarksTheProfile) {
  auto net = simulator::build_network(star(2, 1000));
  const simulator::Profile truth = two_rank_truth({{{1 << 20, 3.1}, {1 << 28, 4.3}}});
  for (const char* gather : {"allgather-roots", "allgather"}) {
    const simulator::Samples s = replayed_rows(net, truth, {"ring", gather});
    const auto fit = simulator::fit_profile(s, simple_profile(1, 1, 1, 1), net, nullptr);
    const bool roots = std::string(gather) == "allgather-roots";
    EXPECT_EQ(fit.comm_for(2).collectives_per_root, roots) << gather;
    ASSERT_FALSE(fit.comm_for(2).collective_gbps.empty()) << gather;
    EXPECT_NEAR(fit.comm_for(2).collective_gbps.at(1 << 28), 4.3, 0.05 * 4.3) << gather;
    std::ostringstream o;
    simulator::write_profile_yaml(o, fit);
    EXPECT_EQ(simulator::profile_from_yaml_text(o.str(), "rt.yaml").comm_for(2).collectives_per_root, roots) << gather;
  }
}

// A root's broadcast alone (kind broadcast-one-root, CommProfile::one_root_gbps: through host memory 44 GB/s where two
// moved 31.7 each, 2x H200 2026-11-27) is fitted from its rows, survives the YAML, and times the steps of allgather
// pruned for the causal mask in which one rank alone sends: faster than at the collectives' rate, while the same plan
// unpruned, every step both ways, does not move.
TEST(Calibrate, OneRootRateTimesPrunedSteps) {
  auto net = simulator::build_network(star(2, 1000));
  simulator::Profile truth = two_rank_truth({{{1 << 20, 2.3}, {1 << 28, 3.2}}});
  truth.comm[0].collectives_per_root = true;
  truth.comm[0].one_root_gbps.points = {{1 << 20, 3.0}, {1 << 28, 4.4}};
  const simulator::Samples s = replayed_rows(net, truth, {"ring", "allgather-roots", "broadcast-one-root"});
  const auto fit = simulator::fit_profile(s, simple_profile(1, 1, 1, 1), net, nullptr);
  const auto& fc = fit.comm_for(2);
  ASSERT_FALSE(fc.one_root_gbps.empty());
  EXPECT_NEAR(fc.one_root_gbps.at(1 << 28), 4.4, 0.05 * 4.4);
  EXPECT_NEAR(fc.one_root_peak_gbps(2), 4.4, 0.05 * 4.4);
  std::ostringstream o;
  simulator::write_profile_yaml(o, fit);
  EXPECT_EQ(simulator::profile_from_yaml_text(o.str(), "rt.yaml").comm_for(2).one_root_gbps.points.size(),
            fc.one_root_gbps.points.size());

  const planner::Workload w = planner::parse_workload("B=1,S=8192,H=32,D=128,causal");
  planner::PlanOptions po;
  po.causal = true, po.gather_pieces = 4, po.gather_steps = {2, 1, 1}, po.workload = w;
  const planner::Plan whole = planner::build_plan(star(2, 1000), "allgather", po);
  po.prune_plain = true;
  const planner::Plan pruned = planner::build_plan(star(2, 1000), "allgather", po);
  const simulator::SimOptions so = with_collectives(true, false);
  simulator::Profile shared = comm_decides(fit), not_shared = shared;
  not_shared.comm[0].one_root_gbps = {};
  auto comm_of = [&](const planner::Plan& p, const simulator::Profile& prof, int step) {
    const auto r = simulator::simulate(p, star(2, 1000), w, prof, so);
    const auto& st = r.timeline.per_rank[1][step];
    return st.comm_end_us - st.comm_start_us;
  };
  // Forward step 1: rank 1 alone sends (rank 0's piece there is its late chunk).
  EXPECT_LT(comm_of(pruned, shared, 1), 0.8 * comm_of(pruned, not_shared, 1));
  EXPECT_DOUBLE_EQ(comm_of(whole, shared, 1), comm_of(whole, not_shared, 1));
  // In steps of 3+1 the first sends 2 pieces one way and 3 the other: the two share the medium until the lighter is
  // done, then the heavier runs alone at the one-root rate, between the rate of two alike and of one alone throughout.
  po.gather_steps = {3, 1};
  const planner::Plan uneven = planner::build_plan(star(2, 1000), "allgather", po);
  const double two_phase = comm_of(uneven, shared, 0), both = comm_of(uneven, not_shared, 0);
  EXPECT_LT(two_phase, 0.97 * both);
  simulator::Profile all_alone = shared;
  all_alone.comm[0].collective_gbps = all_alone.comm[0].one_root_gbps;
  EXPECT_GT(two_phase, 1.03 * comm_of(uneven, all_alone, 0));
}

// The reduce-scatter's own rate (CommProfile::reduce_gbps), fitted from its rows where measured (through host memory a
// reduce a root ran 0.85x a broadcast a root, 2026-11-27): the rows replay at it, the gathers at theirs, the curve
// survives the YAML, and a simulation with collectives times allgather's backward slower by it and its forward not.
TEST(Calibrate, ReduceScatterRateFromItsRows) {
  auto net = simulator::build_network(star(2, 1000));
  const simulator::Profile truth = two_rank_truth({{{1 << 20, 2.3}, {1 << 28, 3.2}}}, {{{1 << 20, 2.0}, {1 << 28, 2.7}}});
  const simulator::CommProfile& c = truth.comm[0];
  const simulator::Samples s = replayed_rows(net, truth, {"ring", "allgather-roots", "reducescatter-roots"});
  const auto fit = simulator::fit_profile(s, simple_profile(1, 1, 1, 1), net, nullptr);
  const auto& fc = fit.comm_for(2);
  ASSERT_FALSE(fc.reduce_gbps.empty());
  for (double b : {1 << 24, 1 << 28}) {
    EXPECT_NEAR(fc.reduce_gbps.at(b), c.reduce_gbps.at(b), 0.05 * c.reduce_gbps.at(b)) << b;
    EXPECT_NEAR(fc.collective_gbps.at(b), c.collective_gbps.at(b), 0.05 * c.collective_gbps.at(b)) << b;
  }
  for (const auto& x : s.comm)
    if (x.kind != "ring") {
      EXPECT_NEAR(simulator::predict_comm_step_us(net, fit, x.kind, 2, x.bytes), x.us, 0.02 * x.us) << x.kind;
    }
  std::ostringstream o;
  simulator::write_profile_yaml(o, fit);
  EXPECT_EQ(simulator::profile_from_yaml_text(o.str(), "rt.yaml").comm_for(2).reduce_gbps.points.size(), fc.reduce_gbps.points.size());

  planner::PlanOptions po;
  po.causal = true;
  const planner::Workload w = planner::parse_workload("B=1,S=8192,H=32,D=128,causal");
  const planner::Plan p = planner::build_plan(star(2, 1000), "allgather", po);
  simulator::SimOptions so = with_collectives(true, true);
  const simulator::Profile fast = comm_decides(fit);
  simulator::Profile level = fast;
  level.comm[0].reduce_gbps = {};  // the reduce-scatters at the gathers' rate
  for (bool bwd : {false, true}) {
    so.passes = {!bwd, bwd};
    const double with = simulator::simulate(p, star(2, 1000), w, fast, so).total_us;
    const double without = simulator::simulate(p, star(2, 1000), w, level, so).total_us;
    if (bwd) EXPECT_GT(with, without * 1.1);
    else EXPECT_DOUBLE_EQ(with, without);
  }
}

// NCCL's share of the SMs, fitted from measured kernels against predicted ones: a kernel counts as beside transfers
// where any of its rank's transfers overlaps it, its own step's (a ring step) or another step's (a head-parallel
// pass's all-to-alls run in steps of their own). Both runs below slow their kernels by 20% beside transfers (the
// second's kernels 10% slower than the model throughout); the share comes back as 0.2.
TEST(Calibrate, CommShareCountsTransfersOfOtherSteps) {
  auto step = [](double c0, double c1, double flops, double bytes, double t0, double t1) {
    planner::StepTiming s;
    s.compute_start_us = c0, s.compute_end_us = c1, s.flops = flops, s.bytes = bytes, s.comm_start_us = t0, s.comm_end_us = t1;
    return s;
  };
  auto timeline = [](std::vector<planner::StepTiming> steps) {
    planner::Timeline t;
    t.per_rank = {std::move(steps)};
    return t;
  };
  // Ring-like: step 0's transfer beside its kernel, step 1 alone.
  const auto ring = timeline({step(0, 120, 1, 1, 0, 200), step(300, 400, 1, 0, 300, 300)});
  // Head-parallel-like: a transfer-only step beside the kernel of the next one, then a kernel alone.
  const auto heads = timeline({step(0, 0, 0, 1, 0, 150), step(0, 132, 1, 0, 0, 0), step(200, 310, 1, 0, 200, 200)});
  const auto ring_model = timeline({step(0, 100, 1, 1, 0, 0), step(0, 100, 1, 0, 0, 0)});
  const auto heads_model = timeline({step(0, 0, 0, 1, 0, 0), step(0, 100, 1, 0, 0, 0), step(0, 100, 1, 0, 0, 0)});
  EXPECT_NEAR(simulator::fit_comm_compute_share({{ring, ring_model}, {heads, heads_model}}, 0.5), 0.2, 1e-9);
  // With no transfer beside any kernel there is nothing to fit: the base stays.
  EXPECT_EQ(simulator::fit_comm_compute_share({{heads_model, heads_model}, {ring_model, ring_model}}, 0.5), 0.5);
}

// A fabric measured slower than its profile says (`tasp run --measure-fabric`; loopback sockets moved 1.1-1.3x between
// minutes of one call, 2x H200 2026-11-27): the refit replays the steps measured now, says how far they are from the
// profile (every rate at 0.8x: 1.25x the time), and keeps the profile's kernels; steps as the profile gives them: 1.00x.
TEST(Calibrate, RefitToStepsMeasuredNow) {
  auto net = simulator::build_network(star(2, 1000));
  simulator::Profile base = two_rank_truth({{{1 << 20, 2.3}, {1 << 28, 2.5}}});
  base.compute.launch_us = 7;
  simulator::Profile now = base;
  for (auto* curve : {&now.comm[0].flow_cap_gbps, &now.comm[0].rank_cap_gbps, &now.comm[0].collective_gbps})
    for (auto& pt : curve->points) pt.second *= 0.8;
  const simulator::Samples s = replayed_rows(net, now, {"ring", "allgather"});
  const auto r = simulator::refit_comm(s.comm, base, net);
  EXPECT_NEAR(r.median_ratio, 1.25, 0.02);
  EXPECT_LE(r.min_ratio, r.median_ratio);
  EXPECT_GE(r.max_ratio, r.median_ratio);
  for (const auto& x : s.comm)
    EXPECT_NEAR(simulator::predict_comm_step_us(net, r.profile, x.kind, 2, x.bytes), x.us, 0.02 * x.us) << x.kind << " " << x.bytes;
  EXPECT_DOUBLE_EQ(r.profile.compute.launch_us, 7);
  EXPECT_EQ(r.profile.name, base.name + " refitted to the fabric now");  // what runs and plans print as their profile
  const auto same = simulator::refit_comm(replayed_rows(net, base, {"ring", "allgather"}).comm, base, net);
  EXPECT_NEAR(same.median_ratio, 1.0, 0.01);
  EXPECT_EQ(simulator::refit_comm({}, base, net).median_ratio, 0);  // no step of 16 MiB or more: no ratio
}
