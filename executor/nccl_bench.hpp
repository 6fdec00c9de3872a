#pragma once
// NCCL step microbenchmarks on the local GPUs: what `tasp calibrate --measure` fits a profile to.
#include <functional>
#include <string>
#include <vector>

namespace tasp::executor {

struct CommMeasurement {
  std::string kind;  // ring | multi | pairs | allgather[-roots] | reducescatter[-roots] (simulator/microbench.hpp)
  int ranks = 0;
  double bytes = 0;  // per rank
  double us = 0;     // median over rounds of the slowest rank's mean
  double us_min = 0, us_max = 0;  // the fastest and the slowest round's
};

int local_gpu_count();  // 0 without CUDA

// One process, a thread per GPU 0..ranks-1; each (kind, size) timed `iters` times after `warmup`, in up to 5 rounds
// over all of them (one untimed repetition before a point in later rounds); `us` is the rounds' median.
// Throws where this build has no NCCL.
// `progress(done, total)` is called after each (kind, size) when given. `per_root`: the gather as `tasp run` moves it
// with CudaOptions::root_comms, one broadcast a root on a communicator of its own (kind allgather-roots), instead of
// one ncclAllGather (kind allgather).
std::vector<CommMeasurement> measure_nccl_steps(int ranks, const std::vector<double>& sizes, int warmup, int iters,
                                                bool verbose, const std::function<void(int, int)>& progress = {},
                                                bool per_root = false);

}  // namespace tasp::executor
