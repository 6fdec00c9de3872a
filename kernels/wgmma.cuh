#pragma once
// wgmma m64n128k16 (and m64n64k16 for P V at head dim 64) with fp32 accumulators (sm_90a). The 64 accumulator registers of a thread are
// d[0..63] in the mma.sync C order, one n8 chunk after another (the operand lists are long, not clever).
// ss: A and B from shared memory (both K-major); rs: A from registers, B from shared memory MN-major
// (transposed), as P V needs it. scale_d = 0 overwrites d, 1 accumulates.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tasp::kernels::sm90 {

template <typename T>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d);
template <typename T>
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int scale_d);
template <typename T>  // N = 64 (P V for head dim 64)
__device__ __forceinline__ void wgmma_rs64(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int scale_d);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One specialisation per input type; the PTX differs only in the type name (TY: bf16 or f16).
#define TASP_WGMMA_D32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TASP_WGMMA_D64 \
  TASP_WGMMA_D32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TASP_WGMMA_SPECIALISE(T, TY)                                                                              \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_ss<T>(float(&d)[64], uint64_t da, uint64_t db, int scale_d) {            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                 : TASP_WGMMA_D64                                                                                \
                 : "l"(da), "l"(db), "r"(scale_d));                                                              \
  }                                                                                                              \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_rs<T>(float(&d)[64], const uint32_t(&a)[4], uint64_t db, int scale_d) {  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n" \
                 : TASP_WGMMA_D64                                                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));                          \
  }                                                                                                              \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_rs64<T>(float(&d)[32], const uint32_t(&a)[4], uint64_t db, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n" \
                 : TASP_WGMMA_D32                                                                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));                          \
  }
TASP_WGMMA_SPECIALISE(__nv_bfloat16, "bf16")
TASP_WGMMA_SPECIALISE(__half, "f16")
#undef TASP_WGMMA_SPECIALISE
#undef TASP_WGMMA_D32
#undef TASP_WGMMA_D64
#else
template <typename T>
__device__ __forceinline__ void wgmma_rs64(float (&)[32], const uint32_t (&)[4], uint64_t, int) { __trap(); }
template <typename T>
__device__ __forceinline__ void wgmma_ss(float (&)[64], uint64_t, uint64_t, int) { __trap(); }
template <typename T>
__device__ __forceinline__ void wgmma_rs(float (&)[64], const uint32_t (&)[4], uint64_t, int) { __trap(); }
#endif

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N of the most recently committed groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t((lbo >> 4) & 0x3FFF) << 16 | uint64_t((sbo >> 4) & 0x3FFF) << 32 |
         uint64_t(1) << 62;
}

}  // namespace tasp::kernels::sm90
