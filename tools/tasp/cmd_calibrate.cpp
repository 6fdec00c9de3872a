// tasp calibrate --fit: least-squares fit of a machine profile to measured microbenchmarks.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "planner/yaml_ctx.hpp"
#include "simulator/calibrate.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"

namespace tasp::cli {
namespace {

struct Args {
  std::vector<std::string> fit;
  std::string out, base, topology = "h200-hgx-8", name;
  bool quiet = false;
};

}  // namespace

void register_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit a machine profile (latency, per-peer latency, per-flow and per-rank rate curves by message size,\n"
      "kernel peak, launch and size curve) to measurements, and show how well it replays them.\n"
      "CSV columns: kind,ranks,bytes,ms (kind ring|multi|pairs|allgather) and kind=attention,B,H,S|Lq,Lk,D,causal,ms.");
  auto a = std::make_shared<Args>();
  cmd->add_option("--fit", a->fit, "Measurement CSV files (see tools/measurements-to-csv.sh, tasp bench kernel --csv)")->required();
  cmd->add_option("-o,--output", a->out, "Write the fitted profile YAML here (default: stdout)");
  cmd->add_option("--base", a->base, "Profile whose fields the measurements do not cover are kept (default: built-in)");
  cmd->add_option("-t,--topology", a->topology, "The measured machine: replays the samples on its links")->capture_default_str();
  cmd->add_option("--name", a->name, "Name of the fitted profile (default: the topology's name)");
  cmd->add_flag("-q,--quiet", a->quiet, "No check table");
  cmd->callback([a] {
    const planner::Topology t = planner::load_topology(a->topology);
    simulator::Samples s;
    std::string files;
    for (const auto& f : a->fit) {
      const simulator::Samples one = simulator::read_samples_csv(planner::read_text_file(f, "measurement file"), f);
      s.comm.insert(s.comm.end(), one.comm.begin(), one.comm.end());
      s.kernel.insert(s.kernel.end(), one.kernel.begin(), one.kernel.end());
      files += (files.empty() ? "" : " ") + f;
    }
    simulator::Profile base = choose_profile(a->base, t, nullptr);
    const simulator::Network net = simulator::build_network(t, base.link_efficiency);
    std::vector<simulator::FitCheck> checks;
    simulator::Profile p = simulator::fit_profile(s, base, net, &checks);
    p.name = a->name.empty() ? t.name : a->name;
    p.description = "fitted by tasp calibrate from " + files + " on " + t.name;
    write_output(a->out, [&](std::ostream& o) { simulator::write_profile_yaml(o, p); });
    if (a->quiet) return;
    std::ostream& o = a->out.empty() || a->out == "-" ? std::cerr : std::cout;
    o << "#  " << std::left << std::setw(52) << "measurement" << std::right << std::setw(12) << "measured ms"
      << std::setw(13) << "predicted ms" << std::setw(9) << "error\n";
    std::vector<double> errs;
    for (const auto& c : checks) {
      errs.push_back(std::abs(c.error()));
      o << "   " << std::left << std::setw(52) << c.what << std::right << std::fixed << std::setprecision(4)
        << std::setw(12) << c.measured_us / 1e3 << std::setw(13) << c.predicted_us / 1e3 << std::setw(8)
        << std::setprecision(1) << 100 * c.error() << "%\n";
    }
    std::sort(errs.begin(), errs.end());
    if (!errs.empty())
      o << "# " << errs.size() << " samples: median |error| " << std::setprecision(1) << 100 * errs[errs.size() / 2]
        << "%, max " << 100 * errs.back() << "%\n";
  });
}

}  // namespace tasp::cli
