#pragma once
// The executor's one abstract interface: a backend runs a verified plan on the whole problem's inputs
// and returns the whole outputs plus a timeline. Two implementations: cpu (threads, exact math) and cuda.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "planner/plan.hpp"
#include "planner/timeline.hpp"
#include "planner/workload.hpp"

namespace tasp::executor {

struct Problem {
  planner::Workload w;
  // [B][S][H|Hkv][D], double: each backend converts to its own precision. Empty: the backend makes
  // random inputs where they live (timing runs of sizes the host should not hold twice; no check).
  std::vector<double> q, k, v;
  std::vector<double> dout;  // the backward's incoming gradient dO, [B][S][H][D] (same rule when empty)
};

struct Result {
  std::vector<double> out, lse;  // [B][S][H][D], [B][S][H] (also when only the backward was asked: its input)
  std::vector<double> dq, dk, dv;  // backward: [B][S][H][D], [B][S][Hkv][D], [B][S][Hkv][D]
  planner::Timeline timeline;
  std::vector<double> iteration_totals_us;  // backends that repeat the run: every timed iteration, sorted
  double device_bytes = 0;       // GPU backends: the busiest local rank's own buffers
  double device_used_bytes = 0;  // GPU backends: the busiest local GPU's memory in use after the run, less before it
  bool reporter = true;  // false on the processes of a multi-process run that are not rank 0 (nothing to report)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The passes asked for; the backward runs after the forward (whose out and LSE it takes as FlashAttention
  // does), and with passes {bwd} only the backward's steps are timed. The plan must have a backward part then.
  virtual Result run(const planner::Plan& plan, const Problem& problem, planner::Passes passes) = 0;
  // The whole problem on one device, for --check at sizes the fp64 CPU reference cannot reach in time (out
  // and lse, and dq/dk/dv when the passes include the backward); false where the backend has none (the CPU
  // one: its check is the fp64 reference itself).
  virtual bool single_device_reference(const Problem&, planner::Passes, Result& /*ref*/) { return false; }
  // Whether run() can make its own random inputs (Problem with empty q/k/v) for unchecked timing runs.
  virtual bool makes_own_inputs() const { return false; }
  // The whole problem's kernels on one device, median microseconds of `iters` after `warmup`; 0 where the
  // backend has no such measure (speedup and parallel efficiency are then not reported).
  virtual double single_device_us(const planner::Workload&, planner::Passes, int /*warmup*/, int /*iters*/) { return 0; }
};

// precision: "fp64" or "fp32".
std::unique_ptr<Backend> make_cpu_backend(const std::string& precision);

struct CudaOptions {
  int warmup = 5, iters = 20;  // the timeline reported is the iteration with the median total
  int timeout_s = 120;         // a run that does not finish in time ends with an error, not a hang
  std::function<void(int done, int total)> progress;  // after each iteration (warm-up ones included)
  // Head-parallel all-to-alls: "alltoall" (ncclAlltoAll, NCCL >= 2.28) or "sendrecv" (grouped send/recv).
  std::string a2a = "alltoall";
  // Steps that gather every rank's pieces or reduce-scatter accumulators as NCCL collectives (cuda_pass.hpp,
  // Exchange) instead of grouped send/recv: faster over sockets, slower on NVLink between 2 GPUs.
  bool collectives = false;
  // With collectives: a rank's pieces leave as one ncclBroadcast and each owner's accumulators return as one ncclReduce,
  // each root on a communicator and stream of its own, instead of one all-gather or reduce-scatter on the plan's
  // communicator. Over loopback sockets on 2x H200 two such broadcasts moved 5.2 GB/s a direction where one all-gather
  // of the same bytes moved 3.5 (tools/gpu/lib/nccl_directions.py, 2026-11-27). Token-parallel plans only.
  bool root_comms = false;
  bool deterministic = false;  // the backward's dQ bit-identical run to run (kernels::AttentionBackwardBatch)
};
// bf16 inputs, fp32 out/LSE; one process, a thread per local GPU, rank r on GPU r. Throws where CUDA
// or NCCL is missing at build time (has_cuda_backend() says which).
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& o);
bool has_cuda_backend();

}  // namespace tasp::executor
