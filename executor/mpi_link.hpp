#pragma once
// MPI for the one thing NCCL cannot do itself: getting the unique id from rank 0 to the others (and
// collecting results on rank 0). Without MPI in the build (TASP_HAVE_MPI), multi-process launches are
// refused. Included by the cuda backend only.
#include <cstddef>
#include <stdexcept>
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

}  // namespace tasp::executor
