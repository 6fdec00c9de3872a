// Block copies on the GPU against the same copies done on the host: every type pair, adds, strides, several
// copies per launch. Skips without a CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/copy_blocks.hpp"

namespace tasp::kernels {
namespace {

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

float round_to(Elem t, float v) {
  if (t == Elem::FP32) return v;
  return t == Elem::BF16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}
size_t bytes_of(Elem t) { return t == Elem::FP32 ? 4 : 2; }
void store(std::vector<char>& mem, Elem t, size_t i, float v) {
  if (t == Elem::FP32) std::memcpy(&mem[i * 4], &v, 4);
  else if (t == Elem::BF16) { __nv_bfloat16 h = __float2bfloat16_rn(v); std::memcpy(&mem[i * 2], &h, 2); }
  else { __half h = __float2half_rn(v); std::memcpy(&mem[i * 2], &h, 2); }
}
float load(const std::vector<char>& mem, Elem t, size_t i) {
  if (t == Elem::FP32) { float v; std::memcpy(&v, &mem[i * 4], 4); return v; }
  if (t == Elem::BF16) { __nv_bfloat16 h; std::memcpy(&h, &mem[i * 2], 2); return __bfloat162float(h); }
  __half h;
  std::memcpy(&h, &mem[i * 2], 2);
  return __half2float(h);
}

TEST(CopyBlocksGpu, MatchesHostCopiesForEveryTypePair) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const Elem types[] = {Elem::BF16, Elem::FP16, Elem::FP32};
  for (Elem st : types)
    for (Elem dt : types)
      for (int add = 0; add < 2; ++add) {
        // Source [3][40][72] and destination [3][50][96]; two copies into disjoint columns of the destination.
        const size_t ns = 3 * 40 * 72, nd_ = 3 * 50 * 96;
        std::vector<char> hs(ns * bytes_of(st)), hd(nd_ * bytes_of(dt));
        for (size_t i = 0; i < ns; ++i) store(hs, st, i, nd(rng));
        for (size_t i = 0; i < nd_; ++i) store(hd, dt, i, nd(rng));
        void *ds = nullptr, *dd = nullptr, *dl = nullptr;
        CK(cudaMalloc(&ds, hs.size()));
        CK(cudaMalloc(&dd, hd.size()));
        CK(cudaMemcpy(ds, hs.data(), hs.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dd, hd.data(), hd.size(), cudaMemcpyHostToDevice));
        std::vector<BlockCopy> list;
        for (int k = 0; k < 2; ++k) {
          BlockCopy c;
          c.src = static_cast<char*>(ds) + (k * 8 * 72 + 16 * k) * bytes_of(st), c.src_type = st;
          c.dst = static_cast<char*>(dd) + (5 * 96 + 48 * k) * bytes_of(dt), c.dst_type = dt;
          c.batches = 3, c.rows = 30 - k * 7, c.width = 40, c.add = add;
          c.src_batch_stride = 40 * 72, c.src_row_stride = 72, c.dst_batch_stride = 50 * 96, c.dst_row_stride = 96;
          list.push_back(c);
        }
        const int64_t vectors = check_copies(list);
        CK(cudaMalloc(&dl, list.size() * sizeof(BlockCopy)));
        CK(cudaMemcpy(dl, list.data(), list.size() * sizeof(BlockCopy), cudaMemcpyHostToDevice));
        run_copies(static_cast<const BlockCopy*>(dl), int(list.size()), vectors, nullptr);
        std::vector<char> got(hd.size());
        CK(cudaMemcpy(got.data(), dd, got.size(), cudaMemcpyDeviceToHost));
        std::vector<char> want = hd;
        for (const BlockCopy& c : list) {
          const size_t s0 = (static_cast<const char*>(c.src) - static_cast<char*>(ds)) / bytes_of(st);
          const size_t d0 = (static_cast<char*>(c.dst) - static_cast<char*>(dd)) / bytes_of(dt);
          for (int b = 0; b < c.batches; ++b)
            for (int64_t r = 0; r < c.rows; ++r)
              for (int64_t x = 0; x < c.width; ++x) {
                const size_t si = s0 + b * c.src_batch_stride + r * c.src_row_stride + x;
                const size_t di = d0 + b * c.dst_batch_stride + r * c.dst_row_stride + x;
                const float v = load(hs, st, si) + (add ? load(hd, dt, di) : 0.f);
                store(want, dt, di, round_to(dt, v));
              }
        }
        for (size_t i = 0; i < nd_; ++i)
          ASSERT_EQ(load(got, dt, i), load(want, dt, i)) << "element " << i << " types " << int(st) << "->" << int(dt) << " add " << add;
        cudaFree(ds), cudaFree(dd), cudaFree(dl);
      }
}

// Accumulators in bf16 transit: an fp32 accumulator cast to 16 bits (cast_out), then added to another fp32 one or
// made one (add_half_into), against the host doing the same roundings, on both of their paths (aligned vectors and
// elements one by one).
TEST(CopyBlocksGpu, AccumulatorsTravelIn16Bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const size_t n = 100003;  // not a multiple of a block
  for (Elem t : {Elem::BF16, Elem::FP16}) {
    std::vector<float> sent(n), own(n);
    for (size_t i = 0; i < n; ++i) sent[i] = nd(rng), own[i] = nd(rng);
    float *d_sent, *d_own, *d_new;
    void* d_half;
    CK(cudaMalloc(&d_sent, n * 4));
    CK(cudaMalloc(&d_own, n * 4));
    CK(cudaMalloc(&d_new, n * 4));
    CK(cudaMalloc(&d_half, n * 2));
    CK(cudaMemcpy(d_sent, sent.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_own, own.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_new, 0x7f, n * 4));  // garbage: overwrite must not read it
    const DType dt = t == Elem::BF16 ? DType::BF16 : DType::FP16;
    // Element 0 alone, 1..7 (pointers off the 16-byte grid): the kernels' scalar path; the rest 8 a thread with a
    // tail (the vector path).
    for (auto [at, len] : {std::pair<size_t, size_t>{0, 1}, {1, 7}, {8, n - 8}}) {
      cast_out(d_sent + at, static_cast<uint16_t*>(d_half) + at, dt, len, nullptr);
      add_half_into(d_own + at, static_cast<uint16_t*>(d_half) + at, dt, len, false, nullptr);
      add_half_into(d_new + at, static_cast<uint16_t*>(d_half) + at, dt, len, true, nullptr);
    }
    std::vector<float> got_own(n), got_new(n);
    CK(cudaMemcpy(got_own.data(), d_own, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got_new.data(), d_new, n * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_new[i], round_to(t, sent[i])) << i;
      ASSERT_EQ(got_own[i], own[i] + round_to(t, sent[i])) << i;
    }
    for (void* p : {static_cast<void*>(d_sent), static_cast<void*>(d_own), static_cast<void*>(d_new), d_half}) cudaFree(p);
  }
}

// Moved query rows' partial dQ added into a framework's 16-bit dQ rows (add_rows16): strided rows of 16-bit values
// summed in fp32 and rounded once, against the host doing the same, on the vector path (rows on the 16-byte grid) and
// the scalar one (a base off it), every row's tail included.
TEST(CopyBlocksGpu, SixteenBitRowsAddIntoSixteenBitRows) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(13);
  std::normal_distribution<float> nd;
  const size_t rows = 3, width = 1003, dst_pitch = 1208, add_pitch = 1016, n_dst = rows * dst_pitch + 1, n_add = rows * add_pitch + 1;
  for (Elem t : {Elem::BF16, Elem::FP16})
    for (size_t off : {size_t(0), size_t(1)}) {
      std::vector<char> dst(n_dst * 2), add(n_add * 2);
      for (size_t i = 0; i < n_dst; ++i) store(dst, t, i, nd(rng));
      for (size_t i = 0; i < n_add; ++i) store(add, t, i, nd(rng));
      void *d_dst, *d_add;
      CK(cudaMalloc(&d_dst, dst.size()));
      CK(cudaMalloc(&d_add, add.size()));
      CK(cudaMemcpy(d_dst, dst.data(), dst.size(), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(d_add, add.data(), add.size(), cudaMemcpyHostToDevice));
      const DType dt = t == Elem::BF16 ? DType::BF16 : DType::FP16;
      add_rows16(static_cast<uint16_t*>(d_dst) + off, dst_pitch, static_cast<uint16_t*>(d_add) + off, add_pitch, dt, width, rows,
                 nullptr);
      std::vector<char> got(dst.size());
      CK(cudaMemcpy(got.data(), d_dst, got.size(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n_dst; ++i) {
        const size_t r = (i - off) / dst_pitch, c = (i - off) % dst_pitch;
        const bool inside = i >= off && r < rows && c < width;
        const float want = inside ? round_to(t, load(dst, t, i) + load(add, t, off + r * add_pitch + c)) : load(dst, t, i);
        ASSERT_EQ(load(got, t, i), want) << "element " << i << " offset " << off << " type " << int(t);
      }
      cudaFree(d_dst), cudaFree(d_add);
    }
}

TEST(CopyBlocks, RefusesMisalignedCopies) {
  BlockCopy c;
  alignas(64) static uint16_t buf[64];
  c.src = buf, c.dst = buf + 32, c.rows = 1, c.width = 12;  // width not a multiple of 8
  EXPECT_THROW(check_copies({c}), std::invalid_argument);
  c.width = 8, c.src = buf + 1;  // a 16-bit address off the 16-byte grid
  EXPECT_THROW(check_copies({c}), std::invalid_argument);
  c.src = buf;
  EXPECT_EQ(check_copies({c}), 1);
}

// A piece's accumulator rows of every batch cast into the caller's strided rows in one launch (cast_out_rows), on
// its vector path (rows on the 16-byte grid) and its element path (odd pitches), against the host's roundings; the
// bytes between the rows untouched. With an add fused in (fp32 or bf16 values, rows as the source's; or the add alone,
// no source): the host's float sum in the kernel's order, rounded.
TEST(CopyBlocksGpu, AccumulatorRowsCastInOneLaunch) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  struct Shape {
    size_t width, rows, src_pitch, dst_pitch;
  };
  enum Mode { Plain, AddF32, AddBf16, AdoptBf16 };
  for (Mode mode : {Plain, AddF32, AddBf16, AdoptBf16})
    for (Elem t : {Elem::BF16, Elem::FP16})
      for (const Shape& sh : {Shape{256, 4, 1024, 512}, Shape{333, 5, 1003, 777}, Shape{4096, 1, 4096, 4096}}) {
        SCOPED_TRACE("mode " + std::to_string(mode) + " width " + std::to_string(sh.width));
        std::vector<float> src(sh.src_pitch * sh.rows), add(src.size());
        for (float& x : src) x = nd(rng);
        for (float& x : add) x = mode == AddF32 ? nd(rng) : round_to(Elem::BF16, nd(rng));
        std::vector<__nv_bfloat16> add16(add.size());
        for (size_t i = 0; i < add.size(); ++i) add16[i] = __float2bfloat16_rn(add[i]);
        float *d_src, *d_add;
        uint16_t* d_dst;
        const size_t dn = sh.dst_pitch * sh.rows;
        CK(cudaMalloc(&d_src, src.size() * 4));
        CK(cudaMalloc(&d_add, add.size() * 4));
        CK(cudaMalloc(&d_dst, dn * 2));
        CK(cudaMemcpy(d_src, src.data(), src.size() * 4, cudaMemcpyHostToDevice));
        if (mode == AddF32) CK(cudaMemcpy(d_add, add.data(), add.size() * 4, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(d_add, add16.data(), add16.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemset(d_dst, 0xab, dn * 2));
        const DType dt = t == Elem::BF16 ? DType::BF16 : DType::FP16;
        const AddType at = mode == Plain ? AddType::None : mode == AddF32 ? AddType::F32 : AddType::BF16;
        cast_out_rows(mode == AdoptBf16 ? nullptr : d_src, sh.src_pitch, d_dst, sh.dst_pitch, dt, sh.width, sh.rows,
                      nullptr, mode == Plain ? nullptr : d_add, at);
        std::vector<uint16_t> got(dn);
        CK(cudaMemcpy(got.data(), d_dst, dn * 2, cudaMemcpyDeviceToHost));
        for (size_t r = 0; r < sh.rows; ++r)
          for (size_t x = 0; x < sh.dst_pitch; ++x) {
            const uint16_t g = got[r * sh.dst_pitch + x];
            if (x >= sh.width) {
              ASSERT_EQ(g, 0xabab) << "between rows, row " << r << " element " << x;
              continue;
            }
            const size_t i = r * sh.src_pitch + x;
            float v = 0.f;
            if (mode != AdoptBf16) v += src[i];
            if (mode != Plain) v += add[i];
            std::vector<char> want(4);  // (room for an fp32: the compiler cannot see t is 16-bit)
            store(want, t, 0, v);
            ASSERT_EQ(std::memcmp(&g, want.data(), 2), 0) << "row " << r << " element " << x;
          }
        cudaFree(d_src), cudaFree(d_add), cudaFree(d_dst);
      }
}

}  // namespace

}  // namespace tasp::kernels
