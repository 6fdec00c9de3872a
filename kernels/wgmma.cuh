#pragma once
// wgmma m64nNk16 (N = 32, 64, 128) with fp32 accumulators (sm_90a), bf16 or fp16 inputs. A thread's N / 2
// accumulators are d[0..N/2) in the mma.sync C order, one n8 chunk after another.
// ss: A and B from shared memory through descriptors; TRANS_A / TRANS_B = 1 reads that operand MN-major
// (transposed; 16-bit types only). rs: A from registers (the m16k16 fragment of each 16-row slice), B from
// shared memory. scale_d = 0 overwrites d, 1 accumulates. The operand lists are long, not clever: one macro
// writes each shape for both input types (the PTX differs only in the type name).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tasp::kernels::sm90 {

template <typename T, int N, int TRANS_A, int TRANS_B>
struct WgmmaSs;
template <typename T, int N, int TRANS_B>
struct WgmmaRs;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TASP_D8(o) \
  "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define TASP_WGMMA_N32(T, TY)                                                                                  \
  template <int TA, int TB>                                                                                \
  struct WgmmaSs<T, 32, TA, TB> {                                                                           \
    static __device__ __forceinline__ void run(float (&d)[16], uint64_t da, uint64_t db, int sc) {            \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\nwgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, %19, %20;\n}\n"                                         \
                   : TASP_D8(0), TASP_D8(8)                                                                   \
                   : "l"(da), "l"(db), "r"(sc), "n"(TA), "n"(TB));                                           \
    }                                                                                                      \
  };                                                                                                       \
  template <int TB>                                                                                        \
  struct WgmmaRs<T, 32, TB> {                                                                               \
    static __device__ __forceinline__ void run(float (&d)[16], const uint32_t (&a)[4], uint64_t db, int sc) {  \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\nwgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, %22;\n}\n"                   \
                   : TASP_D8(0), TASP_D8(8)                                                                   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(sc), "n"(TB));                  \
    }                                                                                                      \
  };
#define TASP_WGMMA_N64(T, TY)                                                                                  \
  template <int TA, int TB>                                                                                \
  struct WgmmaSs<T, 64, TA, TB> {                                                                           \
    static __device__ __forceinline__ void run(float (&d)[32], uint64_t da, uint64_t db, int sc) {            \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36;\n}\n"                                         \
                   : TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24)                                                                   \
                   : "l"(da), "l"(db), "r"(sc), "n"(TA), "n"(TB));                                           \
    }                                                                                                      \
  };                                                                                                       \
  template <int TB>                                                                                        \
  struct WgmmaRs<T, 64, TB> {                                                                               \
    static __device__ __forceinline__ void run(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int sc) {  \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"                   \
                   : TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24)                                                                   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(sc), "n"(TB));                  \
    }                                                                                                      \
  };
#define TASP_WGMMA_N128(T, TY)                                                                                  \
  template <int TA, int TB>                                                                                \
  struct WgmmaSs<T, 128, TA, TB> {                                                                           \
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db, int sc) {            \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, %67, %68;\n}\n"                                         \
                   : TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40), TASP_D8(48), TASP_D8(56)                                                                   \
                   : "l"(da), "l"(db), "r"(sc), "n"(TA), "n"(TB));                                           \
    }                                                                                                      \
  };                                                                                                       \
  template <int TB>                                                                                        \
  struct WgmmaRs<T, 128, TB> {                                                                               \
    static __device__ __forceinline__ void run(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int sc) {  \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY \
                   " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"                   \
                   : TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40), TASP_D8(48), TASP_D8(56)                                                                   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(sc), "n"(TB));                  \
    }                                                                                                      \
  };
TASP_WGMMA_N32(__nv_bfloat16, "bf16")
TASP_WGMMA_N32(__half, "f16")
TASP_WGMMA_N64(__nv_bfloat16, "bf16")
TASP_WGMMA_N64(__half, "f16")
TASP_WGMMA_N128(__nv_bfloat16, "bf16")
TASP_WGMMA_N128(__half, "f16")
#undef TASP_WGMMA_N32
#undef TASP_WGMMA_N64
#undef TASP_WGMMA_N128
#undef TASP_D8
#endif

template <typename T, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  WgmmaSs<T, N, TRANS_A, TRANS_B>::run(d, da, db, scale_d);
#else
  __trap();
#endif
}
template <typename T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  WgmmaRs<T, N, TRANS_B>::run(d, a, db, scale_d);
#else
  __trap();
#endif
}

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
