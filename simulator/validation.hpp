#pragma once
// How well predictions match measurements over a set of runs: the error figures a model is judged by and
// whether it orders the schemes of each configuration as the measurements do. Pure.
#include <string>
#include <vector>

namespace tasp::simulator {

struct RunPoint {
  std::string config, scheme;
  double measured = 0, predicted = 0;  // any one unit (ms)
  double error() const { return (predicted - measured) / measured; }
};

// A tie is named, not broken: schemes within the margin of the fastest are all "fastest", on either side, and
// the prediction agrees when the two sets share a scheme. Rank correlation only means something where the
// measured times spread beyond the margin.
struct ConfigOrder {
  std::string config;
  std::vector<std::string> fastest_measured;   // every scheme within the tie margin of the measured fastest
  std::vector<std::string> fastest_predicted;  // every scheme within the tie margin of the predicted fastest
  bool agrees = false;  // the two sets share a scheme
  bool tie = false;     // more than one scheme measured within the margin: no single winner to get right
  bool all_tied = false;  // every scheme measured within the margin: no order to get right
  double spearman = 0;  // rank correlation of predicted and measured times (1: same order); 0 with < 3 schemes
  bool ranked() const { return spearman != 0 && !all_tied; }
};

struct Validation {
  size_t runs = 0;
  double median_abs = 0, mean_signed = 0, max_abs = 0;  // of the relative errors
  std::vector<ConfigOrder> orders;
  double agreement() const;  // fraction of configurations whose predicted fastest is a measured fastest
  double mean_rank_correlation() const;  // over the ranked() configurations (0 if none)
  size_t ranked() const;
};

// `tie_margin`: schemes whose measured times are within this fraction of the fastest count as tied with it.
Validation validate(const std::vector<RunPoint>& runs, double tie_margin = 0.02);

}  // namespace tasp::simulator
