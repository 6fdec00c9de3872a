#pragma once
// The cuda backend's head-parallel all-to-alls (plans with Plan::ulysses > 1), worked out before a run.
// GPU rank * u + slot holds, on the layer's side, a part of its group's tokens with every head: the group's
// rows in shard order (the plan rank's query ranges one after the other) cut into u parts of `chunk` rows.
// Going in, it sends each slot of its group that part's rows of the slot's heads; the slot's GPU then runs
// the plan as rank `rank` on its heads (Q rows in shard order, K/V pieces in slots, as for any plan). Going
// out, the head-layout results travel back to the token parts. Every exchange packs into one send buffer
// [peer][count] (16-bit), moves it with one ncclAlltoAll (or grouped send/recv) inside the group, and unpacks,
// so a 1-token part, a zigzag piece spanning two parts or replicated K/V heads (whose dK/dV arriving from the
// replicas are summed) are all block copies. Everything on the wire and on the layer's side is 16-bit, as the
// layer's tensors are; fp32 appears only where results leave the kernels. With head groups
// (Plan::head_groups) each group is such an exchange of its own heads, on the same layer-side tensors.
// Plain C++: no CUDA calls.
#include <map>
#include <vector>

#include "executor/cuda_pass.hpp"
#include "kernels/copy_blocks.hpp"
#include "planner/head_parallel.hpp"

namespace tasp::executor::cuda {

// The layer's side of one GPU: its token part with every head, 16-bit [B][chunk][H|Hkv][D].
struct SeqBuffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;
  void* out = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;  // backward
  void *send = nullptr, *recv = nullptr;             // 16-bit [u][count] (one head group's largest count)
};

// Where one head group's heads sit on the layer's side: rows of `q_row` elements (Q, O, dO, dQ) and `kv_row`
// (K, V, dK, dV); the group's first query and K/V head.
struct LayerSide {
  long q_row = 0, kv_row = 0;
  int q_head0 = 0, kv_head0 = 0;
};
LayerSide layer_side(const planner::Workload& whole, int groups, int group);

// One all-to-all: pack, exchange `count` 16-bit elements with each slot of the group (itself included), unpack
// in waves, one launch each: the copies of a launch run concurrently, so replicas' gradients that add into the
// same place go in different waves (the first replica's copy writes, the others add).
struct A2a {
  std::vector<kernels::BlockCopy> pack;
  std::vector<std::vector<kernels::BlockCopy>> unpack;
  size_t count = 0;
  double bytes = 0;  // sent to the other GPUs of the group
};

struct HeadExchange {
  A2a fwd_in, fwd_out, bwd_in, bwd_out;
};

// Rows of the group's shard that GPU `slot` holds on the layer's side: [begin, begin + size) in shard order.
struct Part {
  long begin = 0, size = 0;
};
long part_chunk(long rows, int u);
Part token_part(long rows, int u, int slot);
// The tokens of rows [begin, end) of rank r's shard (shard order: its query ranges one after the other).
std::vector<planner::Range> shard_rows_tokens(const Geometry& g, int r, long begin, long end);
// Where rows of a part lie in the rank's own K/V pieces: the piece, the offset in it, the offset in the part and
// the length (shard order and piece order differ for zigzag pieces, which take a slice of both halves).
struct PieceRun {
  int piece = 0;
  long piece_off = 0, part_off = 0, len = 0;
};
std::vector<PieceRun> piece_runs(const Geometry& g, int r, Part part);

// A strided copy between a rank's shard as a framework holds it ([B][rows][Hkv*D], tokens in shard order) and its
// own pieces' slots ([B][max_piece][Hkv*D] per half slot): `height` = B rows of `width` elements, offsets and
// pitches in elements of each side. A rank runner stages K/V in with these and takes dK/dV out with them.
struct ShardCopy {
  int piece = 0;  // the own piece (its slot: the piece's index, or its final accumulator's)
  size_t slot_off = 0, slot_pitch = 0, shard_off = 0, shard_pitch = 0, width = 0, height = 0;
};
// The copies of one half (K or dK: 0; V or dV: 1) between rank r's shard and its own pieces, offsets within the
// half's slot (add the slot's start and, for V, half_slot()).
std::vector<ShardCopy> shard_copies(const Geometry& g, int r);
// Elements each GPU of a group sends every slot in the largest of the four all-to-alls.
size_t a2a_max_count(const Geometry& g, const planner::Workload& w, int u);

// The four exchanges of GPU rank * u + slot for one head group. `g` is the plan's geometry for one slot's share of
// the group; `w` the group's workload (planner::head_group_workload); `side` where the group sits on the layer's
// side; `grad_final` the backward's final accumulator slot of each own piece (empty without a backward).
HeadExchange make_head_exchange(const Geometry& g, const planner::Workload& w, int u, int rank, int slot,
                                const RankBuffers& b, const SeqBuffers& sb, const std::map<long, int>& grad_final,
                                const LayerSide& side);

}  // namespace tasp::executor::cuda
