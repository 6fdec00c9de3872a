// Builds without CUDA or NCCL: the cuda backend explains why it is missing.
#include <stdexcept>

#include "executor/backend.hpp"

namespace tasp::executor {

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions&) {
  throw std::invalid_argument("--backend cuda: this build has no CUDA/NCCL (nvcc or nccl.h was not found at configure time)");
}
bool has_cuda_backend() { return false; }

}  // namespace tasp::executor
