#include "simulator/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "simulator/comm_rules.hpp"

namespace tasp::simulator {

double Curve::at(double x) const {
  if (points.empty()) throw std::logic_error("empty curve");
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  auto hi = std::upper_bound(points.begin(), points.end(), x,
                             [](double v, const std::pair<double, double>& p) { return v < p.first; });
  auto lo = hi - 1;
  const double f = (std::log2(x) - std::log2(lo->first)) / (std::log2(hi->first) - std::log2(lo->first));
  return lo->second + f * (hi->second - lo->second);
}

const ComputeRate& ComputeProfile::rate(int head_dim) const {
  if (rates.empty()) throw std::logic_error("profile has no compute rates");
  return *std::min_element(rates.begin(), rates.end(), [&](const ComputeRate& a, const ComputeRate& b) {
    return std::abs(a.head_dim - head_dim) < std::abs(b.head_dim - head_dim);
  });
}

double ComputeProfile::full_half_len(int head_dim) const {
  const ComputeRate& r = rate(head_dim);
  return r.full_half_len >= 0 ? r.full_half_len : half_len;
}
double ComputeProfile::causal_half_len(int head_dim) const {
  const ComputeRate& r = rate(head_dim);
  return r.causal_half_len >= 0 ? r.causal_half_len : half_len;
}

BwdRate ComputeProfile::bwd_rate(int head_dim) const {
  const ComputeRate& r = rate(head_dim);
  const double hf = r.bwd_full_half_len >= 0 ? r.bwd_full_half_len : full_half_len(head_dim);
  const double hc = r.bwd_causal_half_len >= 0 ? r.bwd_causal_half_len : causal_half_len(head_dim);
  if (r.bwd_full_tflops > 0)
    return {r.bwd_full_tflops, r.bwd_causal_tflops > 0 ? r.bwd_causal_tflops : r.bwd_full_tflops, hf, hc, false};
  return {r.full_tflops * bwd_estimate, r.causal_tflops * bwd_estimate, full_half_len(head_dim), causal_half_len(head_dim), true};
}

int ComputeProfile::tile_rows(int head_dim) const {
  const int t = rates.empty() ? 0 : rate(head_dim).tile_m;
  return t > 0 ? t : tile_m;
}

double ComputeProfile::gqa_fraction(int head_dim, int H, int Hkv, bool backward) const {
  if (Hkv <= 0 || H <= Hkv || rates.empty()) return 1;
  const Curve& c = backward ? rate(head_dim).bwd_gqa : rate(head_dim).gqa;
  return c.empty() ? 1 : c.at(double(H) / Hkv);
}

const CommProfile& Profile::comm_for(int ranks) const {
  if (comm.empty()) throw std::logic_error("profile has no comm figures");
  const CommProfile* best = nullptr;
  for (const auto& c : comm)
    if (c.ranks <= ranks && (!best || c.ranks > best->ranks)) best = &c;
  if (best) return *best;
  return *std::min_element(comm.begin(), comm.end(),
                           [](const CommProfile& a, const CommProfile& b) { return a.ranks < b.ranks; });
}

namespace {

// The fastest a curve's points delivered as steps, `latency` us of start included.
double delivered_peak(const Curve& k, double latency) {
  double best = 0;
  for (const auto& [bytes, gbps] : k.points)
    if (gbps > 0) best = std::max(best, bytes / (bytes / (gbps * 1e3) + std::max(0.0, latency)) / 1e3);
  return best;
}

}  // namespace

double CommProfile::one_root_peak_gbps(int ranks) const {
  return collectives_per_root ? delivered_peak(one_root_gbps, step_latency_us(*this, ranks - 1)) : 0;
}

double Profile::peak_send_gbps(int ranks, bool collectives, bool reduces_only) const {
  const CommProfile& c = comm_for(ranks);
  // A point's rate as a step of its size delivered it, its start latency included (as the engine starts a step): the
  // fitted rate past the latency alone is no measured bandwidth (over loopback sockets 4.6-4.8 GB/s at 256 KiB, where
  // the steps measured 1.5 and at most 4.2: docs/measurements/executor.md).
  const double p2p = c.latency_us, coll = step_latency_us(c, ranks - 1);
  std::vector<std::pair<const Curve*, double>> curves = {{&c.flow_cap_gbps, p2p}, {&c.rank_cap_gbps, p2p}};
  if (collectives && reduces_only) curves.push_back({&c.collective_curve(true), coll});
  else if (collectives) curves.insert(curves.end(), {{&c.collective_gbps, coll}, {&c.reduce_gbps, coll}});
  double best = 0;
  for (const auto& [k, latency] : curves) best = std::max(best, delivered_peak(*k, latency));
  return best;
}

Profile Profile::at_clock(Clock clock, bool mixed) const {
  Profile p = *this;
  if (clock == Clock::Boost) return p;
  for (auto& r : p.compute.rates) {
    const double f = mixed ? r.mix_sustained : r.sustained, b = mixed ? r.bwd_mix_sustained : r.bwd_sustained;
    r.full_tflops *= f, r.causal_tflops *= f;
    r.bwd_full_tflops *= b, r.bwd_causal_tflops *= b;
  }
  return p;
}

}  // namespace tasp::simulator
