#pragma once
// The keys a work item's rows see, one interval per row (planner/mask.hpp's shape): a row at position q sees
// [lo(q), hi(q)], its document cut by the window and by causality, and lo, hi never decrease with q. So the
// rows [q0, q1] of a tile together see [lo(q0), hi(q1)], and all of them see [lo(q1), hi(q0)]: whole tiles are
// skipped or left unmasked from four numbers. Host and device.
#include "kernels/attention.hpp"
#include "kernels/host_device.hpp"

namespace tasp::kernels {

struct Band {
  long long k_begin, k_end;
  int wl, wr;
  bool causal;
  TASP_HD explicit Band(const WorkItem& it)
      : k_begin(it.k_begin), k_end(it.k_end), wl(it.window_left), wr(it.window_right), causal(it.causal) {}
  TASP_HD long long lo(long long q) const {
    long long x = k_begin;
    if (wl >= 0 && q - wl > x) x = q - wl;
    return x;
  }
  TASP_HD long long hi(long long q) const {
    long long x = k_end - 1;
    if (causal && q < x) x = q;
    if (wr >= 0 && q + wr < x) x = q + wr;
    return x;
  }
  // No row of [q0, q1] sees a key of [k0, k1].
  TASP_HD bool none(long long q0, long long q1, long long k0, long long k1) const { return k1 < lo(q0) || k0 > hi(q1); }
  // Every row of [q0, q1] sees every key of [k0, k1].
  TASP_HD bool all(long long q0, long long q1, long long k0, long long k1) const { return k0 >= lo(q1) && k1 <= hi(q0); }
};

// Offsets from a tile's first row or key, clamped to +-kRelMax so the kernels compare them in 32 bits. Exact for
// masks: a key that far from a tile's rows is seen by all of them or by none, on either side of the clamp.
constexpr long long kRelMax = 1LL << 29;
TASP_HD int rel32(long long x) { return int(x < -kRelMax ? -kRelMax : x > kRelMax ? kRelMax : x); }

// The band of the rows from position q0 on, with the row as the variable: row r (position q0 + r) sees keys
// [max(k_first, l0 + r), min(k_last, h0 + r)]: the document, the left window in l0, causality and the right
// window folded into h0 (an unbounded side at +-2^62).
struct RowsBand {
  long long k_first, k_last, l0, h0;
  RowsBand() = default;
  TASP_HD RowsBand(const Band& b, long long q0) : k_first(b.k_begin), k_last(b.k_end - 1), l0(-(1LL << 62)), h0(1LL << 62) {
    if (b.wl >= 0) l0 = q0 - b.wl;
    if (b.causal) h0 = q0;
    if (b.wr >= 0 && q0 + b.wr < h0) h0 = q0 + b.wr;
  }
};

// One key tile's mask as the rows of a RowsBand see it, in 32-bit offsets from the tile's first key key0: row r
// sees the tile's columns [first(r), last(r)] (empty when first > last). `keys`: the tile's keys before its
// piece ends. What every kernel masks with (the forwards by row, the backward by query column), built once per
// tile by the thread that walks, so the threads that mask read four ints and no work item. Exact for r and
// columns below 2^28.
struct TileMask {
  int lo, hi, dl, dh;
  TileMask() = default;
  TASP_HD TileMask(const RowsBand& rb, long long key0, int keys)
      : lo(rel32(rb.k_first - key0)), hi(rel32(rb.k_last - key0)), dl(rel32(rb.l0 - key0)), dh(rel32(rb.h0 - key0)) {
    if (keys - 1 < hi) hi = keys - 1;
  }
  TASP_HD int first(int r) const { return lo > dl + r ? lo : dl + r; }
  TASP_HD int last(int r) const { return hi < dh + r ? hi : dh + r; }
};

}  // namespace tasp::kernels

