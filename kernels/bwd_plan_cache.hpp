#pragma once
// The backward's plans kept between launches on a workspace, with their visits on the device. A training step
// repeats its launches' work lists every iteration, and each launch built its plan and copied its visits to the
// device again (0.1-0.6 ms of host time at S=16k, which the GPU waits for whenever the host is not ahead of it).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/bwd_plan.hpp"
#include "kernels/bwd_tail.hpp"
#include "kernels/staging.hpp"

namespace tasp::kernels::bwd {

struct CachedPlan {
  std::vector<long long> key;  // plan_key
  Plan plan;
  Visit* visits = nullptr;  // plan.visits on the device
  size_t bytes = 0;         // allocated at `visits`
  uint64_t used = 0;        // the cache's clock at its last use
  // The last wave's split for the launches of this plan seen so far, by (CTAs per plan tile, slots), with the split
  // CTAs' part offsets on the device (bwd::Params::tail_offsets).
  struct Tail {
    long long reps;
    int slots;
    TailSplit split;
    int* offsets = nullptr;
  };
  std::vector<Tail> tails;
};

// Up to kMaxPlans plans and kMaxBytes of device visits (8 ring steps of S=1M over 8 GPUs at D=128 hold 432 MB;
// past the limits the least recently used plan makes room, and a step's plan is built again as without a cache).
// Buffers are allocated, filled and freed in stream order on the launch's stream, so replacing one never waits
// for the device; like the workspace's own buffer, that assumes a workspace's launches share one stream (the
// executor's compute stream of its GPU).
struct PlanCache {
  static constexpr size_t kMaxPlans = 16, kMaxBytes = size_t(256) << 20;
  std::vector<CachedPlan> entries;
  uint64_t clock = 0;
  PlanCache() = default;
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;
  ~PlanCache();
};

// The plan's split of the last wave for `reps` CTAs a plan tile on `slots` slots (plan_tail), kept with the plan, its
// offsets copied to the device on s (through `staging`) when first asked for.
const CachedPlan::Tail& tail_of(CachedPlan& plan, long long reps, int slots, StagingRing& staging, cudaStream_t s);

// The plan of `key`: the cached one, or build()'s, whose visits are then copied to the device on stream s (through
// `staging`: no wait for s).
CachedPlan& find_or_build(PlanCache& cache, std::vector<long long> key, const std::function<Plan()>& build,
                                StagingRing& staging, cudaStream_t s);

}  // namespace tasp::kernels::bwd
