#pragma once
// MPI for the one thing NCCL cannot do itself: getting the unique id from rank 0 to the others (and
// collecting results on rank 0). Without MPI in the build (TASP_HAVE_MPI), multi-process launches are
// refused. Included by the cuda backend only. Every wait on another process has a deadline: a rank that stalls
// (SIGSTOP, a hung GPU) or dies must end the run within it, named, not be waited out; a rank that gives up ends the
// whole job (MPI_Abort), since its peers may sit in NCCL or MPI calls nothing else would end.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#ifdef TASP_HAVE_MPI
#include <mpi.h>
#endif

namespace tasp::executor {

class MpiLink {
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
  ~MpiLink() {
#ifdef TASP_HAVE_MPI
    if (owned_) MPI_Finalize();
#endif
  }
#ifdef TASP_HAVE_MPI
  void broadcast(void* p, size_t bytes) { MPI_Bcast(p, int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); }
  // A barrier with a deadline: rank 0 hears from every other rank, then lets them go. Past `seconds` rank 0 names the
  // ranks it did not hear from, the others name rank 0, and the job ends (abort).
  void barrier(int seconds, const std::string& where) {
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char mine = 1;
    std::vector<char> got(size, 0);
    std::vector<MPI_Request> req;
    if (rank == 0) {
      for (int r = 1; r < size; ++r) req.push_back(MPI_REQUEST_NULL), MPI_Irecv(&got[r], 1, MPI_BYTE, r, 11, MPI_COMM_WORLD, &req.back());
    } else {
      req.resize(2);
      MPI_Isend(&mine, 1, MPI_BYTE, 0, 11, MPI_COMM_WORLD, &req[0]);
      MPI_Irecv(&got[0], 1, MPI_BYTE, 0, 12, MPI_COMM_WORLD, &req[1]);
    }
    wait_all(req, seconds, [&] {
      if (rank != 0) return "rank " + std::to_string(rank) + ": " + where + ": rank 0 did not answer within " +
                            std::to_string(seconds) + " s (it names the rank it waits for)";
      std::string missing;
      for (int r = 1; r < size; ++r)
        if (!got[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      return "rank 0: " + where + ": waited " + std::to_string(seconds) + " s for rank(s) " + missing + " (stalled or gone)";
    });
    if (rank == 0) {
      req.clear();
      for (int r = 1; r < size; ++r) req.push_back(MPI_REQUEST_NULL), MPI_Isend(&mine, 1, MPI_BYTE, r, 12, MPI_COMM_WORLD, &req.back());
      wait_all(req, seconds, [&] { return "rank 0: " + where + ": could not release the other ranks within " + std::to_string(seconds) + " s"; });
    }
  }
  // Ends every process of the job after saying why (a failed or stalled run must not leave its peers waiting).
  [[noreturn]] void abort(const std::string& why, int code = 3) {
    std::fprintf(stderr, "tasp: %s\n", why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }
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
  void barrier(int, const std::string&) {}
  [[noreturn]] void abort(const std::string& why, int = 3) { throw std::runtime_error(why); }
  std::vector<double> gather(const std::vector<double>& mine) { return mine; }
  void send(const void*, size_t, int) {}
  void recv(void*, size_t, int) {}
#endif

 private:
#ifdef TASP_HAVE_MPI
  // Polls the requests until all are done; past `seconds` aborts the job with what `why()` says.
  template <class F>
  void wait_all(std::vector<MPI_Request>& req, int seconds, F why) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int done = 0;
    while (MPI_Testall(int(req.size()), req.data(), &done, MPI_STATUSES_IGNORE), !done) {
      if (std::chrono::steady_clock::now() > deadline) abort(why());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
#endif
  bool owned_ = false;
};

}  // namespace tasp::executor
