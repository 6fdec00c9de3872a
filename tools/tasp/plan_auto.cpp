#include "tools/tasp/plan_auto.hpp"

#include <iomanip>
#include <ostream>

#include "planner/workload_catalogue.hpp"
#include "tools/tasp/compare.hpp"

namespace tasp::cli {

std::string choose_scheme_auto(const planner::Topology& t, const std::string& config, const std::string& workload,
                               const simulator::Profile& prof, planner::Passes passes, planner::PlanOptions* o, std::ostream& log,
                               simulator::Collectives collectives) {
  if (workload.empty() && config.empty())
    throw planner::InputError("--scheme auto needs --workload B=..,S=..,H=..,D=..[,causal] or --config NAME");
  const planner::Workload w = planner::workload_from(config, workload);
  if (o->causal && !w.causal) throw planner::InputError("--causal given but the workload is not causal");
  simulator::SimOptions so;
  so.passes = passes;
  so.collectives = collectives;
  std::vector<Skipped> skipped;
  auto runs = run_schemes(t, w, select_schemes("all", t, w.causal), prof, so, &skipped);
  const size_t pick = fastest(runs);
  const auto& best = runs[pick];
  log << "auto: simulated " << planner::passes_name(passes) << " with profile " << prof.name << ":";
  for (const auto& r : runs) log << " " << r.scheme << " " << std::fixed << std::setprecision(3) << r.sim.total_us / 1e3 << " ms";
  log << " -> " << best.scheme << "\n";
  for (const auto& k : skipped) log << "auto: " << k.scheme << " left out: " << k.why << "\n";
  if (const std::string near = near_ties(runs, pick); !near.empty())
    log << "auto: within 3% of " << best.scheme << ", inside the model's error: " << near
        << " (measure them: tasp run --scheme NAME)\n";
  const planner::PlanOptions chosen = plan_options(best.scheme, w);
  o->causal = chosen.causal;
  o->workload = chosen.workload;  // a mask's pruning, as the scheme was timed with it
  if (!best.inner.empty()) o->inner = best.inner;
  if (best.scheme == "usp") o->ulysses = best.plan.ulysses;  // the group size it was timed with (searched on one node)
  o->head_groups = best.plan.head_groups;
  // allgather as it was timed: its pieces, and pruned or with queries moved where that won (a plan without them wrote
  // 2 pieces whole where 2 with queries moved had won, 5.45 against 4.19 ms through host memory at B=1 S=8192).
  if (best.scheme == "allgather") {
    o->gather_pieces = best.plan.pieces_per_rank, o->gather_steps = best.plan.gather_steps;
    o->move_queries = !best.plan.query_moves.empty();
    o->prune_plain = best.plan.pieces_by_chunk || o->move_queries;
  }
  if (!best.detail.empty()) log << "auto: " << best.scheme << " " << best.detail << "\n";
  if (!o->layout_given) o->layout_given = chosen.layout_given, o->layout = chosen.layout;
  return best.scheme;
}

}  // namespace tasp::cli
