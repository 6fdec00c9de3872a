#include "kernels/bwd_plan.hpp"

#include <algorithm>
#include <utility>

namespace tasp::kernels::bwd {
namespace {

// A query tile (bm rows) of an item that lists the piece: the keys its rows together see [see_lo, see_hi] and all
// see [all_lo, all_hi], the band of its rows (for the mask), the item, its first row in q, its rows, its dQ tile.
struct QEntry {
  long long see_lo, see_hi, all_lo, all_hi;
  RowsBand band;  // from the tile's first row
  int item, qrow, rows, tile;
};

// The visit of entry q by the CTA of keys [j0, j0 + kKeyTile) of piece kp.
Visit visit(const QEntry& q, const KvPiece& kp, int j0) {
  const long long k0 = kp.pos0 + j0;
  const int keys = std::min(kp.len - j0, kKeyTile);
  Visit v{};
  v.tile = q.tile, v.qrow = q.qrow, v.rows = short(q.rows);
  v.mask = keys < kKeyTile || !(q.all_lo <= k0 && k0 + kKeyTile - 1 <= q.all_hi);
  if (v.mask) v.m = TileMask(q.band, k0, keys);
  return v;
}

}  // namespace

Plan make_plan(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, bool deterministic, bool stagger) {
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
  std::vector<std::vector<Visit>> walks;  // each CTA's
  for (size_t pc = 0; pc < pieces.size(); ++pc) {
    const KvPiece& kp = pieces[pc];
    if (per_piece[pc].empty() || kp.len <= 0) continue;
    const auto& entries = per_piece[pc];
    // An item's entries are consecutive with rising rows, and the rows' visible spans rise with them, so a key
    // tile sees one run of each item's entries: found by bisection.
    std::vector<std::pair<int, int>> runs;  // [begin, end) of each item's entries
    for (int e = 0; e < int(entries.size());) {
      int f = e;
      while (f < int(entries.size()) && entries[f].item == entries[e].item) ++f;
      runs.push_back({e, f});
      e = f;
    }
    for (int j0 = 0; j0 < kp.len; j0 += kKeyTile) {
      const long long k0 = kp.pos0 + j0, k1 = kp.pos0 + std::min(kp.len, j0 + kKeyTile) - 1;
      std::vector<Visit> walk;
      for (const auto& [rb, re] : runs) {
        // First entry whose rows see up to k0 or beyond; first entry whose rows start past k1.
        const auto from = std::partition_point(entries.begin() + rb, entries.begin() + re, [&](const QEntry& q) { return q.see_hi < k0; });
        const auto to = std::partition_point(from, entries.begin() + re, [&](const QEntry& q) { return q.see_lo <= k1; });
        for (auto q = from; q != to; ++q) walk.push_back(visit(*q, kp, j0));
      }
      if (walk.empty()) continue;
      if (stagger && std::none_of(walk.begin(), walk.end(), [](const Visit& v) { return v.mask; })) {
        // key tile k of n starts k / n of the way into its walk
        const long long n = (kp.len + kKeyTile - 1) / kKeyTile, k = j0 / kKeyTile;
        std::rotate(walk.begin(), walk.begin() + k * (long long)walk.size() / n, walk.end());
      }
      tiles.push_back({int(pc), j0, 0, int(walk.size())});
      walks.push_back(std::move(walk));
    }
  }
  std::vector<size_t> order(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return tiles[x].vcount > tiles[y].vcount; });
  std::vector<int> visits_of(deterministic ? plan.dq_tiles : 0, 0);
  for (size_t i : order) {
    Tile t = tiles[i];
    t.vbegin = int(plan.visits.size());
    for (Visit v : walks[i]) {
      if (deterministic) v.turn = visits_of[v.tile]++;
      plan.visits.push_back(v);
    }
    plan.tiles.push_back(t);
  }
  return plan;
}

}  // namespace tasp::kernels::bwd
