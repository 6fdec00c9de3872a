#include "kernels/bwd_plan_cache.hpp"

#include <algorithm>
#include <utility>

#include "kernels/cuda_check.hpp"
#include "kernels/staging.hpp"

namespace tasp::kernels::bwd {

PlanCache::~PlanCache() {
  // The workspace's end has waited for the launches that read them (~Workspace): cudaFree of stream-ordered
  // memory does not.
  for (CachedPlan& e : entries) {
    if (e.visits) cudaFree(e.visits);
    for (const CachedPlan::Tail& t : e.tails) cudaFree(t.offsets);
  }
}

const CachedPlan::Tail& tail_of(CachedPlan& plan, long long reps, int slots, StagingRing& staging, cudaStream_t s) {
  for (const CachedPlan::Tail& t : plan.tails)
    if (t.reps == reps && t.slots == slots) return t;
  std::vector<int> walks;
  walks.reserve(plan.plan.tiles.size());
  for (const Tile& t : plan.plan.tiles) walks.push_back(t.vcount);
  CachedPlan::Tail t{reps, slots, plan_tail(walks, reps, slots)};
  if (!t.split.parts.empty()) {  // each split CTA's parts from where the ones before it end
    std::vector<int> offsets(1, 0);
    for (int parts : t.split.parts) offsets.push_back(offsets.back() + parts);
    TASP_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&t.offsets), offsets.size() * sizeof(int), s));
    copy_to_device(staging, t.offsets, offsets.data(), offsets.size() * sizeof(int), s);
  }
  plan.tails.push_back(t);
  return plan.tails.back();
}

CachedPlan& find_or_build(PlanCache& cache, std::vector<long long> key, const std::function<Plan()>& build,
                                StagingRing& staging, cudaStream_t s) {
  ++cache.clock;
  for (CachedPlan& e : cache.entries)
    if (e.key == key) {
      e.used = cache.clock;
      return e;
    }
  Plan plan = build();
  const size_t need = plan.visits.size() * sizeof(Visit);
  auto held = [&] {
    size_t n = 0;
    for (const CachedPlan& e : cache.entries) n += e.bytes;
    return n;
  };
  // Room: the least recently used plans go (their buffers after the launches queued on s that read them).
  while (!cache.entries.empty() && (cache.entries.size() >= PlanCache::kMaxPlans || held() + need > PlanCache::kMaxBytes)) {
    auto lru = std::min_element(cache.entries.begin(), cache.entries.end(),
                                [](const CachedPlan& a, const CachedPlan& b) { return a.used < b.used; });
    if (lru->visits) TASP_CUDA(cudaFreeAsync(lru->visits, s));
    for (const CachedPlan::Tail& t : lru->tails)
      if (t.offsets) TASP_CUDA(cudaFreeAsync(t.offsets, s));
    cache.entries.erase(lru);
  }
  CachedPlan e;
  e.key = std::move(key);
  e.plan = std::move(plan);
  e.bytes = need;
  e.used = cache.clock;
  if (need) {
    TASP_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&e.visits), need, s));
    copy_to_device(staging, e.visits, e.plan.visits.data(), need, s);
  }
  // The device copy is what launches read; the host's (already staged by the copy) would only hold memory.
  std::vector<Visit>().swap(e.plan.visits);
  cache.entries.push_back(std::move(e));
  return cache.entries.back();
}

}  // namespace tasp::kernels::bwd
