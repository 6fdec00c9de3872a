#include "planner/prune.hpp"

#include <algorithm>
#include <vector>

namespace tasp::planner {

Mask plan_mask(const Plan& p, long S) {
  if (p.pruned.any()) return make_mask(p.pruned.S, p.causal, p.pruned.window_left, p.pruned.window_right, p.pruned.docs);
  return make_mask(S, p.causal, -1, -1, {});
}

std::vector<unsigned char> needed_blocks(const Plan& p, const Mask& m) {
  const int n = p.ranks, P = p.pieces_per_rank;
  const Split split = split_of(p, m.S);
  std::vector<std::vector<Range>> pieces(size_t(n) * P);  // each piece's ranges, computed once
  for (int o = 0; o < n; ++o)
    for (int c = 0; c < P; ++c) pieces[size_t(o) * P + c] = piece_ranges(split, o, c);
  std::vector<unsigned char> need(size_t(n) * n * P, 0);
  for (int r = 0; r < n; ++r) {
    const auto q = shard_ranges(split, r);
    for (size_t x = 0; x < pieces.size(); ++x) {
      double v = 0;
      for (const Range& kr : pieces[x])
        for (const Range& qr : q) v += visible_pairs(m, qr, kr);
      need[size_t(r) * n * P + x] = v > 0;
    }
  }
  return need;
}

namespace {

template <class T, class F>
void erase_if(std::vector<T>& v, F f) {
  v.erase(std::remove_if(v.begin(), v.end(), f), v.end());
}

// One pass. Index of (rank, piece x) state: rank * (n * P) + x, with x = owner * P + piece.
void prune_pass(std::vector<Step>& steps, const std::vector<unsigned char>& need, int n, int P, bool bwd, const Digraph* arcs) {
  const size_t nx = size_t(n) * P;
  auto id = [&](int r, int owner, int piece) { return size_t(r) * nx + size_t(owner) * P + piece; };
  for (Step& s : steps)
    erase_if(s.compute, [&](const Compute& c) { return !need[id(c.rank, c.owner, c.piece)]; });
  // K/V, back to front: a transfer stays when its receiver computes on the piece or forwards it later.
  std::vector<unsigned char> wants(size_t(n) * nx, 0);
  for (int t = int(steps.size()) - 1; t >= 0; --t) {
    Step& s = steps[t];
    erase_if(s.transfers, [&](const Transfer& x) { return !x.grad && !wants[id(x.dst, x.owner, x.piece)]; });
    for (const Transfer& x : s.transfers)
      if (!x.grad) wants[id(x.src, x.owner, x.piece)] = 1;
    for (const Compute& c : s.compute) wants[id(c.rank, c.owner, c.piece)] = 1;
  }
  if (!bwd) return;
  // Accumulators, front to back: one moves only when it holds contributions and is not at its owner already
  // (where the others' come home to it), and once nobody adds to the piece any more it goes straight to its
  // owner (when that arc is there and free in the step).
  std::vector<int> last_compute(nx, -1);
  for (int t = 0; t < int(steps.size()); ++t)
    for (const Compute& c : steps[t].compute) last_compute[size_t(c.owner) * P + c.piece] = t;
  std::vector<unsigned char> has(size_t(n) * nx, 0), busy(size_t(n) * n, 0);  // busy: pairs with an accumulator this step
  for (int t = 0; t < int(steps.size()); ++t) {
    Step& s = steps[t];
    std::vector<size_t> pairs;
    auto mark = [&](int a, int b) {
      busy[size_t(a) * n + b] = 1;
      pairs.push_back(size_t(a) * n + b);
    };
    for (const Transfer& x : s.transfers)
      if (x.grad) mark(x.src, x.dst);
    std::vector<Transfer> out;
    std::vector<size_t> arrive;
    for (const Transfer& x : s.transfers) {
      if (!x.grad) {
        out.push_back(x);
        continue;
      }
      const size_t from = id(x.src, x.owner, x.piece);
      if (!has[from]) continue;
      if (x.src == x.owner) continue;  // the owner's own contribution waits at home for the others
      Transfer y = x;
      if (last_compute[size_t(x.owner) * P + x.piece] < t && y.dst != x.owner && (!arcs || arcs->has(x.src, x.owner)) &&
          !busy[size_t(x.src) * n + x.owner]) {
        y.dst = x.owner;
        mark(y.src, y.dst);
      }
      has[from] = 0;
      arrive.push_back(id(y.dst, y.owner, y.piece));
      out.push_back(y);
    }
    s.transfers = std::move(out);
    for (size_t pr : pairs) busy[pr] = 0;
    for (size_t a : arrive) has[a] = 1;
    for (const Compute& c : s.compute) has[id(c.rank, c.owner, c.piece)] = 1;
  }
}

void drop_empty(std::vector<Step>& steps) {
  erase_if(steps, [](const Step& s) { return s.transfers.empty() && s.compute.empty(); });
}

}  // namespace

void prune(Plan& p, const Workload& w, const Digraph* arcs, int max_ranks, bool plain) {
  const Mask m = make_mask(w);
  if ((m.plain() && !plain) || p.ranks > max_ranks || w.S <= 0) return;
  expand(p);
  const auto need = needed_blocks(p, m);
  const int before = p.num_steps(), before_bwd = p.has_backward ? p.backward.num_steps() : 0;
  prune_pass(p.steps, need, p.ranks, p.pieces_per_rank, false, arcs);
  drop_empty(p.steps);
  if (p.has_backward) {
    prune_pass(p.backward.steps, need, p.ranks, p.pieces_per_rank, true, arcs);
    drop_empty(p.backward.steps);
  }
  p.pruned = {w.S, w.window_left, w.window_right, w.docs};
  p.note += std::string(p.note.empty() ? "" : "; ") + "pruned for its mask: " + std::to_string(before) + " -> " +
            std::to_string(p.num_steps()) + " forward steps" +
            (p.has_backward ? ", " + std::to_string(before_bwd) + " -> " + std::to_string(p.backward.num_steps()) + " backward" : "");
}

std::string mask_mismatch(const Plan& p, const Workload& w) {
  if (!p.pruned.any()) return {};
  const PrunedFor& f = p.pruned;
  auto docs_of = [](const std::vector<long>& d) { return d.size() <= 1 ? std::vector<long>{} : d; };
  if (f.S == w.S && f.window_left == w.window_left && f.window_right == w.window_right && docs_of(f.docs) == docs_of(w.docs))
    return {};
  Workload fw = w;
  fw.S = f.S, fw.window_left = f.window_left, fw.window_right = f.window_right, fw.docs = f.docs;
  return "the plan was pruned for another mask (" + to_string(fw) + "); plan it for this workload";
}

}  // namespace tasp::planner
