#pragma once
// Hopper backward (sm_90a) for head dims up to 128 (D=256: bwd_sm90_wide.cuh). A CTA owns a tile of 128 keys of one
// KV piece, one KV head and one batch, and walks the query tiles (80 rows at D=80..128, 128 at D=64) whose rows see
// some of its keys, of every item that lists the piece, for
// each of its query heads (Params::heads_per_cta of the KV head's group: one by default, the group's CTAs then adding
// dK and dV with reductions; the whole group with the deterministic dQ): its visits, which the host resolved with their
// masks (bwd_plan.hpp). Two warpgroups own 64
// keys each. Thread 0 loads the K and V tile once and streams Q and dO
// tiles with TMA into a STAGES-deep ring, one tile ahead of the compute, and leaves each tile's QTile in a slot two
// tiles ahead (consumers that walked too, each reading the list, measured 2-8% slower). There is no producer warp: a
// ninth warp would put three warps on one scheduler and cap every thread at 168 registers (a scheduler's 16384 / 96),
// where the D=128 accumulators (dK, dV, S, dP: 192 a thread) spill; eight get 255.
//
// Per query tile a consumer warpgroup computes, keys as the M dimension ("swapped" products, so P^T and
// dS^T stay in registers as the A operand of the next products):
//   S^T  = K Q^T          (ss: K and Q K-major)          P^T  = exp2(S^T * scale*log2e - LSE*log2e), masked
//   dP^T = V dO^T         (ss: V and dO K-major)         dS^T = P^T * (dP^T - D)
//   dV  += P^T dO         (rs: dO MN-major)
// then writes dS to shared memory (stmatrix.trans: query rows of keys, 128-byte swizzle, K-major for the next
// product) under dV, computes dQ^T = K^T dS^T (ss: K MN-major, dS K-major; swapped too, so that its N is the
// tile's 80 query rows at D=128) and dK += dS^T Q (rs: Q MN-major), and stages dQ^T while dK is still on the
// tensor cores. Each warpgroup computes a 64 x 80 block of dQ^T (D=128: its half of the head dim, all rows) or
// 64 x 64 (D=64: its half of the rows) over the tile's 128 keys, one tile late: it needs the other's dS, and
// waiting for it in step (a CTA barrier per tile) cost 7% at D=128, S=16k. Tiles of 80 rows instead of 64 at
// D=128 (N = 80 in S^T, dP^T and dQ^T, as FA3 has it) measured +5-7%: the per-tile waits and barriers are paid
// for more work, and the products read less shared memory per flop. dQ^T is staged in shared memory in the
// order the threads hold it and added to the dQ scratch with one bulk reduce of a contiguous block (FA3's dQ accumulation;
// attention_backward_finish turns the scratch into dQ), issued from the next tile's front behind the barrier
// that publishes its clipped LSE and D (TMA brings them with the tile's Q and dO). Every fence and barrier left
// sits where the warpgroup would wait anyway. dK and dV stay in registers across the walk and are added to the
// piece's fp32 accumulator at the end: where a CTA is the only writer of its keys (MHA, or the whole group in one
// CTA) their sums are ordered. dQ's sums are ordered only
// when asked (DET: the CTAs that add into one dQ tile take turns in launch order, bwd_plan.hpp's turns; the grid
// then runs the KV heads fastest, so that those CTAs mostly run in different waves and seldom wait for each other).
//
// Measured and dropped (docs/measurements/kernels.md, backward: tried and dropped): a producer warp (a ninth warp
// caps registers at 168: spills); the forward's warp specialisation (a producer warpgroup for the copies, a dQ writer
// warp, setmaxnreg 24/240: 6-11% slower, though correct and spill-free); dQ by float2 atomics (40-48 ms where the
// scratch takes 25 at D=128, S=16k), by red.global.add.v4.f32 in the scratch's order (7-12% slower than the bulk
// reduce) or one bulk reduce per row (39 ms); the forward's turn-taking between the warpgroups (3-8% slower); at
// D=128 the next tile's S^T and dP^T issued before this tile's dQ is staged (4% slower: ptxas serialises every wgmma
// whose registers cross the loop's back edge, so it needed a register copy of dQ); the next tile's entry read under
// this tile's products, the LSE and D fetched before them (both within noise); dV issued before dS is computed
// (level). Traced tile by tile (tools/gpu/trace.sh bwd): the next tile resolved a tile early, under this tile's dK,
// so that only its copies remain at the start (0-6% slower in three runs: the resolve then delayed the warpgroup's
// "ready"); its copies issued later in the tile when the stage is not yet free (mbarrier test_wait; 3-4% slower); L1
// prefetches of the next tile's LSE, D and entry (4-12% slower); the walk by a thread of warpgroup 1 (3-6% slower:
// the warpgroups fell into step); the next-but-one tile's copies issued at the end of a tile (1-5% slower: a whole
// tile apart); dO's stage freed once dV has read it, with its own empty barrier, and the next-but-one tile's dO
// copied mid-tile, Q still at the tile's start (3.4% slower at D=128, 1.6% at D=64).
//
// What this kernel shares with the D=256 one (the parameters, the dQ scratch, a CTA's entry, its walk and loader,
// the 16-bit end's copy-out, the trace points) is in bwd_common.cuh.
#include <cstddef>
#include <cstdint>

#include "kernels/bwd_common.cuh"
#include "kernels/cuda_check.hpp"
#include "kernels/wgmma.cuh"

namespace tasp::kernels::bwd {

// Column blocks (64 columns) of Q and dO that one TMA copy brings: all of them through a 5-d tensor map (the
// blocks as a dimension 128 bytes apart), so thread 0 issues two copies a tile instead of 2 D / 64.
// Beside four copies: +0.4-1.2% (docs/measurements/kernels.md). Not with the deterministic dQ, whose chain of
// CTAs measured 5% slower with them (D=128, docs/measurements/kernels.md).
__host__ __device__ constexpr int qd_blocks_per_copy(int D, bool deterministic) { return D == 128 && !deterministic ? 2 : 1; }

// Query rows of a dQ scratch tile and of the backward's query tiles for head dim D (up to 128).
__host__ __device__ constexpr int block_m(int D) { return visit_rows(D); }

template <int D, int BM>
struct Shape {
  // Two warpgroups of 64 keys each; each computes a 64 x kDqCols block of the tile's dQ^T over all 128 keys
  // (D = 128: its half of the head dim, all BM query rows; D = 64: all of it, its half of the query rows), so it
  // needs the other's dS (a tile late, see the walk). Over its own 64 keys only, the halves would add up in
  // the scratch: twice the reduce traffic, 12-19% slower.
  static constexpr int WG = 2, STAGES = 2;
  // Query tiles of BM rows: 128 at D = 64 (S^T and dP^T with N = 128; the per-tile waits and barriers paid half
  // as often as with 64), 80 at D = 128 (what the accumulators leave registers for: N = 80 instead of 64 in
  // S^T, dP^T and dQ^T).
  static constexpr int kConsumers = 128 * WG, kThreads = kConsumers, kBlockM = BM, kBlockN = 64 * WG;
  static constexpr int kDqCols = dq_cols(D, BM);
  static_assert(D == 64 || D == 80 || D == 96 || D == 128, "head dims of this backward (D=256: bwd_sm90_wide.cuh)");
  static constexpr int DP = padded_dim(D);
  static_assert(BM % 16 == 0 && (kDqCols == 32 || kDqCols == 64 || kDqCols == 80), "a warpgroup's dQ^T block is 64 x 32, 64 or 80");
  static constexpr int kKvBytes = kBlockN * DP * 2, kQBytes = BM * DP * 2, kDsBytes = kBlockN * BM * 2;
  // dS double-buffered: a tile's is read while the next one's is written.
  static constexpr int kDsBufs = 2;
  // A warpgroup's dQ^T block (64 x kDqCols fp32) staged for the bulk reduce, chunk-major: the thread's k-th
  // float4 at (k * 128 + thread) * 16, so a warp's stores are consecutive.
  static constexpr int kStageBytes = 64 * kDqCols * 4;
  // The tile's LSE and row sums D, brought by TMA with its Q and dO (Loader::load_next): per stage [LSE][D], BM + 4
  // floats each (rows_first), each array padded to 128 bytes (a TMA destination's alignment).
  static constexpr int kRowBox = BM + 4, kRowArr = (kRowBox * 4 + 127) / 128 * 128, kRowBytes = STAGES * 2 * kRowArr;
  static constexpr int kBarriers = 1 + 2 * STAGES;  // kv_full, qd_full[], qd_empty[]
  // Tile t's QTile in slot t % kSlots: written two tiles ahead (see the kernel), while the slot of the tile
  // before may still be read (its mask, in middle()).
  static constexpr int kSlots = 4, kSlotBytes = 64;
  static constexpr int kQdBlocks = DP / 64, kQdBlockBytes = BM * 128;  // a Q or dO tile's 64-column blocks (Loader)
  static constexpr int kKvBlockBytes = 128 * 128;                      // a K or V tile's
  static constexpr int kWalkBytes = 2 * int(sizeof(Visit));  // QWalk's cache
  static constexpr int kFixed =
      2 * kKvBytes + 2 * STAGES * kQBytes + kDsBufs * kDsBytes + kRowBytes + kSlots * kSlotBytes + kWalkBytes + 8 * kBarriers;
  // Two dQ staging buffers per warpgroup where they fit (the second took a barrier off every tile: D=128,
  // BM=64 +3-4%); at BM = 80 one, and back() waits for the last reduce's read behind the "ready" barrier.
  static constexpr int kStageBufs = kFixed + 2 * WG * kStageBytes <= 227 * 1024 ? 2 : 1;
  static constexpr int kSmem = kFixed + kStageBufs * WG * kStageBytes;
  static_assert(kSmem <= 227 * 1024, "more shared memory than a Hopper CTA can have");
  static_assert(sizeof(QTile) <= kSlotBytes && kSlots % STAGES == 0, "the QTile slots");
};

// S^T (or dP^T) for a warpgroup's 64 keys against BM query rows: A = the key tile's rows [64 w, 64 w + 64)
// (K-major, 128 rows per 64-column block), B = the query tile (K-major, BM rows per block).
template <typename T, int D, int BM>
__device__ __forceinline__ void issue_kq(float (&s)[BM / 2], uint32_t k_addr, uint32_t q_addr, int w) {
  const sm90::Sw128 kd(k_addr + w * 64 * 128, 16, 1024), qd(q_addr, 16, 1024);
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    sm90::wgmma_ss<T, BM, 0, 0>(s, kd.at((ks / 4) * (128 * 128) + (ks % 4) * 32), qd.at((ks / 4) * (BM * 128) + (ks % 4) * 32),
                                ks > 0 ? 1 : 0);
  sm90::wgmma_commit();
}

// acc (64 keys x D) += frag (64 keys x BM queries, registers) * X (BM queries x D, MN-major in shared memory).
template <typename T, int D, int BM>
__device__ __forceinline__ void issue_acc(float (&acc)[D / 2], const uint32_t (&frag)[BM / 16][4], uint32_t x_addr) {
  const sm90::Sw128 xd(x_addr, BM * 128, 1024);
#pragma unroll
  for (int kt = 0; kt < BM / 16; ++kt) sm90::wgmma_rs<T, D, 1>(acc, frag[kt], xd.at(kt * 2048), 1);
}

// DET: dQ deterministic (AttentionBackwardBatch::deterministic): the grid runs the KV heads fastest, and a
// warpgroup adds its dQ block only on its turn at the tile's counter, passing the turn on once the add is done.
template <typename T, int D, int BM_, bool DET>
__global__ void __launch_bounds__(Shape<D, BM_>::kThreads, 1) attention_bwd_sm90_kernel(const Params p) {
  using S = Shape<D, BM_>;
  constexpr int STAGES = S::STAGES, BM = S::kBlockM;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* sK = smem_raw;                              // [128 keys][DP], 64-column blocks
  unsigned char* sV = sK + S::kKvBytes;
  unsigned char* sQ = sV + S::kKvBytes;                      // [STAGES][BM rows][DP], 64-column blocks
  unsigned char* sdO = sQ + STAGES * S::kQBytes;             // [STAGES][BM rows][DP]
  unsigned char* sdS = sdO + STAGES * S::kQBytes;            // [kDsBufs][2 key blocks][BM queries][64 keys]
  unsigned char* sdQ = sdS + S::kDsBufs * S::kDsBytes;       // [kStageBufs][WG][staged dQ block]
  unsigned char* sRows = sdQ + S::kStageBufs * S::WG * S::kStageBytes;  // the Loader's: [STAGES][LSE, D] first
  const Cta cta = enter(p, DET);
  const Tile& tile = cta.tile;
  const KvPiece& kp = cta.kp;
  const int hk = cta.hk, b = cta.b;
  Loader<S, qd_blocks_per_copy(D, DET), DET> ld(p, cta, sRows, sQ, sdO);
  const QTile* const slots = ld.slots;
  if (threadIdx.x == 0) ld.init(S::kConsumers);
  __syncthreads();
  if (threadIdx.x == 0) {
    ld.start(tile, hk, sK, sV), ld.load_next();
    TASP_BWD_CTA(4);
  }

  const int w = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4, wt = threadIdx.x % 128;
  const int key0 = w * 64 + warp * 16 + g;  // the thread's first key row in the tile (the second is key0 + 8)
  float dv[D / 2], dk[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dv[i] = 0.f, dk[i] = 0.f;
  const uint32_t k_addr = fwd::smem_addr(sK), v_addr = fwd::smem_addr(sV);
  sm90::mbar_wait(ld.kv_full(), 0);

  float s[BM / 2], dp[BM / 2], dq[S::kDqCols / 2];
  auto addr_q = [&](const QTile& c) { return fwd::smem_addr(sQ + c.st * S::kQBytes); };
  auto addr_do = [&](const QTile& c) { return fwd::smem_addr(sdO + c.st * S::kQBytes); };
  auto lse_of = [&](const QTile& c) {
    return reinterpret_cast<float*>(sRows + c.st * 2 * S::kRowArr) + (rows_first(p, b, c.h, c.qrow) & 3);
  };
  auto dsum_of = [&](const QTile& c) { return lse_of(c) + S::kRowArr / 4; };
  // Past the tile's rows no query: LSE +inf and D 0, so P = 0 and dS = 0 (whatever rows TMA brought there, which may
  // be rows that no item covers: unwritten). Both warpgroups write the same values, each before its own barrier in
  // reduce_staged publishes them to its warps.
  auto clip_rows = [&](const QTile& c) {
    if (c.rows < BM) {
      float *lse = lse_of(c), *dsum = dsum_of(c);
      for (int i = c.rows + wt; i < BM; i += 128) lse[i] = INFINITY, dsum[i] = 0.f;
    }
  };
  // The staged dQ block (back() of the tile before) goes to the scratch from front(), behind the barrier that
  // front() needs anyway: its stores' fence and that barrier off the tile's critical path (a second barrier and
  // a fence in back() cost 3-4% at D=128). Two staging buffers per warpgroup, so back() writes one while the
  // other may still be read.
  float* staged = nullptr;  // where the staged block goes (null: nothing staged)
  int staged_buf = 0;
  // Deterministic dQ: the staged block's counter and turn, and the counter whose turn this warpgroup holds
  // (its add issued, not yet passed on).
  int* staged_sem = nullptr;
  int staged_turn = 0;
  int* held = nullptr;
  int held_next = 0;
  auto stage_at = [&](int i) { return sdQ + (i * S::WG + w) * S::kStageBytes; };
  // The staging stores fenced for the bulk copy, the last reduce done reading (so back() may write the buffer
  // it read), the warpgroup synced (which also publishes clip_rows()' writes), then thread 0 reduces the staged block.
  auto reduce_staged = [&] {
    sm90::fence_proxy_async();
    if (wt == 0) sm90::bulk_wait_read();
    sm90::bar_sync(2 + w, 128);
    if (wt == 0 && staged) {
      if constexpr (DET) sm90::wait_turn(staged_sem, staged_turn), sm90::fence_proxy_async_global();
      sm90::bulk_reduce_add_f32(staged, fwd::smem_addr(stage_at(staged_buf)), S::kStageBytes);
      sm90::bulk_commit();
      if constexpr (DET) held = staged_sem, held_next = staged_turn + 1;
    }
  };
  // Before a staging buffer is rewritten: the last reduce done reading it; deterministic, done altogether and
  // its turn passed on (placed a tile's softmax after the reduce was issued, so the wait is short).
  auto after_reduce = [&] {
    if constexpr (DET) {
      if (wt == 0 && held) {
        sm90::bulk_wait();
        sm90::fence_proxy_async_global();
        sm90::st_release(held, held_next);
        held = nullptr;
      }
    } else if (S::kStageBufs == 1 && wt == 0) {
      sm90::bulk_wait_read();
    }
  };
  // Front (the tile's Q, dO, LSE and D are in): S^T and dP^T issued (two commit groups), the rows past the tile's
  // clipped, and the staged dQ block reduced.
  auto front = [&](const QTile& c) {
    issue_kq<T, D, BM>(s, k_addr, addr_q(c), w);
    issue_kq<T, D, BM>(dp, v_addr, addr_do(c), w);
    clip_rows(c);
    reduce_staged();
  };

  // Middle: P^T and dS^T (into dsa) from S^T and dP^T, then dV issued (one commit group).
  auto middle = [&](const QTile& c, uint32_t (&dsa)[BM / 16][4]) {
    sm90::wgmma_wait<1>();
    fwd::fence_regs<BM / 2>(s);
    // P^T: element e of chunk ch is key row key0 + 8 (e / 2), query column 8 ch + 2 t4 + (e % 2).
    const float* lse = lse_of(c);
    auto to_p = [&](const auto& hidden) {
#pragma unroll
      for (int ch = 0; ch < BM / 8; ++ch) {
        const float* l = lse + 8 * ch + 2 * t4;  // (8-byte aligned only when the tile's first row is: two loads)
        const float2 l2 = make_float2(l[0] * 1.4426950408889634f, l[1] * 1.4426950408889634f);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * ch + 2 * t4 + (e & 1), key = key0 + 8 * (e / 2);
          float v = exp2f(s[4 * ch + e] * p.scale_log2 - ((e & 1) ? l2.y : l2.x));
          if (hidden(col, key)) v = 0.f;
          s[4 * ch + e] = v;
        }
      }
    };
    // The mask is read only for a tile that needs it: the item read in every tile (the flag only chose whether
    // its band was used) sat before every softmax and cost 7-10%.
    if (c.mask) {
      const TileMask m = slots[c.slot].m;  // rewritten only two tiles later (see kSlots)
      to_p([&](int col, int key) { return key < m.first(col) || key > m.last(col); });
    } else {
      to_p([](int, int) { return false; });
    }
    uint32_t pa[BM / 16][4];
#pragma unroll
    for (int kt = 0; kt < BM / 16; ++kt) fwd::pack_a<T>(pa[kt], s, kt);
    sm90::wgmma_wait<0>();
    fwd::fence_regs<BM / 2>(dp);
    const float* dsum = dsum_of(c);
#pragma unroll
    for (int ch = 0; ch < BM / 8; ++ch) {
      const float2 d2 = make_float2(dsum[8 * ch + 2 * t4], dsum[8 * ch + 2 * t4 + 1]);
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[4 * ch + e] = s[4 * ch + e] * (dp[4 * ch + e] - ((e & 1) ? d2.y : d2.x));
    }
#pragma unroll
    for (int kt = 0; kt < BM / 16; ++kt) fwd::pack_a<T>(dsa[kt], dp, kt);
    sm90::wgmma_fence();
    issue_acc<T, D, BM>(dv, pa, addr_do(c));
    sm90::wgmma_commit();
  };
  auto ds_buf = [&](int t) { return sdS + (t & 1) * S::kDsBytes; };
  // dS (not transposed: the B operand of dQ^T, K-major) to shared memory: key block kb = w (the warpgroup's 64
  // keys), query row q, keys' 16-byte chunk ch at kb * BM * 128 + q * 128 + ((ch ^ (q % 8)) << 4). Each
  // 16-query slice of dS^T's fragment is four 8 x 8 matrices that stmatrix.trans writes as 8 query rows of 8
  // keys each: lane l addresses row l % 8 of matrix l / 8 (matrix j: keys 8 (j % 2), queries 8 (j / 2)).
  const uint32_t ds_lane = w * (BM * 128) + (lane % 8 + 8 * (lane / 16)) * 128 + (((2 * warp + lane / 8 % 2) ^ (lane % 8)) << 4);
  auto store_ds = [&](int t, const uint32_t (&dsa)[BM / 16][4]) {
    const uint32_t at = fwd::smem_addr(ds_buf(t)) + ds_lane;
#pragma unroll
    for (int kt = 0; kt < BM / 16; ++kt) fwd::stmatrix_x4_trans(at + kt * 16 * 128, dsa[kt]);
    // Fenced for the products (the async proxy) only before the "ready" arrive: a fence here waited for the
    // stores with the tensor cores idle.
  };
  // dQ^T of tile t from its dS (one commit group): A = K^T (MN-major: the warpgroup's 64 head-dim columns,
  // all 128 keys), B = dS (K-major: the warpgroup's kDqCols query rows, all 128 keys).
  auto issue_dq = [&](int t) {
    const uint32_t dsb = fwd::smem_addr(ds_buf(t)) + (D == 64 ? w * S::kDqCols * 128 : 0);
    const uint32_t kb = k_addr + (D > 64 ? w * (128 * 128) : 0);
    const sm90::Sw128 kd(kb, 128 * 128, 1024), dsd(dsb, 16, 1024);
    sm90::wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < 8; ++kt)
      sm90::wgmma_ss<T, S::kDqCols, 1, 0>(dq, kd.at(kt * 2048), dsd.at((kt / 4) * (BM * 128) + (kt % 4) * 32), kt > 0 ? 1 : 0);
    sm90::wgmma_commit();
  };

  // Back: the dQ block (done) staged in buffer t & 1 (front() of this tile saw its last reduce done reading),
  // for the next front() to reduce.
  auto back = [&](const QTile& c, bool reduce, int t) {
    fwd::fence_regs<S::kDqCols / 2>(dq);
    staged_buf = t % S::kStageBufs;
    unsigned char* stage = stage_at(staged_buf);
#pragma unroll
    for (int k = 0; k < S::kDqCols / 8; ++k)
      *reinterpret_cast<float4*>(stage + (k * 128 + wt) * 16) = make_float4(dq[4 * k], dq[4 * k + 1], dq[4 * k + 2], dq[4 * k + 3]);
    // D = 64: the block of the tile's query half w, if the tile has rows there.
    staged = reduce && (D > 64 || w * S::kDqCols < c.rows) ? p.dq_accum + dq_accum_offset(b, c.h, c.tile, w, p.H, p.dq_tiles, BM, D)
                                                             : nullptr;
    if constexpr (DET)
      staged_sem = p.dq_sems + (((long long)b * p.H + c.h) * p.dq_tiles + c.tile) * dq_blocks(D) + w, staged_turn = c.turn;
  };


  auto release = [&](const QTile& c) {
    fwd::fence_regs<D / 2>(dv);
    fwd::fence_regs<D / 2>(dk);
    sm90::mbar_arrive(ld.qd_empty(c.st));  // Q and dO are read for the last time
  };

  // dQ one tile behind: a warpgroup computes tile t-1's dQ block once the other has written that tile's dS^T
  // (named barrier 4 + 2 w + parity, arrived by the writer, awaited by the reader), so neither waits for the
  // other's tile in step. The writer arrives after its own dQ of the tile before, so a dS^T buffer is rewritten
  // only after both have read it; parity keeps a barrier's arrivals two tiles apart.
  auto ready = [&](int ww, int t) { return 4 + 2 * ww + (t & 1); };
  sm90::bar_arrive(ready(w, -1), S::kConsumers);  // "tile -1" for the other's first wait
  QTile prev{};
  int t = 0;
  for (;; ++t) {
    sm90::mbar_wait(ld.qd_full(t % STAGES), (t / STAGES) & 1);
    const QTile c = slots[t % S::kSlots];  // thread 0 walked ahead and left it there
    if (c.tile < 0) break;
    TASP_BWD_MARK(0);
    if (threadIdx.x == 0) {  // tile t + 1's copies
      TASP_BWD_T0_START();
      ld.load_next();
      TASP_BWD_T0_END();
    }
    front(c);
    TASP_BWD_MARK(1);
    uint32_t dsa[BM / 16][4];
    middle(c, dsa);
    TASP_BWD_MARK(2);
    after_reduce();  // back() rewrites what front()'s reduce reads
    sm90::bar_sync(ready(1 - w, t - 1), S::kConsumers);
    TASP_BWD_MARK(3);
    issue_dq(t - 1);  // at t = 0 on an unwritten buffer and not staged: a branch would serialise every wgmma
    store_ds(t, dsa);
    issue_acc<T, D, BM>(dk, dsa, addr_q(c));
    sm90::wgmma_commit();
    sm90::wgmma_wait<1>();  // dV and dQ(t - 1) are done
    sm90::fence_proxy_async();  // dS^T(t) visible to the products before "ready"
    sm90::bar_arrive(ready(w, t), S::kConsumers);
    TASP_BWD_MARK(4);
    back(prev, t > 0, t);
    TASP_BWD_MARK(5);
    sm90::wgmma_wait<0>();
    release(c);
    TASP_BWD_MARK(6);
    if (threadIdx.x == 0) ld.resolve();  // tile t + 2
    prev = c;
  }
  reduce_staged();  // the block staged in the last iteration
  after_reduce();
  sm90::bar_sync(ready(1 - w, t - 1), S::kConsumers);
  TASP_BWD_CTA(5);
  issue_dq(t - 1);
  sm90::wgmma_wait<0>();
  back(prev, t > 0, t);
  reduce_staged();
  TASP_BWD_CTA(6);
  if constexpr (DET) {  // the turn passes on once the last add is done
    if (threadIdx.x % 128 == 0) sm90::bulk_wait();
    after_reduce();
  }
  // dK (scaled) and dV: key rows key0 + 8 hf, columns 8c + 2 t4 + {0, 1}. Where the caller asked (GradPiece::dk16: the
  // CTA is then its keys' only writer), written in T through shared memory (K and V's, read by no product once both
  // warpgroups' last dQ is done) into [key][DP] rows, 16-byte chunks swizzled by the key (a store's eight rows land in
  // different banks), then out in whole rows, 16 bytes a thread, as the wide kernel's end does. Stored from the
  // registers, 4 bytes a lane and half of each sector, they held the end 6,600 of its 10,700 cycles; staged, the end
  // is 5,800 and the backward +4.3% at B=4 S=4096 causal, +5.6% at B=8 S=2048 causal, +5.1% at D=64 B=2 S=8192
  // causal, +1.1% at B=2 S=8192 full (one H100, 2026-11-27, docs/measurements/kernels.md).
  const GradPiece gp = p.grads[tile.piece];
  const long long bs = gp.batch_stride ? gp.batch_stride : (long long)kp.len * p.Hkv * D;
  // A part of a split CTA (bwd_tail.hpp) adds its sums like the fp32 end, with 16-bit dK/dV into its block of the
  // tail's sums, and the last part writes them (tail_finish).
  const bool tail16 = gp.dk16 && cta.group >= 0;
  if (gp.dk16 && !tail16) {
    __syncthreads();
    T* const tk = reinterpret_cast<T*>(sK);
    T* const tv = reinterpret_cast<T*>(sV);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int c = 0; c < D / 8; ++c) {
        const int at = row16_at<S::DP>(key0 + 8 * hf, 8 * c + 2 * t4);
        *reinterpret_cast<uint32_t*>(tk + at) = fwd::pack2<T>(p.scale * dk[4 * c + 2 * hf], p.scale * dk[4 * c + 2 * hf + 1]);
        *reinterpret_cast<uint32_t*>(tv + at) = fwd::pack2<T>(dv[4 * c + 2 * hf], dv[4 * c + 2 * hf + 1]);
      }
    __syncthreads();
    copy_rows16<T, D, S::DP, S::kBlockN, S::kThreads>(tk, tv, gp, b, bs, tile.j0, kp.len, p.Hkv, hk);
  } else {
    // Into the piece's fp32 accumulator by reductions always: where the CTA is its keys' only writer, one add per
    // element leaves the same sums as a read, an add and a write, without waiting for the read (the end's
    // read-add-write held 6.6% of the warps' samples at B=2 S=8192 causal, D=128; Nsight Compute, 2026-11-26).
    float* const block = tail16 ? tail_block<S::kBlockN, D>(p, cta.group) : nullptr;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int jt = key0 + 8 * hf, j = tile.j0 + jt;
      if (j >= kp.len) continue;
      const long long off = b * bs + ((long long)j * p.Hkv + hk) * D + 2 * t4;
      float* const to_k = tail16 ? block + jt * D + 2 * t4 : gp.dk + off;
      float* const to_v = tail16 ? block + (S::kBlockN + jt) * D + 2 * t4 : gp.dv + off;
#pragma unroll
      for (int c = 0; c < D / 8; ++c) {
        const float2 a = make_float2(p.scale * dk[4 * c + 2 * hf], p.scale * dk[4 * c + 2 * hf + 1]);
        const float2 v = make_float2(dv[4 * c + 2 * hf], dv[4 * c + 2 * hf + 1]);
        float2* k2 = reinterpret_cast<float2*>(to_k + 8 * c);
        float2* v2 = reinterpret_cast<float2*>(to_v + 8 * c);
        asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(k2), "f"(a.x), "f"(a.y) : "memory");
        asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(v2), "f"(v.x), "f"(v.y) : "memory");
      }
    }
    if (tail16) tail_finish<T, D, S::kBlockN, S::kThreads>(p, cta, gp, bs);
  }
  TASP_BWD_CTA(7);
  // The staging tile stays until the last reduce has read it; its adds finish by the kernel's end without waiting
  // here (as a TMA store's epilogue waits for the read only). Waited for after the dK/dV stores are issued, so that
  // the two overlap in the CTA's end, which is 6.5% of its time at 4096-query walks (docs/measurements/kernels.md).
  if constexpr (!DET)
    if (threadIdx.x % 128 == 0) sm90::bulk_wait_read();
  TASP_BWD_CTA(1);
}

// kv_ctas: CTAs per key tile and batch (Hkv times the group's splits).
// split(p, slots): p's last wave for a launch on `slots` CTAs at once (bwd_tail.hpp), returning its CTAs (not
// deterministic: a 1-d grid).
template <typename T, int D, int BM, bool DET, class Split>
void launch_sm90(Params p, int tiles, int kv_ctas, int B, Split&& split, cudaStream_t s) {
  using S = Shape<D, BM>;
  allow_dynamic_smem<attention_bwd_sm90_kernel<T, D, BM, DET>>(S::kSmem);
  dim3 grid(kv_ctas, tiles, B);
  if constexpr (!DET) grid = dim3(unsigned(split(p, sm_count() * ctas_per_sm<attention_bwd_sm90_kernel<T, D, BM, DET>>(S::kThreads, S::kSmem))));
  attention_bwd_sm90_kernel<T, D, BM, DET><<<grid, S::kThreads, S::kSmem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

}  // namespace tasp::kernels::bwd
