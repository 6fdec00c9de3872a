#pragma once
// A fabric's NCCL steps measured on its GPUs, for `tasp calibrate --measure` and `tasp run --measure-fabric`: the
// measuring (every step kind, 256 KiB..256 MiB) and the samples a fit reads.
#include <vector>

#include "executor/nccl_bench.hpp"
#include "simulator/calibrate.hpp"

namespace tasp::cli {

// GPUs 0..ranks-1 driven by this process, or under a launcher (mpirun, srun) one process a rank, every process calling
// it and getting the same figures (a multi-node job's fabric: the links between nodes too); `per_root`: the gather as
// one broadcast a root (CudaOptions::root_comms) rather than one ncclAllGather. Progress on stderr (rank 0); throws
// where there is no GPU or no NCCL, or the launch has another number of processes than `ranks`.
std::vector<executor::CommMeasurement> measure_fabric(int ranks, int warmup, int iters, bool per_root, bool verbose);

void add_samples(const std::vector<executor::CommMeasurement>& m, simulator::Samples* s);

}  // namespace tasp::cli
