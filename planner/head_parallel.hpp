#pragma once
// Head parallelism (DeepSpeed-Ulysses) and its hybrids with the ring schemes (USP): how a group of u GPUs
// splits the heads, what its all-to-alls move, and the plans (Plan::ulysses; DESIGN.md "Head ranges").
#include <string>

#include "planner/digraph.hpp"
#include "planner/plan.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

// One slot of a u-GPU group: query heads [q_begin, q_begin + q_heads) and K/V heads [kv_begin, kv_begin +
// kv_heads). With fewer K/V heads than slots (u % Hkv == 0), each K/V head is replicated on u / Hkv slots
// (`kv_replicas`): its K and V travel to each, and its dK/dV are the sum of the replicas'.
struct HeadSlice {
  int q_begin = 0, q_heads = 0, kv_begin = 0, kv_heads = 0, kv_replicas = 1;
};
// "" when u GPUs can split the workload's heads, else why not (H % u, Hkv % u or u % Hkv, and with
// replication the query heads of a slot must share one K/V head).
std::string check_heads(int u, const Workload& w);
HeadSlice head_slice(int u, const Workload& w, int slot);
// What one slot computes: the workload with that slot's heads.
Workload slot_workload(int u, const Workload& w);
// Head groups (Plan::head_groups): group g holds query heads [g H/G, (g+1) H/G) and K/V heads [g Hkv/G, (g+1)
// Hkv/G), which are exactly the K/V heads its query heads read; each group is a head-parallel problem of its own.
// "" when G groups split the heads and each group splits over u GPUs, else why not.
std::string check_head_groups(int u, int groups, const Workload& w);
Workload head_group_workload(int groups, const Workload& w);

// Bytes one GPU sends to each other GPU of its group in one all-to-all, per pass: forward in (Q, K, V of
// its sequence shard for the peer's heads) and out (the output); backward in (dO) and out (dQ, dK, dV).
// tokens: the sending GPU's shard of the group's tokens.
struct A2aBytes {
  double fwd_in = 0, fwd_out = 0, bwd_in = 0, bwd_out = 0;
  // Memory traffic of one GPU's packing (head slices into per-peer send buffers) and unpacking around each
  // all-to-all, every slot's share included (the cuda backend's copies, as frameworks' reshapes around
  // all_to_all_single): reads and writes, 16-bit on the wire and on the layer's side, fp32 where results leave
  // the kernels so (the forward's O; the backward's dK/dV unless `grads16`).
  double fwd_in_copy = 0, fwd_out_copy = 0, bwd_in_copy = 0, bwd_out_copy = 0;
};
// `grads16`: the backward's dK/dV leave the kernels in 16 bits (one launch makes them, MHA: grads_written_once), as
// its dQ always does; else they leave their fp32 accumulators.
A2aBytes a2a_bytes_per_peer(int u, const Workload& w, double tokens, bool grads16 = false);

// The groups' digraph of a GPU digraph cut into groups of u consecutive GPUs: g -> h when every slot's GPU
// of g reaches the same slot's GPU of h. "" in `why` when every group is linked pairwise (its all-to-all),
// else which group is not (the digraph is then empty).
Digraph group_digraph(const Digraph& gpus, int u, std::string* why);

// ulysses: one group of every GPU (the topology must connect every pair).
Plan build_ulysses(const Topology& t, const PlanOptions& o);
// usp: groups of u GPUs (u = GPUs per node on a cluster: the all-to-all stays inside NVSwitch domains)
// running `inner` (ring, zigzag, hamilton, two-level, allgather) across the groups; slot i of every group
// forms the inner scheme's ring of groups (on a cluster: rail i).
Plan build_usp(const Topology& t, const std::string& inner, int u, const PlanOptions& o);

}  // namespace tasp::planner
