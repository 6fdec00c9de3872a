#pragma once
// Hopper (sm_90a) asynchronous-copy primitives for the warp-specialised forward: mbarriers, TMA tile loads
// from a tensor map and stores into one, and named barriers between warpgroups.
#include <cstdint>

namespace tasp::kernels::sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes barrier initialisation visible to the async proxy (TMA) before any copy signals it.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of transactions the copies signalling this barrier will make.
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Announces `bytes` of transactions without arriving: the phase then also waits for a later mbar_arrive.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// The trap behind a stuck pipeline, out of line: a trap inlined into a warpgroup's code makes ptxas ignore that
// warpgroup's setmaxnreg.inc and allocate it the kernel's entry budget (168 registers at 384 threads), which
// spilled a warp-specialised backward's accumulators (docs/measurements/kernels.md); a call on the cold
// path does not.
static __device__ __noinline__ void pipeline_stuck() { __trap(); }
// Spins until ready() (pausing SLEEP_NS between tries). A pipeline bug would otherwise hang the GPU: after about
// 2 s of waiting the kernel traps, and the launch fails with an error instead.
template <int SLEEP_NS = 0, class Ready>
__device__ __forceinline__ void spin_until(Ready ready) {
  if (ready()) return;
  const long long t0 = clock64();
  while (!ready()) {
    if constexpr (SLEEP_NS > 0) __nanosleep(SLEEP_NS);
    if (clock64() - t0 > 4000000000LL) pipeline_stuck();
  }
}
// Waits for the phase of parity `parity` to complete.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  spin_until([&] { return mbar_try_wait(bar, parity); });
}

// Orders this thread's later TMA reads of a tensor map in global memory after writes to it (the host
// copies the maps into a reused workspace before each launch).
__device__ __forceinline__ void fence_tensormap(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map) : "memory");
}
// The map's 128 bytes on their way into the TMA unit's descriptor cache, so that the first copy through it does not
// wait for them.
__device__ __forceinline__ void prefetch_tensormap(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
// One box of a 1-d tensor map from element c0 on (c0 at a 16-byte boundary: an unaligned one is an illegal
// instruction) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_1d(uint32_t dst, const void* map, uint32_t bar, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::"r"(dst),
               "l"(map), "r"(c0), "r"(bar)
               : "memory");
}
// One box of a 4-d tensor map (coordinates innermost first) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], "
      "[%7];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}
// One box of shared memory into a 4-d tensor map's tensor (coordinates innermost first; what falls past the
// tensor's ends is not written); completes in this thread's bulk group. Writes to `src` must be fenced to the
// async proxy first.
__device__ __forceinline__ void tma_store_4d(const void* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(map), "r"(c0),
               "r"(c1), "r"(c2), "r"(c3), "r"(src)
               : "memory");
}

// Adds `bytes` (a multiple of 16) of fp32 from shared to global memory in the async proxy (16-byte aligned
// both); completes in this thread's bulk group. Writes to `src` must be fenced to the async proxy first.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's bulk groups have finished reading shared memory (the source may be rewritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Waits until they have completed (their writes are done).
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Orders this thread's async-proxy (bulk copy) accesses to global memory with its generic ones.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// A turn at a counter in global memory shared by CTAs: wait until it reads `turn` (acquire), and later pass it
// on by storing turn + 1 (release). Only CTAs launched earlier hold earlier turns, so the wait ends; a bug that
// breaks that traps (spin_until) instead of hanging the GPU.
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void wait_turn(const int* counter, int turn) {
  spin_until<64>([&] { return ld_acquire(counter) == turn; });
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `n` threads: sync waits, arrive does not.
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
// Register reallocation between warpgroups (every thread of the warpgroup executes it, the branch around it
// must be provably warp-uniform, and the kernel needs __launch_bounds__ with a minimum of 1 CTA per SM, or
// ptxas drops it): a producer gives registers back, consumers take them.
template <int N>
__device__ __forceinline__ void regs_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void regs_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

#else
// Host pass and other architectures: the warp-specialised kernel is only launched on sm_90a.
__device__ __forceinline__ void mbar_init(uint32_t, int) {}
__device__ __forceinline__ void fence_mbar_init() {}
__device__ __forceinline__ void mbar_arrive(uint32_t) {}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t, uint32_t) {}
__device__ __forceinline__ void mbar_expect_tx(uint32_t, uint32_t) {}
__device__ __forceinline__ void mbar_wait(uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void fence_tensormap(const void*) {}
__device__ __forceinline__ void prefetch_tensormap(const void*) {}
__device__ __forceinline__ void tma_load_1d(uint32_t, const void*, uint32_t, int) { __trap(); }
__device__ __forceinline__ void tma_load_4d(uint32_t, const void*, uint32_t, int, int, int, int) { __trap(); }
__device__ __forceinline__ void tma_load_5d(uint32_t, const void*, uint32_t, int, int, int, int, int) { __trap(); }
__device__ __forceinline__ void bar_sync(int, int) {}
__device__ __forceinline__ void bar_arrive(int, int) {}
template <int N>
__device__ __forceinline__ void regs_dealloc() {}
template <int N>
__device__ __forceinline__ void regs_alloc() {}
__device__ __forceinline__ void tma_store_4d(const void*, uint32_t, int, int, int, int) { __trap(); }
__device__ __forceinline__ void bulk_reduce_add_f32(float*, uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void bulk_commit() {}
__device__ __forceinline__ void bulk_wait_read() {}
__device__ __forceinline__ void bulk_wait() {}
__device__ __forceinline__ void fence_proxy_async() {}
__device__ __forceinline__ void fence_proxy_async_global() {}
__device__ __forceinline__ void st_release(int*, int) {}
__device__ __forceinline__ void wait_turn(const int*, int) { __trap(); }
#endif

}  // namespace tasp::kernels::sm90
