#include "simulator/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "planner/layout.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "simulator/comm_rules.hpp"
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

planner::Workload kernel_workload(const KernelSample& k);
BlockWork kernel_work(const KernelSample& k) { return whole_block(kernel_workload(k), k.lq, k.lk, k.causal); }
planner::Workload kernel_workload(const KernelSample& k) {
  planner::Workload w;
  w.B = k.B, w.H = k.H, w.Hkv = k.kv_heads(), w.D = k.D, w.causal = k.causal;
  return w;
}
double kernel_fill(const ComputeProfile& cp, const KernelSample& k) {
  return launch_fill(cp, kernel_workload(k), kernel_work(k), k.backward);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

CommRefit refit_comm(const std::vector<CommSample>& steps, const Profile& base, const Network& net) {
  CommRefit r;
  Samples s;
  s.comm = steps;
  r.profile = fit_profile(s, base, net, nullptr);
  r.profile.name = base.name + " refitted to the fabric now";
  std::vector<double> ratios;
  for (const auto& x : steps)
    if (x.bytes >= 16 * 1048576.0) ratios.push_back(x.us / predict_comm_step_us(net, base, x.kind, x.ranks, x.bytes));
  std::sort(ratios.begin(), ratios.end());
  if (!ratios.empty()) r.median_ratio = ratios[ratios.size() / 2], r.min_ratio = ratios.front(), r.max_ratio = ratios.back();
  return r;
}

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
    // NCCL's all-gather, as the cuda backend's collective steps run: its own rate past the same latency.
    // As one broadcast a root (allgather-roots, CommProfile::collectives_per_root) where measured so; the
    // reduce-scatter's own rate where its rows are there (reducescatter[-roots]).
    auto& roots = kinds["allgather-roots"];
    cp.collectives_per_root = !roots.empty();
    const double lat = step_latency_us(cp, n - 1);  // as the engine starts the step
    auto collective_rate = [&](const std::vector<CommSample>& rows) {
      const double t_min = std::min_element(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.us < b.us; })->us;
      return rate_curve(rows, std::min(lat, 0.9 * t_min), 1.0);
    };
    if (auto& ag = roots.empty() ? kinds["allgather"] : roots; !ag.empty()) cp.collective_gbps = collective_rate(ag);
    auto& rs_roots = kinds["reducescatter-roots"];
    if (auto& rs = rs_roots.empty() ? kinds["reducescatter"] : rs_roots; !rs.empty()) cp.reduce_gbps = collective_rate(rs);
    if (auto& one = kinds["broadcast-one-root"]; !one.empty()) cp.one_root_gbps = collective_rate(one);
    const int ranks = n;  // (a structured binding: lambdas capture a copy)
    auto it = std::find_if(p.comm.begin(), p.comm.end(), [&](const CommProfile& c) { return c.ranks == ranks; });
    if (it != p.comm.end()) *it = cp;
    else p.comm.push_back(cp);
  }
  std::sort(p.comm.begin(), p.comm.end(), [](auto& a, auto& b) { return a.ranks < b.ranks; });

  // Kernels: t = launch + x / peak + x * (1/Lq + 1/Lk) * half_len / peak, x = FLOPs / fill, per head dim and mask.
  // Peaks, launch and size curves from the cold samples (all of them where none is cold).
  // MHA rows only: GQA rows give their own curves at the end.
  const bool any_cold = std::any_of(s.kernel.begin(), s.kernel.end(), [](const KernelSample& k) { return !k.hot() && !k.grouped(); });
  std::map<std::pair<int, bool>, std::vector<KernelSample>> groups, bwd_groups;
  for (const auto& k : s.kernel)
    if (!k.grouped() && (!k.hot() || !any_cold)) (k.backward ? bwd_groups : groups)[{k.D, k.causal}].push_back(k);
  std::vector<double> launches;
  std::map<int, ComputeRate> rates;
  for (const auto& r : p.compute.rates) rates[r.head_dim] = r;
  // Each group's launch, peak and half length where its rows determine all three; the launch is the median
  // of those, and the other groups fit their peak with it and their half length (as the base has it).
  struct Fit {
    double inv_peak = 0, half = -1;
  };
  std::map<std::pair<int, bool>, Fit> fits;
  auto design = [&](const std::vector<KernelSample>& rows, Eigen::MatrixXd& X, Eigen::VectorXd& y) {
    const int m = int(rows.size());
    X.resize(m, 3), y.resize(m);
    for (int i = 0; i < m; ++i) {
      const double x = kernel_work(rows[i]).flops() * 1e-6 / kernel_fill(p.compute, rows[i]);
      X(i, 0) = 1, X(i, 1) = x, X(i, 2) = x * (1 / rows[i].lq + 1 / rows[i].lk), y[i] = rows[i].us;
    }
  };
  for (auto& [key, rows] : groups) {
    Eigen::MatrixXd X;
    Eigen::VectorXd y;
    design(rows, X, y);
    if (rows.size() < 4) continue;
    const Eigen::VectorXd beta = relative_lsq(X, y);
    if (beta[0] >= 0 && beta[1] > 0 && beta[2] >= 0) fits[key] = {beta[1], beta[2] / beta[1]}, launches.push_back(beta[0]);
  }
  if (!launches.empty()) p.compute.launch_us = median(launches);
  for (auto& [key, rows] : groups) {
    const bool known = rates.count(key.first) > 0;
    ComputeRate& r = rates[key.first];
    r.head_dim = key.first;
    if (!fits.count(key)) {  // the peak alone, with the launch and this group's half length
      const double kept = key.second ? r.causal_half_len : r.full_half_len;
      const double half = known && kept >= 0 ? kept : p.compute.half_len;
      Eigen::MatrixXd X;
      Eigen::VectorXd y;
      design(rows, X, y);
      Eigen::VectorXd y2 = y.array() - p.compute.launch_us;
      Eigen::MatrixXd X2 = X.col(1) + X.col(2) * half;
      fits[key] = {relative_lsq(X2, y2)[0], -1};
    }
    const Fit& f = fits[key];
    if (!known) r.full_tflops = r.causal_tflops = 1 / f.inv_peak;
    (key.second ? r.causal_tflops : r.full_tflops) = 1 / f.inv_peak;
    if (f.half >= 0) (key.second ? r.causal_half_len : r.full_half_len) = f.half;
  }
  p.compute.rates.clear();
  for (auto& [d, r] : rates) p.compute.rates.push_back(r);
  // Backward: t = launch + row sums + 2.5 x (1 + half_len (1/Lq + 1/Lk)) / peak with the forward's launch;
  // peak and half length from three or more rows, else the peak alone with the forward's size curve of the
  // same head dim and mask (a head dim without a forward rate gets one equal to the backward's, so the
  // estimate is never used for it).
  for (auto& [key, rows] : bwd_groups) {
    const int m = int(rows.size());
    Eigen::MatrixXd X(m, 1), X2(m, 2);
    Eigen::VectorXd y(m);
    const int head_dim = key.first;
    if (!std::any_of(p.compute.rates.begin(), p.compute.rates.end(), [&](const ComputeRate& r) { return r.head_dim == head_dim; })) {
      ComputeRate fresh;
      fresh.head_dim = head_dim, fresh.full_tflops = fresh.causal_tflops = 1;
      p.compute.rates.push_back(fresh);
    }
    ComputeRate* r = nullptr;
    for (auto& x : p.compute.rates)
      if (x.head_dim == key.first) r = &x;
    const double half = key.second ? (r->causal_half_len >= 0 ? r->causal_half_len : p.compute.half_len)
                                   : (r->full_half_len >= 0 ? r->full_half_len : p.compute.half_len);
    for (int i = 0; i < m; ++i) {
      const planner::Workload w = kernel_workload(rows[i]);
      const BlockWork bw = kernel_work(rows[i]);
      const double fixed = backward_fixed_us(p.compute, w, bw.lq, true) + backward_finish_us(p.compute, w, bw.lq);
      const double x = kBackwardFlopsFactor * bw.flops() * 1e-6 / kernel_fill(p.compute, rows[i]);
      X(i, 0) = x * (1 + half * (1 / rows[i].lq + 1 / rows[i].lk)), y[i] = rows[i].us - fixed;
      X2(i, 0) = x, X2(i, 1) = x * (1 / rows[i].lq + 1 / rows[i].lk);
    }
    double peak = 1 / relative_lsq(X, y)[0], bwd_half = -1;
    if (m >= 3) {
      const Eigen::VectorXd beta = relative_lsq(X2, y);
      if (beta[0] > 0 && beta[1] >= 0) peak = 1 / beta[0], bwd_half = beta[1] / beta[0];
    }
    if (r->bwd_full_tflops <= 0) r->bwd_full_tflops = r->bwd_causal_tflops = peak;
    (key.second ? r->bwd_causal_tflops : r->bwd_full_tflops) = peak;
    if (bwd_half >= 0) (key.second ? r->bwd_causal_half_len : r->bwd_full_half_len) = bwd_half;
  }

  // Sustained fractions: per head dim and pass, the median of (cold prediction / hot measurement), at most 1.
  auto cold_us = [&](const KernelSample& k) {
    return k.backward ? backward_alone_us(p.compute, kernel_workload(k), kernel_work(k))
                      : compute_us(p.compute, kernel_workload(k), kernel_work(k), false);
  };
  // The fixed parts (launches, row sums, dQ scratch) do not slow with the clock: the ratio is of the math.
  auto fixed_us = [&](const KernelSample& k) {
    const planner::Workload w = kernel_workload(k);
    return k.backward ? backward_fixed_us(p.compute, w, k.lq, true) + backward_finish_us(p.compute, w, k.lq) : p.compute.launch_us;
  };
  if (any_cold) {
    std::map<std::tuple<int, bool, bool>, std::vector<double>> ratios;  // (D, backward, mix)
    for (const auto& k : s.kernel)
      if (k.hot() && !k.grouped() && k.us > fixed_us(k))
        ratios[{k.D, k.backward, k.mix}].push_back((cold_us(k) - fixed_us(k)) / (k.us - fixed_us(k)));
    for (auto& [key, v] : ratios)
      for (auto& r : p.compute.rates) {
        const auto [d, bwd, mix] = key;
        if (r.head_dim != d) continue;
        double& f = mix ? (bwd ? r.bwd_mix_sustained : r.mix_sustained) : (bwd ? r.bwd_sustained : r.sustained);
        f = std::clamp(median(v), 0.05, 1.0);
      }
  }

  // GQA: each grouped row against the MHA rows of its shape, clock and file (their median), kernel time less the
  // fixed parts and times the launch's wave fill (which the model already has: the backward's CTAs follow the K/V
  // heads); per head dim, pass and group the median of those ratios. Paired in one file, so that two GPUs' rates
  // (a few % apart) do not pass for a GQA cost.
  std::map<std::tuple<int, bool, int>, std::vector<double>> gqa;  // (D, backward, group)
  for (const auto& k : s.kernel) {
    if (!k.grouped() || k.us <= fixed_us(k)) continue;
    std::vector<double> mha;
    for (const auto& m : s.kernel)
      if (!m.grouped() && m.source == k.source && m.backward == k.backward && m.B == k.B && m.H == k.H && m.D == k.D &&
          m.lq == k.lq && m.lk == k.lk && m.causal == k.causal && m.heat_ms == k.heat_ms && m.mix == k.mix && m.us > fixed_us(m))
        mha.push_back((m.us - fixed_us(m)) * kernel_fill(p.compute, m));
    if (!mha.empty())
      gqa[{k.D, k.backward, k.H / k.kv_heads()}].push_back(median(mha) / ((k.us - fixed_us(k)) * kernel_fill(p.compute, k)));
  }
  for (auto& r : p.compute.rates)
    for (bool bwd : {false, true}) {
      Curve c;
      for (const auto& [key, v] : gqa) {
        const auto [d, b, group] = key;
        if (d == r.head_dim && b == bwd) c.points.push_back({double(group), std::clamp(median(v), 0.05, 2.0)});
      }
      if (c.empty()) continue;
      c.points.insert(c.points.begin(), {1.0, 1.0});
      (bwd ? r.bwd_gqa : r.gqa) = c;
    }

  if (checks) {
    const Profile hot = p.at_clock(Clock::Sustained), hot_mix = p.at_clock(Clock::Sustained, true);
    for (const auto& c : s.comm) {
      if (c.ranks > net.ranks) continue;
      std::ostringstream what;
      what << c.kind << " n=" << c.ranks << " " << c.bytes / 1048576.0 << " MiB";
      checks->push_back({what.str(), c.us, predict_comm_step_us(net, p, c.kind, c.ranks, c.bytes)});
    }
    for (const auto& k : s.kernel) {
      std::ostringstream what;
      what << "attention B=" << k.B << " H=" << k.H;
      if (k.grouped()) what << " Hkv=" << k.kv_heads();
      what << " Lq=" << k.lq << " Lk=" << k.lk << " D=" << k.D
           << (k.causal ? " causal" : "");
      if (k.backward) what << " backward";
      if (k.hot()) what << (k.mix ? " hot mix" : " hot");
      const ComputeProfile& cp = !k.hot() ? p.compute : k.mix ? hot_mix.compute : hot.compute;
      checks->push_back({what.str(), k.us,
                         k.backward ? backward_alone_us(cp, kernel_workload(k), kernel_work(k))
                                    : compute_us(cp, kernel_workload(k), kernel_work(k), false)});
    }
  }
  return p;
}

ExecutorProfile fit_executor(const std::vector<planner::Timeline>& measured, const ExecutorProfile& base) {
  std::vector<double> fwd_start, bwd_start, gaps;
  for (const auto& t : measured) {
    const int fwd_steps = t.pass == "fwd" ? -1 : t.pass == "bwd" ? 0 : t.fwd_steps;
    for (const auto& steps : t.per_rank) {
      // A step begins with its first transfer or launch (a part with nothing to do does not count).
      auto begin = [&](size_t i) {
        const auto& x = steps[i];
        double b = x.flops > 0 ? x.compute_start_us : INFINITY;
        if (x.bytes > 0) b = std::min(b, x.comm_start_us);
        return b;
      };
      for (size_t i = 0; i < steps.size(); ++i) {
        const bool first_bwd = int(i) == fwd_steps;
        if (i == 0 && t.pass != "bwd" && steps[0].flops > 0) fwd_start.push_back(steps[0].compute_start_us);
        if (first_bwd && steps[i].flops > 0)
          bwd_start.push_back(steps[i].compute_start_us - (i > 0 ? steps[i - 1].end_us() : 0));
        if (i > 0 && !first_bwd && std::isfinite(begin(i))) gaps.push_back(std::max(0.0, begin(i) - steps[i - 1].end_us()));
      }
    }
  }
  ExecutorProfile e = base;
  if (!fwd_start.empty()) e.fwd_start_us = std::max(0.0, median(fwd_start));
  if (!bwd_start.empty()) e.bwd_start_us = std::max(0.0, median(bwd_start));
  if (!gaps.empty()) e.step_gap_us = median(gaps);
  return e;
}

namespace {

// The rank's transfer intervals (the steps that send something), merged: what runs on its comm stream.
std::vector<std::pair<double, double>> comm_intervals(const std::vector<planner::StepTiming>& steps) {
  std::vector<std::pair<double, double>> iv;
  for (const auto& st : steps)
    if (st.bytes > 0 && st.comm_end_us > st.comm_start_us) iv.push_back({st.comm_start_us, st.comm_end_us});
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& x : iv)
    if (!merged.empty() && x.first <= merged.back().second) merged.back().second = std::max(merged.back().second, x.second);
    else merged.push_back(x);
  return merged;
}

double overlap_with(const std::vector<std::pair<double, double>>& iv, double a, double b) {
  double o = 0;
  for (const auto& [x, y] : iv) o += std::max(0.0, std::min(b, y) - std::max(a, x));
  return o;
}

}  // namespace

double fit_comm_compute_share(const std::vector<std::pair<planner::Timeline, planner::Timeline>>& runs, double base) {
  std::vector<int> run;
  std::vector<double> frac, ratio;
  for (size_t t = 0; t < runs.size(); ++t) {
    const auto& [m, s] = runs[t];
    for (size_t r = 0; r < std::min(m.per_rank.size(), s.per_rank.size()); ++r) {
      // Any transfer beside the kernel counts, its own step's or another's (a head-parallel pass's all-to-alls of
      // the other head groups run in steps of their own, beside the groups' kernels).
      const auto comm = comm_intervals(m.per_rank[r]);
      for (size_t i = 0; i < std::min(m.per_rank[r].size(), s.per_rank[r].size()); ++i) {
        const auto &a = m.per_rank[r][i], &b = s.per_rank[r][i];
        const double comp = a.compute_end_us - a.compute_start_us, pred = b.compute_end_us - b.compute_start_us;
        if (a.flops <= 0 || comp <= 0 || pred <= 0) continue;
        const double beside = overlap_with(comm, a.compute_start_us, a.compute_end_us);
        run.push_back(int(t)), frac.push_back(std::min(1.0, beside / comp)), ratio.push_back(comp / pred);
      }
    }
  }
  const int k = int(runs.size()), m = int(ratio.size());
  if (m < k + 2) return base;
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(m, k + 1);
  Eigen::VectorXd y(m);
  for (int i = 0; i < m; ++i) X(i, run[i]) = 1, X(i, k) = frac[i], y[i] = ratio[i];
  // Identifiable only where some run has steps with and without transfers beside the kernel.
  bool varies = false;
  for (int t = 0; t < k && !varies; ++t) {
    double lo = 2, hi = -1;
    for (int i = 0; i < m; ++i)
      if (run[i] == t) lo = std::min(lo, frac[i]), hi = std::max(hi, frac[i]);
    varies = hi - lo > 0.05;
  }
  if (!varies) return base;
  const Eigen::VectorXd beta = X.colPivHouseholderQr().solve(y);
  double mean_a = 0;
  for (int t = 0; t < k; ++t) mean_a += beta[t] / k;
  return mean_a > 0 ? std::clamp(beta[k] / mean_a, 0.0, 0.5) : base;
}

double fit_elementwise_gbps(const std::vector<planner::Timeline>& measured, const ComputeProfile& cp) {
  std::vector<double> rates;
  for (const auto& t : measured) {
    if (t.pass == "fwd" || t.ranks < 1) continue;
    const planner::Workload w = planner::parse_workload(t.workload);
    const double bytes = 3.0 * w.B * w.H * (double(w.S) / t.ranks) * w.D * 4;
    for (const auto& steps : t.per_rank) {
      if (steps.empty() || steps.back().flops > 0) continue;  // the last step computes nothing but the finish
      const double us = steps.back().compute_end_us - steps.back().compute_start_us - 2 * cp.small_launch_us;
      if (us > 0) rates.push_back(bytes / (us * 1e3));
    }
  }
  return rates.empty() ? cp.elementwise_gbps : median(rates);
}

}  // namespace tasp::simulator
