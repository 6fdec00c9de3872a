#include "tools/tasp/measure_fabric.hpp"

#include <iostream>
#include <string>

#include "tools/tasp/progress.hpp"

namespace tasp::cli {

std::vector<executor::CommMeasurement> measure_fabric(int ranks, int warmup, int iters, bool per_root, bool verbose) {
  std::vector<double> sizes;
  for (double b = 256 * 1024.0; b <= 512 * 1048576.0; b *= 4) sizes.push_back(b);
  std::cerr << "measuring NCCL steps on " << ranks << " GPUs\n";
  Progress progress("measuring NCCL steps on " + std::to_string(ranks) + " GPUs:");
  return executor::measure_nccl_steps(ranks, sizes, warmup, iters, verbose,
                                      [&](int done, int total) { progress.update(done, total, " kinds x sizes x rounds"); },
                                      per_root);
}

void add_samples(const std::vector<executor::CommMeasurement>& m, simulator::Samples* s) {
  for (const auto& x : m) s->comm.push_back({x.kind, x.ranks, x.bytes, x.us});
}

}  // namespace tasp::cli
