#pragma once
// What the cuda backend works out before a run, for each pass and local rank: the token geometry, the slot
// plan, every step's work list (forward: attention into the running out/LSE; backward: dQ and the pieces'
// dK/dV accumulators) and what each step moves and computes (for the timeline). Plain C++: no CUDA calls.
#include <set>
#include <vector>

#include "planner/slot_plan.hpp"
#include "kernels/attention.hpp"
#include "planner/layout.hpp"
#include "planner/mask.hpp"
#include "planner/plan.hpp"
#include "planner/workload.hpp"

namespace tasp::executor::cuda {

// The kernels' input type of a workload (bf16 unless it says fp16).
inline kernels::DType dtype_of(const planner::Workload& w) { return w.dtype == "fp16" ? kernels::DType::FP16 : kernels::DType::BF16; }

struct Geometry {
  int n = 0, P = 0, B = 1;
  long max_piece = 0;  // tokens of the largest piece: every slot holds that many
  long row_elems = 0;  // Hkv * D: elements per token of K, V, dK or dV
  std::vector<std::vector<planner::Range>> qranges;  // per rank
  std::vector<long> qrows;
  std::vector<std::vector<planner::Range>> pranges;  // per piece key
  std::vector<long> ptokens;
  long key(int owner, int piece) const { return long(owner) * P + piece; }
  // A K/V slot: [K | V], each [B][max_piece][Hkv][D] (bf16); an accumulator slot: [dK | dV] alike (fp32).
  size_t slot_elems() const { return size_t(B) * max_piece * row_elems * 2; }
  size_t half_slot() const { return slot_elems() / 2; }
};
Geometry make_geometry(const planner::Plan& p, const planner::Workload& w);

// Device addresses of one rank's buffers, which the work lists point into.
struct RankBuffers {
  void* q = nullptr;
  void* dout = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  float* dsum = nullptr;
  float* dq = nullptr;
  float* dq_accum = nullptr;  // the backward kernel's dQ scratch (kernels::dq_accum_floats)
  // Where a framework keeps the forward's output and wants dQ, in the workload's 16-bit type (the rank path,
  // executor/rank_runner.cpp): the backward reads `out16` instead of `out` and writes `dq16` instead of `dq`.
  const void* out16 = nullptr;
  void* dq16 = nullptr;
  void* kv = nullptr;     // K/V slots (bf16)
  // A framework's K and V of this rank's shard ([B][rows][Hkv*D]), which a pass with first_hop sends its own
  // pieces from (executor/caller_kv.hpp).
  const void* own_k = nullptr;
  const void* own_v = nullptr;
  float* grad = nullptr;  // accumulator slots (fp32)
  // Instead of `grad`, where every accumulator is one launch's whole sum (grads_written_once) and one CTA writes each
  // key row (H == Hkv): the same slots in the workload's 16-bit type, which the kernel writes (kernels::GradPiece::dk16)
  // and the all-to-all out reads as they are. Nothing to clear, no fp32 reductions, no cast: at B=1 S=8192 H=32
  // D=128 on 2 GPUs, 134 MB of fp32 slots cleared, reduced into and read back, where 34 MB of 16-bit ones are written.
  uint16_t* grad16 = nullptr;
  // Accumulators that travel in bf16 (Plan::accumulator_bytes = 2): cast into `grad_send16` before they leave,
  // received into `grad_recv16`, then added to (or made) the rank's own fp32 ones; slots of slot_elems each.
  uint16_t* grad_send16 = nullptr;
  uint16_t* grad_recv16 = nullptr;
  // Collective exchanges (Exchange::ReduceScatter): every owner's accumulators side by side ([n][P] slots, this
  // rank's zeroed) and what the reduce-scatter leaves of this rank's own ([P] slots), in the accumulators' precision.
  void* rs_send = nullptr;
  void* rs_recv = nullptr;
  // Query rows moved from or to this rank (Plan::query_moves; the cuda backend takes at most one a rank): as their
  // owner, where they lie among its rows and what leaves and returns; as their `at`, the rows' Q (kept for the
  // backward), the backward's dO with LSE and D, the forward's partial out and LSE and the backward's dQ scratch.
  struct MovedRows {
    int move = -1;
    bool owner = false;
    int row0 = 0, len = 0;
    void* send = nullptr;  // owner: Q, or dO | LSE | D (MovedLayout); at: the partial out in 16 bits | LSE, or dQ in 16 bits
    void* recv = nullptr;  // owner: what returns
    void* q = nullptr;     // at
    void* in = nullptr;    // at: dO | LSE | D
    float* out = nullptr;  // at: [B][len][H][D]
    float* lse = nullptr;  // at: [B][H][len]
    float* dq_accum = nullptr;
  } moved;
};

// Where moved rows' parts lie in the buffers they travel in: a 16-bit tensor [B][len][H][D] (Q, out, dO or dQ), then
// fp32 rows [B][H][len] (LSE, then the backward's D), each part on a 256-byte boundary.
struct MovedLayout {
  size_t tensor = 0, rows = 0, lse_at = 0, dsum_at = 0;
  size_t fwd_out() const { return tensor; }
  size_t fwd_back() const { return lse_at + rows; }
  size_t bwd_out() const { return dsum_at + rows; }
  size_t bwd_back() const { return tensor; }
};
MovedLayout moved_layout(const planner::Workload& w, long len);

// One message of a K/V piece its owner sends from a framework's tensors: `count` elements of K (half 0) or V (half 1)
// from `shard_off` of the tensor, into the receiver's slot at `slot_off` from the slot's start (both halves counted).
struct OwnMessage {
  int half = 0;
  size_t shard_off = 0, slot_off = 0, count = 0;
};

// How a step's transfers move. With collective exchanges (CudaOptions::collectives) a step in which every rank
// sends its own pieces to every other rank is one ncclAllGather into K/V slots laid out by owner
// (planner::plan_slots by_owner), and one in which every rank sends every other owner its accumulators of that
// owner's pieces is one ncclReduceScatter; NCCL runs both faster than grouped send/recv over sockets (1.45x at
// 256 MiB on 2 GPUs, docs/measurements/fabrics.md). Anything else: point to point.
enum class Exchange { PointToPoint, AllGather, ReduceScatter };
// `per_root`: the ranks hold a communicator a root (CudaOptions::root_comms), so a step whose owners do not all send
// (planner::per_root_of) still goes as their broadcasts or reduces.
Exchange exchange_of(const planner::Step& s, int n, int P, bool per_root = false);

// Per GPU: GPU x runs plan rank x / u (head-parallel plans: groups of u GPUs; otherwise u = 1, GPU = rank).
struct PassWork {
  planner::Pass pass = planner::Pass::Fwd;
  int accumulator_bytes = 4;  // accumulators in transit: 4 (fp32) or 2 (bf16)
  std::vector<Exchange> exchange;  // [step]; point to point unless collectives were asked for
  std::vector<planner::Step> steps;
  std::vector<planner::RankSlots> slots;                          // [gpu] (local GPUs only)
  std::vector<std::vector<kernels::AttentionBatch>> fwd;          // [gpu][step]
  std::vector<std::vector<kernels::AttentionBackwardBatch>> bwd;  // [gpu][step]
  std::vector<std::vector<double>> bytes, flops;                  // [rank][step], every rank
  // Backward, token-parallel: (step, slot) of the accumulator slots a step after the first clears at their first use
  // in the pass, cleared instead on the comm stream at the pass's start, beside step 0's kernel (slots_zeroed_ahead)
  // [gpu].
  std::vector<std::vector<std::pair<int, int>>> grad_zero_ahead;
  // Backward, bf16 accumulators: the sends whose accumulator the kernel wrote into its staging in 16 bits
  // (sends_written_once) [gpu]: (send step, key), and the (step, slot)s whose clearing that write makes needless.
  std::vector<std::set<std::pair<int, long>>> sent_as_written;
  std::vector<std::set<std::pair<int, int>>> not_cleared;
  // Backward, point to point: the last step leaves these adds (planner::final_adds) to the caller, who makes them with
  // its casts; made once with the lists.
  std::vector<planner::FinalAdd> deferred_adds;
  // Point to point, by piece key: a K/V piece's first hop leaves its owner from RankBuffers::own_k/own_v in these runs
  // and lands in the receiver's slot in the same runs (caller_kv.hpp, first_hop_messages); set alike on every rank of
  // the plan. Empty: one message from the slot.
  std::vector<std::vector<OwnMessage>> first_hop;
  // Query moves: at a move's `at` GPU, each step's launch over the moved rows (no pieces: none that step), and the
  // pass's first and last such step (its dQ scratch cleared before the first, the rows' dQ finished after the last).
  std::vector<std::vector<kernels::AttentionBatch>> mfwd;          // [gpu][step]
  std::vector<std::vector<kernels::AttentionBackwardBatch>> mbwd;  // [gpu][step]
  std::vector<std::pair<int, int>> moved_steps;                    // [gpu]: (first, last), -1 when none
  std::vector<planner::QueryMove> query_moves;                     // the plan's
  int num_steps() const { return int(steps.size()); }
};
// The accumulator slots of a backward's slot plan that a step t >= 1 clears (grad_zero) and no earlier step uses in
// any way (clears, adds into, sends, receives into, adds from): they can be cleared when the pass starts, off the
// critical path (allgather's own accumulators: 134 MB at B=1 S=8192 H=32 per rank, about 50 us of a 2.7 ms fwd+bwd).
std::vector<std::pair<int, int>> slots_zeroed_ahead(const planner::RankSlots& rs);  // (step, slot)


// Work items of query rows `rows` (global positions; row `row0` of the buffer holds rows.begin) over the
// batch's first `pieces` pieces: one per document the rows cross, each with its document and the workload's
// window (the kernels' masks).
std::vector<kernels::WorkItem> masked_items(const planner::Workload& w, const planner::Mask& m, const planner::Range& rows,
                                            int row0, int pieces, bool accumulate);
// Tiles of `rows` rows (kernels::dq_accum_tile_rows) the backward's dQ scratch holds for a rank's query ranges (split
// at documents, as its items).
size_t dq_tiles(const planner::Mask& m, const std::vector<planner::Range>& qranges, int rows);
// Whether the items' rows cover rows [0, q_rows) of Q (the backward's dQ finish then writes every row, and the dQ it
// writes needs no clearing first).
bool items_cover_rows(const std::vector<kernels::WorkItem>& items, long q_rows);

// `local`: the GPUs this process drives; `bufs`: their buffers, indexed by GPU; `w`: one GPU's workload;
// `collectives`: all-gather and reduce-scatter steps as NCCL collectives, K/V slots by owner (plan_slots by_owner);
// `per_root`: with a communicator a root, also steps in which not every owner sends (exchange_of).
PassWork make_pass_work(const planner::Plan& p, planner::Pass pass, const planner::Workload& w, const Geometry& g,
                        const std::vector<int>& local, const std::vector<RankBuffers>& bufs, int u = 1,
                        bool collectives = false, bool per_root = false);

// Moves GPU `gpu`'s work lists from K/V slots at `from` to the same slots at `to` (`bytes` long): the K and V of every
// piece that lies in [from, from + bytes). A rank runner points each call's work at the caller's `saved` buffer, so
// that the forward gathers K/V straight into it and that layer's backward reads them there.
void rebase_kv(PassWork& pw, int gpu, const void* from, const void* to, size_t bytes);

}  // namespace tasp::executor::cuda
