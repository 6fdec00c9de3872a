#pragma once
// Hopper forward (sm_90a), warp-specialised. A task is 64 * WG query rows of one (batch, head) of one item; a CTA
// runs one task, or on short walks (the persistent grid) one after another until none are left. A CTA has
// WG consumer warpgroups of 64 rows each, plus a producer warpgroup. One producer lane streams Q and the K/V
// tiles of the item's walk into a STAGES-deep ring of shared-memory buffers with TMA (the tensor maps give
// the 128-byte swizzle and zero-fill ragged tails) and signals "full" mbarriers; consumers wait on those and
// release buffers through "empty" ones, never on a CTA-wide barrier. Consumers take turns issuing
// S = Q K^T (named barriers in a ring), so one warpgroup's softmax runs while another's products occupy
// the tensor cores. S = Q K^T and O += P V are wgmma with Q, K, V read from shared memory through
// 128-byte-swizzle descriptors (64-column blocks of 128-byte rows, 16-byte chunk c of row r at c ^ (r % 8):
// K-major for Q and K, MN-major for V) and P from registers.
//
// What was measured and dropped (docs/measurements/kernels.md): cp.async loads by all threads with a CTA barrier per
// tile (345 TFLOP/s at D=128); a producer warp instead of a warpgroup (ptxas then kept every thread at the entry
// budget). setmaxnreg took effect once the kernel had a producer warpgroup, a shuffle-uniform branch around it and no
// wgmma behind a branch inside the loop. For the short tasks' end (traced CTA by CTA, tools/gpu/trace.sh fwd): the
// rows through shared memory, a warp storing whole rows (epilogue 3.5% shorter, level end to end), the rows in bf16
// instead of fp32 (half the bytes, level), and Q of the CTA a wave later prefetched into L2 (its start 270 cycles
// sooner, 1.4% slower): with no stores at all B=8 S=2048 causal ran 9.5% faster, but neither the stores' pattern nor
// their bytes is what that costs. On an H200 the kernel runs against the 700 W power limit (1650-1695 MHz at D=128),
// and without its K/V copies it ran 10% faster at a 9% higher clock; clusters of 2 or 4 CTAs sharing each K/V tile
// through TMA multicast raised the clock 4-9% but stalled on one another's releases (two stages): level to 14% slower
// on the H200 (3% faster on the H100); git history has the patch.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda_check.hpp"
#include "kernels/fwd_common.cuh"
#include "kernels/tensor_map.hpp"
#include "kernels/tma.cuh"
#include "kernels/wgmma.cuh"

namespace tasp::kernels::fwd {

// What the producer resolved of the CTA's task for the consumers, in shared memory. The consumers never read the
// work list: its dependent loads (tile -> item -> piece) are the producer's alone. Reading the item in the
// consumers (its band at every masked tile, from global memory) measured 3-8% slower on causal shapes and 9% at
// B=8 S=2048 causal (docs/measurements/kernels.md).
// One per task parity: the consumers store task n's rows while the producer may be writing task n + 1's.
struct TaskRec {
  RowsOut to;
  int id;      // the task's place in the launch order (the trace's index)
  bool tiles;  // some key tile of the task is visible
  bool done;   // (persistent) no task left
};
// A key tile as the consumers need it, in a slot beside its stage: written before the stage's K is armed, read
// before the consumers release the K buffer.
struct alignas(16) KvRec {
  TileMask m;  // the columns each of the task's rows sees
  int flags;   // kMask: some row does not see some key of the tile; kMore: another tile of the task follows
};
constexpr int kMask = 1, kMore = 2;

#ifdef TASP_FWD_TRACE
// Diagnostics only (tools/gpu/trace.sh fwd, a build with -DTASP_FWD_TRACE): per task (its place in the launch
// order, `trace_id`; the first kTraceCtas), clock64 at its phases: 0 its start (the CTA's entry, or in the
// persistent grid the producer taking it), 1 SM, 2 the producer's task resolved, 3 its last copy issued,
// 4 + wg Q in, 6 + wg tile 0's scores in, 8 + wg the last P V done, 10 + wg the rows stored, 12 tiles walked;
// 13 and 14 %globaltimer (ns) at its start and at warpgroup 0's rows stored, to line the SMs up.
constexpr int kTraceCtas = 16384, kTraceEvents = 16;
__device__ long long g_fwd_trace[kTraceCtas * kTraceEvents];
__device__ __forceinline__ long long trace_smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
__device__ __forceinline__ long long trace_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return (long long)t;
}
#define TASP_FWD_RECORD(ev, value) \
  if (trace_id < kTraceCtas) g_fwd_trace[trace_id * kTraceEvents + (ev)] = (value)
#define TASP_FWD_MARK(ev) TASP_FWD_RECORD(ev, clock64())
#define TASP_FWD_MARK_WG(ev) \
  if (threadIdx.x % 128 == 0) TASP_FWD_RECORD((ev) + cw, clock64())
#define TASP_FWD_MARK_NS(ev) TASP_FWD_RECORD(ev, trace_ns())
#define TASP_FWD_MARK_WG0_NS(ev) \
  if (threadIdx.x == 0) TASP_FWD_RECORD(ev, trace_ns())
#else
#define TASP_FWD_RECORD(ev, value)
#define TASP_FWD_MARK(ev)
#define TASP_FWD_MARK_WG(ev)
#define TASP_FWD_MARK_NS(ev)
#define TASP_FWD_MARK_WG0_NS(ev)
#endif

// D=64: 3 consumer warpgroups, other head dims 2, plus a producer warpgroup. The registers go to the consumers
// through setmaxnreg: the producer keeps 24 (32 with three consumers), each consumer gets 240 with two and 160
// with three. With a producer warp instead of a warpgroup, ptxas capped every thread at the entry budget: 168 at D=128, 128 at
// D=64 (where the wgmma were serialised for want of registers).
// Head dims that are not a multiple of 64 (80, 96) sit in shared memory as DP = D rounded up to 64 columns
// (the 128-byte swizzle's column blocks; TMA zero-fills the rest and no product reads it). D=256 walks
// 80-key tiles (FA3's width there): O alone takes 128 registers a thread, and two stages of 80-key K and V tiles
// beside Q's 64 KB fill shared memory (224 KB). 80 beside 64 measured +8-16% (docs/measurements/kernels.md: full and causal).
// D=64 on two consumers with 192-key tiles measured 5-15% behind its three with 128 (same work per tile).
// Key tiles of 192 at D=80, 96, 128: N = 192 in S = Q K^T and 12 k-steps in P V a tile, so the per-tile softmax,
// barriers and waits are paid for 50% more work (S, P and O take 208 of the consumers' 240 registers; K and V
// stages 192 KB of shared memory). Measured on one H200 (docs/measurements/kernels.md): 176 (FA3's width for unmasked D=128)
// beside 128 +3-6% full and causal at S >= 12k and GQA, level at B=4 S=4096 causal; 192 beside 176 +0-3%;
// 192 beside 128 at D=96 +7%, D=80 causal +3%, full level.
constexpr int kWideBlockN = 192;
template <int D, int BN = (D > 128 ? 80 : 128), bool PERSIST = false>
struct Sm90Shape {
  static constexpr int DP = (D + 63) / 64 * 64;
  static constexpr int WG = D == 64 ? 3 : 2, STAGES = 2;
  static constexpr int kConsumers = 128 * WG, kThreads = 128 * (WG + 1), kBlockM = 64 * WG;
  static constexpr int kBlockN = BN;
  // setmaxnreg moves registers within the CTA's launch allocation (the entry budget times the threads): the
  // consumers can take only what the producer gave back, or their setmaxnreg.inc waits for ever.
  static constexpr int kEntryRegs = 65536 / kThreads / 8 * 8;
  // The persistent grid's producer thread (its task loop) spills at 24-48 registers (ptxas: 200 bytes at 24, 4 at
  // 48) and not at 56; the consumers' 224 then still hold S, P and O of its 128-key tiles without spilling.
  static constexpr int kProducerRegs = WG == 2 ? (PERSIST ? 56 : 24) : 32;
  static constexpr int kConsumerRegs = (kEntryRegs + (kEntryRegs - kProducerRegs) / WG) / 8 * 8;
  static constexpr int kTileBytes = kBlockN * DP * 2, kQBytes = kBlockM * DP * 2;
  static constexpr int kBarriers = 2 + 4 * STAGES;  // q_full, q_empty, k_full[], v_full[], k_empty[], v_empty[]
  // Q, K and V stages, a record per stage, the barriers and two task records
  static constexpr int kCoreSmem = kQBytes + 2 * STAGES * kTileBytes + int(sizeof(KvRec)) * STAGES + 8 * kBarriers + 2 * int(sizeof(TaskRec));
  // The CTA's rows in fp32 for the TMA store (store_rows_tma), where shared memory has room beside the rest:
  // 128-key tiles at D <= 128, not 192-key ones or D=256.
  static constexpr int kOutCols = (D + 31) / 32 * 32, kOutBytesWanted = kBlockM * kOutCols * 4;
  static constexpr int kOutBytes = kCoreSmem + kOutBytesWanted <= 227 * 1024 ? kOutBytesWanted : 0;
  static constexpr int kSmem = kCoreSmem + kOutBytes;
};

// S = Q K^T for one warpgroup's 64 rows: over D in 16-wide steps, 4 steps per 64-column block (32 bytes
// each); Q's column blocks are ROWS_Q * 128 bytes apart, K's kBlockN * 128. Issued and committed, not waited.
template <typename T, int D, int ROWS_Q, int BN>
__device__ __forceinline__ void issue_qk(float* s, uint32_t q_addr, uint32_t k_addr) {
  const sm90::Sw128 qd(q_addr, 16, 1024), kd(k_addr, 16, 1024);
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    sm90::wgmma_ss<T, BN, 0, 0>(*reinterpret_cast<float(*)[BN / 2]>(s), qd.at((ks / 4) * (ROWS_Q * 128) + (ks % 4) * 32),
                                kd.at((ks / 4) * (BN * 128) + (ks % 4) * 32), ks > 0 ? 1 : 0);
  sm90::wgmma_commit();
}

// O += P V. V MN-major: 64-column blocks BN * 128 bytes apart (LBO), 8-key groups 1 KiB apart (SBO), 16
// keys per step. Issued and committed, not waited.
template <typename T, int D, int BN>
__device__ __forceinline__ void issue_pv(float* o, const uint32_t (&pa)[BN / 16][4], uint32_t v_addr) {
  const sm90::Sw128 vd(v_addr, BN * 128, 1024);
  sm90::wgmma_fence();
#pragma unroll
  for (int kt = 0; kt < BN / 16; ++kt) sm90::wgmma_rs<T, D, 1>(*reinterpret_cast<float(*)[D / 2]>(o), pa[kt], vd.at(kt * 2048), 1);
  sm90::wgmma_commit();
}

// The epilogue of a warpgroup's 64 rows that do not fold (not accumulate) and that all belong to the tile or end
// the tensor: normalised into shared memory at `so` (the CTA's rows in 32-column blocks of 128-byte rows, 16-byte
// chunk c of row r at c ^ (r % 8): the float2 stores of a warp then fall on distinct banks), then out in one TMA
// store per block by one thread, which waits only until the blocks are read. A CTA's end with st.global from
// registers is the warps waiting for their stores to drain before exit (docs/measurements/kernels.md: 10% of a short causal launch).
// PERSIST: the warpgroup goes on to its next task at once; the copies out of `so` are waited for before it is
// written again (and at the CTA's exit).
template <int D, int BLOCK_M, bool PERSIST>
__device__ __forceinline__ void store_rows_tma(const Params& p, const RowsOut& to, int cw, int r0, const float* o, const float (&m)[2],
                                               const float (&l)[2], int lane, uint32_t so) {
  const int t4 = lane % 4;
  if constexpr (PERSIST) {
    if (threadIdx.x % 128 == 0) sm90::bulk_wait_read();
    sm90::bar_sync(8 + cw, 128);
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float sum = quad_sum(l[hf]);
    const int r = r0 + 8 * hf;
    const float w = sum > 0.f ? 1.f / sum : 0.f;
    if (t4 == 0 && r < to.rows)
      p.lse[((long long)to.b * p.H + to.h) * p.q_rows + to.qrow + r] = sum > 0.f ? (m[hf] + __log2f(sum)) * kLn2 : -INFINITY;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const int col = c * 8 + 2 * t4;
      const uint32_t at = so + (col / 32) * (BLOCK_M * 128) + r * 128 + ((((col % 32) / 4) ^ (r % 8)) * 16) + (col % 4) * 4;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(o[4 * c + 2 * hf] * w), "f"(o[4 * c + 2 * hf + 1] * w)
                   : "memory");
    }
  }
  sm90::fence_proxy_async();
  sm90::bar_sync(8 + cw, 128);  // the warpgroup's rows are in (barriers 1..WG are the issue turns)
  if (threadIdx.x % 128 == 0) {
    sm90::fence_tensormap(p.tmaps + kTensorMapBytes);
#pragma unroll
    for (int cb = 0; cb < (D + 31) / 32; ++cb)
      sm90::tma_store_4d(p.tmaps + kTensorMapBytes, so + cb * (BLOCK_M * 128) + cw * 64 * 128, cb * 32, to.h, to.qrow + cw * 64, to.b);
    sm90::bulk_commit();
    if constexpr (!PERSIST) sm90::bulk_wait_read();
  }
}

// OVERLAP: each warpgroup issues tile t's S = Q K^T and tile t-1's O += P V together and runs tile t's
// softmax while that P V is on the tensor cores (FA3's intra-warpgroup pipelining; S, P and O live at once).
// PERSIST: one CTA per SM takes tasks in the launch order from a counter until none are left. The producer
// resolves the next task while the consumers walk the current one's last tiles, and loads its Q as soon as their
// last S = Q K^T has read the current one (q_empty) and its first K/V tiles as stages free up; the consumers store
// their rows through TMA without waiting (store_rows_tma) and go on. The stage ring and the warpgroups' turns run
// on across tasks. A persistent grid whose consumers stored from registers, measured twice before 2026-11-23, was level
// at best, since what a CTA's end costs is the warps issuing their stores (2400 cycles at D=128), which it kept.
template <typename T, int D, bool OVERLAP, int BN, bool PERSIST>
__global__ void __launch_bounds__(Sm90Shape<D, BN, PERSIST>::kThreads, 1) attention_fwd_sm90_kernel(const Params p) {
  using S = Sm90Shape<D, BN, PERSIST>;
  constexpr int kBlockM = S::kBlockM, kBlockN = S::kBlockN, WG = S::WG, STAGES = S::STAGES, DP = S::DP;
  static_assert(!PERSIST || (OVERLAP && S::kOutBytes > 0), "the persistent grid stores through TMA");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * DP;            // [STAGES][DP / 64][kBlockN][64]
  T* sV = sK + STAGES * kBlockN * DP;   // [STAGES][DP / 64][kBlockN][64]
  const uint32_t so = smem_addr(sV + STAGES * kBlockN * DP);  // the rows for the TMA store, when S::kOutBytes
  KvRec* slots = reinterpret_cast<KvRec*>(smem_raw + S::kQBytes + 2 * STAGES * S::kTileBytes + S::kOutBytes);  // [STAGES]
  const uint32_t bars = smem_addr(slots + STAGES);
  TaskRec* recs = reinterpret_cast<TaskRec*>(smem_raw + S::kSmem - 2 * sizeof(TaskRec));  // [task parity]
  const uint32_t q_full = bars, q_empty = bars + 8;
  auto k_full = [&](int st) { return bars + 8 * (2 + st); };
  auto v_full = [&](int st) { return bars + 8 * (2 + STAGES + st); };
  auto k_empty = [&](int st) { return bars + 8 * (2 + 2 * STAGES + st); };
  auto v_empty = [&](int st) { return bars + 8 * (2 + 3 * STAGES + st); };

  if (threadIdx.x == 0) {
    sm90::mbar_init(q_full, 1);
    sm90::mbar_init(q_empty, S::kConsumers);
    for (int st = 0; st < STAGES; ++st) {
      sm90::mbar_init(k_full(st), 1);
      sm90::mbar_init(v_full(st), 1);
      sm90::mbar_init(k_empty(st), S::kConsumers);
      sm90::mbar_init(v_empty(st), S::kConsumers);
    }
    sm90::fence_mbar_init();
  }
  __syncthreads();

  // The warpgroup index through a shuffle: ptxas honours setmaxnreg only behind branches it can prove uniform.
  const int wg = __shfl_sync(0xffffffff, int(threadIdx.x / 128), 0);
  if (wg == WG) {  // the producer warpgroup; one lane walks the work list and issues every copy
    sm90::regs_dealloc<S::kProducerRegs>();
    if (threadIdx.x != S::kConsumers) return;
    const unsigned char* maps = p.tmaps;
    sm90::fence_tensormap(maps);
    int t = 0, fenced = -1;  // K/V tiles loaded so far: the stage ring runs on across tasks
    // The CTA's tasks: the one its block names, or (persistent) task blockIdx.x and then the counter's tickets, each
    // taken a task ahead so that its latency hides under the walk.
    int ticket = PERSIST ? int(blockIdx.x) : int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    for (int n = 0;; ++n) {
      const int next = PERSIST ? int(gridDim.x) + atomicAdd(p.tickets, 1) : 0;
      TaskRec& rec = recs[n & 1];
      if (PERSIST && ticket >= p.tasks) {
        if (n > 0) sm90::mbar_wait(q_empty, (n - 1) & 1);  // the consumers have seen the last task
        rec.done = true;
        sm90::mbar_arrive(q_full);
        break;
      }
      const int trace_id = ticket;
      (void)trace_id;
      TASP_FWD_MARK(0);
      TASP_FWD_RECORD(1, trace_smid());
      TASP_FWD_MARK_NS(13);
      int b = blockIdx.z;
      const CtaTask task = PERSIST ? ticket_task(p, ticket, b) : cta_task(p);
      const Tile tile = p.tiles[task.tile];
      const WorkItem it = p.items[tile.item];
      const KvPiece first = tile.piece >= 0 ? p.pieces[tile.piece] : KvPiece{};
      // The consumers' last S = Q K^T of the previous task has read Q, and they have its record's parity back.
      if (n > 0) sm90::mbar_wait(q_empty, (n - 1) & 1);
      // Q's copy first (it needs only the item's first row); the task's record, written after it, is q_full's arrival.
      sm90::mbar_expect_tx(q_full, S::kQBytes);
#pragma unroll
      for (int cb = 0; cb < DP / 64; ++cb)
        sm90::tma_load_4d(smem_addr(sQ + cb * kBlockM * 64), maps, q_full, cb * 64, task.h, it.q_row0 + tile.row0, b);
      const int rows = min(kBlockM, it.q_len - tile.row0), t0 = t;
      (void)t0;
      const long long qpos_lo = it.q_pos0 + tile.row0;
      const Band band(it);
      const TileSpan span(band, qpos_lo, qpos_lo + rows - 1);
      const RowsBand rows_band(band, qpos_lo);
      KvWalk walk(it, first);
      bool have = walk.settle<kBlockN>(p, span);
      rec.to = RowsOut{b, task.h, it.q_row0 + tile.row0, rows, it.accumulate};
      rec.id = ticket, rec.tiles = have, rec.done = false;
      TASP_FWD_MARK(2);
      sm90::mbar_arrive(q_full);
      while (have) {
        const int pc = walk.pc, j0 = walk.j0;
        const TileMask tm(rows_band, walk.kp.pos0 + j0, min(kBlockN, walk.kp.len - j0));
        const int mask = walk.partial<kBlockN>(span) ? kMask : 0;
        walk.j0 += kBlockN;
        have = walk.settle<kBlockN>(p, span);
        const unsigned char* km = maps + kTensorMapBytes * (2 + 2 * pc);
        const unsigned char* vm = km + kTensorMapBytes;
        if (pc != fenced) sm90::fence_tensormap(km), sm90::fence_tensormap(vm), fenced = pc;
        const int st = t % STAGES;
        const uint32_t ph = (t / STAGES) & 1;
        sm90::mbar_wait(k_empty(st), ph ^ 1);  // a fresh barrier counts its "previous" phase as complete
        slots[st] = KvRec{tm, mask | (have ? kMore : 0)};
#ifdef TASP_FWD_NOLOAD
        // Diagnostics (what the K/V copies cost in power and time; wrong results): copied into the first stages only,
        // later tiles reuse what the stage holds. One H200, D=128 S=16k full: 10% faster, the clock 1815 MHz instead
        // of 1665-1695 at the same 700 W (docs/measurements/kernels.md, "the forward is bound by power").
        if (t >= STAGES) {
          sm90::mbar_arrive(k_full(st));
          sm90::mbar_wait(v_empty(st), ph ^ 1);
          sm90::mbar_arrive(v_full(st));
          ++t;
          continue;
        }
#endif
        sm90::mbar_arrive_tx(k_full(st), S::kTileBytes);
#pragma unroll
        for (int cb = 0; cb < DP / 64; ++cb)
          sm90::tma_load_4d(smem_addr(sK + st * kBlockN * DP + cb * kBlockN * 64), km, k_full(st), cb * 64, task.hk, j0, b);
        sm90::mbar_wait(v_empty(st), ph ^ 1);
        sm90::mbar_arrive_tx(v_full(st), S::kTileBytes);
#pragma unroll
        for (int cb = 0; cb < DP / 64; ++cb)
          sm90::tma_load_4d(smem_addr(sV + st * kBlockN * DP + cb * kBlockN * 64), vm, v_full(st), cb * 64, task.hk, j0, b);
        ++t;
      }
      TASP_FWD_MARK(3);
      TASP_FWD_RECORD(12, t - t0);
      if constexpr (!PERSIST) break;
      ticket = next;
    }
    return;
  }
  sm90::regs_alloc<S::kConsumerRegs>();

  const int cw = wg, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int t4 = lane % 4;
  const int row0 = cw * 64 + warp * 16 + lane / 4;  // the thread's first row in the tile
  const uint32_t q_addr = smem_addr(sQ) + cw * 64 * 128;  // this warpgroup's 64 rows in each column block
  // Named barrier 1 + i: warpgroup i's turn to issue. The last one hands the first turn to warpgroup 0.
  constexpr int kTurnThreads = 256;
  if (cw == WG - 1) sm90::bar_arrive(1, kTurnThreads);
  int t = 0;  // K/V tiles consumed so far, as the producer counts them
  for (int n = 0;; ++n) {  // one pass unless persistent (a loop ptxas can see through)
    sm90::mbar_wait(q_full, n & 1);
    const TaskRec& rec = recs[n & 1];
    if (PERSIST && rec.done) break;
    const int trace_id = rec.id;
    (void)trace_id;
    TASP_FWD_MARK_WG(4);
    float o[D / 2], s[kBlockN / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
    uint32_t pa[kBlockN / 16][4];  // P, the A operand of P V

    // Scores of tile `k` (in s) to P (in pa); returns whether O must be rescaled by alpha.
    auto softmax = [&](const KvRec& k) {
      if (k.flags & kMask) mask_rows<kBlockN>(s, k.m, row0, t4);
      return online_softmax<kBlockN>(s, m, l, alpha, p.scale_log2, p.rescale_slack);
    };
    // The tile's record, taken before its K buffer (and with it the slot) is released; after the task's last
    // S = Q K^T, Q goes back to the producer too.
    auto take = [&](int st) {
      const KvRec k = slots[st];
      sm90::mbar_arrive(k_empty(st));
      if (PERSIST && !(k.flags & kMore)) sm90::mbar_arrive(q_empty);
      return k;
    };
    // S = Q K^T of the tile in stage st on this warpgroup's turn, waited for; its K buffer released.
    auto scores = [&](int st, uint32_t ph) {
      sm90::mbar_wait(k_full(st), ph);
      sm90::bar_sync(1 + cw, kTurnThreads);
      issue_qk<T, D, kBlockM, kBlockN>(s, q_addr, smem_addr(sK + st * kBlockN * DP));
      sm90::bar_arrive(1 + (cw + 1) % WG, kTurnThreads);
      sm90::wgmma_wait<0>();
      fence_regs<kBlockN / 2>(s);
      return take(st);
    };
    auto to_p = [&] {
#pragma unroll
      for (int kt = 0; kt < kBlockN / 16; ++kt) pack_a<T>(pa[kt], s, kt);
    };
    bool have = rec.tiles;
    if (PERSIST && !have) sm90::mbar_arrive(q_empty);
    if constexpr (OVERLAP) {
      // Tile 0 alone (no P V to overlap yet), so that no wgmma sits behind a branch in the loop.
      if (have) {
        {  // tile 0
          const KvRec k = scores(t % STAGES, (t / STAGES) & 1);
          TASP_FWD_MARK_WG(6);
          have = k.flags & kMore;
          softmax(k);  // O is still zero: no rescale
          to_p();
          ++t;
        }
        for (; have; ++t) {
          const int st = t % STAGES, pst = (t - 1) % STAGES;
          const uint32_t ph = (t / STAGES) & 1;
          sm90::mbar_wait(k_full(st), ph);
          sm90::mbar_wait(v_full(pst), ((t - 1) / STAGES) & 1);
          sm90::bar_sync(1 + cw, kTurnThreads);
          issue_qk<T, D, kBlockM, kBlockN>(s, q_addr, smem_addr(sK + st * kBlockN * DP));
          issue_pv<T, D, kBlockN>(o, pa, smem_addr(sV + pst * kBlockN * DP));
          sm90::bar_arrive(1 + (cw + 1) % WG, kTurnThreads);
          sm90::wgmma_wait<1>();
          fence_regs<kBlockN / 2>(s);
          const KvRec k = take(st);
          have = k.flags & kMore;
          const bool grew = softmax(k);
          sm90::wgmma_wait<0>();
          fence_regs<D / 2>(o);
          fence_regs<kBlockN / 4>(&pa[0][0]);
          sm90::mbar_arrive(v_empty(pst));
          if (grew) rescale<D>(o, alpha);
          to_p();
        }
        const int pst = (t - 1) % STAGES;
        sm90::mbar_wait(v_full(pst), ((t - 1) / STAGES) & 1);
        issue_pv<T, D, kBlockN>(o, pa, smem_addr(sV + pst * kBlockN * DP));
        sm90::wgmma_wait<0>();
        fence_regs<D / 2>(o);
        sm90::mbar_arrive(v_empty(pst));
        TASP_FWD_MARK_WG(8);
      }
    } else {
      for (; have; ++t) {
        const int st = t % STAGES;
        const uint32_t ph = (t / STAGES) & 1;
        const KvRec k = scores(st, ph);
        have = k.flags & kMore;
        if (softmax(k)) rescale<D>(o, alpha);
        to_p();
        sm90::mbar_wait(v_full(st), ph);
        issue_pv<T, D, kBlockN>(o, pa, smem_addr(sV + st * kBlockN * DP));
        sm90::wgmma_wait<0>();
        fence_regs<D / 2>(o);
        sm90::mbar_arrive(v_empty(st));
      }
    }
    const RowsOut& to = rec.to;
#ifdef TASP_FWD_NOSTORE
    if (!(o[0] == o[0]))  // diagnostics: what the rows' stores cost (never true on finite inputs)
#endif
    {
      if (S::kOutBytes > 0 && p.tma_store && !to.accumulate && (to.rows >= 64 * (cw + 1) || to.qrow + to.rows == p.q_rows))
        store_rows_tma<D, kBlockM, PERSIST>(p, to, cw, row0, o, m, l, lane, so);
      else
        store_rows<D>(p, to, row0, o, m, l, lane);
    }
    TASP_FWD_MARK_WG(10);
    TASP_FWD_MARK_WG0_NS(14);
    if constexpr (!PERSIST) break;
  }
  if (PERSIST && threadIdx.x % 128 == 0) sm90::bulk_wait_read();  // the last rows have left shared memory
  if (cw == 0) sm90::bar_sync(1, kTurnThreads);  // takes the last warpgroup's final hand-over
}

// One CTA per task of the grid, or (PERSIST) one per SM taking the grid's tasks in order; key tiles of BN.
template <typename T, int D, bool OVERLAP, int BN, bool PERSIST = false>
void launch_tiles(const Params& p, dim3 grid, cudaStream_t s) {
  using S = Sm90Shape<D, BN, PERSIST>;
  allow_dynamic_smem<attention_fwd_sm90_kernel<T, D, OVERLAP, BN, PERSIST>>(S::kSmem);
  if constexpr (PERSIST) grid = dim3(std::min(p.tasks, sm_count()));
  attention_fwd_sm90_kernel<T, D, OVERLAP, BN, PERSIST><<<grid, S::kThreads, S::kSmem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

// persist: the persistent grid where the kernel has it (128-key tiles at D=80..128, which leave room for the
// rows' TMA store); otherwise one CTA per task.
template <typename T, int D, bool OVERLAP>
void launch_sm90(const Params& p, int tiles, int B, int block_n, bool persist, cudaStream_t s) {
  const dim3 grid = cta_grid(p, tiles, B);
  if constexpr (D > 64 && D <= 128 && OVERLAP) {
    if (block_n == kWideBlockN) return launch_tiles<T, D, OVERLAP, kWideBlockN>(p, grid, s);
    if (persist) return launch_tiles<T, D, OVERLAP, Sm90Shape<D>::kBlockN, true>(p, grid, s);
  }
  launch_tiles<T, D, OVERLAP, Sm90Shape<D>::kBlockN>(p, grid, s);
}

}  // namespace tasp::kernels::fwd
