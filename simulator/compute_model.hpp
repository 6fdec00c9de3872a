#pragma once
#include <algorithm>
// What a rank computes in a step and how long its kernels take. Pure.
#include "planner/layout.hpp"
#include "planner/mask.hpp"
#include "planner/plan.hpp"
#include "planner/workload.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

// Rank r's queries against one KV piece: token counts and FLOPs (4*pairs*H*D*B) split by whether the
// tile pairs are whole (no mask) or cut by the causal diagonal; fully masked pairs cost nothing.
struct BlockWork {
  double lq = 0, lk = 0;
  double full_flops = 0, causal_flops = 0;
  // Tiles of kBackwardKeyTile keys that some query sees: the backward kernel's CTAs per batch and KV head
  // (it walks the queries of a key tile, all query heads of the group in one CTA).
  double key_tiles = 0;
  // The size curves act per block of a query range against a key range (a zigzag shard is two such
  // ranges, a causal step's diagonal blocks are chunk-sized): FLOPs times 1/|q range| + 1/|k range|, summed.
  double full_inv = 0, causal_inv = 0;
  double flops() const { return full_flops + causal_flops; }
  // Another piece for the same queries in the same launch: keys, key tiles and FLOPs add up.
  void add(const BlockWork& b) {
    lq = b.lq, lk += b.lk, full_flops += b.full_flops, causal_flops += b.causal_flops, key_tiles += b.key_tiles;
    full_inv += b.full_inv, causal_inv += b.causal_inv;
  }
};
// One block of lq queries against lk keys (the causal one: the keys end where the queries end).
BlockWork whole_block(const planner::Workload& w, double lq, double lk, bool causal);
constexpr double kBackwardKeyTile = 128;  // keys per CTA of tasp's Hopper backward kernel
// CTAs per key tile and query head of that kernel: two at D=256, each owning half of the head dim's columns
// (kernels/bwd_sm90.cuh, col_parts), one below.
constexpr int backward_column_parts(int D) { return D > 128 ? 2 : 1; }

// The occupancy of a launch's last wave (1: whole waves): the forward runs B * H * ceil(lq / tile_m) CTAs,
// the backward B * H * key_tiles (a CTA per query head, GQA too; the deterministic dQ's CTAs walk a whole group,
// which the simulator does not model), its last wave split in parts (backward_tail_gain).
double launch_fill(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool backward);
// How much shorter the backward's last wave runs split in parts (kernels/bwd_tail.hpp) than whole: `ctas` walks of
// `visits` visits each on `slots` SMs, the last wave's CTAs each split in the parts kernels::bwd::plan_tail would
// take for walks all this long (1: no split saves 1%). Walks taken equal, as the fill above takes them.
double backward_tail_gain(double ctas, double visits, double slots);

// `mask`: the workload's (planner::make_mask), when the caller keeps one; made here otherwise.
BlockWork block_work(const planner::Plan& p, const planner::Workload& w, int rank, int owner, int piece,
                     const planner::Mask* mask = nullptr);
// Pieces [piece, piece + count) of one owner, computed in one launch (a step of several pieces: allgather's
// --gather-steps). Measured on 2x H200 NVLink (2026-11-27, docs/measurements/model.md): a step of 4 pieces of 1/8 a
// shard ran as fast as one piece of 1/2 (medium, forward 516 against 548 us), where summing the pieces' blocks had
// charged each piece's short key run and put 4+2+1+1 35% over its measured time.
BlockWork block_work(const planner::Plan& p, const planner::Workload& w, int rank, int owner, int piece, int count,
                     const planner::Mask* mask = nullptr);
// The same for other query rows `q` than the rank's (moved rows, planner/query_moves.hpp: at `rank` = the move's at).
BlockWork block_work(const planner::Plan& p, const planner::Workload& w, const std::vector<planner::Range>& q, int owner,
                     int piece, int count, const planner::Mask* mask = nullptr);
// The same for any query and key ranges under the workload's documents and window (mask `m`): exact visible
// pairs, blocks cut by the mask at the masked-tile rate, fully masked ones free.
BlockWork masked_work(const planner::Workload& w, const planner::Mask& m, const std::vector<planner::Range>& q,
                      const std::vector<planner::Range>& k);
double piece_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece);  // K and V
// dK and dV of a piece as the backward's accumulator moves them (the plan's accumulator precision).
double grad_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece);
double shard_tokens(const planner::Plan& p, const planner::Workload& w, int rank);

// A merging forward launch's read and write of the running fp32 out and LSE of its `lq` query rows.
double forward_merge_us(const ComputeProfile& cp, const planner::Workload& w, double lq);
// One launch over a rank's work list in a step (items summed into `sum`, lk = all pieces' tokens),
// with the merge into the running out/LSE (when `merge`: not the rank's first compute) fused in.
double compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool merge);

// The backward kernel over a rank's work list in a step: 2.5x the forward's FLOPs of the same blocks at the
// profile's backward rates (BwdRate). `first`: the rank's first backward launch also pays the row sums
// D = rowsum(dO * O) over its queries (an elementwise pass over dO and O).
double backward_compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool first);
// Its part that does not depend on the FLOPs: the launch, and with `first` the row sums over lq queries and
// clearing the dQ scratch.
double backward_fixed_us(const ComputeProfile& cp, const planner::Workload& w, double lq, bool first);
// After the pass's last backward launch: dQ read out of the scratch into an fp32 dq (3 x its fp32 bytes), or with
// `dq16` into a 16-bit one (the scratch read, 16 bits written).
double backward_finish_us(const ComputeProfile& cp, const planner::Workload& w, double lq, bool dq16 = false);
// A whole backward of one work list on its own (what tasp bench kernel --pass bwd times): row sums, scratch,
// kernel, finish.
double backward_alone_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum);
// Adding `bytes` of received fp32/bf16 accumulators into the rank's own (read both, write one).
double accumulate_us(const ComputeProfile& cp, double bytes);
constexpr double kBackwardFlopsFactor = 2.5;
// A token-parallel rank inside a training framework (executor/rank_runner.cpp) copies what `tasp run` keeps in its own
// layout: the forward casts O out of its fp32 running output, the backward casts dK/dV out of their fp32 accumulators
// (Q, K, V, dO, dQ and the backward's O are used in place; the own K/V's first hops leave from the framework's
// tensors, executor/caller_kv.hpp), the casts
// taking the last step's adds with them where the accumulators' last partials arrive then (negative: 2 bytes an
// element less than `tasp run`'s add). Their bytes at the profile's HBM rate, and a launch each, for `pass` on rank r
// (torch.profiler on 2x H200 at S=65536 before the fused adds: 1.08 ms measured, these gave 1.16).
double framework_io_us(const ComputeProfile& cp, const planner::Plan& p, const planner::Workload& w, int rank,
                       planner::Pass pass);

}  // namespace tasp::simulator
