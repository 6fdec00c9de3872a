#pragma once
// The keys a work item's rows see, one interval per row (planner/mask.hpp's shape): a row at position q sees
// [lo(q), hi(q)], its document cut by the window and by causality, and lo, hi never decrease with q. So the
// rows [q0, q1] of a tile together see [lo(q0), hi(q1)], and all of them see [lo(q1), hi(q0)]: whole tiles are
// skipped or left unmasked from four numbers. Host and device.
#include "kernels/attention.hpp"

#ifdef __CUDACC__
#define TASP_HD __host__ __device__ __forceinline__
#else
#define TASP_HD inline
#endif

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

}  // namespace tasp::kernels

#undef TASP_HD
