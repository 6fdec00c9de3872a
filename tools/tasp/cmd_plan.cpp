// tasp plan / tasp verify
#include <algorithm>
#include <vector>
#include <iomanip>
#include <iostream>

#include "planner/plan_io.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/verify_plan.hpp"
#include "planner/workload_catalogue.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"
#include "tools/tasp/plan_auto.hpp"
#include "tools/tasp/progress.hpp"

namespace tasp::cli {
namespace {

using namespace tasp::planner;

void print_summary(std::ostream& o, const Plan& p, const Topology& t) {
  Digraph g = rank_digraph(t);
  const long topo_arcs = g.arc_count();
  o << "plan: " << p.scheme << " on " << t.name << " ("
    << (p.ulysses > 1 ? std::to_string(p.ranks) + " groups of " + std::to_string(p.ulysses) + " GPUs" : std::to_string(p.ranks) + " ranks") << ", " << (p.causal ? "causal" : "full")
    << ", layout " << layout_name(p.layout) << ", " << p.pieces_per_rank << " piece(s) per rank, " << p.num_steps()
    << " steps" << (p.compact() ? ", compact" : "") << ")\n";
  if (!p.note.empty()) o << "  how: " << p.note << "\n";
  if (p.ulysses > 1)
    o << "  all-to-alls inside each group of " << p.ulysses << ": Q, K, V in before step 0, the output back after the last\n"
      << "  (backward: dO in, dQ, dK, dV out); the steps below run once per slot, between same-slot GPUs"
      << (p.head_groups > 1 ? ",\n  and once per head group (" + std::to_string(p.head_groups) +
                                  "), each group's all-to-alls beside the previous group's attention"
                            : "")
      << "\n";
  o << "  rings: " << p.rings.size() << "\n";
  const size_t show = std::min<size_t>(p.rings.size(), 8);
  for (size_t i = 0; i < show; ++i) {
    o << "    ring " << i << ":";
    const auto& r = p.rings[i];
    for (size_t k = 0; k < std::min<size_t>(r.size(), 24); ++k) o << " " << r[k];
    if (r.size() > 24) o << " ...";
    o << "\n";
  }
  if (p.rings.size() > show) o << "    ... " << p.rings.size() - show << " more\n";
  for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
    if (pass == Pass::Bwd && !p.has_backward) continue;
    if (pass == Pass::Bwd)
      o << "  backward: " << p.num_steps(pass) << " steps, dK/dV accumulators in " << (p.accumulator_bytes == 2 ? "bf16" : "fp32")
        << (p.backward.keeps_kv ? ", the forward's K/V kept (not gathered again)" : "") << (p.compact(pass) ? ", compact" : "")
        << "\n";
    // Per-step arc usage: distinct directed pairs carrying data, against the topology's arcs.
    o << "  " << (pass == Pass::Fwd ? "fwd" : "bwd") << " step   transfers   accumulators   arcs used   of topology arcs\n";
    const int steps = p.num_steps(pass);
    for (int s = 0; s < steps; ++s) {
      if (steps > 12 && s == 5) {
        o << "  ...\n";
        s = steps - 4;
      }
      Step scratch;
      const Step& st = step_at(p, s, scratch, pass);
      // Distinct (src, dst) pairs through a bitmap, not a std::set: a step of K_1026* holds a million transfers.
      long grads = 0, arcs = 0;
      int top = 0;
      for (auto& x : st.transfers) top = std::max({top, x.src + 1, x.dst + 1});
      std::vector<char> seen(size_t(top) * size_t(top), 0);
      for (auto& x : st.transfers) {
        char& hit = seen[size_t(x.src) * size_t(top) + size_t(x.dst)];
        arcs += !hit, hit = 1, grads += x.grad;
      }
      o << "  " << std::setw(8) << s << std::setw(12) << long(st.transfers.size()) - grads << std::setw(15) << grads
        << std::setw(12) << arcs << std::setw(16) << std::fixed << std::setprecision(1)
        << (topo_arcs ? 100.0 * double(arcs) / double(topo_arcs) : 0.0) << " %\n";
    }
  }
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Build an exchange plan (tasp-plan/1) for a topology and scheme");
  struct Args {
    std::string topology = "complete:8", scheme = "hamilton", format = "json", out, layout, workload, config, profile, docs;
    std::string pass = "fwd+bwd";
    bool causal = false, quiet = false, compact = false;
    CollectivesFlags collectives;
    int expand_max = 128;
    double max_memory_gib = 8;
    PlanChoices head;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-t,--topology", a->topology, "Topology: YAML file or complete:N, mesh:N, cluster:UxM, torus:AxB")->capture_default_str();
  cmd->add_option("-s,--scheme", a->scheme, "ring | zigzag | allgather | hamilton | two-level | ulysses | usp | auto (ask the simulator)")->capture_default_str();
  cmd->add_flag("--causal", a->causal, "Causal attention (default layout becomes zigzag)");
  cmd->add_option("--layout", a->layout,
                  "contiguous | zigzag | zigzag-docs (zigzag within every document; needs -w) (default: zigzag when causal)");
  cmd->add_option("-f,--format", a->format, "json | yaml")->capture_default_str();
  cmd->add_option("-o,--output", a->out, "Write the plan here (default: stdout, summary to stderr)");
  cmd->add_option("--expand-max-ranks", a->expand_max, "Expand steps up to this many ranks, compact above")->capture_default_str();
  cmd->add_flag("--compact", a->compact, "Always write the compact form (rings + schedule rule)");
  cmd->add_option("--pass", a->pass, "fwd | fwd+bwd: also plan the backward (K/V again, dK/dV accumulators back to their owners)")
      ->capture_default_str();
  cmd->add_option("-w,--workload", a->workload,
                  "B=..,S=..,H=..,Hkv=..,D=..[,causal][,window=L[:R]][,docs=L1+L2+..] (with --config: overrides): --scheme\n"
                  "auto simulates it; with documents or a window the plan is pruned for that mask (S, window, docs)");
  cmd->add_option("-c,--config", a->config, "A named workload (tasp configs), as -w");
  add_docs_option(cmd, a->docs);
  cmd->add_option("--profile", a->profile, "For --scheme auto: machine profile YAML");
  cmd->add_option("--max-memory", a->max_memory_gib, "GiB a plan may take to build (complete:N needs about 5 N^2 bytes)")
      ->capture_default_str();
  add_plan_choices(cmd, a->head);
  add_collectives_flags(cmd, a->collectives);  // for --scheme auto: allgather timed as tasp run will run it
  cmd->add_flag("-q,--quiet", a->quiet, "No human summary");
  cmd->callback([a] {
    if (a->format != "json" && a->format != "yaml") throw InputError("--format: expected json or yaml, got '" + a->format + "'");
    Topology t = load_topology(a->topology);
    PlanOptions o;
    o.causal = a->causal;
    o.ulysses = a->head.ulysses, o.inner = a->head.inner == "auto" ? "hamilton" : a->head.inner;
    o.head_groups = std::max(1, a->head.head_groups);
    o.expand_max_ranks = a->compact ? 0 : a->expand_max;
    if (!(a->max_memory_gib > 0)) throw InputError("--max-memory: must be positive");
    o.max_bytes = a->max_memory_gib * (1 << 30);
    Passes passes;
    if (!parse_passes(a->pass, &passes)) throw InputError("--pass: expected fwd or fwd+bwd, got '" + a->pass + "'");
    if (!passes.fwd) throw InputError("--pass: a plan always holds the forward (the backward needs its output): use fwd+bwd");
    o.backward = passes.bwd;
    o.accumulator_bytes = simulator::accumulator_bytes_of(a->head.accumulator);
    o.prune_plain = a->head.prune_plain || a->head.move_queries;
    o.move_queries = a->head.move_queries;
    simulator::set_gather_pieces(a->head, true, o);
    o.memory_budget_bytes = a->head.memory_budget_gib * double(1 << 30);
    if (!a->layout.empty()) {
      if (!parse_layout(a->layout, &o.layout)) throw InputError("--layout: expected contiguous, zigzag or zigzag-docs");
      o.layout_given = true;
    }
    std::string scheme = a->scheme;
    if (scheme == "auto") {
      scheme = choose_scheme_auto(t, a->config, a->workload, choose_profile(a->profile, t, &std::cerr), passes, &o, std::cerr, a->collectives.choice());
    } else if (!a->workload.empty() || !a->config.empty() || !a->docs.empty()) {
      // A workload with documents or a window: the plan is pruned for its mask.
      o.workload = workload_from(a->config, a->workload, a->docs);
      o.causal = o.workload.causal;
    }
    Plan p = build_plan(t, scheme, o);
    if (a->head.head_groups == 0 && p.ulysses > 1 && a->scheme != "auto" && (!a->workload.empty() || !a->config.empty())) {
      simulator::SimOptions so;
      so.passes = passes;
      std::cerr << "plan: " << choose_head_groups(p, t, o.workload, choose_profile(a->profile, t, &std::cerr), so) << "\n";
    }
    const std::string err = verify_plan(p, nullptr);
    if (!err.empty()) throw std::logic_error("planner produced an invalid plan: " + err);
    Progress progress("writing the plan: step");
    auto report = [&](int done, int total) { progress.update(done + 1, total); };
    write_output(a->out, [&](std::ostream& os) {
      if (a->format == "json") write_plan_json(os, p, report);
      else write_plan_yaml(os, p, report);
    });
    if (!a->quiet) print_summary(a->out.empty() || a->out == "-" ? std::cerr : std::cout, p, t);
  });
}

void register_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "Replay a plan and check it: exit 0 if valid, 1 with the first violation");
  auto plan = std::make_shared<std::string>();
  auto topo = std::make_shared<std::string>();
  cmd->add_option("plan", *plan, "Plan file (JSON, or YAML by extension)")->required();
  cmd->add_option("-t,--topology", *topo, "Also check every transfer against this topology's links");
  auto pass = std::make_shared<std::string>();
  cmd->add_option("--pass", *pass, "fwd | bwd | fwd+bwd (default: every pass the plan holds)");
  cmd->callback([plan, topo, pass] {
    Passes want;
    if (!pass->empty() && !parse_passes(*pass, &want)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + *pass + "'");
    Plan p = read_plan_file(*plan);
    if (pass->empty()) want = {true, p.has_backward};
    if (want.bwd && !p.has_backward)
      throw InputError(*plan + ": backward: the plan has no backward part (plan it with tasp plan --pass fwd+bwd)");
    Digraph g;
    const Digraph* arcs = nullptr;
    if (!topo->empty()) {
      g = rank_digraph(load_topology(*topo));
      if (g.n != p.gpus())
        throw InputError(*plan + ": ranks: the plan has " + std::to_string(p.gpus()) + " GPUs, topology " + *topo + " has " +
                         std::to_string(g.n));
      arcs = &g;
    }
    PlanStats st;
    const std::string err = verify_plan(p, arcs, &st, false, want.bwd);
    if (!err.empty()) throw Exit(kCheckFailed, "verify: " + *plan + ": " + err);
    std::cout << "ok: " << *plan << ": " << p.scheme << ", " << p.gpus() << " GPUs; fwd: " << st.steps << " steps, "
              << st.transfers << " transfers, " << st.computes << " blocks, busiest step uses " << st.max_arcs_per_step << " arcs";
    if (want.bwd) {
      const PassStats& b = st.backward;
      std::cout << "; bwd: " << b.steps << " steps, " << b.transfers << " K/V + " << b.grad_transfers
                << " accumulator transfers, " << b.computes << " blocks, every accumulator back at its owner";
    }
    std::cout << "\n";
  });
}

}  // namespace tasp::cli
