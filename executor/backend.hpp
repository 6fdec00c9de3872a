#pragma once
// The executor's one abstract interface: a backend runs a verified plan on the whole problem's inputs
// and returns the whole outputs plus a timeline. Two implementations: cpu (threads, exact math) and cuda.
#include <memory>
#include <string>
#include <vector>

#include "planner/plan.hpp"
#include "planner/timeline.hpp"
#include "planner/workload.hpp"

namespace tasp::executor {

struct Problem {
  planner::Workload w;
  std::vector<double> q, k, v;  // [B][S][H|Hkv][D], double: each backend converts to its own precision
};

struct Result {
  std::vector<double> out, lse;  // [B][S][H][D], [B][S][H]
  planner::Timeline timeline;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Result run(const planner::Plan& plan, const Problem& problem) = 0;
};

// precision: "fp64" or "fp32".
std::unique_ptr<Backend> make_cpu_backend(const std::string& precision);

}  // namespace tasp::executor
