// Llama3-style: every rank gathers every shard in step 0 (overlapped with its own block), computes the
// rest in step 1. Backward: the same gather and computes, then a reduce-scatter of dK/dV as point-to-point
// sends of every rank's accumulator of each piece to the piece's owner (step 2). With the forward's K/V kept
// (Schedule::keeps_kv), nothing is gathered again: step 0 computes the others' pieces, step 1 sends their
// accumulators home beside the computation on the rank's own, so the reduce-scatter hides behind it.
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

static Step allgather_step_impl(const Plan& p, int t) {
  Step s;
  const int n = p.ranks, P = p.pieces_per_rank;
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < n; ++o)
      for (int c = 0; c < P; ++c) {
        if (t == 0 && o == r) s.compute.push_back({r, o, c});
        if (t == 1 && o != r) s.compute.push_back({r, o, c});
        if (t == 0 && o != r) s.transfers.push_back({o, r, o, c, false});
        if (t == 2 && o != r) s.transfers.push_back({r, o, o, c, true});
      }
  return s;
}

Step allgather_step(const Plan& p, int t) { return allgather_step_impl(p, t); }
Step allgather_backward_step(const Plan& p, int t) {
  if (!p.backward.keeps_kv) return allgather_step_impl(p, t);
  Step s;
  const int n = p.ranks, P = p.pieces_per_rank;
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < n; ++o)
      for (int c = 0; c < P; ++c) {
        if ((t == 0) == (o != r)) s.compute.push_back({r, o, c});
        if (t == 1 && o != r) s.transfers.push_back({r, o, o, c, true});
      }
  return s;
}

Plan build_allgather(int n, bool causal, Layout layout, bool expand_steps) {
  Plan p;
  p.scheme = "allgather";
  p.ranks = n;
  p.causal = causal;
  p.layout = layout;
  p.pieces_per_rank = 1;
  p.schedule = "allgather";
  p.step_count = n > 1 ? 2 : 1;
  if (expand_steps) expand(p);
  return p;
}

}  // namespace tasp::planner
