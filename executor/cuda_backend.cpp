// CUDA backend: one process drives all local GPUs (a host thread per rank), or one process per GPU under
// mpirun/srun. Each step of a pass: the step's transfers as one NCCL group of send/recv on a comm stream,
// the step's work list as one kernel launch on a compute stream, CUDA events around both (cuda_rank.hpp).
// What goes where is decided before the run (cuda_pass.hpp, slot_plan.hpp), so the host waits on nothing
// until the run ends. The backward runs after the forward, on the forward's out and LSE.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "executor/backend.hpp"
#include "executor/cuda_heads.hpp"
#include "executor/cuda_pass.hpp"
#include "executor/cuda_rank.hpp"
#include "executor/launch_env.hpp"
#include "executor/mpi_link.hpp"
#include "planner/collective.hpp"
#include "planner/head_parallel.hpp"
#include "planner/rank_memory.hpp"
#include "planner/topology.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

namespace tasp::executor {
namespace {

using cuda::kStepEvents;
using cuda::RankDevice;
using planner::Pass;
using planner::Plan;
using planner::Range;

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(CudaOptions o) : opt_(o) {}
  std::string name() const override { return "cuda"; }
  Result run(const Plan& plan, const Problem& pr, planner::Passes passes) override;
  bool makes_own_inputs() const override { return true; }
  bool single_device_reference(const Problem& pr, planner::Passes passes, Result& ref) override {
    return cuda::single_device_reference(pr, passes, ref);
  }
  double single_device_us(const planner::Workload& w, planner::Passes passes, int warmup, int iters) override {
    return cuda::single_device_us(w, passes, warmup, iters, opt_.deterministic);
  }

 private:
  CudaOptions opt_;
  MpiLink mpi_;
};

// Head-parallel plans (Plan::ulysses = u > 1): GPU G = rank * u + slot runs the plan as `rank` on its slot's
// heads of each head group (workload `swg`), between all-to-alls inside its group (cuda_heads.hpp). Without:
// G = rank, swg = w, one head group.
// The outputs of a head-parallel run: out, dQ, dK, dV from each GPU's token part after the all-to-alls out
// (what the layer gets), LSE from each head group's head layout (it stays there for the backward).
void head_parallel_outputs(std::vector<RankDevice>& R, const cuda::Geometry& g, const planner::Workload& w, int u,
                           int groups, planner::Passes passes, Result& res) {
  const size_t rows = size_t(w.B) * w.S;
  const long HD = long(w.H) * w.D, HkvD = long(w.Hkv) * w.D;
  res.out.assign(rows * HD, 0.0), res.lse.assign(rows * w.H, 0.0);
  if (passes.bwd) res.dq.assign(res.out.size(), 0.0), res.dk.assign(rows * HkvD, 0.0), res.dv.assign(res.dk.size(), 0.0);
  const kernels::DType dt = cuda::dtype_of(w);
  for (int gpu = 0; gpu < int(R.size()); ++gpu) {
    RankDevice& x = R[gpu];
    TASP_CUDA(cudaSetDevice(x.dev));
    const int r = gpu / u, slot = gpu % u;
    const long qrows = g.qrows[r], chunk = cuda::part_chunk(qrows, u);
    const cuda::Part part = cuda::token_part(qrows, u, slot);
    auto fetch = [](const void* p, size_t bytes) {
      std::vector<char> h(bytes);
      TASP_CUDA(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
      return h;
    };
    // Token part, every head: [B][chunk][width] -> the global [B][S][width].
    auto scatter = [&](std::vector<double>& dst, const void* src, bool half, long width) {
      const std::vector<char> h = fetch(src, size_t(w.B) * chunk * width * (half ? 2 : 4));
      const auto tokens = cuda::shard_rows_tokens(g, r, part.begin, part.begin + part.size);
      for (int b = 0; b < w.B; ++b) {
        long i = 0;
        for (const Range& rg : tokens)
          for (long t = rg.begin; t < rg.end; ++t, ++i)
            for (long e = 0; e < width; ++e) {
              const size_t k = (size_t(b) * chunk + i) * width + e;
              dst[(size_t(b) * w.S + t) * width + e] =
                  half ? cuda::from_half_bits(reinterpret_cast<const uint16_t*>(h.data())[k], dt) : reinterpret_cast<const float*>(h.data())[k];
            }
      }
    };
    scatter(res.out, x.seq.out, true, HD);
    if (passes.bwd) scatter(res.dq, x.seq.dq, true, HD), scatter(res.dk, x.seq.dk, true, HkvD), scatter(res.dv, x.seq.dv, true, HkvD);
    const planner::Workload wg = planner::head_group_workload(groups, w);
    const planner::HeadSlice hs = planner::head_slice(u, wg, slot);
    for (int grp = 0; grp < groups; ++grp) {
      const std::vector<char> l = fetch(x.groups[grp].buf.lse, size_t(w.B) * hs.q_heads * qrows * 4);
      const auto* lse = reinterpret_cast<const float*>(l.data());
      const int h0 = cuda::layer_side(w, groups, grp).q_head0 + hs.q_begin;
      for (int b = 0; b < w.B; ++b) {
        long row = 0;
        for (const Range& rg : g.qranges[r])
          for (long t = rg.begin; t < rg.end; ++t, ++row)
            for (int h = 0; h < hs.q_heads; ++h)
              res.lse[(size_t(b) * w.S + t) * w.H + h0 + h] = lse[(size_t(b) * hs.q_heads + h) * qrows + row];
      }
    }
  }
}

// Where a rank's run stands when its deadline passes: the first step (of the forward, then the backward) whose end
// event has not been reached, and the ranks that step exchanges with, which are the ones it waits for.
std::string pending_step(RankDevice& x, const std::vector<cuda::PassWork>& first, const std::vector<cuda::PassWork>* second,
                         int r) {
  for (const auto* pw : {&first, second}) {
    if (!pw || pw->empty()) continue;
    const cuda::PassWork& p = (*pw)[0];
    const std::vector<cudaEvent_t>& ev = p.pass == Pass::Bwd ? x.groups[0].ev_bwd : x.groups[0].ev_fwd;
    for (int t = 0; t < p.num_steps(); ++t) {
      if (cudaEventQuery(ev[kStepEvents * t + 4]) != cudaErrorNotReady) continue;
      std::string peers;
      for (const auto& tr : p.steps[t].transfers) {
        const int other = tr.src == r ? tr.dst : tr.dst == r ? tr.src : -1;
        const std::string o = std::to_string(other);
        if (other >= 0 && (", " + peers + ",").find(", " + o + ",") == std::string::npos) peers += (peers.empty() ? "" : ", ") + o;
      }
      return std::string(p.pass == Pass::Bwd ? "backward" : "forward") + " step " + std::to_string(t) +
             (peers.empty() ? "" : " (waiting for rank(s) " + peers + ": stalled or gone?)");
    }
  }
  return "the run (its exchanges outside the steps)";
}

Result CudaBackend::run(const Plan& plan, const Problem& pr, planner::Passes passes) {
  const auto& w = pr.w;
  const int u = plan.ulysses, n = plan.gpus(), G = u > 1 ? plan.head_groups : 1;
  if (u > 1)
    if (const std::string e = planner::check_head_groups(u, G, w); !e.empty()) throw planner::InputError("workload: " + e);
  if (u == 1 && plan.head_groups != 1) throw planner::InputError("plan: head_groups needs a head-parallel plan");
  // What one GPU computes for one head group: its slot's heads of the group.
  const planner::Workload wg = planner::head_group_workload(G, w);
  const planner::Workload sw = u > 1 ? planner::slot_workload(u, wg) : w;
  // Collective exchanges, for allgather plans: K/V slots laid out by owner (n slots, which allgather holds anyway;
  // a ring's few would become n). Head-parallel plans keep their own layout (the all-to-alls unpack into 0..P-1).
  const bool collectives = opt_.collectives && planner::collectives_apply(plan);
  auto rank_of = [u](int gpu) { return gpu / u; };
  auto slot_of = [u](int gpu) { return gpu % u; };
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw std::invalid_argument("cuda backend: no CUDA device visible");
  if (const std::string e = kernels::unsupported_head_dim(w.D, passes.fwd, passes.bwd); !e.empty())
    throw std::invalid_argument("cuda backend: " + e);
  if (w.causal != plan.causal) throw std::invalid_argument("workload and plan disagree on causal");
  if (passes.bwd && !plan.has_backward) throw std::invalid_argument("the plan has no backward part");
  const bool host_inputs = !pr.q.empty();
  const cuda::Geometry g = cuda::make_geometry(plan, sw);
  // Which ranks this process drives: all of them, or under a launcher the one it was given.
  const LaunchEnv env = launch_env_from_process();
  std::vector<int> local;
  std::vector<RankDevice> R(n);
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast stays off on shared machines unless set otherwise
  if (env.multi_process()) {
    if (u > 1)
      throw planner::InputError("cuda backend: head-parallel plans run in one process (a thread per GPU) so far, not under " +
                                env.launcher);
    if (env.size != n)
      throw std::invalid_argument("cuda backend: launched as " + std::to_string(env.size) + " processes (" + env.launcher +
                                  ") for a plan of " + std::to_string(n) + " ranks");
    local = {env.rank};
    mpi_.start();
    ncclUniqueId id;
    if (env.rank == 0) TASP_NCCL(ncclGetUniqueId(&id));
    mpi_.broadcast(&id, sizeof id);
    R[env.rank].dev = env.local_rank % devices;
    TASP_CUDA(cudaSetDevice(R[env.rank].dev));
    TASP_NCCL(ncclCommInitRank(&R[env.rank].nccl, n, id, env.rank));
  } else {
    if (n > devices)
      throw std::invalid_argument("cuda backend: the plan has " + std::to_string(n) + " ranks but this machine has " +
                                  std::to_string(devices) + " GPU(s) (one process drives the local GPUs; use mpirun or srun "
                                  "for more)");
    std::vector<ncclComm_t> comms(n);
    std::vector<int> devs(n);
    for (int r = 0; r < n; ++r) devs[r] = r, local.push_back(r);
    TASP_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
    for (int r = 0; r < n; ++r) R[r].dev = r, R[r].nccl = comms[r];
    if (u > 1) {  // the plan's ranks talk within a slot, the all-to-alls within a group
      for (int x = 0; x < n; ++x) R[x].world = comms[x];
      for (bool by_slot : {true, false}) {
        TASP_NCCL(ncclGroupStart());
        for (int x = 0; x < n; ++x)
          TASP_NCCL(ncclCommSplit(R[x].world, by_slot ? slot_of(x) : rank_of(x), by_slot ? rank_of(x) : slot_of(x),
                                  by_slot ? &R[x].nccl : &R[x].group, nullptr));
        TASP_NCCL(ncclGroupEnd());
      }
    }
  }
  // CudaOptions::root_comms: n copies of the plan's communicator, one per root (ncclCommSplit, every rank the same
  // colour and its own rank as key).
  const bool root_comms = opt_.root_comms && collectives && u == 1;
  for (int q = 0; root_comms && q < n; ++q) {
    TASP_NCCL(ncclGroupStart());
    for (int x : local) {
      R[x].roots.resize(n);
      TASP_NCCL(ncclCommSplit(R[x].nccl, 0, x, &R[x].roots[q], nullptr));
    }
    TASP_NCCL(ncclGroupEnd());
  }
  auto release_all = [&] {
    for (int r : local) R[r].release();
  };
  try {
    // Slot counts first (buffers are sized by them), then buffers, then the work lists that point into them.
    std::vector<int> kv_slots(n, 0), grad_slots(n, 0);
    for (int r : local)
      for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
        if (pass == Pass::Bwd && !passes.bwd) continue;
        const planner::RankSlots s = planner::plan_slots(plan, pass, rank_of(r), collectives);
        kv_slots[r] = std::max(kv_slots[r], s.kv_slots);
        grad_slots[r] = std::max(grad_slots[r], s.grad_slots);
      }
    const size_t se = g.slot_elems();
    // Refuse before allocating what would not fit (the buffers as planner::rank_memory counts them).
    for (int r : local) {
      TASP_CUDA(cudaSetDevice(R[r].dev));
      size_t free = 0, total = 0;
      TASP_CUDA(cudaMemGetInfo(&free, &total));
      R[r].used_before = double(total - free);
      const double need = planner::rank_memory(plan, w, passes, rank_of(r), collectives).total();
      if (need > 0.95 * double(free))
        throw std::invalid_argument("cuda backend: rank " + std::to_string(r) + " needs about " +
                                    std::to_string(long(need / (1 << 20))) + " MiB of GPU memory for its buffers; GPU " +
                                    std::to_string(R[r].dev) + " has " + std::to_string(long(free / (1 << 20))) + " MiB free");
    }
    for (int gpu : local) {
      RankDevice& x = R[gpu];
      const int r = rank_of(gpu);
      TASP_CUDA(cudaSetDevice(x.dev));
      // The comm stream at the highest priority: its kernels (NCCL's, the exchanges' casts and copies) get SMs as
      // soon as an attention CTA retires instead of after the whole attention launch, which holds every SM (one
      // CTA each, all its registers) for its waves. At default priority a bf16 reduce-scatter beside the backward
      // took 1308 us against 1176 of compute (2x H200, B=1 S=8192 H=32 causal): it had waited for it.
      int least = 0, greatest = 0;
      TASP_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      TASP_CUDA(cudaStreamCreateWithPriority(&x.comm, cudaStreamNonBlocking, greatest));
      TASP_CUDA(cudaStreamCreateWithFlags(&x.compute, cudaStreamNonBlocking));
      if (!x.roots.empty()) x.open_root_streams();
      const size_t nq = size_t(w.B) * g.qrows[r] * sw.H * w.D;
      // The slot of the rank's own K/V piece c: c, or by owner with collective exchanges (planner::by_owner_slot).
      auto own_slot = [&](int c) { return collectives ? planner::by_owner_slot(plan, r, c) : c; };
      x.groups.resize(G);
      for (cuda::HeadGroupDevice& hg : x.groups) {
        hg.buf = cuda::alloc_rank_buffers(x, plan, sw, g, r, kv_slots[gpu], grad_slots[gpu], passes.bwd, collectives);
        hg.ev_fwd.resize(kStepEvents * plan.num_steps());
        hg.ev_bwd.resize(passes.bwd ? kStepEvents * plan.num_steps(Pass::Bwd) : 0);
        hg.ev_a2a.resize(u > 1 ? 4 * kStepEvents : 0);
        for (auto* v : {&hg.ev_fwd, &hg.ev_bwd, &hg.ev_a2a})
          for (auto& e : *v) TASP_CUDA(cudaEventCreate(&e));
      }
      cuda::RankBuffers& b = x.groups[0].buf;
      TASP_CUDA(cudaEventCreate(&x.origin));
      TASP_CUDA(cudaEventCreate(&x.done));
      const kernels::DType dt = cuda::dtype_of(w);
      auto put = [&](void* dst, const std::vector<uint16_t>& h) {
        TASP_CUDA(cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
      };
      if (u > 1) {
        // The layer's side: this GPU's token part with every head; the all-to-all in fills q and the slots.
        const long chunk = cuda::part_chunk(g.qrows[r], u);
        const cuda::Part part = cuda::token_part(g.qrows[r], u, slot_of(gpu));
        const size_t cq = size_t(w.B) * chunk * w.H * w.D, ck = size_t(w.B) * chunk * w.Hkv * w.D;
        cuda::SeqBuffers& q = x.seq;
        q.q = x.alloc<uint16_t>(cq), q.k = x.alloc<uint16_t>(ck), q.v = x.alloc<uint16_t>(ck), q.out = x.alloc<uint16_t>(cq);
        const size_t staged = u * cuda::a2a_max_count(g, wg, u);  // one head group's exchanges at a time
        q.send = x.alloc<uint16_t>(staged), q.recv = x.alloc<uint16_t>(staged);
        if (passes.bwd)
          q.dout = x.alloc<uint16_t>(cq), q.dq = x.alloc<uint16_t>(cq), q.dk = x.alloc<uint16_t>(ck), q.dv = x.alloc<uint16_t>(ck);
        if (host_inputs) {
          const auto tokens = cuda::shard_rows_tokens(g, r, part.begin, part.begin + part.size);
          put(q.q, cuda::pack_rows(pr.q, tokens, w.B, w.S, long(w.H) * w.D, chunk, dt));
          put(q.k, cuda::pack_rows(pr.k, tokens, w.B, w.S, long(w.Hkv) * w.D, chunk, dt));
          put(q.v, cuda::pack_rows(pr.v, tokens, w.B, w.S, long(w.Hkv) * w.D, chunk, dt));
          if (passes.bwd) put(q.dout, cuda::pack_rows(pr.dout, tokens, w.B, w.S, long(w.H) * w.D, chunk, dt));
        } else {
          kernels::fill_random(q.q, dt, cq, 17 + gpu, nullptr);
          kernels::fill_random(q.k, dt, ck, 1000 + gpu, nullptr), kernels::fill_random(q.v, dt, ck, 5000 + gpu, nullptr);
          if (passes.bwd) kernels::fill_random(q.dout, dt, cq, 29 + gpu, nullptr);
        }
      } else if (host_inputs) {
        // Inputs: queries (and dO), own K/V pieces in their slots (0..P-1, or by owner with collective exchanges);
        // from the host problem or random here.
        auto* kv = static_cast<uint16_t*>(b.kv);
        put(b.q, cuda::pack_rows(pr.q, g.qranges[r], w.B, w.S, long(w.H) * w.D, g.qrows[r], dt));
        if (passes.bwd) put(b.dout, cuda::pack_rows(pr.dout, g.qranges[r], w.B, w.S, long(w.H) * w.D, g.qrows[r], dt));
        for (int c = 0; c < g.P; ++c) {
          const auto& rg = g.pranges[g.key(r, c)];
          put(kv + se * own_slot(c), cuda::pack_rows(pr.k, rg, w.B, w.S, g.row_elems, g.max_piece, dt));
          put(kv + se * own_slot(c) + g.half_slot(), cuda::pack_rows(pr.v, rg, w.B, w.S, g.row_elems, g.max_piece, dt));
        }
      } else {
        auto* kv = static_cast<uint16_t*>(b.kv);
        kernels::fill_random(b.q, dt, nq, 17 + r, nullptr);
        if (passes.bwd) kernels::fill_random(b.dout, dt, nq, 29 + r, nullptr);
        for (int c = 0; c < g.P; ++c) kernels::fill_random(kv + se * own_slot(c), dt, se, 1000 + g.key(r, c), nullptr);
      }
      TASP_CUDA(cudaDeviceSynchronize());
    }
    // Per head group: the passes' work lists on that group's buffers, and its four all-to-alls.
    std::vector<cuda::PassWork> fwd(G), bwd(G);
    std::vector<std::vector<std::array<cuda::A2aLaunch, 4>>> a2a(G, std::vector<std::array<cuda::A2aLaunch, 4>>(n));
    for (int grp = 0; grp < G; ++grp) {
      std::vector<cuda::RankBuffers> bufs(n);
      for (int gpu : local) bufs[gpu] = R[gpu].groups[grp].buf;
      fwd[grp] = cuda::make_pass_work(plan, Pass::Fwd, sw, g, local, bufs, u, collectives, root_comms);
      if (passes.bwd) bwd[grp] = cuda::make_pass_work(plan, Pass::Bwd, sw, g, local, bufs, u, collectives, root_comms);
      for (auto* lists : {&bwd[grp].bwd, &bwd[grp].mbwd})  // (mbwd: moved query rows' launches)
        for (auto& steps : *lists)
          for (auto& b : steps) b.deterministic = opt_.deterministic;
      if (u > 1)
        for (int gpu : local) {
          TASP_CUDA(cudaSetDevice(R[gpu].dev));
          static const std::map<long, int> none;
          const cuda::HeadExchange hx =
              cuda::make_head_exchange(g, wg, u, rank_of(gpu), slot_of(gpu), bufs[gpu], R[gpu].seq,
                                       passes.bwd ? bwd[grp].slots[gpu].grad_final : none, cuda::layer_side(w, G, grp));
          int k = 0;
          for (const cuda::A2a* e : {&hx.fwd_in, &hx.fwd_out, &hx.bwd_in, &hx.bwd_out})
            a2a[grp][gpu][k++] = cuda::upload_a2a(R[gpu], *e);
        }
    }
    const int fwd_steps = fwd[0].num_steps(), bwd_steps = passes.bwd ? bwd[0].num_steps() : 0;
    const bool sendrecv = opt_.a2a == "sendrecv";

    const int iters = std::max(1, opt_.iters), warmup = std::max(0, opt_.warmup);
    // The backward alone still needs the forward's out and LSE: one untimed forward first.
    const int prime = passes.fwd ? 0 : 1;
    std::vector<std::vector<std::vector<planner::StepTiming>>> runs;  // [iter][rank][step]
    std::barrier sync(int(local.size()));
    std::exception_ptr failure;
    std::mutex failure_lock;
    std::atomic<bool> abort{false};
    auto rank_main = [&](int gpu) {
      RankDevice& x = R[gpu];
      const int r = rank_of(gpu);
      try {
        TASP_CUDA(cudaSetDevice(x.dev));
        for (int it = -prime; it < warmup + iters; ++it) {
          const bool do_fwd = passes.fwd || it < 0, do_bwd = passes.bwd && it >= 0;
          TASP_CUDA(cudaDeviceSynchronize());
          sync.arrive_and_wait();
          if (env.multi_process())
            mpi_.barrier(opt_.timeout_s, "the start of " + std::string(it < 0 ? "the priming forward" : "run ") +
                                             (it < 0 ? "" : std::to_string(it + 1)));
          TASP_CUDA(cudaEventRecord(x.origin, x.compute));
          cudaEvent_t prev = x.origin;
          // One pass: without head parallelism its steps in order. Head-parallel: every head group's all-to-all
          // in on the comm stream (they depend on nothing), each group's steps once its own has arrived, then the
          // groups' all-to-alls out as their steps end: group g+1's exchange runs beside group g's kernels.
          auto run_pass = [&](const std::vector<cuda::PassWork>& pw, bool backward) {
            const int in = backward ? 2 : 0;
            if (u > 1)
              for (int grp = 0; grp < G; ++grp)
                cuda::issue_a2a(x, a2a[grp][gpu][in], w, u, sendrecv, &x.groups[grp].ev_a2a[kStepEvents * in], prev);
            std::vector<cudaEvent_t> ends(G);
            for (int grp = 0; grp < G; ++grp) {
              cuda::HeadGroupDevice& hg = x.groups[grp];
              cudaEvent_t p = prev;
              if (u > 1) {
                p = hg.ev_a2a[kStepEvents * in + 1];
                TASP_CUDA(cudaStreamWaitEvent(x.compute, p));
              }
              std::vector<cudaEvent_t>& ev = backward ? hg.ev_bwd : hg.ev_fwd;
              for (int t = 0; t < pw[grp].num_steps(); ++t)
                cuda::issue_step(x, hg.buf, pw[grp], g, sw, gpu, r, t, &ev[kStepEvents * t], p), p = ev[kStepEvents * t + 4];
              ends[grp] = p;
            }
            prev = ends.back();
            if (u > 1) {
              for (int grp = 0; grp < G; ++grp) {
                cudaEvent_t* e = &x.groups[grp].ev_a2a[kStepEvents * (in + 1)];
                cuda::issue_a2a(x, a2a[grp][gpu][in + 1], w, u, sendrecv, e, ends[grp]);
                prev = e[1];
              }
              TASP_CUDA(cudaStreamWaitEvent(x.compute, prev));  // the pass ends when its last exchange has
            }
          };
          if (do_fwd) run_pass(fwd, false);
          if (do_bwd) run_pass(bwd, true);
          TASP_CUDA(cudaEventRecord(x.done, x.compute));  // after the last step's adds (and exchanges)
          // Wait with a deadline: a peer that never posts its half of a transfer must not hang the run.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt_.timeout_s);
          while (cudaEventQuery(x.done) == cudaErrorNotReady) {
            ncclResult_t async = ncclSuccess;
            ncclCommGetAsyncError(x.nccl, &async);
            for (ncclComm_t c : x.roots)
              if (async == ncclSuccess || async == ncclInProgress) ncclCommGetAsyncError(c, &async);
            if (async != ncclSuccess && async != ncclInProgress)
              throw std::runtime_error(std::string("NCCL error during the run: ") + ncclGetErrorString(async));
            if (abort.load()) throw std::runtime_error("another rank failed");
            if (std::chrono::steady_clock::now() > deadline)
              throw std::runtime_error("GPU " + std::to_string(gpu) + " (rank " + std::to_string(r) + "): " +
                                       pending_step(x, do_fwd ? fwd : bwd, do_fwd && do_bwd ? &bwd : nullptr, r) +
                                       " did not finish within " + std::to_string(opt_.timeout_s) + " s");
            std::this_thread::sleep_for(std::chrono::microseconds(50));
          }
          TASP_CUDA(cudaGetLastError());
          if (gpu == local.front() && opt_.progress) opt_.progress(it + prime + 1, warmup + iters + prime);
          if (it < warmup) continue;
          // The timeline of a pass: the head groups' all-to-alls in, every group's steps, the all-to-alls out.
          std::vector<planner::StepTiming> tl;
          auto timed = [&](const std::vector<cuda::PassWork>& pw, bool backward) {
            const int in = backward ? 2 : 0;
            auto exchanged = [&](int k) {
              if (u > 1)
                for (int grp = 0; grp < G; ++grp)
                  tl.push_back(cuda::step_timing(x.origin, &x.groups[grp].ev_a2a[kStepEvents * k], a2a[grp][gpu][k].bytes, 0, false));
            };
            exchanged(in);
            for (int grp = 0; grp < G; ++grp) {
              const std::vector<cudaEvent_t>& ev = backward ? x.groups[grp].ev_bwd : x.groups[grp].ev_fwd;
              for (int t = 0; t < pw[grp].num_steps(); ++t)
                tl.push_back(cuda::step_timing(x.origin, &ev[kStepEvents * t], pw[grp].bytes[r][t], pw[grp].flops[r][t],
                                               backward && !pw[grp].slots[gpu].steps[t].grad_add.empty()));
            }
            exchanged(in + 1);
          };
          if (passes.fwd) timed(fwd, false);
          if (passes.bwd) timed(bwd, true);
          std::lock_guard<std::mutex> lk(failure_lock);
          if (int(runs.size()) <= it - warmup) runs.resize(it - warmup + 1, std::vector<std::vector<planner::StepTiming>>(n));
          runs[it - warmup][gpu] = std::move(tl);
        }
      } catch (...) {
        abort = true;
        std::lock_guard<std::mutex> lk(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    };
    if (env.multi_process()) {
      rank_main(env.rank);  // MPI is called from this thread only
    } else {
      std::vector<std::thread> threads;
      for (int r : local) threads.emplace_back(rank_main, r);
      for (auto& th : threads) th.join();
    }
    if (failure) {
      for (int r : local) R[r].abort_comms();
      // Under a launcher the peers may wait in NCCL or MPI calls that nothing else ends: end the job, saying why.
      if (env.multi_process()) {
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          mpi_.abort("rank " + std::to_string(env.rank) + ": " + e.what());
        }
      }
      std::rethrow_exception(failure);
    }
    const int a2a_steps = u > 1 ? 2 : 0;
    const int steps = (passes.fwd ? G * (fwd_steps + a2a_steps) : 0) + (passes.bwd ? G * (bwd_steps + a2a_steps) : 0);
    double own_bytes = 0, used_bytes = 0;
    for (int r : local) {
      TASP_CUDA(cudaSetDevice(R[r].dev));
      own_bytes = std::max(own_bytes, R[r].bytes + double(kernels::workspace_device_bytes(R[r].ws)));
      used_bytes = std::max(used_bytes, cuda::device_used_bytes() - R[r].used_before);
    }
    // Outputs of the last iteration per rank, in the order they are gathered: out, lse (and dq; then each
    // own piece's dk, dv).
    auto rank_outputs = [&](int r) {
      std::vector<std::vector<float>> o;
      RankDevice& x = R[r];
      TASP_CUDA(cudaSetDevice(x.dev));
      auto get = [&](const float* p, size_t cnt) {
        std::vector<float> h(cnt);
        TASP_CUDA(cudaMemcpy(h.data(), p, cnt * 4, cudaMemcpyDeviceToHost));
        o.push_back(std::move(h));
      };
      const size_t nq = size_t(w.B) * g.qrows[r] * w.H * w.D, nl = size_t(w.B) * w.H * g.qrows[r];
      const cuda::RankBuffers& b = x.groups[0].buf;  // one head group: u = 1 here
      get(b.out, nq), get(b.lse, nl);
      if (passes.bwd) {
        get(b.dq, nq);
        const auto& fin = bwd[0].slots[r].grad_final;  // u = 1: GPU = rank
        for (int c = 0; c < g.P; ++c) {
          auto f = fin.find(g.key(r, c));
          if (f == fin.end()) {  // never computed on: no gradient (only an invalid plan does that)
            o.emplace_back(se / 2, 0.f), o.emplace_back(se / 2, 0.f);
            continue;
          }
          get(b.grad + se * f->second, se / 2);
          get(b.grad + se * f->second + g.half_slot(), se / 2);
        }
      }
      return o;
    };
    if (env.multi_process()) {
      // Rank 0 collects every rank's timings (8 numbers per step and iteration) and, with host inputs, outputs.
      std::vector<double> mine;
      for (const auto& it : runs)
        for (const auto& st : it[env.rank])
          for (double v : {st.comm_start_us, st.comm_end_us, st.compute_start_us, st.compute_end_us, st.bytes, st.flops,
                           st.post_start_us, st.post_end_us})
            mine.push_back(v);
      std::vector<double> all = mpi_.gather(mine);
      if (env.rank != 0) {
        if (host_inputs)
          for (const auto& h : rank_outputs(env.rank)) mpi_.send(h.data(), h.size() * 4, 0);
        Result none;
        none.reporter = false;
        release_all();
        return none;
      }
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < runs.size(); ++i) {
          runs[i][r].resize(steps);
          for (int t = 0; t < steps; ++t) {
            const double* v = &all[((size_t(r) * runs.size() + i) * steps + t) * 8];
            runs[i][r][t] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
          }
        }
    }
    // Report the iteration with the median total.
    std::vector<std::pair<double, size_t>> totals;
    for (size_t i = 0; i < runs.size(); ++i) {
      planner::Timeline t;
      t.per_rank = runs[i];
      totals.push_back({t.total_us(), i});
    }
    std::sort(totals.begin(), totals.end());
    Result res;
    res.timeline.source = "cuda";
    res.timeline.scheme = plan.scheme;
    res.timeline.ranks = n;
    res.timeline.pass = planner::passes_name(passes);
    res.timeline.fwd_steps = passes.fwd ? G * (fwd_steps + a2a_steps) : 0;
    res.timeline.per_rank = runs[totals[totals.size() / 2].second];
    res.device_bytes = own_bytes, res.device_used_bytes = used_bytes;
    for (auto& [tot, i] : totals) res.iteration_totals_us.push_back(tot);
    if (host_inputs && u > 1) {
      head_parallel_outputs(R, g, w, u, G, passes, res);
    } else if (host_inputs) {
      res.out.assign(size_t(w.B) * w.S * w.H * w.D, 0.0);
      res.lse.assign(size_t(w.B) * w.S * w.H, 0.0);
      if (passes.bwd) {
        res.dq.assign(res.out.size(), 0.0);
        res.dk.assign(size_t(w.B) * w.S * g.row_elems, 0.0);
        res.dv.assign(res.dk.size(), 0.0);
      }
      for (int r = 0; r < n; ++r) {
        std::vector<std::vector<float>> o;
        if (std::find(local.begin(), local.end(), r) != local.end()) {
          o = rank_outputs(r);
        } else {
          const size_t nq = size_t(w.B) * g.qrows[r] * w.H * w.D, nl = size_t(w.B) * w.H * g.qrows[r];
          std::vector<size_t> sizes{nq, nl};
          if (passes.bwd) {
            sizes.push_back(nq);
            for (int c = 0; c < 2 * g.P; ++c) sizes.push_back(se / 2);
          }
          for (size_t cnt : sizes) {
            o.emplace_back(cnt);
            mpi_.recv(o.back().data(), cnt * 4, r);
          }
        }
        const long hd = long(w.H) * w.D;
        for (int b = 0; b < w.B; ++b) {
          long row = 0;
          for (const Range& rg : g.qranges[r])
            for (long tkn = rg.begin; tkn < rg.end; ++tkn, ++row) {
              for (long e = 0; e < hd; ++e) {
                const size_t src = (size_t(b) * g.qrows[r] + row) * hd + e, dst = (size_t(b) * w.S + tkn) * hd + e;
                res.out[dst] = o[0][src];
                if (passes.bwd) res.dq[dst] = o[2][src];
              }
              for (int h = 0; h < w.H; ++h)
                res.lse[(size_t(b) * w.S + tkn) * w.H + h] = o[1][(size_t(b) * w.H + h) * g.qrows[r] + row];
            }
        }
        if (!passes.bwd) continue;
        for (int c = 0; c < g.P; ++c) {
          const std::vector<float>&dk = o[3 + 2 * c], &dv = o[4 + 2 * c];
          for (int b = 0; b < w.B; ++b) {
            long j = 0;
            for (const Range& rg : g.pranges[g.key(r, c)])
              for (long tkn = rg.begin; tkn < rg.end; ++tkn, ++j)
                for (long e = 0; e < g.row_elems; ++e) {
                  const size_t src = (size_t(b) * g.max_piece + j) * g.row_elems + e, dst = (size_t(b) * w.S + tkn) * g.row_elems + e;
                  res.dk[dst] = dk[src], res.dv[dst] = dv[src];
                }
          }
        }
      }
    }
    release_all();
    return res;
  } catch (...) {
    release_all();
    throw;
  }
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& o) { return std::make_unique<CudaBackend>(o); }
bool has_cuda_backend() { return true; }

}  // namespace tasp::executor
