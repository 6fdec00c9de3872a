#pragma once
// What the cuda backend keeps on one rank's GPU for a plan and workload (its buffers as cuda_backend.cpp
// allocates them), so that a run can be refused before it allocates and the simulator can predict peak memory.
// NCCL's own buffers and the CUDA context are not counted. Pure.
#include "planner/plan.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

struct RankMemory {
  double queries = 0;   // Q, its fp32 output and LSE (and dO, D, dQ and the dQ scratch with the backward)
  double kv = 0;        // K/V slots
  double grads = 0;     // dK/dV accumulator slots (backward; fp32, or 16-bit where a head-parallel GPU writes each once)
  // The backward's exchange buffers: accumulators travelling in bf16 (staged out and in), and with collectives every
  // owner's accumulators for the reduce-scatter and this rank's share of its sum.
  double exchange = 0;
  double a2a = 0;       // head-parallel: the layer's side of the all-to-alls and their send/receive buffers
  int kv_slots = 0, grad_slots = 0;
  double total() const { return queries + kv + grads + exchange + a2a; }
};

// `w` is the whole workload (head-parallel plans: each GPU's share is worked out here).
// Slot counts from the plan's slot plan when it is small enough to replay, from the schedule's rule otherwise.
// `collectives`: allgather's steps run as NCCL collectives (slots by owner, the reduce-scatter's buffers), as the cuda
// backend allocates them (executor/cuda_rank.cpp, alloc_rank_buffers). Without the exchange buffers the prediction
// `tasp run` prints beside the measured memory read 0.63 GiB against 0.88 (2x H200, B=1 S=8192 H=32 causal, shm,
// 2026-11-27).
RankMemory rank_memory(const Plan& p, const Workload& w, Passes passes, int rank, bool collectives = false);
// The largest over ranks 0, 1, n/2 and n-1 (tasp's schemes treat ranks alike; a hand-made plan may not).
RankMemory peak_rank_memory(const Plan& p, const Workload& w, Passes passes, bool collectives = false);

}  // namespace tasp::planner
