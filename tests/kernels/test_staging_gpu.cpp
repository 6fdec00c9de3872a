// Host-to-device copies through the staging ring (kernels/staging.hpp) return while their stream is still busy, and
// every copy lands with its own bytes although the pinned buffers are reused. The stream is held by a host callback
// until the copies are queued. Skips without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/staging.hpp"

namespace tasp::kernels {
namespace {

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

void CUDART_CB hold(void* flag) {
  while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(StagingGpu, CopiesQueueWithoutWaitingForTheStreamAndLandWhole) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  std::atomic<bool> go{false};
  CK(cudaLaunchHostFunc(s, hold, &go));
  StagingRing ring;
  const int copies = int(StagingRing::kMaxSlots) * 2;  // twice the ring: the second half reuses buffers
  std::vector<std::vector<unsigned char>> src(copies);
  size_t total = 0;
  for (int i = 0; i < copies; ++i) {
    src[i].resize(1000 + 37 * size_t(i) * i);  // growing sizes: buffers regrown as they are reused
    for (size_t j = 0; j < src[i].size(); ++j) src[i][j] = static_cast<unsigned char>(i * 7 + j);
    total += src[i].size();
  }
  unsigned char* dst;
  CK(cudaMalloc(&dst, total));
  // The first kMaxSlots copies queue behind the held stream at once.
  size_t at = 0;
  for (int i = 0; i < int(StagingRing::kMaxSlots); ++i) {
    copy_to_device(ring, dst + at, src[i].data(), src[i].size(), s);
    src[i].assign(src[i].size(), 0xEE);  // the host's bytes may change once the call returned
    at += src[i].size();
  }
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // nothing ran yet: the calls did not wait
  go = true;                                           // the rest wait for free buffers, which the stream now frees
  for (int i = int(StagingRing::kMaxSlots); i < copies; ++i) {
    copy_to_device(ring, dst + at, src[i].data(), src[i].size(), s);
    at += src[i].size();
  }
  CK(cudaStreamSynchronize(s));
  std::vector<unsigned char> got(total);
  CK(cudaMemcpy(got.data(), dst, total, cudaMemcpyDeviceToHost));
  at = 0;
  for (int i = 0; i < copies; ++i) {
    for (size_t j = 0; j < src[i].size(); ++j)
      ASSERT_EQ(got[at + j], static_cast<unsigned char>(i * 7 + j)) << "copy " << i << " byte " << j;
    at += src[i].size();
  }
  EXPECT_LE(ring.slots.size(), StagingRing::kMaxSlots);
  cudaFree(dst);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace tasp::kernels
