#include "executor/run.hpp"

#include <cmath>
#include <random>

#include "executor/attention_cpu.hpp"
#include "planner/layout.hpp"
#include "planner/topology.hpp"
#include "planner/verify_plan.hpp"

namespace tasp::executor {

Problem random_problem(const planner::Workload& w, unsigned seed) {
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
  return p;
}

RunReport run_plan(Backend& backend, const planner::Plan& plan, const planner::Workload& w, const RunOptions& o) {
  if (o.verify) {
    const std::string err = planner::verify_plan(plan);
    if (!err.empty()) throw planner::InputError("plan refused by the verifier: " + err);
  }
  if (w.causal != plan.causal)
    throw planner::InputError(std::string("the workload is ") + (w.causal ? "causal" : "full") + " but the plan is " +
                              (plan.causal ? "causal" : "full"));
  const std::string split = planner::check_split(plan.layout, plan.ranks, plan.pieces_per_rank, w.S);
  if (!split.empty()) throw planner::InputError("workload: " + split);
  Problem pr;
  if (o.check || !backend.makes_own_inputs()) pr = random_problem(w, o.seed);
  else pr.w = w;
  RunReport rep;
  rep.result = backend.run(plan, pr);
  rep.result.timeline.workload = planner::to_string(w);
  if (o.check && rep.result.reporter) {
    std::vector<double> ro, rl;
    const double flops = 4.0 * w.B * double(w.S) * double(w.S) * w.H * w.D;
    if (flops > o.cpu_reference_max_flops && backend.single_device_reference(pr, ro, rl)) {
      rep.reference = "single-device " + backend.name();
    } else {
      reference_attention(pr.q, pr.k, pr.v, w.B, w.S, w.H, w.Hkv, w.D, w.causal, ro, rl);
      rep.reference = "fp64 cpu";
    }
    auto rel = [](const std::vector<double>& a, const std::vector<double>& b) {
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        double d = a[i] - b[i];
        num += std::isfinite(d) ? d * d : 1e300;
        den += b[i] * b[i];
      }
      return std::sqrt(num / std::max(den, 1e-300));
    };
    rep.rel_err_out = rel(rep.result.out, ro);
    rep.rel_err_lse = rel(rep.result.lse, rl);
    rep.checked = true;
  }
  return rep;
}

}  // namespace tasp::executor
