#pragma once
// The CLI's side of comparing schemes (tasp simulate, plan, run): the options they share and the terms' wording;
// the comparing itself is simulator/choose.hpp.
#include <CLI/CLI.hpp>
#include <iosfwd>
#include <string>
#include <vector>

#include "simulator/choose.hpp"
#include "simulator/engine.hpp"

namespace tasp::cli {

using simulator::choose_head_groups;
using simulator::choose_profile;
using simulator::fastest;
using simulator::plan_options;
using simulator::PlanChoices;
using simulator::run_schemes;
using simulator::SchemeRun;
using simulator::select_schemes;
using simulator::Skipped;

// --ulysses, --inner, --head-groups, --memory-budget into `h`.
void add_plan_choices(CLI::App* cmd, PlanChoices& h);
// --docs FILE: packed documents' lengths (planner::read_docs_file), summing to the workload's S.
void add_docs_option(CLI::App* cmd, std::string& docs);
// --collectives and --sendrecv, which exclude each other: how allgather's gather and reduce-scatter steps run (NCCL
// collectives, grouped send/recv, or, with neither, whichever the profile times faster).
struct CollectivesFlags {
  bool on = false, off = false;
  simulator::Collectives choice() const {
    return on ? simulator::Collectives::On : off ? simulator::Collectives::Off : simulator::Collectives::Auto;
  }
};
void add_collectives_flags(CLI::App* cmd, CollectivesFlags& c);

// "sustained" | "boost" (--clock), an InputError otherwise.
simulator::Clock parse_clock(const std::string& name);
// The model's terms as JSON-ready pairs (name, microseconds) and as one line for people.
std::vector<std::pair<std::string, double>> term_list(const simulator::ModelTerms& t);
std::string describe_terms(const simulator::ModelTerms& t);

}  // namespace tasp::cli
