#include "planner/plan.hpp"

#include <stdexcept>

#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

Step plan_step(const Plan& p, int t) {
  if (!p.compact()) return p.steps.at(t);
  if (p.schedule == "ring-flow") return ring_flow_step(p, t);
  if (p.schedule == "allgather") return allgather_step(p, t);
  throw std::invalid_argument("unknown schedule '" + p.schedule + "'");
}

const Step& step_at(const Plan& p, int t, Step& scratch) {
  if (!p.compact()) return p.steps.at(t);
  scratch = plan_step(p, t);
  return scratch;
}

void expand(Plan& p) {
  if (!p.compact()) return;
  std::vector<Step> steps;
  steps.reserve(p.step_count);
  for (int t = 0; t < p.step_count; ++t) steps.push_back(plan_step(p, t));
  p.steps = std::move(steps);
  p.schedule.clear();
  p.step_count = 0;
}

}  // namespace tasp::planner
