// FlashAttention-2-style forward over a work list: tensor-core mma.sync (m16n8k16, fp32 accumulate),
// ldmatrix from XOR-swizzled shared memory, cp.async double buffering of K/V tiles, online softmax in
// base 2, optional fused fold into a running (out, lse).
//
// A CTA of 4 warps owns 128 query rows of one (batch, head) of one item; each warp owns 32 rows (two
// m16 tiles share every K/V fragment it loads, which halves shared-memory traffic per MMA).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/wgmma.cuh"

namespace tasp::kernels {
namespace {

// Tile shapes: WARPS warps of MT m16 tiles each (BLOCK_M = 16 * WARPS * MT query rows), BN keys per step.
template <int WARPS, int MT, int BN, int MIN_BLOCKS>
struct Shape {
  static constexpr int kMT = MT, kBlockN = BN, kThreads = WARPS * 32, kBlockM = 16 * WARPS * MT;
  static constexpr int kMinBlocks = MIN_BLOCKS;
};

struct Tile {
  int item, row0;
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
};

// Element offset of (row, col) in a [rows][D] tile whose 16-byte chunks are XOR-swizzled by row,
// so that 8 rows read at one column land in 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  // src-size 0 fills the 16 bytes with zeros: ragged tails read nothing out of bounds.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

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
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) attention_fwd_kernel(const Params p) {
  constexpr int kThreads = S::kThreads, kBlockM = S::kBlockM, kBlockN = S::kBlockN, MT = S::kMT;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * D;        // [2][kBlockN][D]
  T* sV = sK + 2 * kBlockN * D;    // [2][kBlockN][D]

  const Tile tile = p.tiles[blockIdx.x];
  const WorkItem it = p.items[tile.item];
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.H / p.Hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int rows = min(kBlockM, it.q_len - tile.row0);
  const long long qpos_lo = it.q_pos0 + tile.row0, qpos_hi = qpos_lo + rows - 1;

  const T* q = static_cast<const T*>(p.q) + ((long long)b * p.q_rows + it.q_row0 + tile.row0) * p.H * D + (long long)h * D;
  load_tile<T, D, kBlockM, kThreads>(sQ, q, (long long)p.H * D, rows);

  // Walk the item's (piece, first key) tiles, skipping those wholly above the causal diagonal. The piece
  // being walked is kept in registers; the list is read again only when the walk moves to a new piece.
  const int pend = it.piece_begin + it.piece_count;
  auto next_valid = [&](int& pc, int& j0, KvPiece& kp) {
    while (pc < pend) {
      if (j0 < kp.len && !(it.causal && kp.pos0 + j0 > qpos_hi)) return true;
      if (++pc < pend) kp = p.pieces[pc];
      j0 = 0;
    }
    return false;
  };
  auto issue_kv = [&](const KvPiece& kp, int j0, int buf) {
    const long long bstride = kp.batch_stride ? kp.batch_stride : (long long)kp.len * p.Hkv * D;
    const long long off = b * bstride + ((long long)j0 * p.Hkv + hk) * D;
    const int valid = min(kBlockN, kp.len - j0);
    load_tile<T, D, kBlockN, kThreads>(sK + buf * kBlockN * D, static_cast<const T*>(kp.k) + off, (long long)p.Hkv * D, valid);
    load_tile<T, D, kBlockN, kThreads>(sV + buf * kBlockN * D, static_cast<const T*>(kp.v) + off, (long long)p.Hkv * D, valid);
  };

  int pc = it.piece_begin, j0 = 0;
  KvPiece kp{};
  if (pc < pend) kp = p.pieces[pc];
  bool have = next_valid(pc, j0, kp);
  if (have) issue_kv(kp, j0, 0);
  cp_async_commit();

  float o[MT][D / 8][4];
  float m[MT][2], l[MT][2];
  uint32_t qf[MT == 1 ? D / 16 : 1][4];  // one m-tile per warp: Q fragments stay in registers
  bool q_loaded = false;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  const uint32_t q_base = lane_base<D>(smem_addr(sQ), warp * MT * 16 + (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  int buf = 0;
  while (have) {
    cp_async_wait_all();
    __syncthreads();
    const int cur_j0 = j0, cur_len = kp.len;
    const long long cur_pos0 = kp.pos0;
    // Prefetch the next tile into the other buffer while this one is used.
    int npc = pc, nj0 = j0 + kBlockN;
    KvPiece nkp = kp;
    const bool more = next_valid(npc, nj0, nkp);
    if (more) issue_kv(nkp, nj0, buf ^ 1);
    cp_async_commit();

    const uint32_t k_base = lane_base<D>(smem_addr(sK + buf * kBlockN * D), (lane % 8) + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t v_base = lane_base<D>(smem_addr(sV + buf * kBlockN * D), (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
    float s[MT][kBlockN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;

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
          mma16816<T>(s[mt][2 * np], a[mt], bk[0], bk[1]);
          mma16816<T>(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    q_loaded = true;
    // Mask only where needed: a ragged tail, or a tile crossing the causal diagonal.
    const bool ragged = cur_j0 + kBlockN > cur_len;
    const bool diag = it.causal && cur_pos0 + cur_j0 + kBlockN - 1 > qpos_lo;
    if (ragged || diag) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = cur_j0 + nt * 8 + 2 * t4 + (e & 1);
            const long long qp = qpos_lo + (warp * MT + mt) * 16 + g + 8 * (e / 2);
            if (col >= cur_len || (it.causal && cur_pos0 + col > qp)) s[mt][nt][e] = -INFINITY;
          }
    }

    // Online softmax (base 2) per row; each row lives in the 4 threads of a quad. O is rescaled only when
    // some row of the warp found a larger maximum: after the first tiles that is rare, and the 4*D/8
    // multiplies per thread it saves are a large share of the non-MMA work.
    float alpha[MT][2];
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        const float m_new = fmaxf(m[mt][hf], mx * p.scale_log2);
        const float base = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet
        alpha[mt][hf] = exp2f(m[mt][hf] - base);
        grew |= m_new > m[mt][hf];
        m[mt][hf] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
          const float p0 = exp2f(s[mt][nt][2 * hf] * p.scale_log2 - base);
          const float p1 = exp2f(s[mt][nt][2 * hf + 1] * p.scale_log2 - base);
          s[mt][nt][2 * hf] = p0;
          s[mt][nt][2 * hf + 1] = p1;
          sum += p0 + p1;
        }
        l[mt][hf] = l[mt][hf] * alpha[mt][hf] + sum;
      }
    if (__any_sync(0xffffffff, grew)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          o[mt][dt][0] *= alpha[mt][0];
          o[mt][dt][1] *= alpha[mt][0];
          o[mt][dt][2] *= alpha[mt][1];
          o[mt][dt][3] *= alpha[mt][1];
        }
    }
    // O += P V, converting P to the A layout one 16-key slice at a time so S's registers free up as it goes.
#pragma unroll
    for (int kt = 0; kt < kBlockN / 16; ++kt) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = pack2<T>(s[mt][2 * kt][0], s[mt][2 * kt][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * kt][2], s[mt][2 * kt][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, (v_base + kt * 16 * 2 * D) ^ (dp * 32));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
          mma16816<T>(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // everyone is done with `buf` before it is refilled
    buf ^= 1;
    pc = npc;
    j0 = nj0;
    kp = nkp;
    have = more;
  }
  cp_async_wait_all();

  // Epilogue: normalise, optionally fold into the running values, write out and lse.
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = l[mt][hf];
      sum += __shfl_xor_sync(0xffffffff, sum, 1);
      sum += __shfl_xor_sync(0xffffffff, sum, 2);
      const int r = (warp * MT + mt) * 16 + g + 8 * hf;
      if (r >= rows) continue;
      const long long row = (long long)b * p.q_rows + it.q_row0 + tile.row0 + r;
      float lse = sum > 0.f ? (m[mt][hf] + __log2f(sum)) * kLn2 : -INFINITY;
      float w_new = sum > 0.f ? 1.f / sum : 0.f, w_old = 0.f;
      float* lse_ptr = p.lse + ((long long)b * p.H + h) * p.q_rows + it.q_row0 + tile.row0 + r;
      float* out_row = p.out + (row * p.H + h) * D;
      if (it.accumulate) {
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
      for (int dt = 0; dt < D / 8; ++dt) {
        float2* dst = reinterpret_cast<float2*>(out_row + dt * 8 + 2 * t4);
        float2 v = make_float2(o[mt][dt][2 * hf] * w_new, o[mt][dt][2 * hf + 1] * w_new);
        if (it.accumulate) {
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

// Hopper path (sm_90a), D = 64 or 128: two warpgroups of 64 query rows each share 128-key K/V tiles; S = Q K^T
// and O += P V are wgmma with Q, K, V read from shared memory through 128-byte-swizzle descriptors and P
// from registers. Tiles are stored as 64-column blocks of 128-byte rows, 16-byte chunk c of row r at
// chunk c ^ (r % 8): the canonical SW128 layout, K-major for Q and K, MN-major (transposed) for V.
namespace sm90w {
constexpr int kThreads = 256, kBlockM = 128, kBlockN = 128;
constexpr int kColBlock = 64;  // elements per 128-byte row
}  // namespace sm90w

template <typename T, int D, int ROWS>
__device__ __forceinline__ void load_tile_sw128(T* dst, const T* src, long long stride, int valid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int i = threadIdx.x; i < ROWS * kChunks; i += sm90w::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < valid;
    T* d = dst + (c / 8) * ROWS * sm90w::kColBlock + r * sm90w::kColBlock + (((c % 8) ^ (r & 7)) << 3);
    cp_async16(d, ok ? src + r * stride + c * 8 : src, ok);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(sm90w::kThreads, 1) attention_fwd_sm90_kernel(const Params p) {
  using namespace sm90w;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * D;      // [2][kBlockN][D]
  T* sV = sK + 2 * kBlockN * D;  // [2][kBlockN][D]

  const Tile tile = p.tiles[blockIdx.x];
  const WorkItem it = p.items[tile.item];
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.H / p.Hkv);
  const int wgp = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int rows = min(kBlockM, it.q_len - tile.row0);
  const long long qpos_lo = it.q_pos0 + tile.row0, qpos_hi = qpos_lo + rows - 1;

  const T* q = static_cast<const T*>(p.q) + ((long long)b * p.q_rows + it.q_row0 + tile.row0) * p.H * D + (long long)h * D;
  load_tile_sw128<T, D, kBlockM>(sQ, q, (long long)p.H * D, rows);

  const int pend = it.piece_begin + it.piece_count;
  auto next_valid = [&](int& pc, int& j0, KvPiece& kp) {
    while (pc < pend) {
      if (j0 < kp.len && !(it.causal && kp.pos0 + j0 > qpos_hi)) return true;
      if (++pc < pend) kp = p.pieces[pc];
      j0 = 0;
    }
    return false;
  };
  auto issue_kv = [&](const KvPiece& kp, int j0, int buf) {
    const long long bstride = kp.batch_stride ? kp.batch_stride : (long long)kp.len * p.Hkv * D;
    const long long off = b * bstride + ((long long)j0 * p.Hkv + hk) * D;
    const int valid = min(kBlockN, kp.len - j0);
    load_tile_sw128<T, D, kBlockN>(sK + buf * kBlockN * D, static_cast<const T*>(kp.k) + off, (long long)p.Hkv * D, valid);
    load_tile_sw128<T, D, kBlockN>(sV + buf * kBlockN * D, static_cast<const T*>(kp.v) + off, (long long)p.Hkv * D, valid);
  };

  int pc = it.piece_begin, j0 = 0;
  KvPiece kp{};
  if (pc < pend) kp = p.pieces[pc];
  bool have = next_valid(pc, j0, kp);
  if (have) issue_kv(kp, j0, 0);
  cp_async_commit();

  float o[D / 2], s[64];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const uint32_t q_addr = smem_addr(sQ) + wgp * 64 * 128;  // this warpgroup's 64 rows in each column block
  int buf = 0;
  while (have) {
    cp_async_wait_all();
    sm90::fence_proxy_async();
    __syncthreads();
    const int cur_j0 = j0, cur_len = kp.len;
    const long long cur_pos0 = kp.pos0;
    int npc = pc, nj0 = j0 + kBlockN;
    KvPiece nkp = kp;
    const bool more = next_valid(npc, nj0, nkp);
    if (more) issue_kv(nkp, nj0, buf ^ 1);
    cp_async_commit();

    const uint32_t k_addr = smem_addr(sK + buf * kBlockN * D), v_addr = smem_addr(sV + buf * kBlockN * D);
    // S = Q K^T over D in 16-wide steps: 4 steps per 64-column block (32 bytes each), blocks 16 KiB apart.
    sm90::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * (kBlockM * 128) + (ks % 4) * 32;
      const uint64_t da = sm90::sw128_desc(q_addr + koff, 16, 1024);
      const uint64_t db = sm90::sw128_desc(k_addr + (ks / 4) * (kBlockN * 128) + (ks % 4) * 32, 16, 1024);
      sm90::wgmma_ss<T>(s, da, db, ks > 0 ? 1 : 0);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait0();

    const bool ragged = cur_j0 + kBlockN > cur_len;
    const bool diag = it.causal && cur_pos0 + cur_j0 + kBlockN - 1 > qpos_lo;
    if (ragged || diag) {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = cur_j0 + nt * 8 + 2 * t4 + (e & 1);
          const long long qp = qpos_lo + wgp * 64 + warp * 16 + g + 8 * (e / 2);
          if (col >= cur_len || (it.causal && cur_pos0 + col > qp)) s[nt * 4 + e] = -INFINITY;
        }
    }
    float alpha[2];
    bool grew = false;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt * 4 + 2 * hf], s[nt * 4 + 2 * hf + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      const float m_new = fmaxf(m[hf], mx * p.scale_log2);
      const float base = m_new == -INFINITY ? 0.f : m_new;
      alpha[hf] = exp2f(m[hf] - base);
      grew |= m_new > m[hf];
      m[hf] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        const float p0 = exp2f(s[nt * 4 + 2 * hf] * p.scale_log2 - base);
        const float p1 = exp2f(s[nt * 4 + 2 * hf + 1] * p.scale_log2 - base);
        s[nt * 4 + 2 * hf] = p0;
        s[nt * 4 + 2 * hf + 1] = p1;
        sum += p0 + p1;
      }
      l[hf] = l[hf] * alpha[hf] + sum;
    }
    if (__any_sync(0xffffffff, grew)) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt * 4 + 0] *= alpha[0], o[dt * 4 + 1] *= alpha[0];
        o[dt * 4 + 2] *= alpha[1], o[dt * 4 + 3] *= alpha[1];
      }
    }
    // O += P V: P from registers (the mma A layout), V MN-major: 64-column blocks 16 KiB apart (LBO),
    // 8-key groups 1 KiB apart (SBO), 16 keys per step.
    uint32_t pa[kBlockN / 16][4];
#pragma unroll
    for (int kt = 0; kt < kBlockN / 16; ++kt) {
      pa[kt][0] = pack2<T>(s[(2 * kt) * 4 + 0], s[(2 * kt) * 4 + 1]);
      pa[kt][1] = pack2<T>(s[(2 * kt) * 4 + 2], s[(2 * kt) * 4 + 3]);
      pa[kt][2] = pack2<T>(s[(2 * kt + 1) * 4 + 0], s[(2 * kt + 1) * 4 + 1]);
      pa[kt][3] = pack2<T>(s[(2 * kt + 1) * 4 + 2], s[(2 * kt + 1) * 4 + 3]);
    }
    sm90::wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBlockN / 16; ++kt) {
      const uint64_t dv = sm90::sw128_desc(v_addr + kt * 2048, kBlockN * 128, 1024);
      if constexpr (D == 128) sm90::wgmma_rs<T>(o, pa[kt], dv, 1);
      else sm90::wgmma_rs64<T>(o, pa[kt], dv, 1);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait0();
    // No barrier here: the one at the top of the next iteration already orders every thread's use of
    // this buffer before anyone refills it.
    buf ^= 1;
    pc = npc;
    j0 = nj0;
    kp = nkp;
    have = more;
  }
  cp_async_wait_all();

  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = l[hf];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    const int r = wgp * 64 + warp * 16 + g + 8 * hf;
    if (r >= rows) continue;
    const long long row = (long long)b * p.q_rows + it.q_row0 + tile.row0 + r;
    float lse = sum > 0.f ? (m[hf] + __log2f(sum)) * kLn2 : -INFINITY;
    float w_new = sum > 0.f ? 1.f / sum : 0.f, w_old = 0.f;
    float* lse_ptr = p.lse + ((long long)b * p.H + h) * p.q_rows + it.q_row0 + tile.row0 + r;
    float* out_row = p.out + (row * p.H + h) * D;
    if (it.accumulate) {
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
    for (int dt = 0; dt < D / 8; ++dt) {
      float2* dst = reinterpret_cast<float2*>(out_row + dt * 8 + 2 * t4);
      float2 v = make_float2(o[dt * 4 + 2 * hf] * w_new, o[dt * 4 + 2 * hf + 1] * w_new);
      if (it.accumulate) {
        const float2 prev = *dst;
        v.x += w_old * prev.x;
        v.y += w_old * prev.y;
      }
      *dst = v;
    }
    __syncwarp(0xfu << (4 * g));
    if (t4 == 0) *lse_ptr = lse;
  }
}

template <typename T, int D>
void launch_sm90(const Params& p, int tiles, int H, int B, cudaStream_t s) {
  constexpr int smem = (sm90w::kBlockM + 4 * sm90w::kBlockN) * D * sizeof(T);
  static bool configured = false;
  if (!configured) {
    TASP_CUDA(cudaFuncSetAttribute(attention_fwd_sm90_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  attention_fwd_sm90_kernel<T, D><<<dim3(tiles, H, B), sm90w::kThreads, smem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

// The Hopper path unless TASP_ATTN_SM90=0 asks for the mma.sync one (kept as the reference path).
bool use_sm90() {
  static const bool on = [] {
    const char* e = std::getenv("TASP_ATTN_SM90");
    return !(e && e[0] == '0');
  }();
  return on;
}

template <typename T, int D, class S>
void launch(const Params& p, int tiles, int H, int B, cudaStream_t s) {
  constexpr int smem = (S::kBlockM + 4 * S::kBlockN) * D * sizeof(T);
  static bool configured = false;
  if (!configured) {
    TASP_CUDA(cudaFuncSetAttribute(attention_fwd_kernel<T, D, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  attention_fwd_kernel<T, D, S><<<dim3(tiles, H, B), S::kThreads, smem, s>>>(p);
  TASP_CUDA(cudaGetLastError());
}

// Measured on one H200 (docs/measurements/kernels.md): 4 warps x 2 m-tiles x 64 keys beat 4x2x32, 8x1x64,
// 8x1x32, and 3 CTAs per SM for D=64 (register-capped, it spills).
using Tiles = Shape<4, 2, 64, 2>;

template <typename T, int D>
void launch_any(const Params& p, int tiles, int H, int B, cudaStream_t s) {
  // D=64 stays on mma.sync: measured faster there (273 vs 255 TFLOP/s on an H200, docs/measurements/kernels.md).
  if (D == 128 && use_sm90()) return launch_sm90<T, D>(p, tiles, H, B, s);
  launch<T, D, Tiles>(p, tiles, H, B, s);
}
int block_m() { return Tiles::kBlockM; }  // both paths take 128 query rows per CTA

template <class T>
size_t append(std::vector<unsigned char>& buf, const std::vector<T>& v) {
  size_t at = (buf.size() + 15) / 16 * 16;
  buf.resize(at + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(buf.data() + at, v.data(), v.size() * sizeof(T));
  return at;
}

}  // namespace

Workspace::~Workspace() {
  if (device) cudaFree(device);
}

bool head_dim_supported(int D) { return D == 64 || D == 128; }

void attention_forward(const AttentionBatch& b, Workspace& ws, void* stream) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("attention: " + m); };
  if (!head_dim_supported(b.D)) bad("head dim D=" + std::to_string(b.D) + " not supported (64, 128)");
  if (b.B < 1 || b.H < 1 || b.Hkv < 1 || b.H % b.Hkv) bad("need B, H, Hkv >= 1 and H a multiple of Hkv");
  if (b.B > 65535 || b.H > 65535) bad("B and H must be <= 65535");
  if (!b.q || !b.out || !b.lse) bad("q, out and lse must be set");
  std::vector<Tile> tiles;
  std::vector<long long> work;  // keys a tile may see, to start the longest tiles first
  for (size_t i = 0; i < b.items.size(); ++i) {
    const WorkItem& it = b.items[i];
    if (it.q_len < 0 || it.q_row0 < 0 || it.q_row0 + it.q_len > b.q_rows) bad("items[" + std::to_string(i) + "]: rows out of range");
    if (it.piece_begin < 0 || it.piece_count < 0 || it.piece_begin + it.piece_count > int(b.pieces.size()))
      bad("items[" + std::to_string(i) + "]: pieces out of range");
    long long keys = 0;
    for (int pc = it.piece_begin; pc < it.piece_begin + it.piece_count; ++pc) {
      const KvPiece& kp = b.pieces[pc];
      if (kp.len < 0 || (kp.len > 0 && (!kp.k || !kp.v))) bad("pieces[" + std::to_string(pc) + "]: empty pointer or negative length");
      keys += kp.len;
    }
    const int bm = block_m();
    for (int r = 0; r < it.q_len; r += bm) {
      tiles.push_back({int(i), r});
      work.push_back(it.causal ? keys * (r + bm) / std::max(1, it.q_len) : keys);
    }
  }
  if (tiles.empty()) return;
  std::vector<size_t> order(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return work[x] > work[y]; });
  std::vector<Tile> sorted(tiles.size());
  for (size_t i = 0; i < order.size(); ++i) sorted[i] = tiles[order[i]];
  if (sorted.size() > 0x7fffffff) bad("too many tiles");

  ws.host.clear();
  const size_t at_items = append(ws.host, b.items), at_pieces = append(ws.host, b.pieces), at_tiles = append(ws.host, sorted);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (ws.bytes < ws.host.size()) {
    if (ws.device) TASP_CUDA(cudaFree(ws.device));
    ws.bytes = std::max(ws.host.size(), size_t(1) << 16);
    TASP_CUDA(cudaMalloc(&ws.device, ws.bytes));
  }
  TASP_CUDA(cudaMemcpyAsync(ws.device, ws.host.data(), ws.host.size(), cudaMemcpyHostToDevice, s));
  auto* base = static_cast<unsigned char*>(ws.device);
  Params p;
  p.q = b.q, p.out = b.out, p.lse = b.lse;
  p.items = reinterpret_cast<const WorkItem*>(base + at_items);
  p.pieces = reinterpret_cast<const KvPiece*>(base + at_pieces);
  p.tiles = reinterpret_cast<const Tile*>(base + at_tiles);
  p.q_rows = b.q_rows, p.H = b.H, p.Hkv = b.Hkv;
  p.scale_log2 = (b.scale > 0 ? b.scale : 1.f / std::sqrt(float(b.D))) * 1.4426950408889634f;
  const int n = int(sorted.size());
  if (b.dtype == DType::BF16) {
    if (b.D == 64) launch_any<__nv_bfloat16, 64>(p, n, b.H, b.B, s);
    else launch_any<__nv_bfloat16, 128>(p, n, b.H, b.B, s);
  } else {
    if (b.D == 64) launch_any<__half, 64>(p, n, b.H, b.B, s);
    else launch_any<__half, 128>(p, n, b.H, b.B, s);
  }
}

}  // namespace tasp::kernels
