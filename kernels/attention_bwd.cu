// Attention backward over a work list: argument checks, the CTAs' work (key tiles of every piece against
// the query tiles of the items that list it, longest first), upload of the list and its TMA tensor maps,
// and the launch of the Hopper kernel (bwd_sm90.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/attention.hpp"
#include "kernels/band.hpp"
#include "kernels/bwd_plan.hpp"
#include "kernels/bwd_plan_cache.hpp"
#include "kernels/bwd_sm90.cuh"
#include "kernels/bwd_sm90_wide.cuh"
#include "kernels/cuda_check.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/head_dims.hpp"
#include "kernels/tensor_map.hpp"
#include "kernels/trace_dump.hpp"
#include "kernels/upload.hpp"

namespace tasp::kernels {
namespace {

// Query heads per backward CTA (bwd::Params::heads_per_cta): one, so that a GQA launch runs the CTAs of an MHA one
// of the same H (each reads its K/V tile, which the group's other CTAs then find in L2) and adds its dK and dV
// with reductions. A CTA walking every head of the group, K/V loaded once, measured 5% slower than MHA at groups
// of 4 and 10-25% at 8 on an H200 (docs/measurements/kernels.md, backward under GQA). The deterministic dQ
// keeps the whole group (dK and dV summed in one CTA, in order). TASP_BWD_HEADS_PER_CTA=k overrides (A/B runs;
// 0, or k not dividing the group: the whole group).
int heads_per_cta(int group, bool deterministic) {
  if (deterministic) return group;
  const int k = env_int("TASP_BWD_HEADS_PER_CTA", 1);
  return k > 0 && group % k == 0 ? k : group;
}

// Query rows of a backward tile and of the dQ scratch's tiles; keys of a CTA. D=256 runs bwd_sm90_wide.cuh (64 keys a
// CTA, the head dim split between the warpgroups: 5 products a tile, where bwd_sm90.cuh's layout needed two CTAs a key
// tile, each half of the head dim, and 7: 1.25x faster on one H100, docs/measurements/kernels.md).
bool wide(int D) { return D == 256; }
int query_tile(int D) { return wide(D) ? bwd::wide::Shape<256>::BM : bwd::block_m(D); }
int key_tile(int D) { return wide(D) ? bwd::wide::Shape<256>::BN : bwd::kKeyTile; }

}  // namespace

bool backward_supported() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return false;
  return prop.major == 9;
}

namespace {

// 16-bit grads are written, not added to: key rows that no CTA walks (no query sees them, under windows or
// documents) get their zero sums here, the whole piece where any of its key tiles has no walk.
void clear_unwritten(const AttentionBackwardBatch& b, const bwd::Plan& plan, int bn, cudaStream_t s) {
  std::vector<long long> walked(b.pieces.size(), 0);
  for (const bwd::Tile& t : plan.tiles) ++walked[t.piece];
  for (size_t pc = 0; pc < b.pieces.size(); ++pc) {
    const KvPiece& kp = b.pieces[pc];
    const GradPiece& gp = b.grads[pc];
    if (!gp.dk16 || kp.len <= 0 || walked[pc] == (kp.len + bn - 1) / bn) continue;
    const size_t width = size_t(kp.len) * b.Hkv * b.D * 2, pitch = gp.batch_stride ? size_t(gp.batch_stride) * 2 : width;
    TASP_CUDA(cudaMemset2DAsync(gp.dk16, pitch, 0, width, b.B, s));
    TASP_CUDA(cudaMemset2DAsync(gp.dv16, pitch, 0, width, b.B, s));
  }
}

// The split CTAs' counts and sums (bwd::Params::tail_done, tail_sums: `keys` x D of dK and of dV a CTA), zero as
// allocated and as each launch leaves them; grown (after the launches on s that use them) when a launch needs more.
void tail_buffers(Workspace& ws, bwd::Params& p, int ctas, int keys, int D, cudaStream_t s) {
  const size_t counts = (size_t(ctas) * sizeof(int) + 255) / 256 * 256, need = counts + size_t(ctas) * 2 * keys * D * sizeof(float);
  if (ws.tail_bytes < need) {
    if (ws.tail) {
      TASP_CUDA(cudaStreamSynchronize(s));
      TASP_CUDA(cudaFree(ws.tail));
      ws.tail = nullptr, ws.tail_bytes = 0;
    }
    TASP_CUDA(cudaMalloc(&ws.tail, need));
    TASP_CUDA(cudaMemsetAsync(ws.tail, 0, need, s));
    ws.tail_bytes = need;
  }
  p.tail_done = static_cast<int*>(ws.tail);
  p.tail_sums = reinterpret_cast<float*>(static_cast<char*>(ws.tail) + counts);
}

}  // namespace

void attention_backward(const AttentionBackwardBatch& b, Workspace& ws, void* stream) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("attention backward: " + m); };
  if (!head_dim_supported(b.D, true)) bad("head dim D=" + std::to_string(b.D) + " not supported by the backward (" + head_dims_text(true) + ")");
  if (b.B < 1 || b.H < 1 || b.Hkv < 1 || b.H % b.Hkv) bad("need B, H, Hkv >= 1 and H a multiple of Hkv");
  if (b.B > 65535 || b.Hkv > 65535) bad("B and Hkv must be <= 65535");
  if (!b.q || !b.dout || !b.lse || !b.dsum || !b.dq_accum) bad("q, dout, lse, dsum and dq_accum must be set");
  if (misaligned(b.q) || misaligned(b.dout) || misaligned(b.dq_accum) || misaligned(b.lse) || misaligned(b.dsum))
    bad("q, dout, lse, dsum and dq_accum must be 16-byte aligned");
  if (b.grads.size() != b.pieces.size()) bad("grads: one accumulator per piece (" + std::to_string(b.pieces.size()) + ")");
  const int kBlockM = query_tile(b.D), kBlockN = key_tile(b.D);
  for (size_t i = 0; i < b.items.size(); ++i) check_item(b.items[i], i, b.q_rows, b.pieces.size());
  for (size_t pc = 0; pc < b.pieces.size(); ++pc) {
    const KvPiece& kp = b.pieces[pc];
    const GradPiece& gp = b.grads[pc];
    const std::string at = "pieces[" + std::to_string(pc) + "]";
    if (kp.len < 0 || (kp.len > 0 && (!kp.k || !kp.v))) bad(at + ": empty pointer or negative length");
    if (misaligned(kp.k) || misaligned(kp.v) || kp.batch_stride % 8 || kp.batch_stride < 0)
      bad(at + ": k, v must be 16-byte aligned and batch_stride a non-negative multiple of 8");
    const std::string ga = "grads[" + std::to_string(pc) + "]";
    if (kp.len <= 0) continue;
    if (gp.batch_stride % 2 || gp.batch_stride < 0) bad(ga + ": batch_stride must be a non-negative even number");
    const bool f32 = gp.dk || gp.dv, half = gp.dk16 || gp.dv16;
    if (f32 == half) bad(ga + ": set either dk and dv (fp32, added into) or dk16 and dv16 (16-bit, written)");
    if (f32 && (!gp.dk || !gp.dv || misaligned(gp.dk, 8) || misaligned(gp.dv, 8))) bad(ga + ": dk, dv must both be set and 8-byte aligned");
    if (half && (!gp.dk16 || !gp.dv16 || misaligned(gp.dk16) || misaligned(gp.dv16) || gp.batch_stride % 8))
      bad(ga + ": dk16, dv16 must both be set and 16-byte aligned, batch_stride a multiple of 8 (rows leave in 16-byte chunks)");
    if (half && heads_per_cta(b.H / b.Hkv, b.deterministic) != b.H / b.Hkv)
      bad(ga + ": dk16/dv16 need one writer per key row: H == Hkv or deterministic (H=" + std::to_string(b.H) +
          " Hkv=" + std::to_string(b.Hkv) + " splits each group over CTAs that add); use fp32 dk/dv");
  }
  if (!backward_supported()) bad("needs a Hopper GPU (compute capability 9.0): the kernel uses wgmma and TMA");
  // Staggered walks measured +2.1-2.7% at D=128, S=16k, full mask, level at D=64 and 0-1.3% slower on causal walks
  // (docs/measurements/kernels.md), hence only walks without masks; not with the deterministic dQ, whose turns would then wait on
  // CTAs behind. TASP_BWD_STAGGER=0/1 overrides (A/B runs).
  const int forced = env_int("TASP_BWD_STAGGER", -1);
  const bool stagger = forced < 0 ? !b.deterministic : forced != 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (!ws.bwd_plans) ws.bwd_plans = std::make_unique<bwd::PlanCache>();
  bwd::CachedPlan& cached =
      bwd::find_or_build(*ws.bwd_plans, bwd::plan_key(b.items, b.pieces, kBlockM, kBlockN, b.deterministic, stagger),
                         [&] { return bwd::make_plan(b.items, b.pieces, kBlockM, kBlockN, b.deterministic, stagger); },
                         staging_of(ws), s);
  const bwd::Plan& plan = cached.plan;
  clear_unwritten(b, plan, kBlockN, s);
  if (plan.tiles.empty()) return;
  if (plan.tiles.size() > (b.deterministic ? 65535u : 0x7fffffffu)) bad("too many key tiles");

  // Tensor maps (bwd::Params::tmaps): Q and dO in boxes of kBlockM rows, the rows' LSE and D in boxes of kBlockM values,
  // then K and V of every piece in boxes of the key tile.
  const bool bf16 = b.dtype == DType::BF16;
  std::vector<unsigned char> maps((bwd::kFirstKvMap + 2 * b.pieces.size()) * kTensorMapBytes, 0);
  const long long qstride = (long long)b.q_rows * b.H * b.D;
  const int qd_blocks = wide(b.D) ? bwd::wide::qd_blocks_per_copy(b.deterministic) : bwd::qd_blocks_per_copy(b.D, b.deterministic);
  encode_bshd_map(maps.data(), b.q, bf16, b.B, b.q_rows, b.H, b.D, qstride, kBlockM, qd_blocks);
  encode_bshd_map(maps.data() + kTensorMapBytes, b.dout, bf16, b.B, b.q_rows, b.H, b.D, qstride, kBlockM, qd_blocks);
  const long long rows = (long long)b.B * b.H * b.q_rows;
  if (rows > 0x7fffffff) bad("B * H * q_rows must be below 2^31 (the rows' LSE and D are read by 32-bit coordinates)");
  // Boxes of the query tile and 4 more rows: each starts at the 16-byte boundary before the tile (bwd::rows_first).
  encode_f32_rows_map(maps.data() + bwd::kLseMap * kTensorMapBytes, b.lse, rows, kBlockM + 4, "the backward's lse");
  encode_f32_rows_map(maps.data() + bwd::kDsumMap * kTensorMapBytes, b.dsum, rows, kBlockM + 4, "the backward's dsum");
  for (size_t i = 0; i < b.pieces.size(); ++i) {
    const KvPiece& kp = b.pieces[i];
    if (kp.len == 0) continue;
    const long long bs = kp.batch_stride ? kp.batch_stride : (long long)kp.len * b.Hkv * b.D;
    unsigned char* km = maps.data() + (bwd::kFirstKvMap + 2 * i) * kTensorMapBytes;
    encode_bshd_map(km, kp.k, bf16, b.B, kp.len, b.Hkv, b.D, bs, kBlockN);
    encode_bshd_map(km + kTensorMapBytes, kp.v, bf16, b.B, kp.len, b.Hkv, b.D, bs, kBlockN);
  }

  ws.host.clear();
  const size_t at_items = append(ws.host, b.items), at_pieces = append(ws.host, b.pieces), at_grads = append(ws.host, b.grads);
  const size_t at_tiles = append(ws.host, plan.tiles);
  const size_t at_maps = append(ws.host, maps, 64);
  // Deterministic dQ: a zeroed counter per (batch, head, scratch tile, warpgroup).
  const size_t at_sems = append(ws.host, std::vector<int>(b.deterministic ? size_t(b.B) * b.H * plan.dq_tiles * bwd::dq_blocks(b.D) : 0, 0));
  unsigned char* base = upload(ws, s);
  bwd::Params p;
  p.lse = b.lse, p.dsum = b.dsum, p.dq_accum = b.dq_accum, p.dq_tiles = plan.dq_tiles;
  p.items = reinterpret_cast<const WorkItem*>(base + at_items);
  p.pieces = reinterpret_cast<const KvPiece*>(base + at_pieces);
  p.grads = reinterpret_cast<const GradPiece*>(base + at_grads);
  p.tiles = reinterpret_cast<const bwd::Tile*>(base + at_tiles);
  p.visits = cached.visits;
  p.dq_sems = reinterpret_cast<int*>(base + at_sems);
  p.tmaps = base + at_maps;
  p.q_rows = b.q_rows, p.H = b.H, p.Hkv = b.Hkv;
  p.heads_per_cta = heads_per_cta(b.H / b.Hkv, b.deterministic);
  p.scale = b.scale > 0 ? b.scale : 1.f / std::sqrt(float(b.D));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  const int n = int(plan.tiles.size()), kv_ctas = b.H / p.heads_per_cta;
  // The CTAs in launch order (not deterministic: the tiles fastest, then the KV head splits, then the batch), the
  // last wave's split where the model saves 1% or more (bwd_tail.hpp; TASP_BWD_TAIL=0: never, A/B runs).
  const long long ctas = (long long)n * kv_ctas * b.B;
  if (ctas > 0x7fffffffLL) bad("too many CTAs (key tiles x heads x batch)");
  p.tiles_n = n, p.kv_ctas = kv_ctas, p.tail_first = ctas, p.tail_ctas = 0;
  bool grads16 = false;
  for (const GradPiece& gp : b.grads) grads16 = grads16 || gp.dk16;
  auto split = [&](bwd::Params& q, int slots) -> long long {
    if (env_int("TASP_BWD_TAIL", 1) == 0) return ctas;
    const bwd::CachedPlan::Tail& t = bwd::tail_of(cached, (long long)kv_ctas * b.B, slots, staging_of(ws), s);
    if (t.split.parts.empty()) return ctas;
    q.tail_first = t.split.first, q.tail_ctas = int(t.split.parts.size()), q.tail_offsets = t.offsets;
    if (grads16) tail_buffers(ws, q, q.tail_ctas, key_tile(b.D), b.D, s);
    return t.split.first + t.split.total_parts();
  };
  auto launch = [&](auto det) {
    if (wide(b.D)) {
      // dQ^T by reductions from registers, the next tile's S and dP under it (+4-6% on one H100,
      // docs/measurements/kernels.md); TASP_BWD_WIDE_PIPE=0 stages and bulk-reduces it (A/B runs).
      const bool pipe = env_int("TASP_BWD_WIDE_PIPE", 1) != 0;
      auto go = [&](auto pp) {
        constexpr bool kPipe = pp() && !det();  // the deterministic dQ takes turns at bulk reduces
        if (bf16) bwd::wide::launch<__nv_bfloat16, 256, det(), kPipe>(p, n, kv_ctas, b.B, split, s);
        else bwd::wide::launch<__half, 256, det(), kPipe>(p, n, kv_ctas, b.B, split, s);
      };
      if (pipe) go(std::true_type{});
      else go(std::false_type{});
      return;
    }
    HeadDims<64, 80, 96, 128>::dispatch(b.D, [&](auto d) {
      constexpr int BM = bwd::block_m(d());
      if (bf16) bwd::launch_sm90<__nv_bfloat16, d(), BM, det()>(p, n, kv_ctas, b.B, split, s);
      else bwd::launch_sm90<__half, d(), BM, det()>(p, n, kv_ctas, b.B, split, s);
    });
  };
#ifdef TASP_BWD_TRACE
  clear_trace(bwd::g_bwd_trace, s);
#endif
  if (b.deterministic) launch(std::true_type{});
  else launch(std::false_type{});
#ifdef TASP_BWD_TRACE
  dump_trace(bwd::g_bwd_trace, "TASP_BWD_TRACE_FILE", s);
#endif
}

namespace {

// Item rows of the scratch's tiles, in its order: {first row in q/dq, rows}.
std::vector<int2> dq_tile_rows(const AttentionBackwardBatch& b) {
  const int bm = query_tile(b.D);
  std::vector<int2> t;
  for (const WorkItem& it : b.items)
    for (int r = 0; r < it.q_len; r += bm) t.push_back(make_int2(it.q_row0 + r, std::min(bm, it.q_len - r)));
  return t;
}

// One thread per float4 of the scratch: back to (rows, columns) as bwd_sm90.cuh's threads held it
// (bwd::dq_accum_offset, bwd::dq_accum_spot); `cols`: bwd::dq_cols. fp32 dq is added to; a 16-bit one written (each
// element has one spot in the scratch).
template <typename T>
__global__ void dq_finish_kernel(const float4* accum, T* dq, const int2* tiles, int ntiles, int H, int D, int q_rows,
                                 int cols, int blocks, float scale, long long n, bool overwrite) {
  const int per_block = cols * 16;  // float4s of a warpgroup's block
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const int thread = int(i % 128), k = int(i / 128 % (cols / 8)), w = int(i / per_block % blocks);
    const long long rest = i / (blocks * per_block);
    const int tile = int(rest % ntiles), h = int(rest / ntiles % H), b = int(rest / ntiles / H);
    const int2 tr = tiles[tile];
    const bwd::DqSpot at = bwd::dq_accum_spot(D, cols, w, k, thread);
    if (at.d >= D) continue;  // padding (D = 80, 96): d < D exactly when d + 8 < D, D being a multiple of 16
    const float4 v = accum[i];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (at.q + e >= tr.y) continue;
      T* dst = dq + (((long long)b * q_rows + tr.x + at.q + e) * H + h) * D + at.d;
      if constexpr (std::is_same_v<T, float>) {
        dst[0] = (overwrite ? 0.f : dst[0]) + scale * (e ? v.y : v.x);
        dst[8] = (overwrite ? 0.f : dst[8]) + scale * (e ? v.w : v.z);
      } else {
        dst[0] = T(scale * (e ? v.y : v.x));
        dst[8] = T(scale * (e ? v.w : v.z));
      }
    }
  }
}

}  // namespace

int dq_accum_tile_rows(int D) { return query_tile(D); }
int dq_accum_tile_floats(int D) { return query_tile(D) * bwd::padded_dim(D); }

size_t dq_accum_floats(const AttentionBackwardBatch& b) {
  return size_t(b.B) * b.H * dq_tile_rows(b).size() * dq_accum_tile_floats(b.D);
}

namespace {
template <typename T>
void finish(const AttentionBackwardBatch& b, T* dq, Workspace& ws, void* stream, bool overwrite) {
  const std::vector<int2> tiles = dq_tile_rows(b);
  if (tiles.empty()) return;
  if (misaligned(dq, 8)) throw std::invalid_argument("attention backward finish: dq must be 8-byte aligned");
  ws.host.clear();
  append(ws.host, tiles);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const unsigned char* base = upload(ws, s);
  const long long n = (long long)dq_accum_floats(b) / 4;
  const float scale = b.scale > 0 ? b.scale : 1.f / std::sqrt(float(b.D));
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<long long>((n + threads - 1) / threads, 1 << 20));
  dq_finish_kernel<<<blocks, threads, 0, s>>>(reinterpret_cast<const float4*>(b.dq_accum), dq,
                                              reinterpret_cast<const int2*>(base), int(tiles.size()), b.H, b.D, b.q_rows,
                                              bwd::dq_cols(b.D, query_tile(b.D)), bwd::dq_blocks(b.D), scale, n,
                                              overwrite);
  TASP_CUDA(cudaGetLastError());
}
}  // namespace

void attention_backward_finish(const AttentionBackwardBatch& b, float* dq, Workspace& ws, void* stream, bool overwrite) {
  finish(b, dq, ws, stream, overwrite);
}

void attention_backward_finish16(const AttentionBackwardBatch& b, void* dq, Workspace& ws, void* stream) {
  if (b.dtype == DType::BF16) finish(b, static_cast<__nv_bfloat16*>(dq), ws, stream, true);
  else finish(b, static_cast<__half*>(dq), ws, stream, true);
}

}  // namespace tasp::kernels
