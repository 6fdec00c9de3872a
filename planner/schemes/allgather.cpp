// Llama3-style: every rank gathers every shard in step 0 (overlapped with its own block), computes the
// rest in step 1. Backward: the same gather and computes, then a reduce-scatter of dK/dV as point-to-point
// sends of every rank's accumulator of each piece to the piece's owner (step 2). With the forward's K/V kept
// (Schedule::keeps_kv), nothing is gathered again: step 0 computes the others' pieces, step 1 sends their
// accumulators home beside the computation on the rank's own, so the reduce-scatter hides behind it.
// In P pieces a rank (PlanOptions::gather_pieces), the exchange goes piece by piece beside the compute on the pieces
// before it: forward, step t gathers piece t while the others' piece t - 1 computes (the own pieces in step 0);
// keeping backward, step t sends piece t - 1's accumulators home while the others' piece t computes (the own pieces
// in the last step, P). On a slow fabric the link then idles only for the first piece's gather and the last's
// reduce-scatter (the model: qwen3_14b over sockets 100.5 -> 92.5 ms at 2 pieces, docs/measurements/executor.md).
// P = 1 is the schedule above.
#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

namespace {

// Every rank's computes on the others' piece c (c < 0: the own pieces, all of them).
void compute_others(const Plan& p, Step& s, int c) {
  for (int r = 0; r < p.ranks; ++r)
    for (int o = 0; o < p.ranks; ++o)
      for (int k = 0; k < p.pieces_per_rank; ++k)
        if (c < 0 ? o == r : o != r && k == c) s.compute.push_back({r, o, k});
}

// Every rank's piece c to every other rank (gather), or every rank's accumulators of the others' piece c home.
void exchange_piece(const Plan& p, Step& s, int c, bool grad) {
  for (int r = 0; r < p.ranks; ++r)
    for (int o = 0; o < p.ranks; ++o)
      if (o != r) s.transfers.push_back(grad ? Transfer{r, o, o, c, true} : Transfer{o, r, o, c, false});
}

}  // namespace

Step allgather_step(const Plan& p, int t) {
  Step s;
  const int P = p.pieces_per_rank;
  compute_others(p, s, t - 1);  // t = 0: the own pieces
  if (t < P && p.ranks > 1) exchange_piece(p, s, t, false);
  return s;
}

Step allgather_backward_step(const Plan& p, int t) {
  const int P = p.pieces_per_rank;
  if (!p.backward.keeps_kv) {  // the forward's gathers and computes, then every accumulator home at once
    if (t <= P) return allgather_step(p, t);
    Step s;
    for (int c = 0; c < P; ++c) exchange_piece(p, s, c, true);
    return s;
  }
  Step s;
  compute_others(p, s, t < P ? t : -1);
  if (t > 0) exchange_piece(p, s, t - 1, true);
  return s;
}

Plan build_allgather(int n, bool causal, Layout layout, bool expand_steps, int pieces) {
  Plan p;
  p.scheme = "allgather";
  p.ranks = n;
  p.causal = causal;
  p.layout = layout;
  p.pieces_per_rank = n > 1 ? pieces : 1;
  p.schedule = "allgather";
  p.step_count = n > 1 ? p.pieces_per_rank + 1 : 1;
  if (expand_steps) expand(p);
  return p;
}

}  // namespace tasp::planner
