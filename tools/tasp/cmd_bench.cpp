// tasp bench planner | simulator: speed targets, measured on this machine.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "planner/plan_io.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/verify_decomposition.hpp"
#include "planner/verify_plan.hpp"
#include "planner/workload.hpp"
#include "simulator/engine.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {
namespace {

using namespace tasp::planner;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void bench_planner(const std::vector<int>& sizes, int plan_n) {
  std::cout << "# tasp bench planner: K_n* decomposition + independent verification; expanded fwd+bwd plan + replay of both\n";
  std::cout << std::setw(8) << "n" << std::setw(8) << "rings" << std::setw(14) << "construct_s" << std::setw(12)
            << "verify_s" << std::setw(10) << "total_s" << "  method\n";
  for (int n : sizes) {
    auto t0 = Clock::now();
    Decomposition d = decompose_complete(n);
    double tc = since(t0);
    auto t1 = Clock::now();
    std::string err = check_cycles(Digraph::complete(n), d.cycles);
    double tv = since(t1);
    std::cout << std::setw(8) << n << std::setw(8) << d.cycles.size() << std::setw(14) << std::fixed << std::setprecision(4) << tc
              << std::setw(12) << tv << std::setw(10) << tc + tv << "  " << d.method << (err.empty() ? "" : "  INVALID: " + err)
              << "\n";
  }
  std::cout << "\n" << std::setw(8) << "n" << std::setw(12) << "scheme" << std::setw(12) << "build_s" << std::setw(12)
            << "verify_s" << std::setw(12) << "write_s" << std::setw(12) << "MB" << std::setw(12) << "total_s\n";
  Topology t = load_topology("complete:" + std::to_string(plan_n));
  for (const char* scheme : {"hamilton", "ring"}) {
    auto t0 = Clock::now();
    PlanOptions o;
    Plan p = build_plan(t, scheme, o);
    double tb = since(t0);
    auto t1 = Clock::now();
    std::string err = verify_plan(p);
    double tv = since(t1);
    auto t2 = Clock::now();
    std::ostringstream os;
    write_plan_json(os, p);
    double tw = since(t2);
    std::cout << std::setw(8) << plan_n << std::setw(12) << scheme << std::setw(12) << tb << std::setw(12) << tv << std::setw(12)
              << tw << std::setw(12) << std::setprecision(1) << os.str().size() / 1e6 << std::setw(12) << std::setprecision(3)
              << tb + tv + tw << (err.empty() ? "" : "  INVALID: " + err) << "\n";
  }
}

// Plan build (compact above 128 ranks) + verify + simulate on large clusters: the simulator's speed targets.
void bench_simulator(const std::vector<std::string>& topologies, const std::vector<std::string>& schemes) {
  std::cout << "# tasp bench simulator: compact plan build + rule check + simulation, built-in H200 profile\n";
  std::cout << std::setw(16) << "topology" << std::setw(8) << "ranks" << std::setw(11) << "scheme" << std::setw(7)
            << "mask" << std::setw(12) << "S" << std::setw(10) << "build_s" << std::setw(10) << "verify_s" << std::setw(10)
            << "sim_s" << std::setw(10) << "total_s" << std::setw(14) << "predicted_ms" << "  engine\n";
  const simulator::Profile prof = simulator::builtin_profile("h200-hgx-8");
  for (const auto& name : topologies) {
    Topology t = load_topology(name);
    const long n = t.ranks();
    for (const auto& scheme : schemes)
      for (bool causal : {false, true}) {
        if (!scheme_applies(scheme, t, causal, nullptr)) continue;
        Workload w = parse_workload("B=1,S=1,H=32,Hkv=8,D=128");
        w.causal = causal;
        auto t0 = Clock::now();
        PlanOptions o;
        o.causal = causal;
        Plan p = build_plan(t, scheme, o);
        const double tb = since(t0);
        // The smallest S giving every piece at least one token (pieces = rings, 2 chunks per rank if zigzag).
        const long unit = n * (causal ? 2 : 1);
        w.S = unit * std::max<long>(1, long(p.rings.size()));
        auto t1 = Clock::now();
        const std::string err = verify_plan(p);
        const double tv = since(t1);
        auto t2 = Clock::now();
        simulator::SimResult r = simulator::simulate(p, t, w, prof);
        const double ts = since(t2);
        std::cout << std::setw(16) << name << std::setw(8) << n << std::setw(11) << scheme << std::setw(7)
                  << (causal ? "causal" : "full") << std::setw(12) << w.S << std::fixed << std::setprecision(3)
                  << std::setw(10) << tb << std::setw(10) << tv << std::setw(10) << ts << std::setw(10) << tb + tv + ts
                  << std::setw(14) << std::setprecision(1) << r.total_us / 1e3 << "  "
                  << (r.symmetric_fast_path ? "ring-flow" : "general") << (err.empty() ? "" : "  INVALID: " + err)
                  << std::endl;
      }
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: planner and simulator (CPU), kernel (GPU)");
  cmd->require_subcommand(1);
  auto* pl = cmd->add_subcommand("planner", "Decomposition + verification times; expanded plan + replay time");
  auto sizes = std::make_shared<std::vector<int>>(std::vector<int>{8, 64, 126, 128, 256, 512, 1024});
  auto plan_n = std::make_shared<int>(128);
  pl->add_option("--sizes", *sizes, "Complete digraph orders to decompose")->capture_default_str();
  pl->add_option("--plan-ranks", *plan_n, "Ranks for the expanded-plan benchmark")->capture_default_str();
  pl->callback([sizes, plan_n] { bench_planner(*sizes, *plan_n); });
  auto* sm = cmd->add_subcommand("simulator", "Plan + check + simulate times on large clusters (targets: 1024 GPUs < 2 s, 8192 < 30 s)");
  auto topos = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"cluster:128x8", "cluster:1024x8"});
  auto schemes = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"hamilton", "two-level"});
  sm->add_option("--topologies", *topos, "Topologies to time")->capture_default_str();
  sm->add_option("--schemes", *schemes, "Schemes to time")->capture_default_str();
  sm->callback([topos, schemes] { bench_simulator(*topos, *schemes); });
#ifdef TASP_HAVE_CUDA
  register_bench_kernel(*cmd);
#else
  cmd->add_subcommand("kernel", "Attention kernel timings (needs a build with CUDA)")->callback([] {
    throw Exit(kBadInput, "bench kernel: this build has no CUDA (nvcc was not found at configure time)");
  });
#endif
}

}  // namespace tasp::cli
