#include "executor/launch_env.hpp"

#include <sched.h>

#include <cstdlib>
#include <stdexcept>

namespace tasp::executor {

LaunchEnv launch_env(const std::function<const char*(const char*)>& get) {
  struct Names {
    const char *launcher, *rank, *size, *local;
  };
  static const Names kinds[] = {{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                                {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
                                {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}};
  auto num = [&](const char* name, const char* v) {
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!*v || *end || x < 0 || x > 1 << 20) throw std::invalid_argument(std::string(name) + "='" + v + "' is not a rank");
    return int(x);
  };
  LaunchEnv e;
  for (const auto& k : kinds) {
    const char *r = get(k.rank), *s = get(k.size);
    if (!r || !s) continue;
    e.launcher = k.launcher;
    e.rank = num(k.rank, r), e.size = num(k.size, s);
    const char* l = get(k.local);
    e.local_rank = l ? num(k.local, l) : e.rank;
    if (e.size < 1 || e.rank >= e.size) throw std::invalid_argument(std::string(k.rank) + " must be below " + k.size);
    return e;
  }
  return e;
}

LaunchEnv launch_env_from_process() {
  return launch_env([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
}

int allowed_cpu_count() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return 0;
}

}  // namespace tasp::executor
