#pragma once
// What the GPU kernel tests share: a case of items over pieces, random inputs rounded to the input type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"

namespace tasp::kernels::testing {

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

struct PieceSpec {
  int len;
  long long pos0;
};
struct ItemSpec {
  int q_row0, q_len;
  long long q_pos0;
  std::vector<int> pieces;  // indices into the case's pieces
  bool causal;
};
struct Case {
  DType dtype = DType::BF16;
  int B = 1, H = 2, Hkv = 2, D = 128, q_rows = 0;
  std::vector<PieceSpec> pieces;
  std::vector<ItemSpec> items;
};

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

#define NEED_GPU() \
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device"

}  // namespace tasp::kernels::testing
