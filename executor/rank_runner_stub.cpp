// Builds without CUDA or NCCL: a rank runner explains why there is none.
#include <stdexcept>

#include "executor/rank_runner.hpp"

namespace tasp::executor {

namespace {
[[noreturn]] void missing() {
  throw std::runtime_error("this build of tasp has no CUDA/NCCL (nvcc or nccl.h was not found when it was configured)");
}
}  // namespace

struct RankRunner {};
void RankRunnerDelete::operator()(RankRunner* s) const { delete s; }
RankRunnerPtr open_rank_runner(const planner::Plan& p, const planner::Workload& w, int rank, int, const unsigned char*, int) {
  check_rank_plan(p, w, rank);
  missing();
}
void make_nccl_id(unsigned char*) { missing(); }
void runner_forward(RankRunner&, const ShardTensors&, void*) { missing(); }
void runner_backward(RankRunner&, const ShardTensors&, void*) { missing(); }
void runner_wait(RankRunner&) { missing(); }

}  // namespace tasp::executor
