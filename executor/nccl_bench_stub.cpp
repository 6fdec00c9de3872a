#include <stdexcept>

#include "executor/nccl_bench.hpp"

namespace tasp::executor {

int local_gpu_count() { return 0; }

std::vector<CommMeasurement> measure_nccl_steps(int, const std::vector<double>&, int, int, bool,
                                                const std::function<void(int, int)>&, bool) {
  throw std::invalid_argument("calibrate --measure: this build has no CUDA/NCCL");
}

std::vector<CommMeasurement> measure_group_steps(RankGroup&, const std::vector<double>&, int, int, bool, int,
                                                 const std::function<void(int, int)>&) {
  throw std::runtime_error("measuring the fabric: this build has no CUDA/NCCL");
}

std::vector<CommMeasurement> measure_launched_steps(const std::vector<double>&, int, int, bool, int,
                                                    const std::function<void(int, int)>&) {
  throw std::runtime_error("measuring the fabric: this build has no CUDA/NCCL");
}

}  // namespace tasp::executor
