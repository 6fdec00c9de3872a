#include "simulator/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "planner/layout.hpp"
#include "simulator/comm_rules.hpp"
#include "simulator/compute_model.hpp"
#include "simulator/fluid.hpp"

namespace tasp::simulator {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using planner::StepTiming;


// Timeline rows for the first ranks only when ranks x steps is too large to keep.
int kept_ranks(int n, int steps, size_t max_cells) {
  if (size_t(n) * size_t(std::max(1, steps)) <= max_cells) return n;
  return int(std::max<size_t>(1, max_cells / size_t(std::max(1, steps))));
}

// The ring flow of a compact plan as flows, without listing them: flow i is ring i / n, position i % n.
struct RingFlows {
  const planner::Plan& p;
  double b, t0, c;
  size_t size() const { return size_t(p.ranks) * p.rings.size(); }
  int src(size_t i) const { return p.rings[i / p.ranks][i % p.ranks]; }
  int dst(size_t i) const { return p.rings[i / p.ranks][(i % p.ranks + 1) % p.ranks]; }
  double bytes(size_t) const { return b; }
  double start_us(size_t) const { return t0; }
  double cap_gbps(size_t) const { return c; }
};

// Ring flow with work that is the same on every rank and off-diagonal step (no mask, or causal on the
// zigzag layout, where every off-diagonal piece is exactly half masked): every step moves the same
// flows, so the network is solved once; ranks advance together step by step (the ring couples them,
// so the slowest rank paces each step).
SimResult simulate_symmetric_ring_flow(const planner::Plan& p, const Network& net, const planner::Workload& w,
                                       const Profile& prof, const SimOptions& opt) {
  const int n = p.ranks, k = int(p.rings.size()), steps = p.num_steps();
  const CommProfile& cp = prof.comm_for(n);
  SimResult res;
  res.symmetric_fast_path = true;
  const double shard_bytes = shard_tokens(p, w, 0) * w.B * w.Hkv * w.D * 2.0 * w.dtype_bytes;
  const double b = shard_bytes / k;
  std::vector<double> comm(n, 0);
  if (n > 1) {
    RingFlows f{p, b, step_latency_us(cp, k), cp.flow_cap_gbps.at(b)};
    const std::vector<double> caps(n, rank_cap_gbps(cp, k, k * b));
    FluidResult fr = run_fluid(net, f, caps, caps);
    res.network_solves = fr.solves;
    for (int r = 0; r < n; ++r) comm[r] = std::max(0.0, fr.rank_end_us[r]);
  }
  BlockWork diag, off;
  for (int c = 0; c < k; ++c) {
    BlockWork a = block_work(p, w, 0, 0, c), o = block_work(p, w, 0, n > 1 ? 1 : 0, c);
    diag.add(a);
    off.add(o);
  }
  const double comp0 = compute_us(prof.compute, w, diag, false), comp1 = compute_us(prof.compute, w, off, true);
  const double max_comm = n > 1 ? *std::max_element(comm.begin(), comm.end()) : 0;

  auto& tl = res.timeline;
  const int keep = kept_ranks(n, steps, opt.max_timeline_cells);
  tl.per_rank.assign(keep, std::vector<StepTiming>(steps));
  double t = 0;
  for (int s = 0; s < steps; ++s) {
    const bool sends = s < n - 1;
    const double comp = s == 0 ? comp0 : comp1;
    for (int r = 0; r < keep; ++r) {
      StepTiming& st = tl.per_rank[r][s];
      st.comm_start_us = t;
      st.comm_end_us = t + (sends ? comm[r] : 0);
      st.compute_start_us = t;
      st.compute_end_us = t + comp;
      st.bytes = sends ? k * b : 0;
      st.flops = (s == 0 ? diag : off).flops();
    }
    t += std::max(sends ? max_comm : 0.0, comp);
  }
  res.total_us = t;
  res.comm_us = max_comm * std::max(0, n - 1);
  res.compute_us = comp0 + comp1 * (steps - 1);
  res.exposed_comm_us = std::max(0.0, res.total_us - res.compute_us);
  res.max_rank_bytes = double(std::max(0, n - 1)) * k * b;
  res.max_rank_flops = diag.flops() + off.flops() * (steps - 1);

  // Bounds: a rank's received bytes through its ports; a node's incoming bytes through its cut.
  for (int r = 0; r < n; ++r)
    if (net.ingress_gbps[r] > 0)
      res.bound.comm_us = std::max(res.bound.comm_us, res.max_rank_bytes / (net.ingress_gbps[r] * kBytesPerUsPerGBps));
  if (net.node_ingress_gbps.size() > 1) {
    std::vector<double> into(net.node_ingress_gbps.size(), 0);
    RingFlows f{p, b, 0, 0};
    for (size_t i = 0; i < f.size(); ++i)
      if (net.node[f.src(i)] != net.node[f.dst(i)]) into[net.node[f.dst(i)]] += b * (n - 1);
    for (size_t x = 0; x < into.size(); ++x)
      if (net.node_ingress_gbps[x] > 0)
        res.bound.comm_us = std::max(res.bound.comm_us, into[x] / (net.node_ingress_gbps[x] * kBytesPerUsPerGBps));
  }
  return res;
}

struct StepFlows {
  FlowList flows;
  std::vector<int> peers_out, peers_in;
  std::vector<double> bytes_out, bytes_in;
};

SimResult simulate_general(const planner::Plan& p, const Network& net, const planner::Workload& w,
                           const Profile& prof, const SimOptions& opt) {
  const int n = p.ranks, P = p.pieces_per_rank, steps = p.num_steps();
  const CommProfile& cp = prof.comm_for(n);
  SimResult res;
  auto& tl = res.timeline;
  const int keep = kept_ranks(n, steps, opt.max_timeline_cells);
  tl.per_rank.assign(keep, std::vector<StepTiming>(steps));

  const bool cache_pieces = size_t(n) * P <= 16'000'000;
  std::vector<double> pbytes;
  if (cache_pieces) {
    pbytes.resize(size_t(n) * P);
    for (int o = 0; o < n; ++o)
      for (int c = 0; c < P; ++c) pbytes[size_t(o) * P + c] = piece_bytes(p, w, o, c);
  }
  auto bytes_of = [&](int o, int c) { return cache_pieces ? pbytes[size_t(o) * P + c] : piece_bytes(p, w, o, c); };

  std::vector<double> ready(n, 0), rank_bytes(n, 0), rank_flops(n, 0), recv_total(n, 0), comm_sum(n, 0),
      comp_sum(n, 0);
  std::vector<double> node_in(net.node_ingress_gbps.size(), 0);
  std::vector<char> computed(n, 0);
  std::vector<BlockWork> work(n);
  planner::Step scratch;
  StepFlows cur;
  // The last solved step, to reuse when a step repeats the same flows from the same relative starts.
  FlowList prev;
  std::vector<double> prev_dur;
  std::vector<std::pair<uint64_t, double>> pairs;
  for (int t = 0; t < steps; ++t) {
    if (opt.progress && (t % 64 == 0 || t == steps - 1)) opt.progress(t, steps);
    const planner::Step& s = planner::step_at(p, t, scratch);
    pairs.clear();
    for (const auto& x : s.transfers) pairs.push_back({uint64_t(x.src) * n + x.dst, bytes_of(x.owner, x.piece)});
    std::sort(pairs.begin(), pairs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    FlowList& f = cur.flows;
    f = FlowList{};
    cur.peers_out.assign(n, 0), cur.peers_in.assign(n, 0), cur.bytes_out.assign(n, 0), cur.bytes_in.assign(n, 0);
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (i > 0 && pairs[i].first == pairs[i - 1].first) {
        f.b.back() += pairs[i].second;
      } else {
        f.s.push_back(int(pairs[i].first / n));
        f.d.push_back(int(pairs[i].first % n));
        f.b.push_back(pairs[i].second);
        ++cur.peers_out[f.s.back()];
        ++cur.peers_in[f.d.back()];
      }
      cur.bytes_out[int(pairs[i].first / n)] += pairs[i].second;
      cur.bytes_in[int(pairs[i].first % n)] += pairs[i].second;
    }
    double t_min = kInf;
    for (size_t i = 0; i < f.size(); ++i) {
      f.t0.push_back(std::max(ready[f.s[i]], ready[f.d[i]]) + step_latency_us(cp, cur.peers_out[f.s[i]]));
      f.c.push_back(cp.flow_cap_gbps.at(f.b[i]));
      t_min = std::min(t_min, f.t0[i]);
      if (net.node[f.s[i]] != net.node[f.d[i]]) node_in[net.node[f.d[i]]] += f.b[i];
    }
    // Comm end per rank: reuse the previous solution when the flows and their relative starts repeat.
    std::vector<double> comm_end(ready);
    if (f.size() > 0) {
      bool same = prev.s == f.s && prev.d == f.d && prev.b == f.b;
      const double prev_min = prev.size() ? *std::min_element(prev.t0.begin(), prev.t0.end()) : 0;
      for (size_t i = 0; same && i < f.size(); ++i)
        same = std::abs((f.t0[i] - t_min) - (prev.t0[i] - prev_min)) <= 1e-9 * std::max(1.0, t_min);
      if (!same) {
        std::vector<double> sc(n), rc(n);
        for (int r = 0; r < n; ++r)
          sc[r] = rank_cap_gbps(cp, cur.peers_out[r], cur.bytes_out[r]), rc[r] = rank_cap_gbps(cp, cur.peers_in[r], cur.bytes_in[r]);
        FluidResult fr = run_fluid(net, f, sc, rc);
        ++res.network_solves;
        prev_dur.assign(n, -kInf);
        for (int r = 0; r < n; ++r)
          if (fr.rank_end_us[r] > -kInf) prev_dur[r] = fr.rank_end_us[r] - t_min;
        prev = f;
      }
      for (int r = 0; r < n; ++r)
        if (prev_dur[r] > -kInf) comm_end[r] = std::max(ready[r], t_min + prev_dur[r]);
    }
    for (auto& bw : work) bw = BlockWork{};
    for (const auto& c : s.compute) {
      work[c.rank].add(block_work(p, w, c.rank, c.owner, c.piece));
    }
    for (int r = 0; r < n; ++r) {
      const double comp = compute_us(prof.compute, w, work[r], computed[r]);
      computed[r] |= work[r].flops() > 0;
      if (r < keep) {
        StepTiming& st = tl.per_rank[r][t];
        st.comm_start_us = ready[r];
        st.comm_end_us = comm_end[r];
        st.compute_start_us = ready[r];
        st.compute_end_us = ready[r] + comp;
        st.bytes = cur.bytes_out[r];
        st.flops = work[r].flops();
      }
      comm_sum[r] += comm_end[r] - ready[r];
      comp_sum[r] += comp;
      rank_bytes[r] += cur.bytes_out[r];
      recv_total[r] += cur.bytes_in[r];
      rank_flops[r] += work[r].flops();
      ready[r] = std::max(comm_end[r], ready[r] + comp);
    }
  }
  res.total_us = n ? *std::max_element(ready.begin(), ready.end()) : 0;
  res.comm_us = *std::max_element(comm_sum.begin(), comm_sum.end());
  res.compute_us = *std::max_element(comp_sum.begin(), comp_sum.end());
  res.exposed_comm_us = std::max(0.0, res.total_us - res.compute_us);
  res.max_rank_bytes = *std::max_element(rank_bytes.begin(), rank_bytes.end());
  res.max_rank_flops = *std::max_element(rank_flops.begin(), rank_flops.end());
  for (int r = 0; r < n; ++r)
    if (net.ingress_gbps[r] > 0)
      res.bound.comm_us = std::max(res.bound.comm_us, recv_total[r] / (net.ingress_gbps[r] * kBytesPerUsPerGBps));
  if (node_in.size() > 1)
    for (size_t x = 0; x < node_in.size(); ++x)
      if (net.node_ingress_gbps[x] > 0)
        res.bound.comm_us = std::max(res.bound.comm_us, node_in[x] / (net.node_ingress_gbps[x] * kBytesPerUsPerGBps));
  return res;
}

}  // namespace

SimResult simulate(const planner::Plan& p, const planner::Topology& topo, const planner::Workload& w,
                   const Profile& prof, const SimOptions& opt) {
  if (p.ranks != topo.ranks())
    throw planner::InputError("plan has " + std::to_string(p.ranks) + " ranks but topology " + topo.name + " has " +
                              std::to_string(topo.ranks()) + " GPUs");
  if (w.causal != p.causal)
    throw planner::InputError(std::string("workload is ") + (w.causal ? "causal" : "not causal") + " but the plan " +
                              (p.causal ? "is" : "is not"));
  const std::string split = planner::check_split(p.layout, p.ranks, p.pieces_per_rank, w.S);
  if (!split.empty()) throw planner::InputError("workload: " + split);
  const Network net = build_network(topo, prof.link_efficiency);
  const bool symmetric = p.compact() && p.schedule == "ring-flow" && (!p.causal || p.layout == planner::Layout::Zigzag);
  SimResult r = symmetric && opt.allow_fast_path ? simulate_symmetric_ring_flow(p, net, w, prof, opt)
                                                 : simulate_general(p, net, w, prof, opt);
  r.bound.compute_us = r.max_rank_flops / (prof.compute.rate(w.D).full_tflops * 1e6);
  auto& tl = r.timeline;
  tl.source = "simulated";
  tl.scheme = p.scheme;
  tl.topology = topo.name;
  tl.workload = planner::to_string(w);
  tl.ranks = p.ranks;
  return r;
}

}  // namespace tasp::simulator
