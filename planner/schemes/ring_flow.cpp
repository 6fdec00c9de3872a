#include "planner/schemes/ring_flow.hpp"

#include <stdexcept>

namespace tasp::planner {

Plan ring_flow_plan(const std::string& scheme, std::vector<std::vector<int>> rings, bool causal, Layout layout,
                    bool expand_steps) {
  if (rings.empty()) throw std::invalid_argument("ring flow needs at least one ring");
  Plan p;
  p.scheme = scheme;
  p.ranks = int(rings[0].size());
  p.causal = causal;
  p.layout = layout;
  p.pieces_per_rank = int(rings.size());
  p.rings = std::move(rings);
  p.schedule = "ring-flow";
  p.step_count = p.ranks;
  if (expand_steps) expand(p);
  return p;
}

Step ring_flow_step(const Plan& p, int t) {
  const int n = p.ranks;
  Step s;
  s.compute.reserve(size_t(n) * p.rings.size());
  if (t < n - 1) s.transfers.reserve(size_t(n) * p.rings.size());
  for (size_t c = 0; c < p.rings.size(); ++c) {
    const auto& R = p.rings[c];
    for (int i = 0; i < n; ++i) {
      const int owner = R[((i - t) % n + n) % n];
      s.compute.push_back({R[i], owner, int(c)});
      if (t < n - 1) s.transfers.push_back({R[i], R[(i + 1) % n], owner, int(c)});
    }
  }
  return s;
}

}  // namespace tasp::planner
