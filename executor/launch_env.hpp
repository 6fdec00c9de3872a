#pragma once
// Rank and size from a launcher's environment (mpirun/OpenMPI, PMI, Slurm), so one binary runs as one
// process driving all local GPUs or as one process per GPU. Pure: takes the lookup function.
#include <functional>
#include <string>

namespace tasp::executor {

struct LaunchEnv {
  int rank = 0, size = 1, local_rank = 0;
  std::string launcher;  // "" when not launched as several processes
  bool multi_process() const { return size > 1; }
};

// getenv-like lookup; nullptr for unset. Throws std::invalid_argument on inconsistent values.
LaunchEnv launch_env(const std::function<const char*(const char*)>& get);
LaunchEnv launch_env_from_process();

}  // namespace tasp::executor
