#pragma once
// The plan IR, the contract between planner, simulator, executor and any outside checker (DESIGN.md).
// tasp-plan/1 is the forward alone; tasp-plan/2 adds an optional backward part (docs/plan-format.md).
#include <string>
#include <vector>

namespace tasp::planner {

// A transfer moves K/V piece (owner, piece) from src to dst, or with `grad` the dK/dV accumulator of that
// piece (the backward's partial sum; it leaves the sender and is added to the receiver's).
struct Transfer {
  int src = -1, dst = -1, owner = -1, piece = -1;
  bool grad = false;
};
// Forward: rank's queries against K/V piece (owner, piece), folded into its running out/LSE. Backward: that
// block's contribution added to dQ of the rank's rows and to the rank's dK/dV accumulator of the piece.
// With `move` >= 0: the rows of the plan's query_moves[move] instead of the rank's own, at that move's `at` (the rank),
// on one of its own pieces; forward into the rows' partial out/LSE there, backward into their partial dQ and the
// piece's accumulator.
struct Compute {
  int rank = -1, owner = -1, piece = -1;
  int move = -1;
};
// Moved query rows in transit (Plan::query_moves[move]): out, from the owner to `at` (forward: the rows' Q; backward:
// their dO, with their final LSE and D = rowsum(dO * O)), or `back`, from `at` to the owner (forward: the rows' partial
// out in 16 bits and LSE, which the owner merges into its own; backward: their partial dQ in 16 bits, which it adds).
struct RowsTransfer {
  int move = -1;
  bool back = false;
};
struct Step {
  std::vector<Transfer> transfers;
  std::vector<Compute> compute;
  std::vector<RowsTransfer> rows;
};

// Queries moved to keys instead of keys to queries (docs/plan-format.md, "Queries moved"): rank `owner`'s query
// range `range` (its shard's ranges in order; zigzag: 0 the early chunk, 1 the late) is computed at rank `at` against
// `at`'s own pieces, and the owner computes none of `at`'s pieces (its other rows must see none of them). Where K/V
// are as large as Q (MHA) and the medium is shared, this moves fewer bytes: on 2 ranks 4 chunk-tensors a pass where
// allgather pruned moves 6.
struct QueryMove {
  int owner = -1, range = -1, at = -1;
};

// Zigzag: chunks r and 2n-1-r of 2n per rank; ZigzagDocs: the same within every packed document (the
// plan's layout_docs), so each step's causal work is balanced across ranks whatever the documents.
enum class Layout { Contiguous, Zigzag, ZigzagDocs };
const char* layout_name(Layout l);
bool parse_layout(const std::string& s, Layout* out);

// Which pass of attention a step list, a run or a simulation is about.
enum class Pass { Fwd, Bwd };
// What a command does: the forward, the backward (after an untimed forward where it needs one), or both.
struct Passes {
  bool fwd = true, bwd = false;
};
const char* passes_name(Passes p);                  // "fwd" | "bwd" | "fwd+bwd"
bool parse_passes(const std::string& s, Passes* out);  // the same names

// One pass's steps: listed, or compact (a rule that generates them from the plan's rings).
struct Schedule {
  std::vector<Step> steps;  // empty when compact
  std::string rule;         // "" (listed) | "ring-flow" | "allgather"
  int step_count = 0;       // compact only
  // Backward: each rank starts with every K/V piece it received in the forward (kept between the passes, at the
  // memory of the gathered pieces), not with its own alone.
  bool keeps_kv = false;
  bool compact() const { return steps.empty() && !rule.empty(); }
  int num_steps() const { return compact() ? step_count : int(steps.size()); }
};

// The mask a plan was pruned for (planner/prune.hpp): its steps then skip blocks no query sees and transfers
// no rank downstream needs, so it holds for that sequence length, window and documents only. S = 0: any.
struct PrunedFor {
  long S = 0;
  long window_left = -1, window_right = -1;
  std::vector<long> docs;
  bool any() const { return S > 0; }
};

struct Plan {
  std::string format = "tasp-plan/1";  // written as /2 when the plan has a backward part
  std::string scheme;
  int ranks = 0;
  bool causal = false;
  Layout layout = Layout::Contiguous;
  std::vector<long> layout_docs;  // ZigzagDocs: the documents' lengths (summing to S)
  int pieces_per_rank = 1;
  // allgather: how many of the pieces each forward step gathers, summing to pieces_per_rank (e.g. 3, 2, 1: the
  // exposed last step small); the keeping backward takes the sizes in reverse (1, 2, 3). Empty: one piece a step.
  std::vector<int> gather_steps;
  // Each piece inside one chunk of its rank's zigzag shard (pieces [0, P/2) of the first chunk, [P/2, P) of the
  // second) instead of a slice of both: under a causal mask a rank's late chunk is then whole pieces that the ranks
  // before it never see, which pruning drops (allgather pruned for the plain causal mask, planner/prune.hpp).
  bool pieces_by_chunk = false;
  std::vector<std::vector<int>> rings;
  // The forward. (Kept as plain fields: `steps`, `schedule`, `step_count` are the /1 format's names.)
  std::vector<Step> steps;
  std::string schedule;  // "" (expanded) | "ring-flow" | "allgather"
  int step_count = 0;
  std::string topology;  // where it was planned for (informational)
  std::string note;
  // The backward: K/V pieces travel again and dK/dV accumulators with them (DESIGN.md, "Backward").
  bool has_backward = false;
  Schedule backward;
  int accumulator_bytes = 4;  // dK/dV accumulators in transit: 4 (fp32) or 2 (bf16)
  // Head parallelism (Ulysses): each plan rank is a group of `ulysses` GPUs (GPU = rank * ulysses + slot).
  // An all-to-all inside the group turns its members' sequence shards into head shards of the group's
  // tokens (Q, K, V), the steps above run once per slot between same-slot GPUs, and another all-to-all
  // returns the output (backward: dO in, dQ/dK/dV out). planner/head_parallel.hpp.
  int ulysses = 1;
  // Head-parallel plans: the heads are cut into `head_groups` groups that run one after another, group g+1's
  // all-to-all in (and group g-1's out) beside group g's attention: the exchanges hide behind the kernels
  // (planner/head_parallel.hpp, head_group_workload). 1: one all-to-all in, all the attention, one out.
  int head_groups = 1;
  PrunedFor pruned;
  std::vector<QueryMove> query_moves;

  int gpus() const { return ranks * ulysses; }

  bool compact() const { return steps.empty() && !schedule.empty(); }
  int num_steps() const { return compact() ? step_count : int(steps.size()); }
  bool compact(Pass p) const { return p == Pass::Fwd ? compact() : backward.compact(); }
  int num_steps(Pass p) const { return p == Pass::Fwd ? num_steps() : backward.num_steps(); }
  const std::string& rule(Pass p) const { return p == Pass::Fwd ? schedule : backward.rule; }
};

// Step t of a pass, whether listed or compact (compact ones are generated by their rule).
Step plan_step(const Plan& p, int t, Pass pass = Pass::Fwd);
// The same without copying a listed step: compact steps are generated into `scratch`.
const Step& step_at(const Plan& p, int t, Step& scratch, Pass pass = Pass::Fwd);
// Generate the steps of compact passes into the plan.
void expand(Plan& p);

// The backward of a plan built by rule: ring-flow plans carry each piece's accumulator one hop behind
// its K/V and return it to the owner in one more step; allgather gathers K/V again and reduce-scatters, or with
// `keep_kv` keeps the forward's gathered K/V, computes the others' pieces first and reduce-scatters their
// accumulators beside the computation on its own. Listed (expanded) when the forward is listed. Throws
// std::invalid_argument for a rule it does not know.
void add_backward(Plan& p, int accumulator_bytes = 4, bool keep_kv = false);

}  // namespace tasp::planner
