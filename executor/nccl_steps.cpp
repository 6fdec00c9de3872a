// What every measuring of NCCL steps shares, with or without CUDA: the sizes measured, and the CSV the steps are kept in
// (`tasp calibrate --measure --csv`, `tasp run --fabric-csv`, the C ABI's tasp_group_measure_fabric), which `tasp
// calibrate --fit` reads back.
#include <cmath>
#include <ostream>

#include "executor/nccl_bench.hpp"

namespace tasp::executor {

std::vector<double> fabric_step_sizes() {
  std::vector<double> sizes;
  for (double b = 256 * 1024.0; b <= 512 * 1048576.0; b *= 4) sizes.push_back(b);
  return sizes;
}

void write_steps_csv(std::ostream& o, const std::vector<CommMeasurement>& m) {
  o << "kind,ranks,bytes,ms,ms_min,ms_max\n";
  for (const auto& x : m)
    o << x.kind << "," << x.ranks << "," << std::llround(x.bytes) << "," << x.us / 1e3 << "," << x.us_min / 1e3 << ","
      << x.us_max / 1e3 << "\n";
}

}  // namespace tasp::executor
