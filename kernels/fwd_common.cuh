#pragma once
// What both forward kernels (mma.sync and Hopper wgmma) share: the launch parameters, the walk over an
// item's KV pieces, the causal/ragged mask, the online softmax on the mma C layout, and the epilogue that
// normalises, optionally folds into the running (out, lse), and stores.
//
// Register layout both kernels use for a 16 x N score or output block (the mma.sync/wgmma C layout):
// thread (g = lane / 4, t4 = lane % 4) holds, for each n8 chunk c, x[4c + e] = element
// (row g + 8 * (e / 2), column 8c + 2 * t4 + e % 2). So half hf of a thread's values is one row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/band.hpp"

namespace tasp::kernels::fwd {

// A CTA's query tile: its item, first row in it, and the item's first KV piece (-1: none), so that the producer
// reads the item and the piece together rather than one after the other.
struct Tile {
  int item, row0, piece;
};

struct Params {
  const void* q;
  float* out;
  float* lse;
  const WorkItem* items;
  const KvPiece* pieces;
  const Tile* tiles;
  int q_rows, H, Hkv;
  float scale_log2;
  float rescale_slack;  // online_softmax's slack (log2 units)
  // TMA tensor maps (128 bytes each, Hopper path only): [0] Q, [1] out, [2 + 2i] K and [3 + 2i] V of piece i.
  const unsigned char* tmaps;
  bool tma_store;  // the Hopper kernel may store rows that do not fold through TMA
  // The persistent grid's tasks (cta_grid's CTAs): their number, cta_grid's x, and the counter (0 at launch) that
  // hands out those after the first gridDim.x.
  int tasks, task_x;
  int* tickets;
};

// A CTA's tile and heads. The query heads that share a K/V head are adjacent in launch order
// (blockIdx.x = tile * group + i, blockIdx.y = K/V head), so the CTAs that read one K/V tile run together and
// all but the first read it from L2.
struct CtaTask {
  int tile, h, hk;
};
__device__ __forceinline__ CtaTask cta_task(const Params& p, int x, int y) {
  const int g = p.H / p.Hkv;
  return {x / g, y * g + x % g, y};
}
__device__ __forceinline__ CtaTask cta_task(const Params& p) { return cta_task(p, int(blockIdx.x), int(blockIdx.y)); }
inline dim3 cta_grid(const Params& p, int tiles, int B) { return dim3(tiles * (p.H / p.Hkv), p.Hkv, B); }
// Task `ticket` of the persistent grid: the CTA of that linear index in cta_grid (x fastest), and its batch.
__device__ __forceinline__ CtaTask ticket_task(const Params& p, int ticket, int& b) {
  b = ticket / (p.task_x * p.Hkv);
  return cta_task(p, ticket % p.task_x, (ticket / p.task_x) % p.Hkv);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory without waiting (completion: cp_async_commit, cp_async_wait_all).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  // src-size 0 fills the 16 bytes with zeros: ragged tails read nothing out of bounds.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Keeps the compiler from moving accesses to wgmma accumulators across the asm that waits for them.
template <int N>
__device__ __forceinline__ void fence_regs(float* x) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(x[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t* x) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(x[i])::"memory");
}

// Four 8 x 8 16-bit matrices in the mma C layout (register j of every lane: matrix j) stored transposed: lane l
// gives the shared address of row l % 8 of matrix l / 8, which receives that matrix's column.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

// The same four matrices stored as they are: lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]),
               "r"(r[3])
               : "memory");
#endif
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// P (a 16 x 16 slice of the C layout, chunks 2kt and 2kt+1) as the A operand of the next MMA.
template <typename T>
__device__ __forceinline__ void pack_a(uint32_t (&a)[4], const float* s, int kt) {
  const float* c = s + 8 * kt;
  a[0] = pack2<T>(c[0], c[1]);
  a[1] = pack2<T>(c[2], c[3]);
  a[2] = pack2<T>(c[4], c[5]);
  a[3] = pack2<T>(c[6], c[7]);
}

// The keys a CTA's rows [qlo, qhi] see, as 32-bit offsets from qlo (registers are what the consumer warps
// have least of, so these four ints are all a CTA keeps of its mask while it walks): the rows together see
// [see_lo, see_hi], every row sees [all_lo, all_hi].
struct TileSpan {
  long long qlo;
  int see_lo, see_hi, all_lo, all_hi;
  __device__ __forceinline__ TileSpan(const Band& b, long long qlo_, long long qhi) : qlo(qlo_) {
    see_lo = rel(b.lo(qlo)), see_hi = rel(b.hi(qhi)), all_lo = rel(b.lo(qhi)), all_hi = rel(b.hi(qlo));
  }
  __device__ __forceinline__ int rel(long long x) const { return rel32(x - qlo); }
};

// The item's (piece, first key) tiles in order, skipping every tile no row of the CTA sees (keys before the
// rows' first visible key, after their last: the causal diagonal, the document, the window). A skip to the
// left jumps straight to the tile holding the first visible key. The piece being walked stays in registers;
// the list is read again only on a new piece.
struct KvWalk {
  int pc, pend, j0;
  KvPiece kp;

  __device__ __forceinline__ KvWalk(const Params& p, const WorkItem& it) : pc(it.piece_begin), pend(it.piece_begin + it.piece_count), j0(0), kp{} {
    if (pc < pend) kp = p.pieces[pc];
  }
  // With the item's first piece already read (Tile::piece).
  __device__ __forceinline__ KvWalk(const WorkItem& it, const KvPiece& first)
      : pc(it.piece_begin), pend(it.piece_begin + it.piece_count), j0(0), kp(first) {}
  // Moves to the first tile of BN keys at or after the current one that the CTA's rows see; false at the end.
  template <int BN>
  __device__ __forceinline__ bool settle(const Params& p, const TileSpan& ts) {
    while (pc < pend) {
      if (j0 < kp.len && ts.rel(kp.pos0 + j0) <= ts.see_hi) {
        const int first = ts.rel(kp.pos0 + j0);
        if (first + BN - 1 >= ts.see_lo) return true;
        j0 += (ts.see_lo - first) / BN * BN;
        continue;
      }
      if (++pc < pend) kp = p.pieces[pc];
      j0 = 0;
    }
    return false;
  }
  // Element offset of key j0 of batch b, KV head hk, in the piece's K (and V) buffer.
  template <int D>
  __device__ __forceinline__ long long offset(int b, int hk, int Hkv) const {
    const long long bstride = kp.batch_stride ? kp.batch_stride : (long long)kp.len * Hkv * D;
    return b * bstride + ((long long)j0 * Hkv + hk) * D;
  }
  // Whether the tile needs masking: a ragged tail, or a key some row of the CTA does not see. A first key at the
  // clamp (2^29 or more before the rows) counts as masked: there the clamped all_lo no longer orders it.
  template <int BN>
  __device__ __forceinline__ bool partial(const TileSpan& ts) const {
    const int first = ts.rel(kp.pos0 + j0);
    return j0 + BN > kp.len || first < ts.all_lo || first <= -int(kRelMax) || first + BN - 1 > ts.all_hi;
  }
};

// -inf at the columns of `s` (N of the thread's two rows, the mma C layout) outside [lo[hf], hi[hf]] for row hf.
template <int N>
__device__ __forceinline__ void mask_cols(float* s, const int (&lo)[2], const int (&hi)[2], int t4) {
#pragma unroll
  for (int c = 0; c < N / 8; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = c * 8 + 2 * t4 + (e & 1);
      if (col < lo[e / 2] || col > hi[e / 2]) s[4 * c + e] = -INFINITY;
    }
}

// -inf at the columns of `s` (N columns of the thread's rows r and r + 8, the mma C layout) that those rows do not
// see of the key tile `m` describes.
template <int N>
__device__ __forceinline__ void mask_rows(float* s, const TileMask& m, int r, int t4) {
  const int lo[2] = {m.first(r), m.first(r + 8)}, hi[2] = {m.last(r), m.last(r + 8)};
  mask_cols<N>(s, lo, hi, t4);
}

// One online-softmax step (base 2) over N columns: turns scores into P against the running maxima, updates m and
// l, and returns in alpha the factors the old O must be scaled by. A row's running maximum moves only when the
// tile's passes it by more than `slack` (log2 units; FlashAttention-4's conditional rescale): P then stays
// below 2^slack, and O needs rescaling only when some row of the warp moved (returned), which after the first
// tiles is rare. With slack 0 the maximum follows every increase.
template <int N>
__device__ __forceinline__ bool online_softmax(float* s, float (&m)[2], float (&l)[2], float (&alpha)[2], float scale_log2,
                                               float slack) {
  bool grew = false;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < N / 8; ++c) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * hf], s[4 * c + 2 * hf + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
    const float mx2 = mx * scale_log2;
    const bool moves = mx2 > m[hf] + slack;  // a row's first visible key always moves it (m = -inf)
    const float m_new = moves ? mx2 : m[hf];
    const float base = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet
    alpha[hf] = exp2f(m[hf] - base);
    grew |= moves;
    m[hf] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < N / 8; ++c) {
      const float p0 = exp2f(s[4 * c + 2 * hf] * scale_log2 - base);
      const float p1 = exp2f(s[4 * c + 2 * hf + 1] * scale_log2 - base);
      s[4 * c + 2 * hf] = p0;
      s[4 * c + 2 * hf + 1] = p1;
      sum += p0 + p1;
    }
    l[hf] = l[hf] * alpha[hf] + sum;
  }
  return __any_sync(0xffffffff, grew);
}

template <int D>
__device__ __forceinline__ void rescale(float* o, const float (&alpha)[2]) {
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
    o[4 * c + 0] *= alpha[0], o[4 * c + 1] *= alpha[0];
    o[4 * c + 2] *= alpha[1], o[4 * c + 3] *= alpha[1];
  }
}

// Where a CTA's rows go: batch, query head, its first row in q / out / lse, how many rows it has, and whether
// they fold into the running (out, lse).
struct RowsOut {
  int b, h, qrow, rows;
  bool accumulate;
};

constexpr float kLn2 = 0.6931471805599453f;  // the epilogues' LSE: log2 units to natural log
// A row's softmax sum from the quad of threads that share the row (every lane of the warp calls it).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// Epilogue for the thread's two rows r0 and r0 + 8 (of the CTA's tile): normalise O, fold into the running
// (out, lse) when the item accumulates, store. Rows at or past `rows` belong to no query and are skipped.
template <int D>
__device__ __forceinline__ void store_rows(const Params& p, const RowsOut& to, int r0, const float* o, const float (&m)[2],
                                           const float (&l)[2], int lane) {
  const int g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float sum = quad_sum(l[hf]);
    const int r = r0 + 8 * hf;
    if (r >= to.rows) continue;  // the whole quad shares the row, so it skips together
    const long long row = (long long)to.b * p.q_rows + to.qrow + r;
    float lse = sum > 0.f ? (m[hf] + __log2f(sum)) * kLn2 : -INFINITY;
    float w_new = sum > 0.f ? 1.f / sum : 0.f, w_old = 0.f;
    float* lse_ptr = p.lse + ((long long)to.b * p.H + to.h) * p.q_rows + to.qrow + r;
    float* out_row = p.out + (row * p.H + to.h) * D;
    if (to.accumulate) {
      const float old = *lse_ptr;
      const float mx = fmaxf(old, lse);
      if (mx == -INFINITY) {
        w_new = 0.f;
      } else {
        const float eo = __expf(old - mx), en = __expf(lse - mx);
        const float tot = eo + en;
        w_old = eo / tot;
        w_new *= en / tot;
        lse = mx + __logf(tot);
      }
    }
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      float2* dst = reinterpret_cast<float2*>(out_row + c * 8 + 2 * t4);
      float2 v = make_float2(o[4 * c + 2 * hf] * w_new, o[4 * c + 2 * hf + 1] * w_new);
      if (to.accumulate) {
        const float2 prev = *dst;
        v.x += w_old * prev.x;
        v.y += w_old * prev.y;
      }
      *dst = v;
    }
    __syncwarp(0xfu << (4 * g));  // the quad has read the old lse before one lane replaces it
    if (t4 == 0) *lse_ptr = lse;
  }
}

}  // namespace tasp::kernels::fwd
