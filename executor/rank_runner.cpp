// A plan's rank in a training process (rank_runner.hpp) on the cuda backend's pieces: the same buffers
// (alloc_rank_buffers), work lists (make_pass_work) and step launches (issue_step) as `tasp run`, between the
// caller's tensors and stream.
#include "executor/rank_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "executor/rank_runner_state.hpp"  // CUDA, NCCL, the cuda backend's pieces, the threads' state
#include "kernels/attention.hpp"
#include "kernels/env_knob.hpp"
#include "planner/collective.hpp"
#include "planner/slot_plan.hpp"

namespace tasp::executor {

using planner::Pass;

ncclComm_t comm_of(RankGroup& g) {
  std::lock_guard<std::mutex> lock(g.m);
  if (!g.nccl) throw std::runtime_error("rank group: its communicator was aborted: " + g.failure);
  return g.nccl;
}

namespace {

// Aborts the group's communicators, the ones split from it too (NCCL's kernels then return, so the streams drain),
// and remembers why: every rank of the group refuses calls from then on. The caller holds g.m.
void abort_locked(RankGroup& g, const std::string& why) {
  if (!g.nccl) return;
  for (auto& [u, c] : g.splits) ncclCommAbort(c.first), ncclCommAbort(c.second);
  g.splits.clear();
  for (ncclComm_t c : g.roots) ncclCommAbort(c);
  g.roots.clear();
  ncclCommAbort(g.nccl);
  g.nccl = nullptr;
  g.failure = why;
}

// The first asynchronous error of the group's communicators (ncclSuccess: none).
ncclResult_t async_error(RankGroup& g) {
  ncclResult_t a = ncclSuccess;
  auto check = [&](ncclComm_t c) {
    ncclResult_t r = ncclSuccess;
    if (a == ncclSuccess && c) ncclCommGetAsyncError(c, &r);
    if (r != ncclSuccess && r != ncclInProgress) a = r;
  };
  check(g.nccl);
  for (auto& [u, c] : g.splits) check(c.first), check(c.second);
  for (ncclComm_t c : g.roots) check(c);
  return a;
}

// The watchdog: every 50 ms the calls' ends reached are let go; a call not ended `watch_s` after it was enqueued, or
// an asynchronous NCCL error, aborts the group (as PyTorch's NCCL watchdog does for its process groups).
void watch(RankGroup* g) {
  cudaSetDevice(g->dev);
  std::unique_lock<std::mutex> lock(g->m);
  while (!g->stop) {
    g->wake.wait_for(lock, std::chrono::milliseconds(50));
    while (!g->pending.empty() && cudaEventQuery(g->pending.front().ev) != cudaErrorNotReady) {
      g->spare.push_back(g->pending.front().ev);
      g->pending.pop_front();
    }
    if (!g->nccl) continue;
    if (g->enqueuing && g->watch_s > 0 && Clock::now() - *g->enqueuing > std::chrono::seconds(g->watch_s)) {
      abort_locked(*g, g->enqueuing_what + " did not get its work under way within " + std::to_string(g->watch_s) +
                           " s (a peer missing or stalled?)");
      continue;
    }
    if (g->pending.empty()) continue;
    const ncclResult_t async = async_error(*g);
    if (async != ncclSuccess)
      abort_locked(*g, g->pending.front().what + ": NCCL error: " + ncclGetErrorString(async));
    else if (g->watch_s > 0 && Clock::now() - g->pending.front().at > std::chrono::seconds(g->watch_s))
      abort_locked(*g, g->pending.front().what + " did not finish within " + std::to_string(g->watch_s) +
                           " s (a peer missing or stalled?)");
  }
}

void stop_watch(RankGroup& g) {
  {
    std::lock_guard<std::mutex> lock(g.m);
    g.stop = true;
  }
  g.wake.notify_all();
  if (g.watchdog.joinable()) g.watchdog.join();
  g.stop = false;
}

// The groups alive in this process. At exit, groups a process never destroyed (Python's interpreter does not
// finalize every object; a C++ trainer may leak its group) have their watchdogs stopped and communicators aborted
// before the CUDA runtime and NCCL tear down: a watchdog left querying events and NCCL's proxy threads left running
// ended a two-GPU training run with SIGSEGV after its last step (2x H200, 2026-11-26). Abort, not destroy, as
// PyTorch's process groups do at exit: a peer may be gone already. Leaked on purpose (used by an exit handler).
std::mutex& live_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<RankGroup*>& live_groups() {
  static auto* s = new std::set<RankGroup*>;
  return *s;
}
void end_groups_at_exit() {
  std::lock_guard<std::mutex> live(live_mutex());
  for (RankGroup* g : live_groups()) {
    stop_watch(*g);
    std::lock_guard<std::mutex> lock(g->m);
    abort_locked(*g, "the process is exiting");
  }
  live_groups().clear();
}

}  // namespace

void RankGroupDelete::operator()(RankGroup* g) const {
  if (!g) return;
  {
    std::lock_guard<std::mutex> live(live_mutex());
    live_groups().erase(g);
  }
  // Calls still running end, or the watchdog aborts them (a stalled peer must not hang the stream syncs below).
  for (const auto until = Clock::now() + std::chrono::seconds(2 * g->watch_s + 1); Clock::now() < until;) {
    {
      std::lock_guard<std::mutex> lock(g->m);
      if (!g->watchdog.joinable() || g->pending.empty() || !g->nccl) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop_watch(*g);
  cudaSetDevice(g->dev);
  if (g->compute) cudaStreamSynchronize(g->compute), cudaStreamSynchronize(g->comm);
  for (auto& [u, c] : g->splits) ncclCommDestroy(c.first), ncclCommDestroy(c.second);
  for (ncclComm_t c : g->roots) ncclCommDestroy(c);
  if (g->nccl) ncclCommDestroy(g->nccl);
  for (const auto& p : g->pending) cudaEventDestroy(p.ev);
  for (cudaEvent_t e : g->spare) cudaEventDestroy(e);
  if (g->compute) cudaStreamDestroy(g->compute), cudaStreamDestroy(g->comm);
  delete g;
}

void watch_rank_group(RankGroup& g, int timeout_s) {
  if (timeout_s < 0) throw planner::InputError("timeout_s: " + std::to_string(timeout_s) + " (0 stops the watchdog)");
  stop_watch(g);
  g.watch_s = timeout_s;
  if (timeout_s > 0) g.watchdog = std::thread(watch, &g);
}

int rank_group_size(const RankGroup& g) { return g.ranks; }

RankGroupPtr open_rank_group(int ranks, int rank, int device, const unsigned char* nccl_id) {
  check_rank_group(ranks, rank);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device < 0 || device >= devices)
    throw planner::InputError("device: " + std::to_string(device) + " is not one of the " + std::to_string(devices) +
                              " CUDA devices visible");
  RankGroupPtr g(new RankGroup);
  g->ranks = ranks, g->rank = rank, g->dev = device;
  TASP_CUDA(cudaSetDevice(device));
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // as the cuda backend: NVLink multicast off unless set otherwise
  ncclUniqueId id;
  std::memcpy(&id, nccl_id, kNcclIdBytes);
  TASP_NCCL(ncclCommInitRank(&g->nccl, ranks, id, rank));
  int least = 0, greatest = 0;  // the comm stream at the highest priority, as in the cuda backend (why: there)
  TASP_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  TASP_CUDA(cudaStreamCreateWithPriority(&g->comm, cudaStreamNonBlocking, greatest));
  TASP_CUDA(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking));
  // Registered after the CUDA runtime's own exit handler (the runtime is initialised by now), so it runs first.
  static const bool at_exit = std::atexit(end_groups_at_exit) == 0;
  (void)at_exit;
  std::lock_guard<std::mutex> live(live_mutex());
  live_groups().insert(g.get());
  return g;
}


void RankRunnerDelete::operator()(RankRunner* s) const {
  if (!s) return;
  cudaSetDevice(s->x.dev);
  if (s->x.compute) cudaStreamSynchronize(s->x.compute), cudaStreamSynchronize(s->x.comm);
  if (s->staged) cudaEventDestroy(s->staged);
  s->x.comm = s->x.compute = nullptr, s->x.nccl = s->x.group = nullptr;  // the group's, which outlives the runner
  s->x.roots.clear();  // the group's too (its root streams and events are the runner's)
  s->x.release();
  delete s;
}

void make_nccl_id(unsigned char* nccl_id) {
  static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "ncclUniqueId's size changed");
  ncclUniqueId id;
  TASP_NCCL(ncclGetUniqueId(&id));
  std::memcpy(nccl_id, &id, kNcclIdBytes);
}

std::vector<ncclComm_t> roots_of(RankGroup& g) {
  {
    std::lock_guard<std::mutex> lock(g.m);
    if (!g.roots.empty()) return g.roots;
  }
  const ncclComm_t parent = comm_of(g);
  std::vector<ncclComm_t> made(g.ranks, nullptr);
  for (ncclComm_t& c : made) TASP_NCCL(ncclCommSplit(parent, 0, g.rank, &c, nullptr));
  std::lock_guard<std::mutex> lock(g.m);
  if (!g.nccl) {  // aborted meanwhile
    for (ncclComm_t c : made) ncclCommAbort(c);
    throw std::runtime_error("rank group: its communicator was aborted: " + g.failure);
  }
  g.roots = made;
  return g.roots;
}

RankRunnerPtr open_rank_runner(const planner::Plan& p, const planner::Workload& w, RankGroup& group, int timeout_s,
                               bool deterministic, bool collectives, bool root_comms) {
  check_rank_plan(p, w, group.ranks);
  if (const std::string e = kernels::unsupported_head_dim(w.D, true, p.has_backward); !e.empty())
    throw planner::InputError("workload: " + e);
  const int rank = group.rank;
  RankRunnerPtr s(new RankRunner);
  s->plan = p, s->w = w, s->r = rank, s->timeout_s = timeout_s > 0 ? timeout_s : 60, s->group = &group;
  s->deterministic = deterministic;
  s->collectives = collectives && planner::collectives_apply(p);
  // An all-gather fills the slots in place, the own pieces' among them: those are staged, not read from the caller's.
  s->stage_own = kernels::env_int("TASP_OWN_KV_STAGED", 0) != 0 || s->collectives;
  if (p.ulysses > 1) {
    watched_call(group, "rank " + std::to_string(rank) + "'s head-parallel splits", [&] { open_head_runner(*s); });
    return s;
  }
  const planner::Plan& plan = s->plan;
  cuda::RankDevice& x = s->x;
  x.dev = group.dev, x.nccl = comm_of(group), x.comm = group.comm, x.compute = group.compute;
  TASP_CUDA(cudaSetDevice(x.dev));
  if (s->collectives && root_comms) {
    watched_call(group, "rank " + std::to_string(rank) + "'s split one a root", [&] { x.roots = roots_of(group); });
    x.open_root_streams();
  }
  s->g = cuda::make_geometry(plan, w);
  const cuda::Geometry& g = s->g;
  const bool bwd = plan.has_backward;
  const auto [kv_slots, grad_slots] = slot_counts(plan, rank, s->collectives);
  x.groups.resize(1);
  cuda::HeadGroupDevice& hg = x.groups[0];
  // Kept K/V in the runner's slots would be the last layer's: a keeping plan's calls run on the caller's `saved`
  // instead, the slots of that layer's forward and backward (the work lists rebased onto it per call; kept in its
  // own slots, copied out and back, medium on 2x H200 measured 0.9 ms more per fwd+bwd than tasp run), and its own
  // slots wait for a forward without `saved` (no_grad). Q, dO and dQ are the caller's tensors.
  const bool keeps = bwd && plan.backward.keeps_kv;
  hg.buf = cuda::alloc_rank_buffers(x, plan, w, g, rank, keeps ? 0 : kv_slots, grad_slots, bwd, s->collectives, true);
  s->own_kv = !keeps;
  hg.ev_fwd.resize(cuda::kStepEvents * plan.num_steps(Pass::Fwd));
  hg.ev_bwd.resize(bwd ? cuda::kStepEvents * plan.num_steps(Pass::Bwd) : 0);
  for (auto* v : {&hg.ev_fwd, &hg.ev_bwd})
    for (auto& e : *v) TASP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  TASP_CUDA(cudaEventCreateWithFlags(&x.origin, cudaEventDisableTiming));
  TASP_CUDA(cudaEventCreateWithFlags(&x.done, cudaEventDisableTiming));
  TASP_CUDA(cudaEventCreateWithFlags(&s->staged, cudaEventDisableTiming));
  s->copies = cuda::shard_copies(g, rank);
  s->nq = size_t(w.B) * g.qrows[rank] * w.H * w.D, s->nl = size_t(w.B) * w.H * g.qrows[rank];
  s->kv_bytes = g.slot_elems() * size_t(kv_slots) * 2;
  if (bwd) s->dq_tiles = cuda::dq_scratch_tiles(w, g, rank);
  if (keeps) {
    // Own pieces read where the caller keeps them (caller_kv.hpp) need no slots in `saved`: the other ranks' pieces
    // alone, half of it on 2 GPUs (medium: 201 -> 101 MB a layer and rank). Whether they can be is the geometry's (a
    // probe of the lists on a base never read).
    if (!s->stage_own) {
      std::vector<cuda::RankBuffers> bufs(plan.ranks);
      bufs[rank] = hg.buf;
      bufs[rank].kv = reinterpret_cast<void*>(uintptr_t(1) << 44);
      const cuda::PassWork f = cuda::make_pass_work(plan, Pass::Fwd, w, g, {rank}, bufs);
      const cuda::PassWork b = cuda::make_pass_work(plan, Pass::Bwd, w, g, {rank}, bufs);
      s->own_outside_saved = cuda::own_refs(f, b, rank, g, rank, bufs[rank].kv).has_value();
    }
    s->saved_bytes = s->kv_bytes - (s->own_outside_saved ? size_t(g.P) * g.slot_elems() * 2 : 0);
    if (hg.buf.moved.q) {  // (moved rows need kept K/V: planner::move_queries_refusal)
      s->moved_q_at = (s->saved_bytes + 255) / 256 * 256;
      s->saved_bytes = s->moved_q_at + cuda::moved_layout(w, hg.buf.moved.len).tensor;
    }
  }
  return s;
}

namespace {

void need(const void* p, const char* name) {
  if (!p) throw planner::InputError(std::string(name) + ": NULL");
}

void check_scale(float scale) {
  if (!(scale >= 0) || std::isinf(scale))
    throw planner::InputError("softmax_scale: " + std::to_string(scale) + " (a positive number, or 0 for 1/sqrt(D))");
}

// The work lists of both passes for the runner's workload (its current documents), their K/V pieces in slots at `kv`;
// own pieces' first hops leave from the caller's tensors, and the lists read them there where each is one run of the
// shard (own_refs).
void make_work_lists(RankRunner& s, const void* kv) {
  std::vector<cuda::RankBuffers> bufs(s.plan.ranks);
  bufs[s.r] = s.x.groups[0].buf;
  bufs[s.r].kv = const_cast<void*>(kv);
  const bool per_root = !s.x.roots.empty();
  s.fwd = cuda::make_pass_work(s.plan, Pass::Fwd, s.w, s.g, {s.r}, bufs, 1, s.collectives, per_root);
  if (!s.stage_own) s.fwd.first_hop = cuda::first_hop_messages(s.g);
  if (s.plan.has_backward) {
    s.bwd = cuda::make_pass_work(s.plan, Pass::Bwd, s.w, s.g, {s.r}, bufs, 1, s.collectives, per_root);
    for (auto& b : s.bwd.bwd[s.r]) b.deterministic = s.deterministic;
    if (size_t(s.r) < s.bwd.mbwd.size())
      for (auto& b : s.bwd.mbwd[s.r]) b.deterministic = s.deterministic;
    // runner_backward's casts make them; a last step that reduce-scatters adds what it receives itself (issue_step)
    if (s.bwd.exchange.empty() || s.bwd.exchange.back() != cuda::Exchange::ReduceScatter)
      s.bwd.deferred_adds = planner::final_adds(s.bwd.slots[s.r], s.r, s.g.P, s.bwd.accumulator_bytes == 2);
    s.bwd.first_hop = s.fwd.first_hop;
  }
  s.own_refs = s.stage_own ? std::nullopt : cuda::own_refs(s.fwd, s.bwd, s.r, s.g, s.r, kv);
  if (s.own_outside_saved && !s.own_refs) throw std::logic_error("rank runner: own pieces no longer read in place");
  s.kv_at = kv;
}

// The K/V slots of a call: the caller's `saved` where the plan keeps K/V and the call has one, else the runner's; the
// work lists then point there (made there by the first call, rebased by later ones).
void* kv_slots(RankRunner& s, const ShardTensors& t) {
  cuda::RankBuffers& own = s.x.groups[0].buf;
  const bool saved = s.saved_bytes && t.saved;
  if (!saved && !s.own_kv) {
    own.kv = s.x.alloc<uint16_t>(s.kv_bytes / 2);
    s.own_kv = true;
  }
  // `saved` without the own slots: the lists' base lies those slots before it (own pieces are never read there).
  const size_t skip = s.own_outside_saved ? size_t(s.g.P) * s.g.slot_elems() * 2 : 0;
  void* kv = saved ? reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(t.saved) - skip) : own.kv;
  if (!s.kv_at) {
    make_work_lists(s, kv);
  } else if (kv != s.kv_at) {
    cuda::rebase_kv(s.fwd, s.r, s.kv_at, kv, s.kv_bytes);
    cuda::rebase_kv(s.bwd, s.r, s.kv_at, kv, s.kv_bytes);
    s.kv_at = kv;
  }
  return kv;
}

// Both streams start after what the caller's stream holds. The own K/V pieces are read where the caller keeps them
// (own_refs), or else go into their slots (0..P-1) of `kv` (or of own_stage) as one strided copy per piece run, K and
// V: B rows of `len` tokens each (`staged`: a keeping plan's backward, whose slots its forward filled).
void begin(RankRunner& s, const ShardTensors& t, cudaStream_t caller, void* kv_base, bool staged) {
  cuda::RankDevice& x = s.x;
  start_call(s, caller);
  const cuda::Geometry& g = s.g;
  // TMA reads K/V from 16-byte boundaries (PyTorch's allocations are on far coarser ones; a view may not be).
  const bool aligned = (reinterpret_cast<uintptr_t>(t.k) | reinterpret_cast<uintptr_t>(t.v)) % 16 == 0;
  if (s.own_refs && aligned) {  // the lists and the first hops read the call's tensors
    cuda::point_own_refs(s.fwd, s.bwd, s.r, *s.own_refs, t.k, t.v);
    return;
  }
  void* own_base = kv_base;
  if (s.saved_bytes && t.saved && s.own_outside_saved) {
    // `saved` has no own slots: stage them into the runner's, in every call (other layers' calls may come between a
    // forward and its backward).
    if (!s.own_stage) s.own_stage = x.alloc<uint16_t>(size_t(g.P) * g.slot_elems());
    own_base = s.own_stage, staged = false;
  }
  if (s.own_refs) cuda::point_own_refs_at_slots(s.fwd, s.bwd, s.r, g, *s.own_refs, own_base);
  if (staged) return;
  // The own pieces' slots: 0..P-1, or by owner with collectives (planner::by_owner_slot, piece-major).
  auto* kv = static_cast<uint16_t*>(own_base);
  auto slot = [&](int c) { return size_t(s.collectives ? planner::by_owner_slot(s.plan, s.r, c) : c); };
  for (const cuda::ShardCopy& c : s.copies)
    for (int half = 0; half < 2; ++half)
      TASP_CUDA(cudaMemcpy2DAsync(kv + g.slot_elems() * slot(c.piece) + half * g.half_slot() + c.slot_off, c.slot_pitch * 2,
                                  static_cast<const uint16_t*>(half ? t.v : t.k) + c.shard_off, c.shard_pitch * 2,
                                  c.width * 2, c.height, cudaMemcpyDeviceToDevice, x.compute));
}

// Where query rows moved here keep their Q from a forward to its backward: in the call's `saved` when the runner
// keeps K/V there (other layers' calls come between), else in the runner's buffer (a forward alone).
void* moved_q(const RankRunner& s, const ShardTensors& t) {
  void* own = s.x.groups[0].buf.moved.q;
  return own && s.moved_q_at && t.saved ? static_cast<char*>(t.saved) + s.moved_q_at : own;
}

// The pass's steps on the runner's streams, q (and dO) read where the caller keeps them, at the call's scale; moved
// rows' Q where b.moved.q says.
void steps(RankRunner& s, cuda::PassWork& pw, const cuda::RankBuffers& b, float scale, std::vector<cudaEvent_t>& ev) {
  TASP_CUDA(cudaEventRecord(s.staged, s.x.compute));
  if (size_t(s.r) < pw.fwd.size())
    for (auto& f : pw.fwd[s.r]) f.q = b.q, f.scale = scale;
  if (size_t(s.r) < pw.bwd.size())
    for (auto& k : pw.bwd[s.r]) k.q = b.q, k.dout = b.dout, k.scale = scale;
  if (size_t(s.r) < pw.mfwd.size())
    for (auto& f : pw.mfwd[s.r]) f.q = f.pieces.empty() ? f.q : b.moved.q, f.scale = scale;
  if (size_t(s.r) < pw.mbwd.size())
    for (auto& k : pw.mbwd[s.r]) k.q = k.pieces.empty() ? k.q : b.moved.q, k.scale = scale;
  cudaEvent_t prev = s.staged;
  for (int t = 0; t < pw.num_steps(); ++t) {
    cuda::issue_step(s.x, b, pw, s.g, s.w, s.r, s.r, t, &ev[cuda::kStepEvents * t], prev);
    prev = ev[cuda::kStepEvents * t + 4];
  }
}

}  // namespace

std::pair<int, int> slot_counts(const planner::Plan& p, int r, bool by_owner) {
  int kv = 0, grad = 0;
  for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
    if (pass == Pass::Bwd && !p.has_backward) continue;
    const planner::RankSlots sl = planner::plan_slots(p, pass, r, by_owner);
    kv = std::max(kv, sl.kv_slots), grad = std::max(grad, sl.grad_slots);
  }
  return {kv, grad};
}

void start_call(RankRunner& s, cudaStream_t caller) {
  cuda::RankDevice& x = s.x;
  x.nccl = comm_of(*s.group);
  if (s.u > 1) {  // the communicators split for head parallelism, aborted with the group's
    std::lock_guard<std::mutex> lock(s.group->m);
    const auto& c = s.group->splits.at(s.u);
    x.nccl = c.first, x.group = c.second;
  }
  TASP_CUDA(cudaSetDevice(x.dev));
  TASP_CUDA(cudaEventRecord(x.origin, caller));
  TASP_CUDA(cudaStreamWaitEvent(x.compute, x.origin));
  TASP_CUDA(cudaStreamWaitEvent(x.comm, x.origin));
}

void end_call(RankRunner& s, cudaStream_t caller, const char* pass) {
  TASP_CUDA(cudaEventRecord(s.x.done, s.x.compute));  // after the last step, whose end waited for its transfers
  TASP_CUDA(cudaStreamWaitEvent(caller, s.x.done));
  RankGroup& g = *s.group;
  std::lock_guard<std::mutex> lock(g.m);
  if (!g.watchdog.joinable()) return;
  cudaEvent_t e = nullptr;
  if (!g.spare.empty()) {
    e = g.spare.back();
    g.spare.pop_back();
  } else {
    TASP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  TASP_CUDA(cudaEventRecord(e, s.x.compute));
  g.pending.push_back({e, Clock::now(), "rank " + std::to_string(s.group->rank) + "'s " + pass});
}

namespace {

void forward_call(RankRunner& s, const ShardTensors& t, void* stream) {
  const auto caller = static_cast<cudaStream_t>(stream);
  if (s.u > 1) return head_forward(s, t, caller);
  cuda::RankBuffers b = s.x.groups[0].buf;
  b.kv = kv_slots(s, t);
  begin(s, t, caller, b.kv, false);
  b.q = const_cast<void*>(t.q), b.own_k = t.k, b.own_v = t.v, b.moved.q = moved_q(s, t);
  steps(s, s.fwd, b, t.scale, s.x.groups[0].ev_fwd);
  // The running fp32 output leaves in the caller's 16-bit type; LSE is laid out as the caller's already.
  kernels::cast_out(b.out, t.out, cuda::dtype_of(s.w), s.nq, s.x.compute);
  TASP_CUDA(cudaMemcpyAsync(t.lse, b.lse, s.nl * 4, cudaMemcpyDeviceToDevice, s.x.compute));
  end_call(s, caller, "forward");
}

void backward_call(RankRunner& s, const ShardTensors& t, void* stream) {
  const auto caller = static_cast<cudaStream_t>(stream);
  if (s.u > 1) return head_backward(s, t, caller);
  const kernels::DType dt = cuda::dtype_of(s.w);
  cuda::RankBuffers b = s.x.groups[0].buf;
  b.kv = kv_slots(s, t);
  begin(s, t, caller, b.kv, s.saved_bytes > 0);
  // The forward's out read where the caller keeps it (16 bits), dQ written into the caller's; LSE copied in.
  TASP_CUDA(cudaMemcpyAsync(b.lse, t.lse, s.nl * 4, cudaMemcpyDeviceToDevice, s.x.compute));
  b.q = const_cast<void*>(t.q), b.dout = const_cast<void*>(t.dout), b.out16 = t.out, b.dq16 = t.dq;
  b.own_k = t.k, b.own_v = t.v, b.moved.q = moved_q(s, t);
  steps(s, s.bwd, b, t.scale, s.x.groups[0].ev_bwd);
  // dK/dV: each own piece's final accumulator, copy by copy (its B rows in one launch), into the caller's rows, with
  // the last step's add into it that the steps left to this cast (FinalAdd).
  const auto& fin = s.bwd.slots[s.r].grad_final;
  std::map<int, planner::FinalAdd> last;  // own piece -> its deferred add
  for (const planner::FinalAdd& a : s.bwd.deferred_adds) last[a.piece] = a;
  const size_t se = s.g.slot_elems();
  for (const cuda::ShardCopy& c : s.copies)
    for (int half = 0; half < 2; ++half) {
      uint16_t* to = static_cast<uint16_t*>(half ? t.dv : t.dk) + c.shard_off;
      const auto f = fin.find(s.g.key(s.r, c.piece));
      if (f == fin.end()) {  // no query sees the piece (a pruned plan): no gradient
        TASP_CUDA(cudaMemset2DAsync(to, c.shard_pitch * 2, 0, c.width * 2, c.height, s.x.compute));
        continue;
      }
      const size_t at = half * s.g.half_slot() + c.slot_off;  // the copy's first element within a slot
      const float* acc = b.grad + se * f->second + at;
      const void* add = nullptr;
      auto type = kernels::AddType::None;
      if (const auto a = last.find(c.piece); a != last.end()) {
        if (a->second.into != f->second) throw std::logic_error("rank runner: a final add outside the final slot");
        if (a->second.from16 >= 0) add = b.grad_recv16 + se * a->second.from16 + at, type = kernels::AddType::BF16;
        else add = b.grad + se * a->second.from + at, type = kernels::AddType::F32;
        if (a->second.adopt) acc = nullptr;
      }
      kernels::cast_out_rows(acc, c.slot_pitch, to, c.shard_pitch, dt, c.width, c.height, s.x.compute, add, type);
    }
  end_call(s, caller, "backward");
}

}  // namespace

void runner_forward(RankRunner& s, const ShardTensors& t, void* stream) {
  need(t.q, "q"), need(t.k, "k"), need(t.v, "v"), need(t.out, "out"), need(t.lse, "lse"), check_scale(t.scale);
  watched_call(*s.group, "rank " + std::to_string(s.group->rank) + "'s forward", [&] { forward_call(s, t, stream); });
}

void runner_backward(RankRunner& s, const ShardTensors& t, void* stream) {
  if (!s.plan.has_backward) throw planner::InputError("plan: made for the forward alone");
  need(t.q, "q"), need(t.k, "k"), need(t.v, "v"), need(t.out, "out"), need(t.lse, "lse"), need(t.dout, "dout");
  need(t.dq, "dq"), need(t.dk, "dk"), need(t.dv, "dv"), check_scale(t.scale);
  if (s.saved_bytes && !t.saved)
    throw planner::InputError("saved: NULL, and the plan keeps the forward's K/V for the backward (" +
                              std::to_string(s.saved_bytes) + " bytes, written by the forward)");
  watched_call(*s.group, "rank " + std::to_string(s.group->rank) + "'s backward", [&] { backward_call(s, t, stream); });
}

size_t runner_saved_bytes(const RankRunner& s) { return s.saved_bytes; }

size_t runner_device_bytes(const RankRunner& s) { return size_t(s.x.bytes) + kernels::workspace_device_bytes(s.x.ws); }

void runner_documents(RankRunner& s, const std::vector<long>& docs) {
  if (const std::string why = remask_refusal(s.plan, s.w, docs); !why.empty()) throw planner::InputError(why);
  planner::Workload w = s.w;
  w.docs = docs.size() > 1 ? docs : std::vector<long>{};
  if (w.docs == s.w.docs) return;
  cuda::RankDevice& x = s.x;
  cuda::HeadGroupDevice& hg = x.groups[0];
  TASP_CUDA(cudaSetDevice(x.dev));
  if (s.plan.has_backward) {
    // Items split at documents, and the scratch holds a tile per started tile of rows of every item.
    const size_t tiles = cuda::dq_scratch_tiles(w, s.g, s.r);
    if (tiles > s.dq_tiles) {
      TASP_CUDA(cudaStreamSynchronize(x.compute));  // calls enqueued before read the old scratch
      x.allocs.erase(std::remove(x.allocs.begin(), x.allocs.end(), static_cast<void*>(hg.buf.dq_accum)), x.allocs.end());
      TASP_CUDA(cudaFree(hg.buf.dq_accum));
      x.bytes -= double(cuda::dq_scratch_floats(w, s.dq_tiles) * 4);
      s.dq_tiles = std::max(tiles, 2 * s.dq_tiles);  // grown rarely as documents multiply
      hg.buf.dq_accum = x.alloc<float>(cuda::dq_scratch_floats(w, s.dq_tiles));
    }
  }
  s.w = w;
  if (s.kv_at) make_work_lists(s, s.kv_at);  // on the slots the last call used (no lists yet: the first call makes them)
}

void watched_call(RankGroup& g, const std::string& what, const std::function<void()>& run) {
  {
    std::lock_guard<std::mutex> lock(g.m);
    g.enqueuing = Clock::now(), g.enqueuing_what = what;
  }
  struct Done {
    RankGroup& g;
    ~Done() {
      std::lock_guard<std::mutex> lock(g.m);
      g.enqueuing.reset();
    }
  } done{g};
  try {
    run();
  } catch (const std::runtime_error&) {
    rethrow_why_aborted(g);
  }
}

void rethrow_why_aborted(RankGroup& g) {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(g.m);
    if (!g.nccl) why = g.failure;
  }
  if (why.empty()) throw;
  throw std::runtime_error((why.rfind("rank ", 0) == 0 ? "" : "rank " + std::to_string(g.rank) + ": ") + why +
                           "; its communicator is aborted");
}

void abort_group(RankGroup& g, const std::string& why) {
  std::lock_guard<std::mutex> lock(g.m);
  abort_locked(g, why);
}

void wait_group_event(RankGroup& g, cudaEvent_t e, int timeout_s, const std::string& what) {
  TASP_CUDA(cudaSetDevice(g.dev));
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  const std::string who = "rank " + std::to_string(g.rank);
  while (cudaEventQuery(e) == cudaErrorNotReady) {
    {
      std::lock_guard<std::mutex> lock(g.m);
      if (!g.nccl) throw std::runtime_error(who + ": the group's communicator was aborted: " + g.failure);
      const ncclResult_t async = async_error(g);
      if (async != ncclSuccess) {
        const std::string why = who + ": NCCL error: " + ncclGetErrorString(async);
        abort_locked(g, why);
        throw std::runtime_error(why);
      }
      if (Clock::now() > deadline) {
        const std::string why = who + ": " + what + " did not finish within " + std::to_string(timeout_s) +
                                " s (a peer missing or stalled?)";
        abort_locked(g, why);  // every runner of the group refuses from now on
        throw std::runtime_error(why + "; its communicator is aborted");
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  TASP_CUDA(cudaGetLastError());
  std::lock_guard<std::mutex> lock(g.m);  // work the watchdog aborted ends, with garbage: say so
  if (!g.nccl) throw std::runtime_error(who + ": the group's communicator was aborted: " + g.failure);
}

void runner_wait(RankRunner& s) { wait_group_event(*s.group, s.x.done, s.timeout_s, "the pass"); }

}  // namespace tasp::executor
