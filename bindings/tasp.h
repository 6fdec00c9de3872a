/* tasp's C ABI: plans chosen by the simulator, and the whole problem run through a plan on the CPU (the exact
 * backend, for tests of everything above it). Every function returns TASP_OK or an error code; tasp_last_error()
 * then says why, naming the argument or field. Nothing aborts, nothing is printed. Plain C, so that Python
 * (ctypes), another framework's FFI or a C++ trainer can call it without compiling against tasp. */
#ifndef TASP_H
#define TASP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TASP_API_VERSION 1

#if defined(TASP_C_BUILD) && defined(__GNUC__)
#define TASP_API __attribute__((visibility("default")))
#else
#define TASP_API
#endif

enum tasp_status {
  TASP_OK = 0,
  TASP_ERR_INPUT = 2,   /* bad input: the message names the argument or field (the CLI's exit status 2) */
  TASP_ERR_RUNTIME = 3  /* something failed while running (the message says what) */
};

typedef struct tasp_plan tasp_plan;

TASP_API int tasp_api_version(void);
/* The calling thread's last error message ("" after a success). */
TASP_API const char* tasp_last_error(void);

/* A plan for `topology` (a machine file or complete:N, cluster:UxM, ...), `scheme` (ring, zigzag, allgather,
 * hamilton, two-level, ulysses, usp, or auto: the fastest the simulator finds) and `workload`
 * ("B=..,S=..,H=..,Hkv=..,D=..[,causal][,window=L:R][,docs=L1+L2+..]"). `options_json`: NULL or a JSON object with
 * any of "profile" (a profile file for the simulator's choices), "ulysses", "inner", "head_groups",
 * "memory_budget_gib", "layout" (contiguous | zigzag | zigzag-docs), "pass" (fwd | fwd+bwd, default fwd+bwd). */
TASP_API int tasp_plan_create(const char* topology, const char* scheme, const char* workload, const char* options_json,
                     tasp_plan** out);
TASP_API void tasp_plan_destroy(tasp_plan* plan);
/* What the plan is, as JSON: scheme, ranks, gpus, ulysses, head_groups, layout, causal, accumulator, keeps_kv,
 * detail (what auto or the head groups' choice tried), predicted_us, workload, and "gpu_tokens": for each GPU the
 * token ranges [begin, end) of the sequence it holds, in the order it holds them (zigzag chunks, documents split).
 * The text lives as long as the plan. */
TASP_API const char* tasp_plan_json(const tasp_plan* plan);

/* The whole problem through the plan on the cpu backend (ranks as threads, `precision_bits` 64 or 32 arithmetic):
 * q [B][S][H][D], k and v [B][S][Hkv][D], row-major doubles; writes out [B][S][H][D] and lse [B][S][H]; with `dout`
 * (non-NULL) the backward too, writing dq, dk, dv (shaped as q, k, v). */
TASP_API int tasp_cpu_run(const tasp_plan* plan, int precision_bits, const double* q, const double* k, const double* v,
                 const double* dout, double* out, double* lse, double* dq, double* dk, double* dv);

#ifdef __cplusplus
}
#endif
#endif
