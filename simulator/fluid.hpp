#pragma once
// Flow-level network model: every flow runs at its max-min fair rate (progressive filling over link
// resources, per-rank aggregate resources and its own cap), re-solved whenever a flow starts or ends.
// Flows are read through a source type so that huge symmetric steps need not be stored as lists:
//   size(), src(i), dst(i), bytes(i), start_us(i), cap_gbps(i).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "simulator/network.hpp"

namespace tasp::simulator {

// Bytes per microsecond of one GB/s.
constexpr double kBytesPerUsPerGBps = 1e3;

struct FluidResult {
  std::vector<double> rank_end_us;  // per rank: when its last flow (sent or received) ended; -inf if none
  int solves = 0;                   // max-min solutions computed (one per arrival or completion event)
};

// rank_send_cap / rank_recv_cap: GB/s a rank may move in total (infinity: no such limit).
template <class Flows>
FluidResult run_fluid(const Network& net, const Flows& f, const std::vector<double>& rank_send_cap,
                      const std::vector<double>& rank_recv_cap) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const size_t m = f.size();
  const int n = net.ranks, L = net.links();
  FluidResult out;
  out.rank_end_us.assign(n, -inf);
  if (m == 0) return out;
  // Resources: links, then rank send aggregates, then rank receive aggregates.
  std::vector<double> cap(net.capacity_gbps);
  cap.insert(cap.end(), rank_send_cap.begin(), rank_send_cap.end());
  cap.insert(cap.end(), rank_recv_cap.begin(), rank_recv_cap.end());
  const size_t R = cap.size();

  // Each flow's resources, routed once (CSR: flow i uses res[offs[i] .. offs[i+1])).
  std::vector<int> path, res;
  std::vector<size_t> offs(m + 1, 0);
  for (size_t i = 0; i < m; ++i) {
    path.clear();
    const int s = f.src(i), d = f.dst(i);
    net.route(s, d, path);
    if (rank_send_cap[s] < inf) path.push_back(L + s);
    if (rank_recv_cap[d] < inf) path.push_back(L + n + d);
    res.insert(res.end(), path.begin(), path.end());
    offs[i + 1] = res.size();
  }
  std::vector<double> rem(m), flow_cap(m);
  std::vector<float> rate(m, 0.f);
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) rem[i] = f.bytes(i), flow_cap[i] = f.cap_gbps(i), order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.start_us(a) < f.start_us(b); });
  size_t next_arrival = 0, done = 0;
  double now = f.start_us(order[0]);
  std::vector<size_t> active, unfrozen, still;  // flows moving now; those whose rate is not fixed yet
  std::vector<double> left(R);
  std::vector<uint32_t> count(R, 0);

  while (done < m) {
    while (next_arrival < m && f.start_us(order[next_arrival]) <= now + std::abs(now) * 1e-12 + 1e-9)  // (now may be < 0)
      active.push_back(order[next_arrival++]);
    if (active.empty()) {
      now = f.start_us(order[next_arrival]);
      continue;
    }
    // Progressive filling among the active flows: raise every unfrozen rate together until a resource or a
    // flow's own cap is exhausted, freeze the flows there, repeat.
    ++out.solves;
    for (size_t i : active)  // only the resources of moving flows matter (R can be large, active flows few)
      for (size_t e = offs[i]; e < offs[i + 1]; ++e) left[res[e]] = cap[res[e]];
    unfrozen = active;
    while (!unfrozen.empty()) {
      double level = inf;
      for (size_t i : unfrozen) {
        for (size_t e = offs[i]; e < offs[i + 1]; ++e) ++count[res[e]];
        level = std::min(level, flow_cap[i]);
      }
      for (size_t i : unfrozen)
        for (size_t e = offs[i]; e < offs[i + 1]; ++e) level = std::min(level, std::max(0.0, left[res[e]]) / count[res[e]]);
      const double edge = level * (1 + 1e-9) + 1e-12;
      still.clear();
      for (size_t i : unfrozen) {
        bool bottleneck = flow_cap[i] <= edge;
        for (size_t e = offs[i]; e < offs[i + 1] && !bottleneck; ++e)
          bottleneck = std::max(0.0, left[res[e]]) / count[res[e]] <= edge;
        if (!bottleneck) still.push_back(i);
      }
      // Counts and capacities change only after every flow was judged against this round's figures.
      for (size_t i : unfrozen)
        for (size_t e = offs[i]; e < offs[i + 1]; ++e) count[res[e]] = 0;
      size_t k = 0;
      for (size_t i : unfrozen) {
        if (k < still.size() && still[k] == i) {
          ++k;
          continue;
        }
        rate[i] = float(level);
        for (size_t e = offs[i]; e < offs[i + 1]; ++e) left[res[e]] -= level;
      }
      unfrozen.swap(still);
    }
    // Advance to the next completion or arrival.
    double dt = next_arrival < m ? f.start_us(order[next_arrival]) - now : inf;
    for (size_t i : active)
      if (rate[i] > 0) dt = std::min(dt, rem[i] / (rate[i] * kBytesPerUsPerGBps));
    if (!(dt < inf)) throw std::logic_error("flow model stalled: a flow has no capacity on its route");
    now += dt;
    size_t kept = 0;
    for (size_t i : active) {
      rem[i] -= rate[i] * kBytesPerUsPerGBps * dt;
      if (rem[i] <= 1e-9 * f.bytes(i) + 1e-6) {
        ++done;
        double& a = out.rank_end_us[f.src(i)];
        double& b = out.rank_end_us[f.dst(i)];
        a = std::max(a, now);
        b = std::max(b, now);
      } else {
        active[kept++] = i;
      }
    }
    active.resize(kept);
  }
  return out;
}

// A plain list of flows (the general engine aggregates a step's transfers per rank pair into these).
struct FlowList {
  std::vector<int> s, d;
  std::vector<double> b, t0, c;
  size_t size() const { return s.size(); }
  int src(size_t i) const { return s[i]; }
  int dst(size_t i) const { return d[i]; }
  double bytes(size_t i) const { return b[i]; }
  double start_us(size_t i) const { return t0[i]; }
  double cap_gbps(size_t i) const { return c[i]; }
};

}  // namespace tasp::simulator
