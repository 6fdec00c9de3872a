#include "simulator/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "planner/collective.hpp"
#include "planner/prune.hpp"
#include "planner/query_moves.hpp"
#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"
#include "planner/rank_memory.hpp"
#include "planner/slot_plan.hpp"
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

// What one pass of a plan costs per transfer and per launch: the forward and backward differ in what moves
// (K/V; and dK/dV accumulators) and in the kernels (forward with fused merge; backward at 2.5x FLOPs).
struct PassModel {
  const planner::Plan& p;
  const planner::Workload& w;
  const Profile& prof;
  planner::Pass pass;
  double clock_factor;  // this pass's kernel rates over their boost-clock values
  planner::Mask mask;   // the workload's, made once (block_work's masked path on every compute)
  bool bwd() const { return pass == planner::Pass::Bwd; }
  double flops_factor() const { return bwd() ? kBackwardFlopsFactor : 1.0; }
  // A launch over `work`; `first`: the rank's first launch of this pass.
  double launch_us(const BlockWork& work, bool first) const {
    return bwd() ? backward_compute_us(prof.compute, w, work, first) : compute_us(prof.compute, w, work, !first);
  }
  // Its fixed part (launch; the backward's row sums; the forward's merge into the running out), the rest being math.
  double fixed_us(const BlockWork& work, bool first) const {
    if (work.flops() <= 0) return 0;
    if (bwd()) return backward_fixed_us(prof.compute, w, work.lq, first);
    return prof.compute.launch_us + (first ? 0 : forward_merge_us(prof.compute, w, work.lq));
  }
  // The share of the math the sustained clock adds (0 at the boost clock).
  double clock_share() const { return 1 - clock_factor; }
  double start_us() const { return bwd() ? prof.executor.bwd_start_us : prof.executor.fwd_start_us; }
  // What a launch of `comp` us loses to NCCL over `comm` us of transfers beside it.
  double overlap_us(double comp, double comm) const {
    return comp > 0 ? prof.executor.comm_compute_share * std::min(comp, std::max(0.0, comm)) : 0;
  }
  double gap_us() const { return prof.executor.step_gap_us; }
  // One launch's terms into `t`.
  void add_launch(ModelTerms& t, const BlockWork& work, bool first, double total) const {
    const double fixed = fixed_us(work, first), math = std::max(0.0, total - fixed);
    t.launch_us += fixed, t.math_us += math * (1 - clock_share()), t.clock_us += math * clock_share();
  }
  // The kernels' peak in the FLOPs this pass counts (the backward's 2.5x included).
  double peak_tflops() const { return bwd() ? prof.compute.bwd_rate(w.D).full_tflops : prof.compute.rate(w.D).full_tflops; }
};

// Ring flow with work that is the same on every rank and off-diagonal step (no mask, or the causal forward on
// the zigzag layout, where every off-diagonal piece is exactly half masked): every step of a kind moves the
// same flows, so the network is solved once per kind (forward: K/V; backward: K/V, K/V + accumulators,
// accumulators alone); ranks advance together step by step (the ring couples them, so the slowest rank
// paces each step).
SimResult simulate_symmetric_ring_flow(const PassModel& m, const Network& net, int keep) {
  const planner::Plan& p = m.p;
  const planner::Workload& w = m.w;
  const int n = p.ranks, k = int(p.rings.size()), steps = p.num_steps(m.pass);
  const CommProfile& cp = m.prof.comm_for(n);
  SimResult res;
  res.symmetric_fast_path = true;
  const double shard_bytes = shard_tokens(p, w, 0) * w.B * w.Hkv * w.D * 2.0 * w.dtype_bytes;
  const double b = shard_bytes / k, g = m.bwd() ? b / w.dtype_bytes * p.accumulator_bytes : 0;
  // Per-rank comm duration of a step whose every ring flow carries `bytes`, solved once per size.
  std::vector<std::pair<double, std::vector<double>>> solved;
  auto comm_of = [&](double bytes) -> const std::vector<double>& {
    for (const auto& [x, v] : solved)
      if (x == bytes) return v;
    std::vector<double> comm(n, 0);
    RingFlows f{p, bytes, step_latency_us(cp, k), cp.flow_cap_gbps.at(bytes)};
    const std::vector<double> caps(n, rank_cap_gbps(cp, k, k * bytes));
    FluidResult fr = run_fluid(net, f, caps, caps);
    res.network_solves += fr.solves;
    for (int r = 0; r < n; ++r) comm[r] = std::max(0.0, fr.rank_end_us[r]);
    solved.push_back({bytes, std::move(comm)});
    return solved.back().second;
  };
  // Off the diagonal the causal backward's shapes differ by rank (see simulate()): a rank's pieces from
  // earlier owners leave it half the keys, from later ones half the queries; the slower pure kind paces a
  // step here (an upper bound: a rank's pieces of a step come from owners of both kinds).
  BlockWork diag = block_work(p, w, 0, 0, 0, k), off, off_other;  // (the own pieces: one walk, as simulate_general)
  for (int c = 0; c < k; ++c) {
    off.add(block_work(p, w, 0, n > 1 ? 1 : 0, c));
    if (n > 1) off_other.add(block_work(p, w, 1, 0, c));
  }
  if (n > 1 && m.launch_us(off_other, false) > m.launch_us(off, false)) std::swap(off, off_other);
  const double comp0 = m.launch_us(diag, true), comp1 = m.launch_us(off, false);
  const double add = m.bwd() ? accumulate_us(m.prof.compute, k * g) : 0;

  auto& tl = res.timeline;
  tl.per_rank.assign(keep, std::vector<StepTiming>(steps));
  double t = 0, flow_total = 0;
  ModelTerms& terms = res.terms;
  for (int s = 0; s < steps; ++s) {
    const bool computes = s < n, sends_kv = s < n - 1, sends_grad = m.bwd() && s >= 2 && s <= n;  // ring_flow.hpp
    const double bytes = (sends_kv ? b : 0) + (sends_grad ? g : 0);
    const std::vector<double>* comm = bytes > 0 ? &comm_of(bytes) : nullptr;
    const double max_comm = comm ? *std::max_element(comm->begin(), comm->end()) : 0;
    const double fin = m.bwd() && s == steps - 1 ? backward_finish_us(m.prof.compute, w, shard_tokens(p, w, 0), p.ulysses > 1) : 0;
    const double base = (computes ? (s == 0 ? comp0 : comp1) : 0) + fin, add_s = sends_grad ? add : 0;
    const double lead = s == 0 ? m.start_us() : 0;  // the compute stream's late start in a pass's first step
    const double lost = m.overlap_us(base, max_comm - lead), comp = base + lost;
    terms.overlap_us += lost;
    if (s > 0) t += m.gap_us(), terms.executor_us += m.gap_us();
    for (int r = 0; r < keep; ++r) {
      StepTiming& st = tl.per_rank[r][s];
      st.comm_start_us = t;
      st.comm_end_us = t + (comm ? (*comm)[r] : 0);
      st.compute_start_us = t + lead;
      st.compute_end_us = t + lead + comp;
      st.post_start_us = t + std::max(max_comm, lead + comp);
      st.post_end_us = st.post_start_us + add_s;
      st.bytes = k * bytes;
      st.flops = computes ? (s == 0 ? diag : off).flops() * m.flops_factor() : 0;
    }
    if (computes) m.add_launch(terms, s == 0 ? diag : off, s == 0, base - fin);
    terms.launch_us += fin;
    terms.executor_us += lead;
    terms.accumulate_us += add_s;
    t += std::max(max_comm, lead + comp) + add_s;
    res.comm_us += max_comm;
    res.compute_us += comp + add_s;
    flow_total += bytes;
  }
  res.total_us = t;
  res.exposed_comm_us = std::max(0.0, res.total_us - res.compute_us - res.terms.executor_us);
  res.max_rank_bytes = k * flow_total;
  res.max_rank_flops = (diag.flops() + off.flops() * (std::min(steps, n) - 1)) * m.flops_factor();

  // Bounds: a rank's received bytes through its ports; a node's incoming bytes through its cut.
  for (int r = 0; r < n; ++r)
    if (net.ingress_gbps[r] > 0)
      res.bound.comm_us = std::max(res.bound.comm_us, res.max_rank_bytes / (net.ingress_gbps[r] * kBytesPerUsPerGBps));
  if (net.node_ingress_gbps.size() > 1) {
    std::vector<double> into(net.node_ingress_gbps.size(), 0);
    RingFlows f{p, b, 0, 0};
    for (size_t i = 0; i < f.size(); ++i)
      if (net.node[f.src(i)] != net.node[f.dst(i)]) into[net.node[f.dst(i)]] += flow_total;
    for (size_t x = 0; x < into.size(); ++x)
      if (net.node_ingress_gbps[x] > 0)
        res.bound.comm_us = std::max(res.bound.comm_us, into[x] / (net.node_ingress_gbps[x] * kBytesPerUsPerGBps));
  }
  return res;
}

// Flows x ranks in one step above which the ranks' different start times are not followed (simulate_general).
constexpr double kFlowStartBudget = 2e6;

struct StepFlows {
  FlowList flows;
  std::vector<int> peers_out, peers_in;
  std::vector<double> bytes_out, bytes_in;
  std::vector<double> grads_in;  // dK/dV accumulators' bytes each rank receives (added to its own after the step)
};

// A step's transfers as flows, one per (src, dst) pair with their bytes summed, and each rank's peers, bytes and
// accumulators in. `pairs` is scratch kept across steps.
// Moved query rows (planner::RowsTransfer) go as flows too, from `rows_of` (src, dst, bytes).
template <typename BytesOf, typename RowsOf>
void step_flows(const planner::Step& s, int n, const BytesOf& bytes_of, const RowsOf& rows_of,
                std::vector<std::pair<uint64_t, double>>& pairs, StepFlows& cur) {
  pairs.clear();
  cur.grads_in.assign(n, 0);
  for (const auto& x : s.transfers) {
    pairs.push_back({uint64_t(x.src) * n + x.dst, bytes_of(x)});
    if (x.grad) cur.grads_in[x.dst] += pairs.back().second;
  }
  for (const auto& x : s.rows) {
    const auto [src, dst, bytes] = rows_of(x);
    pairs.push_back({uint64_t(src) * n + dst, bytes});
  }
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
}

// Each rank's rate, sending (`out`) and receiving (`in`), as a collective step of `kind` moves its bytes. One root alone
// (a pruned step: the other owners send nothing) at its own rate where measured (one_root_gbps). On such a shared
// medium two roots of unequal bytes (a pruned step: 48 MiB one way, 16 the other) share it until the lighter is done,
// then the heavier runs alone at the one-root rate: its rate is its bytes over those two phases (2x H200 through host
// memory, 2026-11-27: 64 MiB beside 32 the other way 1.93 ms, where the rate of two alike gives 2.12 and of one alone
// 1.52).
void collective_rates(const planner::Step& s, const StepFlows& cur, const CommProfile& cp, planner::Collective kind,
                      std::vector<double>& out, std::vector<double>& in) {
  const int n = int(cur.bytes_out.size());
  const bool shared = cp.collectives_per_root && !cp.one_root_gbps.empty();
  // (moved query rows count as their sender's broadcast: alone when nobody else sends)
  const int senders = int(std::count_if(cur.bytes_out.begin(), cur.bytes_out.end(), [](double b) { return b > 0; }));
  const bool alone = shared && (s.rows.empty() || senders <= 1) &&
                     std::all_of(s.transfers.begin(), s.transfers.end(),
                                 [&](const planner::Transfer& x) { return x.owner == s.transfers[0].owner; });
  const Curve& gbps = alone ? cp.one_root_gbps : cp.collective_curve(kind == planner::Collective::ReduceScatter);
  for (int r = 0; r < n; ++r) out[r] = gbps.at(cur.bytes_out[r]), in[r] = gbps.at(cur.bytes_in[r]);
  if (shared && !alone && n == 2 && cur.bytes_out[0] > 0 && cur.bytes_out[1] > 0 && cur.bytes_out[0] != cur.bytes_out[1]) {
    const int h = cur.bytes_out[0] > cur.bytes_out[1] ? 0 : 1, l = 1 - h;
    const double both = cur.bytes_out[l] / out[l];  // the lighter's time (bytes / GB/s, any unit alike)
    const double rest = cur.bytes_out[h] - out[h] * both;
    if (rest > 0) in[l] = out[h] = cur.bytes_out[h] / (both + rest / cp.one_root_gbps.at(cur.bytes_out[h]));
  }
}

// Steps NCCL can run as collectives (planner::collectives_apply) timed at the profile's collective rate, where it has
// one for these ranks.
bool collectives_timed(const planner::Plan& p, const CommProfile& cp) {
  return planner::collectives_apply(p) && !cp.collective_gbps.empty();
}

// `start`: each rank's start (empty: all at 0), a backward's ranks at their own forward's end, relative to the last's.
SimResult simulate_general(const PassModel& m, const Network& net, const SimOptions& opt, int keep,
                           const std::vector<double>& start = {}) {
  const planner::Plan& p = m.p;
  const planner::Workload& w = m.w;
  const int n = p.ranks, P = p.pieces_per_rank, steps = p.num_steps(m.pass);
  // Head-parallel groups: plan rank g is GPUs g*u .. g*u+u-1; a transfer g -> h is u flows, slot to slot.
  const int u = p.ulysses;
  const CommProfile& cp = m.prof.comm_for(n * u);
  // Steps NCCL runs as one collective (the cuda backend's --collectives: allgather plans only): every rank's flows
  // share the profile's collective rate instead of the point-to-point caps.
  const bool collectives = opt.collectives == Collectives::On && collectives_timed(p, cp);
  SimResult res;
  auto& tl = res.timeline;
  tl.per_rank.assign(keep, std::vector<StepTiming>(steps));

  const bool cache_pieces = size_t(n) * P <= 16'000'000;
  std::vector<double> pbytes;
  if (cache_pieces) {
    pbytes.resize(size_t(n) * P);
    for (int o = 0; o < n; ++o)
      for (int c = 0; c < P; ++c) pbytes[size_t(o) * P + c] = piece_bytes(p, w, o, c);
  }
  auto kv_bytes = [&](int o, int c) { return cache_pieces ? pbytes[size_t(o) * P + c] : piece_bytes(p, w, o, c); };
  auto bytes_of = [&](const planner::Transfer& x) {
    const double kv = kv_bytes(x.owner, x.piece);
    return x.grad ? kv / w.dtype_bytes * p.accumulator_bytes : kv;
  };
  auto rows_of = [&](const planner::RowsTransfer& x) {
    const planner::QueryMove& q = p.query_moves.at(x.move);
    return std::tuple<int, int, double>{x.back ? q.at : q.owner, x.back ? q.owner : q.at,
                                        planner::rows_transfer_bytes(p, w, x, m.pass)};
  };
  // Moved rows' launches (their own work lists at `at`) and what their return costs the owner: the partial out merged
  // into its rows (a merging launch's read and write of them), or the partial dQ added.
  std::vector<BlockWork> moved_work(n);
  std::vector<double> rows_post(n, 0);

  std::vector<double> ready(n, 0), rank_bytes(n, 0), rank_flops(n, 0), recv_total(n, 0), comm_sum(n, 0),
      comp_sum(n, 0);
  std::vector<ModelTerms> terms(n);
  // A rank that starts early (before 0) counts the head start against its executor time, so its terms still add up
  // to its end.
  for (int r = 0; r < n && size_t(r) < start.size(); ++r) ready[r] = start[r], terms[r].executor_us += start[r];
  std::vector<double> node_in(net.node_ingress_gbps.size(), 0);
  std::vector<char> computed(n, 0);
  std::vector<BlockWork> work(n);
  std::vector<planner::Compute> order;  // a step's computes by (rank, owner, piece)
  std::vector<double> coll_rate(n, 0), coll_in(n, 0);  // a collective step's rate per rank, sending and receiving
  planner::Step scratch;
  StepFlows cur;
  // The last solved step, to reuse when a step repeats the same flows from the same relative starts.
  FlowList prev;
  std::vector<double> prev_dur;
  std::vector<std::pair<uint64_t, double>> pairs;
  for (int t = 0; t < steps; ++t) {
    if (opt.progress && (t % 64 == 0 || t == steps - 1)) opt.progress(t, steps);
    const planner::Step& s = planner::step_at(p, t, scratch, m.pass);
    if (t > 0)
      for (int r = 0; r < n; ++r) ready[r] += m.gap_us(), terms[r].executor_us += m.gap_us();
    const double lead = t == 0 ? m.start_us() : 0;  // the compute stream's late start in a pass's first step
    step_flows(s, n, bytes_of, rows_of, pairs, cur);
    FlowList& f = cur.flows;
    // A communicator a root (collectives_per_root) moves a step in which not every owner sends the same way.
    planner::Collective kind = collectives ? planner::collective_of(s, n, P) : planner::Collective::None;
    if (collectives && kind == planner::Collective::None && cp.collectives_per_root) kind = planner::per_root_of(s, n, P);
    // Moved rows go as their sender's broadcast on its root's communicator, as K/V do (the cuda backend's root comms).
    if (collectives && kind == planner::Collective::None && cp.collectives_per_root && !s.rows.empty())
      kind = planner::Collective::AllGather;
    const bool coll = kind != planner::Collective::None;
    if (coll) collective_rates(s, cur, cp, kind, coll_rate, coll_in);
    double t_min = kInf;
    for (size_t i = 0; i < f.size(); ++i) {
      f.t0.push_back(std::max(ready[f.s[i]], ready[f.d[i]]) + step_latency_us(cp, cur.peers_out[f.s[i]]));
      f.c.push_back(coll ? coll_rate[f.s[i]] : cp.flow_cap_gbps.at(f.b[i]));
      t_min = std::min(t_min, f.t0[i]);
    }
    if (u > 1) {
      FlowList e;
      for (size_t i = 0; i < f.size(); ++i)
        for (int k = 0; k < u; ++k)
          e.s.push_back(f.s[i] * u + k), e.d.push_back(f.d[i] * u + k), e.b.push_back(f.b[i]), e.t0.push_back(f.t0[i]),
              e.c.push_back(f.c[i]);
      f = std::move(e);
    }
    for (size_t i = 0; i < f.size(); ++i)
      if (net.node[f.s[i]] != net.node[f.d[i]]) node_in[net.node[f.d[i]]] += f.b[i];
    // A huge step whose ranks start apart (a causal all-gather's reduce-scatter: ~n^2 flows, n start times)
    // costs the flow model a max-min solve over every flow per start and per completion in between: past
    // kFlowStartBudget flows x ranks, the step's flows start together when the last rank is ready (the ranks
    // step together; totals moved < 0.1% where both could be solved, cluster:8x8..32x8 all-gather).
    if (f.size() > 0 && double(f.size()) * n * u > kFlowStartBudget) {
      const double t_max = *std::max_element(f.t0.begin(), f.t0.end());
      if (t_max > t_min) {
        ++res.lockstep_steps;
        std::fill(f.t0.begin(), f.t0.end(), t_max);
      }
    }
    // Comm end per rank: reuse the previous solution when the flows and their relative starts repeat.
    std::vector<double> comm_end(ready);
    if (f.size() > 0) {
      bool same = prev.s == f.s && prev.d == f.d && prev.b == f.b && prev.c == f.c;
      const double prev_min = prev.size() ? *std::min_element(prev.t0.begin(), prev.t0.end()) : 0;
      for (size_t i = 0; same && i < f.size(); ++i)
        same = std::abs((f.t0[i] - t_min) - (prev.t0[i] - prev_min)) <= 1e-9 * std::max(1.0, t_min);
      if (!same) {
        std::vector<double> sc(size_t(n) * u), rc(size_t(n) * u);
        for (int r = 0; r < n * u; ++r)
          sc[r] = coll ? coll_rate[r / u] : rank_cap_gbps(cp, cur.peers_out[r / u], cur.bytes_out[r / u]),
          rc[r] = coll ? coll_in[r / u] : rank_cap_gbps(cp, cur.peers_in[r / u], cur.bytes_in[r / u]);
        FluidResult fr = run_fluid(net, f, sc, rc);
        ++res.network_solves;
        prev_dur.assign(n, -kInf);
        for (int r = 0; r < n * u; ++r)
          if (fr.rank_end_us[r] > -kInf) prev_dur[r / u] = std::max(prev_dur[r / u], fr.rank_end_us[r] - t_min);
        prev = f;
      }
      for (int r = 0; r < n; ++r)
        if (prev_dur[r] > -kInf) comm_end[r] = std::max(ready[r], t_min + prev_dur[r]);
    }
    for (auto& bw : work) bw = BlockWork{};
    for (auto& bw : moved_work) bw = BlockWork{};
    std::fill(rows_post.begin(), rows_post.end(), 0.0);
    for (const planner::RowsTransfer& x : s.rows)
      if (x.back) {
        const planner::QueryMove& q = p.query_moves.at(x.move);
        const double rows = double(planner::moved_range(p, w.S, q).size());
        rows_post[q.owner] += m.bwd() ? accumulate_us(m.prof.compute, rows * w.B * w.H * w.D * 4) : forward_merge_us(m.prof.compute, w, rows);
      }
    // Runs of consecutive pieces of one owner in consecutive slots are one walk of the kernel (block_work with a
    // count): a rank's own pieces, and the pieces an allgather step gathers (slots in piece order); a ring's pieces
    // of one owner arrive by different rings into slots of their own.
    const bool gathered = p.schedule == "allgather";
    order.clear();
    for (const planner::Compute& c : s.compute) {
      if (c.move < 0) {
        order.push_back(c);
        continue;
      }
      const std::vector<planner::Range> q{planner::moved_range(p, w.S, p.query_moves.at(c.move))};
      moved_work[c.rank].add(block_work(p, w, q, c.owner, c.piece, 1, &m.mask));
    }
    std::sort(order.begin(), order.end(), [](const planner::Compute& a, const planner::Compute& b) {
      return std::tie(a.rank, a.owner, a.piece) < std::tie(b.rank, b.owner, b.piece);
    });
    for (size_t i = 0; i < order.size();) {
      const planner::Compute& c = order[i];
      size_t j = i + 1;
      while (j < order.size() && (gathered || c.owner == c.rank) && order[j].rank == c.rank && order[j].owner == c.owner &&
             order[j].piece == c.piece + int(j - i))
        ++j;
      work[c.rank].add(block_work(p, w, c.rank, c.owner, c.piece, int(j - i), &m.mask));
      i = j;
    }
    for (int r = 0; r < n; ++r) {
      const double fin = m.bwd() && t == steps - 1 ? backward_finish_us(m.prof.compute, w, shard_tokens(p, w, r), p.ulysses > 1) : 0;
      double base = m.launch_us(work[r], !computed[r]) + fin, moved = 0, moved_fin = 0;
      if (moved_work[r].flops() > 0) {  // a launch of its own, which writes the rows' partial (no merge into it)
        moved = m.launch_us(moved_work[r], true);
        if (m.bwd()) moved_fin = backward_finish_us(m.prof.compute, w, moved_work[r].lq, true);  // (finished in 16 bits)
        base += moved + moved_fin;
      }
      const double lost = m.overlap_us(base, comm_end[r] - ready[r] - lead), comp = base + lost;
      terms[r].overlap_us += lost;
      // Received accumulators are added to the rank's own once they are in, before the next step sends them.
      const double add = accumulate_us(m.prof.compute, cur.grads_in[r]) + rows_post[r];
      if (work[r].flops() > 0) m.add_launch(terms[r], work[r], !computed[r], base - fin - moved - moved_fin);
      if (moved > 0) m.add_launch(terms[r], moved_work[r], true, moved);
      terms[r].launch_us += moved_fin;
      terms[r].launch_us += fin;
      terms[r].executor_us += lead;
      terms[r].accumulate_us += add;
      computed[r] |= work[r].flops() > 0;
      if (r < keep) {
        StepTiming& st = tl.per_rank[r][t];
        st.comm_start_us = ready[r];
        st.comm_end_us = comm_end[r];
        st.compute_start_us = ready[r] + lead;
        st.compute_end_us = ready[r] + lead + comp;
        st.post_start_us = std::max(comm_end[r], ready[r] + lead + comp);
        st.post_end_us = st.post_start_us + add;
        st.bytes = cur.bytes_out[r];
        st.flops = (work[r].flops() + moved_work[r].flops()) * m.flops_factor();
      }
      comm_sum[r] += comm_end[r] - ready[r];
      comp_sum[r] += comp + add;
      rank_bytes[r] += cur.bytes_out[r];
      recv_total[r] += cur.bytes_in[r];
      rank_flops[r] += (work[r].flops() + moved_work[r].flops()) * m.flops_factor();
      ready[r] = std::max(comm_end[r], ready[r] + lead + comp) + add;
    }
  }
  const int last = n ? int(std::max_element(ready.begin(), ready.end()) - ready.begin()) : 0;
  res.total_us = n ? ready[last] : 0;
  res.rank_end_us = ready;
  if (n) res.terms = terms[last];
  res.comm_us = *std::max_element(comm_sum.begin(), comm_sum.end());
  res.compute_us = *std::max_element(comp_sum.begin(), comp_sum.end());
  res.exposed_comm_us = std::max(0.0, res.total_us - res.compute_us - res.terms.executor_us);
  res.max_rank_bytes = *std::max_element(rank_bytes.begin(), rank_bytes.end());
  res.max_rank_flops = *std::max_element(rank_flops.begin(), rank_flops.end());
  for (int r = 0; r < n; ++r)
    if (net.ingress_gbps[r * u] > 0)
      res.bound.comm_us = std::max(res.bound.comm_us, recv_total[r] / (net.ingress_gbps[r * u] * kBytesPerUsPerGBps));
  if (node_in.size() > 1)
    for (size_t x = 0; x < node_in.size(); ++x)
      if (net.node_ingress_gbps[x] > 0)
        res.bound.comm_us = std::max(res.bound.comm_us, node_in[x] / (net.node_ingress_gbps[x] * kBytesPerUsPerGBps));
  return res;
}

// One all-to-all inside every head-parallel group: each GPU sends `bytes` to each other GPU of its group.
// Returns when the last flow ends (from 0) and adds the busiest GPU's received bytes to `bound_us`.
double all_to_all_us(const Network& net, const CommProfile& cp, int groups, int u, double bytes, double* bound_us) {
  if (u < 2 || bytes <= 0) return 0;
  FlowList f;
  const double start = step_latency_us(cp, u - 1), cap = cp.flow_cap_gbps.at(bytes);
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < u; ++i)
      for (int j = 0; j < u; ++j)
        if (i != j) f.s.push_back(g * u + i), f.d.push_back(g * u + j), f.b.push_back(bytes), f.t0.push_back(start), f.c.push_back(cap);
  const std::vector<double> caps(size_t(groups) * u, rank_cap_gbps(cp, u - 1, (u - 1) * bytes));
  const FluidResult fr = run_fluid(net, f, caps, caps);
  double end = 0;
  for (double e : fr.rank_end_us) end = std::max(end, e);
  for (int r = 0; r < groups * u; ++r)
    if (net.ingress_gbps[r] > 0) *bound_us = std::max(*bound_us, (u - 1) * bytes / (net.ingress_gbps[r] * kBytesPerUsPerGBps));
  return end;
}

// A head-parallel pass of `groups` head groups, `r` being one group's steps (already simulated). The comm stream
// runs every group's all-to-all in (they depend on nothing), then each group's all-to-all out once that group's
// steps are done; group g's steps start once its all-to-all in has arrived and group g-1's steps are done. While
// an exchange runs beside a group's kernels (NCCL's kernels and the packing copies on the SMs), the kernels
// progress at 1 - comm_compute_share. One group: in, steps, out, one after the other. The timeline gains a
// transfer-only step per group and exchange, the groups' steps between them (as the executor's timeline).
// `*_copy_us`: one group's packing and unpacking around each exchange, on the GPU's memory.
void add_all_to_alls(SimResult& r, const Network& net, const CommProfile& cp, double share, const planner::Plan& p,
                     int groups, double in_bytes, double out_bytes, double in_copy_us, double out_copy_us) {
  double bound_in = 0, bound_out = 0;
  const double tin = all_to_all_us(net, cp, p.ranks, p.ulysses, in_bytes, &bound_in) + in_copy_us;
  const double tout = all_to_all_us(net, cp, p.ranks, p.ulysses, out_bytes, &bound_out) + out_copy_us;
  const double tc = r.total_us;
  const int G = groups;
  // Fixed point of the schedule: the exchanges' times depend on when the steps end, the steps' stretch on
  // when exchanges run beside them (a few rounds settle it: each only moves later).
  std::vector<double> in_end(G), c_start(G), c_end(G), o_start(G), o_end(G);
  for (int g = 0; g < G; ++g) in_end[g] = (g + 1) * tin;
  std::vector<std::pair<double, double>> busy;  // the comm stream's intervals
  double lost = 0;
  for (int round = 0; round < 4; ++round) {
    busy.assign({{0.0, G * tin}});
    for (int g = 0; g < G; ++g)
      if (round > 0) busy.push_back({o_start[g], o_end[g]});
    lost = 0;
    for (int g = 0; g < G; ++g) {
      c_start[g] = std::max(g ? c_end[g - 1] : 0.0, in_end[g]);
      // Progress tc of work; inside a busy interval at 1 - share, else at 1.
      double t = c_start[g], left = tc;
      while (left > 1e-9) {
        double rate = 1, until = 1e300;
        for (const auto& [b0, b1] : busy) {
          if (t >= b0 && t < b1) rate = 1 - share, until = std::min(until, b1);
          else if (b0 > t) until = std::min(until, b0);
        }
        const double span = std::min(until - t, left / rate);
        t += span, left -= span * rate;
        if (rate < 1) lost += span * share;
      }
      c_end[g] = t;
    }
    double free = G * tin;
    for (int g = 0; g < G; ++g) o_start[g] = std::max(free, c_end[g]), o_end[g] = free = o_start[g] + tout;
  }
  const planner::Timeline one = r.timeline;
  planner::Timeline tl = one;
  for (auto& row : tl.per_rank) row.clear();
  auto transfer_only = [&](double start, double end, double bytes) {
    for (auto& row : tl.per_rank) {
      StepTiming a;
      a.comm_start_us = start, a.comm_end_us = end;
      a.compute_start_us = a.compute_end_us = a.post_start_us = a.post_end_us = end;
      a.bytes = bytes;
      row.push_back(a);
    }
  };
  for (int g = 0; g < G; ++g) transfer_only(g * tin, in_end[g], (p.ulysses - 1) * in_bytes);
  for (int g = 0; g < G; ++g) tl.append(one, c_start[g]);
  for (int g = 0; g < G; ++g) transfer_only(o_start[g], o_end[g], (p.ulysses - 1) * out_bytes);
  r.timeline = std::move(tl);
  const double comm_one = r.comm_us;
  r.total_us = o_end[G - 1];
  r.comm_us = G * (comm_one + tin + tout);
  r.compute_us *= G;
  r.max_rank_bytes = G * (r.max_rank_bytes + (p.ulysses - 1) * (in_bytes + out_bytes));
  r.max_rank_flops *= G;
  r.bound.comm_us = G * (r.bound.comm_us + bound_in + bound_out);
  const ModelTerms t = r.terms;
  for (int g = 1; g < G; ++g) r.terms.add(t);
  r.terms.overlap_us += lost;
  r.exposed_comm_us = std::max(0.0, r.total_us - G * tc - lost);
}

}  // namespace

double single_gpu_us(const planner::Workload& w, const Profile& prof, planner::Passes passes) {
  const BlockWork all = w.windowed() || w.packed() ? masked_work(w, planner::make_mask(w), {{0, w.S}}, {{0, w.S}})
                                                   : whole_block(w, double(w.S), double(w.S), w.causal);
  return (passes.fwd ? compute_us(prof.compute, w, all, false) : 0) +
         (passes.bwd ? backward_alone_us(prof.compute, w, all) : 0);
}

SimResult simulate(const planner::Plan& p, const planner::Topology& topo, const planner::Workload& w_in,
                   const Profile& prof_in, const SimOptions& opt_in) {
  if (opt_in.collectives == Collectives::Auto) {  // both ways where they differ; send/recv unless clearly slower
    SimOptions o = opt_in;
    o.collectives = Collectives::Off;
    SimResult off = simulate(p, topo, w_in, prof_in, o);
    if (!collectives_timed(p, prof_in.comm_for(p.gpus()))) return off;
    o.collectives = Collectives::On;
    SimResult on = simulate(p, topo, w_in, prof_in, o);
    return on.total_us < off.total_us * (1 - kCollectivesMargin) ? on : off;
  }
  const SimOptions& opt = opt_in;
  if (p.gpus() != topo.ranks())
    throw planner::InputError("plan has " + std::to_string(p.gpus()) + " GPUs but topology " + topo.name + " has " +
                              std::to_string(topo.ranks()));
  if (p.ulysses > 1)
    if (const std::string e = planner::check_head_groups(p.ulysses, p.head_groups, w_in); !e.empty())
      throw planner::InputError("workload: " + e);
  // Each GPU of a head-parallel group computes its slot's heads over its group's tokens, one head group at a time.
  const int groups = p.ulysses > 1 ? p.head_groups : 1;
  const planner::Workload w_group = planner::head_group_workload(groups, w_in);
  const planner::Workload w = p.ulysses > 1 ? planner::slot_workload(p.ulysses, w_group) : w_in;
  if (w.causal != p.causal)
    throw planner::InputError(std::string("workload is ") + (w.causal ? "causal" : "not causal") + " but the plan " +
                              (p.causal ? "is" : "is not"));
  const std::string split = planner::check_split(planner::split_of(p, w.S));
  if (!split.empty()) throw planner::InputError("workload: " + split);
  if (const std::string u = planner::mask_mismatch(p, w); !u.empty()) throw planner::InputError("workload: " + u);
  if (opt.passes.bwd && !p.has_backward)
    throw planner::InputError("the plan has no backward part (plan it with --pass fwd+bwd, or simulate --pass fwd)");
  if (!opt.passes.fwd && !opt.passes.bwd) throw planner::InputError("nothing to simulate (no pass)");
  const Profile eff = prof_in.at_clock(opt.clock, opt.passes.fwd && opt.passes.bwd);
  const Profile& prof = eff;
  const Network net = build_network(topo, prof.link_efficiency);
  const int steps = (opt.passes.fwd ? p.num_steps() : 0) + (opt.passes.bwd ? p.num_steps(planner::Pass::Bwd) : 0);
  const int keep = kept_ranks(p.ranks, steps, opt.max_timeline_cells);
  auto one_pass = [&](planner::Pass pass, const std::vector<double>& start) {
    const double factor = pass == planner::Pass::Bwd
                              ? prof.compute.bwd_rate(w.D).full_tflops / prof_in.compute.bwd_rate(w.D).full_tflops
                              : prof.compute.rate(w.D).full_tflops / prof_in.compute.rate(w.D).full_tflops;
    const PassModel m{p, w, prof, pass, factor, planner::make_mask(w)};
    const bool ring_flow = p.compact(pass) && p.rule(pass) == "ring-flow" && p.compact() && p.schedule == "ring-flow";
    // Causal zigzag: the same FLOPs on every rank, but off the diagonal the backward's shapes differ (all of a
    // rank's queries against half an earlier owner's keys, or half of them against all of a later one's), and
    // the backward kernel's CTAs follow the keys: only the forward is the same everywhere. The backward runs
    // rank by rank unless that means more than kMaxExactFlows flows; then the ranks step together at the
    // slower shape's pace.
    constexpr double kMaxExactFlows = 4e6;
    const bool exact_fits = double(p.ranks) * double(p.rings.size()) * p.num_steps(pass) <= kMaxExactFlows;
    const bool same_work =
        !p.causal || (p.layout == planner::Layout::Zigzag && (pass == planner::Pass::Fwd || !exact_fits));
    const bool symmetric = ring_flow && same_work && p.ulysses == 1;
    SimResult r = symmetric && opt.allow_fast_path ? simulate_symmetric_ring_flow(m, net, keep)
                                                   : simulate_general(m, net, opt, keep, start);
    if (p.ulysses > 1) {
      // dK/dV leave the kernels in 16 bits where one launch makes them and one CTA writes each key row (the executor's
      // RankBuffers::grad16).
      const bool b = pass == planner::Pass::Bwd;
      const bool grads16 = b && w.H == w.Hkv && planner::grads_written_once(planner::plan_slots(p, planner::Pass::Bwd, 0));
      const planner::A2aBytes a = planner::a2a_bytes_per_peer(p.ulysses, w_group, double(w_in.S) / p.gpus(), grads16);
      const double mem = prof.compute.hbm_gbps * kBytesPerUsPerGBps, launches = 2 * prof.compute.small_launch_us;
      add_all_to_alls(r, net, prof.comm_for(p.gpus()), prof.executor.comm_compute_share, p, groups, b ? a.bwd_in : a.fwd_in,
                      b ? a.bwd_out : a.fwd_out, (b ? a.bwd_in_copy : a.fwd_in_copy) / mem + launches,
                      (b ? a.bwd_out_copy : a.fwd_out_copy) / mem + launches);
    }
    if (opt.framework && p.ulysses == 1) {  // the slowest rank's copies, before its first step and after its last
      double io = -std::numeric_limits<double>::infinity();  // a backward's may be negative (fused adds)
      for (int rank = 0; rank < p.ranks; ++rank) io = std::max(io, framework_io_us(prof.compute, p, w, rank, pass));
      r.total_us += io, r.terms.executor_us += io;
    }
    r.bound.compute_us = r.max_rank_flops / (m.peak_tflops() * 1e6);
    r.terms.exposed_comm_us = 0;
    r.terms.exposed_comm_us = std::max(0.0, r.total_us - r.terms.sum());
    return r;
  };
  SimResult r;
  // A rank's backward starts at its own forward's end (its first step moves nothing of another's yet): a plan pruned
  // for its mask leaves the ranks' forwards uneven. Not where the pass's total is more than its steps' (head-parallel
  // all-to-alls, a framework's copies).
  std::vector<double> bwd_start;
  if (opt.passes.fwd) {
    r = one_pass(planner::Pass::Fwd, {});
    r.fwd_us = r.total_us;
    if (r.rank_end_us.size() == size_t(p.ranks) && p.ulysses == 1 && !opt.framework)
      for (double end : r.rank_end_us) bwd_start.push_back(end - r.total_us);
  }
  if (opt.passes.bwd) {
    SimResult b = one_pass(planner::Pass::Bwd, bwd_start);
    r.bwd_us = b.total_us;
    r.bwd_rate_estimated = prof.compute.bwd_rate(w.D).estimated;
    if (!opt.passes.fwd) {
      b.bwd_us = b.total_us, b.bwd_rate_estimated = r.bwd_rate_estimated;
      r = std::move(b);
    } else {
      r.timeline.append(b.timeline, r.total_us);
      r.total_us += b.total_us;
      r.comm_us += b.comm_us;
      r.compute_us += b.compute_us;
      r.exposed_comm_us += b.exposed_comm_us;
      r.max_rank_bytes += b.max_rank_bytes;
      r.max_rank_flops += b.max_rank_flops;
      r.bound.comm_us += b.bound.comm_us;
      r.bound.compute_us += b.bound.compute_us;
      r.network_solves += b.network_solves;
      r.lockstep_steps += b.lockstep_steps;
      r.terms.add(b.terms);
      r.symmetric_fast_path = r.symmetric_fast_path && b.symmetric_fast_path;
    }
  }
  r.collectives = opt.collectives == Collectives::On && collectives_timed(p, prof.comm_for(p.gpus()));
  r.single_gpu_us = single_gpu_us(w_in, prof, opt.passes);
  r.peak_memory_bytes = planner::peak_rank_memory(p, w_in, opt.passes, r.collectives).total();
  r.tokens_per_s = r.total_us > 0 ? double(w_in.B) * w_in.S / (r.total_us * 1e-6) : 0;
  auto& tl = r.timeline;
  tl.source = "simulated";
  tl.scheme = p.scheme;
  tl.topology = topo.name;
  tl.workload = planner::to_string(w_in);
  tl.ranks = p.ranks;  // head-parallel plans: a row per group (its slots run alike)
  tl.pass = planner::passes_name(opt.passes);
  tl.fwd_steps = opt.passes.fwd ? groups * (p.num_steps() + (p.ulysses > 1 ? 2 : 0)) : 0;
  return r;
}

}  // namespace tasp::simulator
