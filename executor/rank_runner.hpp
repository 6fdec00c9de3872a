#pragma once
// One rank of a plan inside a training process (the C ABI's tasp_rank, bindings/tasp.h): the layer's tensors
// stay where the framework put them (device addresses on this rank's GPU, the framework's stream), the runner
// stages K/V into the plan's slots, runs the pass's steps (the cuda backend's, cuda_rank.hpp) on its own two
// streams after the caller's stream, and leaves the results in the caller's tensors, with the caller's stream
// waiting for them: no host synchronisation. Its NCCL communicator is made from an id the caller distributed.
// Plain C++ interface (no CUDA types): the C ABI builds against it with or without CUDA.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "planner/plan.hpp"
#include "planner/workload.hpp"

namespace tasp::executor {

// This rank's shard as the caller holds it, tokens in the plan's order for the rank (its query ranges one after
// the other: what tasp_plan_json's gpu_tokens lists). q, out, dout, dq: [B][rows][H][D]; k, v, dk, dv:
// [B][rows][Hkv][D], all in the workload's 16-bit type; lse: fp32 [B][H][rows] (flash-attn's layout). `saved`: a
// caller-held buffer of runner_saved_bytes() bytes where a plan that keeps the forward's K/V for the backward
// (allgather's gathered sequence, say) leaves them: the forward writes it, that layer's backward reads it, as autograd
// keeps a layer's saved tensors (NULL when the runner keeps none; a forward alone may pass NULL too).
struct ShardTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;  // written by the forward, read by the backward
  float* lse = nullptr;
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* saved = nullptr;
  float scale = 0;  // the scores' scale (0: 1/sqrt(D)); a backward's must be its forward's
};

constexpr int kNcclIdBytes = 128;  // sizeof(ncclUniqueId)

// One process's place in a group of ranks: its CUDA device, the group's NCCL communicator (made from an id one
// rank made with make_nccl_id and the caller handed to the others) and two streams (exchanges at the highest
// priority, kernels). Every runner of the group uses them, so a model's layers of different shapes share one
// communicator and run their steps in the order they were called.
struct RankGroup;
struct RankGroupDelete {
  void operator()(RankGroup* g) const;
};
using RankGroupPtr = std::unique_ptr<RankGroup, RankGroupDelete>;
RankGroupPtr open_rank_group(int ranks, int rank, int device, const unsigned char* nccl_id);
// A watchdog thread for the group: a call that has not ended `timeout_s` after it was enqueued (a peer missing or
// stalled, so NCCL waits for ever), or an asynchronous NCCL error, aborts the group's communicator: NCCL's kernels
// return, the streams drain, and every later call of the group's runners, and runner_wait, throws saying why. No
// host synchronisation: the callers only enqueue; the thread polls the calls' end events. 0 stops it.
void watch_rank_group(RankGroup& g, int timeout_s);
int rank_group_size(const RankGroup& g);  // its ranks
void make_nccl_id(unsigned char* nccl_id);

struct RankRunner;  // cuda backend state: its buffers, work lists and events, on its group's streams
struct RankRunnerDelete {
  void operator()(RankRunner* s) const;
};
using RankRunnerPtr = std::unique_ptr<RankRunner, RankRunnerDelete>;

// The group's rank of plan `p` for workload `w` (the plan's ranks are the group's). Token-parallel plans (ring,
// zigzag, allgather, hamilton, two-level; allgather's with queries moved too); a plan that keeps the forward's K/V for
// the backward keeps them in each call's `saved` (so every layer's backward finds its own), and the Q of query rows
// moved to this rank beside them. The group must outlive the runner. Throws
// planner::InputError (what cannot run) or std::runtime_error (CUDA, NCCL).
// `deterministic`: the backward's dQ bit-identical from run to run (kernels::AttentionBackwardBatch::deterministic).
// `collectives`: an allgather plan's gathers and reduce-scatters as NCCL collectives, as `tasp run` runs them where the
// profile times them faster (NCCL's over sockets: 1.45x its send/recv at 256 MiB); ignored for other plans.
// `root_comms`: those collectives one a root, each on a communicator of the group's own and a stream of the runner's
// (cuda::CudaOptions::root_comms), as `tasp run` moves them where the profile measured them so.
RankRunnerPtr open_rank_runner(const planner::Plan& p, const planner::Workload& w, RankGroup& group, int timeout_s,
                               bool deterministic = false, bool collectives = false, bool root_comms = false);
// What open_rank_runner checks of the plan before touching a device (with or without CUDA): planner::InputError when
// the plan is head-parallel, has another number of ranks than the group's, or disagrees with the workload's mask.
void check_rank_plan(const planner::Plan& p, const planner::Workload& w, int group_ranks);
// What open_rank_group checks first: InputError unless 0 <= rank < ranks.
void check_rank_group(int ranks, int rank);
// Bytes of ShardTensors::saved each forward fills for its backward: 0 when the plan keeps no K/V.
size_t runner_saved_bytes(const RankRunner& s);
// Device memory the runner allocated for itself (its buffers and launch workspace; not NCCL's, not the caller's
// tensors): what tasp holds outside a framework's allocator.
size_t runner_device_bytes(const RankRunner& s);
// The forward: reads q, k, v; writes out and lse (and saved, where given). Enqueued after the work already on `stream` (a cudaStream_t);
// the stream's later work waits for it.
void runner_forward(RankRunner& s, const ShardTensors& t, void* stream);
// The backward: reads q, k, v, out, lse, dout (and saved: InputError when the runner keeps K/V and it is NULL);
// writes dq, dk, dv.
void runner_backward(RankRunner& s, const ShardTensors& t, void* stream);
// Packed documents that change from call to call (a training step's batch): the runner re-masked for documents of
// lengths `docs` (summing to the workload's S; empty or one: a single sequence) without planning again: the same
// schedule, buffers and token order, the work lists made again for the new mask (the dQ scratch grown, after the
// runner's work so far, where the documents split more tiles than any before). Calls enqueued before keep the lists
// they were enqueued with. Needs a plan whose schedule and token order do not follow documents: InputError with
// remask_refusal's reason otherwise. Cheap when the documents are the current ones.
void runner_documents(RankRunner& s, const std::vector<long>& docs);
// Why plan `p` (made for workload `w`) cannot be re-masked for documents `docs`, or "" when it can: a head-parallel
// plan, one pruned for its mask (its steps skip what its own documents or window do not see), a layout that follows
// documents (zigzag-docs), lengths that are not positive or do not sum to S. The same with or without CUDA.
std::string remask_refusal(const planner::Plan& p, const planner::Workload& w, const std::vector<long>& docs);
// Document lengths from flash-attn's offsets [0, ..., S] (`count` of them; 0: none): InputError naming cu_seqlens
// unless they start at 0 and rise.
std::vector<long> document_lengths(const long long* cu_seqlens, size_t count);
// Waits (on the host) until the runner's work so far has finished, at most its timeout; throws with NCCL's
// message when a peer failed, and names the deadline when one stalled.
void runner_wait(RankRunner& s);

}  // namespace tasp::executor
