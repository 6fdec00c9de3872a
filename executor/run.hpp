#pragma once
// Runs a plan end to end: verify, make random inputs, execute on a backend, compare with the fp64 reference.
#include <string>

#include "executor/backend.hpp"

namespace tasp::executor {

struct RunOptions {
  bool verify = true;  // refuse invalid plans with the verifier's message
  bool check = false;  // compare with single-rank fp64 attention
  unsigned seed = 1;
  // Check against the fp64 CPU reference up to this many FLOPs, above that the backend's single-device one.
  double cpu_reference_max_flops = 2e10;
};

struct RunReport {
  Result result;
  bool checked = false;
  double rel_err_out = 0;  // ||out - ref|| / ||ref||
  double rel_err_lse = 0;  // ||lse - ref|| / ||ref|| over rows with keys
  std::string reference;   // what the check compared with
};

Problem random_problem(const planner::Workload& w, unsigned seed);
// Throws planner::InputError for a plan that fails verification or a workload the layout cannot split.
RunReport run_plan(Backend& backend, const planner::Plan& plan, const planner::Workload& w, const RunOptions& o);

}  // namespace tasp::executor
