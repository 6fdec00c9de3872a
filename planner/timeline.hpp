#pragma once
// tasp-timeline/1: what a simulated or measured run did, per rank and step (DESIGN.md).
#include <iosfwd>
#include <string>
#include <vector>

namespace tasp::planner {

struct StepTiming {
  double comm_start_us = 0, comm_end_us = 0;
  double compute_start_us = 0, compute_end_us = 0;
  double bytes = 0;  // sent by this rank in this step
  double flops = 0;  // attention FLOPs done by this rank in this step
  // Work that closes the step once its transfers and kernel are done (the backward's accumulator adds);
  // empty when post_end_us <= post_start_us.
  double post_start_us = 0, post_end_us = 0;
  double post_us() const { return post_end_us > post_start_us ? post_end_us - post_start_us : 0; }
  double end_us() const;  // the latest of the three intervals' ends
};

struct Timeline {
  std::string source;  // simulated | cpu | cuda
  std::string scheme, topology, workload;
  int ranks = 0;
  std::string pass = "fwd";  // fwd | bwd | fwd+bwd
  int fwd_steps = -1;        // steps [0, fwd_steps) are the forward's, the rest the backward's; -1: all (pass)
  std::vector<std::vector<StepTiming>> per_rank;  // [rank][step]

  // Whether step s belongs to the backward.
  bool backward_step(int s) const { return pass == "bwd" || (pass == "fwd+bwd" && s >= fwd_steps); }
  // Appends `later` (its times shifted by `offset_us`) after these steps, rank by rank (rows both have).
  void append(const Timeline& later, double offset_us);

  double total_us() const;
  double comm_us() const;     // slowest rank's summed communication time
  double compute_us() const;  // slowest rank's summed compute time (kernels and closing work)
  double exposed_comm_us() const;  // total minus the slowest rank's compute
  // The bytes the busiest GPU sends in each pass (what `run` and `simulate` print beside the time).
  struct PassBytes {
    double fwd = 0, bwd = 0;
  };
  PassBytes busiest_sent() const;
};

void write_timeline_json(std::ostream& o, const Timeline& t);
// Chrome trace (Perfetto): one process per rank, comm and compute as two threads.
void write_chrome_trace(std::ostream& o, const Timeline& t);
// tasp-timeline/1 JSON; bad input is a planner::InputError naming `name` and the field.
Timeline read_timeline_json(std::istream& in, const std::string& name);
Timeline read_timeline_file(const std::string& path);

}  // namespace tasp::planner
