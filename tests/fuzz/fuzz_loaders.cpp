// Fuzz targets for the loaders of outside input: topology YAML, plan JSON and YAML, workload text, machine
// profile YAML, timelines (tasp-timeline/1 JSON), packed documents' lengths, runs CSVs (tasp report) and
// calibration samples CSVs (tasp calibrate). Built as libFuzzer targets by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined: a
// crash, leak, timeout or sanitizer report is a finding), and as a corpus-replay test in the normal build.
// A loader may refuse any input, with planner::InputError naming what is wrong (std::invalid_argument where
// a library function states it does); anything else escaping is a defect: abort.
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>

#include "planner/plan_io.hpp"
#include "planner/topology.hpp"
#include "planner/verify_plan.hpp"
#include "planner/timeline.hpp"
#include "planner/workload.hpp"
#include "planner/workload_catalogue.hpp"
#include "simulator/calibrate.hpp"
#include "simulator/profile.hpp"
#include "simulator/runs_csv.hpp"

namespace {

using namespace tasp;

[[maybe_unused]] void topology_yaml(const std::string& text) {
  planner::Topology t = planner::topology_from_yaml_text(text, "fuzz.yaml");
  if (t.ranks() <= 512) planner::rank_digraph(t);  // what every command does next
}

// A plan that loads must verify (or name its violation) without crashing.
void check_plan(const planner::Plan& p) { planner::verify_plan(p); }

[[maybe_unused]] void plan_json(const std::string& text) {
  std::istringstream in(text);
  check_plan(planner::read_plan_json(in, "fuzz.json"));
}

[[maybe_unused]] void plan_yaml(const std::string& text) { check_plan(planner::plan_from_yaml_text(text, "fuzz.yaml")); }

[[maybe_unused]] void workload(const std::string& text) {
  const planner::Workload w = planner::parse_workload(text);
  planner::parse_workload(planner::to_string(w));  // the text form of what was read reads back
}

[[maybe_unused]] void profile_yaml(const std::string& text) { simulator::profile_from_yaml_text(text, "fuzz.profile.yaml"); }

// A timeline that loads is summed as `tasp report` and `calibrate --timeline` sum it.
[[maybe_unused]] void timeline_json(const std::string& text) {
  std::istringstream in(text);
  const planner::Timeline t = planner::read_timeline_json(in, "fuzz.json");
  (void)t.total_us(), (void)t.exposed_comm_us(), (void)t.busiest_sent();
}

[[maybe_unused]] void docs_text(const std::string& text) { planner::parse_docs_text(text, "fuzz.txt"); }

[[maybe_unused]] void runs_csv(const std::string& text) { simulator::read_runs_csv(text, "fuzz.csv", "fwd"); }

[[maybe_unused]] void samples_csv(const std::string& text) { simulator::read_samples_csv(text, "fuzz.csv"); }

}  // namespace

#ifndef TASP_FUZZ_TARGET
#error "define TASP_FUZZ_TARGET (topology_yaml, plan_json, plan_yaml, workload, profile_yaml, timeline_json, docs_text, runs_csv, samples_csv)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    TASP_FUZZ_TARGET(text);
  } catch (const planner::InputError&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::exception& e) {
    std::cerr << "unexpected exception: " << e.what() << "\n";
    std::abort();
  }
  return 0;
}
