#pragma once
// A machine profile: the parameters of the simulator's network and compute models (tasp-profile/1).
// Plain data; loading and writing live in profile_yaml.cpp, fitting in calibrate.cpp.
#include <string>
#include <utility>
#include <vector>

namespace tasp::simulator {

// y(x) through measured points, linear in log2(x) between them and flat beyond the ends:
// NCCL's rates change with the message size in steps of protocol and channel count, not smoothly.
struct Curve {
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending and > 0
  double at(double x) const;
  bool empty() const { return points.empty(); }
};

// How point-to-point steps behave on one communicator size (NCCL picks channels per peer by size).
struct CommProfile {
  int ranks = 8;                // communicator size these figures were measured on
  double latency_us = 20;       // from posting a step's sends to the first byte moving, one peer
  double peer_latency_us = 0;   // added per further concurrent peer of the rank
  Curve flow_cap_gbps;          // one peer connection's rate vs its message bytes
  Curve rank_cap_gbps;          // a rank's total rate when it talks to >= 2 peers, vs its bytes in the step
  // A rank's rate in a step NCCL runs as one collective (ncclAllGather of K/V, ncclReduceScatter of dK/dV:
  // planner::collective_of; tasp run --collectives), vs its bytes in the step; empty: not measured (such a step is
  // timed as its point-to-point flows). Over sockets on 2x H100 NCCL's all-gather moved 256 MiB 1.46x faster than
  // grouped send/recv (docs/measurements/fabrics.md).
  Curve collective_gbps;
  // The collectives were measured as one broadcast (or reduce) a root, each on a communicator of its own
  // (executor::CudaOptions::root_comms), and `tasp run` moves them so on this fabric. Over loopback sockets on 2x H200
  // two such broadcasts moved 5.2 GB/s a direction where one all-gather moved 3.5 (2026-11-27).
  bool collectives_per_root = false;
  // The rate of the reduce-scatter steps where measured apart (empty: collective_gbps). Through host memory on 2x H200
  // a reduce a root moved 25.7 GB/s a direction at 64 MiB where a broadcast a root moved 30.9 (2026-11-27); over
  // sockets the two were level.
  Curve reduce_gbps;
  // A root's broadcast while no other root sends (a per-root step of a plan pruned for its mask, where only some owners
  // send; on 2 ranks also the reduce, a broadcast from the other rank), vs its bytes; empty: not measured (the
  // collective rates). Through host memory both directions share one medium: a 64 MiB broadcast moved 44 GB/s alone,
  // 27.8 beside another the other way (2x H200, 2026-11-27, docs/measurements/fabrics.md).
  Curve one_root_gbps;
  // Its fastest point as a step delivered it, latency included (0: not measured): what planner::run_bound takes for
  // a GPU sending alone on a shared medium.
  double one_root_peak_gbps(int ranks) const;
  const Curve& collective_curve(bool reduce) const { return reduce && !reduce_gbps.empty() ? reduce_gbps : collective_gbps; }
};

// Attention forward rate of the kernels (TFLOP/s counts 4*Lq*Lk*H*D per unmasked pair... of blocks).
struct ComputeRate {
  int head_dim = 128;
  double full_tflops = 340;    // no mask, large blocks
  double causal_tflops = 310;  // blocks cut by the causal diagonal
  // Size curves of the two (diagonal tiles make causal kernels gain more with length); < 0: the profile's.
  double full_half_len = -1, causal_half_len = -1;
  int tile_m = 0;  // query rows per CTA at this head dim (tasp's kernel: 128 at D=128, 192 at D=64); 0: the profile's
  // Backward kernel rates (TFLOP/s counting 2.5x the forward's FLOPs: 5 matmuls against 2); 0: estimated as
  // the forward's times ComputeProfile::bwd_estimate until a backward kernel is measured.
  double bwd_full_tflops = 0, bwd_causal_tflops = 0;
  // The backward's own size curves (< 0: the forward's).
  double bwd_full_half_len = -1, bwd_causal_half_len = -1;
  // The fraction of these (cold, boost-clock) rates a GPU kept busy holds once its clock settles under the
  // power limit: the forward kernel draws more power per second than the backward and loses more clock.
  // Alone (a pass after pass of one kind) and mixed (forward and backward taking turns, as in training).
  double sustained = 1, bwd_sustained = 1, mix_sustained = 1, bwd_mix_sustained = 1;
  // Grouped-query attention: the fraction of the rate above (MHA of the same H) a kernel keeps when H / Hkv query
  // heads share a K/V head, against the group size (from 1: 1), linear in log2 between measured groups and flat
  // beyond; empty: 1. The backward's dK/dV sum over the group and its dQ scratch spans the group's heads, and
  // at groups of 8 it loses 10-20% on an H200 (docs/measurements/model.md).
  Curve gqa, bwd_gqa;
};

// The backward rate a profile gives for a head dim, and whether it was measured or estimated.
struct BwdRate {
  double full_tflops = 0, causal_tflops = 0;
  double full_half_len = 0, causal_half_len = 0;
  bool estimated = true;
};

struct ComputeProfile {
  double launch_us = 6;    // one work-list launch
  double half_len = 96;    // a block of L tokens runs at L/(L+half_len) of the peak in each of Lq, Lk
  int sms = 132;           // CTAs run in waves of this many (wave quantization)
  int tile_m = 128;        // query rows per CTA
  double hbm_gbps = 3000;  // the fused out/LSE merge's traffic bounds small blocks
  double small_launch_us = 4;  // an elementwise kernel (the backward's accumulator add and dO.O row sums)
  // HBM rate of the backward's dQ scratch work (cleared at the start, read out into dQ at the end); fitted
  // from the executor's timelines (tasp calibrate --timeline).
  double elementwise_gbps = 1500;
  // Backward/forward rate ratio used where a rate has no measured backward figures: cuDNN's through PyTorch
  // on one H200 (../shared/measurements/h200-sdpa-fwd-bwd.txt): 523/613 at D=128, 437/474 at D=64.
  double bwd_estimate = 0.87;
  std::vector<ComputeRate> rates;  // by head dim; nearest head dim is used
  const ComputeRate& rate(int head_dim) const;
  BwdRate bwd_rate(int head_dim) const;
  double full_half_len(int head_dim) const;    // the rate's, else half_len
  double causal_half_len(int head_dim) const;
  int tile_rows(int head_dim) const;  // the rate's tile_m if it has one, else tile_m
  // The rate's GQA fraction for H / Hkv query heads per K/V head (1 without a group or a curve).
  double gqa_fraction(int head_dim, int H, int Hkv, bool backward) const;
};

// What tasp's executor adds around the kernels and NCCL steps, fitted from its own timelines (`tasp
// calibrate --timeline`): the host work before a pass's first launch (work lists, tensor maps, the
// forward's out/LSE initialisation) and the event and stream hand-over between steps.
struct ExecutorProfile {
  double fwd_start_us = 0;  // the forward's first launch starts this long after the pass starts
  double bwd_start_us = 0;  // the backward's, after the forward ends (or its pass starts)
  double step_gap_us = 0;   // a step starts this long after the previous one ends
  // While a step's transfers are in flight NCCL's kernels hold SMs and HBM bandwidth: the attention kernel
  // loses this share of its throughput over the overlap.
  double comm_compute_share = 0;
};

// Which clock the kernel rates are taken at: the boost clock of a short burst on a cool GPU (what a single
// timed launch sees) or the clock a GPU kept busy settles to (what training and long runs see).
enum class Clock { Sustained, Boost };

struct Profile {
  std::string format = "tasp-profile/1";
  std::string name;
  std::string description;
  double link_efficiency = 1.0;      // fraction of a link's nominal bandwidth flows can use together
  std::vector<CommProfile> comm;     // by communicator size
  ComputeProfile compute;
  ExecutorProfile executor;
  // The figures of the largest measured communicator not larger than `ranks` (else the smallest).
  const CommProfile& comm_for(int ranks) const;
  // The fastest a GPU of a `ranks` communicator was measured to send, GB/s (the highest point of its curves, each as
  // a step of that size delivers it: its bytes over their time at the rate plus the step's start latency): what
  // a run's bytes need at the least (`tasp run` prints the bound beside the time); with `collectives`, NCCL's
  // collectives' rate counts too, and with `reduces_only` (a pass whose collectives all reduce-scatter: an allgather
  // backward on kept K/V) the reduce-scatter's rate instead of the gather's where measured apart: through host memory
  // on 2x H200 it peaks at 27.9 GB/s against the broadcasts' 32.7.
  double peak_send_gbps(int ranks, bool collectives = false, bool reduces_only = false) const;
  // This profile with its kernel rates at `clock` (Sustained: each rate times its sustained fraction, the
  // mixed ones where forward and backward take turns).
  Profile at_clock(Clock clock, bool mixed = false) const;
};

// Built-in profiles (shipped files in topologies/*.profile.yaml, embedded at build time).
std::vector<std::string> builtin_profile_names();
// The profile for a topology name (h200-hgx-8, ...), falling back to h200-hgx-8 for anything else.
Profile builtin_profile(const std::string& topology_name, std::string* chosen = nullptr);
std::string builtin_profile_text(const std::string& name);  // "" if none

// YAML I/O (throws planner::InputError naming file, line, field).
Profile profile_from_yaml_text(const std::string& text, const std::string& name_for_errors);
Profile load_profile(const std::string& path);
void write_profile_yaml(std::ostream& o, const Profile& p);

}  // namespace tasp::simulator
