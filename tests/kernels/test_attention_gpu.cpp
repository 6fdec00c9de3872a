// GPU tests of the attention kernels against an fp64 CPU reference on random inputs. Label: gpu.
// They skip (GTEST_SKIP) where no CUDA device is visible, e.g. in CI.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "tests/kernels/gpu_case.hpp"

using namespace tasp::kernels;
using namespace tasp::kernels::testing;

namespace {

struct DeviceCase {
  const Case& c;
  std::vector<double> q;
  std::vector<std::vector<double>> k, v;
  std::vector<void*> allocs;
  void* dq = nullptr;
  float *dout = nullptr, *dlse = nullptr;
  AttentionBatch batch;
  ~DeviceCase() {
    for (void* p : allocs) cudaFree(p);
  }
  explicit DeviceCase(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    auto upload = [&](const std::vector<uint16_t>& h) {
      void* d = nullptr;
      if (cudaMalloc(&d, std::max<size_t>(2, h.size() * 2)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
      cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
      allocs.push_back(d);
      return d;
    };
    dq = upload(random_tensor(size_t(c.B) * c.q_rows * c.H * c.D, c.dtype, rng, q));
    batch.dtype = c.dtype, batch.B = c.B, batch.H = c.H, batch.Hkv = c.Hkv, batch.D = c.D, batch.scale = float(c.scale);
    batch.q = dq, batch.q_rows = c.q_rows;
    k.resize(c.pieces.size()), v.resize(c.pieces.size());
    std::vector<KvPiece> pieces;
    for (size_t p = 0; p < c.pieces.size(); ++p) {
      const size_t n = size_t(c.B) * c.pieces[p].len * c.Hkv * c.D;
      KvPiece kp;
      kp.k = upload(random_tensor(n, c.dtype, rng, k[p]));
      kp.v = upload(random_tensor(n, c.dtype, rng, v[p]));
      kp.len = c.pieces[p].len, kp.pos0 = c.pieces[p].pos0;
      pieces.push_back(kp);
    }
    const size_t no = size_t(c.B) * c.q_rows * c.H * c.D, nl = size_t(c.B) * c.H * c.q_rows;
    cudaMalloc(&dout, std::max<size_t>(4, no * 4));
    cudaMalloc(&dlse, std::max<size_t>(4, nl * 4));
    allocs.push_back(dout), allocs.push_back(dlse);
    poison();
    // Each item lists its pieces consecutively in the batch's piece array.
    for (const auto& it : c.items) {
      WorkItem w = work_item(it);
      w.piece_begin = int(batch.pieces.size()), w.piece_count = int(it.pieces.size());
      for (int p : it.pieces) batch.pieces.push_back(pieces[p]);
      batch.items.push_back(w);
    }
    batch.out = dout, batch.lse = dlse;
  }
  void poison() {  // NaN everywhere: an element not written stays NaN and fails the comparison
    cudaMemset(dout, 0xff, size_t(c.B) * c.q_rows * c.H * c.D * 4);
    cudaMemset(dlse, 0xff, size_t(c.B) * c.H * c.q_rows * 4);
  }
  // fp64 reference for one item and the given pieces: out [B][rows][H][D], lse [B][H][rows].
  void reference(const ItemSpec& it, const std::vector<int>& ps, std::vector<double>& out,
                 std::vector<double>& lse) const {
    const int D = c.D, H = c.H, Hkv = c.Hkv;
    const double scale = c.scale > 0 ? double(float(c.scale)) : 1 / std::sqrt(double(D));
    parallel_for(c.B * H, [&](int bh) {  // each (batch, head) writes only its rows of out and lse
      const int b = bh / H, h = bh % H;
      for (int r = 0; r < it.q_len; ++r) {
        const int row = it.q_row0 + r;
        const double* qv = &q[((size_t(b) * c.q_rows + row) * H + h) * D];
        std::vector<double> s, acc(D, 0.0);
        std::vector<const double*> vs;
        for (int p : ps)
          for (int j = 0; j < c.pieces[p].len; ++j) {
            if (!sees(it, it.q_pos0 + r, c.pieces[p].pos0 + j)) continue;
            const size_t off = ((size_t(b) * c.pieces[p].len + j) * Hkv + h / (H / Hkv)) * D;
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += qv[d] * k[p][off + d];
            s.push_back(dot * scale);
            vs.push_back(&v[p][off]);
          }
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (size_t i = 0; i < s.size(); ++i) {
          const double e = std::exp(s[i] - mx);
          sum += e;
          for (int d = 0; d < D; ++d) acc[d] += e * vs[i][d];
        }
        for (int d = 0; d < D; ++d) out[((size_t(b) * c.q_rows + row) * H + h) * D + d] = sum > 0 ? acc[d] / sum : 0;
        lse[(size_t(b) * H + h) * c.q_rows + row] = sum > 0 ? mx + std::log(sum) : -INFINITY;
      }
    });
  }
  // Compares the GPU's out/lse with the reference over every item's rows; rows of no item stay NaN.
  void check(const std::vector<double>& ref_out, const std::vector<double>& ref_lse, double tol) const {
    const size_t no = ref_out.size(), nl = ref_lse.size();
    std::vector<float> out(no), lse(nl);
    cudaMemcpy(out.data(), dout, no * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(lse.data(), dlse, nl * 4, cudaMemcpyDeviceToHost);
    double num = 0, den = 0, lse_err = 0;
    size_t written_nan = 0, unwritten = 0;
    for (size_t i = 0; i < no; ++i) {
      if (std::isnan(ref_out[i])) {
        unwritten += !std::isnan(out[i]);
        continue;
      }
      if (!std::isfinite(out[i])) {
        ++written_nan;
        continue;
      }
      num += (out[i] - ref_out[i]) * (out[i] - ref_out[i]);
      den += ref_out[i] * ref_out[i];
    }
    for (size_t i = 0; i < nl; ++i) {
      if (std::isnan(ref_lse[i])) {
        unwritten += !std::isnan(lse[i]);
        continue;
      }
      if (std::isinf(ref_lse[i])) {
        EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "lse " << i << " = " << lse[i];
        continue;
      }
      if (!std::isfinite(lse[i])) ++written_nan;
      else lse_err = std::max(lse_err, std::abs(lse[i] - ref_lse[i]) / std::max(1.0, std::abs(ref_lse[i])));
    }
    EXPECT_EQ(written_nan, 0u) << "elements not written or not finite";
    EXPECT_EQ(unwritten, 0u) << "elements outside every item were written";
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    EXPECT_LE(rel, tol) << "relative error of out";
    EXPECT_LE(lse_err, tol) << "relative error of lse";
  }
  double tol() const { return c.dtype == DType::BF16 ? 1e-2 : 2e-3; }
  void run_once(const std::vector<double>& ro, const std::vector<double>& rl) {
    poison();
    Workspace ws;
    attention_forward(batch, ws, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    check(ro, rl, tol());
  }
  // variants: the Hopper path's grids these small cases would not all get by themselves: 128-key tiles on the
  // persistent grid, 128-key tiles one task a CTA, 192-key tiles (the path picks by the walk's length at D=80..128;
  // setenv: not from several threads at once).
  void run_and_check(bool variants = true) {
    std::vector<double> ro(size_t(c.B) * c.q_rows * c.H * c.D, NAN), rl(size_t(c.B) * c.H * c.q_rows, NAN);
    for (const auto& it : c.items) reference(it, it.pieces, ro, rl);
    if (!variants) return run_once(ro, rl);
    struct Grid {
      const char *bn, *persist;
    };
    for (const Grid g : {Grid{"128", "1"}, Grid{"128", "0"}, Grid{"192", "1"}}) {
      SCOPED_TRACE(std::string("TASP_FWD_BN=") + g.bn + " TASP_FWD_PERSIST=" + g.persist);
      const ScopedEnv bn("TASP_FWD_BN", g.bn), persist("TASP_FWD_PERSIST", g.persist);
      run_once(ro, rl);
    }
  }
};

}  // namespace

TEST(AttentionGpu, RaggedPiecesFullMaskAllTypesAndHeadDims) {
  NEED_GPU();
  for (DType t : {DType::BF16, DType::FP16})
    for (int D : fwd_head_dims()) {
      Case c;
      c.dtype = t, c.B = 2, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 300;
      c.pieces = {{100, 0}, {37, 100}, {200, 137}};
      c.items = {{0, 300, 0, {0, 1, 2}, false}};
      SCOPED_TRACE("D=" + std::to_string(D) + (t == DType::BF16 ? " bf16" : " fp16"));
      DeviceCase(c, 1 + D).run_and_check();
    }
}

// Launch settings are per device: every GPU's first launch, each from its own thread (the cuda backend's
// layout), must work, not only the first GPU's.
TEST(AttentionGpu, EveryDeviceFromItsOwnThread) {
  NEED_GPU();
  const int n = on_every_device([](int d) {
    for (int D : fwd_head_dims()) DeviceCase(small_causal_case(D), 11 + d + D).run_and_check(false);
  });
  if (n < 2) GTEST_SKIP() << "one device: nothing per device to check";
}

// One case (B, H, Hkv, q_rows, pieces, items) at every forward head dim, seeded seed + D.
static void check_every_head_dim(Case c, uint32_t seed) {
  for (int D : fwd_head_dims()) {
    c.D = D;
    SCOPED_TRACE("D=" + std::to_string(D));
    DeviceCase(c, seed + D).run_and_check();
  }
}

TEST(AttentionGpu, CausalWithGlobalPositions) {
  NEED_GPU();
  Case c;
  c.B = 1, c.H = 3, c.Hkv = 1, c.q_rows = 192;
  // Zigzag-like: rows 0..63 at positions 0..63, rows 64..191 at 1000..1127; pieces before, across and
  // after the diagonal (the last is wholly masked for both items).
  c.pieces = {{100, 0}, {90, 1000}, {70, 2000}, {64, 0}};
  c.items = {{0, 64, 0, {3, 2}, true}, {64, 128, 1000, {0, 1, 2}, true}};
  check_every_head_dim(c, 7);
}

// Many K/V tiles per CTA, across pieces, with the diagonal in the middle: the Hopper path's 2-deep ring of
// K/V buffers (and its mbarrier phases) wraps several times, and tensor maps change between pieces.
TEST(AttentionGpu, LongCausalWalkAcrossPieces) {
  NEED_GPU();
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 1, c.q_rows = 520;
  c.pieces = {{300, 0}, {257, 300}, {400, 557}};
  c.items = {{0, 520, 450, {0, 1, 2}, true}};
  check_every_head_dim(c, 13);
}

// Scores 20x sharper than 1/sqrt(D) gives (a row's maximum jumps by tens in log2 units from tile to tile): the
// running maximum moves with every increase (slack 0) and only past the slack (8, P up to 256), both exact.
TEST(AttentionGpu, SharpScoresMoveTheRunningMaximum) {
  NEED_GPU();
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 1, c.q_rows = 400;
  c.pieces = {{300, 0}, {257, 300}};
  c.items = {{0, 400, 157, {0, 1}, true}};
  for (const char* slack : {"0", "8"}) {
    SCOPED_TRACE(std::string("TASP_FWD_RESCALE_SLACK=") + slack);
    const ScopedEnv env("TASP_FWD_RESCALE_SLACK", slack);
    for (int D : fwd_head_dims()) {
      c.D = D, c.scale = 20 / std::sqrt(double(D));
      SCOPED_TRACE("D=" + std::to_string(D));
      DeviceCase(c, 29 + D).run_and_check();
    }
  }
}

// More CTA tasks (tiles x heads x batches) than a Hopper has SMs, with causal tiles of every length.
TEST(AttentionGpu, LongManyTasksPerCta) {
  NEED_GPU();
  Case c;
  c.B = 2, c.H = 16, c.Hkv = 4, c.q_rows = 1000;
  c.pieces = {{600, 0}, {400, 600}};
  c.items = {{0, 1000, 0, {0, 1}, true}};
  check_every_head_dim(c, 17);
}

// Pieces as token ranges of one larger buffer per batch (batch_stride), as the executor's receive slots hold
// them: the gaps hold NaN, so a read outside a piece's range shows up in the result.
TEST(AttentionGpu, PiecesAsViewsWithBatchStride) {
  NEED_GPU();
  for (int D : fwd_head_dims()) {
    Case c;
    c.B = 2, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 230;
    c.pieces = {{100, 0}, {157, 100}};
    c.items = {{0, 130, 200, {0, 1}, true}, {130, 100, 0, {1, 0}, false}};
    DeviceCase dc(c, 21 + D);
    const int gap = 19, total = 100 + gap + 157 + gap;  // tokens per batch in the big buffers
    const size_t row = size_t(c.Hkv) * D;
    std::vector<uint16_t> hk(size_t(c.B) * total * row, 0x7fc0), hv(hk.size(), 0x7fc0);  // bf16 NaN
    const int start[2] = {0, 100 + gap};
    for (int p = 0; p < 2; ++p)
      for (int b = 0; b < c.B; ++b)
        for (int j = 0; j < c.pieces[p].len; ++j)
          for (size_t e = 0; e < row; ++e) {
            const size_t src = (size_t(b) * c.pieces[p].len + j) * row + e, dst = (size_t(b) * total + start[p] + j) * row + e;
            hk[dst] = to_bits(float(dc.k[p][src]), c.dtype), hv[dst] = to_bits(float(dc.v[p][src]), c.dtype);
          }
    void *dk, *dv;
    CK(cudaMalloc(&dk, hk.size() * 2));
    CK(cudaMalloc(&dv, hv.size() * 2));
    dc.allocs.push_back(dk), dc.allocs.push_back(dv);
    CK(cudaMemcpy(dk, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
    for (auto& kp : dc.batch.pieces) {  // items list pieces by spec index: piece 0 has len 100
      const int p = kp.len == 100 ? 0 : 1;
      kp.k = static_cast<uint16_t*>(dk) + start[p] * row;
      kp.v = static_cast<uint16_t*>(dv) + start[p] * row;
      kp.batch_stride = total * (long long)row;
    }
    SCOPED_TRACE("D=" + std::to_string(D));
    dc.run_and_check();
  }
}

TEST(AttentionGpu, OneTokenEmptyItemsAndNoPieces) {
  NEED_GPU();
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 2, c.D = 128, c.q_rows = 10;
  c.pieces = {{1, 0}, {5, 3}};
  c.items = {{0, 1, 0, {0}, false},      // one query, one key
             {1, 0, 0, {1}, false},      // no rows
             {1, 3, 10, {}, false},      // no pieces: out 0, lse -inf
             {4, 2, 2, {1}, true},       // causal: positions 2, 3 see nothing / key 3
             {6, 4, 100, {0, 1}, true}}; // sees all
  DeviceCase(c, 3).run_and_check();
}

TEST(AttentionGpu, ManySmallItems) {
  NEED_GPU();
  std::mt19937 rng(11);
  Case c;
  c.dtype = DType::FP16, c.B = 1, c.H = 4, c.Hkv = 4, c.D = 64;
  for (int p = 0; p < 40; ++p) c.pieces.push_back({1 + int(rng() % 90), long(rng() % 500)});
  int row = 0;
  for (int i = 0; i < 50; ++i) {
    ItemSpec it;
    it.q_row0 = row, it.q_len = 1 + int(rng() % 40), it.q_pos0 = rng() % 600, it.causal = rng() % 2;
    for (int k = 0, n = 1 + int(rng() % 3); k < n; ++k) it.pieces.push_back(int(rng() % c.pieces.size()));
    row += it.q_len + int(rng() % 3);  // gaps: rows of no item must stay untouched
    c.items.push_back(it);
  }
  c.q_rows = row;
  DeviceCase(c, 5).run_and_check();
}

// At every head dim: piece 0 of the case's one item in a first launch, then pieces 1 and 2 folded into its running
// (out, lse) in a second, against the reference of all three.
static void fold_after_first_piece(Case c, int seed) {
  for (int D : fwd_head_dims()) {
    SCOPED_TRACE("D=" + std::to_string(D));
    c.D = D;
    DeviceCase dc(c, seed + D);
    std::vector<double> ro(size_t(c.B) * c.q_rows * c.H * c.D, NAN), rl(size_t(c.B) * c.H * c.q_rows, NAN);
    dc.reference(c.items[0], {0, 1, 2}, ro, rl);
    dc.poison();
    Workspace ws;
    AttentionBatch a = dc.batch;
    a.items[0].piece_count = 1;
    attention_forward(a, ws, nullptr);
    AttentionBatch b2 = dc.batch;
    b2.items[0].piece_begin = 1, b2.items[0].piece_count = 2, b2.items[0].accumulate = true;
    attention_forward(b2, ws, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dc.check(ro, rl, dc.tol());
  }
}

// The fold into a running (out, lse) at every head dim: the epilogue's weight of the running output per row.
TEST(AttentionGpu, AccumulateEveryHeadDim) {
  NEED_GPU();
  Case c;
  c.B = 2, c.H = 2, c.Hkv = 1, c.q_rows = 200;
  c.pieces = {{150, 0}, {130, 150}, {77, 280}};
  c.items = {{0, 200, 250, {0, 1, 2}, true}};
  fold_after_first_piece(c, 29);
}

// A folding launch whose first query tile sees none of its keys (causal, the keys after those rows): that tile is
// left out of the launch, and its rows keep the first launch's values, which are already the whole answer.
TEST(AttentionGpu, AccumulateLeavesTilesThatSeeNoKey) {
  NEED_GPU();
  Case c;
  c.B = 2, c.H = 2, c.Hkv = 1, c.q_rows = 300;
  c.pieces = {{150, 0}, {130, 150}, {77, 280}};
  c.items = {{0, 300, 0, {0, 1, 2}, true}};
  fold_after_first_piece(c, 41);
}

// The separate merge kernel (the fused fold: AccumulateEveryHeadDim) and the final cast.
TEST(AttentionGpu, MergeAndCastEqualOneLaunch) {
  NEED_GPU();
  Case c;
  c.B = 2, c.H = 2, c.Hkv = 1, c.D = 128, c.q_rows = 200;
  c.pieces = {{150, 0}, {130, 150}, {77, 280}};
  c.items = {{0, 200, 250, {0, 1, 2}, true}};
  DeviceCase dc(c, 9);
  std::vector<double> ro(size_t(c.B) * c.q_rows * c.H * c.D, NAN), rl(size_t(c.B) * c.H * c.q_rows, NAN);
  dc.reference(c.items[0], {0, 1, 2}, ro, rl);
  Workspace ws;
  // The block of piece 2 alone merged into a running value of pieces 0, 1.
  AttentionBatch a = dc.batch;
  a.items[0].piece_count = 2;
  const size_t no = size_t(c.B) * c.q_rows * c.H * c.D, nl = size_t(c.B) * c.H * c.q_rows;
  float *blk_out, *blk_lse;
  CK(cudaMalloc(&blk_out, no * 4));
  CK(cudaMalloc(&blk_lse, nl * 4));
  dc.poison();
  attention_forward(a, ws, nullptr);
  AttentionBatch b3 = dc.batch;
  b3.items[0].piece_begin = 2, b3.items[0].piece_count = 1, b3.out = blk_out, b3.lse = blk_lse;
  attention_forward(b3, ws, nullptr);
  merge_out_lse(dc.dout, dc.dlse, blk_out, blk_lse, c.B, c.q_rows, c.H, c.D, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dc.check(ro, rl, dc.tol());
  // Final cast to bf16 matches the fp32 values rounded.
  uint16_t* cast;
  CK(cudaMalloc(&cast, no * 2));
  cast_out(dc.dout, cast, DType::BF16, no, nullptr);
  std::vector<uint16_t> hb(no);
  std::vector<float> hf(no);
  CK(cudaMemcpy(hb.data(), cast, no * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hf.data(), dc.dout, no * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < no; i += 97) EXPECT_EQ(hb[i], to_bits(hf[i], DType::BF16)) << i;
  cudaFree(blk_out), cudaFree(blk_lse), cudaFree(cast);
}

// Documents and windows (masked_cases): exact against the reference, both kernel paths.
TEST(AttentionGpu, DocumentsAndWindows) {
  NEED_GPU();
  for (int D : fwd_head_dims()) {
    int i = 0;
    for (const Case& c : masked_cases(D)) {
      SCOPED_TRACE("D=" + std::to_string(D) + " case " + std::to_string(i++));
      DeviceCase(c, 31 + D + i).run_and_check();
    }
  }
}

TEST(AttentionGpu, RejectsBadBatches) {
  AttentionBatch b;
  Workspace ws;
  b.D = 72;
  EXPECT_THROW(attention_forward(b, ws, nullptr), std::invalid_argument);
  b.D = 32;
  EXPECT_THROW(attention_forward(b, ws, nullptr), std::invalid_argument);
  b.D = 128, b.H = 3, b.Hkv = 2;
  EXPECT_THROW(attention_forward(b, ws, nullptr), std::invalid_argument);
}
