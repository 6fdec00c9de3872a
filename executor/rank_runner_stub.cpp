// Builds without CUDA or NCCL: a rank runner explains why there is none.
#include <stdexcept>

#include "executor/rank_runner.hpp"

namespace tasp::executor {

namespace {
[[noreturn]] void missing() {
  throw std::runtime_error("this build of tasp has no CUDA/NCCL (nvcc or nccl.h was not found when it was configured)");
}
}  // namespace

struct RankGroup {};
struct RankRunner {};
void RankGroupDelete::operator()(RankGroup* g) const { delete g; }
void RankRunnerDelete::operator()(RankRunner* s) const { delete s; }
RankGroupPtr open_rank_group(int ranks, int rank, int, const unsigned char*) {
  check_rank_group(ranks, rank);
  missing();
}
RankRunnerPtr open_rank_runner(const planner::Plan&, const planner::Workload&, RankGroup&, int, bool, bool, bool) { missing(); }
void make_nccl_id(unsigned char*) { missing(); }
void watch_rank_group(RankGroup&, int) { missing(); }
int rank_group_size(const RankGroup&) { missing(); }
void runner_forward(RankRunner&, const ShardTensors&, void*) { missing(); }
void runner_backward(RankRunner&, const ShardTensors&, void*) { missing(); }
void runner_wait(RankRunner&) { missing(); }
size_t runner_saved_bytes(const RankRunner&) { missing(); }
size_t runner_device_bytes(const RankRunner&) { missing(); }
void runner_documents(RankRunner&, const std::vector<long>&) { missing(); }

}  // namespace tasp::executor
