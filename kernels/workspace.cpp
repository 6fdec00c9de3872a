// The workspace's lifetime, where the backward's plan cache is a complete type.
#include <cuda_runtime.h>

#include "kernels/attention.hpp"
#include "kernels/bwd_plan_cache.hpp"

namespace tasp::kernels {

Workspace::Workspace() = default;

Workspace::~Workspace() {
  bwd_plans.reset();
  if (device) cudaFree(device);
}

}  // namespace tasp::kernels
