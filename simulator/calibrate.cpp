#include "simulator/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "planner/layout.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "simulator/compute_model.hpp"
#include "simulator/microbench.hpp"

namespace tasp::simulator {
namespace {

// Least squares of y ~ X beta weighted by 1/y (relative error is what matters across sizes).
Eigen::VectorXd relative_lsq(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  Eigen::MatrixXd A = X;
  Eigen::VectorXd b = y;
  for (int i = 0; i < X.rows(); ++i) {
    A.row(i) /= y[i];
    b[i] = 1;
  }
  return A.colPivHouseholderQr().solve(b);
}

// t = latency + bytes * c: the latency of one kind on one communicator size.
double fit_latency(const std::vector<CommSample>& rows) {
  const double t_min = std::min_element(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.us < b.us; })->us;
  if (rows.size() < 2) return 0.5 * t_min;
  Eigen::MatrixXd X(rows.size(), 2);
  Eigen::VectorXd y(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) X(i, 0) = 1, X(i, 1) = rows[i].bytes, y[i] = rows[i].us;
  const double a = relative_lsq(X, y)[0];
  return std::clamp(a, 0.0, 0.9 * t_min);
}

// The rate left once the latency is paid, at each measured size.
Curve rate_curve(const std::vector<CommSample>& rows, double latency_us, double bytes_scale) {
  Curve c;
  for (const auto& r : rows) c.points.push_back({r.bytes * bytes_scale, r.bytes / ((r.us - latency_us) * 1e3)});
  std::sort(c.points.begin(), c.points.end());
  return c;
}

double kernel_fill(const ComputeProfile& cp, const KernelSample& k) {
  const double ctas = double(k.B) * k.H * std::ceil(k.lq / cp.tile_rows(k.D));
  return ctas / (std::ceil(ctas / cp.sms) * cp.sms);
}
BlockWork kernel_work(const KernelSample& k) {
  BlockWork w;
  w.lq = k.lq, w.lk = k.lk;
  const double per_pair = 4.0 * k.B * k.H * k.D;
  if (k.causal) w.causal_flops = planner::visible_pairs({0, long(k.lq)}, {long(k.lq - k.lk), long(k.lq)}, true) * per_pair;
  else w.full_flops = k.lq * k.lk * per_pair;
  return w;
}
planner::Workload kernel_workload(const KernelSample& k) {
  planner::Workload w;
  w.B = k.B, w.H = k.H, w.Hkv = k.H, w.D = k.D, w.causal = k.causal;
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

Profile fit_profile(const Samples& s, const Profile& base, const Network& net, std::vector<FitCheck>* checks) {
  Profile p = base;
  // Communication, per communicator size.
  std::map<int, std::map<std::string, std::vector<CommSample>>> by;
  for (const auto& c : s.comm) by[c.ranks][c.kind].push_back(c);
  for (auto& [n, kinds] : by) {
    auto& one = kinds["ring"];
    if (one.empty()) continue;
    CommProfile cp;
    cp.ranks = n;
    cp.latency_us = fit_latency(one);
    cp.flow_cap_gbps = rate_curve(one, cp.latency_us, 1.0);
    auto& many = kinds["multi"];
    if (n > 2 && !many.empty()) {
      const double a = std::max(fit_latency(many), cp.latency_us);
      cp.peer_latency_us = (a - cp.latency_us) / (n - 2);
      cp.rank_cap_gbps = rate_curve(many, a, 1.0);
    } else {
      cp.rank_cap_gbps = cp.flow_cap_gbps;
    }
    auto it = std::find_if(p.comm.begin(), p.comm.end(), [&](const CommProfile& c) { return c.ranks == n; });
    if (it != p.comm.end()) *it = cp;
    else p.comm.push_back(cp);
  }
  std::sort(p.comm.begin(), p.comm.end(), [](auto& a, auto& b) { return a.ranks < b.ranks; });

  // Kernels: t = launch + x / peak + x * (1/Lq + 1/Lk) * half_len / peak, x = FLOPs / fill, per head dim and mask.
  std::map<std::pair<int, bool>, std::vector<KernelSample>> groups, bwd_groups;
  for (const auto& k : s.kernel) (k.backward ? bwd_groups : groups)[{k.D, k.causal}].push_back(k);
  std::vector<double> launches;
  std::map<int, ComputeRate> rates;
  for (const auto& r : p.compute.rates) rates[r.head_dim] = r;
  for (auto& [key, rows] : groups) {
    const int m = int(rows.size());
    Eigen::MatrixXd X(m, 3);
    Eigen::VectorXd y(m);
    for (int i = 0; i < m; ++i) {
      const double x = kernel_work(rows[i]).flops() * 1e-6 / kernel_fill(p.compute, rows[i]);
      X(i, 0) = 1, X(i, 1) = x, X(i, 2) = x * (1 / rows[i].lq + 1 / rows[i].lk), y[i] = rows[i].us;
    }
    double inv_peak, half = -1;
    Eigen::VectorXd beta = m >= 4 ? relative_lsq(X, y) : Eigen::VectorXd();
    if (m >= 4 && beta[0] >= 0 && beta[1] > 0 && beta[2] >= 0) {
      inv_peak = beta[1];
      half = beta[2] / beta[1];
      launches.push_back(beta[0]);
    } else {  // too few rows for three unknowns: keep launch and half length, fit the peak alone
      Eigen::VectorXd y2 = y.array() - p.compute.launch_us;
      Eigen::MatrixXd X2 = X.col(1) + X.col(2) * p.compute.half_len;
      inv_peak = relative_lsq(X2, y2)[0];
    }
    const bool known = rates.count(key.first) > 0;
    ComputeRate& r = rates[key.first];
    r.head_dim = key.first;
    if (!known) r.full_tflops = r.causal_tflops = 1 / inv_peak;
    (key.second ? r.causal_tflops : r.full_tflops) = 1 / inv_peak;
    if (half >= 0) (key.second ? r.causal_half_len : r.full_half_len) = half;
  }
  if (!launches.empty()) p.compute.launch_us = median(launches);
  p.compute.rates.clear();
  for (auto& [d, r] : rates) p.compute.rates.push_back(r);
  // Backward: the peak alone, t = launch + row sums + 2.5 x (1 + half_len (1/Lq + 1/Lk)) / peak, with the
  // forward's launch and size curve of the same head dim and mask (a head dim without a forward rate gets one
  // equal to the backward's, so the estimate is never used for it).
  for (auto& [key, rows] : bwd_groups) {
    const int m = int(rows.size());
    Eigen::MatrixXd X(m, 1);
    Eigen::VectorXd y(m);
    if (!std::any_of(p.compute.rates.begin(), p.compute.rates.end(), [&](const ComputeRate& r) { return r.head_dim == key.first; }))
      p.compute.rates.push_back({key.first, 1, 1});
    ComputeRate* r = nullptr;
    for (auto& x : p.compute.rates)
      if (x.head_dim == key.first) r = &x;
    const double half = key.second ? (r->causal_half_len >= 0 ? r->causal_half_len : p.compute.half_len)
                                   : (r->full_half_len >= 0 ? r->full_half_len : p.compute.half_len);
    for (int i = 0; i < m; ++i) {
      const planner::Workload w = kernel_workload(rows[i]);
      const BlockWork bw = kernel_work(rows[i]);
      const double fixed = backward_fixed_us(p.compute, w, bw.lq, true);
      const double x = kBackwardFlopsFactor * bw.flops() * 1e-6 / kernel_fill(p.compute, rows[i]);
      X(i, 0) = x * (1 + half * (1 / rows[i].lq + 1 / rows[i].lk)), y[i] = rows[i].us - fixed;
    }
    const double peak = 1 / relative_lsq(X, y)[0];
    if (r->bwd_full_tflops <= 0) r->bwd_full_tflops = r->bwd_causal_tflops = peak;
    (key.second ? r->bwd_causal_tflops : r->bwd_full_tflops) = peak;
  }

  if (checks) {
    for (const auto& c : s.comm) {
      if (c.ranks > net.ranks) continue;
      std::ostringstream what;
      what << c.kind << " n=" << c.ranks << " " << c.bytes / 1048576.0 << " MiB";
      checks->push_back({what.str(), c.us, predict_comm_step_us(net, p, c.kind, c.ranks, c.bytes)});
    }
    for (const auto& k : s.kernel) {
      std::ostringstream what;
      what << "attention B=" << k.B << " H=" << k.H << " Lq=" << k.lq << " Lk=" << k.lk << " D=" << k.D
           << (k.causal ? " causal" : "");
      if (k.backward) what << " backward";
      checks->push_back({what.str(), k.us,
                         k.backward ? backward_compute_us(p.compute, kernel_workload(k), kernel_work(k), true)
                                    : compute_us(p.compute, kernel_workload(k), kernel_work(k), false)});
    }
  }
  return p;
}

}  // namespace tasp::simulator
