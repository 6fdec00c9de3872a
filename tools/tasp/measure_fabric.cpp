#include "tools/tasp/measure_fabric.hpp"

#include <iostream>
#include <string>

#include "executor/launch_env.hpp"
#include "planner/topology.hpp"
#include "tools/tasp/progress.hpp"

namespace tasp::cli {

std::vector<executor::CommMeasurement> measure_fabric(int ranks, int warmup, int iters, bool per_root, bool verbose) {
  const std::vector<double> sizes = executor::fabric_step_sizes();
  const executor::LaunchEnv env = executor::launch_env_from_process();
  if (env.multi_process() && env.size != ranks)
    throw planner::InputError("measuring NCCL steps on " + std::to_string(ranks) + " GPUs: launched as " +
                              std::to_string(env.size) + " processes (" + env.launcher + ")");
  const std::string what = "measuring NCCL steps on " + std::to_string(ranks) + " GPUs";
  if (env.rank == 0) std::cerr << what << (env.multi_process() ? ", a process each (" + env.launcher + ")" : "") << "\n";
  Progress progress(what + ":");
  auto tick = [&](int done, int total) { progress.update(done, total, " kinds x sizes x rounds"); };
  if (env.multi_process()) return executor::measure_launched_steps(sizes, warmup, iters, per_root, 60, tick);
  return executor::measure_nccl_steps(ranks, sizes, warmup, iters, verbose, tick, per_root);
}

void add_samples(const std::vector<executor::CommMeasurement>& m, simulator::Samples* s) {
  for (const auto& x : m) s->comm.push_back({x.kind, x.ranks, x.bytes, x.us});
}

}  // namespace tasp::cli
