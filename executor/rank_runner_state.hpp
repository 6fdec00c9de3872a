#pragma once
// The state behind rank_runner.hpp's handles (CUDA builds), shared by the token-parallel runner (rank_runner.cpp)
// and the head-parallel one (rank_runner_heads.cpp), and the call steps both take.
#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "executor/caller_kv.hpp"
#include "executor/cuda_heads.hpp"
#include "executor/cuda_pass.hpp"
#include "executor/cuda_rank.hpp"
#include "executor/rank_runner.hpp"

namespace tasp::executor {

using Clock = std::chrono::steady_clock;

struct RankGroup {
  int ranks = 0, rank = 0, dev = 0;
  cudaStream_t comm = nullptr, compute = nullptr;
  // What the watchdog thread shares with the callers' threads.
  std::mutex m;
  ncclComm_t nccl = nullptr;  // null once aborted
  // Head-parallel plans of u GPUs a group: u -> (the plan's ranks: the GPUs of one slot; the u GPUs of one group),
  // split from `nccl` once and kept (aborted with it).
  std::map<int, std::pair<ncclComm_t, ncclComm_t>> splits;
  // Copies of `nccl`, one per root rank, for runners that move collectives one a root (cuda::CudaOptions::root_comms):
  // split once, when the first such runner opens, and kept (aborted with it).
  std::vector<ncclComm_t> roots;
  std::string failure;        // why it was aborted
  struct Pending {
    cudaEvent_t ev;
    Clock::time_point at;
    std::string what;
  };
  std::deque<Pending> pending;     // the calls' ends not yet reached, oldest first (while a watchdog runs)
  // A call's host side under way, and since when: NCCL connects a communicator's peers at its first use of a kind (and
  // splits it) with the caller's thread blocked until the peer comes, before any event of the call could be watched.
  std::optional<Clock::time_point> enqueuing;
  std::string enqueuing_what;
  std::vector<cudaEvent_t> spare;  // their events, for reuse
  int watch_s = 0;
  bool stop = false;
  std::condition_variable wake;
  std::thread watchdog;
};

struct RankRunner {
  planner::Plan plan;
  planner::Workload w;
  int r = 0, timeout_s = 60;
  bool deterministic = false;  // every backward batch's dQ in launch order (kernels::AttentionBackwardBatch)
  cuda::Geometry g;
  RankGroup* group = nullptr;
  cuda::RankDevice x;  // the group's device, streams and communicator (borrowed); groups[g]: a head group's buffers
                       // and the steps' events; origin, done: a call's start and end
  cuda::PassWork fwd, bwd;
  cudaEvent_t staged = nullptr;
  std::vector<cuda::ShardCopy> copies;  // between the caller's K/V (dK/dV) rows and the own pieces' slots
  size_t nq = 0, nl = 0;
  size_t saved_bytes = 0;  // what a forward leaves for its backward in the caller's `saved` (0: nothing)
  // Where in `saved` the Q of query rows moved here (Plan::query_moves' `at`) lies, after the K/V: the backward reads
  // them as it reads the kept K/V (0: none moved here).
  size_t moved_q_at = 0;
  size_t kv_bytes = 0;     // the runner's own K/V slots
  // Where the work lists' K/V pieces point now (own slots or a call's `saved`); null: no lists yet (the first call
  // makes them on its slots).
  const void* kv_at = nullptr;
  bool own_kv = true;  // groups[0].buf.kv holds kv_bytes (a keeping runner allocates them at its first call without `saved`)
  size_t dq_tiles = 0;          // tiles the dQ scratch holds (runner_documents grows it)
  // Where the work lists' own K/V pieces lie in the caller's tensors (caller_kv.hpp), pointed there by every call; none:
  // a piece is not one run of the shard, and the own K/V are staged into their slots as before.
  std::optional<std::vector<cuda::OwnRef>> own_refs;
  // A keeping plan whose own pieces are read in place: `saved` holds the other ranks' pieces alone (the slot plan's own
  // slots 0..P-1 come first; the lists' base lies that far before it), and a call that must stage its own K/V (tensors
  // off the 16-byte grid) stages them into `own_stage` (P slots, allocated then).
  bool own_outside_saved = false;
  void* own_stage = nullptr;
  // TASP_OWN_KV_STAGED=1 (every rank alike; A/B runs): own K/V staged into their slots and sent from there, as before
  // caller_kv.hpp.
  bool stage_own = false;
  // allgather's gathers and reduce-scatters as NCCL collectives (open_rank_runner): K/V slots by owner (the own ones at
  // r * P, staged there: an all-gather fills the slots in place), reduce-scatters through rs_send / rs_recv.
  bool collectives = false;
  // Head-parallel plans (Plan::ulysses = u > 1; rank_runner_heads.cpp): this GPU is `gpu` = r * u + slot.
  int u = 1, slot = 0, gpu = 0;
  planner::Workload wg, sw;  // a head group's workload, and one slot's share of it
  struct SavedGroup {        // where a head group's forward state lies in `saved` (bytes from its start)
    size_t q = 0, kv = 0, out = 0, lse = 0, bytes = 0;
  } saved_at;
  std::vector<std::array<cuda::A2aLaunch, 4>> a2a;  // per head group: fwd in, fwd out, bwd in, bwd out (device lists)
};

// The group's communicator, or why there is none any more (std::runtime_error).
ncclComm_t comm_of(RankGroup& g);
// The group's communicators one a root (RankGroup::roots), split from its own when first asked for: every rank opens
// the same runners in the same order, so the splits pair up. Split outside the group's lock, which the watchdog takes
// to abort the group should a peer never come.
std::vector<ncclComm_t> roots_of(RankGroup& g);
// A call's host side, from its first NCCL call to its last enqueue, watched by the group's watchdog (RankGroup::enqueuing):
// past the watchdog's timeout the group is aborted, and a call that then fails says why the group was aborted instead of
// NCCL's "internal error" (`run` runs the call).
void watched_call(RankGroup& g, const std::string& what, const std::function<void()>& run);
// Inside a catch block: throws the group's reason for its abort where it was aborted (its calls fail with NCCL's own
// "internal error" then), else rethrows what was caught.
[[noreturn]] void rethrow_why_aborted(RankGroup& g);
// Aborts the group's communicators (every runner of the group refuses from then on, saying `why`); from any thread, as
// a watchdog does: NCCL's calls blocked on a peer, and its kernels, then return.
void abort_group(RankGroup& g, const std::string& why);
// Waits on the host until `e` is reached, at most `timeout_s`: past it, or on an asynchronous NCCL error, the group's
// communicator is aborted (every runner of the group refuses from then on) and this throws, naming `what`.
void wait_group_event(RankGroup& g, cudaEvent_t e, int timeout_s, const std::string& what);
// The K/V and accumulator slots rank r of plan p holds at most over its passes (its buffers' sizes).
std::pair<int, int> slot_counts(const planner::Plan& p, int r, bool by_owner = false);
// A call's start: both runner streams after the caller's stream; the group's communicator current.
void start_call(RankRunner& s, cudaStream_t caller);
// A call's end: the caller's stream after the runner's last work, and the watchdog told.
void end_call(RankRunner& s, cudaStream_t caller, const char* pass);

// Head-parallel runners (rank_runner_heads.cpp): set up from a runner whose plan, workload, rank and group are set.
void open_head_runner(RankRunner& s);
void head_forward(RankRunner& s, const ShardTensors& t, cudaStream_t caller);
void head_backward(RankRunner& s, const ShardTensors& t, cudaStream_t caller);

}  // namespace tasp::executor
