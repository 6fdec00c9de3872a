#pragma once
// NCCL step microbenchmarks: what `tasp calibrate --measure` fits a profile to and `tasp run --measure-fabric` refits
// one with, from one process driving the local GPUs, or from the ranks of a group (a process each) together.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "executor/rank_runner.hpp"

namespace tasp::executor {

struct CommMeasurement {
  std::string kind;  // ring | multi | pairs | allgather[-roots] | reducescatter[-roots] (simulator/microbench.hpp)
  int ranks = 0;
  double bytes = 0;  // per rank
  double us = 0;     // median over rounds of the slowest rank's mean
  double us_min = 0, us_max = 0;  // the fastest and the slowest round's
};

int local_gpu_count();  // 0 without CUDA

// The step sizes a fabric is measured at (per rank): 256 KiB to 256 MiB, 4x apart.
std::vector<double> fabric_step_sizes();

// kind,ranks,bytes,ms,ms_min,ms_max: a fit reads ms (the rounds' median); the range is the drift between rounds.
void write_steps_csv(std::ostream& o, const std::vector<CommMeasurement>& m);

// One process, a thread per GPU 0..ranks-1; each (kind, size) timed `iters` times after `warmup`, in up to 5 rounds
// over all of them (one untimed repetition before a point in later rounds); `us` is the rounds' median.
// Throws where this build has no NCCL.
// `progress(done, total)` is called after each (kind, size) when given. `per_root`: the gather as `tasp run` moves it
// with CudaOptions::root_comms, one broadcast a root on a communicator of its own (kind allgather-roots), instead of
// one ncclAllGather (kind allgather).
std::vector<CommMeasurement> measure_nccl_steps(int ranks, const std::vector<double>& sizes, int warmup, int iters,
                                                bool verbose, const std::function<void(int, int)>& progress = {},
                                                bool per_root = false);

// The same steps timed by the ranks of `g` together, one process each (a training job's: the C ABI's tasp_group), on
// the group's communicator and stream and, with `per_root`, its communicators one a root; each rank calls it with the
// same arguments, and each gets the same figures (every round's slowest rank), so that profiles fitted to them agree
// and so do the plans made from them. A point not done `timeout_s` after it started aborts the group's communicator
// (a peer missing or stalled) and throws. Holds 4x the largest size of device memory while it runs.
std::vector<CommMeasurement> measure_group_steps(RankGroup& g, const std::vector<double>& sizes, int warmup, int iters,
                                                 bool per_root, int timeout_s,
                                                 const std::function<void(int, int)>& progress = {});

// The same under a launcher (mpirun, srun: one process a rank, launch_env.hpp): every process calls it, the group made
// for it from an NCCL id rank 0 hands out through MPI; progress on rank 0. Throws where the build has no MPI.
std::vector<CommMeasurement> measure_launched_steps(const std::vector<double>& sizes, int warmup, int iters, bool per_root,
                                                    int timeout_s, const std::function<void(int, int)>& progress = {});

}  // namespace tasp::executor
