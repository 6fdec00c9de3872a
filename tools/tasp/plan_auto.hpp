#pragma once
// `tasp plan --scheme auto`: ask the simulator which scheme is fastest for a workload.
#include <iosfwd>
#include <string>

#include "planner/topology.hpp"

namespace tasp::cli {

std::string choose_scheme_auto(const planner::Topology& t, const std::string& workload, const std::string& profile,
                               bool* causal, std::ostream& log);

}  // namespace tasp::cli
