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

  enum : uint8_t { Waiting, Active, Done };
  std::vector<uint8_t> state(m, Waiting);
  std::vector<double> rem(m);
  std::vector<float> rate(m, 0.f);
  std::vector<uint8_t> frozen(m);
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) rem[i] = f.bytes(i), order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.start_us(a) < f.start_us(b); });
  size_t next_arrival = 0, active = 0, done = 0;
  double now = f.start_us(order[0]);

  std::vector<int> path;
  auto resources = [&](size_t i) -> const std::vector<int>& {
    path.clear();
    const int s = f.src(i), d = f.dst(i);
    net.route(s, d, path);
    if (rank_send_cap[s] < inf) path.push_back(L + s);
    if (rank_recv_cap[d] < inf) path.push_back(L + n + d);
    return path;
  };
  std::vector<double> left(R);
  std::vector<uint32_t> count(R);

  while (done < m) {
    while (next_arrival < m && f.start_us(order[next_arrival]) <= now * (1 + 1e-12) + 1e-9) {
      const size_t i = order[next_arrival++];
      state[i] = Active;
      ++active;
    }
    if (active == 0) {
      now = f.start_us(order[next_arrival]);
      continue;
    }
    // Progressive filling among the active flows.
    ++out.solves;
    left = cap;
    size_t unfrozen = 0;
    for (size_t i = 0; i < m; ++i) {
      frozen[i] = state[i] != Active;
      unfrozen += !frozen[i];
    }
    while (unfrozen > 0) {
      std::fill(count.begin(), count.end(), 0);
      double level = inf;
      for (size_t i = 0; i < m; ++i) {
        if (frozen[i]) continue;
        for (int r : resources(i)) ++count[r];
        level = std::min(level, f.cap_gbps(i));
      }
      for (size_t r = 0; r < R; ++r)
        if (count[r]) level = std::min(level, std::max(0.0, left[r]) / count[r]);
      const double edge = level * (1 + 1e-9) + 1e-12;
      for (size_t i = 0; i < m; ++i) {
        if (frozen[i]) continue;
        bool bottleneck = f.cap_gbps(i) <= edge;
        const auto& p = resources(i);
        for (int r : p) bottleneck = bottleneck || std::max(0.0, left[r]) / count[r] <= edge;
        if (!bottleneck) continue;
        rate[i] = float(level);
        frozen[i] = 1;
        --unfrozen;
        for (int r : p) left[r] -= level;
      }
    }
    // Advance to the next completion or arrival.
    double dt = next_arrival < m ? f.start_us(order[next_arrival]) - now : inf;
    for (size_t i = 0; i < m; ++i)
      if (state[i] == Active && rate[i] > 0) dt = std::min(dt, rem[i] / (rate[i] * kBytesPerUsPerGBps));
    if (!(dt < inf)) throw std::logic_error("flow model stalled: a flow has no capacity on its route");
    now += dt;
    for (size_t i = 0; i < m; ++i) {
      if (state[i] != Active) continue;
      rem[i] -= rate[i] * kBytesPerUsPerGBps * dt;
      if (rem[i] <= 1e-9 * f.bytes(i) + 1e-6) {
        state[i] = Done;
        --active;
        ++done;
        double& a = out.rank_end_us[f.src(i)];
        double& b = out.rank_end_us[f.dst(i)];
        a = std::max(a, now);
        b = std::max(b, now);
      }
    }
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
