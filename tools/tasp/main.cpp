// tasp: plan, verify, simulate, run, calibrate, report and bench topology-aware sequence-parallel attention.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "planner/topology.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {

void write_output(const std::string& path, const std::function<void(std::ostream&)>& body) {
  if (path.empty() || path == "-") {
    body(std::cout);
    std::cout.flush();
    return;
  }
  const std::string tmp = path + ".tmp";
  try {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw planner::InputError(path + ": cannot write");
    body(out);
    out.close();
    if (!out) throw planner::InputError(path + ": write failed");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw planner::InputError(path + ": cannot rename into place");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? double(pages) * double(size) : 0;
}

}  // namespace tasp::cli

int main(int argc, char** argv) {
  using namespace tasp::cli;
  CLI::App app{
      "tasp: plan, simulate and run topology-aware sequence-parallel attention (ring, zigzag, allgather,\n"
      "hamilton/TASP, two-level; ulysses and usp move heads) on any GPU topology, forward and backward.\n"
      "Topologies: a YAML file (docs/topology-format.md) or complete:N, mesh:N, cluster:UxM, torus:AxB.\n"
      "Start with `tasp simulate` (no arguments: 8x H200, a Llama-3-8B layer at 128K, every scheme)."};
  app.require_subcommand(1);
  register_plan(app);
  register_verify(app);
  register_simulate(app);
  register_run(app);
  register_calibrate(app);
  register_report(app);
  register_bench(app);
  register_configs(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kBadInput;
  } catch (const Exit& e) {
    if (*e.what()) std::cerr << "tasp: " << e.what() << "\n";
    return e.code;
  } catch (const tasp::planner::InputError& e) {
    std::cerr << "tasp: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "tasp: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "tasp: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
