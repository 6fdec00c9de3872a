#include "tools/tasp/plan_auto.hpp"

namespace tasp::cli {

std::string choose_scheme_auto(const planner::Topology&, const std::string&, const std::string&, bool*, std::ostream&) {
  throw planner::InputError("--scheme auto needs the simulator, which this build does not have yet");
}

}  // namespace tasp::cli
