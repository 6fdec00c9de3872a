#pragma once
// Host-to-device copies that never wait for their stream. A cudaMemcpyAsync from pageable memory (a std::vector) may
// synchronise with its stream before staging the bytes ("API synchronization behavior" in the CUDA runtime's
// reference), so every launch's work-list upload could hold the host until the kernels queued before it had run,
// and a training framework's host could not run ahead of its GPU. Copies from pinned memory are asynchronous: the
// bytes go through a ring of pinned buffers, each reused once the copy that last read it has run (an event).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tasp::kernels {

struct StagingRing {
  static constexpr size_t kMaxSlots = 32;  // copies in flight before the host waits for the oldest
  struct Slot {
    void* host = nullptr;  // pinned
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;  // recorded after the copy that last read `host`
    uint64_t used = 0;
  };
  std::vector<Slot> slots;
  uint64_t clock = 0;
  StagingRing() = default;
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing();  // after the copies have run (the workspace's end synchronises its device first)
};

// Copies n bytes from host `src` to device `dst` on `s` through a free pinned buffer of the ring (grown as needed):
// returns without waiting for `s` unless kMaxSlots copies are still queued.
void copy_to_device(StagingRing& ring, void* dst, const void* src, size_t n, cudaStream_t s);

struct Workspace;
// A workspace's ring (made on first use), for its launches' uploads and other copies of the device it serves.
StagingRing& staging_of(Workspace& ws);

}  // namespace tasp::kernels
