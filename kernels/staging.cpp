#include "kernels/staging.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

namespace tasp::kernels {

StagingRing::~StagingRing() {
  for (Slot& s : slots) {
    if (s.host) cudaFreeHost(s.host);
    if (s.copied) cudaEventDestroy(s.copied);
  }
}

namespace {

// Whether the slot's last copy has run (a slot never used: yes).
bool free_slot(const StagingRing::Slot& s) {
  const cudaError_t q = cudaEventQuery(s.copied);
  if (q == cudaErrorNotReady) return false;
  TASP_CUDA(q);
  return true;
}

}  // namespace

void copy_to_device(StagingRing& ring, void* dst, const void* src, size_t n, cudaStream_t s) {
  if (n == 0) return;
  StagingRing::Slot* slot = nullptr;
  for (StagingRing::Slot& x : ring.slots)
    if (free_slot(x)) {
      slot = &x;
      break;
    }
  if (!slot && ring.slots.size() < StagingRing::kMaxSlots) {
    ring.slots.emplace_back();
    slot = &ring.slots.back();
    TASP_CUDA(cudaEventCreateWithFlags(&slot->copied, cudaEventDisableTiming));
  }
  if (!slot) {  // every slot's copy still queued: wait for the oldest
    slot = &*std::min_element(ring.slots.begin(), ring.slots.end(),
                              [](const StagingRing::Slot& a, const StagingRing::Slot& b) { return a.used < b.used; });
    TASP_CUDA(cudaEventSynchronize(slot->copied));
  }
  if (slot->bytes < n) {  // its last copy has run: the buffer can go
    if (slot->host) TASP_CUDA(cudaFreeHost(slot->host));
    slot->host = nullptr, slot->bytes = 0;
    size_t bytes = size_t(1) << 16;
    while (bytes < n) bytes *= 2;
    TASP_CUDA(cudaMallocHost(&slot->host, bytes));
    slot->bytes = bytes;
  }
  std::memcpy(slot->host, src, n);
  TASP_CUDA(cudaMemcpyAsync(dst, slot->host, n, cudaMemcpyHostToDevice, s));
  TASP_CUDA(cudaEventRecord(slot->copied, s));
  slot->used = ++ring.clock;
}

StagingRing& staging_of(Workspace& ws) {
  if (!ws.staging) {
    // The workspace's end synchronises its device before freeing the ring's buffers: it must know the device.
    if (ws.device_id < 0) TASP_CUDA(cudaGetDevice(&ws.device_id));
    ws.staging = std::make_unique<StagingRing>();
  }
  return *ws.staging;
}

}  // namespace tasp::kernels
