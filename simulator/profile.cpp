#include "simulator/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

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

BwdRate ComputeProfile::bwd_rate(int head_dim) const {
  const ComputeRate& r = rate(head_dim);
  if (r.bwd_full_tflops > 0) return {r.bwd_full_tflops, r.bwd_causal_tflops > 0 ? r.bwd_causal_tflops : r.bwd_full_tflops, false};
  return {r.full_tflops * bwd_estimate, r.causal_tflops * bwd_estimate, true};
}

int ComputeProfile::tile_rows(int head_dim) const {
  const int t = rates.empty() ? 0 : rate(head_dim).tile_m;
  return t > 0 ? t : tile_m;
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

}  // namespace tasp::simulator
