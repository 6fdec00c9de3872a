// tasp run: execute a plan on a backend (cpu now; cuda on GPU machines), check it, write its timeline.
#include <cmath>
#include <iomanip>
#include <iostream>

#include "executor/run.hpp"
#include "planner/plan_io.hpp"
#include "planner/schemes/schemes.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a plan and measure it; --check compares with single-rank fp64 attention");
  struct Args {
    std::string backend = "cpu", plan, topology, scheme = "hamilton", workload, precision = "fp64", timeline, trace;
    std::string pass = "fwd+bwd";
    bool check = false, no_verify = false, steps = false;
    unsigned seed = 1;
    int iters = 20, warmup = 5, timeout = 120;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-b,--backend", a->backend, "cpu | cuda")->capture_default_str();
  cmd->add_option("-p,--plan", a->plan, "Plan file (tasp-plan/1); or give --topology and --scheme");
  cmd->add_option("-t,--topology", a->topology, "Build the plan on the fly for this topology");
  cmd->add_option("-s,--scheme", a->scheme, "Scheme for --topology")->capture_default_str();
  cmd->add_option("-w,--workload", a->workload, "B=..,S=..,H=..,Hkv=..,D=..[,causal]")->required();
  cmd->add_option("--pass", a->pass, "fwd | bwd | fwd+bwd: the forward, the backward (dQ, dK, dV for a random dO, after an\n"
                                     "untimed forward), or both")->capture_default_str();
  cmd->add_option("--precision", a->precision, "cpu backend arithmetic: fp64 | fp32")->capture_default_str();
  cmd->add_flag("--check", a->check, "Compare out and LSE (forward) and dQ, dK, dV (backward) with direct attention: fp64 on the\n"
                                     "CPU (tolerance 1e-10 fp64, 1e-5 fp32), or for cuda above 2e10 FLOPs the whole problem\n"
                                     "on one GPU (tolerance 1e-2)");
  cmd->add_flag("--no-verify", a->no_verify, "Run without verifying the plan first (for testing the check itself)");
  cmd->add_option("--seed", a->seed, "Random inputs' seed")->capture_default_str();
  cmd->add_option("--iters", a->iters, "cuda: timed runs (the median one is reported)")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "cuda: untimed runs first")->capture_default_str();
  cmd->add_option("--timeout", a->timeout, "cuda: seconds before a run that does not finish is ended")->capture_default_str();
  cmd->add_flag("--steps", a->steps, "Print the per-step table (slowest rank per step)");
  cmd->add_option("--timeline", a->timeline, "Write tasp-timeline/1 JSON here");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) here");
  cmd->callback([a] {
    using namespace tasp::planner;
    Workload w = parse_workload(a->workload);
    Passes passes;
    if (!parse_passes(a->pass, &passes)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + a->pass + "'");
    Plan p;
    if (!a->plan.empty()) {
      p = read_plan_file(a->plan);
    } else if (!a->topology.empty()) {
      PlanOptions o;
      o.causal = w.causal;
      if (a->scheme == "ring") o.layout_given = true, o.layout = Layout::Contiguous;  // as tasp simulate plans it
      p = build_plan(load_topology(a->topology), a->scheme, o);
    } else {
      throw InputError("run: give --plan FILE, or --topology and --scheme");
    }
    std::unique_ptr<executor::Backend> backend;
    if (a->backend == "cpu") {
      backend = executor::make_cpu_backend(a->precision);
    } else if (a->backend == "cuda") {
      if (a->iters < 1 || a->warmup < 0 || a->timeout < 1) throw InputError("--iters >= 1, --warmup >= 0, --timeout >= 1");
      executor::CudaOptions co;
      co.iters = a->iters, co.warmup = a->warmup, co.timeout_s = a->timeout;
      backend = executor::make_cuda_backend(co);
    } else {
      throw InputError("--backend: expected cpu or cuda, got '" + a->backend + "'");
    }
    executor::RunOptions ro;
    ro.verify = !a->no_verify;
    ro.check = a->check;
    ro.seed = a->seed;
    ro.passes = passes;
    executor::RunReport rep = executor::run_plan(*backend, p, w, ro);
    if (!rep.result.reporter) return;  // a multi-process run reports on rank 0
    Timeline& t = rep.result.timeline;
    t.topology = p.topology;
    std::cout << "run: " << p.scheme << " on " << p.ranks << " ranks, backend " << backend->name() << ", workload "
              << to_string(w) << ", pass " << passes_name(passes) << "\n";
    std::cout << std::fixed << std::setprecision(1) << "  total " << t.total_us() << " us, comm " << t.comm_us()
              << " us, compute " << t.compute_us() << " us, exposed comm " << t.exposed_comm_us() << " us\n";
    if (!rep.result.iteration_totals_us.empty()) {
      const auto& v = rep.result.iteration_totals_us;
      std::cout << "  " << v.size() << " timed runs: min " << v.front() << " us, median " << v[v.size() / 2] << " us, max "
                << v.back() << " us (the median run's timeline is reported)\n";
    }
    if (a->steps) {
      std::cout << "  pass step   comm_us  compute_us  step_us  (slowest rank)\n";
      double prev_end = 0;
      for (size_t s = 0; s < (t.per_rank.empty() ? 0 : t.per_rank[0].size()); ++s) {
        double cm = 0, cp = 0, end = 0;
        for (const auto& r : t.per_rank) {
          cm = std::max(cm, r[s].comm_end_us - r[s].comm_start_us);
          cp = std::max(cp, r[s].compute_end_us - r[s].compute_start_us + r[s].post_us());
          end = std::max(end, r[s].end_us());
        }
        const bool b = t.backward_step(int(s));
        std::cout << "  " << (b ? "bwd " : "fwd ") << std::setw(4) << (b && passes.fwd ? int(s) - t.fwd_steps : int(s)) << std::setw(10) << cm << std::setw(12) << cp << std::setw(9) << end - prev_end << "\n";
        prev_end = end;
      }
    }
    if (!a->timeline.empty()) write_output(a->timeline, [&](std::ostream& o) { write_timeline_json(o, t); });
    if (!a->trace.empty()) write_output(a->trace, [&](std::ostream& o) { write_chrome_trace(o, t); });
    if (rep.checked) {
      const double tol = a->backend == "cuda" ? 1e-2 : a->precision == "fp64" ? 1e-10 : 1e-5;
      const bool ok = rep.max_rel_err() < tol;
      std::cout << "  check vs " << rep.reference << " (tolerance " << std::scientific << std::setprecision(0) << tol
                << "): " << (ok ? "PASS" : "FAIL") << "\n";
      for (const auto& c : rep.checks)
        std::cout << "    " << std::left << std::setw(4) << c.name << std::right << " rel err " << std::scientific
                  << std::setprecision(2) << c.rel_err << "  cosine " << std::fixed << std::setprecision(9) << c.cosine
                  << (c.rel_err < tol ? "" : "  <- over tolerance") << "\n";
      if (!ok) throw Exit(kCheckFailed, "run: numeric check failed");
    }
  });
}

}  // namespace tasp::cli
