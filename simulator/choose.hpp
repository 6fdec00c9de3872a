#pragma once
// Choosing by simulating: plan each scheme for a topology and workload, simulate it, and keep the fastest (tasp
// simulate, plan --scheme auto, run's head groups, the C ABI's "auto"); also the planner options each scheme takes
// and the machine profile. Pure but for reading a profile file.
#include <iosfwd>
#include <string>
#include <vector>

#include "planner/schemes/schemes.hpp"
#include "planner/workload.hpp"
#include "simulator/engine.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

struct SchemeRun {
  std::string scheme;
  std::string detail;  // what was chosen inside the scheme (usp: the scheme across groups), for people
  std::string inner;   // usp: the scheme across groups it was simulated with
  planner::Plan plan;
  SimResult sim;
};

// How each scheme is planned for a workload: ring is plain ring attention (contiguous shards, also when
// causal), zigzag its causal variant, the others take zigzag shards when causal.
// The choices plan, simulate and run share: usp's group size (0: a node's GPUs) and scheme across groups
// (--ulysses, --inner), head groups (--head-groups), and the memory a rank may keep (--memory-budget).
struct PlanChoices {
  int ulysses = 0;
  std::string inner = "auto";  // auto: simulate/auto try every one; a plan alone takes hamilton
  int head_groups = 0;         // Plan::head_groups; 0: the count the simulator finds fastest (a plan alone: 1)
  double memory_budget_gib = 0;  // 0: none (planner::PlanOptions::memory_budget_bytes)
  std::string layout;            // contiguous | zigzag | zigzag-docs; "": the scheme's own (and, for packed causal
                                 // documents, the fastest of the three)
  bool prune_plain = false;      // planner::PlanOptions::prune_plain
  bool move_queries = false;     // planner::PlanOptions::move_queries (implies prune_plain)
  std::string accumulator = "auto";  // fp32 | bf16 | auto: the backward's dK/dV in transit (PlanOptions::accumulator_bytes)
  int gather_pieces = 0;  // allgather: PlanOptions::gather_pieces; 0: the count the simulator finds fastest (a plan alone: 1)
  std::vector<int> gather_steps;  // allgather: PlanOptions::gather_steps (their sum the pieces); empty: one piece a step
  // Whether the simulator picks allgather's pieces and steps (choose_gather_pieces): neither given.
  bool choose_pieces() const { return gather_pieces == 0 && gather_steps.empty(); }
};
planner::PlanOptions plan_options(const std::string& scheme, const planner::Workload& w, const PlanChoices& h = {});
// PlanOptions::gather_pieces and gather_steps from the choices where they `apply` (allgather; 1 piece elsewhere);
// InputError for a count out of range or steps that do not sum to the pieces.
void set_gather_pieces(const PlanChoices& h, bool applies, planner::PlanOptions& o);
// PlanOptions::accumulator_bytes of a PlanChoices::accumulator (fp32: 4, bf16: 2, auto: 0); InputError naming `what`
// (the option as the caller spells it) otherwise.
int accumulator_bytes_of(const std::string& accumulator, const std::string& what = "--accumulator");

// "" when workload `w` fits plan `p` (its pieces hold tokens, its head-parallel groups split the heads), else why not.
std::string misfit(const planner::Plan& p, const planner::Workload& w);

// "all" or a comma list; "all" keeps the schemes that apply, a named one that does not is an error.
std::vector<std::string> select_schemes(const std::string& list, const planner::Topology& t, bool causal);

// Machine profile: a file, or the built-in one for the topology (named in `log`).
Profile choose_profile(const std::string& path, const planner::Topology& t, std::ostream* log);

// A scheme whose pieces do not fit the workload (more pieces than tokens, say) is an error, or, when
// `skipped` is given (the "all" list), left out with the reason; an error still when none is left.
struct Skipped {
  std::string scheme, why;
};
std::vector<SchemeRun> run_schemes(const planner::Topology& t, const planner::Workload& w,
                                   const std::vector<std::string>& schemes, const Profile& prof,
                                   const SimOptions& opt, std::vector<Skipped>* skipped = nullptr,
                                   const PlanChoices& head = {});
// Index of the fastest run.
size_t fastest(const std::vector<SchemeRun>& runs);
// The other runs predicted within `band` of runs[best] either way, "zigzag +1.7%, allgather +1.3%" ("" when none):
// inside the model's error on measured runs (median 2.4-4.5%, docs/measurements/model.md), so `--scheme auto`'s pick
// among them is a guess to measure (on 2x H200 `qwen3_4b` was predicted 1.3% apart for Ulysses and allgather and
// measured 6.8% the other way).
std::string near_ties(const std::vector<SchemeRun>& runs, size_t best, double band = 0.03);

// A head-parallel plan's head groups (Plan::head_groups) set to the count that simulates fastest among 1, 2, 4,
// 8 and 16 that split the workload's heads; returns what was tried ("" for other plans, which keep one group).
std::string choose_head_groups(planner::Plan& p, const planner::Topology& t, const planner::Workload& w,
                               const Profile& prof, const SimOptions& opt);

// An allgather plan rebuilt in the count of pieces a rank (PlanOptions::gather_pieces, 1 to 4, pieces of at least a
// kernel tile) that simulates fastest, `o` otherwise as it was planned; returns what was tried ("" for other plans).
// More pieces hide more of the exchange and cost a launch and a collective each: on 2x H200 over sockets 2 pieces
// measured 8.5% faster for qwen3_14b, through shm 6.5% slower, and the model said so both times
// (docs/measurements/executor.md, "allgather in pieces").
std::string choose_gather_pieces(planner::Plan& p, const planner::Topology& t, const planner::Workload& w,
                                 const Profile& prof, const SimOptions& opt, planner::PlanOptions o);

}  // namespace tasp::simulator
