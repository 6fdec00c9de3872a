/* tasp's C ABI: plans chosen by the simulator; the whole problem run through a plan on the CPU (the exact
 * backend, for tests of everything above it); and one rank of a plan inside a training process, on the caller's
 * GPU tensors and CUDA stream (CUDA builds). Every function returns TASP_OK or an error code; tasp_last_error()
 * then says why, naming the argument or field. Nothing aborts, nothing is printed. Plain C, so that Python
 * (ctypes), another framework's FFI or a C++ trainer can call it without compiling against tasp. */
#ifndef TASP_H
#define TASP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TASP_API_VERSION 5

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
typedef struct tasp_rank tasp_rank;
typedef struct tasp_group tasp_group;

TASP_API int tasp_api_version(void);
/* The calling thread's last error message ("" after a success). */
TASP_API const char* tasp_last_error(void);

/* A plan for `topology` (a machine file or complete:N, cluster:UxM, ...), `scheme` (ring, zigzag, allgather,
 * hamilton, two-level, ulysses, usp, or auto: the fastest the simulator finds) and `workload`
 * ("B=..,S=..,H=..,Hkv=..,D=..[,causal][,window=L:R][,docs=L1+L2+..]"). `options_json`: NULL or a JSON object with
 * any of "profile" (a profile file for the simulator's choices), "schemes" (the ones auto chooses from: "all" or
 * a comma list), "prune_plain" (true: prune for a plain causal mask too, PlanOptions::prune_plain; allgather then cuts
 * its zigzag pieces by chunk, an even count, so that a rank's late chunk stays home; false: never; absent: where
 * the simulator finds allgather's pruned pieces faster), "move_queries" (true: on 2 ranks under a plain causal mask,
 * rank 0's late chunk's queries computed at rank 1, PlanOptions::move_queries; false: never; absent: where the profile's
 * collectives go one a root and the simulator finds it faster), "accumulator"
 * (fp32 | bf16 | auto: the backward's dK/dV in transit), "ulysses", "inner", "head_groups", "gather_pieces"
 * (allgather: each rank's shard gathered and reduce-scattered in this many pieces beside the compute; 0, the default:
 * the count from 1 to 4 the simulator finds fastest), "gather_steps" (a list: how many of those pieces each forward
 * step gathers, e.g. [2, 1, 1]; by default as the simulator finds fastest), "head_groups" likewise 0 by default (the
 * fastest simulated),
 * "memory_budget_gib", "layout" (contiguous | zigzag | zigzag-docs), "pass" (fwd | fwd+bwd, default fwd+bwd),
 * "deterministic" (true: its ranks' backward gives dQ bit-identical from run to run, at some speed; dK, dV always),
 * "framework" (true: the prediction, and auto's choice, count the copies a rank makes between a framework's tensors
 * and its own layout, as tasp_rank_* runs it), "collectives" (its ranks run allgather's gathers and reduce-scatters as
 * NCCL collectives: true, false (grouped send/recv), or "auto" (default): where the profile times them faster),
 * "root_comms" (those collectives one a root, each on a NCCL communicator of its own: true or false; default: as the
 * profile measured its collectives, its collectives_per_root). */
TASP_API int tasp_plan_create(const char* topology, const char* scheme, const char* workload, const char* options_json,
                     tasp_plan** out);
TASP_API void tasp_plan_destroy(tasp_plan* plan);
/* What the plan is, as JSON: scheme, ranks, gpus, ulysses, head_groups, pieces_per_rank, gather_steps, pieces_by_chunk
 * (allgather pruned for the causal mask), pruned (for its mask), queries_moved (rank 0's late chunk's queries computed at
 * rank 1), layout, causal, accumulator, keeps_kv,
 * deterministic, collectives (whether its ranks run NCCL collectives), root_comms (whether one a root), detail (what auto or the head groups' choice tried), predicted_us, workload, and "gpu_tokens": for each GPU the
 * token ranges [begin, end) of the sequence it holds, in the order it holds them (zigzag chunks, documents split).
 * The text lives as long as the plan. */
TASP_API const char* tasp_plan_json(const tasp_plan* plan);

/* The named workloads (`tasp configs`: the nnscaler ring-attention benchmark's and Llama-3 layers) as a JSON array of
 * {name, group, workload, B, S, H, Hkv, D, causal, dtype, window_left, window_right, note}; static text. */
TASP_API const char* tasp_configs_json(void);

/* The whole problem through the plan on the cpu backend (ranks as threads, `precision_bits` 64 or 32 arithmetic):
 * q [B][S][H][D], k and v [B][S][Hkv][D], row-major doubles; writes out [B][S][H][D] and lse [B][S][H]; with `dout`
 * (non-NULL) the backward too, writing dq, dk, dv (shaped as q, k, v). */
TASP_API int tasp_cpu_run(const tasp_plan* plan, int precision_bits, const double* q, const double* k, const double* v,
                 const double* dout, double* out, double* lse, double* dq, double* dk, double* dv);

/* ---- One rank of a plan in a training process (one process per GPU; builds without CUDA return TASP_ERR_RUNTIME).
 * The plan's workload is the whole sequence; each rank holds its shard with tokens in the order gpu_tokens lists
 * for its GPU (tasp.Plan.shard lays a tensor out so). Tensors are device addresses on the rank's GPU, contiguous:
 * q, out, dout, dq [B][rows][H][D]; k, v, dk, dv [B][rows][Hkv][D], bf16 (fp16 with the workload's fp16);
 * lse fp32 [B][H][rows]. `stream` is a cudaStream_t (NULL: the legacy default stream); the work is enqueued after
 * what the stream holds, and the stream's later work waits for it: no call waits on the host but tasp_rank_wait.
 * The same rank object serves every layer of that shape: each call reads only its arguments. */

#define TASP_NCCL_ID_BYTES 128
/* A new NCCL unique id for a group of ranks: made on one rank, given to the others by the caller. */
TASP_API int tasp_nccl_id(unsigned char* id);
/* This process's place in a group of `ranks` ranks (one per GPU) on CUDA device `device`: the group's NCCL
 * communicator from `id`, and the two streams every plan's rank of the group runs on. Every rank calls it together
 * (it returns when all have joined). Its ranks hold it too: the handle and the ranks may be destroyed in any order,
 * and the communicator and streams go with the last of them. */
TASP_API int tasp_group_create(int ranks, int rank, int device, const unsigned char* id, tasp_group** out);
TASP_API void tasp_group_destroy(tasp_group* group);
/* A watchdog for the group (0 stops it): a call that has not ended `timeout_s` seconds after it was enqueued (a peer
 * missing or stalled), or an asynchronous NCCL error, aborts the group's communicator; every later call of its ranks,
 * and tasp_rank_wait, then returns TASP_ERR_RUNTIME saying which call and why. */
TASP_API int tasp_group_watch(tasp_group* group, int timeout_s);
/* The group's fabric measured now, and a profile fitted to it for the plans that follow: every rank of the group
 * calls it together. The NCCL steps tasp's schemes take (ring, all-peer, pairs, the gather and the reduce-scatter, one
 * root's broadcast; 256 KiB to 256 MiB, `iters` timed repetitions in up to 5 rounds) are timed on the group's own
 * communicators, and every rank gets each round's slowest rank's times, so every rank fits the same profile and plans
 * made with it agree. Why: a fabric shared with others moves between minutes (over loopback sockets a profile
 * measured minutes away read runs 10-26% off, steps measured by the run 20 s before it 2.6% median, 6.1% at most:
 * docs/measurements/model.md). `topology` is the plans' (as tasp_plan_create's). `options_json`: NULL or a JSON object
 * with any of "profile" (whose comm is refitted, its kernels kept; default the topology's built-in), "iters" (default
 * 5), "per_root" (the gather measured as one broadcast a root, as plans on the fitted profile then move it; default
 * true), "timeout_s" (a point's deadline, default 60: past it the group's communicator is aborted), "csv" (a file the
 * steps are written to, as tasp calibrate --fit reads them). Writes the fitted profile's YAML to `profile_out`, which
 * tasp_plan_create's "profile" then reads. `result_json` (NULL: not wanted): {"profile" (its name), "path", "steps",
 * "seconds", "now_over_profile": {"median", "min", "max"}: the steps of 16 MiB and more, measured over the base
 * profile's time}, living until the group's next call of this. About 2 s on NVLink, 20 s over loopback sockets; holds
 * 1 GiB of device memory (4x the largest step) while it runs. */
TASP_API int tasp_group_measure_fabric(tasp_group* group, const char* topology, const char* options_json,
                                       const char* profile_out, const char** result_json);
/* The group's rank of `plan` (a plan of the group's size, for the whole sequence). `timeout_s` (0: 60) bounds
 * tasp_rank_wait. Head-parallel plans (ulysses, usp) need S a multiple of twice the GPUs (equal token parts); their
 * forward keeps its head-layout state in `saved` and does not write `lse` (their backward reads `saved`). Every rank of
 * the group makes its ranks in the same order (a head-parallel plan's first rank splits the group's communicator). */
TASP_API int tasp_rank_create(const tasp_plan* plan, tasp_group* group, int timeout_s, tasp_rank** out);
TASP_API void tasp_rank_destroy(tasp_rank* rank);
/* Bytes of the `saved` buffer a forward fills for its backward: the K/V a plan keeps between the passes (the plan
 * JSON's keeps_kv; allgather's gathered sequence, say: the other ranks' part, the rank's own being read from the `k`
 * and `v` the backward is given again), which the caller holds per layer as it holds the layer's other saved tensors.
 * 0: the plan keeps none, and `saved` may be NULL. */
TASP_API int tasp_rank_saved_bytes(const tasp_rank* rank, size_t* bytes);
/* Device memory the rank allocated for itself (its buffers and launch workspace; not NCCL's, not the caller's
 * tensors), which a framework's allocator does not see. */
TASP_API int tasp_rank_device_bytes(const tasp_rank* rank, size_t* bytes);
/* The forward: reads q, k, v; writes out and lse, and `saved` (NULL: a forward with no backward to follow).
 * softmax_scale: the scores' scale (0: 1/sqrt(D)); the backward must be given its forward's. */
TASP_API int tasp_rank_forward(tasp_rank* rank, const void* q, const void* k, const void* v, void* out, float* lse,
                               void* saved, float softmax_scale, void* stream);
/* The backward of a forward with these q, k, v, out, lse and saved (the plan made with "pass": "fwd+bwd"): reads
 * dout too; writes dq, dk, dv. */
TASP_API int tasp_rank_backward(tasp_rank* rank, const void* q, const void* k, const void* v, const void* out,
                                const float* lse, const void* saved, const void* dout, void* dq, void* dk, void* dv,
                                float softmax_scale, void* stream);
/* Packed documents for the calls that follow, as flash-attn's varlen functions take them: `cu_seqlens`, `count`
 * offsets [0, ..., S] of the whole sequence (count 0: one sequence). The rank's work lists are made again for the new
 * mask over the same schedule and buffers, with no planning (nothing when the documents are the current ones);
 * calls enqueued before keep theirs. TASP_ERR_INPUT when the offsets are not 0 < ... < S, or the plan cannot take
 * other documents: pruned for its own mask, a layout that follows documents (zigzag-docs), head-parallel. */
TASP_API int tasp_rank_documents(tasp_rank* rank, const long long* cu_seqlens, size_t count);
/* Waits on the host for the rank's work so far, at most its timeout: TASP_ERR_RUNTIME with NCCL's message when a
 * peer failed, or naming the deadline when one stalled (the group's communicator is then aborted, and its ranks
 * refuse further calls). */
TASP_API int tasp_rank_wait(tasp_rank* rank);

#ifdef __cplusplus
}
#endif
#endif
