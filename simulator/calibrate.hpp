#pragma once
// Fitting a machine profile to measurements (least squares with Eigen). Pure; the CSV reader at the
// bottom is the one I/O edge.
#include <string>
#include <vector>

#include "planner/timeline.hpp"
#include "simulator/network.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

struct CommSample {
  std::string kind;  // ring | multi | pairs | allgather (see microbench.hpp)
  int ranks = 0;
  double bytes = 0;  // per rank
  double us = 0;
};
struct KernelSample {
  int B = 1, H = 1, D = 128;
  int Hkv = 0;     // key/value heads (0: H); fewer: grouped-query attention
  int source = 0;  // which measurement file (GQA rows are compared with MHA rows of the same file only)
  double lq = 0, lk = 0;
  bool causal = false;
  bool backward = false;  // the backward launch (row sums + kernel) rather than the forward
  double us = 0;
  double heat_ms = 0;  // the GPU was kept busy this long before the timing (> 0: a sustained-clock sample)
  bool mix = false;    // ... with the forward and backward taking turns
  bool hot() const { return heat_ms > 0; }
  int kv_heads() const { return Hkv > 0 ? Hkv : H; }
  bool grouped() const { return kv_heads() < H; }
};
struct Samples {
  std::vector<CommSample> comm;
  std::vector<KernelSample> kernel;
};

// A measured figure next to what the fitted profile predicts for it.
struct FitCheck {
  std::string what;
  double measured_us = 0, predicted_us = 0;
  double error() const { return (predicted_us - measured_us) / measured_us; }
};

// Fits latency, per-peer latency, per-flow and per-rank rate curves (per communicator size) and the
// kernel rate (peak per head dim and mask, launch, half length) from the cold samples; backward samples give
// the backward peaks (with the forward's launch and size curves); hot samples (heat_ms > 0) give the
// sustained fraction per head dim and pass; fields without samples keep `base`'s. All of these from MHA rows;
// a GQA row (Hkv < H) is set beside the MHA rows of the same shape, clock and file, and the medians of their
// ratios per head dim, pass and group give the rate's GQA curves.
// `net` (the machine's topology) replays every sample for the checks.
Profile fit_profile(const Samples& s, const Profile& base, const Network& net, std::vector<FitCheck>* checks);

// `base` with its comm refitted to steps measured now (`tasp run --measure-fabric`: a fabric whose rate moves between
// minutes, loopback sockets 1.1-1.3x within one call on 2x H200, 2026-11-27), and how far they are from `base`:
// measured over `base`'s time for the steps of 16 MiB and more (smaller ones are mostly latency), median and range.
// The profile is named "<base's name> refitted to the fabric now".
struct CommRefit {
  Profile profile;
  double median_ratio = 0, min_ratio = 0, max_ratio = 0;  // 0: no step of 16 MiB or more
};
CommRefit refit_comm(const std::vector<CommSample>& steps, const Profile& base, const Network& net);

// The executor's own costs around kernels and NCCL steps from its measured timelines: medians of the
// forward's first launch start, the backward's first launch start after the forward's end, and the gap
// between a step's end and the next step's first launch or transfer. Keeps `base`'s where no timeline shows it.
ExecutorProfile fit_executor(const std::vector<planner::Timeline>& measured, const ExecutorProfile& base);

// The HBM rate of the backward's dQ finish: the last backward step of measured timelines, which computes
// nothing else (3 x dQ's fp32 bytes, less two small launches). `cp`'s where none shows it.
double fit_elementwise_gbps(const std::vector<planner::Timeline>& measured, const ComputeProfile& cp);

// The share of the kernels' throughput NCCL takes while transfers run beside them, from measured timelines
// and the same runs simulated without that term: per step, measured over predicted kernel time against the
// fraction of the kernel that overlapped the rank's transfers of any step (least squares, an intercept per run: the
// kernel model's own error differs by shape). Keeps `base` when the runs show no such variation.
double fit_comm_compute_share(const std::vector<std::pair<planner::Timeline, planner::Timeline>>& measured_predicted,
                              double base);

// CSV with a header naming its columns: kind,ranks,bytes,ms for communication rows;
// kind=attention|attention_bwd,B,H,Lq,Lk,D,causal,ms[,heat_ms][,mix][,Hkv] for kernel rows ('S' may stand for Lq = Lk; Hkv
// defaults to H and must divide it). Column order is free,
// '#' starts a comment line. Throws planner::InputError naming file, line and column.
Samples read_samples_csv(const std::string& text, const std::string& name_for_errors);

}  // namespace tasp::simulator
