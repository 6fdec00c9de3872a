#pragma once
// What both Hopper backward kernels share (bwd_sm90.cuh for head dims up to 128, bwd_sm90_wide.cuh for 256): the
// launch's parameters and the query tile as consumers hold it, the dQ scratch's layout, a CTA's work and entry, its
// walk and the loader that streams its Q/dO tiles (thread 0), the 16-bit end's copy-out, and the trace points of
// tools/gpu/trace.sh bwd.
#include <cstdint>

#include "kernels/bwd_plan.hpp"
#include "kernels/bwd_tail.hpp"
#include "kernels/fwd_common.cuh"
#include "kernels/head_rows.hpp"
#include "kernels/tensor_map.hpp"
#include "kernels/tma.cuh"

namespace tasp::kernels::bwd {

// A query tile as the consumers hold it from its S^T (front) to its dQ (back): the plan's visit, the query head,
// the ring stage that holds its Q and dO and the slot thread 0 wrote it in (the whole WorkItem held across the
// tile cost registers). Tile -1 ends the walk. The mask beside it is read from the slot only by a tile that
// needs it. Aligned, so that it is written and read in 16-byte accesses.
struct alignas(16) QTile : Visit {
  int h, st, slot;
};
static_assert(sizeof(QTile) == 48, "a QTile is the visit's two 16-byte halves and a third with h, st, slot");

struct Params {
  const float* lse;
  const float* dsum;
  float* dq_accum;  // see dq_accum_offset
  int dq_tiles;
  const WorkItem* items;
  const KvPiece* pieces;
  const GradPiece* grads;
  const Tile* tiles;
  const Visit* visits;  // the CTAs' walks (Plan::visits)
  // TMA tensor maps (128 bytes each): [0] Q, [1] dO, [2] LSE, [3] D (1-d, [B][H][q_rows]), [4 + 2i] K and [5 + 2i]
  // V of piece i.
  const unsigned char* tmaps;
  int* dq_sems;      // deterministic dQ: visits done per [B][H][dq_tiles][dq_blocks], zero at launch
  int q_rows, H, Hkv;
  // Query heads per CTA, a divisor of the group H / Hkv (the whole group with the deterministic dQ): the group's
  // CTAs of one key tile then add their dK and dV into the piece's accumulator with reductions.
  int heads_per_cta;
  float scale, scale_log2;
  // The launch's CTAs (not deterministic: a 1-d grid, the plan's tiles fastest, then the KV head splits, then the
  // batch): from tail_first on, the parts of CTAs tail_first + g (g < tail_ctas; bwd_tail.hpp), CTA g's at
  // [tail_offsets[g], tail_offsets[g + 1]) counted from tail_first, each walking a run of its visits. With 16-bit
  // dK/dV a split CTA's parts add theirs into its block of tail_sums ([keys][D] dK, then dV) and count themselves in
  // tail_done; the last writes the sums and leaves both zero (as allocated).
  int tiles_n, kv_ctas;
  long long tail_first;
  int tail_ctas;
  const int* tail_offsets;
  float* tail_sums;
  int* tail_done;
};

// Params::tmaps' order.
constexpr int kLseMap = 2, kDsumMap = 3, kFirstKvMap = 4;

// A tile's LSE and D in the [B][H][q_rows] arrays: element `rows_first` on. TMA copies them as one box per array from
// the 16-byte boundary at or before it (a 1-d box from an unaligned element stopped the kernel: illegal instruction),
// so a stage's arrays hold 4 floats more than the tile's rows and the tile's first row sits `rows_first & 3` in.
__device__ __forceinline__ int rows_first(const Params& p, int b, int h, int qrow) { return (b * p.H + h) * p.q_rows + qrow; }

// The dQ scratch, owned here for the kernel (which writes it) and attention_backward_finish (which reads it):
// tiles of BM query rows, per tile [dq_blocks][dq_cols / 8][128 threads][4 floats], each block a 64 x dq_cols block
// of dQ^T (D > 64: head-dim columns 64 w.. of the padded DP, all BM rows, block w; D = 64: all columns, rows
// w dq_cols..). Here a warpgroup writes block w; at D=256 (bwd_sm90_wide.cuh, BM = 64) warpgroup w writes blocks
// 2 w and 2 w + 1.
__host__ __device__ constexpr int dq_cols(int D, int BM) { return D > 64 ? BM : BM / 2; }
// Blocks of a dQ scratch tile: the 64-column blocks of the padded head dim (D > 64) or the warpgroups' row halves.
__host__ __device__ constexpr int dq_blocks(int D) { return D > 64 ? padded_dim(D) / 64 : 2; }
// Floats before block w (< dq_blocks(D): the warpgroup; bwd_sm90_wide.cuh's 2 w + half) of tile `tile`: [B][H][tiles][...].
__host__ __device__ inline long long dq_accum_offset(int b, int h, int tile, int w, int H, int tiles, int BM, int D) {
  return ((long long)(b * H + h) * tiles + tile) * BM * padded_dim(D) + (long long)w * 64 * dq_cols(D, BM);
}
// Where float4 k of thread (warp, g, t4) in warpgroup w's block lies in its tile (the wgmma accumulator layout):
// query rows q, q + 1 and head-dim columns d, d + 8, in the order (q, d), (q + 1, d), (q, d + 8), (q + 1, d + 8);
// columns at or past D (padding) hold zeros.
struct DqSpot {
  int q, d;
};
__host__ __device__ inline DqSpot dq_accum_spot(int D, int cols, int w, int k, int thread) {
  const int warp = thread / 32, g = thread % 32 / 4, t4 = thread % 4;
  return {(D > 64 ? 0 : w * cols) + 8 * k + 2 * t4, (D > 64 ? 64 * w : 0) + warp * 16 + g};
}

// The CTA's visits in order, each for every query head of the group. Thread 0 reads them from shared memory:
// the visit after the current one is copied there (cache[v & 1]) when the walk reaches the current one, so that
// no step waits for L2 (with the device-side walk this measured +3% at D=128, docs/measurements/kernels.md).
struct QWalk {
  int v, vend, gi, group;
  Visit* cache;  // [2] in shared memory
  __device__ __forceinline__ QWalk(const Tile& t, int group_, Visit* cache_)
      : v(t.vbegin), vend(t.vbegin + t.vcount), gi(0), group(group_), cache(cache_) {}
  // Visit i on its way into the cache.
  __device__ __forceinline__ void fetch(const Params& p, int i) const {
    if (i >= vend) return;
    const char* src = reinterpret_cast<const char*>(p.visits + i);
    char* dst = reinterpret_cast<char*>(cache + (i & 1));
    fwd::cp_async16(dst, src, true), fwd::cp_async16(dst + 16, src + 16, true);
    fwd::cp_async_commit();
  }
  // The current visit, in the cache (its copy waited for at its first head, the next one's then started).
  __device__ __forceinline__ const Visit& current(const Params& p) const {
    if (gi == 0) fwd::cp_async_wait_all(), fetch(p, v + 1);
    return cache[v & 1];
  }
  __device__ __forceinline__ void next() {
    if (++gi == group) gi = 0, ++v;
  }
};

// Thread 0 at the kernel's entry: the CTA's six tensor maps (Q, dO, LSE, D and its piece's K and V) on their way into
// the TMA unit's descriptor cache while the walk is resolved, so that its first copies do not wait for them. Without
// it, issuing the first copies took ~4,700 of a ~13,000-cycle prologue (the steady state's copies ~420); fetched at the
// entry, backward +0.8-2.0% (one H100, 2026-11-27: B=4 S=4096 D=128 causal +1.8%, B=2 S=8192 causal +2.0%, D=256
// +0.8-0.9%; docs/measurements/kernels.md). The acquire fences stay after the walk is resolved: fenced at the entry
// too, the walk's loads waited behind them (the prologue grew 3-8k cycles), and with no fences the first copies
// waited for the descriptors instead.
__device__ __forceinline__ void prefetch_maps(const Params& p, int piece) {
  if (threadIdx.x != 0) return;
  const unsigned char* kv = p.tmaps + kTensorMapBytes * (kFirstKvMap + 2 * piece);
#pragma unroll
  for (int m = 0; m < kFirstKvMap; ++m) sm90::prefetch_tensormap(p.tmaps + m * kTensorMapBytes);
  sm90::prefetch_tensormap(kv), sm90::prefetch_tensormap(kv + kTensorMapBytes);
}

#ifdef TASP_BWD_TRACE
// Diagnostics only (tools/gpu/trace.sh bwd, a build with -DTASP_BWD_TRACE): clock64 at the phases of every tile
// of the first kTraceCtas CTAs in launch order (the first key tiles of KV head 0, batch 0; the deterministic grid's
// first KV heads), by thread 0 of each warpgroup; event 7 is how long thread 0 spent walking to the next tile and
// issuing its copies at the tile's start.
constexpr int kTraceCtas = 128, kTraceTiles = 256, kTraceEvents = 12;
__device__ long long g_bwd_trace[kTraceCtas * 2 * kTraceTiles * kTraceEvents];
// Event ev of warpgroup wg's tile `tile`, if this CTA and tile are traced (else nothing is written).
#define TASP_BWD_RECORD(wg, tile, ev, value)                                                           \
  if (blockIdx.y == 0 && blockIdx.z == 0 && blockIdx.x < kTraceCtas && (tile) < kTraceTiles)         \
  g_bwd_trace[((blockIdx.x * 2 + (wg)) * kTraceTiles + (tile)) * kTraceEvents + (ev)] = (value)
#define TASP_BWD_MARK(ev) \
  if (wt == 0) TASP_BWD_RECORD(w, t, ev, clock64())
#define TASP_BWD_T0_START() const long long t0_start = clock64()
#define TASP_BWD_T0_END() TASP_BWD_RECORD(0, t, 7, clock64() - t0_start)
// Thread 0's parts by the tile they are for (cycles): 8 resolving it; 9 waiting for its stage, 10 that and issuing
// its copies.
#define TASP_BWD_SPLIT_START() const long long split0 = clock64()
#define TASP_BWD_SPLIT(ev, tile) TASP_BWD_RECORD(0, tile, ev, clock64() - split0)
// The CTA's own clocks, by thread 0 in warpgroup 0's event 11: its entry in tile 0's, its end (the dK/dV reductions
// issued) in tile 1's, so that its prologue and end weigh against its walk; the prologue's parts in tiles 2-4's (the
// walk's first two tiles resolved, the tensor maps fenced, the first copies issued), and the end's in tiles 5-7's (the
// other warpgroup's last dS^T ready, the last dQ block staged and its reduce issued, the dK/dV stores issued).
#define TASP_BWD_CTA(which) \
  if (threadIdx.x == 0) TASP_BWD_RECORD(0, which, 11, clock64())
#else
#define TASP_BWD_CTA(which)
#define TASP_BWD_SPLIT_START()
#define TASP_BWD_SPLIT(ev, tile)
#define TASP_BWD_MARK(ev)
#define TASP_BWD_T0_START()
#define TASP_BWD_T0_END()
#endif

// A CTA's work (both backward kernels): its key tile (a piece's keys), KV head and batch, and its share of the KV
// head's group of query heads (splits CTAs per key tile and KV head, heads_per_cta heads each, from h0). DET: the grid
// runs the KV heads fastest. A part of a split CTA (group >= 0, Params::tail_first) walks only its run of the visits.
struct Cta {
  Tile tile;
  KvPiece kp;
  int splits, hk, b, h0;
  int group = -1, parts = 1;  // a part of a split CTA: the CTA (its block of Params::tail_sums) and its parts
  __device__ __forceinline__ Cta(const Params& p, bool det) {
    int x, y, part = 0;
    if (det) {
      x = blockIdx.y, y = blockIdx.x, b = blockIdx.z;
    } else {
      long long i = blockIdx.x;
      if (i >= p.tail_first) {  // the CTA whose parts' run holds part j: the last g with tail_offsets[g] <= j
        const int j = int(i - p.tail_first);
        int lo = 0, hi = p.tail_ctas - 1;
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (p.tail_offsets[mid] <= j) lo = mid;
          else hi = mid - 1;
        }
        parts = p.tail_offsets[lo + 1] - p.tail_offsets[lo];
        if (parts > 1) group = lo, part = j - p.tail_offsets[lo];
        i = p.tail_first + lo;
      }
      x = int(i % p.tiles_n);
      const long long r = i / p.tiles_n;
      y = int(r % p.kv_ctas), b = int(r / p.kv_ctas);
    }
    tile = p.tiles[x];
    if (group >= 0) {
      const PartRange run = part_range(tile.vbegin, tile.vcount, part, parts);
      tile.vbegin = run.begin, tile.vcount = run.count;
    }
    kp = p.pieces[tile.piece];
    splits = p.H / p.Hkv / p.heads_per_cta, hk = y / splits;
    h0 = hk * (p.H / p.Hkv) + (y % splits) * p.heads_per_cta;
  }
};

// A split CTA's block of Params::tail_sums: dK (scaled) at 0, dV at KEYS * D, each [KEYS][D] fp32.
template <int KEYS, int D>
__device__ __forceinline__ float* tail_block(const Params& p, int group) {
  return p.tail_sums + (long long)group * 2 * KEYS * D;
}

// The end of a split CTA's part with 16-bit dK/dV, once its sums are added into its block: the last part to get here
// writes the block's rows in T (keys j0.. of a piece of `len` keys, those below it) and zeroes the block and its
// count for the next launch. Each part's adds are made visible before it counts itself (the fence), and the last
// reads through L2 (__ldcg).
template <typename T, int D, int KEYS, int THREADS>
__device__ __forceinline__ void tail_finish(const Params& p, const Cta& cta, const GradPiece& gp, long long bs) {
  __threadfence();
  __syncthreads();
  int last = 0;
  if (threadIdx.x == 0) last = atomicAdd(p.tail_done + cta.group, 1) == cta.parts - 1;
  if (!__syncthreads_or(last)) return;
  __threadfence();
  float* const blk = tail_block<KEYS, D>(p, cta.group);
  constexpr int kChunks = D / 8;  // 8 values a thread: one 16-byte store of T
  for (int i = threadIdx.x; i < KEYS * kChunks; i += THREADS) {
    const int j = i / kChunks, c = i % kChunks;
    float4* k = reinterpret_cast<float4*>(blk + j * D + 8 * c);
    float4* v = reinterpret_cast<float4*>(blk + KEYS * D + j * D + 8 * c);
    const float4 k0 = __ldcg(k), k1 = __ldcg(k + 1), v0 = __ldcg(v), v1 = __ldcg(v + 1);
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    __stcg(k, zero), __stcg(k + 1, zero), __stcg(v, zero), __stcg(v + 1, zero);
    if (cta.tile.j0 + j >= cta.kp.len) continue;
    const long long off = cta.b * bs + ((long long)(cta.tile.j0 + j) * p.Hkv + cta.hk) * D + 8 * c;
    const uint4 ko = make_uint4(fwd::pack2<T>(k0.x, k0.y), fwd::pack2<T>(k0.z, k0.w), fwd::pack2<T>(k1.x, k1.y), fwd::pack2<T>(k1.z, k1.w));
    const uint4 vo = make_uint4(fwd::pack2<T>(v0.x, v0.y), fwd::pack2<T>(v0.z, v0.w), fwd::pack2<T>(v1.x, v1.y), fwd::pack2<T>(v1.z, v1.w));
    *reinterpret_cast<uint4*>(static_cast<T*>(gp.dk16) + off) = ko;
    *reinterpret_cast<uint4*>(static_cast<T*>(gp.dv16) + off) = vo;
  }
  if (threadIdx.x == 0) p.tail_done[cta.group] = 0;
}

// The 16-bit end of both backward kernels (GradPiece::dk16): dK and dV staged in T in shared memory as [key][ROW]
// rows (row16_at), then written out in whole rows, 16 bytes a thread: keys j0.. of a piece of `len` keys (those below
// it), KV head hk of Hkv, batch b of stride bs.
template <typename T, int D, int ROW, int KEYS, int THREADS>
__device__ __forceinline__ void copy_rows16(T* const tk, T* const tv, const GradPiece& gp, int b, long long bs, int j0, int len,
                                            int Hkv, int hk) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of a row
  for (int i = threadIdx.x; i < KEYS * kChunks; i += THREADS) {
    const int j = i / kChunks, c = i % kChunks;
    if (j0 + j >= len) continue;
    const long long off = b * bs + ((long long)(j0 + j) * Hkv + hk) * D + 8 * c;
    const int at = row16_at<ROW>(j, 8 * c);
    *reinterpret_cast<uint4*>(static_cast<T*>(gp.dk16) + off) = *reinterpret_cast<const uint4*>(tk + at);
    *reinterpret_cast<uint4*>(static_cast<T*>(gp.dv16) + off) = *reinterpret_cast<const uint4*>(tv + at);
  }
}

// A CTA's entry (both backward kernels): its clock marked (trace builds), its tensor maps prefetched, its work read.
__device__ __forceinline__ Cta enter(const Params& p, bool det) {
  TASP_BWD_CTA(0);
  const Cta cta(p, det);
  prefetch_maps(p, cta.tile.piece);
  return cta;
}

// Thread 0's walk and copies, for both backward kernels (S: the kernel's Shape; PER_COPY: Q and dO column blocks per
// TMA copy). Its K and V tile at the start; then, at the start of tile t, tile t + 1's copies (Q, dO, and the rows'
// LSE and D into the stage's [LSE][D] arrays at `rows`: S::kRowArr bytes each) once the stage is free
// (load_next), and at the end of tile t tile t + 2 resolved into its slot (resolve: one 32-byte visit, which the host
// resolved). Resolving t + 1 at the start, before the copies, held both warpgroups ~1,300 cycles a tile; issuing
// t + 2 at the end of tile t instead put the warpgroups a whole tile apart and was 1-5% slower (D=128,
// docs/measurements/kernels.md). The barriers at `bars`: K/V full, then STAGES of Q/dO full, then STAGES of empty.
template <class S, int PER_COPY, bool DET>
struct Loader {
  const Params& p;
  QTile* slots;
  QWalk ahead;
  unsigned char *sQ, *sdO, *rows;
  uint32_t bars;
  int h0, b;
  int resolved_n = 0;  // tiles resolved
  int loaded = 0;      // tiles whose copies are issued (-1 once the end has been)

  // Its shared memory at `own` (kBytes: the stages' LSE/D arrays, the QTile slots, the walk's cache, the barriers).
  static constexpr int kSlotsAt = S::kRowBytes, kCacheAt = kSlotsAt + S::kSlots * S::kSlotBytes;
  static constexpr int kBarsAt = kCacheAt + 2 * int(sizeof(Visit)), kBytes = kBarsAt + 8 * S::kBarriers;
  __device__ __forceinline__ Loader(const Params& p_, const Cta& cta, unsigned char* own, unsigned char* sQ_, unsigned char* sdO_)
      : p(p_), slots(reinterpret_cast<QTile*>(own + kSlotsAt)),
        ahead(cta.tile, p_.heads_per_cta, reinterpret_cast<Visit*>(own + kCacheAt)), sQ(sQ_), sdO(sdO_), rows(own),
        bars(fwd::smem_addr(own + kBarsAt)), h0(cta.h0), b(cta.b) {}
  __device__ __forceinline__ uint32_t kv_full() const { return bars; }
  __device__ __forceinline__ uint32_t qd_full(int st) const { return bars + 8 * (1 + st); }
  __device__ __forceinline__ uint32_t qd_empty(int st) const { return bars + 8 * (1 + S::STAGES + st); }
  // The barriers (thread 0, before the CTA's first sync): a stage is empty after `empty_arrivals` arrivals.
  __device__ __forceinline__ void init(int empty_arrivals) const {
    sm90::mbar_init(kv_full(), 1);
    for (int st = 0; st < S::STAGES; ++st) sm90::mbar_init(qd_full(st), 1), sm90::mbar_init(qd_empty(st), empty_arrivals);
    sm90::fence_mbar_init();
  }

  // The walk's first visits on their way, the CTA's K and V tile (keys j0.. of its piece, KV head hk) loading, the
  // first two tiles resolved.
  __device__ __forceinline__ void start(const Tile& tile, int hk, unsigned char* sK, unsigned char* sV) {
    if constexpr (!DET) ahead.fetch(p, ahead.v);
    resolve(), resolve();
    TASP_BWD_CTA(2);
    const unsigned char* maps = p.tmaps;
    const unsigned char* km = maps + kTensorMapBytes * (kFirstKvMap + 2 * tile.piece);
#pragma unroll
    for (int m = 0; m < kFirstKvMap; ++m) sm90::fence_tensormap(maps + m * kTensorMapBytes);
    sm90::fence_tensormap(km), sm90::fence_tensormap(km + kTensorMapBytes);
    TASP_BWD_CTA(3);
    sm90::mbar_arrive_tx(bars, 2 * S::kKvBytes);
#pragma unroll
    for (int cb = 0; cb < S::kQdBlocks; ++cb) {
      sm90::tma_load_4d(fwd::smem_addr(sK + cb * S::kKvBlockBytes), km, bars, cb * 64, hk, tile.j0, b);
      sm90::tma_load_4d(fwd::smem_addr(sV + cb * S::kKvBlockBytes), km + kTensorMapBytes, bars, cb * 64, hk, tile.j0, b);
    }
  }
  __device__ __forceinline__ void resolve() {
    if (ahead.v > ahead.vend) return;  // the end resolved
    TASP_BWD_SPLIT_START();
    QTile& next = slots[resolved_n % S::kSlots];
    if (ahead.v < ahead.vend) {
      // Not through the cache with the deterministic dQ: 6% slower with it at D=128 (docs/measurements/kernels.md; likely
      // its turns' proxy fences waiting for the copy).
      const int4* src = reinterpret_cast<const int4*>(DET ? p.visits + ahead.v : &ahead.current(p));
      int4* dst = reinterpret_cast<int4*>(&next);
      dst[0] = src[0], dst[1] = src[1];
      dst[2] = make_int4(h0 + ahead.gi, resolved_n % S::STAGES, resolved_n % S::kSlots, 0);  // h, st, slot
      ahead.next();
    } else {
      next.tile = -1;  // the end of the walk
      ++ahead.v;
    }
    TASP_BWD_SPLIT(8, resolved_n);
    ++resolved_n;
  }
  __device__ __forceinline__ void load_next() {
    if (loaded < 0) return;
    TASP_BWD_SPLIT_START();
    const int st = loaded % S::STAGES;
    const QTile& n = slots[loaded % S::kSlots];
    const int2 tq = *reinterpret_cast<const int2*>(&n.tile);  // tile, qrow
    const int qrow = tq.y, h = n.h;
    sm90::mbar_wait(qd_empty(st), ((loaded / S::STAGES) & 1) ^ 1);  // a fresh barrier's "previous" phase is complete
    TASP_BWD_SPLIT(9, loaded);
    if (tq.x < 0) {
      sm90::mbar_arrive(qd_full(st));
      loaded = -1;
      return;
    }
#ifdef TASP_BWD_NOLOAD  // a diagnostic build (tools/gpu/trace.sh VARIANTS): after the first stages no copies, stale Q/dO
    if (loaded >= S::STAGES) {
      sm90::mbar_arrive(qd_full(st));
      ++loaded;
      return;
    }
#endif
    const unsigned char* maps = p.tmaps;
    sm90::mbar_arrive_tx(qd_full(st), 2 * S::kQBytes + 2 * S::kRowBox * 4);
    // The rows' LSE and D: one box of each array (rows_first), past the tile's rows another item's rows or zeros (the
    // consumers ignore them). Fetched by each consumer thread after the tile's S^T and dP^T were issued, their L2
    // latency held 13% of the warps' samples at B=2 S=8192 causal, D=128 (Nsight Compute, 2026-11-26).
    const int row = rows_first(p, b, h, qrow) & ~3;
    unsigned char* rs = rows + st * 2 * S::kRowArr;
    sm90::tma_load_1d(fwd::smem_addr(rs), maps + kLseMap * kTensorMapBytes, qd_full(st), row);
    sm90::tma_load_1d(fwd::smem_addr(rs + S::kRowArr), maps + kDsumMap * kTensorMapBytes, qd_full(st), row);
    if constexpr (PER_COPY > 1) {  // the column blocks in one copy each (a 5-d tensor map)
      static_assert(PER_COPY == S::kQdBlocks, "all of a tile's blocks in one copy");
      sm90::tma_load_5d(fwd::smem_addr(sQ + st * S::kQBytes), maps, qd_full(st), 0, h, qrow, 0, b);
      sm90::tma_load_5d(fwd::smem_addr(sdO + st * S::kQBytes), maps + kTensorMapBytes, qd_full(st), 0, h, qrow, 0, b);
    } else {
#pragma unroll
      for (int cb = 0; cb < S::kQdBlocks; ++cb) {
        sm90::tma_load_4d(fwd::smem_addr(sQ + st * S::kQBytes + cb * S::kQdBlockBytes), maps, qd_full(st), cb * 64, h, qrow, b);
        sm90::tma_load_4d(fwd::smem_addr(sdO + st * S::kQBytes + cb * S::kQdBlockBytes), maps + kTensorMapBytes, qd_full(st),
                          cb * 64, h, qrow, b);
      }
    }
    TASP_BWD_SPLIT(10, loaded);
    ++loaded;
  }
};

}  // namespace tasp::kernels::bwd
