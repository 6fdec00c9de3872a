#pragma once
// Runs a plan end to end: verify, make random inputs, execute on a backend, compare with the fp64 reference.
#include <string>

#include "executor/backend.hpp"

namespace tasp::executor {

struct RunOptions {
  planner::Passes passes;  // forward (default), backward, or both
  bool verify = true;  // refuse invalid plans with the verifier's message
  bool check = false;  // compare with single-rank fp64 attention
  unsigned seed = 1;
  // Check against the fp64 CPU reference up to this many FLOPs, above that the backend's single-device one.
  double cpu_reference_max_flops = 2e10;
  bool speedup = false;  // also time the whole problem on one device
  int warmup = 2, iters = 5;  // for that timing
  double host_memory_bytes = 0;  // refuse runs whose host arrays would not fit in this (0: no check)
};

// One output compared with the reference: relative L2 error ||x - ref|| / ||ref|| and cosine similarity
// (the published TASP test scripts' accuracy metric).
struct TensorCheck {
  std::string name;  // out | lse | dq | dk | dv
  double rel_err = 0, cosine = 0;
};

struct RunReport {
  Result result;
  bool checked = false;
  std::vector<TensorCheck> checks;  // out and lse for the forward, dq, dk, dv for the backward
  std::string reference;            // what the check compared with
  double single_device_us = 0;      // with RunOptions::speedup, where the backend can
  double tokens_per_s = 0;          // B * S over the reported total
  double rel_err(const std::string& name) const;  // -1 when not checked
  double max_rel_err() const;
};

// Random normal q, k, v (and dO when `with_dout`).
Problem random_problem(const planner::Workload& w, unsigned seed, bool with_dout = false);
// Host memory a run takes: the problem's arrays, the outputs, the CPU backend's per-rank copies (cpu), the
// fp64 reference's outputs (check).
double host_memory_bytes(const planner::Workload& w, planner::Passes passes, bool cpu, bool host_problem, bool check);
TensorCheck compare(const std::string& name, const std::vector<double>& x, const std::vector<double>& ref);
// Throws planner::InputError for a plan that fails verification or a workload the layout cannot split.
RunReport run_plan(Backend& backend, const planner::Plan& plan, const planner::Workload& w, const RunOptions& o);

}  // namespace tasp::executor
