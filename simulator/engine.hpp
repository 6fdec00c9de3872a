#pragma once
// Executes a plan on the models: per rank and step, the step's transfers as flows (fluid max-min),
// its compute on a second stream, the next step once both are done (the executor's double-buffered
// receive buffers allow no more). Pure: no I/O.
#include <functional>

#include "planner/plan.hpp"
#include "planner/timeline.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "simulator/network.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

struct Bounds {
  double comm_us = 0;     // the busiest port or node cut moving the plan's bytes at full capacity
  double compute_us = 0;  // the busiest rank's FLOPs at the kernels' peak rate
  double us() const { return comm_us > compute_us ? comm_us : compute_us; }
};

// Where the time of the rank that finishes last goes; the terms add up to total_us. Kernel time is split into
// its fixed part (launch, the backward's row sums and dQ scratch and finish), its math at the boost clock, and what the sustained clock
// adds to that math; the executor's share is its pass starts and step gaps (Profile::executor).
// overlap_us is what the kernels lose to NCCL's kernels while transfers run beside them.
struct ModelTerms {
  double launch_us = 0, math_us = 0, clock_us = 0, overlap_us = 0, accumulate_us = 0, executor_us = 0, exposed_comm_us = 0;
  double sum() const { return launch_us + math_us + clock_us + overlap_us + accumulate_us + executor_us + exposed_comm_us; }
  void add(const ModelTerms& o) {
    launch_us += o.launch_us, math_us += o.math_us, clock_us += o.clock_us, overlap_us += o.overlap_us;
    accumulate_us += o.accumulate_us, executor_us += o.executor_us, exposed_comm_us += o.exposed_comm_us;
  }
};

struct SimResult {
  planner::Timeline timeline;  // per rank; above SimOptions::max_timeline_cells only the first ranks
  double total_us = 0, comm_us = 0, compute_us = 0, exposed_comm_us = 0;
  double fwd_us = 0, bwd_us = 0;  // each pass's share of total_us (the backward starts when the forward ends)
  // Each rank's end of the pass, from the pass's start (the general engine's; empty from the ring-flow one, whose
  // ranks step together): a rank's backward starts at its own forward's end.
  std::vector<double> rank_end_us;
  bool bwd_rate_estimated = false;  // the backward's kernel rates are the forward's scaled (no measured ones)
  double single_gpu_us = 0;      // the whole problem's kernels on one GPU (same passes), for speedup and efficiency
  double peak_memory_bytes = 0;  // the busiest rank's GPU buffers (planner::rank_memory; NCCL's not counted)
  double tokens_per_s = 0;       // B * S over the total
  double speedup() const { return total_us > 0 ? single_gpu_us / total_us : 0; }
  double parallel_efficiency(int ranks) const { return ranks > 0 ? speedup() / ranks : 0; }
  double max_rank_bytes = 0, max_rank_flops = 0;  // over the whole run
  Bounds bound;
  double efficiency() const { return total_us > 0 ? bound.us() / total_us : 0; }
  double ccr() const { return compute_us > 0 ? comm_us / compute_us : 0; }
  ModelTerms terms;
  bool symmetric_fast_path = false;  // steps solved once for the whole ring flow (see simulate())
  bool collectives = false;          // allgather's gather and reduce-scatter steps timed as NCCL collectives
  int network_solves = 0;
  int lockstep_steps = 0;  // steps too large to follow each rank's start: flows start with the last rank
};

// How allgather's gather and reduce-scatter steps run: grouped send/recv, NCCL collectives, or whichever the profile
// times faster (2x H100 over sockets: collectives 1.45x at 256 MiB; NVLink between 2 GPUs: send/recv 1.1-1.2x).
enum class Collectives { Off, On, Auto };
// Auto takes the collectives only where they are predicted at least this much faster: the model's median error on
// 2-GPU runs is 2-5% (docs/measurements/model.md), send/recv is the transport every machine's runs were measured
// with; on 4 and 8 GPUs of an H200 box the model puts the collectives 7-8% ahead at short shards (B=1 S=8192: taken)
// and under 5% at long ones (kept as send/recv), neither measured;
// over sockets they are 20-34% ahead in total (2x H200 socket profile, 2026-11-26, the exposed set).
inline constexpr double kCollectivesMargin = 0.05;

struct SimOptions {
  size_t max_timeline_cells = 2'000'000;  // ranks x steps kept in the timeline
  std::function<void(int step, int steps)> progress;  // called now and then on long runs
  bool allow_fast_path = true;
  planner::Passes passes;  // the forward (default), the backward, or both one after the other
  Clock clock = Clock::Sustained;  // the kernels' clock: settled under the power limit, or boost
  // allgather's all-gather and reduce-scatter steps as NCCL collectives (tasp run --collectives), at the profile's
  // collective rate where it has one (CommProfile::collective_gbps); Auto: as collectives where the profile times them
  // faster than grouped send/recv (both simulated; SimResult::collectives says which), as tasp run does by default.
  Collectives collectives = Collectives::Off;
  // The plan runs inside a training framework (tasp.torch, the C ABI's tasp_rank_*): a token-parallel rank's copies
  // between the framework's tensors and its own layout (framework_io_us) are counted, as executor time.
  bool framework = false;
  // allgather's choice of pieces (choose_gather_pieces) tries candidates pruned for the causal mask beside the whole
  // ones where a medium is shared; false: whole ones only (the C ABI's "prune_plain": false).
  bool try_pruned = true;
  // ... and, on 2 ranks, with rank 0's late chunk's queries moved (planner/query_moves.hpp); false where they were
  // declined (the C ABI's move_queries: false).
  bool try_moved = true;
};

// Throws planner::InputError when the workload does not fit the plan, or the backward is asked of a plan
// without one.
SimResult simulate(const planner::Plan& plan, const planner::Topology& topo, const planner::Workload& w,
                   const Profile& prof, const SimOptions& opt = {});

// The whole problem on one GPU: one forward and/or one backward launch over all S queries and keys.
double single_gpu_us(const planner::Workload& w, const Profile& prof, planner::Passes passes);

}  // namespace tasp::simulator
