#pragma once
// Executes a plan on the models: per rank and step, the step's transfers as flows (fluid max-min),
// its compute on a second stream, the next step once both are done (the executor's double-buffered
// receive buffers allow no more). Pure: no I/O.
#include <functional>

#include "planner/plan.hpp"
#include "planner/timeline.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "simulator/network.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

struct Bounds {
  double comm_us = 0;     // the busiest port or node cut moving the plan's bytes at full capacity
  double compute_us = 0;  // the busiest rank's FLOPs at the kernels' peak rate
  double us() const { return comm_us > compute_us ? comm_us : compute_us; }
};

struct SimResult {
  planner::Timeline timeline;  // per rank; above SimOptions::max_timeline_cells only the first ranks
  double total_us = 0, comm_us = 0, compute_us = 0, exposed_comm_us = 0;
  double fwd_us = 0, bwd_us = 0;  // each pass's share of total_us (the backward starts when the forward ends)
  bool bwd_rate_estimated = false;  // the backward's kernel rates are the forward's scaled (no measured ones)
  double max_rank_bytes = 0, max_rank_flops = 0;  // over the whole run
  Bounds bound;
  double efficiency() const { return total_us > 0 ? bound.us() / total_us : 0; }
  double ccr() const { return compute_us > 0 ? comm_us / compute_us : 0; }
  bool symmetric_fast_path = false;  // steps solved once for the whole ring flow (see simulate())
  int network_solves = 0;
};

struct SimOptions {
  size_t max_timeline_cells = 2'000'000;  // ranks x steps kept in the timeline
  std::function<void(int step, int steps)> progress;  // called now and then on long runs
  bool allow_fast_path = true;
  planner::Passes passes;  // the forward (default), the backward, or both one after the other
};

// Throws planner::InputError when the workload does not fit the plan, or the backward is asked of a plan
// without one.
SimResult simulate(const planner::Plan& plan, const planner::Topology& topo, const planner::Workload& w,
                   const Profile& prof, const SimOptions& opt = {});

}  // namespace tasp::simulator
