#pragma once
// A runs CSV: measured runs to judge the model by (tools/gpu/compare.sh and model.sh write it, `tasp report --runs`
// reads it). Rows of "WORKLOAD",scheme,measured_ms[,...]; a header naming `pass`, `ranks`, `transport` or `pieces`
// columns gives each row its pass (fwd, bwd, fwd+bwd), its GPU count, how its allgather steps ran (collectives,
// sendrecv) and in how many pieces a rank (PlanOptions::gather_pieces; 1 without the column: every run before
// 2026-11-27, when `tasp run` began to choose the count), or in which steps of them ("2+1+1": PlanOptions::gather_steps).
// Pure: text in, rows out.
#include <string>
#include <vector>

namespace tasp::simulator {

struct MeasuredRun {
  std::string config, scheme, pass;  // config: the workload's -w text; pass: fwd | bwd | fwd+bwd
  std::string transport;             // collectives | sendrecv | "" where the CSV does not say
  int ranks = 0;                     // 0 where the CSV does not say
  int gather_pieces = 1;             // allgather's pieces a rank as run
  std::vector<int> gather_steps;     // and the steps it gathered them in ("a+b+c" in the CSV); empty: one a step
  bool pruned = false;               // pruned for the causal mask, its pieces by chunk ("p" after them: "2+1+1p")
  bool moved = false;                // and its late chunk's queries moved (PlanOptions::move_queries; "q" after them: "2q")
  int line = 0;                      // in the CSV, for messages
  double measured_ms = 0;
};

// Every row, or planner::InputError naming `name`, the line and the field; rows without a pass column get
// `default_pass`. At least one row.
std::vector<MeasuredRun> read_runs_csv(const std::string& text, const std::string& name, const std::string& default_pass);

}  // namespace tasp::simulator
