// GPU tests of the attention backward against an fp64 CPU reference on random inputs. Label: gpu.
// They skip where no CUDA device is visible (CI), and where the device is not a Hopper GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/bwd_plan.hpp"
#include "kernels/bwd_tail.hpp"
#include "tests/kernels/gpu_case.hpp"

using namespace tasp::kernels;
using namespace tasp::kernels::testing;

namespace {

#define NEED_HOPPER()                                                          \
  NEED_GPU();                                                                  \
  if (!backward_supported()) GTEST_SKIP() << "the backward needs a Hopper GPU"

// Relative L2 error of (got - base) against ref over the entries where ref is a number; entries where ref
// is NaN must still hold exactly base's value (NaN: untouched).
struct Compare {
  double num = 0, den = 0;
  size_t not_finite = 0, touched = 0;
  void add(float got, float base, double ref) {
    if (std::isnan(ref)) {
      touched += !(std::isnan(got) && std::isnan(base)) && got != base;
      return;
    }
    const double d = double(got) - double(base);
    if (!std::isfinite(d)) {
      ++not_finite;
      return;
    }
    num += (d - ref) * (d - ref), den += ref * ref;
  }
  void expect(double tol, const char* what) const {
    EXPECT_EQ(not_finite, 0u) << what << ": entries not finite";
    EXPECT_EQ(touched, 0u) << what << ": entries outside the work list were written";
    EXPECT_GT(den, 0) << what << ": nothing compared";
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), tol) << what << ": relative error";
  }
};

struct BwdCase {
  const Case& c;
  std::vector<double> q, dout, out, lse;  // out fp64 forward [B][rows][H][D], lse [B][H][rows]
  std::vector<std::vector<double>> k, v;
  std::vector<void*> allocs;
  AttentionBackwardBatch batch;
  float *d_out = nullptr, *d_lse = nullptr, *d_dsum = nullptr, *d_dq = nullptr;
  std::vector<float*> d_dk, d_dv;
  std::vector<float> dq0;                    // what dq held before the launch
  std::vector<std::vector<float>> dk0, dv0;  // likewise each piece's accumulators

  ~BwdCase() {
    for (void* p : allocs) cudaFree(p);
  }
  template <class T>
  T* alloc(size_t n) {
    void* d = nullptr;
    if (cudaMalloc(&d, std::max<size_t>(16, n * sizeof(T))) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    allocs.push_back(d);
    return static_cast<T*>(d);
  }
  void* upload16(const std::vector<uint16_t>& h) {
    uint16_t* d = alloc<uint16_t>(h.size());
    cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    return d;
  }
  float* upload32(const std::vector<float>& h) {
    float* d = alloc<float>(h.size());
    cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    return d;
  }

  BwdCase(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    const size_t nq = size_t(c.B) * c.q_rows * c.H * c.D, nl = size_t(c.B) * c.H * c.q_rows;
    batch.dtype = c.dtype, batch.B = c.B, batch.H = c.H, batch.Hkv = c.Hkv, batch.D = c.D, batch.q_rows = c.q_rows;
    batch.q = upload16(random_tensor(nq, c.dtype, rng, q));
    batch.dout = upload16(random_tensor(nq, c.dtype, rng, dout));
    k.resize(c.pieces.size()), v.resize(c.pieces.size());
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (size_t p = 0; p < c.pieces.size(); ++p) {
      const size_t n = size_t(c.B) * c.pieces[p].len * c.Hkv * c.D;
      KvPiece kp;
      kp.k = upload16(random_tensor(n, c.dtype, rng, k[p]));
      kp.v = upload16(random_tensor(n, c.dtype, rng, v[p]));
      kp.len = c.pieces[p].len, kp.pos0 = c.pieces[p].pos0;
      batch.pieces.push_back(kp);
      dk0.emplace_back(n), dv0.emplace_back(n);
      for (size_t i = 0; i < n; ++i) dk0[p][i] = u(rng), dv0[p][i] = u(rng);
      d_dk.push_back(upload32(dk0[p])), d_dv.push_back(upload32(dv0[p]));
      batch.grads.push_back({d_dk.back(), d_dv.back(), 0});
    }
    // Items list consecutive pieces of the batch (a piece listed by several items is one batch piece).
    for (const auto& it : c.items) {
      WorkItem w = work_item(it);
      w.piece_begin = it.pieces.empty() ? 0 : it.pieces[0], w.piece_count = int(it.pieces.size());
      for (size_t i = 1; i < it.pieces.size(); ++i)
        if (it.pieces[i] != it.pieces[0] + int(i)) throw std::logic_error("test case: an item's pieces must be consecutive");
      batch.items.push_back(w);
    }
    // The forward's out and LSE in fp64 (uploaded as the fp32 the executor keeps); rows of no item: NaN.
    out.assign(nq, NAN), lse.assign(nl, NAN);
    for (const auto& it : c.items) forward(it);
    std::vector<float> fo(nq), fl(nl);
    for (size_t i = 0; i < nq; ++i) fo[i] = std::isnan(out[i]) ? 0.f : float(out[i]);
    for (size_t i = 0; i < nl; ++i) fl[i] = std::isnan(lse[i]) ? 0.f : float(lse[i]);
    batch.lse = d_lse = upload32(fl);
    d_out = upload32(fo);
    batch.dsum = d_dsum = alloc<float>(nl);
    // dQ starts at random values on every item's rows (the kernel adds) and NaN elsewhere (untouched).
    dq0.assign(nq, NAN);
    for (const auto& it : c.items)
      for (int b = 0; b < c.B; ++b)
        for (int r = it.q_row0; r < it.q_row0 + it.q_len; ++r)
          for (int x = 0; x < c.H * c.D; ++x) dq0[(size_t(b) * c.q_rows + r) * c.H * c.D + x] = u(rng);
    d_dq = upload32(dq0);
  }

  // Visible keys of query row r of item `it`: (piece, key index), in the item's piece order.
  template <class F>
  void for_keys(const ItemSpec& it, int r, F f) const {
    for (int p : it.pieces)
      for (int j = 0; j < c.pieces[p].len; ++j)
        if (sees(it, it.q_pos0 + r, c.pieces[p].pos0 + j)) f(p, j);
  }
  size_t qi(int b, int row, int h) const { return ((size_t(b) * c.q_rows + row) * c.H + h) * c.D; }
  size_t ki(int p, int b, int j, int h) const { return ((size_t(b) * c.pieces[p].len + j) * c.Hkv + h / (c.H / c.Hkv)) * c.D; }
  double dot(const double* a, const double* b) const {
    double s = 0;
    for (int d = 0; d < c.D; ++d) s += a[d] * b[d];
    return s;
  }

  void forward(const ItemSpec& it) {
    const double scale = 1 / std::sqrt(double(c.D));
    parallel_for(c.B * c.H, [&](int bh) {  // each (batch, head) writes only its rows of out and lse
      const int b = bh / c.H, h = bh % c.H;
      for (int r = 0; r < it.q_len; ++r) {
        const int row = it.q_row0 + r;
        double mx = -INFINITY, sum = 0;
        std::vector<double> acc(c.D, 0.0);
        for_keys(it, r,
                 [&](int p, int j) { mx = std::max(mx, dot(&q[qi(b, row, h)], &k[p][ki(p, b, j, h)]) * scale); });
        for_keys(it, r, [&](int p, int j) {
          const double e = std::exp(dot(&q[qi(b, row, h)], &k[p][ki(p, b, j, h)]) * scale - mx);
          sum += e;
          for (int d = 0; d < c.D; ++d) acc[d] += e * v[p][ki(p, b, j, h) + d];
        });
        for (int d = 0; d < c.D; ++d) out[qi(b, row, h) + d] = sum > 0 ? acc[d] / sum : 0;
        lse[(size_t(b) * c.H + h) * c.q_rows + row] = sum > 0 ? mx + std::log(sum) : -INFINITY;
      }
    });
  }

  // fp64 gradients: dq over the items' rows (NaN elsewhere), dk/dv per piece.
  void backward(std::vector<double>& dq, std::vector<std::vector<double>>& dk, std::vector<std::vector<double>>& dv) const {
    const double scale = 1 / std::sqrt(double(c.D));
    dq.assign(q.size(), NAN);
    dk.clear(), dv.clear();
    for (size_t p = 0; p < c.pieces.size(); ++p) dk.emplace_back(k[p].size(), 0.0), dv.emplace_back(k[p].size(), 0.0);
    // Each (batch, KV head) writes only its own dK/dV rows and its query heads' dQ rows, adding in the plain loop's
    // order (items, heads, rows).
    const int group = c.H / c.Hkv;
    parallel_for(c.B * c.Hkv, [&](int bk) {
      const int b = bk / c.Hkv, hk = bk % c.Hkv;
      for (const auto& it : c.items)
        for (int h = hk * group; h < (hk + 1) * group; ++h)
          for (int r = 0; r < it.q_len; ++r) {
            const int row = it.q_row0 + r;
            const double* qr = &q[qi(b, row, h)];
            const double* dor = &dout[qi(b, row, h)];
            const double l = lse[(size_t(b) * c.H + h) * c.q_rows + row], ds_row = dot(dor, &out[qi(b, row, h)]);
            double* dqr = &dq[qi(b, row, h)];
            for (int d = 0; d < c.D; ++d) dqr[d] = 0;
            for_keys(it, r, [&](int p, int j) {
              const size_t o = ki(p, b, j, h);
              const double pr = std::exp(dot(qr, &k[p][o]) * scale - l);
              const double ds = pr * (dot(dor, &v[p][o]) - ds_row) * scale;
              for (int d = 0; d < c.D; ++d) {
                dv[p][o + d] += pr * dor[d];
                dk[p][o + d] += ds * qr[d];
                dqr[d] += ds * k[p][o + d];
              }
            });
          }
    });
  }

  double tol() const { return c.dtype == DType::BF16 ? 2.5e-2 : 5e-3; }

  void run(Workspace& ws) {
    attention_backward_prepare(d_out, batch.dout, c.dtype, c.B, c.q_rows, c.H, c.D, d_dsum, nullptr);
    const size_t na = dq_accum_floats(batch);
    if (!accum_floats || na > accum_floats) batch.dq_accum = alloc<float>(na), accum_floats = na;
    cudaMemset(batch.dq_accum, 0, na * 4);
    attention_backward(batch, ws, nullptr);
    attention_backward_finish(batch, d_dq, ws, nullptr);
  }
  size_t accum_floats = 0;

  void run_and_check() {
    Workspace ws;
    run_and_check(ws);
  }
  void run_and_check(Workspace& ws) {
    run(ws);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // The row sums against the fp32 out the kernel read.
    std::vector<float> dsum(size_t(c.B) * c.H * c.q_rows);
    cudaMemcpy(dsum.data(), d_dsum, dsum.size() * 4, cudaMemcpyDeviceToHost);
    for (const auto& it : c.items)
      for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H; ++h)
          for (int r = it.q_row0; r < it.q_row0 + it.q_len; ++r) {
            double ref = 0;
            for (int d = 0; d < c.D; ++d) ref += dout[qi(b, r, h) + d] * double(float(out[qi(b, r, h) + d]));
            ASSERT_NEAR(dsum[(size_t(b) * c.H + h) * c.q_rows + r], ref, 1e-4 * (1 + std::abs(ref)));
          }
    std::vector<double> rq;
    std::vector<std::vector<double>> rk, rv;
    backward(rq, rk, rv);
    check(rq, rk, rv);
  }

  void check(const std::vector<double>& rq, const std::vector<std::vector<double>>& rk, const std::vector<std::vector<double>>& rv) const {
    std::vector<float> got(rq.size());
    cudaMemcpy(got.data(), d_dq, got.size() * 4, cudaMemcpyDeviceToHost);
    Compare cq;
    for (size_t i = 0; i < got.size(); ++i) cq.add(got[i], dq0[i], rq[i]);
    cq.expect(tol(), "dq");
    Compare ck, cv;
    for (size_t p = 0; p < c.pieces.size(); ++p) {
      std::vector<float> gk(rk[p].size()), gv(rv[p].size());
      cudaMemcpy(gk.data(), d_dk[p], gk.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(gv.data(), d_dv[p], gv.size() * 4, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < gk.size(); ++i) ck.add(gk[i], dk0[p][i], rk[p][i]), cv.add(gv[i], dv0[p][i], rv[p][i]);
    }
    ck.expect(tol(), "dk");
    cv.expect(tol(), "dv");
  }
};

}  // namespace

// Ragged pieces (37 keys, tails), no mask, B=2, GQA 4 -> 2.
Case ragged_case(DType t, int D) {
  Case c;
  c.dtype = t, c.B = 2, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 300;
  c.pieces = {{100, 0}, {37, 100}, {200, 137}};
  c.items = {{0, 300, 0, {0, 1, 2}, false}};
  return c;
}

TEST(AttentionBwdGpu, RaggedPiecesFullMaskAllTypesAndHeadDims) {
  NEED_HOPPER();
  for (DType t : {DType::BF16, DType::FP16})
    for (int D : bwd_head_dims()) {
      const Case c = ragged_case(t, D);
      SCOPED_TRACE("D=" + std::to_string(D) + (t == DType::BF16 ? " bf16" : " fp16"));
      BwdCase(c, 1 + D).run_and_check();
    }
}

// Zigzag-like rows and pieces before, across and after the diagonal; two items share the pieces (one batch
// piece each, walked once by the key tiles); MQA.
// As the forward's: each GPU's first backward launch, from its own thread.
TEST(AttentionBwdGpu, EveryDeviceFromItsOwnThread) {
  NEED_HOPPER();
  const int n = on_every_device([](int d) {
    for (int D : bwd_head_dims()) BwdCase(small_causal_case(D), 13 + d + D).run_and_check();
  });
  if (n < 2) GTEST_SKIP() << "one device: nothing per device to check";
}

TEST(AttentionBwdGpu, CausalWithGlobalPositionsSharedPiecesMqa) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    Case c;
    c.B = 1, c.H = 3, c.Hkv = 1, c.D = D, c.q_rows = 192;
    c.pieces = {{100, 0}, {90, 1000}, {70, 2000}};
    c.items = {{0, 64, 0, {0, 1, 2}, true}, {64, 128, 1000, {0, 1, 2}, true}};
    SCOPED_TRACE("D=" + std::to_string(D));
    BwdCase(c, 7 + D).run_and_check();
  }
}

// Many query tiles per CTA (the Q/dO ring wraps many times), the diagonal inside a piece, GQA 4 -> 2.
TEST(AttentionBwdGpu, LongCausalWalkAcrossPieces) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    Case c;
    c.B = 1, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 777;
    c.pieces = {{300, 0}, {257, 300}, {400, 557}};
    c.items = {{0, 777, 180, {0, 1, 2}, true}};
    SCOPED_TRACE("D=" + std::to_string(D));
    BwdCase(c, 13 + D).run_and_check();
  }
}

// K/V pieces and their accumulators as token ranges of larger buffers (batch_stride), as the executor's
// slots hold them: NaN in the gaps of K/V shows up in the result; NaN in the accumulators' gaps must stay.
TEST(AttentionBwdGpu, PiecesAndAccumulatorsAsViewsWithBatchStride) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    Case c;
    c.B = 2, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 230;
    c.pieces = {{100, 0}, {157, 100}};
    c.items = {{0, 130, 200, {0, 1}, true}, {130, 100, 0, {0, 1}, false}};
    BwdCase bc(c, 21 + D);
    const int gap = 19, total = 100 + gap + 157 + gap;
    const size_t row = size_t(c.Hkv) * D;
    const int start[2] = {0, 100 + gap};
    std::vector<uint16_t> hk(size_t(c.B) * total * row, 0x7fc0), hv(hk.size(), 0x7fc0);
    std::vector<float> gk(hk.size(), NAN), gv(hk.size(), NAN);
    for (int p = 0; p < 2; ++p)
      for (int b = 0; b < c.B; ++b)
        for (int j = 0; j < c.pieces[p].len; ++j)
          for (size_t e = 0; e < row; ++e) {
            const size_t src = (size_t(b) * c.pieces[p].len + j) * row + e, dst = (size_t(b) * total + start[p] + j) * row + e;
            hk[dst] = to_bits(float(bc.k[p][src]), c.dtype), hv[dst] = to_bits(float(bc.v[p][src]), c.dtype);
            gk[dst] = bc.dk0[p][src], gv[dst] = bc.dv0[p][src];
          }
    auto* dk = static_cast<uint16_t*>(bc.upload16(hk));
    auto* dv = static_cast<uint16_t*>(bc.upload16(hv));
    float* ak = bc.upload32(gk);
    float* av = bc.upload32(gv);
    for (int p = 0; p < 2; ++p) {
      KvPiece& kp = bc.batch.pieces[p];
      kp.k = dk + start[p] * row, kp.v = dv + start[p] * row, kp.batch_stride = total * (long long)row;
      bc.batch.grads[p] = {ak + start[p] * row, av + start[p] * row, total * (long long)row};
    }
    Workspace ws;
    bc.run(ws);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> rq;
    std::vector<std::vector<double>> rk, rv;
    bc.backward(rq, rk, rv);
    std::vector<float> got(rq.size());
    cudaMemcpy(got.data(), bc.d_dq, got.size() * 4, cudaMemcpyDeviceToHost);
    Compare cq;
    for (size_t i = 0; i < got.size(); ++i) cq.add(got[i], bc.dq0[i], rq[i]);
    cq.expect(bc.tol(), "dq");
    std::vector<float> hk_out(gk.size()), hv_out(gv.size());
    cudaMemcpy(hk_out.data(), ak, gk.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hv_out.data(), av, gv.size() * 4, cudaMemcpyDeviceToHost);
    // The reference in the big buffers' layout; NaN in the gaps (must stay NaN).
    std::vector<double> refk(gk.size(), NAN), refv(gk.size(), NAN);
    for (int p = 0; p < 2; ++p)
      for (int b = 0; b < c.B; ++b)
        for (int j = 0; j < c.pieces[p].len; ++j)
          for (size_t e = 0; e < row; ++e) {
            const size_t src = (size_t(b) * c.pieces[p].len + j) * row + e, dst = (size_t(b) * total + start[p] + j) * row + e;
            refk[dst] = rk[p][src], refv[dst] = rv[p][src];
          }
    Compare ck, cv;
    for (size_t i = 0; i < gk.size(); ++i) ck.add(hk_out[i], gk[i], refk[i]), cv.add(hv_out[i], gv[i], refv[i]);
    SCOPED_TRACE("D=" + std::to_string(D));
    ck.expect(bc.tol(), "dk");
    cv.expect(bc.tol(), "dv");
  }
}

// One-token items and pieces, an item with no rows, an item with no pieces, rows that see nothing (causal).
TEST(AttentionBwdGpu, OneTokenEmptyItemsAndNoPieces) {
  NEED_HOPPER();
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 2, c.D = 128, c.q_rows = 12;
  c.pieces = {{1, 0}, {5, 3}};
  c.items = {{0, 1, 0, {0}, false},      // one query, one key
             {1, 0, 0, {1}, false},      // no rows
             {1, 3, 10, {}, false},      // no pieces: dq stays as it was
             {4, 2, 2, {1}, true},       // causal: position 2 sees nothing, 3 sees key 3
             {6, 6, 100, {0, 1}, true}}; // sees all
  BwdCase(c, 3).run_and_check();
}

// dK and dV do not depend on the order work finishes in: two runs give the same bits where one CTA sums each key
// tile's (MHA by default, the last wave unsplit; GQA with deterministic = true, a CTA walking the whole group); the
// default GQA backward's CTAs of a group add theirs with reductions, the same within rounding.
TEST(AttentionBwdGpu, DkDvAreDeterministic) {
  NEED_HOPPER();
  const ScopedEnv whole("TASP_BWD_TAIL", "0");  // a split CTA's parts add theirs with reductions (bwd_tail.hpp)
  struct Run {
    int Hkv;
    bool det;
  };
  std::vector<float> exact;  // GQA's deterministic dK
  for (const Run r : {Run{8, false}, Run{2, true}, Run{2, false}}) {
    SCOPED_TRACE("Hkv=" + std::to_string(r.Hkv) + (r.det ? " deterministic" : ""));
    Case c;
    c.B = 1, c.H = 8, c.Hkv = r.Hkv, c.D = 128, c.q_rows = 1024;
    c.pieces = {{512, 0}, {512, 512}};
    c.items = {{0, 1024, 0, {0, 1}, true}};
    BwdCase bc(c, 31);
    bc.batch.deterministic = r.det;
    Workspace ws;
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 2; ++run) {
      for (size_t p = 0; p < 2; ++p) cudaMemcpy(bc.d_dk[p], bc.dk0[p].data(), bc.dk0[p].size() * 4, cudaMemcpyHostToDevice);
      bc.run(ws);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> gk(bc.dk0[0].size());
      cudaMemcpy(gk.data(), bc.d_dk[0], gk.size() * 4, cudaMemcpyDeviceToHost);
      if (run == 0) {
        first.push_back(gk);
      } else if (r.Hkv == 8 || r.det) {
        EXPECT_EQ(first[0], gk);
      }
    }
    if (r.det) exact = first[0];
    if (r.Hkv == 2 && !r.det) {
      double num = 0, den = 0;
      for (size_t i = 0; i < exact.size(); ++i) {
        const double a = first[0][i] - bc.dk0[0][i], b = exact[i] - bc.dk0[0][i];
        num += (a - b) * (a - b), den += b * b;
      }
      EXPECT_GT(den, 0);
      EXPECT_LE(std::sqrt(num / den), 1e-5) << "the group's reductions and one CTA's sums differ beyond rounding";
    }
  }
}

// The last wave split (bwd_tail.hpp): launches of fewer CTAs than an H100's or H200's SMs, whose walks the model
// splits into parts (checked here on the CPU with this GPU's SM count), against the fp64 reference with fp32 dK/dV
// (added by every part) and with 16-bit ones (the parts' sums in the tail's scratch, written by the last part; a
// second launch on the same workspace finds the scratch zero again), full and causal, at every head dim.
TEST(AttentionBwdGpu, LastWaveSplitInParts) {
  NEED_HOPPER();
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  for (int D : bwd_head_dims())
    for (bool causal : {false, true}) {
      SCOPED_TRACE("D=" + std::to_string(D) + (causal ? " causal" : " full"));
      Case c;
      c.dtype = D == 96 ? DType::FP16 : DType::BF16;
      c.B = 1, c.H = 2, c.Hkv = 2, c.D = D, c.q_rows = 2048;
      c.pieces = {{2048, 0}};
      c.items = {{0, 2048, 0, {0}, causal}};
      if (!causal) {  // every walk ceil(2048 / query tile) visits, one CTA a key tile and head
        const int keys = D == 256 ? 64 : bwd::kKeyTile, rows = D == 256 ? 64 : D == 64 ? 128 : 80;  // the kernels' tiles
        const auto t = bwd::plan_tail(std::vector<int>(2048 / keys, (2048 + rows - 1) / rows), c.H, sms);
        EXPECT_GT(t.total_parts(), int(t.parts.size())) << "the case does not split on " << sms << " SMs";
      }
      BwdCase bc(c, 71 + D + causal);
      Workspace ws;
      bc.run_and_check(ws);
      std::vector<double> rq;
      std::vector<std::vector<double>> rk, rv;
      bc.backward(rq, rk, rv);
      const size_t n = bc.dk0[0].size();
      void* k16 = bc.upload16(std::vector<uint16_t>(n, 0x7bcd));
      void* v16 = bc.upload16(std::vector<uint16_t>(n, 0x7bcd));
      GradPiece g;
      g.dk16 = k16, g.dv16 = v16;
      bc.batch.grads[0] = g;
      for (int launch = 0; launch < 2; ++launch) {
        cudaMemset(bc.batch.dq_accum, 0, dq_accum_floats(bc.batch) * 4);
        attention_backward(bc.batch, ws, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint16_t> hk(n), hv(n);
        cudaMemcpy(hk.data(), k16, n * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(hv.data(), v16, n * 2, cudaMemcpyDeviceToHost);
        Compare ck, cv;
        for (size_t i = 0; i < n; ++i) ck.add(from_bits(hk[i], c.dtype), 0.f, rk[0][i]), cv.add(from_bits(hv[i], c.dtype), 0.f, rv[0][i]);
        ck.expect(bc.tol(), "dk16");
        cv.expect(bc.tol(), "dv16");
      }
    }
}

// GQA 8 -> 2 (groups of 4) with 1, 2 and 4 query heads per CTA (TASP_BWD_HEADS_PER_CTA; 0: the whole group), a
// causal walk across pieces and ragged tails: every split of the group adds the same dK and dV.
TEST(AttentionBwdGpu, GqaHeadsPerCta) {
  NEED_HOPPER();
  for (const char* k : {"1", "2", "0"})
    for (int D : bwd_head_dims()) {
      SCOPED_TRACE(std::string("TASP_BWD_HEADS_PER_CTA=") + k + " D=" + std::to_string(D));
      const ScopedEnv env("TASP_BWD_HEADS_PER_CTA", k);
      Case c;
      c.B = 2, c.H = 8, c.Hkv = 2, c.D = D, c.q_rows = 530;
      c.pieces = {{300, 0}, {157, 300}, {73, 457}};
      c.items = {{0, 530, 0, {0, 1, 2}, true}};
      BwdCase(c, 91 + D).run_and_check();
    }
}

// D=256's dQ^T both ways (bwd_sm90_wide.cuh): added from registers under the next tile's S and dP (the default) and
// staged in the tile's own Q/dO stage for bulk reduces (TASP_BWD_WIDE_PIPE=0, the deterministic dQ's way), on a
// causal GQA walk across pieces and, in fp16, on ragged pieces without a mask.
TEST(AttentionBwdGpu, WideDqBothWays) {
  NEED_HOPPER();
  for (const char* pipe : {"1", "0"}) {
    SCOPED_TRACE(std::string("TASP_BWD_WIDE_PIPE=") + pipe);
    const ScopedEnv env("TASP_BWD_WIDE_PIPE", pipe);
    Case c;
    c.B = 2, c.H = 8, c.Hkv = 2, c.D = 256, c.q_rows = 530;
    c.pieces = {{300, 0}, {157, 300}, {73, 457}};
    c.items = {{0, 530, 0, {0, 1, 2}, true}};
    BwdCase(c, 301).run_and_check();
    BwdCase(ragged_case(DType::FP16, 256), 302).run_and_check();
  }
}

// deterministic = true: dQ is the same bits run after run, and within rounding of the default's dQ. 144 CTAs
// (9 key tiles x 8 KV heads x B=2, GQA 16 -> 8): more than an H100's or H200's 132 SMs hold at once, so some
// CTAs that share a dQ tile run in different waves and others wait for each other in one.
TEST(AttentionBwdGpu, DqIsDeterministicWhenAsked) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    Case c;
    c.B = 2, c.H = 16, c.Hkv = 8, c.D = D, c.q_rows = 1100;
    c.pieces = {{600, 0}, {500, 600}};
    c.items = {{0, 1100, 0, {0, 1}, false}};
    BwdCase bc(c, 57 + D);
    Workspace ws;
    auto dq_of = [&](bool det) {
      bc.batch.deterministic = det;
      cudaMemcpy(bc.d_dq, bc.dq0.data(), bc.dq0.size() * 4, cudaMemcpyHostToDevice);
      bc.run(ws);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> got(bc.dq0.size());
      cudaMemcpy(got.data(), bc.d_dq, got.size() * 4, cudaMemcpyDeviceToHost);
      return got;
    };
    const std::vector<float> loose = dq_of(false), first = dq_of(true);
    SCOPED_TRACE("D=" + std::to_string(D));
    for (int run = 0; run < 3; ++run) EXPECT_TRUE(dq_of(true) == first) << "run " << run << ": dQ differs";
    double num = 0, den = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      const double a = first[i] - bc.dq0[i], b = loose[i] - bc.dq0[i];
      num += (a - b) * (a - b), den += b * b;
    }
    EXPECT_GT(den, 0);
    EXPECT_LE(std::sqrt(num / den), 1e-5) << "deterministic and default dQ differ beyond rounding";
  }
}

// deterministic = true against the fp64 reference: ragged pieces, a causal walk over GQA heads, far masks.
TEST(AttentionBwdGpu, DeterministicMatchesTheReference) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    Case causal;
    causal.B = 1, causal.H = 4, causal.Hkv = 1, causal.D = D, causal.q_rows = 700;
    causal.pieces = {{300, 0}, {400, 300}};
    causal.items = {{0, 700, 0, {0, 1}, true}};
    int i = 0;
    for (const Case& c : {ragged_case(DType::BF16, D), causal, far_case(D)}) {
      SCOPED_TRACE("D=" + std::to_string(D) + " case " + std::to_string(i++));
      BwdCase bc(c, 71 + D + i);
      bc.batch.deterministic = true;
      bc.run_and_check();
    }
  }
}

// One workspace across launches whose work lists differ and repeat, as the executor's steps do: each launch
// gets its own plan back from the workspace's cache (a stale one fails the reference), also past the cache's
// size, where the oldest plans are dropped and built again.
TEST(AttentionBwdGpu, OneWorkspaceAcrossLaunches) {
  NEED_HOPPER();
  Workspace ws;
  auto causal_at = [](int D, long long pos0) {
    Case c;
    c.B = 1, c.H = 2, c.Hkv = 1, c.D = D, c.q_rows = 90;
    c.pieces = {{150, 0}};
    c.items = {{0, 90, pos0, {0}, true}};
    return c;
  };
  int i = 0;
  for (int D : {128, 64, 80, 256})
    for (long long pos0 : {100, 0, 100, 30, 0}) {
      SCOPED_TRACE("D=" + std::to_string(D) + " pos0 " + std::to_string(pos0));
      BwdCase(causal_at(D, pos0), 91 + i++).run_and_check(ws);
    }
  for (int n = 0; n < 20; ++n) BwdCase(causal_at(128, 3 * n), 97 + n).run(ws);  // more plans than the cache keeps
  for (long long pos0 : {3, 57, 100}) {
    SCOPED_TRACE("after many plans, pos0 " + std::to_string(pos0));
    BwdCase(causal_at(128, pos0), 131 + pos0).run_and_check(ws);
  }
}

// A workspace that dies while its launches are still queued waits for them: its plans' visits (stream-ordered
// memory, which cudaFree does not wait for) must outlive the backward that reads them. Once, a backward
// left running by `tasp bench kernel --mix` read freed visits (an illegal address at the next allocation).
TEST(AttentionBwdGpu, WorkspaceEndsAfterItsLaunches) {
  NEED_HOPPER();
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 2, c.D = 128, c.q_rows = 512;
  c.pieces = {{512, 0}};
  c.items = {{0, 512, 0, {0}, true}};
  BwdCase bc(c, 211);
  const size_t slow_bytes = size_t(1) << 30;
  void* slow = bc.alloc<char>(slow_bytes);
  {
    Workspace ws;
    cudaMemsetAsync(slow, 1, slow_bytes, nullptr);  // keeps the backward queued while its workspace dies
    bc.run(ws);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> rq;
  std::vector<std::vector<double>> rk, rv;
  bc.backward(rq, rk, rv);
  bc.check(rq, rk, rv);
}

TEST(AttentionBwdGpu, RejectsBadBatches) {
  AttentionBackwardBatch b;
  Workspace ws;
  b.D = 192;  // no backward kernel
  EXPECT_THROW(attention_backward(b, ws, nullptr), std::invalid_argument);
  b.D = 72;
  EXPECT_THROW(attention_backward(b, ws, nullptr), std::invalid_argument);
  b.D = 128, b.H = 3, b.Hkv = 2;
  EXPECT_THROW(attention_backward(b, ws, nullptr), std::invalid_argument);
  b.H = 2, b.Hkv = 2;
  EXPECT_THROW(attention_backward(b, ws, nullptr), std::invalid_argument);  // no buffers
  // Every buffer set (none is read: the checks come first), the LSE off the 16-byte grid that TMA reads it from.
  alignas(16) static float fake[8];
  b.q = b.dout = fake, b.dsum = fake, b.dq_accum = fake, b.lse = fake + 1;
  try {
    attention_backward(b, ws, nullptr);
    ADD_FAILURE() << "a misaligned lse was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lse"), std::string::npos) << e.what();
  }
  // 16-bit grads where a GQA group's CTAs would each write its keys.
  b.lse = fake, b.H = 4, b.Hkv = 2;
  b.pieces = {{fake, fake, 10, 0}};
  GradPiece g;
  g.dk16 = g.dv16 = fake;
  b.grads = {g};
  try {
    attention_backward(b, ws, nullptr);
    ADD_FAILURE() << "16-bit grads under a split GQA group were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dk16"), std::string::npos) << e.what();
  }
  b.grads[0].dk = fake;  // both kinds
  EXPECT_THROW(attention_backward(b, ws, nullptr), std::invalid_argument);
}

// Documents and windows (masked_cases): dQ, dK, dV exact against the reference; key tiles see only their
// run of query tiles.
TEST(AttentionBwdGpu, DocumentsAndWindows) {
  NEED_HOPPER();
  for (int D : bwd_head_dims()) {
    int i = 0;
    for (const Case& c : masked_cases(D)) {
      SCOPED_TRACE("D=" + std::to_string(D) + " case " + std::to_string(i++));
      BwdCase(c, 41 + D + i).run_and_check();
    }
  }
}

// The rank path's ends (executor/rank_runner.cpp): the row sums read the output in 16 bits and dQ is written in 16
// bits. Both equal the fp32 path bit for bit: row sums from the fp32 copy of the same rounded output (the same products
// in the same order), dQ the fp32 finish from zero rounded once; and the fp32 finish that overwrites (no clearing
// first) equals the one that adds to zeros. Rows of no item keep what they held.
TEST(AttentionBwdGpu, Outputs16MatchTheFp32PathBitForBit) {
  NEED_HOPPER();
  for (DType t : {DType::BF16, DType::FP16})
    for (int D : bwd_head_dims()) {
      Case c = ragged_case(t, D);
      c.items = {{0, 120, 0, {0, 1, 2}, false}, {150, 150, 150, {0, 1, 2}, false}};  // rows 120..149: no item
      SCOPED_TRACE("D=" + std::to_string(D) + (t == DType::BF16 ? " bf16" : " fp16"));
      BwdCase bc(c, 31 + D);
      const size_t nq = size_t(c.B) * c.q_rows * c.H * c.D, nl = size_t(c.B) * c.H * c.q_rows;
      // The output as a framework keeps it (16 bits), and its exact fp32 value for the reference path.
      std::vector<float> fo(nq);
      cudaMemcpy(fo.data(), bc.d_out, nq * 4, cudaMemcpyDeviceToHost);
      std::vector<uint16_t> o16(nq);
      for (size_t i = 0; i < nq; ++i) o16[i] = to_bits(fo[i], t), fo[i] = from_bits(o16[i], t);
      void* d_o16 = bc.upload16(o16);
      float* d_o32 = bc.upload32(fo);
      const size_t na = dq_accum_floats(bc.batch);
      bc.batch.dq_accum = bc.alloc<float>(na);
      Workspace ws;
      // fp32 path: dq from zero.
      float* dq32 = bc.alloc<float>(nq);
      cudaMemset(dq32, 0, nq * 4);
      attention_backward_prepare(d_o32, bc.batch.dout, t, c.B, c.q_rows, c.H, c.D, bc.d_dsum, nullptr);
      cudaMemset(bc.batch.dq_accum, 0, na * 4);
      attention_backward(bc.batch, ws, nullptr);
      attention_backward_finish(bc.batch, dq32, ws, nullptr);
      std::vector<float> dsum32(nl), dq_ref(nq);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaMemcpy(dsum32.data(), bc.d_dsum, nl * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(dq_ref.data(), dq32, nq * 4, cudaMemcpyDeviceToHost);
      // 16-bit path into a dq holding a marker; the backward's dQ atomics may order differently between launches,
      // so dQ is compared against this launch's own scratch: finish16 runs on the scratch the fp32 finish read.
      auto* dq16 = static_cast<uint16_t*>(bc.upload16(std::vector<uint16_t>(nq, 0x7bcd)));
      attention_backward_prepare16(d_o16, bc.batch.dout, t, c.B, c.q_rows, c.H, c.D, bc.d_dsum, nullptr);
      attention_backward_finish16(bc.batch, dq16, ws, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> dsum16(nl);
      std::vector<uint16_t> got(nq);
      cudaMemcpy(dsum16.data(), bc.d_dsum, nl * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(got.data(), dq16, nq * 2, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < nl; ++i) ASSERT_EQ(dsum16[i], dsum32[i]) << "row sum " << i;
      // The fp32 finish overwriting a dq of garbage equals clearing it and adding, on the rows the items cover.
      float* dq_over = bc.alloc<float>(nq);
      cudaMemset(dq_over, 0x7f, nq * 4);
      attention_backward_finish(bc.batch, dq_over, ws, nullptr, true);
      std::vector<float> over(nq);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaMemcpy(over.data(), dq_over, nq * 4, cudaMemcpyDeviceToHost);
      size_t written = 0;
      for (int b = 0; b < c.B; ++b)
        for (int r = 0; r < c.q_rows; ++r)
          for (int x = 0; x < c.H * c.D; ++x) {
            const size_t i = (size_t(b) * c.q_rows + r) * c.H * c.D + x;
            if (r >= 120 && r < 150) {
              ASSERT_EQ(got[i], 0x7bcd) << "row " << r << " is in no item";
              uint32_t bits;
              std::memcpy(&bits, &over[i], 4);
              ASSERT_EQ(bits, 0x7f7f7f7fu) << "row " << r << " is in no item (fp32 overwrite)";
              continue;
            }
            ASSERT_EQ(over[i], dq_ref[i]) << "dq (fp32 overwrite) " << i;
            ASSERT_EQ(from_bits(got[i], t), from_bits(to_bits(dq_ref[i], t), t)) << "dq " << i;  // -0 == +0
            written += dq_ref[i] != 0;
          }
      EXPECT_GT(written, nq / 2);  // the comparison saw real gradients
    }
}

// dK/dV written in 16 bits (GradPiece::dk16): each element the fp32 path's sum from zero rounded once, bit for bit,
// on MHA (ragged pieces, a batch stride with gaps that must keep their marker), on key rows no query sees (causal
// rows ending before the piece does: zero, written although no CTA walks them) and on GQA's deterministic grid
// (a CTA per group); the fp32 path itself is held to the fp64 reference.
TEST(AttentionBwdGpu, Grads16AreTheFp32SumsRounded) {
  NEED_HOPPER();
  for (int D : bwd_head_dims())
    for (int variant = 0; variant < 3; ++variant) {
      Case c;
      c.dtype = variant == 1 ? DType::FP16 : DType::BF16;
      c.B = 2, c.H = 4, c.Hkv = variant == 2 ? 2 : 4, c.D = D, c.q_rows = 300;
      if (variant == 1) c.pieces = {{300, 0}, {700, 300}}, c.items = {{0, 300, 0, {0, 1}, true}};  // keys 300.. unseen
      else c.pieces = {{100, 0}, {37, 100}, {200, 137}}, c.items = {{0, 300, 0, {0, 1, 2}, variant == 2}};
      SCOPED_TRACE("D=" + std::to_string(D) + " variant " + std::to_string(variant));
      BwdCase bc(c, 51 + D + variant);
      bc.batch.deterministic = variant == 2;
      for (size_t p = 0; p < c.pieces.size(); ++p) {  // fp32 sums from zero
        std::fill(bc.dk0[p].begin(), bc.dk0[p].end(), 0.f), std::fill(bc.dv0[p].begin(), bc.dv0[p].end(), 0.f);
        cudaMemset(bc.d_dk[p], 0, bc.dk0[p].size() * 4), cudaMemset(bc.d_dv[p], 0, bc.dv0[p].size() * 4);
      }
      Workspace ws;
      bc.run_and_check(ws);
      // The same launch with 16-bit grads: pieces as views of buffers [B][len + gap] holding a marker.
      const size_t row = size_t(c.Hkv) * D;
      const int gap = 3;
      std::vector<uint16_t*> k16, v16;
      const auto grads32 = bc.batch.grads;
      for (size_t p = 0; p < c.pieces.size(); ++p) {
        const size_t n = size_t(c.B) * (c.pieces[p].len + gap) * row;
        k16.push_back(static_cast<uint16_t*>(bc.upload16(std::vector<uint16_t>(n, 0x7bcd))));
        v16.push_back(static_cast<uint16_t*>(bc.upload16(std::vector<uint16_t>(n, 0x7bcd))));
        GradPiece g;
        g.dk16 = k16.back(), g.dv16 = v16.back(), g.batch_stride = (c.pieces[p].len + gap) * (long long)row;
        bc.batch.grads[p] = g;
      }
      cudaMemset(bc.batch.dq_accum, 0, dq_accum_floats(bc.batch) * 4);
      attention_backward(bc.batch, ws, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      size_t nonzero = 0;
      for (size_t p = 0; p < c.pieces.size(); ++p) {
        const size_t n = bc.dk0[p].size(), stride = (c.pieces[p].len + gap) * row;
        std::vector<float> gk(n), gv(n);
        cudaMemcpy(gk.data(), grads32[p].dk, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(gv.data(), grads32[p].dv, n * 4, cudaMemcpyDeviceToHost);
        std::vector<uint16_t> hk(size_t(c.B) * stride), hv(hk.size());
        cudaMemcpy(hk.data(), k16[p], hk.size() * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(hv.data(), v16[p], hv.size() * 2, cudaMemcpyDeviceToHost);
        for (int b = 0; b < c.B; ++b)
          for (size_t e = 0; e < stride; ++e) {
            const size_t at = b * stride + e;
            if (e >= c.pieces[p].len * row) {
              ASSERT_EQ(hk[at], 0x7bcd) << "piece " << p << ": the gap after the piece was written";
              ASSERT_EQ(hv[at], 0x7bcd) << "piece " << p << ": the gap after the piece was written";
              continue;
            }
            const size_t src = b * c.pieces[p].len * row + e;
            ASSERT_EQ(hk[at], to_bits(gk[src], c.dtype)) << "dk piece " << p << " element " << src;
            ASSERT_EQ(hv[at], to_bits(gv[src], c.dtype)) << "dv piece " << p << " element " << src;
            nonzero += gk[src] != 0;
          }
      }
      EXPECT_GT(nonzero, 1000u);  // real gradients compared
    }
}
