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

// Whether entry q's rows, against keys [j0, j0 + bn) of piece kp, need a mask: some key hidden from some
// row, or past the piece's end.
bool needs_mask(const QEntry& q, const KvPiece& kp, int j0, int bn) {
  const long long k0 = kp.pos0 + j0;
  return kp.len - j0 < bn || !(q.all_lo <= k0 && k0 + bn - 1 <= q.all_hi);
}

// The visit of entry q by the CTA of keys [j0, j0 + bn) of piece kp.
Visit visit(const QEntry& q, const KvPiece& kp, int j0, int bn) {
  Visit v{};
  v.tile = q.tile, v.qrow = q.qrow, v.rows = short(q.rows);
  v.mask = needs_mask(q, kp, j0, bn);
  if (v.mask) v.m = TileMask(q.band, kp.pos0 + j0, std::min(kp.len - j0, bn));
  return v;
}

}  // namespace

Plan make_plan(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, int bn, bool deterministic,
               bool stagger) {
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
  // Each CTA's walk as spans of its piece's entries, counted first and written once in launch order: the visits
  // are a pair of (query tile, key tile) each, 1.7 million at S = 128k, D = 128 (54 MB; the first version, a vector
  // per walk, took 150 ms there).
  struct Walk {
    Tile tile;
    int spans_begin, spans_end;  // into spans
    bool masked;                 // some visit masked: kept in order (no stagger)
  };
  std::vector<Walk> walks;
  std::vector<std::pair<int, int>> spans;  // [from, to) entries of per_piece[walk's piece]
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
    for (int j0 = 0; j0 < kp.len; j0 += bn) {
      const long long k0 = kp.pos0 + j0, k1 = kp.pos0 + std::min(kp.len, j0 + bn) - 1;
      Walk w{{int(pc), j0, 0, 0}, int(spans.size()), 0, false};
      for (const auto& [rb, re] : runs) {
        // First entry whose rows see up to k0 or beyond; first entry whose rows start past k1.
        const auto b = entries.begin();
        const int from = int(std::partition_point(b + rb, b + re, [&](const QEntry& q) { return q.see_hi < k0; }) - b);
        const int to = int(std::partition_point(b + from, b + re, [&](const QEntry& q) { return q.see_lo <= k1; }) - b);
        if (from == to) continue;
        spans.push_back({from, to});
        w.tile.vcount += to - from;
        // all_lo and all_hi rise with the rows, so a span's unmasked visits are consecutive: its ends tell.
        w.masked = w.masked || needs_mask(entries[from], kp, j0, bn) || needs_mask(entries[to - 1], kp, j0, bn);
      }
      w.spans_end = int(spans.size());
      if (w.tile.vcount > 0) walks.push_back(w);
    }
  }
  std::stable_sort(walks.begin(), walks.end(), [](const Walk& x, const Walk& y) { return x.tile.vcount > y.tile.vcount; });
  size_t total = 0;
  for (const Walk& w : walks) total += w.tile.vcount;
  plan.visits.reserve(total);
  plan.tiles.reserve(walks.size());
  std::vector<int> visits_of(deterministic ? plan.dq_tiles : 0, 0);
  std::vector<int> order;  // a walk's entries
  for (Walk& w : walks) {
    const KvPiece& kp = pieces[w.tile.piece];
    const auto& entries = per_piece[w.tile.piece];
    const int n = w.tile.vcount;
    order.clear();
    for (int sp = w.spans_begin; sp < w.spans_end; ++sp)
      for (int e = spans[sp].first; e < spans[sp].second; ++e) order.push_back(e);
    // Staggered: key tile k of a piece's kt starts k / kt of the way into its walk.
    const long long kt = (kp.len + bn - 1) / bn, k = w.tile.j0 / bn;
    const int shift = stagger && !w.masked ? int(k * n / kt) : 0;
    w.tile.vbegin = int(plan.visits.size());
    for (int i = 0; i < n; ++i) {
      Visit v = visit(entries[order[(shift + i) % n]], kp, w.tile.j0, bn);
      if (deterministic) v.turn = visits_of[v.tile]++;
      plan.visits.push_back(v);
    }
    plan.tiles.push_back(w.tile);
  }
  return plan;
}

std::vector<long long> plan_key(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, int bn,
                                bool deterministic, bool stagger) {
  std::vector<long long> key{bm, bn, deterministic, stagger, (long long)items.size(), (long long)pieces.size()};
  key.reserve(key.size() + 10 * items.size() + 2 * pieces.size());
  for (const WorkItem& it : items)
    key.insert(key.end(), {it.q_row0, it.q_len, it.q_pos0, it.piece_begin, it.piece_count, it.causal, it.k_begin, it.k_end,
                           it.window_left, it.window_right});
  for (const KvPiece& kp : pieces) key.insert(key.end(), {kp.len, kp.pos0});
  return key;
}

}  // namespace tasp::kernels::bwd
