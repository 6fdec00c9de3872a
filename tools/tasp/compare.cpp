#include "tools/tasp/compare.hpp"

#include <iomanip>
#include <ostream>
#include <sstream>

#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"

namespace tasp::cli {

using namespace tasp::planner;

void add_head_options(CLI::App* cmd, HeadOptions& h) {
  cmd->add_option("--ulysses", h.ulysses, "usp: GPUs per head-parallel group (default: a node's GPUs)");
  cmd->add_option("--inner", h.inner, "usp: the scheme across groups: ring | zigzag | allgather | hamilton | two-level |\n"
                                      "auto (simulate and plan --scheme auto: the fastest; plan alone: hamilton)")
      ->capture_default_str();
}

PlanOptions plan_options(const std::string& scheme, const Workload& w, const HeadOptions& h) {
  PlanOptions o;
  o.causal = w.causal;
  o.ulysses = h.ulysses;
  o.inner = h.inner == "auto" ? "hamilton" : h.inner;
  if (h.ulysses < 0) throw InputError("--ulysses: must be a positive group size");
  if (scheme == "ring") o.layout_given = true, o.layout = Layout::Contiguous;
  return o;
}

std::vector<std::string> select_schemes(const std::string& list, const Topology& t, bool causal) {
  std::vector<std::string> out;
  if (list == "all") {
    for (const auto& s : scheme_names())
      if (scheme_applies(s, t, causal, nullptr) && (s != "usp" || t.nodes >= 2)) out.push_back(s);
    return out;
  }
  std::stringstream ss(list);
  std::string s;
  while (std::getline(ss, s, ',')) {
    std::string why;
    if (s.empty()) continue;
    if (!scheme_applies(s, t, causal, &why)) throw InputError("--schemes: " + s + ": " + why);
    out.push_back(s);
  }
  if (out.empty()) throw InputError("--schemes: no scheme named");
  return out;
}

simulator::Profile choose_profile(const std::string& path, const Topology& t, std::ostream* log) {
  if (!path.empty()) return simulator::load_profile(path);
  std::string chosen;
  simulator::Profile p = simulator::builtin_profile(t.name, &chosen);
  if (log && chosen != t.name)
    *log << "note: no profile for '" << t.name << "': using the built-in " << chosen << " profile (--profile to choose)\n";
  return p;
}

simulator::Clock parse_clock(const std::string& name) {
  if (name == "sustained") return simulator::Clock::Sustained;
  if (name == "boost") return simulator::Clock::Boost;
  throw InputError("--clock: expected sustained or boost, got '" + name + "'");
}

std::vector<std::pair<std::string, double>> term_list(const simulator::ModelTerms& t) {
  return {{"launch_us", t.launch_us},     {"math_us", t.math_us},         {"clock_us", t.clock_us},
          {"overlap_us", t.overlap_us},   {"accumulate_us", t.accumulate_us}, {"executor_us", t.executor_us},
          {"exposed_comm_us", t.exposed_comm_us}};
}

std::string describe_terms(const simulator::ModelTerms& t) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << "kernel math " << t.math_us / 1e3 << " ms + sustained clock " << t.clock_us / 1e3
    << " + launches " << t.launch_us / 1e3 << " + lost to NCCL " << t.overlap_us / 1e3 << " + accumulator adds " << t.accumulate_us / 1e3 << " + executor gaps "
    << t.executor_us / 1e3 << " + exposed comm " << t.exposed_comm_us / 1e3;
  return o.str();
}

std::vector<SchemeRun> run_schemes(const Topology& t, const Workload& w, const std::vector<std::string>& schemes,
                                   const simulator::Profile& prof, const simulator::SimOptions& opt,
                                   std::vector<Skipped>* skipped, const HeadOptions& head) {
  std::vector<SchemeRun> runs;
  std::string first_why;
  for (const auto& s : schemes) {
    if (s == "usp" && head.inner == "auto") {
      // The scheme across groups: every one that plans and fits, the fastest kept.
      std::vector<std::string> why;
      std::string tried;
      SchemeRun best;
      for (const std::string inner : {"ring", "zigzag", "allgather", "hamilton", "two-level"}) {
        if (inner == "ring" && w.causal) continue;  // across groups it takes the zigzag layout too: zigzag itself
        HeadOptions h = head;
        h.inner = inner;
        try {
          // Pieces far below a kernel tile (128 keys) cannot win and cost the most to simulate (hamilton across
          // 128 groups: 127 rings of 4-token pieces): not tried.
          const Plan probe = build_plan(t, "usp", plan_options("usp", w, h));
          const double piece_tokens = double(w.S) / (double(probe.ranks) * probe.pieces_per_rank *
                                                     (probe.layout == Layout::Zigzag ? 2 : 1));
          if (probe.ranks > 1 && piece_tokens < 32) {
            tried += (tried.empty() ? "" : ", ") + inner + " not tried (" + std::to_string(long(piece_tokens)) + "-token pieces)";
            continue;
          }
          std::vector<Skipped> sk;
          auto one = run_schemes(t, w, {"usp"}, prof, opt, &sk, h);
          tried += (tried.empty() ? "" : ", ") + inner + " " + std::to_string(one[0].sim.total_us / 1e3).substr(0, 7);
          if (best.scheme.empty() || one[0].sim.total_us < best.sim.total_us) best = std::move(one[0]), best.inner = inner;
        } catch (const InputError& e) {
          why.push_back(inner + ": " + e.what());
        }
      }
      if (best.scheme.empty()) {
        if (!skipped) throw InputError("usp: no scheme across groups fits (" + (why.empty() ? std::string("?") : why[0]) + ")");
        skipped->push_back({s, why.empty() ? "no scheme across groups fits" : why[0]});
        if (first_why.empty()) first_why = s + ": " + skipped->back().why;
        continue;
      }
      best.detail = "across groups " + best.inner + " (tried, ms: " + tried + ")";
      runs.push_back(std::move(best));
      continue;
    }
    SchemeRun r;
    r.scheme = s;
    r.plan = build_plan(t, s, plan_options(s, w, head));
    std::string split = check_split(r.plan.layout, r.plan.ranks, r.plan.pieces_per_rank, w.S);
    if (split.empty() && r.plan.ulysses > 1) split = check_heads(r.plan.ulysses, w);
    if (!split.empty() && skipped) {
      skipped->push_back({s, split});
      if (first_why.empty()) first_why = s + ": " + split;
      continue;
    }
    r.sim = simulator::simulate(r.plan, t, w, prof, opt);
    runs.push_back(std::move(r));
  }
  if (runs.empty()) throw InputError("workload: no scheme fits it (" + first_why + ")");
  return runs;
}

size_t fastest(const std::vector<SchemeRun>& runs) {
  size_t best = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].sim.total_us < runs[best].sim.total_us) best = i;
  return best;
}

}  // namespace tasp::cli
