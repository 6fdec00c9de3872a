// Builds without CUDA or NCCL: a rank session explains why there is none.
#include <stdexcept>

#include "executor/rank_session.hpp"

namespace tasp::executor {

namespace {
[[noreturn]] void missing() {
  throw std::runtime_error("this build of tasp has no CUDA/NCCL (nvcc or nccl.h was not found when it was configured)");
}
}  // namespace

struct RankSession {};
void RankSessionDelete::operator()(RankSession* s) const { delete s; }
RankSessionPtr open_rank_session(const planner::Plan&, const planner::Workload&, int, int, const unsigned char*, int) { missing(); }
void make_nccl_id(unsigned char*) { missing(); }
void session_forward(RankSession&, const ShardTensors&, void*) { missing(); }
void session_backward(RankSession&, const ShardTensors&, void*) { missing(); }
void session_wait(RankSession&) { missing(); }

}  // namespace tasp::executor
