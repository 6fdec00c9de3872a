// tasp calibrate --fit: least-squares fit of a machine profile to measured microbenchmarks.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "executor/launch_env.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"
#include "simulator/calibrate.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"
#include "tools/tasp/measure_fabric.hpp"

namespace tasp::cli {
namespace {

struct Args {
  std::vector<std::string> fit, timelines;
  bool measure = false;
  bool one_comm = false;
  int ranks = 0, iters = 20, warmup = 5;
  std::string csv;
  std::string out, base, topology = "h200-hgx-8", name, description;
  bool quiet = false;
};

}  // namespace

void register_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit a machine profile (latency, per-peer latency, per-flow and per-rank rate curves by message size,\n"
      "kernel peak, launch and size curve) to measurements, and show how well it replays them.\n"
      "CSV columns: kind,ranks,bytes,ms (kind ring|multi|pairs|allgather|allgather-roots|reducescatter|\n"
      "reducescatter-roots|broadcast-one-root, as --measure writes them) and kind=attention,B,H,S|Lq,Lk,D,causal,ms.");
  auto a = std::make_shared<Args>();
  cmd->add_option("--fit", a->fit, "Measurement CSV files (see tools/measurements-to-csv.sh, tasp bench kernel --csv)");
  cmd->add_option("--timeline", a->timelines, "Measured timelines (tasp run --timeline): the executor's pass starts and step gaps");
  cmd->add_flag("--measure", a->measure, "Measure NCCL steps (ring, all-peer, pairs, all-gather, reduce-scatter; 256 KiB..256 MiB) on the local GPUs first\n"
                                      "(under mpirun or srun: on every rank's GPU, a process each, the links between nodes too; rank 0 writes)");
  cmd->add_flag("--one-comm", a->one_comm, "--measure: the all-gather as one ncclAllGather (default: one broadcast a root, each\n"
                                           "on a communicator of its own, as tasp run then moves collectives on this profile;\n"
                                           "the profile says which: collectives_per_root)");
  cmd->add_option("--ranks", a->ranks, "--measure: GPUs to use (default: all)");
  cmd->add_option("--iters", a->iters, "--measure: timed repetitions per kind and size, in up to 5 rounds over all\n"
                                       "of them (a figure is its rounds' median: drift is shared, not pinned on one kind)")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "--measure: untimed repetitions first")->check(CLI::Range(0, 1000000))->capture_default_str();
  cmd->add_option("--csv", a->csv, "--measure: also write the measurements as CSV here");
  cmd->add_option("-o,--output", a->out, "Write the fitted profile YAML here (default: stdout)");
  cmd->add_option("--base", a->base, "Profile whose fields the measurements do not cover are kept (default: built-in)");
  cmd->add_option("-t,--topology", a->topology, "The measured machine: replays the samples on its links")->capture_default_str();
  cmd->add_option("--name", a->name, "Name of the fitted profile (default: the topology's name)");
  cmd->add_option("--description", a->description, "Its description (default: what it was fitted from)");
  cmd->add_flag("-q,--quiet", a->quiet, "No check table");
  cmd->callback([a] {
    const planner::Topology t = planner::load_topology(a->topology);
    simulator::Samples s;
    std::string files;
    if (a->fit.empty() && !a->measure && a->timelines.empty())
      throw planner::InputError("calibrate: give --fit CSV..., --measure, --timeline FILE..., or several");
    if (a->measure) {
      int n = a->ranks;
      if (n == 0) n = executor::local_gpu_count();
      const executor::LaunchEnv env = executor::launch_env_from_process();
      if (env.multi_process() && a->ranks == 0) n = env.size;  // a process a rank: the launch's ranks
      const auto m = measure_fabric(n, a->warmup, a->iters, !a->one_comm, env.rank == 0);
      if (env.rank != 0) return;  // under a launcher rank 0 fits and writes; the others only took part
      add_samples(m, &s);
      if (!a->csv.empty()) write_output(a->csv, [&](std::ostream& o) { executor::write_steps_csv(o, m); });
      files = "NCCL steps measured on " + std::to_string(n) + " GPUs";
    }
    for (size_t i = 0; i < a->fit.size(); ++i) {
      const std::string& f = a->fit[i];
      simulator::Samples one = simulator::read_samples_csv(planner::read_text_file(f, "measurement file"), f);
      for (auto& k : one.kernel) k.source = int(i);
      s.comm.insert(s.comm.end(), one.comm.begin(), one.comm.end());
      s.kernel.insert(s.kernel.end(), one.kernel.begin(), one.kernel.end());
      files += (files.empty() ? "" : " ") + f;
    }
    simulator::Profile base = choose_profile(a->base, t, nullptr);
    std::vector<planner::Timeline> tls;
    for (const auto& f : a->timelines) {
      tls.push_back(planner::read_timeline_file(f));
      if (tls.back().source == "simulated") throw planner::InputError(f + ": a simulated timeline (give measured ones)");
    }
    // The backward's dQ finish first: the kernel fit takes it out of the backward samples.
    base.compute.elementwise_gbps = simulator::fit_elementwise_gbps(tls, base.compute);
    const simulator::Network net = simulator::build_network(t, base.link_efficiency);
    std::vector<simulator::FitCheck> checks;
    simulator::Profile p = simulator::fit_profile(s, base, net, &checks);
    if (!tls.empty()) {
      p.executor = simulator::fit_executor(tls, p.executor);
      // The same runs simulated without the overlap term give the kernel times NCCL's share is measured against.
      std::vector<std::pair<planner::Timeline, planner::Timeline>> pairs;
      simulator::Profile no_share = p;
      no_share.executor.comm_compute_share = 0;
      for (auto& m : tls) {
        const planner::Topology mt = planner::load_topology(m.topology);
        planner::Workload w = planner::parse_workload(m.workload);
        simulator::SimOptions so;
        if (!planner::parse_passes(m.pass, &so.passes)) throw planner::InputError("timeline: unknown pass '" + m.pass + "'");
        const planner::Plan plan = planner::build_plan(mt, m.scheme, plan_options(m.scheme, w));
        pairs.push_back({m, simulator::simulate(plan, mt, w, no_share, so).timeline});
      }
      p.executor.comm_compute_share = simulator::fit_comm_compute_share(pairs, p.executor.comm_compute_share);
      files += (files.empty() ? "" : ", ") + std::to_string(tls.size()) + " measured timelines";
      std::cerr << "calibrate: executor from " << tls.size() << " timelines: forward start " << p.executor.fwd_start_us
                << " us, backward start " << p.executor.bwd_start_us << " us, step gap " << p.executor.step_gap_us
                << " us, kernel share lost to NCCL beside it " << p.executor.comm_compute_share << ", dQ finish at "
                << p.compute.elementwise_gbps << " GB/s\n";
    }
    p.name = a->name.empty() ? t.name : a->name;
    p.description = a->description.empty() ? "fitted by tasp calibrate from " + files + " on " + t.name : a->description;
    write_output(a->out, [&](std::ostream& o) { simulator::write_profile_yaml(o, p); });
    if (a->quiet) return;
    std::ostream& o = a->out.empty() || a->out == "-" ? std::cerr : std::cout;
    o << "#  " << std::left << std::setw(52) << "measurement" << std::right << std::setw(12) << "measured ms"
      << std::setw(13) << "predicted ms" << std::setw(9) << "error\n";
    std::vector<double> errs;
    for (const auto& c : checks) {
      errs.push_back(std::abs(c.error()));
      o << "   " << std::left << std::setw(52) << c.what << std::right << std::fixed << std::setprecision(4)
        << std::setw(12) << c.measured_us / 1e3 << std::setw(13) << c.predicted_us / 1e3 << std::setw(8)
        << std::setprecision(1) << 100 * c.error() << "%\n";
    }
    std::sort(errs.begin(), errs.end());
    if (!errs.empty())
      o << "# " << errs.size() << " samples: median |error| " << std::setprecision(1) << 100 * errs[errs.size() / 2]
        << "%, max " << 100 * errs.back() << "%\n";
  });
}

}  // namespace tasp::cli
