// tasp simulate: predicted time, communication, computation and exposed communication per scheme.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "planner/collective.hpp"
#include "planner/minimum_bytes.hpp"
#include "planner/plan_io.hpp"
#include "planner/timeline.hpp"
#include "planner/verify_plan.hpp"
#include "planner/workload_catalogue.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"
#include "tools/tasp/progress.hpp"

namespace tasp::cli {
namespace {

using namespace tasp::planner;
using simulator::SimResult;

struct Args {
  std::string topology = "h200-hgx-8", workload, config, schemes = "all", docs;
  std::string plan, profile, timeline, trace, json, sweep, out, pass = "fwd+bwd", clock = "sustained";
  bool quiet = false, framework = false;
  CollectivesFlags collectives;
  PlanChoices head;
};

std::string ms(double us, int prec = 3) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << us / 1e3;
  return o.str();
}

std::string ratio(double x) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << x << "x";
  return o.str();
}

void print_table(std::ostream& o, const std::vector<SchemeRun>& runs, const std::vector<Skipped>& skipped,
                 const Topology& t, const Workload& w, const simulator::Profile& prof, Passes passes) {
  o << "# tasp simulate: " << t.name << " (" << t.ranks() << " GPUs), " << to_string(w)
    << (w.config.empty() ? "" : " (" + w.config + ")") << ", pass " << passes_name(passes) << ", profile " << prof.name
    << "\n#\n";
  const SchemeRun* ring = nullptr;
  for (const auto& r : runs)
    if (r.scheme == "ring") ring = &r;
  const bool both = passes.fwd && passes.bwd;
  o << "#  " << std::left << std::setw(11) << "scheme" << std::right << std::setw(11) << "total ms";
  if (both) o << std::setw(10) << "fwd ms" << std::setw(10) << "bwd ms";
  o << std::setw(10) << "comm ms" << std::setw(11) << "compute ms" << std::setw(11) << "exposed ms" << std::setw(6) << "CCR"
    << std::setw(9) << "vs ring" << std::setw(10) << "vs 1 GPU" << std::setw(9) << "par eff" << std::setw(9) << "Mtok/s"
    << std::setw(10) << "GiB/rank" << std::setw(7) << "eff" << std::setw(10) << "MiB/GPU" << std::setw(9) << "fewest" << "\n";
  for (const auto& r : runs) {
    const SimResult& s = r.sim;
    o << "   " << std::left << std::setw(11) << r.scheme << std::right << std::setw(11) << ms(s.total_us);
    if (both) o << std::setw(10) << ms(s.fwd_us) << std::setw(10) << ms(s.bwd_us);
    o << std::setw(10) << ms(s.comm_us) << std::setw(11) << ms(s.compute_us) << std::setw(11) << ms(s.exposed_comm_us)
      << std::setw(6) << std::fixed << std::setprecision(2) << s.ccr() << std::setw(9)
      << (ring ? ratio(ring->sim.total_us / s.total_us) : std::string("-")) << std::setw(10) << ratio(s.speedup())
      << std::setw(8) << std::setprecision(0) << 100 * s.parallel_efficiency(t.ranks()) << "%" << std::setw(9)
      << std::setprecision(3) << s.tokens_per_s / 1e6 << std::setw(10) << std::setprecision(2)
      << s.peak_memory_bytes / double(1 << 30) << std::setw(6) << std::setprecision(0) << 100 * s.efficiency() << "%"
      << std::setw(10) << std::setprecision(1) << (s.timeline.busiest_sent().fwd + s.timeline.busiest_sent().bwd) / (1 << 20);
    const auto least = planner::minimum_sent_bytes(r.plan, w);
    if (least) o << std::setw(9) << ((passes.fwd ? least->fwd : 0) + (passes.bwd ? least->bwd : 0)) / (1 << 20) << "\n";
    else o << std::setw(9) << "-" << "\n";
  }
  const auto& best = runs[fastest(runs)];
  o << "# fastest: " << best.scheme;
  if (ring) o << " (" << std::fixed << std::setprecision(2) << ring->sim.total_us / best.sim.total_us << "x over ring)";
  o << "\n# where its time goes: " << describe_terms(best.sim.terms) << " (ms)";
  o << "\n# comm/compute: slowest rank's sums; exposed = total - compute; vs 1 GPU: the whole problem's kernels on one\n"
       "# GPU over the total, par eff = that / GPUs; GiB/rank: the busiest rank's buffers (not NCCL's); eff = the\n"
       "# bound (bytes over the busiest port or node cut, FLOPs at peak) over the total; MiB/GPU: what the busiest GPU\n"
       "# sends (--json: per pass); fewest: the least a GPU can send for the scheme's kind of exchange under a plain\n"
       "# mask (planner/minimum_bytes.hpp; a pruned plan may send less).\n";
  for (const auto& k : skipped) o << "# " << k.scheme << ": left out: " << k.why << "\n";
  for (const auto& r : runs)
    if (!r.detail.empty()) o << "# " << r.scheme << ": " << r.detail << "\n";
  for (const auto& r : runs)
    if (r.sim.collectives) o << "# " << r.scheme << ": its gathers and reduce-scatters as NCCL collectives (--sendrecv: not)\n";
  for (const auto& r : runs)
    if (r.sim.lockstep_steps > 0)
      o << "# " << r.scheme << ": " << r.sim.lockstep_steps << " step(s) with over 2e6 flows x ranks: their flows start with the "
        << "last rank ready (slightly pessimistic).\n";
  if (passes.bwd) {
    const auto br = prof.compute.bwd_rate(w.D);
    o << "# backward: K/V again plus dK/dV accumulators (" << (runs.empty() || runs[0].plan.accumulator_bytes == 4 ? "fp32" : "bf16")
      << "), 2.5x the forward's FLOPs at " << std::fixed << std::setprecision(0) << br.full_tflops << "/" << br.causal_tflops
      << " TFLOP/s (full/causal), "
      << (br.estimated ? "estimated: the forward's rates x" + std::to_string(prof.compute.bwd_estimate).substr(0, 4) +
                             " (no measured backward kernel in this profile)"
                       : std::string("measured")) << ".\n";
  }
}

nlohmann::json to_json(const std::vector<SchemeRun>& runs, const std::vector<Skipped>& skipped, const Topology& t,
                       const Workload& w, const simulator::Profile& prof, Passes passes, const std::string& clock) {
  nlohmann::json j;
  j["format"] = "tasp-simulate/1";
  j["pass"] = passes_name(passes);
  if (passes.bwd) j["bwd_rate_estimated"] = prof.compute.bwd_rate(w.D).estimated;
  j["topology"] = t.name;
  j["ranks"] = t.ranks();
  j["workload"] = to_string(w);
  if (!w.config.empty()) j["config"] = w.config;
  j["profile"] = prof.name;
  j["clock"] = clock;
  j["fastest"] = runs[fastest(runs)].scheme;
  for (const auto& r : runs) {
    const SimResult& s = r.sim;
    j["schemes"].push_back({{"scheme", r.scheme}, {"total_us", s.total_us}, {"fwd_us", s.fwd_us}, {"bwd_us", s.bwd_us},
                            {"comm_us", s.comm_us},
                            {"compute_us", s.compute_us}, {"exposed_comm_us", s.exposed_comm_us}, {"ccr", s.ccr()},
                            {"bound_us", s.bound.us()}, {"bound_comm_us", s.bound.comm_us},
                            {"bound_compute_us", s.bound.compute_us}, {"efficiency", s.efficiency()},
                            {"max_rank_bytes", s.max_rank_bytes}, {"max_rank_flops", s.max_rank_flops},
                            {"tokens_per_s", s.tokens_per_s}, {"peak_memory_bytes", s.peak_memory_bytes},
                            {"single_gpu_us", s.single_gpu_us}, {"speedup_vs_1gpu", s.speedup()},
                            {"parallel_efficiency", s.parallel_efficiency(t.ranks())},
                            {"steps", r.plan.num_steps()}, {"rings", r.plan.rings.size()},
                            {"lockstep_steps", s.lockstep_steps}});
    if (r.plan.ulysses > 1) j["schemes"].back()["ulysses"] = r.plan.ulysses, j["schemes"].back()["head_groups"] = r.plan.head_groups;
    if (r.plan.has_backward)
      j["schemes"].back()["accumulator"] = r.plan.accumulator_bytes == 2 ? "bf16" : "fp32",
      j["schemes"].back()["keeps_kv"] = r.plan.backward.keeps_kv;
    if (!r.detail.empty()) j["schemes"].back()["detail"] = r.detail;
    if (planner::collectives_apply(r.plan)) j["schemes"].back()["collectives"] = s.collectives;
    const auto sent = s.timeline.busiest_sent();
    j["schemes"].back()["sent_bytes_per_gpu"] = {{"fwd", sent.fwd}, {"bwd", sent.bwd}};
    if (const auto least = planner::minimum_sent_bytes(r.plan, w))
      j["schemes"].back()["fewest_sent_bytes_per_gpu"] = {{"fwd", passes.fwd ? least->fwd : 0.0},
                                                         {"bwd", passes.bwd ? least->bwd : 0.0}};
    nlohmann::json terms;
    for (const auto& [k, v] : term_list(s.terms)) terms[k] = v;
    j["schemes"].back()["terms"] = terms;
  }
  for (const auto& k : skipped) j["left_out"].push_back({{"scheme", k.scheme}, {"why", k.why}});
  return j;
}

// "S=8k:1M": sequence lengths doubling from 8k to 1M.
std::vector<long> sweep_lengths(const std::string& spec) {
  auto bad = [&](const std::string& why) { return InputError("--sweep '" + spec + "': " + why + " (expected S=FROM:TO, e.g. S=8k:1M)"); };
  if (spec.rfind("S=", 0) != 0) throw bad("only S can be swept");
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw bad("missing ':'");
  const long a = parse_count(spec.substr(2, colon - 2)), b = parse_count(spec.substr(colon + 1));
  if (a <= 0 || b <= 0) throw bad("lengths must be positive integers");
  if (b < a) throw bad("TO is below FROM");
  std::vector<long> out;
  for (long s = a; s <= b; s *= 2) out.push_back(s);
  return out;
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Predict per-step communication, computation and their overlap for each scheme on a topology\n"
      "(flow-level network model + calibrated kernel rates), forward and backward. With no arguments: 8x H200,\n"
      "a Llama-3-8B-like layer at 128K tokens, causal, every scheme, fwd+bwd (a training step's attention).");
  auto a = std::make_shared<Args>();
  cmd->add_option("-t,--topology", a->topology, "YAML file, built-in name or complete:N, mesh:N, cluster:UxM, torus:AxB")->capture_default_str();
  cmd->add_option("-w,--workload", a->workload, "B=..,S=..,H=..,Hkv=..,D=..[,causal][,window=L[:R]][,docs=L1+..] (default: --config llama3-8b); with\n"
                                               "--config, keys that override the named workload's");
  cmd->add_option("-c,--config", a->config, "A named workload (tasp configs lists them)");
  add_docs_option(cmd, a->docs);
  cmd->add_option("-s,--schemes", a->schemes, "all | comma list of ring, zigzag, allgather, hamilton, two-level, ulysses, usp")->capture_default_str();
  add_plan_choices(cmd, a->head);
  cmd->add_option("--pass", a->pass, "fwd | bwd | fwd+bwd: which passes to simulate (the backward after the forward)")
      ->capture_default_str();
  cmd->add_option("--plan", a->plan, "Simulate this plan file instead of planning schemes");
  cmd->add_option("--profile", a->profile, "Machine profile YAML (default: the built-in one for the topology)");
  cmd->add_option("--clock", a->clock, "Kernel rates at the sustained clock of a GPU kept busy (training) or at the boost\n"
                                       "clock of a short burst (the profile's sustained fractions)")->capture_default_str();
  cmd->add_option("--timeline", a->timeline, "Write the tasp-timeline/1 of the fastest scheme (or --plan) here");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) of the same run here");
  cmd->add_option("--json", a->json, "Write the results as JSON here");
  cmd->add_option("--sweep", a->sweep, "S=FROM:TO: simulate doubling lengths, write CSV (speedup over ring, CCR)");
  cmd->add_option("-o,--output", a->out, "Where --sweep writes its CSV (default: stdout)");
  add_collectives_flags(cmd, a->collectives);  // collectives at the profile's collective rate, where it has one
  cmd->add_flag("--framework", a->framework,
                "run from a training framework (tasp.torch, the C ABI's ranks): count a rank's copies between the\n"
                "framework's tensors and tasp's layout (K/V staged, O and dK/dV cast)");
  cmd->add_flag("-q,--quiet", a->quiet, "No table");
  cmd->callback([a] {
    const Topology t = load_topology(a->topology);
    Workload w = workload_from(a->config.empty() && a->workload.empty() ? "llama3-8b" : a->config, a->workload, a->docs);
    const simulator::Profile prof = choose_profile(a->profile, t, &std::cerr);
    simulator::SimOptions opt;
    if (!parse_passes(a->pass, &opt.passes)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + a->pass + "'");
    const Passes passes = opt.passes;
    opt.clock = parse_clock(a->clock);
    opt.collectives = a->collectives.choice();
    opt.framework = a->framework;
    Progress progress("simulating: step");
    opt.progress = [&](int step, int steps) { progress.update(step + 1, steps); };
    std::vector<SchemeRun> runs;
    std::vector<Skipped> skipped;
    std::vector<Skipped>* skip = a->schemes == "all" ? &skipped : nullptr;
    if (!a->plan.empty()) {
      SchemeRun r;
      r.plan = read_plan_file(a->plan);
      r.scheme = r.plan.scheme;
      if (passes.bwd && !r.plan.has_backward)
        throw InputError(a->plan + ": backward: the plan has no backward part (tasp plan --pass fwd+bwd, or --pass fwd here)");
      const std::string err = verify_plan(r.plan, nullptr, nullptr, false, passes.bwd);
      if (!err.empty()) throw InputError(a->plan + ": not a valid plan: " + err);
      r.sim = simulator::simulate(r.plan, t, w, prof, opt);
      runs.push_back(std::move(r));
    } else if (!a->sweep.empty()) {
      const auto schemes = select_schemes(a->schemes, t, w.causal);
      write_output(a->out, [&](std::ostream& o) {
        o << "S,scheme,total_us,comm_us,compute_us,exposed_comm_us,ccr,speedup_vs_ring,efficiency,pass,fwd_us,bwd_us\n";
        for (long S : sweep_lengths(a->sweep)) {
          w.S = S;
          skipped.clear();
          auto rs = run_schemes(t, w, schemes, prof, opt, skip, a->head);
          double ring = 0;
          for (const auto& r : rs)
            if (r.scheme == "ring") ring = r.sim.total_us;
          for (const auto& r : rs)
            o << w.S << "," << r.scheme << "," << r.sim.total_us << "," << r.sim.comm_us << "," << r.sim.compute_us << ","
              << r.sim.exposed_comm_us << "," << r.sim.ccr() << "," << (ring > 0 ? ring / r.sim.total_us : 0.0) << ","
              << r.sim.efficiency() << "," << passes_name(passes) << "," << r.sim.fwd_us << "," << r.sim.bwd_us << "\n";
          progress.label("sweep: S=" + std::to_string(w.S) + ", step");
        }
      });
      return;
    } else {
      runs = run_schemes(t, w, select_schemes(a->schemes, t, w.causal), prof, opt, skip, a->head);
    }
    if (!a->quiet) print_table(std::cout, runs, skipped, t, w, prof, passes);
    const auto& best = runs[fastest(runs)];
    if (!a->json.empty()) write_output(a->json, [&](std::ostream& o) { o << to_json(runs, skipped, t, w, prof, passes, a->clock).dump(1) << "\n"; });
    if (!a->timeline.empty()) write_output(a->timeline, [&](std::ostream& o) { write_timeline_json(o, best.sim.timeline); });
    if (!a->trace.empty()) write_output(a->trace, [&](std::ostream& o) { write_chrome_trace(o, best.sim.timeline); });
  });
}

}  // namespace tasp::cli
