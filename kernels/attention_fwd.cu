// Attention forward over a work list: argument checks, tiling of items into CTAs (longest first), upload
// of the list and its TMA tensor maps, and the choice of kernel path (fwd_sm90.cuh on Hopper, fwd_mma.cuh as
// the reference).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/attention.hpp"
#include "kernels/band.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/fwd_mma.cuh"
#include "kernels/fwd_sm90.cuh"
#include "kernels/head_dims.hpp"
#include "kernels/tensor_map.hpp"
#include "kernels/trace_dump.hpp"
#include "kernels/upload.hpp"

namespace tasp::kernels {
namespace {

using fwd::Params;
using fwd::Tile;

// Which kernel runs a launch: the warp-specialised Hopper kernel (fwd_sm90.cuh), unless TASP_ATTN_PATH=mma
// (or the older TASP_ATTN_SM90=0) asks for the mma.sync reference path (fwd_mma.cuh, head dims 64 and 128).
// TASP_FWD_OVERLAP=0/1 turns the Hopper kernel's intra-warpgroup overlap off or on (default: on; D=256 always);
// TASP_FWD_BN=128 or 192 fixes the key tile at D=80..128 (otherwise chosen by the walk's length, pick_block_n).
// TASP_FWD_TMA_STORE=0 stores every row from registers (otherwise a CTA's full tiles that do not fold go out
// through shared memory and TMA where the kernel has room for them: fwd_sm90.cuh). TASP_FWD_PERSIST=0 launches a
// CTA per task where the persistent grid would run (128-key tiles at D=80..128). TASP_FWD_RESCALE_SLACK=k (0..8):
// a row's running maximum moves only when a tile's passes it by more than k (log2 units; online_softmax).
struct Path {
  bool sm90;
  bool overlap;
  bool tma_store = env_int("TASP_FWD_TMA_STORE", 1) != 0;
  bool persist = env_int("TASP_FWD_PERSIST", 1) != 0;
  int rescale_slack = std::clamp(env_int("TASP_FWD_RESCALE_SLACK", 8), 0, 8);
  int block_m = 0, block_n = 0;  // the CTA's query rows and key tile
};

Path choose_path(int D) {
  const char* e = std::getenv("TASP_ATTN_PATH");
  Path path{!((e && std::string(e) == "mma") || env_int("TASP_ATTN_SM90", 1) == 0), env_int("TASP_FWD_OVERLAP", 1) != 0};
  if (!path.sm90 && D != 64 && D != 128)
    throw std::invalid_argument("attention: the mma.sync reference path (TASP_ATTN_PATH=mma) has head dims 64 and 128 only, not " +
                                std::to_string(D));
  FwdHeadDims::dispatch(D, [&](auto d) {
    path.block_m = path.sm90 ? fwd::Sm90Shape<d()>::kBlockM : fwd::MmaTiles::kBlockM;
    path.block_n = fwd::Sm90Shape<d()>::kBlockN;
  });
  return path;
}

// Key tiles of 192 at D=80, 96, 128 (D=64's three consumers have 160 registers, too few for them) where the CTAs
// walk long enough: on short walks the keys past the causal diagonal that a 192-key tile computes and masks cost
// more than its wider products save. Measured on one H200 (docs/measurements/kernels.md: 128 beside 192): B=8 S=2048
// causal (1088 keys a tile on average) +3%, B=4 S=4096 causal (2112) +1%, S=12000 causal (6000) level,
// S=16384 causal (8256) -3%, full -3%.
int pick_block_n(int D, const Path& path, const std::vector<long long>& work) {
  if (!(D > 64 && D <= 128 && path.sm90 && path.overlap)) return path.block_n;
  const int forced = env_int("TASP_FWD_BN", 0);
  if (forced == 128 || forced == fwd::kWideBlockN) return forced;
  long long keys = 0;
  for (long long w : work) keys += w;
  return keys < 4096LL * (long long)work.size() ? path.block_n : fwd::kWideBlockN;
}

template <typename T, int D>
void launch_path(const Path& path, const Params& p, int tiles, int B, cudaStream_t s) {
  // D=256 always overlaps: without it ptxas spills and serialises the wgmma (measured at half the rate).
  if (path.sm90 && (path.overlap || D > 128)) return fwd::launch_sm90<T, D, true>(p, tiles, B, path.block_n, path.persist, s);
  if constexpr (D <= 128)
    if (path.sm90) return fwd::launch_sm90<T, D, false>(p, tiles, B, path.block_n, false, s);
  if constexpr (D == 64 || D == 128) fwd::launch_mma<T, D>(p, tiles, B, s);
}

// Tensor maps of the Hopper path: [0] Q in boxes of the CTA's rows, [1] the fp32 output in boxes of a warpgroup's
// rows, then K and V of every piece in boxes of the key tile (empty pieces get a zero map: the walk never visits
// them). The backward's maps have the same places ([1] dO there).
std::vector<unsigned char> tensor_maps(const AttentionBatch& b, const Path& path) {
  const bool bf16 = b.dtype == DType::BF16;
  std::vector<unsigned char> maps((2 + 2 * b.pieces.size()) * kTensorMapBytes, 0);
  encode_bshd_map(maps.data(), b.q, bf16, b.B, b.q_rows, b.H, b.D, (long long)b.q_rows * b.H * b.D, path.block_m);
  encode_bshd_f32_map(maps.data() + kTensorMapBytes, b.out, b.B, b.q_rows, b.H, b.D, 64);
  for (size_t i = 0; i < b.pieces.size(); ++i) {
    const KvPiece& kp = b.pieces[i];
    if (kp.len == 0) continue;
    const long long bs = kp.batch_stride ? kp.batch_stride : (long long)kp.len * b.Hkv * b.D;
    encode_bshd_map(maps.data() + (2 + 2 * i) * kTensorMapBytes, kp.k, bf16, b.B, kp.len, b.Hkv, b.D, bs, path.block_n);
    encode_bshd_map(maps.data() + (3 + 2 * i) * kTensorMapBytes, kp.v, bf16, b.B, kp.len, b.Hkv, b.D, bs, path.block_n);
  }
  return maps;
}

}  // namespace

bool head_dim_supported(int D, bool backward) { return backward ? BwdHeadDims::has(D) : FwdHeadDims::has(D); }

std::string head_dims_text(bool backward) { return backward ? BwdHeadDims::text() : FwdHeadDims::text(); }

std::string unsupported_head_dim(int D, bool fwd, bool bwd) {
  for (bool backward : {false, true})
    if ((backward ? bwd : fwd) && !head_dim_supported(D, backward))
      return "D=" + std::to_string(D) + " has no " + (backward ? "backward" : "forward") + " kernel (" + head_dims_text(backward) + ")";
  return {};
}

void check_item(const WorkItem& it, size_t i, int q_rows, size_t pieces) {
  auto bad = [&](const char* m) { throw std::invalid_argument("attention: items[" + std::to_string(i) + "]: " + m); };
  if (it.q_len < 0 || it.q_row0 < 0 || it.q_row0 + it.q_len > q_rows) bad("rows out of range");
  if (it.piece_begin < 0 || it.piece_count < 0 || it.piece_begin + it.piece_count > int(pieces)) bad("pieces out of range");
  if (it.k_end <= it.k_begin || it.window_left < -1 || it.window_right < -1)
    bad("k_begin < k_end and windows >= -1 (-1: unbounded) are needed");
}

void attention_forward(const AttentionBatch& b, Workspace& ws, void* stream) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("attention: " + m); };
  if (!head_dim_supported(b.D, false)) bad("head dim D=" + std::to_string(b.D) + " not supported (" + head_dims_text(false) + ")");
  if (b.B < 1 || b.H < 1 || b.Hkv < 1 || b.H % b.Hkv) bad("need B, H, Hkv >= 1 and H a multiple of Hkv");
  if (b.B > 65535 || b.H > 65535) bad("B and H must be <= 65535");
  if (!b.q || !b.out || !b.lse) bad("q, out and lse must be set");
  if (misaligned(b.q) || misaligned(b.out)) bad("q and out must be 16-byte aligned");
  Path path = choose_path(b.D);
  std::vector<Tile> tiles;
  std::vector<long long> work;  // keys a tile may see, to start the longest tiles first
  for (size_t i = 0; i < b.items.size(); ++i) {
    const WorkItem& it = b.items[i];
    check_item(it, i, b.q_rows, b.pieces.size());
    for (int pc = it.piece_begin; pc < it.piece_begin + it.piece_count; ++pc) {
      const KvPiece& kp = b.pieces[pc];
      if (kp.len < 0 || (kp.len > 0 && (!kp.k || !kp.v))) bad("pieces[" + std::to_string(pc) + "]: empty pointer or negative length");
      // 16-byte copies (cp.async, TMA) need 16-byte aligned rows: pointers and batch strides.
      if (misaligned(kp.k) || misaligned(kp.v) || kp.batch_stride % 8 || kp.batch_stride < 0)
        bad("pieces[" + std::to_string(pc) + "]: k, v must be 16-byte aligned and batch_stride a non-negative multiple of 8");
    }
    // A tile's work: the keys of its pieces inside the span its rows see.
    const Band band(it);
    const int bm = path.block_m;
    for (int r = 0; r < it.q_len; r += bm) {
      const long long q0 = it.q_pos0 + r, q1 = it.q_pos0 + std::min(it.q_len, r + bm) - 1, klo = band.lo(q0), khi = band.hi(q1);
      long long keys = 0;
      for (int pc = it.piece_begin; pc < it.piece_begin + it.piece_count; ++pc) {
        const KvPiece& kp = b.pieces[pc];
        keys += std::max(0LL, std::min(khi + 1, kp.pos0 + kp.len) - std::max(klo, kp.pos0));
      }
      // A folding tile that sees no key would fold nothing: its task only reloads Q and rewrites its rows' running
      // (out, lse) unchanged (allgather's and zigzag's second forward step on 2 ranks: half the tiles of the step).
      if (it.accumulate && keys == 0) continue;
      tiles.push_back({int(i), r, it.piece_count > 0 ? it.piece_begin : -1});
      work.push_back(keys);
    }
  }
  if (tiles.empty()) return;
  path.block_n = pick_block_n(b.D, path, work);
  std::vector<size_t> order(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return work[x] > work[y]; });
  std::vector<Tile> sorted(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) sorted[i] = tiles[order[i]];
  if (sorted.size() * (b.H / b.Hkv) > 0x7fffffff) bad("too many tiles");

  ws.host.clear();
  const size_t at_items = append(ws.host, b.items), at_pieces = append(ws.host, b.pieces), at_tiles = append(ws.host, sorted);
  const size_t at_maps = path.sm90 ? append(ws.host, tensor_maps(b, path), 64) : 0;
  const size_t at_tickets = append(ws.host, std::vector<int>{0});  // the persistent grid's counter, 0 at every launch
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  unsigned char* base = upload(ws, s);
  Params p;
  p.q = b.q, p.out = b.out, p.lse = b.lse;
  p.items = reinterpret_cast<const WorkItem*>(base + at_items);
  p.pieces = reinterpret_cast<const KvPiece*>(base + at_pieces);
  p.tiles = reinterpret_cast<const Tile*>(base + at_tiles);
  p.tmaps = base + at_maps;
  p.tma_store = path.tma_store;
  p.tickets = reinterpret_cast<int*>(base + at_tickets);
  p.q_rows = b.q_rows, p.H = b.H, p.Hkv = b.Hkv;
  p.scale_log2 = (b.scale > 0 ? b.scale : 1.f / std::sqrt(float(b.D))) * 1.4426950408889634f;
  p.rescale_slack = float(path.rescale_slack);
  const int n = int(sorted.size());
  const dim3 grid = fwd::cta_grid(p, n, b.B);
  if ((long long)grid.x * grid.y * grid.z > 0x7fffffffLL) bad("too many tasks");
  p.tasks = int((long long)grid.x * grid.y * grid.z), p.task_x = int(grid.x);
#ifdef TASP_FWD_TRACE
  clear_trace(fwd::g_fwd_trace, s);
#endif
  FwdHeadDims::dispatch(b.D, [&](auto d) {
    if (b.dtype == DType::BF16) launch_path<__nv_bfloat16, d()>(path, p, n, b.B, s);
    else launch_path<__half, d()>(path, p, n, b.B, s);
  });
#ifdef TASP_FWD_TRACE
  dump_trace(fwd::g_fwd_trace, "TASP_FWD_TRACE_FILE", s);
#endif
}

}  // namespace tasp::kernels
