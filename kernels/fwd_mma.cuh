#pragma once
// FlashAttention-2-style forward (any sm_80+): tensor-core mma.sync (m16n8k16, fp32 accumulate),
// ldmatrix from XOR-swizzled shared memory, cp.async double buffering of K/V tiles, online softmax in
// base 2. The reference path (TASP_ATTN_SM90=0); the Hopper path in fwd_sm90.cuh is the fast one.
//
// A CTA of WARPS warps owns 16 * WARPS * MT query rows of one (batch, head) of one item; each warp owns
// MT m16 tiles, which share every K/V fragment it loads (halving shared-memory traffic per MMA).
#include "kernels/cuda_check.hpp"
#include "kernels/fwd_common.cuh"

namespace tasp::kernels::fwd {

template <int WARPS, int MT, int BN, int MIN_BLOCKS>
struct MmaShape {
  static constexpr int kMT = MT, kBlockN = BN, kThreads = WARPS * 32, kBlockM = 16 * WARPS * MT;
  static constexpr int kMinBlocks = MIN_BLOCKS;
};
// Measured on one H200 (docs/measurements/kernels.md): 4 warps x 2 m-tiles x 64 keys beat 4x2x32, 8x1x64,
// 8x1x32, and 3 CTAs per SM for D=64 (register-capped, it spills).
using MmaTiles = MmaShape<4, 2, 64, 2>;

// Element offset of (row, col) in a [rows][D] tile whose 16-byte chunks are XOR-swizzled by row,
// so that 8 rows read at one column land in 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Shared address of the 16-byte chunk an ldmatrix lane reads: row `row` (row & 7 == lane & 7 for every
// ldmatrix row pattern used here), chunk `chunk`, of a swizzled [rows][D] tile at `tile` (rows are 2*D
// bytes, a multiple of 128, and tiles are 1024-aligned). Chunk indices step by 2 (16 columns) in the
// loops; since the swizzle is an XOR, stepping by k*16 columns is `lane_base ^ (k * 32)`: one register
// per lane and an immediate per step, instead of an address per (step, lane).
template <int D>
__device__ __forceinline__ uint32_t lane_base(uint32_t tile, int row, int chunk) {
  return tile + row * (2 * D) + ((chunk ^ (row & 7)) << 4);
}

template <typename T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* c, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float* c, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rows x D elements from `src` (row stride `stride` elements) into a swizzled tile; rows >= valid are zero.
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(T* dst, const T* src, long long stride, int valid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int i = threadIdx.x; i < ROWS * kChunks; i += THREADS) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < valid;
    cp_async16(dst + swz<D>(r, c * 8), ok ? src + r * stride + c * 8 : src, ok);
  }
}

template <typename T, int D, class S>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) attention_fwd_mma_kernel(const Params p) {
  constexpr int kThreads = S::kThreads, kBlockM = S::kBlockM, kBlockN = S::kBlockN, MT = S::kMT;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * D;        // [2][kBlockN][D]
  T* sV = sK + 2 * kBlockN * D;    // [2][kBlockN][D]

  const CtaTask task = cta_task(p);
  const Tile tile = p.tiles[task.tile];
  const WorkItem it = p.items[tile.item];
  const int h = task.h, hk = task.hk, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int rows = min(kBlockM, it.q_len - tile.row0);
  const long long qpos_lo = it.q_pos0 + tile.row0, qpos_hi = qpos_lo + rows - 1;
  const TileSpan span(Band(it), qpos_lo, qpos_hi);

  const T* q = static_cast<const T*>(p.q) + ((long long)b * p.q_rows + it.q_row0 + tile.row0) * p.H * D + (long long)h * D;
  load_tile<T, D, kBlockM, kThreads>(sQ, q, (long long)p.H * D, rows);

  auto issue_kv = [&](const KvWalk& w, int buf) {
    const long long off = w.offset<D>(b, hk, p.Hkv);
    const int valid = min(kBlockN, w.kp.len - w.j0);
    load_tile<T, D, kBlockN, kThreads>(sK + buf * kBlockN * D, static_cast<const T*>(w.kp.k) + off, (long long)p.Hkv * D, valid);
    load_tile<T, D, kBlockN, kThreads>(sV + buf * kBlockN * D, static_cast<const T*>(w.kp.v) + off, (long long)p.Hkv * D, valid);
  };

  KvWalk walk(p, it);
  bool have = walk.settle<kBlockN>(p, span);
  if (have) issue_kv(walk, 0);
  cp_async_commit();

  float o[MT][D / 2];
  float m[MT][2], l[MT][2];
  uint32_t qf[MT == 1 ? D / 16 : 1][4];  // one m-tile per warp: Q fragments stay in registers
  bool q_loaded = false;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[mt][i] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  const uint32_t q_base = lane_base<D>(smem_addr(sQ), warp * MT * 16 + (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  int buf = 0;
  while (have) {
    cp_async_wait_all();
    __syncthreads();
    const KvWalk cur = walk;
    // Prefetch the next tile into the other buffer while this one is used.
    walk.j0 += kBlockN;
    const bool more = walk.settle<kBlockN>(p, span);
    if (more) issue_kv(walk, buf ^ 1);
    cp_async_commit();

    const uint32_t k_base = lane_base<D>(smem_addr(sK + buf * kBlockN * D), (lane % 8) + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t v_base = lane_base<D>(smem_addr(sV + buf * kBlockN * D), (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
    float s[MT][kBlockN / 2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) s[mt][i] = 0.f;

#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[MT][4];
      if constexpr (MT == 1) {
        if (!q_loaded) ldmatrix_x4(qf[ks], q_base ^ (ks * 32));
        a[0][0] = qf[ks][0], a[0][1] = qf[ks][1], a[0][2] = qf[ks][2], a[0][3] = qf[ks][3];
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(a[mt], (q_base + mt * 16 * 2 * D) ^ (ks * 32));
      }
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, (k_base + np * 16 * 2 * D) ^ (ks * 32));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(&s[mt][8 * np], a[mt], bk[0], bk[1]);
          mma16816<T>(&s[mt][8 * np + 4], a[mt], bk[2], bk[3]);
        }
      }
    }
    q_loaded = true;

    // Mask only where needed: a ragged tail, or a tile the causal diagonal, a document edge or the window cuts.
    const bool partial = cur.partial<kBlockN>(span);
    bool grew = false;
    float alpha[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (partial)
        mask_rows<kBlockN>(s[mt], TileMask(RowsBand(Band(p.items[tile.item]), qpos_lo), cur.kp.pos0 + cur.j0, min(kBlockN, cur.kp.len - cur.j0)),
                           (warp * MT + mt) * 16 + g, t4);
      grew |= online_softmax<kBlockN>(s[mt], m[mt], l[mt], alpha[mt], p.scale_log2, p.rescale_slack);
    }
    if (grew)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) rescale<D>(o[mt], alpha[mt]);

    // O += P V, converting P to the A layout one 16-key slice at a time so S's registers free up as it goes.
#pragma unroll
    for (int kt = 0; kt < kBlockN / 16; ++kt) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) pack_a<T>(pa[mt], s[mt], kt);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, (v_base + kt * 16 * 2 * D) ^ (dp * 32));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(&o[mt][8 * dp], pa[mt], bv[0], bv[1]);
          mma16816<T>(&o[mt][8 * dp + 4], pa[mt], bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // everyone is done with `buf` before it is refilled
    buf ^= 1;
    have = more;
  }
  cp_async_wait_all();

  const RowsOut to{b, h, it.q_row0 + tile.row0, rows, it.accumulate};
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) store_rows<D>(p, to, (warp * MT + mt) * 16 + g, o[mt], m[mt], l[mt], lane);
}

template <typename T, int D>
void launch_mma(const Params& p, int tiles, int B, cudaStream_t s) {
  using S = MmaTiles;
  constexpr int smem = (S::kBlockM + 4 * S::kBlockN) * D * sizeof(T);
  allow_dynamic_smem<attention_fwd_mma_kernel<T, D, S>>(smem);
  attention_fwd_mma_kernel<T, D, S><<<cta_grid(p, tiles, B), S::kThreads, smem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

}  // namespace tasp::kernels::fwd
