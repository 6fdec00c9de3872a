#pragma once
// One rank's device state in the cuda backend and the launch of one step of a pass on its two streams:
//   comm:    [wait for step t-1 done] e0  NCCL group (K/V pieces; backward: dK/dV accumulators)  e1
//   compute: e2  [clear new accumulators; first backward step: dQ = 0, D = rowsum(dO * O)]  kernel  e3
//            [wait for e1]  [add received accumulators into the rank's own]  e4 (step done)
// so step t+1's transfers, which may overwrite slots step t read and send what step t added, start after e4.
// Head-parallel plans add all-to-alls on the comm stream alone (issue_a2a); with head groups
// (Plan::head_groups) each group has its own buffers and events, and group g+1's all-to-all in runs beside
// group g's kernels.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/backend.hpp"
#include "executor/cuda_heads.hpp"
#include "executor/cuda_pass.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

#define TASP_NCCL(call)                                                                                      \
  do {                                                                                                       \
    ncclResult_t r_ = (call);                                                                                \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                                           \
      throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(r_) + " in " #call);        \
  } while (0)

namespace tasp::executor::cuda {

constexpr int kStepEvents = 5;

// What one head group keeps on a GPU (one group unless the plan cuts the heads into several).
struct HeadGroupDevice {
  RankBuffers buf;
  std::vector<cudaEvent_t> ev_fwd, ev_bwd;  // kStepEvents per step
  std::vector<cudaEvent_t> ev_a2a;          // head-parallel: kStepEvents per all-to-all (fwd in, out, bwd in, out)
};

struct RankDevice {
  int dev = 0;
  cudaStream_t comm = nullptr, compute = nullptr;
  ncclComm_t nccl = nullptr;   // the plan's ranks (head-parallel: the same slot of every group)
  ncclComm_t group = nullptr;  // head-parallel: the GPUs of this GPU's group (its all-to-alls)
  ncclComm_t world = nullptr;  // head-parallel: every GPU (what the two were split from)
  // CudaOptions::root_comms: a communicator and a stream per root rank (copies of `nccl`), and the events that fork a
  // step's collectives onto them from the comm stream and join them back.
  std::vector<ncclComm_t> roots;
  std::vector<cudaStream_t> root_streams;
  std::vector<cudaEvent_t> root_joins;
  cudaEvent_t root_fork = nullptr;
  cudaEvent_t rows_ready = nullptr;  // moved query rows packed (and the backward's row sums made) on the comm stream
  // Recorded on each stream that carries a step's NCCL calls just before them (one per root stream, or the comm
  // stream's): the step's kernel waits for them, so NCCL's CTAs are placed before the attention's (issue_step).
  std::vector<cudaEvent_t> started;
  std::vector<HeadGroupDevice> groups;
  SeqBuffers seq;  // head-parallel: the layer's side
  cudaEvent_t origin = nullptr, done = nullptr;
  kernels::Workspace ws;
  std::vector<void*> allocs;
  double bytes = 0;       // of its own buffers
  double used_before = 0;  // device memory in use before the run's setup
  template <class T>
  T* alloc(size_t elems) {
    void* p = nullptr;
    TASP_CUDA(cudaMalloc(&p, std::max<size_t>(16, elems * sizeof(T))));
    allocs.push_back(p);
    bytes += double(std::max<size_t>(16, elems * sizeof(T)));
    return static_cast<T*>(p);
  }
  void release();
  void abort_comms();  // every communicator aborted (a failed run: peers may wait in NCCL)
  // A stream (at the highest priority, as `comm`) and a join event per communicator of `roots`, and the fork event.
  void open_root_streams();
};

// The backward's dQ scratch of rank r under w's mask (its items split at documents): tiles, and floats for a count.
size_t dq_scratch_tiles(const planner::Workload& w, const Geometry& g, int r);
size_t dq_scratch_floats(const planner::Workload& w, size_t tiles);

// One head group's buffers on GPU `x`, which runs plan rank `r` on workload `w` (one GPU's: its slot's heads), sized
// by the rank's slot plans (`kv_slots`, `grad_slots`); the backward's only with `backward`. `caller_io`: Q, dO and dQ
// live in a framework's tensors (a token-parallel rank runner: the work lists read Q and dO there, dQ leaves in 16
// bits), so none of the three is allocated (q, dout, dq null).
RankBuffers alloc_rank_buffers(RankDevice& x, const planner::Plan& p, const planner::Workload& w, const Geometry& g, int r,
                               int kv_slots, int grad_slots, bool backward, bool collectives, bool caller_io = false);

// Host-side bf16 or fp16 conversion (round to nearest even), so the backend needs no device code of its own.
uint16_t to_half_bits(double x, kernels::DType t);
double from_half_bits(uint16_t h, kernels::DType t);
// The tokens `ranges` of the global [B][S][width] tensor `src`, one after the other, as 16-bit [B][stride][width].
std::vector<uint16_t> pack_rows(const std::vector<double>& src, const std::vector<planner::Range>& ranges, int B, long S,
                                long width, long stride, kernels::DType t);

// Whether a step's kernel waits for its NCCL calls to be next on their streams (issue_step; on unless TASP_TRANSFERS_FIRST=0).
bool transfers_first();

// Whether a reduce-scatter one a root on `ranks` ranks goes as a broadcast from the other rank (2 ranks; on unless
// TASP_REDUCE_AS_BCAST=0): issue_step, and what `tasp calibrate --measure` times for it (nccl_bench.cpp).
bool reduce_as_broadcast(int ranks);

// Enqueues step t of a pass on GPU `gpu`'s streams (it runs plan rank r), on buffers `b`, with the step's events
// `e` (kStepEvents), after `prev_done`. With transfers_first() the step's kernel waits until the step's NCCL calls are
// next on their streams (NCCL's CTAs placed first: a kernel that fills every SM, as the forward's persistent grid
// does, had held a step's collectives back until it ended; shm B=1 S=8192 H=32 causal 0.937x, 2026-11-27), and a
// forward's gathers follow one another without waiting for the kernels between them.
void issue_step(RankDevice& x, const RankBuffers& b, const PassWork& pw, const Geometry& g, const planner::Workload& w,
                int gpu, int r, int t, cudaEvent_t* e, cudaEvent_t prev_done);
// A head-parallel all-to-all with its copy lists on the device.
struct A2aLaunch {
  struct Copies {
    const kernels::BlockCopy* list = nullptr;
    int n = 0;
    int64_t vectors = 0;
  };
  Copies pack;
  std::vector<Copies> unpack;  // waves
  size_t count = 0;
  double bytes = 0;
};
A2aLaunch upload_a2a(RankDevice& x, const A2a& a);
// The same exchange's copies bound to other addresses, into the device lists `l` was made with (the same lengths:
// std::logic_error otherwise), on `stream` after whatever read them last (a rank runner's calls).
void refill_a2a(RankDevice& x, A2aLaunch& l, const A2a& a, cudaStream_t stream);
// Enqueues an all-to-all on the comm stream alone, after `prev_done`: pack, one ncclAlltoAll on the group's
// communicator (or grouped send/recv with `sendrecv`), unpack. Events: e[0] its start, e[1] its end, e[2..4] at its
// end too (a transfer-only step in the timeline). Whoever reads what arrived waits for e[1].
void issue_a2a(RankDevice& x, const A2aLaunch& a, const planner::Workload& w, int u, bool sendrecv, cudaEvent_t* e,
               cudaEvent_t prev_done);

// A step's timing from its events, relative to `origin`; with `post` (the step adds received accumulators)
// the closing interval from the later of the transfers' and the kernel's end to e4.
planner::StepTiming step_timing(cudaEvent_t origin, const cudaEvent_t* e, double bytes, double flops, bool post);

// The whole problem on GPU 0 with the same kernels: out and lse, and with the backward dq, dk, dv.
bool single_device_reference(const Problem& pr, planner::Passes passes, Result& ref);
// The same kernels on the whole (random) problem on GPU 0, timed: median microseconds.
double single_device_us(const planner::Workload& w, planner::Passes passes, int warmup, int iters, bool deterministic = false);
// Device memory in use on the current device.
double device_used_bytes();

}  // namespace tasp::executor::cuda
