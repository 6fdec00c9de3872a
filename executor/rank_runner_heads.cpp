// Head-parallel plans (Ulysses, usp) in a rank runner: the cuda backend's all-to-alls (cuda_heads.hpp) and steps
// between the caller's tensors, which are this GPU's token part with every head (the all-to-alls' layer side), and a
// caller-held `saved` buffer, which keeps what a layer's backward needs of its forward in head layout: Q, the K/V
// slots, the fp32 output and LSE of each head group (PyTorch's Ulysses keeps its head-layout tensors the same way).
// Every call binds its work lists and copy lists to those addresses on the host and uploads the copy lists; the
// runner's own buffers hold the rest (dO, dQ, the accumulators, the all-to-alls' staging).
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "executor/rank_runner_state.hpp"
#include "planner/head_parallel.hpp"
#include "planner/slot_plan.hpp"

namespace tasp::executor {

using planner::Pass;

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// The group's communicators for groups of u GPUs, split from its own once (every rank of the group makes its runners
// in the same order, as ncclCommSplit needs): the plan's ranks (the GPUs of one slot) and the u GPUs of one group.
std::pair<ncclComm_t, ncclComm_t> split_for(RankGroup& g, int u, int slot, int rank) {
  ncclComm_t parent = comm_of(g);
  {
    std::lock_guard<std::mutex> lock(g.m);
    if (auto it = g.splits.find(u); it != g.splits.end()) return it->second;
  }
  std::pair<ncclComm_t, ncclComm_t> c{nullptr, nullptr};
  TASP_NCCL(ncclCommSplit(parent, slot, rank, &c.first, nullptr));
  TASP_NCCL(ncclCommSplit(parent, rank, slot, &c.second, nullptr));
  std::lock_guard<std::mutex> lock(g.m);
  g.splits[u] = c;
  return c;
}

// Head group `grp`'s buffers for a call: Q, the K/V slots, out and LSE in `saved` when the call has one.
cuda::RankBuffers bind(const RankRunner& s, int grp, const void* saved) {
  cuda::RankBuffers b = s.x.groups[grp].buf;
  if (!saved) return b;
  char* at = const_cast<char*>(static_cast<const char*>(saved)) + s.saved_at.bytes * grp;
  b.q = at + s.saved_at.q, b.kv = at + s.saved_at.kv;
  b.out = reinterpret_cast<float*>(at + s.saved_at.out), b.lse = reinterpret_cast<float*>(at + s.saved_at.lse);
  return b;
}

// A pass's work list for this GPU on buffers `b` (indexed by GPU, as the cuda backend's).
cuda::PassWork pass_work(const RankRunner& s, Pass pass, const cuda::RankBuffers& b) {
  std::vector<cuda::RankBuffers> bufs(s.plan.gpus());
  bufs[s.gpu] = b;
  cuda::PassWork pw = cuda::make_pass_work(s.plan, pass, s.sw, s.g, {s.gpu}, bufs, s.u, false);
  if (pass == Pass::Bwd)
    for (auto& bb : pw.bwd[s.gpu]) bb.deterministic = s.deterministic;
  return pw;
}

// The layer's side of a call: the caller's tensors, the runner's staging.
cuda::SeqBuffers layer_side(const RankRunner& s, const ShardTensors& t) {
  cuda::SeqBuffers sb = s.x.seq;
  sb.q = const_cast<void*>(t.q), sb.k = const_cast<void*>(t.k), sb.v = const_cast<void*>(t.v), sb.out = t.out;
  sb.dout = const_cast<void*>(t.dout), sb.dq = t.dq, sb.dk = t.dk, sb.dv = t.dv;
  return sb;
}

// One pass as the cuda backend runs a head-parallel one: every head group's all-to-all in on the comm stream, each
// group's steps once its own has arrived, then the groups' all-to-alls out as their steps end (group g+1's exchange
// beside group g's kernels); the compute stream ends after the last exchange.
void run_pass(RankRunner& s, std::vector<cuda::PassWork>& pw, const std::vector<cuda::RankBuffers>& b, bool backward) {
  cuda::RankDevice& x = s.x;
  const int G = int(x.groups.size()), in = backward ? 2 : 0;
  const int r = s.gpu / s.u;
  cudaEvent_t prev = x.origin;
  for (int grp = 0; grp < G; ++grp)
    cuda::issue_a2a(x, s.a2a[grp][in], s.w, s.u, false, &x.groups[grp].ev_a2a[cuda::kStepEvents * in], prev);
  std::vector<cudaEvent_t> ends(G);
  for (int grp = 0; grp < G; ++grp) {
    cuda::HeadGroupDevice& hg = x.groups[grp];
    cudaEvent_t p = hg.ev_a2a[cuda::kStepEvents * in + 1];
    TASP_CUDA(cudaStreamWaitEvent(x.compute, p));
    std::vector<cudaEvent_t>& ev = backward ? hg.ev_bwd : hg.ev_fwd;
    for (int t = 0; t < pw[grp].num_steps(); ++t)
      cuda::issue_step(x, b[grp], pw[grp], s.g, s.sw, s.gpu, r, t, &ev[cuda::kStepEvents * t], p), p = ev[cuda::kStepEvents * t + 4];
    ends[grp] = p;
  }
  for (int grp = 0; grp < G; ++grp) {
    cudaEvent_t* e = &x.groups[grp].ev_a2a[cuda::kStepEvents * (in + 1)];
    cuda::issue_a2a(x, s.a2a[grp][in + 1], s.w, s.u, false, e, ends[grp]);
    prev = e[1];
  }
  TASP_CUDA(cudaStreamWaitEvent(x.compute, prev));
}

}  // namespace

void open_head_runner(RankRunner& s) {
  const planner::Plan& plan = s.plan;
  const planner::Workload& w = s.w;
  RankGroup& group = *s.group;
  s.u = plan.ulysses, s.gpu = group.rank, s.slot = group.rank % s.u, s.r = group.rank / s.u;
  const int G = plan.head_groups, r = s.r;
  s.wg = planner::head_group_workload(G, w), s.sw = planner::slot_workload(s.u, s.wg);
  cuda::RankDevice& x = s.x;
  x.dev = group.dev, x.comm = group.comm, x.compute = group.compute;
  TASP_CUDA(cudaSetDevice(x.dev));
  std::tie(x.nccl, x.group) = split_for(group, s.u, s.slot, r);
  s.g = cuda::make_geometry(plan, s.sw);
  const cuda::Geometry& g = s.g;
  const bool bwd = plan.has_backward;
  const auto [kv_slots, grad_slots] = slot_counts(plan, r);
  x.groups.resize(G);
  for (cuda::HeadGroupDevice& hg : x.groups) {
    hg.buf = cuda::alloc_rank_buffers(x, plan, s.sw, g, r, kv_slots, grad_slots, bwd, false);
    hg.ev_a2a.resize(4 * cuda::kStepEvents);
  }
  const size_t staged = size_t(s.u) * cuda::a2a_max_count(g, s.wg, s.u);  // one head group's exchanges at a time
  x.seq.send = x.alloc<uint16_t>(staged), x.seq.recv = x.alloc<uint16_t>(staged);
  // What a head group's forward leaves for its backward, in `saved`.
  const size_t nq = size_t(w.B) * g.qrows[r] * s.sw.H * w.D, nl = size_t(w.B) * s.sw.H * g.qrows[r];
  RankRunner::SavedGroup& at = s.saved_at;
  at.q = 0, at.kv = align256(nq * 2), at.out = at.kv + align256(g.slot_elems() * size_t(kv_slots) * 2);
  at.lse = at.out + align256(nq * 4), at.bytes = at.lse + align256(nl * 4);
  s.saved_bytes = bwd ? at.bytes * G : 0;
  // The work lists and copy lists once on the runner's own buffers: their lengths, the events, the device lists
  // every call refills (the layer's side points at the staging until a call names the caller's tensors).
  const cuda::SeqBuffers placeholder = [&] {
    cuda::SeqBuffers sb = x.seq;
    sb.q = sb.k = sb.v = sb.out = sb.dout = sb.dq = sb.dk = sb.dv = x.seq.send;
    return sb;
  }();
  s.a2a.resize(G);
  for (int grp = 0; grp < G; ++grp) {
    cuda::HeadGroupDevice& hg = x.groups[grp];
    const cuda::PassWork f = pass_work(s, Pass::Fwd, hg.buf);
    static const std::map<long, int> none;
    cuda::PassWork b;
    if (bwd) b = pass_work(s, Pass::Bwd, hg.buf);
    hg.ev_fwd.resize(cuda::kStepEvents * f.num_steps());
    hg.ev_bwd.resize(bwd ? cuda::kStepEvents * b.num_steps() : 0);
    const cuda::HeadExchange hx = cuda::make_head_exchange(g, s.wg, s.u, r, s.slot, hg.buf, placeholder,
                                                           bwd ? b.slots[s.gpu].grad_final : none, cuda::layer_side(w, G, grp));
    int k = 0;
    for (const cuda::A2a* e : {&hx.fwd_in, &hx.fwd_out, &hx.bwd_in, &hx.bwd_out}) s.a2a[grp][k++] = cuda::upload_a2a(x, *e);
    for (auto* v : {&hg.ev_fwd, &hg.ev_bwd, &hg.ev_a2a})
      for (auto& e : *v) TASP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  TASP_CUDA(cudaEventCreateWithFlags(&x.origin, cudaEventDisableTiming));
  TASP_CUDA(cudaEventCreateWithFlags(&x.done, cudaEventDisableTiming));
}

namespace {

// One pass of a call: its buffers, work lists and copy lists bound to the caller's tensors and `saved`, then run.
void head_pass(RankRunner& s, const ShardTensors& t, cudaStream_t caller, bool backward) {
  start_call(s, caller);
  cuda::RankDevice& x = s.x;
  const int G = int(x.groups.size()), in = backward ? 2 : 0;
  const cuda::SeqBuffers sb = layer_side(s, t);
  static const std::map<long, int> none;  // (a forward's exchanges need no accumulator slots)
  std::vector<cuda::RankBuffers> b(G);
  std::vector<cuda::PassWork> pw(G);
  for (int grp = 0; grp < G; ++grp) {
    b[grp] = bind(s, grp, s.saved_bytes ? t.saved : nullptr);
    pw[grp] = pass_work(s, backward ? Pass::Bwd : Pass::Fwd, b[grp]);
    if (backward)  // the call's scale (0: 1/sqrt(D))
      for (auto& k : pw[grp].bwd[s.gpu]) k.scale = t.scale;
    else
      for (auto& f : pw[grp].fwd[s.gpu]) f.scale = t.scale;
    const cuda::HeadExchange hx = cuda::make_head_exchange(s.g, s.wg, s.u, s.r, s.slot, b[grp], sb,
                                                           backward ? pw[grp].slots[s.gpu].grad_final : none,
                                                           cuda::layer_side(s.w, G, grp));
    cuda::refill_a2a(x, s.a2a[grp][in], backward ? hx.bwd_in : hx.fwd_in, x.comm);
    cuda::refill_a2a(x, s.a2a[grp][in + 1], backward ? hx.bwd_out : hx.fwd_out, x.comm);
  }
  run_pass(s, pw, b, backward);
  end_call(s, caller, backward ? "backward" : "forward");
}

}  // namespace

void head_forward(RankRunner& s, const ShardTensors& t, cudaStream_t caller) { head_pass(s, t, caller, false); }
void head_backward(RankRunner& s, const ShardTensors& t, cudaStream_t caller) { head_pass(s, t, caller, true); }

}  // namespace tasp::executor
