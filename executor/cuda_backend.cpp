// CUDA backend: one process drives all local GPUs, a host thread per rank. Each step: the step's
// transfers as one NCCL group of send/recv on a comm stream, the step's work list as one attention launch
// on a compute stream (folding into the running out/LSE), CUDA events around both. Received pieces go
// to slots chosen before the run (a slot is reused once its piece's last use is over), so nothing is
// allocated, copied or concatenated inside the steps and the host waits on nothing until the run ends.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <mutex>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>
#ifdef TASP_HAVE_MPI
#include <mpi.h>
#endif

#include "executor/backend.hpp"
#include "executor/launch_env.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "planner/layout.hpp"

namespace tasp::executor {
namespace {

using planner::Plan;
using planner::Range;

#define TASP_NCCL(call)                                                                                      \
  do {                                                                                                       \
    ncclResult_t r_ = (call);                                                                                \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                                           \
      throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(r_) + " in " #call);        \
  } while (0)

// Host-side bf16 conversion (round to nearest even) so the backend needs no device code of its own.
uint16_t to_bf16(double x) {
  float f = float(x);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

struct PieceGeom {
  std::vector<Range> ranges;  // global token ranges, stored one after the other
  long tokens = 0;
};

// Where every piece a rank ever holds lives: own pieces in their own slots, arrivals in reused slots.
struct SlotPlan {
  std::vector<std::map<long, int>> slot_at;  // per step: key -> slot holding it during that step (held set)
  int slots = 0;
};

// MPI for the one thing NCCL cannot do itself: getting the unique id from rank 0 to the others (and
// collecting results on rank 0). Without MPI in the build, multi-process launches are refused.
class Mpi {
 public:
  void start() {
#ifdef TASP_HAVE_MPI
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owned_ = true;
    }
#else
    throw std::invalid_argument("cuda backend: launched as several processes, but this build has no MPI");
#endif
  }
  ~Mpi() {
#ifdef TASP_HAVE_MPI
    if (owned_) MPI_Finalize();
#endif
  }
#ifdef TASP_HAVE_MPI
  void broadcast(void* p, size_t bytes) { MPI_Bcast(p, int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); }
  void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  std::vector<double> gather(const std::vector<double>& mine) {
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::vector<double> all(rank == 0 ? mine.size() * size : 0);
    MPI_Gather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return all;
  }
  void send(const void* p, size_t bytes, int to) { MPI_Send(p, int(bytes), MPI_BYTE, to, 7, MPI_COMM_WORLD); }
  void recv(void* p, size_t bytes, int from) { MPI_Recv(p, int(bytes), MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
#else
  void broadcast(void*, size_t) {}
  void barrier() {}
  std::vector<double> gather(const std::vector<double>& mine) { return mine; }
  void send(const void*, size_t, int) {}
  void recv(void*, size_t, int) {}
#endif

 private:
  bool owned_ = false;
};

template <class RankState>
void release(std::vector<RankState>& R, const std::vector<int>& local, std::vector<ncclComm_t>& comms) {
  for (int r : local) {
    cudaSetDevice(R[r].dev);
    for (auto& e : R[r].ev) cudaEventDestroy(e);
    cudaStreamDestroy(R[r].comm), cudaStreamDestroy(R[r].compute);
    cudaFree(R[r].q), cudaFree(R[r].kv), cudaFree(R[r].out), cudaFree(R[r].lse);
    ncclCommDestroy(comms[r]);
  }
}

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(CudaOptions o) : opt_(o) {}
  std::string name() const override { return "cuda"; }
  Result run(const Plan& plan, const Problem& pr, planner::Passes passes) override;
  bool makes_own_inputs() const override { return true; }
  bool single_device_reference(const Problem& pr, planner::Passes passes, Result& ref) override;

 private:
  CudaOptions opt_;
  Mpi mpi_;
};

Result CudaBackend::run(const Plan& plan, const Problem& pr, planner::Passes passes) {
  if (passes.bwd) throw std::invalid_argument("cuda backend: the backward pass does not run on GPUs yet (use --pass fwd)");
  const auto& w = pr.w;
  const int n = plan.ranks, P = plan.pieces_per_rank, steps = plan.num_steps();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw std::invalid_argument("cuda backend: no CUDA device visible");
  if (!kernels::head_dim_supported(w.D)) throw std::invalid_argument("cuda backend: D must be 64 or 128");
  if (w.causal != plan.causal) throw std::invalid_argument("workload and plan disagree on causal");
  const bool host_inputs = !pr.q.empty();
  const long row_elems = long(w.Hkv) * w.D;  // per token of K or V

  // Geometry: query ranges per rank, token ranges per piece.
  auto key = [P](int owner, int piece) { return long(owner) * P + piece; };
  std::vector<std::vector<Range>> qranges(n);
  std::vector<long> qrows(n, 0);
  std::vector<PieceGeom> geom(size_t(n) * P);
  long max_piece = 0;
  for (int r = 0; r < n; ++r) {
    qranges[r] = planner::shard_ranges(plan.layout, n, w.S, r);
    for (auto& q : qranges[r]) qrows[r] += q.size();
    for (int c = 0; c < P; ++c) {
      PieceGeom& g = geom[key(r, c)];
      g.ranges = planner::piece_ranges(plan.layout, n, P, w.S, r, c);
      for (auto& x : g.ranges) g.tokens += x.size();
      max_piece = std::max(max_piece, g.tokens);
    }
  }
  // Steps and slot assignment per rank.
  std::vector<planner::Step> step_list(steps);
  for (int t = 0; t < steps; ++t) {
    planner::Step scratch;
    step_list[t] = planner::step_at(plan, t, scratch);
  }
  std::vector<std::map<long, int>> last_use(n);
  for (int t = 0; t < steps; ++t) {
    for (auto& c : step_list[t].compute) last_use[c.rank][key(c.owner, c.piece)] = t;
    for (auto& x : step_list[t].transfers) last_use[x.src][key(x.owner, x.piece)] = t;
  }
  // slot_of[r][t]: the slot each arrival of step t goes to; own pieces take slots 0..P-1.
  std::vector<std::vector<std::map<long, int>>> arrival_slot(n, std::vector<std::map<long, int>>(steps));
  std::vector<std::map<long, int>> where(n);  // key -> slot, as of the step being planned
  std::vector<int> slots(n, P);
  for (int r = 0; r < n; ++r) {
    std::vector<int> free_slots;
    std::map<long, int> held;
    for (int c = 0; c < P; ++c) held[key(r, c)] = c;
    std::vector<std::pair<long, int>> arriving;
    for (int t = 0; t < steps; ++t) {
      for (auto& x : step_list[t].transfers)
        if (x.dst == r) {
          int s;
          if (!free_slots.empty()) s = free_slots.back(), free_slots.pop_back();
          else s = slots[r]++;
          arrival_slot[r][t][key(x.owner, x.piece)] = s;
          arriving.push_back({key(x.owner, x.piece), s});
        }
      // After step t: free pieces whose last use was t; arrivals become held.
      for (auto it = held.begin(); it != held.end();) {
        auto lu = last_use[r].find(it->first);
        if (lu == last_use[r].end() || lu->second <= t) free_slots.push_back(it->second), it = held.erase(it);
        else ++it;
      }
      for (auto& [k, s] : arriving) held[k] = s;
      arriving.clear();
    }
  }

  // Per-rank device state.
  struct Rank {
    int dev;
    cudaStream_t comm, compute;
    void* q = nullptr;
    void* kv = nullptr;  // slots x [K | V], each [B, max_piece, Hkv, D] bf16
    float *out = nullptr, *lse = nullptr;
    std::vector<cudaEvent_t> ev;  // per step: comm start, comm end, compute start, compute end; then origin
    kernels::Workspace ws;
    ncclComm_t nccl = nullptr;
  };
  std::vector<Rank> R(n);
  const size_t slot_elems = size_t(w.B) * max_piece * row_elems * 2;
  // Which ranks this process drives: all of them, or under a launcher the one it was given.
  const LaunchEnv env = launch_env_from_process();
  std::vector<int> local;
  std::vector<ncclComm_t> comms(n, nullptr);
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast stays off on shared machines unless set otherwise
  if (env.multi_process()) {
    if (env.size != n)
      throw std::invalid_argument("cuda backend: launched as " + std::to_string(env.size) + " processes (" + env.launcher +
                                  ") for a plan of " + std::to_string(n) + " ranks");
    local = {env.rank};
    mpi_.start();
    ncclUniqueId id;
    if (env.rank == 0) TASP_NCCL(ncclGetUniqueId(&id));
    mpi_.broadcast(&id, sizeof id);
    TASP_CUDA(cudaSetDevice(env.local_rank % devices));
    TASP_NCCL(ncclCommInitRank(&comms[env.rank], n, id, env.rank));
  } else {
    if (n > devices)
      throw std::invalid_argument("cuda backend: the plan has " + std::to_string(n) + " ranks but this machine has " +
                                  std::to_string(devices) + " GPU(s) (one process drives the local GPUs; use mpirun or srun "
                                  "for more)");
    std::vector<int> devs(n);
    for (int r = 0; r < n; ++r) devs[r] = r, local.push_back(r);
    TASP_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  }
  for (int r : local) {
    Rank& x = R[r];
    x.dev = env.multi_process() ? env.local_rank % devices : r;
    x.nccl = comms[r];
    TASP_CUDA(cudaSetDevice(x.dev));
    TASP_CUDA(cudaStreamCreateWithFlags(&x.comm, cudaStreamNonBlocking));
    TASP_CUDA(cudaStreamCreateWithFlags(&x.compute, cudaStreamNonBlocking));
    TASP_CUDA(cudaMalloc(&x.q, size_t(w.B) * qrows[r] * w.H * w.D * 2));
    TASP_CUDA(cudaMalloc(&x.kv, slot_elems * 2 * slots[r]));
    TASP_CUDA(cudaMalloc(&x.out, size_t(w.B) * qrows[r] * w.H * w.D * 4));
    TASP_CUDA(cudaMalloc(&x.lse, size_t(w.B) * w.H * qrows[r] * 4));
    x.ev.resize(4 * steps + 2);  // per step 4, then the iteration's origin and its end
    for (auto& e : x.ev) TASP_CUDA(cudaEventCreate(&e));
    // Inputs: this rank's queries and its own pieces, from the host problem or random on the device.
    auto slot_ptr = [&](int s) { return static_cast<uint16_t*>(x.kv) + slot_elems * s; };
    if (host_inputs) {
      std::vector<uint16_t> h(size_t(w.B) * qrows[r] * w.H * w.D);
      size_t i = 0;
      for (int b = 0; b < w.B; ++b)
        for (auto& rg : qranges[r])
          for (long tkn = rg.begin; tkn < rg.end; ++tkn)
            for (long e = 0; e < long(w.H) * w.D; ++e) h[i++] = to_bf16(pr.q[(size_t(b) * w.S + tkn) * w.H * w.D + e]);
      TASP_CUDA(cudaMemcpy(x.q, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
      for (int c = 0; c < P; ++c) {
        const PieceGeom& g = geom[key(r, c)];
        std::vector<uint16_t> kvh(slot_elems, 0);
        for (int half = 0; half < 2; ++half) {
          const auto& src = half ? pr.v : pr.k;
          size_t j = size_t(half) * slot_elems / 2;
          for (int b = 0; b < w.B; ++b) {
            size_t jb = j + size_t(b) * max_piece * row_elems;
            for (auto& rg : g.ranges)
              for (long tkn = rg.begin; tkn < rg.end; ++tkn)
                for (long e = 0; e < row_elems; ++e) kvh[jb++] = to_bf16(src[(size_t(b) * w.S + tkn) * row_elems + e]);
          }
        }
        TASP_CUDA(cudaMemcpy(slot_ptr(c), kvh.data(), slot_elems * 2, cudaMemcpyHostToDevice));
      }
    } else {
      kernels::fill_random(x.q, kernels::DType::BF16, size_t(w.B) * qrows[r] * w.H * w.D, 17 + r, nullptr);
      for (int c = 0; c < P; ++c) kernels::fill_random(slot_ptr(c), kernels::DType::BF16, slot_elems, 1000 + key(r, c), nullptr);
    }
    TASP_CUDA(cudaDeviceSynchronize());
  }

  // The work list of rank r in step t: one item per query range, over every piece it computes on.
  auto work_list = [&](int r, int t, const std::map<long, int>& slot_of, bool accumulate) {
    kernels::AttentionBatch b;
    b.dtype = kernels::DType::BF16, b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
    b.q = R[r].q, b.q_rows = int(qrows[r]), b.out = R[r].out, b.lse = R[r].lse;
    for (const auto& c : step_list[t].compute) {
      if (c.rank != r) continue;
      const long k = key(c.owner, c.piece);
      const auto* base = static_cast<const uint16_t*>(R[r].kv) + slot_elems * slot_of.at(k);
      long off = 0;
      for (const auto& rg : geom[k].ranges) {
        kernels::KvPiece kp;
        kp.k = base + off * row_elems;
        kp.v = base + slot_elems / 2 + off * row_elems;
        kp.len = int(rg.size()), kp.pos0 = rg.begin, kp.batch_stride = max_piece * row_elems;
        b.pieces.push_back(kp);
        off += rg.size();
      }
    }
    int row = 0;
    for (const auto& rg : qranges[r]) {
      kernels::WorkItem it;
      it.q_row0 = row, it.q_len = int(rg.size()), it.q_pos0 = rg.begin;
      it.piece_begin = 0, it.piece_count = int(b.pieces.size());
      it.causal = w.causal, it.accumulate = accumulate;
      b.items.push_back(it);
      row += int(rg.size());
    }
    return b;
  };

  // Held slots per rank and step, replayed the same way as the assignment above.
  std::vector<std::vector<std::map<long, int>>> held_at(n, std::vector<std::map<long, int>>(steps));
  for (int r = 0; r < n; ++r) {
    std::map<long, int> held;
    for (int c = 0; c < P; ++c) held[key(r, c)] = c;
    for (int t = 0; t < steps; ++t) {
      held_at[r][t] = held;
      for (auto it = held.begin(); it != held.end();) {
        auto lu = last_use[r].find(it->first);
        if (lu == last_use[r].end() || lu->second <= t) it = held.erase(it);
        else ++it;
      }
      for (auto& [k, s] : arrival_slot[r][t]) held[k] = s;
    }
  }
  std::vector<std::vector<kernels::AttentionBatch>> batches(n, std::vector<kernels::AttentionBatch>(steps));
  for (int r : local) {
    bool first = true;
    for (int t = 0; t < steps; ++t) {
      batches[r][t] = work_list(r, t, held_at[r][t], !first);
      if (!batches[r][t].pieces.empty()) first = false;
    }
  }

  // What each rank sends and computes per step, for the timeline (the same in every iteration).
  std::vector<std::vector<double>> step_bytes(n, std::vector<double>(steps, 0)), step_flops = step_bytes;
  for (int t = 0; t < steps; ++t) {
    for (const auto& tr : step_list[t].transfers)
      step_bytes[tr.src][t] += double(geom[key(tr.owner, tr.piece)].tokens) * w.B * row_elems * 2 * 2;
    for (const auto& c : step_list[t].compute)
      for (const auto& q : qranges[c.rank])
        for (const auto& k : geom[key(c.owner, c.piece)].ranges)
          step_flops[c.rank][t] += 4.0 * planner::visible_pairs(q, k, w.causal) * w.B * w.H * w.D;
  }

  const int iters = std::max(1, opt_.iters), warmup = std::max(0, opt_.warmup);
  std::vector<std::vector<std::vector<planner::StepTiming>>> runs;  // [iter][rank][step]
  std::barrier sync(int(local.size()));
  std::exception_ptr failure;
  std::mutex failure_lock;
  std::atomic<bool> abort{false};
  auto rank_main = [&](int r) {
    Rank& x = R[r];
    try {
      TASP_CUDA(cudaSetDevice(x.dev));
      for (int it = 0; it < warmup + iters; ++it) {
        TASP_CUDA(cudaDeviceSynchronize());
        sync.arrive_and_wait();
        if (env.multi_process()) mpi_.barrier();
        cudaEvent_t origin = x.ev[4 * steps], done = x.ev[4 * steps + 1];
        TASP_CUDA(cudaEventRecord(origin, x.compute));
        TASP_CUDA(cudaStreamWaitEvent(x.comm, origin));
        for (int t = 0; t < steps; ++t) {
          cudaEvent_t* e = &x.ev[4 * t];
          // Comm of step t writes slots freed by step t-1's compute and sends: wait for that compute.
          if (t > 0) TASP_CUDA(cudaStreamWaitEvent(x.comm, e[-1]));
          TASP_CUDA(cudaEventRecord(e[0], x.comm));
          TASP_NCCL(ncclGroupStart());
          for (const auto& tr : step_list[t].transfers) {
            const long k = key(tr.owner, tr.piece);
            if (tr.src == r) {
              auto* p = static_cast<uint16_t*>(x.kv) + slot_elems * held_at[r][t].at(k);
              TASP_NCCL(ncclSend(p, slot_elems, ncclBfloat16, tr.dst, x.nccl, x.comm));
            }
            if (tr.dst == r) {
              auto* p = static_cast<uint16_t*>(x.kv) + slot_elems * arrival_slot[r][t].at(k);
              TASP_NCCL(ncclRecv(p, slot_elems, ncclBfloat16, tr.src, x.nccl, x.comm));
            }
          }
          TASP_NCCL(ncclGroupEnd());
          TASP_CUDA(cudaEventRecord(e[1], x.comm));
          // Compute of step t uses what arrived in step t-1.
          if (t > 0) TASP_CUDA(cudaStreamWaitEvent(x.compute, e[-3]));
          TASP_CUDA(cudaEventRecord(e[2], x.compute));
          if (!batches[r][t].pieces.empty()) kernels::attention_forward(batches[r][t], x.ws, x.compute);
          TASP_CUDA(cudaEventRecord(e[3], x.compute));
          // The step ends when both streams are done (the next comm waits for this compute above).
          TASP_CUDA(cudaStreamWaitEvent(x.compute, e[1]));
        }
        TASP_CUDA(cudaEventRecord(done, x.compute));  // after the last compute and (waited on) the last comm
        // Wait with a deadline: a peer that never posts its half of a transfer must not hang the run.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt_.timeout_s);
        while (cudaEventQuery(done) == cudaErrorNotReady) {
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(x.nccl, &async);
          if (async != ncclSuccess && async != ncclInProgress)
            throw std::runtime_error(std::string("NCCL error during the run: ") + ncclGetErrorString(async));
          if (abort.load()) throw std::runtime_error("another rank failed");
          if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error("rank " + std::to_string(r) + ": the steps did not finish within " +
                                     std::to_string(opt_.timeout_s) + " s (NCCL peer missing?)");
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        TASP_CUDA(cudaGetLastError());
        if (it >= warmup) {
          std::vector<planner::StepTiming> tl(steps);
          for (int t = 0; t < steps; ++t) {
            float v[4];
            for (int k = 0; k < 4; ++k) TASP_CUDA(cudaEventElapsedTime(&v[k], origin, x.ev[4 * t + k]));
            tl[t].comm_start_us = v[0] * 1e3, tl[t].comm_end_us = v[1] * 1e3;
            tl[t].compute_start_us = v[2] * 1e3, tl[t].compute_end_us = v[3] * 1e3;
            tl[t].bytes = step_bytes[r][t], tl[t].flops = step_flops[r][t];
          }
          std::lock_guard<std::mutex> g(failure_lock);
          if (int(runs.size()) <= it - warmup) runs.resize(it - warmup + 1, std::vector<std::vector<planner::StepTiming>>(n));
          runs[it - warmup][r] = std::move(tl);
        }
      }
    } catch (...) {
      abort = true;
      std::lock_guard<std::mutex> g(failure_lock);
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
    for (int r : local) ncclCommAbort(comms[r]);
    std::rethrow_exception(failure);
  }
  if (env.multi_process()) {
    // Rank 0 collects every rank's timings (6 numbers per step and iteration) and, for --check, outputs.
    std::vector<double> mine;
    for (const auto& it : runs)
      for (const auto& st : it[env.rank])
        for (double v : {st.comm_start_us, st.comm_end_us, st.compute_start_us, st.compute_end_us, st.bytes, st.flops})
          mine.push_back(v);
    std::vector<double> all = mpi_.gather(mine);
    if (env.rank != 0) {
      if (host_inputs)
        for (float* p : {R[env.rank].out, R[env.rank].lse}) {
          const size_t cnt = p == R[env.rank].out ? size_t(w.B) * qrows[env.rank] * w.H * w.D : size_t(w.B) * w.H * qrows[env.rank];
          std::vector<float> h(cnt);
          TASP_CUDA(cudaMemcpy(h.data(), p, cnt * 4, cudaMemcpyDeviceToHost));
          mpi_.send(h.data(), cnt * 4, 0);
        }
      Result none;
      none.reporter = false;
      release(R, local, comms);
      return none;
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < runs.size(); ++i)
        for (int t = 0; t < steps; ++t) {
          const double* v = &all[((size_t(r) * runs.size() + i) * steps + t) * 6];
          runs[i][r].resize(steps);
          runs[i][r][t] = {v[0], v[1], v[2], v[3], v[4], v[5]};
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
  res.timeline.per_rank = runs[totals[totals.size() / 2].second];
  for (auto& [tot, i] : totals) res.iteration_totals_us.push_back(tot);
  // Outputs of the last iteration, in the global layout.
  if (host_inputs) {
    res.out.assign(size_t(w.B) * w.S * w.H * w.D, 0.0);
    res.lse.assign(size_t(w.B) * w.S * w.H, 0.0);
    for (int r = 0; r < n; ++r) {
      if (!env.multi_process()) TASP_CUDA(cudaSetDevice(r));
      std::vector<float> o(size_t(w.B) * qrows[r] * w.H * w.D), l(size_t(w.B) * w.H * qrows[r]);
      if (std::find(local.begin(), local.end(), r) != local.end()) {
        TASP_CUDA(cudaMemcpy(o.data(), R[r].out, o.size() * 4, cudaMemcpyDeviceToHost));
        TASP_CUDA(cudaMemcpy(l.data(), R[r].lse, l.size() * 4, cudaMemcpyDeviceToHost));
      } else {
        mpi_.recv(o.data(), o.size() * 4, r);
        mpi_.recv(l.data(), l.size() * 4, r);
      }
      for (int b = 0; b < w.B; ++b) {
        long row = 0;
        for (auto& rg : qranges[r])
          for (long tkn = rg.begin; tkn < rg.end; ++tkn, ++row) {
            for (long e = 0; e < long(w.H) * w.D; ++e)
              res.out[(size_t(b) * w.S + tkn) * w.H * w.D + e] = o[(size_t(b) * qrows[r] + row) * w.H * w.D + e];
            for (int h = 0; h < w.H; ++h)
              res.lse[(size_t(b) * w.S + tkn) * w.H + h] = l[(size_t(b) * w.H + h) * qrows[r] + row];
          }
      }
    }
  }
  release(R, local, comms);
  return res;
}

// The whole problem on GPU 0: one item, one piece, the same kernel.
bool CudaBackend::single_device_reference(const Problem& pr, planner::Passes passes, Result& ref) {
  if (passes.bwd) return false;
  std::vector<double>& out = ref.out;
  std::vector<double>& lse = ref.lse;
  const auto& w = pr.w;
  TASP_CUDA(cudaSetDevice(0));
  auto upload = [](const std::vector<double>& x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = to_bf16(x[i]);
    void* d = nullptr;
    TASP_CUDA(cudaMalloc(&d, h.size() * 2));
    TASP_CUDA(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
  };
  void *q = upload(pr.q), *k = upload(pr.k), *v = upload(pr.v);
  float *o, *l;
  const size_t no = size_t(w.B) * w.S * w.H * w.D, nl = size_t(w.B) * w.H * w.S;
  TASP_CUDA(cudaMalloc(&o, no * 4));
  TASP_CUDA(cudaMalloc(&l, nl * 4));
  kernels::AttentionBatch b;
  b.dtype = kernels::DType::BF16, b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
  b.q = q, b.q_rows = int(w.S), b.out = o, b.lse = l;
  b.pieces.push_back({k, v, int(w.S), 0, 0});
  b.items.push_back({0, int(w.S), 0, 0, 1, w.causal, false});
  kernels::Workspace ws;
  kernels::attention_forward(b, ws, nullptr);
  std::vector<float> ho(no), hl(nl);
  TASP_CUDA(cudaMemcpy(ho.data(), o, no * 4, cudaMemcpyDeviceToHost));
  TASP_CUDA(cudaMemcpy(hl.data(), l, nl * 4, cudaMemcpyDeviceToHost));
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(l);
  out.assign(ho.begin(), ho.end());
  lse.resize(size_t(w.B) * w.S * w.H);  // [B][S][H] like the backends' results
  for (int bb = 0; bb < w.B; ++bb)
    for (int h = 0; h < w.H; ++h)
      for (long s = 0; s < w.S; ++s) lse[(size_t(bb) * w.S + s) * w.H + h] = hl[(size_t(bb) * w.H + h) * w.S + s];
  return true;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& o) { return std::make_unique<CudaBackend>(o); }
bool has_cuda_backend() { return true; }

}  // namespace tasp::executor
