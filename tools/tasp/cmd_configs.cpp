// tasp configs: the named workloads --config takes.
#include <iomanip>
#include <iostream>

#include "planner/workload_catalogue.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {

void register_configs(CLI::App& app) {
  auto* cmd = app.add_subcommand("configs",
                                 "List the named workloads --config takes (the nnscaler ring-attention benchmark's and\n"
                                 "Llama-3 layers); -w keys given with --config override the entry's");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "As JSON");
  cmd->callback([json] {
    const auto& c = planner::workload_catalogue();
    if (*json) {
      std::cout << planner::workload_catalogue_json() << "\n";
      return;
    }
    std::cout << std::left << std::setw(21) << "# name" << std::setw(17) << "group" << std::right << std::setw(4) << "B"
              << std::setw(8) << "S" << std::setw(5) << "H" << std::setw(5) << "Hkv" << std::setw(5) << "D" << std::setw(8)
              << "mask" << std::setw(6) << "dtype" << std::setw(10) << "window" << "  note\n";
    for (const auto& e : c) {
      const auto& w = e.w;
      std::cout << "  " << std::left << std::setw(19) << e.name << std::setw(17) << e.group << std::right << std::setw(4) << w.B
                << std::setw(8) << w.S << std::setw(5) << w.H << std::setw(5) << w.Hkv << std::setw(5) << w.D << std::setw(8)
                << (w.causal ? "causal" : "full") << std::setw(6) << w.dtype << std::setw(10)
                << (w.windowed() ? std::to_string(w.window_left) + ":" + std::to_string(w.window_right) : "-") << "  "
                << e.note << "\n";
    }
  });
}

}  // namespace tasp::cli
