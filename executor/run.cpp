#include "executor/run.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "executor/attention_cpu.hpp"
#include "planner/prune.hpp"
#include "planner/layout.hpp"
#include "planner/topology.hpp"
#include "planner/verify_plan.hpp"

namespace tasp::executor {

Problem random_problem(const planner::Workload& w, unsigned seed, bool with_dout) {
  Problem p;
  p.w = w;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto fill = [&](std::vector<double>& x, size_t n) {
    x.resize(n);
    for (double& e : x) e = nd(rng);
  };
  fill(p.q, size_t(w.B) * w.S * w.H * w.D);
  fill(p.k, size_t(w.B) * w.S * w.Hkv * w.D);
  fill(p.v, size_t(w.B) * w.S * w.Hkv * w.D);
  if (with_dout) fill(p.dout, size_t(w.B) * w.S * w.H * w.D);
  return p;
}

double host_memory_bytes(const planner::Workload& w, planner::Passes passes, bool cpu, bool host_problem, bool check) {
  const double q = double(w.B) * w.S * w.H * w.D, kv = double(w.B) * w.S * w.Hkv * w.D, l = double(w.B) * w.S * w.H;
  const double inputs = (q + 2 * kv + (passes.bwd ? q : 0)) * 8;
  const double outputs = (q + l + (passes.bwd ? q + 2 * kv : 0)) * 8;
  double total = host_problem || cpu ? inputs + outputs : 0;
  if (cpu) total += inputs + outputs;  // each rank's copies of its rows and pieces, and its accumulators
  if (check) total += outputs;
  return total;
}

TensorCheck compare(const std::string& name, const std::vector<double>& x, const std::vector<double>& ref) {
  TensorCheck c{name, 0, 0};
  if (x.size() != ref.size()) return c.rel_err = INFINITY, c;
  double num = 0, den = 0, xx = 0, xr = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - ref[i];
    num += std::isfinite(d) ? d * d : 1e300;
    den += ref[i] * ref[i];
    if (std::isfinite(x[i])) xx += x[i] * x[i], xr += x[i] * ref[i];
  }
  c.rel_err = std::sqrt(num / std::max(den, 1e-300));
  c.cosine = xx > 0 && den > 0 ? xr / std::sqrt(xx * den) : 0;
  return c;
}

double RunReport::rel_err(const std::string& name) const {
  for (const auto& c : checks)
    if (c.name == name) return c.rel_err;
  return -1;
}

double RunReport::max_rel_err() const {
  double m = 0;
  for (const auto& c : checks) m = std::max(m, std::isnan(c.rel_err) ? INFINITY : c.rel_err);
  return m;
}

RunReport run_plan(Backend& backend, const planner::Plan& plan, const planner::Workload& w, const RunOptions& o) {
  if (!o.passes.fwd && !o.passes.bwd) throw planner::InputError("nothing to run (no pass)");
  if (const std::string u = planner::mask_mismatch(plan, w); !u.empty()) throw planner::InputError("workload: " + u);
  if (o.passes.bwd && !plan.has_backward)
    throw planner::InputError("the plan has no backward part: plan it with `tasp plan --pass fwd+bwd`, or run --pass fwd");
  if (o.verify) {
    const std::string err = planner::verify_plan(plan, nullptr, nullptr, false, o.passes.bwd);
    if (!err.empty()) throw planner::InputError("plan refused by the verifier: " + err);
  }
  if (w.causal != plan.causal)
    throw planner::InputError(std::string("the workload is ") + (w.causal ? "causal" : "full") + " but the plan is " +
                              (plan.causal ? "causal" : "full"));
  const std::string split = planner::check_split(planner::split_of(plan, w.S));
  if (!split.empty()) throw planner::InputError("workload: " + split);
  const bool host_problem = o.check || !backend.makes_own_inputs();
  if (o.host_memory_bytes > 0) {
    const double need = host_memory_bytes(w, o.passes, backend.name().rfind("cpu", 0) == 0, host_problem, o.check);
    if (need > o.host_memory_bytes)
      throw planner::InputError("workload: the run would take about " + std::to_string(long(need / (1 << 20))) +
                                " MiB of host memory, this machine has " + std::to_string(long(o.host_memory_bytes / (1 << 20))) +
                                " MiB (smaller B, S or H; or --backend cuda without --check)");
  }
  Problem pr;
  if (host_problem) pr = random_problem(w, o.seed, o.passes.bwd);
  else pr.w = w;
  RunReport rep;
  rep.result = backend.run(plan, pr, o.passes);
  rep.result.timeline.workload = planner::to_string(w);
  const double total = rep.result.timeline.total_us();
  rep.tokens_per_s = total > 0 ? double(w.B) * w.S / (total * 1e-6) : 0;
  if (o.speedup && rep.result.reporter) rep.single_device_us = backend.single_device_us(w, o.passes, o.warmup, o.iters);
  if (o.check && rep.result.reporter) {
    Result ref;
    const double flops = 4.0 * w.B * double(w.S) * double(w.S) * w.H * w.D * (o.passes.bwd ? 3.5 : 1.0);
    if (flops > o.cpu_reference_max_flops && backend.single_device_reference(pr, o.passes, ref)) {
      rep.reference = "single-device " + backend.name();
    } else {
      if (o.passes.fwd) reference_attention(pr.q, pr.k, pr.v, w, ref.out, ref.lse);
      if (o.passes.bwd)
        reference_attention_backward(pr.q, pr.k, pr.v, pr.dout, w, ref.dq, ref.dk, ref.dv);
      rep.reference = "fp64 cpu";
    }
    if (o.passes.fwd) {
      rep.checks.push_back(compare("out", rep.result.out, ref.out));
      rep.checks.push_back(compare("lse", rep.result.lse, ref.lse));
    }
    if (o.passes.bwd) {
      rep.checks.push_back(compare("dq", rep.result.dq, ref.dq));
      rep.checks.push_back(compare("dk", rep.result.dk, ref.dk));
      rep.checks.push_back(compare("dv", rep.result.dv, ref.dv));
    }
    rep.checked = true;
  }
  return rep;
}

}  // namespace tasp::executor
