// Zigzag ring attention: ring flow over the zigzag layout, which balances causal work across ranks.
#include "planner/schemes/ring_flow.hpp"
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

Plan build_zigzag(const Topology& t, bool expand_steps) {
  Plan p = build_ring(t, true, Layout::Zigzag, expand_steps);
  p.scheme = "zigzag";
  return p;
}

}  // namespace tasp::planner
