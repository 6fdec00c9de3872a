#pragma once
// Fitting a machine profile to measurements (least squares with Eigen). Pure; the CSV reader at the
// bottom is the one I/O edge.
#include <string>
#include <vector>

#include "simulator/network.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

struct CommSample {
  std::string kind;  // ring | multi | pairs | allgather (see microbench.hpp)
  int ranks = 0;
  double bytes = 0;  // per rank
  double us = 0;
};
struct KernelSample {
  int B = 1, H = 1, D = 128;
  double lq = 0, lk = 0;
  bool causal = false;
  bool backward = false;  // the backward launch (row sums + kernel) rather than the forward
  double us = 0;
};
struct Samples {
  std::vector<CommSample> comm;
  std::vector<KernelSample> kernel;
};

// A measured figure next to what the fitted profile predicts for it.
struct FitCheck {
  std::string what;
  double measured_us = 0, predicted_us = 0;
  double error() const { return (predicted_us - measured_us) / measured_us; }
};

// Fits latency, per-peer latency, per-flow and per-rank rate curves (per communicator size) and the
// kernel rate (peak per head dim and mask, launch, half length); backward samples give the backward peaks
// (with the forward's launch and size curves); fields without samples keep `base`'s.
// `net` (the machine's topology) replays every sample for the checks.
Profile fit_profile(const Samples& s, const Profile& base, const Network& net, std::vector<FitCheck>* checks);

// CSV with a header naming its columns: kind,ranks,bytes,ms for communication rows;
// kind=attention|attention_bwd,B,H,Lq,Lk,D,causal,ms for kernel rows ('S' may stand for Lq = Lk). Column order is free,
// '#' starts a comment line. Throws planner::InputError naming file, line and column.
Samples read_samples_csv(const std::string& text, const std::string& name_for_errors);

}  // namespace tasp::simulator
