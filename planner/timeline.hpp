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
  struct PerPass {
    double fwd = 0, bwd = 0;
  };
  using PassBytes = PerPass;
  // The bytes the busiest GPU sends in each pass (what `run` and `simulate` print beside the time); every GPU's, summed.
  PassBytes busiest_sent() const;
  PassBytes total_sent() const;
  // The slowest rank's summed compute in each pass (kernels and closing work).
  PerPass slowest_compute() const;
};

// How fast a run could be at best, from its own kernels and bytes: over the whole run, max(kernels, bytes at the peak
// rate); and pass by pass, since a backward starts once its forward is done (every tasp plan), the sum of each pass's
// max(kernels, bytes). The second is the tighter: at B=1 S=65536 H=32/8 over sockets (2x H200, 2026-11-27) the forward
// waits 48 ms for the others' K/V beside 30 ms of kernels, and the backward's 82 ms of kernels hide its 48 ms of
// reduce-scatter, so no schedule of these steps beats about 130 ms, where the whole-run figure said 103.
struct RunBound {
  double kernels_us = 0, bytes_us = 0;  // the whole run's
  double whole_us = 0;                  // max(kernels_us, bytes_us)
  double per_pass_us = 0;               // the passes' max(kernels, bytes), summed
};
// `peak_gbps`: the fastest a GPU sends (GB/s; 0: bytes bound nothing); `bwd_peak_gbps` the backward's where it differs
// (< 0: the same). `alone_gbps` > 0: the GPUs share one medium (host memory), on which a GPU sends at most that fast
// while the others are idle and all of them together at most n x the peaks: a pass's bytes then take the longer of
// the busiest GPU's at `alone_gbps` and every GPU's at n x the peak (for a symmetric exchange the peak's figure, as
// without it; for one pruned for its mask, where some GPUs send less, the tighter of the two), and on 2 GPUs at least
// the lighter's bytes beside as many of the busier's at the peak and the busier's rest alone.
RunBound run_bound(const Timeline& t, double peak_gbps, double bwd_peak_gbps = -1, double alone_gbps = 0);

void write_timeline_json(std::ostream& o, const Timeline& t);
// `tasp run --steps`: a row a step, the slowest rank's comm and compute time and the step's end (the latest rank's,
// from the run's start; steps may overlap where head groups run one group's exchange beside another's kernels), and
// where `predicted` has as many steps, its end beside. Ends, not comm intervals, are what compare: a rank's interval
// opens at its own NCCL call, so a sender's may open while its previous step's bytes are still in flight (loopback
// sockets, 2026-11-27). `with_fwd`: the run has a forward (the backward's steps then count from its first).
void write_steps_table(std::ostream& o, const Timeline& t, const Timeline* predicted, bool with_fwd);
// Chrome trace (Perfetto): one process per rank, comm and compute as two threads.
void write_chrome_trace(std::ostream& o, const Timeline& t);
// tasp-timeline/1 JSON; bad input is a planner::InputError naming `name` and the field.
Timeline read_timeline_json(std::istream& in, const std::string& name);
Timeline read_timeline_file(const std::string& path);

}  // namespace tasp::planner
