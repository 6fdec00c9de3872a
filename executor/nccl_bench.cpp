#include "executor/nccl_bench.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "executor/cuda_rank.hpp"
#include "executor/launch_env.hpp"
#include "executor/mpi_link.hpp"
#include "executor/rank_runner_state.hpp"
#include "kernels/cuda_check.hpp"

namespace tasp::executor {

#define TASP_NCCL_B(call)                                                                               \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) throw std::runtime_error(std::string("NCCL: ") + ncclGetErrorString(r_)); \
  } while (0)

int local_gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

namespace {

// The step kinds measured, in order; `per_root`: the gather and reduce-scatter one a root (CudaOptions::root_comms),
// and root 0's broadcast alone (CommProfile::one_root_gbps).
std::vector<std::string> step_kinds(bool per_root) {
  if (per_root) return {"ring", "multi", "pairs", "allgather-roots", "reducescatter-roots", "broadcast-one-root"};
  return {"ring", "multi", "pairs", "allgather", "reducescatter"};
}

int rounds_of(int iters) { return std::max(1, std::min(iters, 5)); }

// What one rank times its steps on: the group's communicator, and one a root where the gather goes so.
struct RankComms {
  int n = 0, r = 0;
  ncclComm_t comm = nullptr;
  std::vector<ncclComm_t> roots;  // [root]: this rank's member of root q's communicator
};

// This rank's mean time of one step, ms[point][round] (point = kind * sizes + size). Every rank of the group calls it
// together with the same arguments. Before each point's timing its ranks meet in a one-element all-reduce on the
// stream (so the timings start together wherever the ranks' hosts are), after `align()` on the host (threads: a
// barrier). `wait(event)` waits on the host for a point's end (a group: within its deadline).
std::vector<std::vector<double>> time_rank_steps(const RankComms& c, const std::vector<std::string>& kinds,
                                                 const std::vector<double>& sizes, int warmup, int iters,
                                                 const std::function<void()>& align,
                                                 const std::function<void(cudaEvent_t)>& wait,
                                                 const std::function<void(int, int)>& progress) {
  const int n = c.n, r = c.r;
  const double max_bytes = *std::max_element(sizes.begin(), sizes.end());
  const size_t points = kinds.size() * sizes.size();
  const int rounds = rounds_of(iters), per_round = (std::max(iters, 1) + rounds - 1) / rounds;
  std::vector<std::vector<double>> ms(points, std::vector<double>(size_t(rounds)));
  cudaStream_t s;
  TASP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *send, *recv;
  float* meet;
  // A reduce-scatter reads every owner's part: up to 2x the largest size (n = 2).
  TASP_CUDA(cudaMalloc(&send, size_t(max_bytes) * 2));
  TASP_CUDA(cudaMalloc(&recv, size_t(max_bytes) * 2));
  TASP_CUDA(cudaMalloc(&meet, sizeof(float)));
  TASP_CUDA(cudaMemset(send, 1, size_t(max_bytes) * 2));
  TASP_CUDA(cudaMemset(meet, 0, sizeof(float)));
  cudaEvent_t e0, e1, fork;
  TASP_CUDA(cudaEventCreate(&e0));
  TASP_CUDA(cudaEventCreate(&e1));
  TASP_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaStream_t> rs(c.roots.size());
  std::vector<cudaEvent_t> joins(c.roots.size());
  for (size_t q = 0; q < c.roots.size(); ++q) {
    TASP_CUDA(cudaStreamCreateWithFlags(&rs[q], cudaStreamNonBlocking));
    TASP_CUDA(cudaEventCreateWithFlags(&joins[q], cudaEventDisableTiming));
  }
  auto release = [&] {
    cudaFree(send), cudaFree(recv), cudaFree(meet);
    cudaStreamDestroy(s);
    for (size_t q = 0; q < rs.size(); ++q) cudaStreamDestroy(rs[q]), cudaEventDestroy(joins[q]);
    cudaEventDestroy(fork), cudaEventDestroy(e0), cudaEventDestroy(e1);
  };
  try {
    // Round by round over every (kind, size), each round starting one step further on: a slow minute of a shared
    // fabric (loopback sockets drift 2x over minutes, docs/measurements/fabrics.md) lands on every kind alike
    // instead of on the one measured in it; each point's figure is its rounds' median.
    for (int round = 0; round < rounds; ++round)
      for (size_t i = 0; i < points; ++i) {
        const size_t point = (i + size_t(round) * points / size_t(rounds)) % points;
        const size_t k = point / sizes.size(), z = point % sizes.size();
        const size_t B = size_t(sizes[z]), part = B / (n - 1);
        auto step = [&] {
          const std::string& kind = kinds[k];
          if (kind == "allgather") {
            TASP_NCCL_B(ncclAllGather(send, recv, part, ncclChar, c.comm, s));
            return;
          }
          // Reductions in bf16, as the accumulators travel (part / 2 elements a part).
          if (kind == "reducescatter") {
            TASP_NCCL_B(ncclReduceScatter(send, recv, part / 2, ncclBfloat16, ncclSum, c.comm, s));
            return;
          }
          if (kind == "broadcast-one-root") {  // as a step in which only root 0 sends (a pruned plan's)
            TASP_NCCL_B(ncclBroadcast(send, recv, part, ncclChar, 0, c.roots[0], s));
            return;
          }
          if (kind == "allgather-roots" || kind == "reducescatter-roots") {  // as cuda_rank.cpp's per_root
            TASP_CUDA(cudaEventRecord(fork, s));
            for (int q = 0; q < n; ++q) {
              TASP_CUDA(cudaStreamWaitEvent(rs[q], fork));
              char* block = send + size_t(q) * part;
              if (kind == "allgather-roots")
                TASP_NCCL_B(ncclBroadcast(send, recv + size_t(q) * part, part, ncclChar, q, c.roots[q], rs[q]));
              else if (cuda::reduce_as_broadcast(n)) {  // as issue_step moves it: owner 1 - q's block from q, in
                // place there, on q's communicator (its sender's)
                char* other = send + size_t(1 - q) * part;
                TASP_NCCL_B(ncclBroadcast(r == 1 - q ? recv : other, r == 1 - q ? recv : other, part / 2, ncclBfloat16,
                                          q, c.roots[q], rs[q]));
              } else
                TASP_NCCL_B(ncclReduce(block, recv, part / 2, ncclBfloat16, ncclSum, q, c.roots[q], rs[q]));
              TASP_CUDA(cudaEventRecord(joins[q], rs[q]));
            }
            for (cudaEvent_t j : joins) TASP_CUDA(cudaStreamWaitEvent(s, j));
            return;
          }
          TASP_NCCL_B(ncclGroupStart());
          if (kind == "ring") {
            TASP_NCCL_B(ncclSend(send, B, ncclChar, (r + 1) % n, c.comm, s));
            TASP_NCCL_B(ncclRecv(recv, B, ncclChar, (r + n - 1) % n, c.comm, s));
          } else if (kind == "pairs") {
            if ((r ^ 1) < n) {
              TASP_NCCL_B(ncclSend(send, B, ncclChar, r ^ 1, c.comm, s));
              TASP_NCCL_B(ncclRecv(recv, B, ncclChar, r ^ 1, c.comm, s));
            }
          } else {
            for (int o = 0; o < n; ++o)
              if (o != r) {
                TASP_NCCL_B(ncclSend(send + (o < r ? o : o - 1) * part, part, ncclChar, o, c.comm, s));
                TASP_NCCL_B(ncclRecv(recv + (o < r ? o : o - 1) * part, part, ncclChar, o, c.comm, s));
              }
          }
          TASP_NCCL_B(ncclGroupEnd());
        };
        for (int w = 0; w < (round == 0 ? warmup : std::min(warmup, 1)); ++w) step();
        TASP_CUDA(cudaEventRecord(e1, s));
        wait(e1);
        align();
        TASP_NCCL_B(ncclAllReduce(meet, meet, 1, ncclFloat, ncclSum, c.comm, s));
        TASP_CUDA(cudaEventRecord(e0, s));
        for (int it = 0; it < per_round; ++it) step();
        TASP_CUDA(cudaEventRecord(e1, s));
        wait(e1);
        float t = 0;
        TASP_CUDA(cudaEventElapsedTime(&t, e0, e1));
        ms[point][size_t(round)] = t / per_round;
        if (r == 0 && progress) progress(int(size_t(round) * points + i + 1), int(size_t(rounds) * points));
      }
  } catch (...) {
    release();
    throw;
  }
  release();
  return ms;
}

// Each point's figure from the slowest rank's time in each round, slowest[point][round]: the rounds' median.
std::vector<CommMeasurement> summarize(const std::vector<std::string>& kinds, const std::vector<double>& sizes, int n,
                                       const std::vector<std::vector<double>>& slowest, bool verbose) {
  std::vector<CommMeasurement> out;
  for (size_t k = 0; k < kinds.size(); ++k)
    for (size_t z = 0; z < sizes.size(); ++z) {
      std::vector<double> v = slowest[k * sizes.size() + z];
      std::sort(v.begin(), v.end());
      const size_t h = v.size() / 2;
      const double median = v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
      CommMeasurement m{kinds[k], n, sizes[z], 1e3 * median, 1e3 * v.front(), 1e3 * v.back()};
      if (verbose)  // the rounds' range beside the median: how much the fabric drifted while it was measured
        std::cerr << "  " << m.kind << " n=" << n << " " << m.bytes / 1048576 << " MiB: " << m.us << " us, "
                  << m.bytes / (m.us * 1e3) << " GB/s (rounds " << m.us_min << "-" << m.us_max << " us)\n";
      out.push_back(m);
    }
  return out;
}

}  // namespace

std::vector<CommMeasurement> measure_nccl_steps(int n, const std::vector<double>& sizes, int warmup, int iters,
                                                bool verbose, const std::function<void(int, int)>& progress, bool per_root) {
  int devices = local_gpu_count();
  if (devices == 0) throw std::invalid_argument("measuring NCCL steps: no CUDA device visible");
  if (n < 2 || n > devices)
    throw std::invalid_argument("measuring NCCL steps: need 2.." + std::to_string(devices) + " ranks on this machine, got " + std::to_string(n));
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int r = 0; r < n; ++r) devs[r] = r;
  TASP_NCCL_B(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<std::vector<ncclComm_t>> roots(per_root ? n : 0, std::vector<ncclComm_t>(n));  // [root][rank]
  for (auto& c : roots) TASP_NCCL_B(ncclCommInitAll(c.data(), n, devs.data()));
  const std::vector<std::string> kinds = step_kinds(per_root);
  std::vector<std::vector<std::vector<double>>> ms(n);  // [rank][point][round]
  std::barrier sync(n);
  std::exception_ptr failure;
  std::mutex lock;
  auto rank_main = [&](int r) {
    try {
      TASP_CUDA(cudaSetDevice(r));
      RankComms c{n, r, comms[r], {}};
      for (auto& set : roots) c.roots.push_back(set[r]);
      ms[r] = time_rank_steps(c, kinds, sizes, warmup, iters, [&] { sync.arrive_and_wait(); },
                              [](cudaEvent_t e) { TASP_CUDA(cudaEventSynchronize(e)); }, progress);
    } catch (...) {
      std::lock_guard<std::mutex> g(lock);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back(rank_main, r);
  for (auto& t : th) t.join();
  for (auto& c : comms) ncclCommDestroy(c);
  for (auto& set : roots)
    for (auto& c : set) ncclCommDestroy(c);
  if (failure) std::rethrow_exception(failure);
  std::vector<std::vector<double>> slowest = ms[0];
  for (int r = 1; r < n; ++r)
    for (size_t p = 0; p < slowest.size(); ++p)
      for (size_t q = 0; q < slowest[p].size(); ++q) slowest[p][q] = std::max(slowest[p][q], ms[r][p][q]);
  return summarize(kinds, sizes, n, slowest, verbose);
}

namespace {

std::vector<CommMeasurement> measure_on_group(RankGroup& g, const std::vector<double>& sizes, int warmup, int iters,
                                              bool per_root, int timeout_s, const std::function<void(int, int)>& progress) {
  if (g.ranks < 2) throw planner::InputError("group: measuring NCCL steps needs 2 ranks or more, the group has " + std::to_string(g.ranks));
  TASP_CUDA(cudaSetDevice(g.dev));
  const std::string what = "rank " + std::to_string(g.rank) + "'s fabric measuring";
  // A guard that aborts the group when no point ends within the deadline: NCCL connects a communicator's peers at its
  // first collective of a kind, the caller's thread blocked inside the call until the peer comes (a peer that never
  // joined the measuring hung rank 0 so, 2x H200, 2026-11-27), where no wait of ours can time it out.
  std::mutex beat_m;
  std::condition_variable beat_cv;
  auto last = Clock::now();
  bool over = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(beat_m);
    while (!over) {
      beat_cv.wait_for(lock, std::chrono::milliseconds(100));
      if (!over && Clock::now() - last > std::chrono::seconds(timeout_s)) {
        abort_group(g, what + " did not go on within " + std::to_string(timeout_s) + " s (a peer missing or stalled?)");
        return;
      }
    }
  });
  auto beat = [&](bool end) {
    std::lock_guard<std::mutex> lock(beat_m);
    last = Clock::now(), over = over || end;
    beat_cv.notify_all();
  };
  struct Join {  // the guard ends with this call, however it ends
    std::function<void()> f;
    ~Join() { f(); }
  } join{[&] {
    beat(true);
    guard.join();
  }};
  auto wait = [&](cudaEvent_t e) {
    wait_group_event(g, e, timeout_s, what);
    beat(false);
  };
  // The elementwise max of `v` over the group's ranks, on its communicator and stream, waited on within the deadline.
  auto group_max = [&](std::vector<double>& v) {
    double* d = nullptr;
    TASP_CUDA(cudaMalloc(&d, v.size() * sizeof(double)));
    cudaEvent_t done = nullptr;
    try {
      TASP_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice));
      TASP_NCCL_B(ncclAllReduce(d, d, v.size(), ncclDouble, ncclMax, comm_of(g), g.comm));
      TASP_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      TASP_CUDA(cudaEventRecord(done, g.comm));
      wait(done);
      TASP_CUDA(cudaMemcpy(v.data(), d, v.size() * sizeof(double), cudaMemcpyDeviceToHost));
    } catch (...) {
      cudaFree(d);
      if (done) cudaEventDestroy(done);
      throw;
    }
    cudaFree(d), cudaEventDestroy(done);
  };
  // Every rank here first, within the deadline: the splits into communicators one a root cannot be timed out.
  std::vector<double> here = {1};
  group_max(here);
  RankComms c{g.ranks, g.rank, comm_of(g), per_root ? roots_of(g) : std::vector<ncclComm_t>{}};
  const std::vector<std::string> kinds = step_kinds(per_root);
  const auto ms = time_rank_steps(c, kinds, sizes, warmup, iters, [] {}, wait, progress);
  // Every rank the slowest rank's time of each round, so that all fit the same profile and plan alike.
  std::vector<double> flat;
  for (const auto& p : ms) flat.insert(flat.end(), p.begin(), p.end());
  group_max(flat);
  const size_t rounds = ms[0].size();  // every point's
  std::vector<std::vector<double>> slowest(ms.size());
  for (size_t p = 0; p < ms.size(); ++p) slowest[p].assign(flat.begin() + long(p * rounds), flat.begin() + long((p + 1) * rounds));
  return summarize(kinds, sizes, g.ranks, slowest, false);
}

}  // namespace

std::vector<CommMeasurement> measure_group_steps(RankGroup& g, const std::vector<double>& sizes, int warmup, int iters,
                                                 bool per_root, int timeout_s,
                                                 const std::function<void(int, int)>& progress) {
  try {
    return measure_on_group(g, sizes, warmup, iters, per_root, timeout_s, progress);
  } catch (const std::runtime_error&) {
    rethrow_why_aborted(g);
  }
}

std::vector<CommMeasurement> measure_launched_steps(const std::vector<double>& sizes, int warmup, int iters, bool per_root,
                                                    int timeout_s, const std::function<void(int, int)>& progress) {
  const LaunchEnv env = launch_env_from_process();
  if (!env.multi_process()) throw std::invalid_argument("measuring NCCL steps a process a rank: not launched as several processes");
  const int devices = local_gpu_count();
  if (devices == 0) throw std::invalid_argument("measuring NCCL steps: no CUDA device visible");
  // Kept to the end of the process: the run that follows uses MPI too, and MPI is initialised once a process.
  static MpiLink link;
  link.start();
  unsigned char id[kNcclIdBytes] = {};
  if (env.rank == 0) make_nccl_id(id);
  link.broadcast(id, sizeof id);
  RankGroupPtr g = open_rank_group(env.size, env.rank, env.local_rank % devices, id);
  return measure_group_steps(*g, sizes, warmup, iters, per_root, timeout_s, env.rank == 0 ? progress : nullptr);
}

}  // namespace tasp::executor
