#pragma once
// `tasp plan --scheme auto`: ask the simulator which scheme is fastest for a workload.
#include <iosfwd>
#include <string>

#include "planner/schemes/schemes.hpp"
#include "simulator/engine.hpp"

namespace tasp::cli {

// Returns the scheme and sets the options (causal and layout from the workload) it should be planned with.
// Ranks the schemes by the simulated time of the passes asked for (`collectives`: allgather's steps as NCCL collectives,
// as grouped send/recv, or whichever is faster, as `tasp run` would run them).
std::string choose_scheme_auto(const planner::Topology& t, const std::string& config, const std::string& workload,
                               const simulator::Profile& prof, planner::Passes passes, planner::PlanOptions* o, std::ostream& log,
                               simulator::Collectives collectives = simulator::Collectives::Auto);

}  // namespace tasp::cli
