#pragma once
// Hopper backward for the wide head dim (D=256, sm_90a), in FlashAttention-3's layout for it: a CTA owns 64 keys of
// one KV piece, one KV head and one batch and walks 64-row query tiles (the same plan, visits and masks as
// bwd_sm90.cuh, with 64-key tiles). Where bwd_sm90.cuh's layout (keys as the M of every product, dK and dV in
// registers as 64 keys x D) would need 256 accumulator registers a thread at D=256, here the head dim is the M of the
// three products that leave D-wide results, split between the two warpgroups, so no product is done twice:
//   S   = Q K_w^T    (64 queries x 32 keys, warpgroup w's half of the keys; ss, both K-major)
//   dP  = dO V_w^T   (the same shape)                         P = exp2(S scale log2e - LSE log2e), dS = P (dP - D)
// P and dS go to shared memory ([query][key], 128-byte swizzle) and, once both halves are there (a CTA barrier a
// tile: every product below needs all 64 keys), each warpgroup computes for its 128 head-dim rows (two 64-row halves)
//   dV^T += dO^T P   (ss: dO and P MN-major)                  dK^T += Q^T dS   (ss: Q and dS MN-major)
//   dQ^T  = K^T dS^T (ss: K MN-major, dS K-major)
// dV^T and dK^T stay in registers across the walk (2 x 2 x 32 a thread) and are added to the piece's accumulator with
// reductions at the end. dQ^T (2 x 32) goes into the dQ scratch in bwd_common.cuh's layout (block 2 w + half of a
// 64-row tile), by default (PIPE) with red.global.add.v4.f32 straight from registers while the next tile's S and dP
// run: a stage is then free once both warpgroups' dK^T and dV^T have read it, and tile t + 2's copies go into it in
// tile t. The deterministic dQ takes its turns at bulk reduces instead: dQ^T is staged in the tile's own stage, which
// needs no shared memory of its own (after the barrier only warpgroup w reads its head-dim blocks 2w, 2w+1 of the
// tile's Q and dO: S and dP, which read all of them, are done), and the stage is free once both reduces have read it.
// 32 KB of K and V each, two stages of Q and dO (64 KB each), P and dS double-buffered (32 KB): 224 KB. Measured
// step by step on one H100 (docs/measurements/kernels.md): 1.25x the two-CTA split this replaced; the pipelined dQ^T
// +4-6%; the next tile's LSE and D fetched under its S and dP and the reductions at the end +8-16% (each had held the
// warps 8% of Nsight Compute's samples). Tried and dropped at the short walk (B=2 S=8192 causal, where the next tile's
// LSE/D loads and the read of its entry still hold 23% of the samples): the entry read before the stage's wait (4.7%
// slower), the loads' scaling and select moved to the softmax so nothing waits where they are issued (level). Since
// then the LSE and D come by TMA with the tile's Q and dO (Loader: level, +0.1% at that walk).
#include <cstdint>

#include "kernels/bwd_common.cuh"
#include "kernels/cuda_check.hpp"
#include "kernels/wgmma.cuh"

namespace tasp::kernels::bwd::wide {

template <int D>
struct Shape {
  static_assert(D == 256, "the wide backward is for D=256");
  static constexpr int WG = 2, STAGES = 2, BM = visit_rows(D), BN = 64, kThreads = 128 * WG;
  static constexpr int kQdBlocks = D / 64;                // 64-column blocks of Q, dO, K, V
  static constexpr int kKvBytes = BN * D * 2;             // 32 KB
  static constexpr int kQBytes = BM * D * 2;              // 32 KB
  static constexpr int kQdBlockBytes = BM * 128;          // one 64-column block of Q or dO (8 KB)
  static constexpr int kKvBlockBytes = BN * 128;          // one of K or V (8 KB)
  static constexpr int kPBytes = BM * BN * 2;             // P or dS of a tile (8 KB)
  static constexpr int kOwnBlocks = kQdBlocks / WG;       // head-dim blocks a warpgroup owns (2)
  static constexpr int kSlots = 4, kSlotBytes = 64;
  static constexpr int kBarriers = 1 + 2 * STAGES;        // kv_full, qd_full[], qd_empty[]
  // A stage's LSE and D (Loader; BM + 4 floats each: rows_first), each padded to 128 bytes.
  static constexpr int kRowBox = BM + 4, kRowArr = (kRowBox * 4 + 127) / 128 * 128, kRowBytes = STAGES * 2 * kRowArr;
  static constexpr int kSmem = 2 * kKvBytes + 2 * STAGES * kQBytes + 2 * 2 * kPBytes + kRowBytes + kSlots * kSlotBytes +
                               2 * int(sizeof(Visit)) + 8 * kBarriers;
  static_assert(kSmem <= 227 * 1024, "more shared memory than a Hopper CTA can have");
  static_assert(kOwnBlocks * kQdBlockBytes * 2 == 64 * 64 * 4 * kOwnBlocks, "a warpgroup's dQ^T halves fill its Q and dO blocks");
};

// Q and dO column blocks per TMA copy: all four through the 5-d map, one by one with the deterministic dQ (as
// bwd_sm90.cuh's qd_blocks_per_copy).
__host__ __device__ constexpr int qd_blocks_per_copy(bool deterministic) { return deterministic ? 1 : 4; }

// acc (64 head-dim rows x 64 keys) += X^T (one 64-column block of a [64 queries][64] tile, MN-major) * Y (the
// tile's P or dS, [64 queries][64 keys], MN-major).
template <typename T>
__device__ __forceinline__ void issue_dkv(float (&acc)[32], uint32_t x_block, uint32_t y) {
  const sm90::Sw128 xd(x_block, 8192, 1024), yd(y, 8192, 1024);
#pragma unroll
  for (int kt = 0; kt < 4; ++kt) sm90::wgmma_ss<T, 64, 1, 1>(acc, xd.at(kt * 2048), yd.at(kt * 2048), 1);
}

// PIPE: dQ^T added to the scratch from registers (red.global.add.v4.f32), so a stage is free once both warpgroups'
// dK^T and dV^T have read it, and the next tile's S and dP issued before this tile's dQ^T is added (they run under
// it); else dQ^T staged in the tile's stage and bulk-reduced (the deterministic dQ takes turns so).
template <typename T, int D, bool DET, bool PIPE>
__global__ void __launch_bounds__(Shape<D>::kThreads, 1) attention_bwd_wide_kernel(const Params p) {
  static_assert(!(DET && PIPE), "the deterministic dQ takes turns at bulk reduces");
  using S = Shape<D>;
  constexpr int STAGES = S::STAGES, BM = S::BM;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* sK = smem_raw;                     // [4 blocks][64 keys][128 B]
  unsigned char* sV = sK + S::kKvBytes;
  unsigned char* sQ = sV + S::kKvBytes;             // [STAGES][4 blocks][64 rows][128 B]
  unsigned char* sdO = sQ + STAGES * S::kQBytes;
  unsigned char* sP = sdO + STAGES * S::kQBytes;    // [2 buffers][64 queries][64 keys]
  unsigned char* sdS = sP + 2 * S::kPBytes;
  unsigned char* sRows = sdS + 2 * S::kPBytes;      // the Loader's: [STAGES][LSE, D] first
  // Trace builds (tools/gpu/trace.sh bwd; PIPE): each tile's start (event 0: its S and dP in), P packed (1), P and
  // dS stored (2), past the P/dS barrier (3), dK^T/dV^T done (4), the next tile's S and dP issued (5), its end (6:
  // dQ^T added, the next S and dP in), and the CTA's entry and end.
  const Cta cta = enter(p, DET);
  const Tile& tile = cta.tile;
  const KvPiece& kp = cta.kp;
  const int hk = cta.hk, b = cta.b;
  // Thread 0 walks and loads as in bwd_sm90.cuh (bwd_common.cuh's Loader); with PIPE tile t + 2's copies are issued
  // in tile t (a stage is free earlier), so the walk is resolved a tile further ahead. Its ~960 cycles a tile (resolve
  // 280, stage wait 295, copies 380 of a 6,113-cycle period) sit on warpgroup 0's path, yet taking them off it did not
  // shorten the period (tools/gpu/trace.sh bwd, one H100, 2026-11-27, kernels.md): in warpgroup 1's first thread 2-3%
  // slower, its copies alone there 2-3%, a producer warpgroup (setmaxnreg 24/240, dQ^T added before the next S and
  // dP so that it fits) 3-5%. dQ^T's adds set the period: 64 KB of fp32 reductions a tile, 1.6x as fast without them
  // (-DTASP_BWD_WIDE_NODQ below; kernels.md).
  constexpr int kWalker = 0;
  Loader<S, qd_blocks_per_copy(DET), DET> ld(p, cta, sRows, sQ, sdO);
  const QTile* const slots = ld.slots;
  if (threadIdx.x == kWalker) ld.init(S::WG);  // a stage is free once both warpgroups are done with it (one arrival each)
  __syncthreads();
  if (threadIdx.x == kWalker) {
    ld.start(tile, hk, sK, sV);
    if constexpr (PIPE) ld.resolve();
    ld.load_next();
    if constexpr (PIPE) ld.load_next();
    TASP_BWD_CTA(4);
  }

  const int w = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4, wt = threadIdx.x % 128;
  const int row0 = warp * 16 + g;  // the thread's first query row of S and dP (the second is row0 + 8)
  float dv[2][32], dk[2][32];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
#pragma unroll
    for (int i = 0; i < 32; ++i) dv[hh][i] = 0.f, dk[hh][i] = 0.f;
  const uint32_t k_addr = fwd::smem_addr(sK), v_addr = fwd::smem_addr(sV);
  sm90::mbar_wait(ld.kv_full(), 0);

  // P and dS of a tile as stmatrix writes them ([query][key] rows of 128 bytes, 16-byte chunks swizzled by the
  // row): lane l addresses row l % 8 of matrix l / 8 (matrix j: queries 8 (j % 2), keys 8 (j / 2) of the 16-key
  // slice kt of the warpgroup's 32 keys).
  const int lrow = warp * 16 + lane % 8 + 8 * (lane / 8 % 2);
  const uint32_t pds_lane = lrow * 128;
  auto pds_chunk = [&](int kt) { return uint32_t(((4 * w + 2 * kt + lane / 16) ^ (lrow % 8)) << 4); };

  // The dQ^T halves staged by warpgroup w in its own blocks of the tile's Q (half 0) and dO (half 1).
  auto stage_of = [&](int st, int hh) { return (hh ? sdO : sQ) + st * S::kQBytes + w * S::kOwnBlocks * S::kQdBlockBytes; };
  int* held = nullptr;  // deterministic dQ: the first of the warpgroup's two counters whose turn it holds
  int held_next = 0;
  int prev_st = -1;     // the stage whose staged dQ^T the warpgroup's reduce may still be reading
  float s[16], dp[16];
  // S and dP of the tile in stage st (two commit groups): each 64 queries x the warpgroup's 32 keys over the head dim,
  // A the tile's Q or dO, B the CTA's K or V rows (both K-major).
  auto issue_sdp = [&](int st) {
    auto product = [&](float(&acc)[16], uint32_t a, uint32_t b) {
      const sm90::Sw128 ad(a, 16, 1024), bd(b + w * 32 * 128, 16, 1024);
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
        sm90::wgmma_ss<T, 32, 0, 0>(acc, ad.at((ks / 4) * S::kQdBlockBytes + (ks % 4) * 32),
                                    bd.at((ks / 4) * S::kKvBlockBytes + (ks % 4) * 32), ks > 0 ? 1 : 0);
      sm90::wgmma_commit();
    };
    sm90::wgmma_fence();
    product(s, fwd::smem_addr(sQ + st * S::kQBytes), k_addr);
    product(dp, fwd::smem_addr(sdO + st * S::kQBytes), v_addr);
  };
  // The thread's rows' LSE (times log2 e) and D from stage st (TMA brought them with the tile's Q and dO); past the
  // tile's rows no query: P = 0, D = 0.
  auto load_rows = [&](int st, const QTile& c, int rows, float (&l2)[2], float (&dd)[2]) {
    const float* lse = reinterpret_cast<const float*>(sRows + st * 2 * S::kRowArr) + (rows_first(p, b, c.h, c.qrow) & 3);
    const float* dsum = lse + S::kRowArr / 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int q = row0 + 8 * i;
      l2[i] = q < rows ? lse[q] * 1.4426950408889634f : INFINITY;
      dd[i] = q < rows ? dsum[q] : 0.f;
    }
  };
  float l2n[2], ddn[2];  // PIPE: the next tile's, fetched under its S and dP (fetched at the tile's start: 8% of the samples)
  if constexpr (PIPE) {  // a CTA walks at least one tile; done here, so that no wgmma is in flight at the loop's exit
    sm90::mbar_wait(ld.qd_full(0), 0);
    issue_sdp(0);
    load_rows(0, slots[0], slots[0].rows, l2n, ddn);
    sm90::wgmma_wait<0>();
  }
  int t = 0;
  for (;; ++t) {
    const int st = t % STAGES;
    if constexpr (!PIPE) sm90::mbar_wait(ld.qd_full(st), (t / STAGES) & 1);  // PIPE: waited for by the tile before
    const QTile c = slots[t % S::kSlots];
    if (c.tile < 0) break;
    TASP_BWD_MARK(0);
    const uint32_t q_addr = fwd::smem_addr(sQ + st * S::kQBytes), do_addr = fwd::smem_addr(sdO + st * S::kQBytes);
    if constexpr (!PIPE) issue_sdp(st);
    // The tile before's reduces have read its stage (and, deterministic, are done and their turn passed on):
    // the stage is free for tile t + 1's copies.
    if (!PIPE && wt == 0 && prev_st >= 0) {
      if constexpr (DET) {
        sm90::bulk_wait();
        sm90::fence_proxy_async_global();
        sm90::st_release(held, held_next), sm90::st_release(held + 1, held_next);
      } else {
        sm90::bulk_wait_read();
      }
      sm90::mbar_arrive(ld.qd_empty(prev_st));
    }
    if (!PIPE && threadIdx.x == kWalker) ld.load_next();
    float l2[2], dd[2];
    if constexpr (PIPE) {
      l2[0] = l2n[0], l2[1] = l2n[1], dd[0] = ddn[0], dd[1] = ddn[1];
    } else {
      load_rows(st, c, c.rows, l2, dd);
    }
    sm90::wgmma_wait<1>();
    fwd::fence_regs<16>(s);
    // P: element e of chunk ch is query row0 + 8 (e / 2), key 32 w + 8 ch + 2 t4 + (e % 2) of the tile.
    if (c.mask) {
      const TileMask m = slots[c.slot].m;
      const int lo[2] = {m.first(row0), m.first(row0 + 8)}, hi[2] = {m.last(row0), m.last(row0 + 8)};
#pragma unroll
      for (int ch = 0; ch < 4; ++ch)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = 32 * w + 8 * ch + 2 * t4 + (e & 1);
          const float v = exp2f(s[4 * ch + e] * p.scale_log2 - l2[e / 2]);
          s[4 * ch + e] = key < lo[e / 2] || key > hi[e / 2] ? 0.f : v;
        }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) s[i] = exp2f(s[i] * p.scale_log2 - l2[(i / 2) % 2]);
    }
    uint32_t pa[2][4];
#pragma unroll
    for (int kt = 0; kt < 2; ++kt) fwd::pack_a<T>(pa[kt], s, kt);
    TASP_BWD_MARK(1);
    sm90::wgmma_wait<0>();
    fwd::fence_regs<16>(dp);
#pragma unroll
    for (int i = 0; i < 16; ++i) dp[i] = s[i] * (dp[i] - dd[(i / 2) % 2]);
    uint32_t da[2][4];
#pragma unroll
    for (int kt = 0; kt < 2; ++kt) fwd::pack_a<T>(da[kt], dp, kt);
    // Buffer t & 1: its readers two tiles back finished before the other warpgroup reached the barrier of the
    // tile before.
    const uint32_t p_buf = fwd::smem_addr(sP + (t & 1) * S::kPBytes), ds_buf = fwd::smem_addr(sdS + (t & 1) * S::kPBytes);
#pragma unroll
    for (int kt = 0; kt < 2; ++kt) {
      fwd::stmatrix_x4(p_buf + pds_lane + pds_chunk(kt), pa[kt]);
      fwd::stmatrix_x4(ds_buf + pds_lane + pds_chunk(kt), da[kt]);
    }
    sm90::fence_proxy_async();
    TASP_BWD_MARK(2);
    sm90::bar_sync(1, S::kThreads);  // both halves of P and dS written
    TASP_BWD_MARK(3);
    float dq[2][32];
    sm90::wgmma_fence();
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int blk = (2 * w + hh) * S::kQdBlockBytes;
      issue_dkv<T>(dv[hh], do_addr + blk, p_buf);
      issue_dkv<T>(dk[hh], q_addr + blk, ds_buf);
    }
    sm90::wgmma_commit();
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const sm90::Sw128 kd(k_addr + (2 * w + hh) * S::kQdBlockBytes, 8192, 1024), dsd(ds_buf, 16, 1024);
#pragma unroll
      for (int kt = 0; kt < 4; ++kt) sm90::wgmma_ss<T, 64, 1, 0>(dq[hh], kd.at(kt * 2048), dsd.at(kt * 32), kt > 0 ? 1 : 0);
    }
    sm90::wgmma_commit();
    if constexpr (PIPE) {
      // dK^T and dV^T done: this warpgroup no longer reads the stage; once the other's have too, tile t + 2 goes there.
      sm90::wgmma_wait<1>();
      TASP_BWD_MARK(4);
      if (wt == 0) sm90::mbar_arrive(ld.qd_empty(st));
      if (threadIdx.x == kWalker) ld.load_next();
      // The next tile's S and dP under this tile's dQ^T.
      // After the last tile on a stale stage (the end's barrier completes without copies): a branch around a
      // wgmma makes ptxas serialise them all.
      sm90::mbar_wait(ld.qd_full(st ^ 1), ((t + 1) / STAGES) & 1);
      issue_sdp(st ^ 1);
      TASP_BWD_MARK(5);
      {
        const QTile& cn = slots[(t + 1) % S::kSlots];
        load_rows(st ^ 1, cn, cn.tile < 0 ? 0 : cn.rows, l2n, ddn);
      }
      sm90::wgmma_wait<2>();
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) fwd::fence_regs<32>(dq[hh]);
      float* dst = p.dq_accum + dq_accum_offset(b, c.h, c.tile, 2 * w, p.H, p.dq_tiles, BM, D) + wt * 4;
#ifndef TASP_BWD_WIDE_NODQ  // a diagnostic build (tools/gpu/trace.sh VARIANTS): dQ^T's adds left out, dQ wrong
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int k = 0; k < 8; ++k)
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + hh * 64 * 64 + k * 128 * 4), "f"(dq[hh][4 * k]),
                       "f"(dq[hh][4 * k + 1]), "f"(dq[hh][4 * k + 2]), "f"(dq[hh][4 * k + 3])
                       : "memory");
#else
      if (dst == nullptr) dq[0][0] = 0.f;  // dQ^T still computed and awaited
#endif
      sm90::wgmma_wait<0>();
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) fwd::fence_regs<32>(dv[hh]), fwd::fence_regs<32>(dk[hh]);
      fwd::fence_regs<16>(s), fwd::fence_regs<16>(dp);
      if (threadIdx.x == kWalker) ld.resolve();  // tile t + 3
      TASP_BWD_MARK(6);
      continue;
    }
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      fwd::fence_regs<32>(dv[hh]);
      fwd::fence_regs<32>(dk[hh]);
      fwd::fence_regs<32>(dq[hh]);
    }
    // dQ^T's halves staged in the order the threads hold them (float4 k of thread wt at (k 128 + wt) 16), each a
    // contiguous block of the scratch.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      unsigned char* stage = stage_of(st, hh);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        *reinterpret_cast<float4*>(stage + (k * 128 + wt) * 16) = make_float4(dq[hh][4 * k], dq[hh][4 * k + 1], dq[hh][4 * k + 2], dq[hh][4 * k + 3]);
    }
    sm90::fence_proxy_async();
    sm90::bar_sync(2 + w, 128);
    if (wt == 0) {
      float* dst = p.dq_accum + dq_accum_offset(b, c.h, c.tile, 2 * w, p.H, p.dq_tiles, BM, D);
      if constexpr (DET) {
        held = p.dq_sems + (((long long)b * p.H + c.h) * p.dq_tiles + c.tile) * dq_blocks(D) + 2 * w, held_next = c.turn + 1;
        sm90::wait_turn(held, c.turn), sm90::wait_turn(held + 1, c.turn);
        sm90::fence_proxy_async_global();
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) sm90::bulk_reduce_add_f32(dst + hh * 64 * 64, fwd::smem_addr(stage_of(st, hh)), 64 * 64 * 4);
      sm90::bulk_commit();
    }
    prev_st = st;
    if (threadIdx.x == kWalker) ld.resolve();  // tile t + 2
    TASP_BWD_MARK(6);
  }
  if constexpr (DET)  // the turn passes on once the last adds are done
    if (wt == 0) {
      sm90::bulk_wait();
      if (held) sm90::fence_proxy_async_global(), sm90::st_release(held, held_next), sm90::st_release(held + 1, held_next);
    }
  // Otherwise the staged blocks stay only until the last reduce has read them (its adds finish by the kernel's end),
  // waited for once the dK/dV stores are issued, so that the two overlap in the CTA's end (bwd_sm90.cuh).
  auto drained = [&] {
    if constexpr (!DET)
      if (wt == 0) sm90::bulk_wait_read();
  };
  // dK (scaled) and dV into the piece's accumulator, or written in T (GradPiece::dk16).
  const GradPiece gp = p.grads[tile.piece];
  const long long bs = gp.batch_stride ? gp.batch_stride : (long long)kp.len * p.Hkv * D;
  // Each element the thread holds, as f(key of the tile, head-dim row, dK scaled, dV): warpgroup w's rows
  // 128 w + 64 hh + row0 + 8 (e / 2) of keys 8 ch + 2 t4 + (e % 2).
  auto each = [&](auto&& f) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int ch = 0; ch < 8; ++ch)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          f(8 * ch + 2 * t4 + (e & 1), 128 * w + 64 * hh + row0 + 8 * (e / 2), p.scale * dk[hh][4 * ch + e], dv[hh][4 * ch + e]);
  };
  // A part of a split CTA (bwd_tail.hpp) adds its sums like the fp32 end, with 16-bit dK/dV into its block of the
  // tail's sums, and the last part writes them (tail_finish).
  const bool tail16 = gp.dk16 && cta.group >= 0;
  if (gp.dk16 && !tail16) {
    // Written in T: transposed through shared memory (K and V's, read by no product now) into [key][head dim] rows,
    // 16-byte chunks swizzled by the key (the four keys a store's lanes hold land in different banks), then copied
    // out a 16-byte chunk a thread, whole rows at a time.
    __syncthreads();  // both warpgroups' last products have read K and V
    T* const tk = reinterpret_cast<T*>(sK);
    T* const tv = reinterpret_cast<T*>(sV);
    each([&](int j, int d, float k, float v) { tk[row16_at<D>(j, d)] = T(k), tv[row16_at<D>(j, d)] = T(v); });
    __syncthreads();
    copy_rows16<T, D, D, S::BN, S::kThreads>(tk, tv, gp, b, bs, tile.j0, kp.len, p.Hkv, hk);
    drained();
    TASP_BWD_CTA(1);
    return;
  }
  // Reductions also where the CTA is the only writer of its keys (each element gets one add, so the sum is the same):
  // a load, add and store per element, 32 bytes apart, held the warps 8% of the samples.
  float* const block = tail16 ? tail_block<S::BN, D>(p, cta.group) : nullptr;
  each([&](int jt, int d, float k, float v) {
    const int j = tile.j0 + jt;
    if (j >= kp.len) return;
    const long long off = b * bs + ((long long)j * p.Hkv + hk) * D + d;
    float* const to_k = tail16 ? block + jt * D + d : gp.dk + off;
    float* const to_v = tail16 ? block + (S::BN + jt) * D + d : gp.dv + off;
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(to_k), "f"(k) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(to_v), "f"(v) : "memory");
  });
  if (tail16) tail_finish<T, D, S::BN, S::kThreads>(p, cta, gp, bs);
  drained();
  TASP_BWD_CTA(1);
}

// split(p, slots): p's last wave for a launch on `slots` CTAs at once (bwd_tail.hpp), returning its CTAs (not
// deterministic: a 1-d grid).
template <typename T, int D, bool DET, bool PIPE, class Split>
void launch(Params p, int tiles, int kv_ctas, int B, Split&& split, cudaStream_t s) {
  using S = Shape<D>;
  allow_dynamic_smem<attention_bwd_wide_kernel<T, D, DET, PIPE>>(S::kSmem);
  dim3 grid(kv_ctas, tiles, B);
  if constexpr (!DET) grid = dim3(unsigned(split(p, sm_count() * ctas_per_sm<attention_bwd_wide_kernel<T, D, DET, PIPE>>(S::kThreads, S::kSmem))));
  attention_bwd_wide_kernel<T, D, DET, PIPE><<<grid, S::kThreads, S::kSmem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

}  // namespace tasp::kernels::bwd::wide
