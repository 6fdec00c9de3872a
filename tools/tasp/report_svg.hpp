#pragma once
// The report's charts as SVG text, sized for a 1400-pixel page: every axis labelled in its unit, values on
// the bars, legends beside the plots rather than on them. Pure: data in, markup out.
#include <string>
#include <utility>
#include <vector>

#include "planner/timeline.hpp"
#include "simulator/validation.hpp"

namespace tasp::cli {

// Predicted against measured, log-log, with the y = x line and a +-10% band; points coloured by scheme.
std::string scatter_svg(const std::vector<simulator::RunPoint>& runs);
// One small chart per configuration (its own ms axis): measured and predicted bars per scheme, values on top,
// tied fastest schemes marked. `labels` name the configurations (short forms of the workloads).
std::string bars_svg(const std::vector<simulator::RunPoint>& runs, const simulator::Validation& v,
                     const std::vector<std::pair<std::string, std::string>>& labels);
// Per rank: the simulated timeline's comm and compute lanes above the measured one's, a time axis in ms.
std::string gantt_svg(const planner::Timeline& simulated, const planner::Timeline& measured);

// Workload strings shortened to what differs between them; the common part is returned in `common`.
std::vector<std::pair<std::string, std::string>> short_labels(const std::vector<std::string>& configs, std::string* common);

}  // namespace tasp::cli
