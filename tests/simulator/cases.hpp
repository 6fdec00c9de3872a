#pragma once
// The machines, profiles and plans the simulator's tests compute by hand: GPUs on one switch, profiles of round
// numbers, and a scheme's plan with the H200 profile.
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "planner/schemes/schemes.hpp"
#include "planner/yaml_ctx.hpp"
#include "simulator/engine.hpp"
#include "simulator/fluid.hpp"

namespace tasp::simtest {
// A head dim's forward rates, the rest of ComputeRate as it comes.
inline simulator::ComputeRate rate_of(int head_dim, double full_tflops, double causal_tflops) {
  simulator::ComputeRate r;
  r.head_dim = head_dim, r.full_tflops = full_tflops, r.causal_tflops = causal_tflops;
  return r;
}

// GPUs g0..g{n-1} on one switch, `port` GB/s per direction, no link latency.
inline planner::Topology star(int n, double port) {
  std::ostringstream y;
  y << "name: star\ngpus:\n  - {prefix: g, count: " << n << "}\nswitches:\n  - {id: sw}\nlinks:\n  - {from: [";
  for (int i = 0; i < n; ++i) y << (i ? ", " : "") << "g" << i;
  y << "], to: sw, bandwidth_gbps: " << port << ", latency_us: 0}\n";
  return planner::topology_from_yaml_text(y.str(), "star");
}

// A profile with round numbers: fixed latency, flat caps, flat kernel rate, no size penalties.
inline simulator::Profile simple_profile(double latency, double flow_cap, double rank_cap, double tflops) {
  simulator::Profile p;
  p.name = "simple";
  simulator::CommProfile c;
  c.ranks = 2;
  c.latency_us = latency;
  c.flow_cap_gbps.points = {{1, flow_cap}};
  c.rank_cap_gbps.points = {{1, rank_cap}};
  p.comm = {c};
  p.compute.launch_us = 2;
  p.compute.half_len = 0;
  p.compute.sms = 1;
  p.compute.tile_m = 1 << 30;
  p.compute.hbm_gbps = 1e9;
  p.compute.rates = {rate_of(128, tflops, tflops / 2)};
  return p;
}

inline void add(simulator::FlowList& f, int s, int d, double bytes, double start, double cap) {
  f.s.push_back(s), f.d.push_back(d), f.b.push_back(bytes), f.t0.push_back(start), f.c.push_back(cap);
}
inline const std::vector<double> kNoCap(3, std::numeric_limits<double>::infinity());

// A scheme's plan on a topology for a workload (causal as the workload says), the H200 profile, and the simulator's
// options for `passes`: the setup of the engine tests below.
struct SimCase {
  simulator::Profile prof = simulator::builtin_profile("h200-hgx-8");
  planner::Topology t;
  planner::Workload w;
  planner::Plan p;
  simulator::SimOptions so;
  SimCase(const std::string& topology, const std::string& scheme, const std::string& workload, planner::Passes passes)
      : t(planner::load_topology(topology)), w(planner::parse_workload(workload)) {
    planner::PlanOptions o;
    o.causal = w.causal;
    p = planner::build_plan(t, scheme, o);
    so.passes = passes;
  }
  simulator::SimResult run() const { return simulator::simulate(p, t, w, prof, so); }
};

}  // namespace tasp::simtest
