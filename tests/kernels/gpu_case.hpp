#pragma once
// What the GPU kernel tests share: a case of items over pieces, random inputs rounded to the input type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"
#include "item_spec.hpp"

namespace tasp::kernels::testing {

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

// Head dims the forward tests cover: all the forward has, or 64 and 128 where the mma.sync reference path
// (TASP_ATTN_PATH=mma, which has no others) is under test.
inline std::vector<int> fwd_head_dims() {
  const char* e = std::getenv("TASP_ATTN_PATH");
  if (e && std::string(e) == "mma") return {64, 128};
  return {64, 80, 96, 128, 256};
}

// Head dims the backward tests cover: all the backward has (80 and 96 held padded to 128 in shared memory; 256 in two
// CTAs per key tile, each owning half of the columns).
inline std::vector<int> bwd_head_dims() { return {64, 80, 96, 128, 256}; }

// Sets an environment variable for its scope and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name), had_(std::getenv(name) != nullptr) {
    if (had_) old_ = std::getenv(name);
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_;
  std::string old_;
};

struct Case {
  DType dtype = DType::BF16;
  int B = 1, H = 2, Hkv = 2, D = 128, q_rows = 0;
  double scale = 0;  // of the scores; 0: 1 / sqrt(D)
  std::vector<PieceSpec> pieces;
  std::vector<ItemSpec> items;
};

// Masks whose edges lie 2^29 tokens and more from the rows, where the kernels' 32-bit offsets are clamped
// (kernels/band.hpp): a causal item whose left window (2^29 + 5) cuts a piece that far back; a non-causal one
// whose document starts 2^30 back, inside a piece, and whose right window (2^29 + 3) cuts a piece ahead.
inline Case far_case(int D) {
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 1, c.D = D, c.q_rows = 300;
  const long long qa = 1LL << 33, qb = 1LL << 34, w = 1LL << 29;
  c.pieces = {{200, qa - w - 120}, {200, qa - 40}, {150, qb - 2 * w - 100}, {150, qb + w - 50}, {90, qb - 20}};
  ItemSpec a{0, 160, qa, {0, 1}, true};
  a.wl = int(w + 5);
  ItemSpec b{160, 140, qb, {2, 3, 4}, false};
  b.k_begin = qb - 2 * w - 30, b.wr = int(w + 3);
  c.items = {a, b};
  return c;
}

// Packed documents and sliding windows: rows at positions [0, 900) cut into one item per document (edges 300,
// 301, 700: a 1-token document), B=2, GQA, pieces straddling the edges; causal windows narrower than a tile
// and wider than a few, a non-causal window with a right side, documents alone; then one long causal item
// with a window, whose walk jumps over most of its keys; then far_case.
inline std::vector<Case> masked_cases(int D) {
  std::vector<Case> out;
  const long long edges[] = {0, 300, 301, 700, 900};
  const int wls[] = {37, 300, 50, -1}, wrs[] = {-1, -1, 20, -1};
  for (int v = 0; v < 4; ++v) {
    Case c;
    c.B = 2, c.H = 4, c.Hkv = 2, c.D = D, c.q_rows = 900;
    c.pieces = {{350, 0}, {250, 350}, {300, 600}};
    for (int d = 0; d < 4; ++d) {
      ItemSpec it{int(edges[d]), int(edges[d + 1] - edges[d]), edges[d], {0, 1, 2}, v != 2};
      it.k_begin = edges[d], it.k_end = edges[d + 1], it.wl = wls[v], it.wr = wrs[v];
      c.items.push_back(it);
    }
    out.push_back(c);
  }
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 1, c.D = D, c.q_rows = 1500;
  c.pieces = {{700, 0}, {800, 700}};
  ItemSpec it{0, 1500, 0, {0, 1}, true};
  it.wl = 200;
  c.items = {it};
  out.push_back(c);
  out.push_back(far_case(D));
  return out;
}

inline uint16_t to_bits(float x, DType t) {
  if (t == DType::BF16) {
    __nv_bfloat16 v = __float2bfloat16(x);
    return *reinterpret_cast<uint16_t*>(&v);
  }
  __half v = __float2half(x);
  return *reinterpret_cast<uint16_t*>(&v);
}
inline float from_bits(uint16_t b, DType t) {
  if (t == DType::BF16) return __bfloat162float(*reinterpret_cast<__nv_bfloat16*>(&b));
  return __half2float(*reinterpret_cast<__half*>(&b));
}

// Random values in [-2, 2), rounded to the input type; `vals` keeps what the GPU sees.
inline std::vector<uint16_t> random_tensor(size_t n, DType t, std::mt19937& rng, std::vector<double>& vals) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<uint16_t> bits(n);
  vals.resize(n);
  for (size_t i = 0; i < n; ++i) bits[i] = to_bits(u(rng), t), vals[i] = from_bits(bits[i], t);
  return bits;
}

// A small causal case (one item over two pieces, the diagonal inside the second): what per-device tests run.
inline Case small_causal_case(int D) {
  Case c;
  c.B = 1, c.H = 2, c.Hkv = 1, c.D = D, c.q_rows = 160;
  c.pieces = {{150, 0}, {70, 150}};
  c.items = {{0, 160, 60, {0, 1}, true}};
  return c;
}

// Runs body(device) on every visible device, each from its own thread, as the cuda backend does: device 0
// first (so that state it leaves, right or wrong, is there when the others start), then the rest together.
// Returns the number of devices (tests of per-device state skip below 2).
inline int on_every_device(const std::function<void(int)>& body) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  auto one = [&body](int d) {
    if (cudaSetDevice(d) == cudaSuccess) body(d);
    else ADD_FAILURE() << "cudaSetDevice(" << d << ")";
  };
  std::thread(one, 0).join();
  std::vector<std::thread> threads;
  for (int d = 1; d < n; ++d) threads.emplace_back(one, d);
  for (auto& t : threads) t.join();
  return n;
}

// f(i) for every i in [0, n) on the host's cores, each i by one thread in order: the fp64 references (a GPU
// machine's 16 cores ran them on one; they were most of the GPU tests' 189 s, 71 s in one test). Each i must write
// only its own outputs, so the results are those of the plain loop.
template <class F>
void parallel_for(int n, const F& f) {
  const int threads = std::max(1, std::min(n, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&f, t, threads, n] {
      for (int i = t; i < n; i += threads) f(i);
    });
  for (auto& th : pool) th.join();
}

#define NEED_GPU() \
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device"

}  // namespace tasp::kernels::testing
