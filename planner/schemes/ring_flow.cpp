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

// Step t of the ring flow: computes (t < n) and K/V forwarding (t < n - 1) as in the forward, and with
// `grads` the accumulators computed at step t - 1 one hop on (2 <= t <= n: the owner's own block, step 0's, stays
// with it).
static Step ring_flow_step_impl(const Plan& p, int t, bool grads) {
  const int n = p.ranks;
  Step s;
  const bool computes = t < n, sends_kv = t < n - 1, sends_grad = grads && t >= 2 && t <= n;
  if (computes) s.compute.reserve(size_t(n) * p.rings.size());
  s.transfers.reserve(size_t(n) * p.rings.size() * (int(sends_kv) + int(sends_grad)));
  for (size_t c = 0; c < p.rings.size(); ++c) {
    const auto& R = p.rings[c];
    for (int i = 0; i < n; ++i) {
      const int owner = R[((i - t) % n + n) % n];
      if (computes) s.compute.push_back({R[i], owner, int(c)});
      if (sends_kv) s.transfers.push_back({R[i], R[(i + 1) % n], owner, int(c), false});
      if (sends_grad) s.transfers.push_back({R[i], R[(i + 1) % n], R[((i - t + 1) % n + n) % n], int(c), true});
    }
  }
  return s;
}

Step ring_flow_step(const Plan& p, int t) { return ring_flow_step_impl(p, t, false); }
Step ring_flow_backward_step(const Plan& p, int t) { return ring_flow_step_impl(p, t, true); }

}  // namespace tasp::planner
