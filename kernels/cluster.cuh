#pragma once
// Hopper (sm_90a) thread-block clusters for a pair of CTAs: each CTA's rank, the peer's shared memory (distributed
// shared memory: stores and mbarrier arrivals across the pair), copies multicast to both and the cluster-wide barrier. For the D=256
// backward's paired experiment (bwd_sm90_wide.cuh, -DTASP_BWD_WIDE_PAIR).
#include <cstdint>

#include "kernels/tma.cuh"

namespace tasp::kernels::sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_ctas() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// The address in CTA `rank`'s shared memory of what sits at `addr` in this CTA's.
__device__ __forceinline__ uint32_t peer_smem(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster_f4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
// One arrival on a barrier in the peer's shared memory (an address from peer_smem), releasing this thread's earlier
// writes to the cluster.
__device__ __forceinline__ void mbar_arrive_peer(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits for the phase of parity `parity` of this CTA's barrier, acquiring what the peer's arrivals released.
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  spin_until([&] { return mbar_try_wait<true>(bar, parity); });
}
// tma_load_5d's box into every CTA of `mask` (at the same shared offsets), each completing on its own barrier at
// `bar`'s offset.
__device__ __forceinline__ void tma_load_5d_multicast(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2, int c3,
                                                      int c4, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, "
      "%4, %5, %6}], [%7], %8;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar), "h"(mask)
      : "memory");
}
// Every thread of both CTAs: no CTA goes on (or exits) before the other has arrived.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
#else
__device__ __forceinline__ uint32_t cluster_rank() { return 0; }
__device__ __forceinline__ uint32_t cluster_ctas() { return 1; }
__device__ __forceinline__ uint32_t peer_smem(uint32_t addr, uint32_t) { return addr; }
__device__ __forceinline__ void st_cluster_f4(uint32_t, float, float, float, float) { __trap(); }
__device__ __forceinline__ void mbar_arrive_peer(uint32_t) { __trap(); }
__device__ __forceinline__ void mbar_wait_cluster(uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void tma_load_5d_multicast(uint32_t, const void*, uint32_t, int, int, int, int, int, uint16_t) { __trap(); }
__device__ __forceinline__ void cluster_sync() {}
#endif

}  // namespace tasp::kernels::sm90
