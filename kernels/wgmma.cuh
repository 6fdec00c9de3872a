#pragma once
// wgmma m64nNk16 (N = 32, 64, 80, 96, 128, 192, 256) with fp32 accumulators (sm_90a), bf16 or fp16 inputs. A thread's N / 2
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
// One shape for one input type. H = N / 2 accumulators; DREGS and the trailing operands list them (PTX, asm);
// the remaining operand numbers (from H on) are spelled out per shape because the preprocessor cannot add.
#define TASP_WGMMA(N, H, T, TY, DREGS, SS_ARGS, SS_SC, RS_ARGS, RS_SC, ...)                                 \
  template <int TA, int TB>                                                                                 \
  struct WgmmaSs<T, N, TA, TB> {                                                                            \
    static __device__ __forceinline__ void run(float (&d)[H], uint64_t da, uint64_t db, int sc) {            \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SS_SC ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY \
                   "." TY " " DREGS ", " SS_ARGS ";\n}\n"                                                       \
                   : __VA_ARGS__                                                                             \
                   : "l"(da), "l"(db), "r"(sc), "n"(TA), "n"(TB));                                           \
    }                                                                                                        \
  };                                                                                                         \
  template <int TB>                                                                                          \
  struct WgmmaRs<T, N, TB> {                                                                                 \
    static __device__ __forceinline__ void run(float (&d)[H], const uint32_t (&a)[4], uint64_t db, int sc) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " RS_SC ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY \
                   "." TY " " DREGS ", " RS_ARGS ";\n}\n"                                                       \
                   : __VA_ARGS__                                                                             \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(sc), "n"(TB));                  \
    }                                                                                                        \
  };
#define TASP_WGMMA_N32(T, TY) \
  TASP_WGMMA(32, 16, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}", \
             "%16, %17, p, 1, 1, %19, %20", "%18", "{%16,%17,%18,%19}, %20, p, 1, 1, %22", "%21", \
             TASP_D8(0), TASP_D8(8))
#define TASP_WGMMA_N64(T, TY) \
  TASP_WGMMA(64, 32, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}", \
             "%32, %33, p, 1, 1, %35, %36", "%34", "{%32,%33,%34,%35}, %36, p, 1, 1, %38", "%37", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24))
#define TASP_WGMMA_N80(T, TY) \
  TASP_WGMMA(80, 40, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}", \
             "%40, %41, p, 1, 1, %43, %44", "%42", "{%40,%41,%42,%43}, %44, p, 1, 1, %46", "%45", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32))
#define TASP_WGMMA_N96(T, TY) \
  TASP_WGMMA(96, 48, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}", \
             "%48, %49, p, 1, 1, %51, %52", "%50", "{%48,%49,%50,%51}, %52, p, 1, 1, %54", "%53", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40))
#define TASP_WGMMA_N128(T, TY) \
  TASP_WGMMA(128, 64, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}", \
             "%64, %65, p, 1, 1, %67, %68", "%66", "{%64,%65,%66,%67}, %68, p, 1, 1, %70", "%69", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40), TASP_D8(48), TASP_D8(56))
#define TASP_WGMMA_N192(T, TY) \
  TASP_WGMMA(192, 96, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}", \
             "%96, %97, p, 1, 1, %99, %100", "%98", "{%96,%97,%98,%99}, %100, p, 1, 1, %102", "%101", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40), TASP_D8(48), TASP_D8(56), TASP_D8(64), TASP_D8(72), TASP_D8(80), TASP_D8(88))
#define TASP_WGMMA_N256(T, TY) \
  TASP_WGMMA(256, 128, T, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}", \
             "%128, %129, p, 1, 1, %131, %132", "%130", "{%128,%129,%130,%131}, %132, p, 1, 1, %134", "%133", \
             TASP_D8(0), TASP_D8(8), TASP_D8(16), TASP_D8(24), TASP_D8(32), TASP_D8(40), TASP_D8(48), TASP_D8(56), TASP_D8(64), TASP_D8(72), TASP_D8(80), TASP_D8(88), TASP_D8(96), TASP_D8(104), TASP_D8(112), TASP_D8(120))
TASP_WGMMA_N32(__nv_bfloat16, "bf16")
TASP_WGMMA_N32(__half, "f16")
TASP_WGMMA_N64(__nv_bfloat16, "bf16")
TASP_WGMMA_N64(__half, "f16")
TASP_WGMMA_N80(__nv_bfloat16, "bf16")
TASP_WGMMA_N80(__half, "f16")
TASP_WGMMA_N96(__nv_bfloat16, "bf16")
TASP_WGMMA_N96(__half, "f16")
TASP_WGMMA_N128(__nv_bfloat16, "bf16")
TASP_WGMMA_N128(__half, "f16")
TASP_WGMMA_N192(__nv_bfloat16, "bf16")
TASP_WGMMA_N192(__half, "f16")
TASP_WGMMA_N256(__nv_bfloat16, "bf16")
TASP_WGMMA_N256(__half, "f16")
#undef TASP_WGMMA_N32
#undef TASP_WGMMA_N64
#undef TASP_WGMMA_N80
#undef TASP_WGMMA_N96
#undef TASP_WGMMA_N128
#undef TASP_WGMMA_N192
#undef TASP_WGMMA_N256
#undef TASP_WGMMA
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

// Shared-memory matrix descriptor, 128-byte swizzle, as its two 32-bit words: the low one holds the start address in
// 16-byte units (bits 0-13) and the leading byte offset (16-29), the high one the stride byte offset and the
// swizzle mode. Built once per operand; at(bytes) is the descriptor that far on, one add to the low word (a CTA's
// shared addresses stay below 256 KiB, so it never carries into the leading offset). Building each wgmma's
// descriptors in full (mask, shift, or, on 64 bits) put 12-16% of the backward's warp samples on that line.
struct Sw128 {
  uint32_t lo, hi;
  __device__ __forceinline__ Sw128(uint32_t addr, uint32_t lbo, uint32_t sbo)
      : lo(((addr & 0x3FFFF) >> 4) | ((lbo >> 4) & 0x3FFF) << 16), hi(((sbo >> 4) & 0x3FFF) | (1u << 30)) {}
  __device__ __forceinline__ uint64_t at(uint32_t bytes) const { return uint64_t(hi) << 32 | (lo + (bytes >> 4)); }
};

}  // namespace tasp::kernels::sm90
