#include "executor/nccl_bench.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "executor/cuda_rank.hpp"
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
  const double max_bytes = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::string> kinds = {"ring", "multi", "pairs", per_root ? "allgather-roots" : "allgather",
                                    per_root ? "reducescatter-roots" : "reducescatter"};
  if (per_root) kinds.push_back("broadcast-one-root");  // root 0's alone (CommProfile::one_root_gbps)
  const size_t points = kinds.size() * sizes.size();
  const int rounds = std::max(1, std::min(iters, 5)), per_round = (std::max(iters, 1) + rounds - 1) / rounds;
  // [point][round][rank]
  std::vector<std::vector<std::vector<double>>> ms(points, std::vector<std::vector<double>>(rounds, std::vector<double>(n)));
  std::barrier sync(n);
  std::exception_ptr failure;
  std::mutex lock;
  auto rank_main = [&](int r) {
    try {
      TASP_CUDA(cudaSetDevice(r));
      cudaStream_t s;
      TASP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      char *send, *recv;
      // A reduce-scatter reads every owner's part: up to 2x the largest size (n = 2).
      TASP_CUDA(cudaMalloc(&send, size_t(max_bytes) * 2));
      TASP_CUDA(cudaMalloc(&recv, size_t(max_bytes) * 2));
      TASP_CUDA(cudaMemset(send, 1, size_t(max_bytes) * 2));
      cudaEvent_t e0, e1, fork;
      TASP_CUDA(cudaEventCreate(&e0));
      TASP_CUDA(cudaEventCreate(&e1));
      TASP_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      std::vector<cudaStream_t> rs(roots.size());
      std::vector<cudaEvent_t> joins(roots.size());
      for (size_t q = 0; q < roots.size(); ++q) {
        TASP_CUDA(cudaStreamCreateWithFlags(&rs[q], cudaStreamNonBlocking));
        TASP_CUDA(cudaEventCreateWithFlags(&joins[q], cudaEventDisableTiming));
      }
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
              TASP_NCCL_B(ncclAllGather(send, recv, part, ncclChar, comms[r], s));
              return;
            }
            // Reductions in bf16, as the accumulators travel (part / 2 elements a part).
            if (kind == "reducescatter") {
              TASP_NCCL_B(ncclReduceScatter(send, recv, part / 2, ncclBfloat16, ncclSum, comms[r], s));
              return;
            }
            if (kind == "broadcast-one-root") {  // as a step in which only root 0 sends (a pruned plan's)
              TASP_NCCL_B(ncclBroadcast(send, recv, part, ncclChar, 0, roots[0][r], s));
              return;
            }
            if (kind == "allgather-roots" || kind == "reducescatter-roots") {  // as cuda_rank.cpp's per_root
              TASP_CUDA(cudaEventRecord(fork, s));
              for (int q = 0; q < n; ++q) {
                TASP_CUDA(cudaStreamWaitEvent(rs[q], fork));
                char* block = send + size_t(q) * part;
                if (kind == "allgather-roots")
                  TASP_NCCL_B(ncclBroadcast(send, recv + size_t(q) * part, part, ncclChar, q, roots[q][r], rs[q]));
                else if (cuda::reduce_as_broadcast(n)) {  // as issue_step moves it: owner 1 - q's block from q, in
                  // place there, on q's communicator (its sender's)
                  char* other = send + size_t(1 - q) * part;
                  TASP_NCCL_B(ncclBroadcast(r == 1 - q ? recv : other, r == 1 - q ? recv : other, part / 2, ncclBfloat16, q,
                                            roots[q][r], rs[q]));
                }
                else
                  TASP_NCCL_B(ncclReduce(block, recv, part / 2, ncclBfloat16, ncclSum, q, roots[q][r], rs[q]));
                TASP_CUDA(cudaEventRecord(joins[q], rs[q]));
              }
              for (cudaEvent_t j : joins) TASP_CUDA(cudaStreamWaitEvent(s, j));
              return;
            }
            TASP_NCCL_B(ncclGroupStart());
            if (kind == "ring") {
              TASP_NCCL_B(ncclSend(send, B, ncclChar, (r + 1) % n, comms[r], s));
              TASP_NCCL_B(ncclRecv(recv, B, ncclChar, (r + n - 1) % n, comms[r], s));
            } else if (kind == "pairs") {
              if ((r ^ 1) < n) {
                TASP_NCCL_B(ncclSend(send, B, ncclChar, r ^ 1, comms[r], s));
                TASP_NCCL_B(ncclRecv(recv, B, ncclChar, r ^ 1, comms[r], s));
              }
            } else {
              for (int o = 0; o < n; ++o)
                if (o != r) {
                  TASP_NCCL_B(ncclSend(send + (o < r ? o : o - 1) * part, part, ncclChar, o, comms[r], s));
                  TASP_NCCL_B(ncclRecv(recv + (o < r ? o : o - 1) * part, part, ncclChar, o, comms[r], s));
                }
            }
            TASP_NCCL_B(ncclGroupEnd());
          };
          for (int w = 0; w < (round == 0 ? warmup : std::min(warmup, 1)); ++w) step();
          TASP_CUDA(cudaStreamSynchronize(s));
          sync.arrive_and_wait();
          TASP_CUDA(cudaEventRecord(e0, s));
          for (int it = 0; it < per_round; ++it) step();
          TASP_CUDA(cudaEventRecord(e1, s));
          TASP_CUDA(cudaEventSynchronize(e1));
          float t = 0;
          TASP_CUDA(cudaEventElapsedTime(&t, e0, e1));
          ms[point][size_t(round)][r] = t / per_round;
          if (r == 0 && progress) progress(int(size_t(round) * points + i + 1), int(size_t(rounds) * points));
          sync.arrive_and_wait();
        }
      cudaFree(send), cudaFree(recv);
      cudaStreamDestroy(s);
      for (size_t q = 0; q < rs.size(); ++q) cudaStreamDestroy(rs[q]), cudaEventDestroy(joins[q]);
      cudaEventDestroy(fork), cudaEventDestroy(e0), cudaEventDestroy(e1);
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
  std::vector<CommMeasurement> out;
  for (size_t k = 0; k < kinds.size(); ++k)
    for (size_t z = 0; z < sizes.size(); ++z) {
      std::vector<double> slowest;  // the slowest rank of each round
      for (const auto& v : ms[k * sizes.size() + z]) slowest.push_back(*std::max_element(v.begin(), v.end()));
      std::sort(slowest.begin(), slowest.end());
      const size_t h = slowest.size() / 2;
      const double median = slowest.size() % 2 ? slowest[h] : (slowest[h - 1] + slowest[h]) / 2;
      CommMeasurement m{kinds[k], n, sizes[z], 1e3 * median, 1e3 * slowest.front(), 1e3 * slowest.back()};
      if (verbose)  // the rounds' range beside the median: how much the fabric drifted while it was measured
        std::cerr << "  " << m.kind << " n=" << n << " " << m.bytes / 1048576 << " MiB: " << m.us << " us, "
                  << m.bytes / (m.us * 1e3) << " GB/s (rounds " << m.us_min << "-" << m.us_max << " us)\n";
      out.push_back(m);
    }
  return out;
}

}  // namespace tasp::executor
