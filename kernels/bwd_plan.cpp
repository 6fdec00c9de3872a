#include "kernels/bwd_plan.hpp"

#include <algorithm>
#include <utility>

namespace tasp::kernels::bwd {

Plan make_plan(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, bool deterministic) {
  Plan plan;
  // Each piece's query tiles: every item listing it, in tiles of bm rows (numbered as the dQ scratch's tiles).
  std::vector<std::vector<QEntry>> per_piece(pieces.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const WorkItem& it = items[i];
    const Band band(it);
    for (int pc = it.piece_begin; pc < it.piece_begin + it.piece_count; ++pc)
      for (int r = 0; r < it.q_len; r += bm) {
        const int rows = std::min(bm, it.q_len - r);
        const long long q0 = it.q_pos0 + r, q1 = q0 + rows - 1;
        per_piece[pc].push_back({band.lo(q0), band.hi(q1), band.lo(q1), band.hi(q0), RowsBand(band, q0), int(i), it.q_row0 + r,
                                 rows, plan.dq_tiles + r / bm});
      }
    plan.dq_tiles += (it.q_len + bm - 1) / bm;
  }
  std::vector<Tile> tiles;
  std::vector<long long> work;  // query tiles a CTA visits, to start the longest first
  for (size_t pc = 0; pc < pieces.size(); ++pc) {
    const KvPiece& kp = pieces[pc];
    if (per_piece[pc].empty() || kp.len <= 0) continue;
    const auto& entries = per_piece[pc];
    const int base = int(plan.qlist.size());
    plan.qlist.insert(plan.qlist.end(), entries.begin(), entries.end());
    // An item's entries are consecutive with rising rows, and the rows' visible spans rise with them, so a key
    // tile sees one run of each item's entries: found by bisection, and the CTA walks from the first run's
    // start to the last run's end (skipping what lies between on the device).
    std::vector<std::pair<int, int>> runs;  // [begin, end) of each item's entries
    for (int e = 0; e < int(entries.size());) {
      int f = e;
      while (f < int(entries.size()) && entries[f].item == entries[e].item) ++f;
      runs.push_back({e, f});
      e = f;
    }
    for (int j0 = 0; j0 < kp.len; j0 += kKeyTile) {
      const long long k0 = kp.pos0 + j0, k1 = kp.pos0 + std::min(kp.len, j0 + kKeyTile) - 1;
      int first = int(entries.size()), last = -1;
      long long visible = 0;
      for (const auto& [rb, re] : runs) {
        // First entry whose rows see up to k0 or beyond; first entry whose rows start past k1.
        int lo = rb, hi = re;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (entries[mid].see_hi >= k0) hi = mid;
          else lo = mid + 1;
        }
        const int from = lo;
        hi = re;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (entries[mid].see_lo > k1) hi = mid;
          else lo = mid + 1;
        }
        if (lo > from) first = std::min(first, from), last = std::max(last, lo - 1), visible += lo - from;
      }
      if (visible == 0) continue;
      tiles.push_back({int(pc), j0, base + first, last - first + 1, 0});
      work.push_back(visible);
    }
  }
  std::vector<size_t> order(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return work[x] > work[y]; });
  plan.tiles.resize(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) plan.tiles[i] = tiles[order[i]];
  if (deterministic) {
    std::vector<int> visits_of(plan.dq_tiles, 0);
    for (Tile& t : plan.tiles) {
      t.turn0 = int(plan.turns.size());
      const KvPiece& kp = pieces[t.piece];
      const long long k0 = kp.pos0 + t.j0, k1 = kp.pos0 + std::min(kp.len, t.j0 + kKeyTile) - 1;
      for (int e = t.qbegin; e < t.qbegin + t.qcount; ++e)
        plan.turns.push_back(visits(plan.qlist[e], k0, k1) ? visits_of[plan.qlist[e].tile]++ : -1);
    }
  }
  return plan;
}

}  // namespace tasp::kernels::bwd
