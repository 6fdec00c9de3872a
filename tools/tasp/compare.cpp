#include "tools/tasp/compare.hpp"

#include <iomanip>
#include <ostream>
#include <sstream>


namespace tasp::cli {

using namespace tasp::planner;

void add_plan_choices(CLI::App* cmd, PlanChoices& h) {
  cmd->add_option("--ulysses", h.ulysses, "usp: GPUs per head-parallel group (default: a node's GPUs; simulate and plan\n"
                                          "--scheme auto with --inner auto: every divisor of a node's GPUs)");
  cmd->add_option("--inner", h.inner, "usp: the scheme across groups: ring | zigzag | allgather | hamilton | two-level |\n"
                                      "auto (simulate and plan --scheme auto: the fastest; plan alone: hamilton)")
      ->capture_default_str();
  cmd->add_option("--memory-budget", h.memory_budget_gib,
                  "GiB of GPU memory a rank may hold for one layer's attention: beyond it allgather does not keep the\n"
                  "forward's gathered K/V for the backward (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--head-groups", h.head_groups,
                  "ulysses, usp: cut the heads into this many groups whose all-to-alls run beside the previous\n"
                  "group's attention (0: the count the simulator finds fastest for the workload, 1 without one)")
      ->capture_default_str();
  cmd->add_option("--accumulator", h.accumulator,
                  "Precision of the dK/dV accumulators the backward moves: fp32 | bf16 | auto (bf16 for allgather's one\n"
                  "reduce-scatter, fp32 for rings' many hops)")
      ->capture_default_str();
  cmd->add_option("--gather-pieces", h.gather_pieces,
                  "allgather (and usp with --inner allgather): each rank's shard in this many pieces, gathered and\n"
                  "its dK/dV reduce-scattered one piece a step beside the compute on the pieces before it (the link\n"
                  "idles only for the first and the last; 0: the count from 1 to 4 the simulator finds fastest for\n"
                  "allgather, 1 for a plan alone)")
      ->capture_default_str();
  cmd->add_option("--gather-steps", h.gather_steps,
                  "allgather: how many pieces each forward step gathers, e.g. 3,2,1 (6 pieces a rank, the last steps\n"
                  "small: what stays exposed where the link is the long pole is the forward's last step's compute and\n"
                  "the backward's first, which takes these sizes in reverse; default: as the simulator finds fastest)")
      ->delimiter(',');
  cmd->add_flag("--prune-plain", h.prune_plain,
                "Prune for a plain mask too: under a causal mask a rank gets only the K/V its queries see and returns\n"
                "only the dK/dV they made; each owner's partial dK/dV stays home (accumulators travel n-1 hops).\n"
                "allgather: its zigzag pieces cut by chunk (an even count; 1 is one a chunk), so that a rank's late\n"
                "chunk, which the ranks before it never see, stays home; the forward's K/V still kept (through host\n"
                "memory, where both directions share the medium, 0.82x the time at B=1 S=8192 and medium). Without\n"
                "it allgather is pruned where the profile measured one root's broadcast alone and simulates it faster");
  cmd->add_flag("--move-queries", h.move_queries,
                "allgather on 2 ranks, pruned for a plain causal mask (implies --prune-plain): rank 0's late zigzag chunk's\n"
                "queries go to rank 1 and their partial output comes back (backward: dO over, dQ and dK/dV back) instead\n"
                "of rank 1's K/V going to them: 4 chunk-tensors a pass where pruning alone moves 6, rank 1 computing 6 of\n"
                "the 8 blocks; through host memory 0.91x pruned's time at B=1 S=8192 (docs/plan-format.md, \"Queries\n"
                "moved to keys\"). Without it tried, as pruning is, where the profile measured one root's broadcast alone");
}

void add_collectives_flags(CLI::App* cmd, CollectivesFlags& c) {
  auto* on = cmd->add_flag("--collectives", c.on,
                           "allgather's steps that gather every rank's K/V or reduce-scatter dK/dV as NCCL collectives\n"
                           "(default: whichever of these and grouped send/recv the profile times faster; NCCL runs\n"
                           "collectives faster over sockets, slower on NVLink between 2 GPUs)");
  auto* off = cmd->add_flag("--sendrecv", c.off, "allgather's steps as grouped send/recv, whatever the profile says");
  on->excludes(off);
}

void add_docs_option(CLI::App* cmd, std::string& docs) {
  cmd->add_option("--docs", docs, "File of packed documents' lengths (summing to S; spaces, commas, '+' or lines; '#'\n"
                                  "comments): attention stays inside each document (as -w docs=L1+L2+..)");
}

simulator::Clock parse_clock(const std::string& name) {
  if (name == "sustained") return simulator::Clock::Sustained;
  if (name == "boost") return simulator::Clock::Boost;
  throw InputError("--clock: expected sustained or boost, got '" + name + "'");
}

std::vector<std::pair<std::string, double>> term_list(const simulator::ModelTerms& t) {
  return {{"launch_us", t.launch_us},     {"math_us", t.math_us},         {"clock_us", t.clock_us},
          {"overlap_us", t.overlap_us},   {"accumulate_us", t.accumulate_us}, {"executor_us", t.executor_us},
          {"exposed_comm_us", t.exposed_comm_us}};
}

std::string describe_terms(const simulator::ModelTerms& t) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << "kernel math " << t.math_us / 1e3 << " ms + sustained clock " << t.clock_us / 1e3
    << " + launches " << t.launch_us / 1e3 << " + lost to NCCL " << t.overlap_us / 1e3 << " + accumulator adds " << t.accumulate_us / 1e3 << " + executor gaps "
    << t.executor_us / 1e3 << " + exposed comm " << t.exposed_comm_us / 1e3;
  return o.str();
}

}  // namespace tasp::cli
