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
// Steps of several pieces (Plan::gather_steps, e.g. 3,2,1 of 6): what stays exposed where the exchange is the long
// pole is the forward's last step's compute (nothing left to gather beside it) and the keeping backward's first (nothing
// to send yet), so the forward's steps shrink toward its end and the backward takes the same sizes in reverse (over the
// pieces in order: K/V are kept, any piece may go first), its first step the smallest. The pieces stay one size, so
// slots and collectives are as for P pieces one a step.
#include <algorithm>

#include "planner/schemes/schemes.hpp"

namespace tasp::planner {

namespace {

// Every rank's computes on the others' pieces [c0, c1) (c0 < 0: the own pieces, all of them).
void compute_others(const Plan& p, Step& s, int c0, int c1) {
  for (int r = 0; r < p.ranks; ++r)
    for (int o = 0; o < p.ranks; ++o)
      for (int k = 0; k < p.pieces_per_rank; ++k)
        if (c0 < 0 ? o == r : o != r && k >= c0 && k < c1) s.compute.push_back({r, o, k});
}

// Every rank's pieces [c0, c1) to every other rank (gather), or every rank's accumulators of the others' pieces home.
void exchange_pieces(const Plan& p, Step& s, int c0, int c1, bool grad) {
  for (int c = c0; c < c1; ++c)
    for (int r = 0; r < p.ranks; ++r)
      for (int o = 0; o < p.ranks; ++o)
        if (o != r) s.transfers.push_back(grad ? Transfer{r, o, o, c, true} : Transfer{o, r, o, c, false});
}

}  // namespace

std::vector<std::pair<int, int>> gather_groups(const Plan& p) {
  std::vector<std::pair<int, int>> g;
  int at = 0;
  if (p.gather_steps.empty())
    for (; at < p.pieces_per_rank; ++at) g.push_back({at, at + 1});
  for (int k : p.gather_steps) g.push_back({at, at + k}), at += k;
  return g;
}

std::string gather_steps_error(const std::vector<int>& steps, int pieces) {
  if (steps.empty()) return "";
  long sum = 0;
  for (int k : steps) {
    if (k < 1) return "gather_steps: each step gathers at least one piece, got " + std::to_string(k);
    sum += k;
  }
  if (sum != pieces)
    return "gather_steps: the steps' pieces sum to " + std::to_string(sum) + ", not the " + std::to_string(pieces) +
           " pieces a rank";
  return "";
}

std::string gather_steps_text(const std::vector<int>& steps) {
  std::string s;
  for (size_t i = 0; i < steps.size(); ++i) s += (i ? "+" : "") + std::to_string(steps[i]);
  return s;
}

Step allgather_step(const Plan& p, int t) {
  Step s;
  const auto g = gather_groups(p);
  const int G = int(g.size());
  if (t == 0) compute_others(p, s, -1, 0);
  else if (t <= G) compute_others(p, s, g[t - 1].first, g[t - 1].second);  // (a loaded plan may list steps past them)
  if (t < G && p.ranks > 1) exchange_pieces(p, s, g[t].first, g[t].second, false);
  return s;
}

Step allgather_backward_step(const Plan& p, int t) {
  const std::vector<std::pair<int, int>> fwd = gather_groups(p);
  const int G = int(fwd.size());
  if (!p.backward.keeps_kv) {  // the forward's gathers and computes, then every accumulator home at once
    if (t <= G) return allgather_step(p, t);
    Step s;
    exchange_pieces(p, s, 0, p.pieces_per_rank, true);
    return s;
  }
  // The forward's groups' sizes last first (its smallest, exposed here, first), over the pieces in order.
  std::vector<std::pair<int, int>> g;
  for (int i = G - 1, at = 0; i >= 0; --i) {
    const int k = fwd[i].second - fwd[i].first;
    g.push_back({at, at + k}), at += k;
  }
  Step s;
  if (t < G) compute_others(p, s, g[t].first, g[t].second);
  else if (t == G) compute_others(p, s, -1, 0);
  if (t > 0 && t <= G) exchange_pieces(p, s, g[t - 1].first, g[t - 1].second, true);
  return s;
}

Plan build_allgather(int n, bool causal, Layout layout, bool expand_steps, int pieces, const std::vector<int>& steps) {
  Plan p;
  p.scheme = "allgather";
  p.ranks = n;
  p.causal = causal;
  p.layout = layout;
  p.pieces_per_rank = n > 1 ? pieces : 1;
  if (n > 1 && std::any_of(steps.begin(), steps.end(), [](int k) { return k != 1; })) p.gather_steps = steps;
  p.schedule = "allgather";
  p.step_count = n > 1 ? int(gather_groups(p).size()) + 1 : 1;
  if (expand_steps) expand(p);
  return p;
}

}  // namespace tasp::planner
