#pragma once
// A fabric's NCCL steps measured on this host's GPUs, for `tasp calibrate --measure` and `tasp run --measure-fabric`:
// the measuring (every step kind, 256 KiB..256 MiB), the CSV the steps are kept in, and the samples a fit reads.
#include <vector>

#include "executor/nccl_bench.hpp"
#include "simulator/calibrate.hpp"

namespace tasp::cli {

// GPUs 0..ranks-1, one process; `per_root`: the gather as one broadcast a root (CudaOptions::root_comms) rather than
// one ncclAllGather. Progress on stderr; throws where there is no GPU or no NCCL.
std::vector<executor::CommMeasurement> measure_fabric(int ranks, int warmup, int iters, bool per_root, bool verbose);

void add_samples(const std::vector<executor::CommMeasurement>& m, simulator::Samples* s);

}  // namespace tasp::cli
