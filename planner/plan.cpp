#include "planner/plan.hpp"

#include <stdexcept>

#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

const char* passes_name(Passes p) { return p.fwd && p.bwd ? "fwd+bwd" : p.bwd ? "bwd" : "fwd"; }

bool parse_passes(const std::string& s, Passes* out) {
  if (s == "fwd") return *out = {true, false}, true;
  if (s == "bwd") return *out = {false, true}, true;
  if (s == "fwd+bwd") return *out = {true, true}, true;
  return false;
}

Step plan_step(const Plan& p, int t, Pass pass) {
  if (!p.compact(pass)) return pass == Pass::Fwd ? p.steps.at(t) : p.backward.steps.at(t);
  const std::string& rule = p.rule(pass);
  if (rule == "ring-flow") return pass == Pass::Fwd ? ring_flow_step(p, t) : ring_flow_backward_step(p, t);
  if (rule == "allgather") return pass == Pass::Fwd ? allgather_step(p, t) : allgather_backward_step(p, t);
  throw std::invalid_argument("unknown schedule '" + rule + "'");
}

const Step& step_at(const Plan& p, int t, Step& scratch, Pass pass) {
  if (!p.compact(pass)) return pass == Pass::Fwd ? p.steps.at(t) : p.backward.steps.at(t);
  scratch = plan_step(p, t, pass);
  return scratch;
}

void expand(Plan& p) {
  for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
    if (!p.compact(pass) || (pass == Pass::Bwd && !p.has_backward)) continue;
    std::vector<Step> steps;
    steps.reserve(p.num_steps(pass));
    for (int t = 0; t < p.num_steps(pass); ++t) steps.push_back(plan_step(p, t, pass));
    if (pass == Pass::Fwd) {
      p.steps = std::move(steps);
      p.schedule.clear();
      p.step_count = 0;
    } else {
      p.backward.steps = std::move(steps);
      p.backward.rule.clear();
      p.backward.step_count = 0;
    }
  }
}

void add_backward(Plan& p, int accumulator_bytes, bool keep_kv) {
  if (accumulator_bytes != 4 && accumulator_bytes != 2)
    throw std::invalid_argument("accumulator: 4 (fp32) or 2 (bf16) bytes, not " + std::to_string(accumulator_bytes));
  const bool listed = !p.compact();
  p.has_backward = true;
  p.accumulator_bytes = accumulator_bytes;
  p.backward = Schedule{};
  if (p.scheme == "allgather") {
    p.backward.rule = "allgather";
    p.backward.keeps_kv = keep_kv && p.ranks > 1;
    const int groups = p.gather_steps.empty() ? p.pieces_per_rank : int(p.gather_steps.size());
    p.backward.step_count = p.ranks == 1 ? 1 : groups + (keep_kv ? 1 : 2);  // allgather.cpp
  } else if (!p.rings.empty()) {
    p.backward.rule = "ring-flow";
    p.backward.step_count = p.ranks > 1 ? p.ranks + 1 : 1;
  } else {
    throw std::invalid_argument("add_backward: no backward rule for scheme '" + p.scheme + "'");
  }
  if (listed) expand(p);
}

}  // namespace tasp::planner
