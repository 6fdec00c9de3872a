// Ring attention: one ring 0 -> 1 -> ... -> n-1 -> 0, one piece per rank.
#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

Plan build_ring(int n, bool causal, Layout layout, bool expand_steps) {
  std::vector<int> ring(n);
  for (int r = 0; r < n; ++r) ring[r] = r;
  return ring_flow_plan("ring", {ring}, causal, layout, expand_steps);
}

}  // namespace tasp::planner
