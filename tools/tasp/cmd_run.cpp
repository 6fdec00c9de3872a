// tasp run: execute a plan on a backend (cpu now; cuda on GPU machines), check it, write its timeline.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <optional>

#include "executor/run.hpp"
#include "planner/collective.hpp"
#include "planner/rank_memory.hpp"
#include <nlohmann/json.hpp>
#include "planner/minimum_bytes.hpp"
#include "planner/plan_io.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/workload_catalogue.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"
#include "tools/tasp/plan_auto.hpp"
#include "tools/tasp/measure_fabric.hpp"
#include "executor/launch_env.hpp"
#include "simulator/network.hpp"
#include "tools/tasp/progress.hpp"

namespace tasp::cli {

namespace {

// `base` with its comm fitted to the fabric's NCCL steps, measured now on the plan's GPUs (its kernels and executor
// terms kept; under a launcher by every rank together), the steps written to `csv` where given.
simulator::CommRefit fit_to_fabric_now(const simulator::Profile& base, const planner::Topology& topo, bool per_root,
                                     const std::string& csv) {
  const auto m = measure_fabric(topo.ranks(), 2, 5, per_root, false);  // compare.sh's calibrate: 5 timed, 2 untimed
  simulator::Samples s;
  add_samples(m, &s);
  simulator::CommRefit r = simulator::refit_comm(s.comm, base, simulator::build_network(topo, base.link_efficiency));
  if (executor::launch_env_from_process().rank != 0) return r;  // under a launcher: the same figures on every rank
  if (!csv.empty()) write_output(csv, [&](std::ostream& o) { executor::write_steps_csv(o, m); });
  std::cerr << "run: " << m.size() << " NCCL steps measured before the run: " << r.profile.name;
  if (r.median_ratio > 0)
    std::cerr << " (its steps of 16 MiB and more at " << std::fixed << std::setprecision(2) << r.median_ratio << "x the time "
              << base.name << " gives them, median; " << r.min_ratio << "-" << r.max_ratio << "x)" << std::defaultfloat;
  std::cerr << "\n";
  return r;
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a plan and measure it; --check compares with single-rank fp64 attention");
  struct Args {
    std::string backend = "cpu", plan, topology, scheme = "hamilton", workload, config, precision = "fp64", timeline, trace, docs;
    std::string pass = "fwd+bwd", json, a2a = "alltoall";
    bool check = false, no_verify = false, steps = false, speedup = false, deterministic = false;
    CollectivesFlags collectives;
    bool root_comms = false, one_comm = false, measure_fabric = false;
    std::string fabric_csv;
    unsigned seed = 1;
    int iters = 20, warmup = 5, timeout = 120;
    double heat_ms = 0;
    PlanChoices head;
    std::string profile;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-b,--backend", a->backend, "cpu | cuda")->capture_default_str();
  cmd->add_option("--profile", a->profile, "Machine profile YAML for the choices made by simulating (--head-groups 0, --heat-ms)\n"
                                           "(default: the built-in one for the topology)");
  cmd->add_option("-p,--plan", a->plan, "Plan file (tasp-plan/1); or give --topology and --scheme");
  cmd->add_option("-t,--topology", a->topology, "Build the plan on the fly for this topology");
  cmd->add_option("-s,--scheme", a->scheme, "Scheme for --topology, or auto: the one the simulator times fastest with\n"
                  "--profile (as `tasp plan --scheme auto`; needs --workload or --config)")->capture_default_str();
  add_plan_choices(cmd, a->head);
  cmd->add_option("-w,--workload", a->workload, "B=..,S=..,H=..,Hkv=..,D=..[,causal][,fp16][,window=L[:R]][,docs=L1+L2+..] (with --config: overrides)");
  cmd->add_option("-c,--config", a->config, "A named workload (tasp configs lists them)");
  add_docs_option(cmd, a->docs);
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
  cmd->add_option("--heat-ms", a->heat_ms, "cuda: untimed runs for at least this long first (by the predicted time of a run), so\n"
                                          "that the GPUs time at the clock they settle to under the power limit, as in training")
      ->capture_default_str();
  cmd->add_option("--a2a", a->a2a, "cuda, head-parallel plans (ulysses, usp): the all-to-alls as alltoall (one ncclAlltoAll\n"
                                   "inside each group) or sendrecv (grouped ncclSend/ncclRecv)")->capture_default_str();
  cmd->add_option("--timeout", a->timeout, "cuda: seconds before a run that does not finish is ended")->capture_default_str();
  cmd->add_flag("--deterministic", a->deterministic, "cuda: the backward's dQ bit-identical run to run (its CTAs add into each dQ\n"
                                                  "tile in launch order instead of as they finish; dK, dV and the forward always are;\n"
                                                  "the cpu backend always is)");
  add_collectives_flags(cmd, a->collectives);  // cuda
  auto* roots = cmd->add_flag("--root-comms", a->root_comms,
                              "cuda, with collectives: each rank's pieces leave as one broadcast and its dK/dV return as\n"
                              "one reduce, every rank's on a NCCL communicator and stream of its own, instead of one\n"
                              "all-gather or reduce-scatter (default: as the profile's collectives were measured,\n"
                              "collectives_per_root; faster over loopback sockets and host memory)");
  cmd->add_flag("--one-comm", a->one_comm, "cuda, with collectives: one all-gather or reduce-scatter on the plan's communicator")
      ->excludes(roots);
  auto* measure = cmd->add_flag(
      "--measure-fabric", a->measure_fabric,
      "cuda: first measure the fabric's NCCL steps (as `tasp calibrate --measure`; under\n"
      "mpirun or srun every rank together; about 20 s over loopback sockets) and refit\n"
      "--profile's comm to them, so that the run's choices, prediction and bound read the\n"
      "fabric's rate of the minute it runs in (loopback sockets' steps ran 1.1-1.3x apart,\n"
      "both ways, between a call's first minute and its runs)");
  cmd->add_option("--fabric-csv", a->fabric_csv, "--measure-fabric: also write the measured steps here\n"
                                                 "(tasp calibrate --fit reads them)")
      ->needs(measure);
  cmd->add_flag("--speedup", a->speedup, "cuda: also time the whole problem on one GPU (same kernels): speedup, parallel efficiency");
  cmd->add_option("--json", a->json, "Write the results (times, tokens/s, memory, speedup, checks) as JSON here");
  cmd->add_flag("--steps", a->steps, "Print the per-step table (slowest rank per step; cuda: each step's end beside the one the\n"
                                     "simulator predicts with the run's profile, whose total every cuda run prints)");
  cmd->add_option("--timeline", a->timeline, "Write tasp-timeline/1 JSON here");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) here");
  cmd->callback([a] {
    using namespace tasp::planner;
    Workload w = workload_from(a->config, a->workload, a->docs);
    Passes passes;
    if (!parse_passes(a->pass, &passes)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + a->pass + "'");
    if (a->measure_fabric && a->backend != "cuda") throw InputError("--measure-fabric: needs --backend cuda");
    if (const executor::LaunchEnv env = executor::launch_env_from_process();
        env.multi_process() && a->backend == "cuda" && executor::allowed_cpu_count() == 1)
      std::cerr << "run: rank " << env.rank << " is bound to one CPU core (" << env.launcher
                << "'s binding), which NCCL's proxy and socket threads share with it: over loopback sockets 1.29x the "
                   "time of `mpirun --bind-to none` (2x H200)\n";
    // The profile the run's choices, prediction and bound read, made once: --profile's (or the topology's), with its
    // comm refitted to NCCL steps measured here and now under --measure-fabric.
    std::optional<simulator::Profile> run_prof;
    std::optional<simulator::CommRefit> fabric_now;
    auto profile_for = [&](const Topology& topo) -> const simulator::Profile& {
      if (!run_prof) {
        run_prof = choose_profile(a->profile, topo, &std::cerr);
        if (a->measure_fabric) fabric_now = fit_to_fabric_now(*run_prof, topo, !a->one_comm, a->fabric_csv), run_prof = fabric_now->profile;
      }
      return *run_prof;
    };
    Plan p;
    if (!a->plan.empty()) {
      p = read_plan_file(a->plan);
    } else if (!a->topology.empty()) {
      const Topology topo = load_topology(a->topology);
      // auto: the scheme (and its pieces, head groups, layout) the simulator times fastest, as `tasp plan --scheme auto`
      // picks it; the options start from allgather's, the one scheme whose piece flags all apply.
      std::string scheme = a->scheme;
      PlanOptions o = plan_options(scheme == "auto" ? "allgather" : scheme, w, a->head);
      if (scheme == "auto")
        scheme = choose_scheme_auto(topo, a->config, a->workload, profile_for(topo), passes, &o, std::cerr, a->collectives.choice());
      p = build_plan(topo, scheme, o);  // as simulate plans it
      simulator::SimOptions so;
      so.passes = passes;
      so.collectives = a->collectives.choice();
      const bool chosen = a->scheme == "auto";  // auto chose the head groups and pieces with the scheme
      if (!chosen && a->head.head_groups == 0 && p.ulysses > 1)
        std::cerr << "run: " << choose_head_groups(p, topo, w, profile_for(topo), so) << "\n";
      if (!chosen && a->head.choose_pieces() && p.scheme == "allgather" && simulator::misfit(p, w).empty())
        std::cerr << "run: " << choose_gather_pieces(p, topo, w, profile_for(topo), so, o) << "\n";
    } else {
      throw InputError("run: give --plan FILE, or --topology and --scheme");
    }
    // The machine the run's prediction and bound read: the topology given, or the plan's, and the profile for it.
    const Topology topo = load_topology(a->topology.empty() ? p.topology : a->topology);
    const simulator::Profile& prof = profile_for(topo);
    std::unique_ptr<executor::Backend> backend;
    bool collectives = false;  // allgather's steps as NCCL collectives (the cuda backend)
    bool root_comms = false;   // ... one a root (CudaOptions::root_comms)
    // The cuda backend's run as the simulator predicts it with the run's profile: its total beside the measured one,
    // and with --steps each step's predicted end beside the measured (the comparison `tasp report` makes over many runs).
    std::optional<simulator::SimResult> predicted;
    std::string predicted_by;
    Progress progress("running: iteration");
    if (a->backend == "cpu") {
      backend = executor::make_cpu_backend(a->precision);
    } else if (a->backend == "cuda") {
      if (a->iters < 1 || a->warmup < 0 || a->timeout < 1 || !(a->heat_ms >= 0))
        throw InputError("--iters >= 1, --warmup >= 0, --timeout >= 1, --heat-ms >= 0");
      executor::CudaOptions co;
      co.iters = a->iters, co.warmup = a->warmup, co.timeout_s = a->timeout;
      if (a->a2a != "alltoall" && a->a2a != "sendrecv") throw InputError("--a2a: expected alltoall or sendrecv, got '" + a->a2a + "'");
      co.a2a = a->a2a;
      co.deterministic = a->deterministic;
      co.collectives = a->collectives.on;
      // Collectives one a root where asked, or where the profile measured them so (CommProfile::collectives_per_root).
      co.root_comms = a->root_comms || (!a->one_comm && prof.comm_for(p.ranks).collectives_per_root);
      // The prediction decides what the flags leave open (collectives or send/recv) and how many untimed runs fill the
      // heating time.
      {
        simulator::SimOptions so;
        so.passes = passes;
        so.collectives = a->collectives.choice();
        predicted = simulator::simulate(p, topo, w, prof, so);
        predicted_by = prof.name;
        co.collectives = a->collectives.on || predicted->collectives;  // forced, or what the profile times faster
        if (a->heat_ms > 0 && predicted->total_us > 0)
          co.warmup = std::max(co.warmup, int(std::min(1e5, std::ceil(a->heat_ms * 1e3 / predicted->total_us))));
      }
      // What the run does, not what was asked: a ring's steps are never collectives (its line said so, 2026-11-26).
      collectives = co.collectives && planner::collectives_apply(p);
      root_comms = collectives && co.root_comms && p.ulysses <= 1;
      co.progress = [&](int done, int total) { progress.update(done, total); };
      backend = executor::make_cuda_backend(co);
    } else {
      throw InputError("--backend: expected cpu or cuda, got '" + a->backend + "'");
    }
    executor::RunOptions ro;
    ro.verify = !a->no_verify;
    ro.check = a->check;
    ro.seed = a->seed;
    ro.passes = passes;
    ro.speedup = a->speedup;
    ro.warmup = a->warmup, ro.iters = std::min(a->iters, 10);
    ro.host_memory_bytes = physical_memory_bytes();
    executor::RunReport rep = executor::run_plan(*backend, p, w, ro);
    if (!rep.result.reporter) return;  // a multi-process run reports on rank 0
    Timeline& t = rep.result.timeline;
    t.topology = p.topology;
    std::cout << "run: " << p.scheme
              << (p.scheme == "allgather" ? " in " + std::to_string(p.pieces_per_rank) + " pieces a rank" : std::string())
              << (p.gather_steps.empty() ? std::string() : " (gathered in steps of " + gather_steps_text(p.gather_steps) + ")")
              << (p.pieces_by_chunk ? ", pruned for the causal mask (pieces by chunk)" : "")
              << (p.query_moves.empty() ? "" : ", rank 0's late chunk's queries moved to rank 1")
              << " on " << p.gpus() << " ranks, backend " << backend->name() << ", workload "
              << to_string(w) << ", pass " << passes_name(passes) << "\n";
    std::cout << std::fixed << std::setprecision(1) << "  total " << t.total_us() << " us, comm " << t.comm_us()
              << " us, compute " << t.compute_us() << " us, exposed comm " << t.exposed_comm_us() << " us\n";
    if (!rep.result.iteration_totals_us.empty()) {
      const auto& v = rep.result.iteration_totals_us;
      std::cout << "  " << v.size() << " timed runs: min " << v.front() << " us, median " << v[v.size() / 2] << " us, max "
                << v.back() << " us (the median run's timeline is reported)\n";
    }
    std::cout << "  " << std::setprecision(0) << rep.tokens_per_s << " tokens/s";
    const double predicted_mem = planner::peak_rank_memory(p, w, passes, collectives).total();
    if (rep.result.device_bytes > 0)
      std::cout << std::setprecision(2) << "; GPU memory per rank: " << rep.result.device_bytes / (1 << 30)
                << " GiB of tasp buffers (predicted " << predicted_mem / (1 << 30) << "), " << rep.result.device_used_bytes / (1 << 30)
                << " GiB in use with NCCL's";
    std::cout << "\n";
    if (rep.single_device_us > 0)
      std::cout << std::setprecision(1) << "  one GPU (same kernels, whole problem): " << rep.single_device_us << " us: speedup "
                << std::setprecision(2) << rep.single_device_us / t.total_us() << "x on " << p.gpus()
                << " GPUs, parallel efficiency " << std::setprecision(0) << 100 * rep.single_device_us / t.total_us() / p.gpus()
                << "%\n";
    // Bytes a GPU sends per pass (the busiest), from the timeline's steps.
    const Timeline::PassBytes sent = t.busiest_sent();
    const double pass_bytes[2] = {sent.fwd, sent.bwd};
    // The run's bound (planner::run_bound): its kernels alone (the slowest rank's summed compute) or its busiest GPU's
    // bytes at the fastest rate the profile measured on this many GPUs, whichever is longer, pass by pass and over the
    // whole run; the time above against it says how much of the exchange stayed exposed.
    const RunBound bound = [&] {
      const bool reduces_only = collectives && p.has_backward && p.backward.keeps_kv;  // allgather's backward on kept K/V
      // A shared medium (host memory: a root's broadcast measured alone, CommProfile::one_root_gbps): a GPU alone at
      // that rate, all of them together at the peak's.
      const double alone = collectives ? prof.comm_for(p.gpus()).one_root_peak_gbps(p.gpus()) : 0;
      return run_bound(t, prof.peak_send_gbps(p.gpus(), collectives), prof.peak_send_gbps(p.gpus(), collectives, reduces_only),
                       alone);
    }();
    if (a->backend == "cuda" && bound.per_pass_us > 0)
      std::cout << std::setprecision(1) << "  bound: each pass's max(kernels, bytes at the profile's peak), summed = "
                << bound.per_pass_us << " us; the run at " << std::setprecision(2) << t.total_us() / bound.per_pass_us
                << "x of it (over the whole run, max(kernels " << std::setprecision(1) << bound.kernels_us << " us, bytes "
                << bound.bytes_us << " us): " << std::setprecision(2) << t.total_us() / bound.whole_us << "x)\n";
    if (predicted && predicted->total_us > 0)
      std::cout << std::setprecision(1) << "  predicted by profile " << predicted_by << ": " << predicted->total_us
                << " us; the run at " << std::setprecision(2) << t.total_us() / predicted->total_us << "x of it\n";
    std::cout << std::setprecision(2) << "  sent per GPU: fwd " << pass_bytes[0] / (1 << 20) << " MiB";
    if (passes.bwd) std::cout << ", bwd " << pass_bytes[1] / (1 << 20) << " MiB";
    // The fewest for its kind of exchange (the cpu backend moves everything at its arithmetic's width).
    const int width = a->backend == "cpu" ? (a->precision == "fp64" ? 8 : 4) : 0;
    const auto least = planner::minimum_sent_bytes(p, w, width);
    if (least && pass_bytes[0] + pass_bytes[1] > 0) {  // (the cpu backend's head-parallel runs record no bytes)
      std::cout << " (fewest: fwd " << least->fwd / (1 << 20) << " MiB";
      if (passes.bwd) std::cout << ", bwd " << least->bwd / (1 << 20) << " MiB";
      std::cout << ")";
    }
    std::cout << (p.ulysses > 1 ? " (head groups " + std::to_string(p.head_groups) + ")" : "")
              << (p.has_backward && passes.bwd ? std::string(", accumulators in ") + (p.accumulator_bytes == 2 ? "bf16" : "fp32") +
                                                     (p.backward.keeps_kv ? ", the forward's K/V kept" : "")
                                               : "")
              << (collectives ? ", gathers and reduce-scatters as NCCL collectives" : "")
              << (root_comms ? " (one a root, each on its own communicator)" : "") << "\n";
    if (a->steps) write_steps_table(std::cout, t, predicted ? &predicted->timeline : nullptr, passes.fwd);
    if (!a->timeline.empty()) write_output(a->timeline, [&](std::ostream& o) { write_timeline_json(o, t); });
    if (!a->trace.empty()) write_output(a->trace, [&](std::ostream& o) { write_chrome_trace(o, t); });
    const double tol = a->backend == "cuda" ? 1e-2 : a->precision == "fp64" ? 1e-10 : 1e-5;
    const bool ok = rep.max_rel_err() < tol;
    if (!a->json.empty())
      write_output(a->json, [&](std::ostream& o) {
        nlohmann::json j = {{"format", "tasp-run/1"}, {"scheme", p.scheme}, {"ranks", p.gpus()}, {"backend", backend->name()},
                            {"workload", to_string(w)}, {"pass", passes_name(passes)}, {"total_us", t.total_us()},
                            {"comm_us", t.comm_us()}, {"compute_us", t.compute_us()}, {"exposed_comm_us", t.exposed_comm_us()},
                            {"iteration_totals_us", rep.result.iteration_totals_us}, {"tokens_per_s", rep.tokens_per_s},
                            {"predicted_memory_bytes_per_rank", predicted_mem}};
        if (!w.config.empty()) j["config"] = w.config;
        j["sent_bytes_per_gpu"] = {{"fwd", pass_bytes[0]}, {"bwd", pass_bytes[1]}};
        if (least) j["fewest_sent_bytes_per_gpu"] = {{"fwd", least->fwd}, {"bwd", least->bwd}};
        j["bound_us"] = {{"kernels", bound.kernels_us}, {"bytes", bound.bytes_us}, {"bound", bound.whole_us},
                         {"per_pass", bound.per_pass_us}};
        if (predicted) j["predicted_us"] = predicted->total_us, j["predicted_by"] = predicted_by;
        if (fabric_now)  // --measure-fabric: this minute's steps of 16 MiB and more over the base profile's times
          j["fabric_now_over_profile"] = {{"median", fabric_now->median_ratio}, {"min", fabric_now->min_ratio}, {"max", fabric_now->max_ratio}};
        if (p.ulysses > 1) j["head_groups"] = p.head_groups;
        if (planner::collectives_apply(p) && a->backend == "cuda") j["collectives"] = collectives, j["root_comms"] = root_comms;
        if (p.has_backward) j["accumulator"] = p.accumulator_bytes == 2 ? "bf16" : "fp32", j["keeps_kv"] = p.backward.keeps_kv;
        if (rep.result.device_bytes > 0)
          j["device_bytes_per_rank"] = rep.result.device_bytes, j["device_used_bytes"] = rep.result.device_used_bytes;
        if (rep.single_device_us > 0) {
          j["single_device_us"] = rep.single_device_us;
          j["speedup"] = rep.single_device_us / t.total_us();
          j["parallel_efficiency"] = rep.single_device_us / t.total_us() / p.gpus();
        }
        if (rep.checked) {
          j["reference"] = rep.reference, j["tolerance"] = tol, j["check_passed"] = ok;
          for (const auto& c : rep.checks) j["checks"].push_back({{"name", c.name}, {"rel_err", c.rel_err}, {"cosine", c.cosine}});
        }
        o << j.dump(1) << "\n";
      });
    if (rep.checked) {
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
