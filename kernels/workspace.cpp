// The workspace's lifetime, where the backward's plan cache and the staging ring are complete types.
#include <cuda_runtime.h>

#include "kernels/attention.hpp"
#include "kernels/bwd_plan_cache.hpp"
#include "kernels/staging.hpp"

namespace tasp::kernels {

Workspace::Workspace() = default;

Workspace::~Workspace() {
  // Launches queued with this workspace may still be reading its list and the plans' visits. cudaFree of memory
  // from cudaMallocAsync (the visits) does not wait for them: a backward still running when its workspace died
  // read freed visits (an illegal address in `tasp bench kernel --mix`). A workspace may die on
  // another thread, with another device current.
  if (device_id >= 0) {
    int current = -1;
    cudaGetDevice(&current);
    if (current != device_id) cudaSetDevice(device_id);
    cudaDeviceSynchronize();
    bwd_plans.reset();
    staging.reset();
    cudaFree(device);
    cudaFree(tail);
    if (current >= 0 && current != device_id) cudaSetDevice(current);
  }
}

size_t workspace_device_bytes(const Workspace& ws) {
  size_t n = ws.bytes + ws.tail_bytes;
  if (ws.bwd_plans)
    for (const bwd::CachedPlan& e : ws.bwd_plans->entries) {
      n += e.bytes;
      for (const bwd::CachedPlan::Tail& t : e.tails) n += t.offsets ? (t.split.parts.size() + 1) * sizeof(int) : 0;
    }
  return n;
}

}  // namespace tasp::kernels
