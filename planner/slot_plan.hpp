#pragma once
// Where a rank keeps what a pass's steps give it, decided before the run so that nothing is allocated,
// copied or concatenated inside the steps: K/V pieces in slots (its own pieces in slots 0..P-1 for good, so
// a pass can be repeated and the backward finds them after the forward; arrivals in slots reused after a
// piece's last use), and in the backward the dK/dV accumulators (made when the rank
// first adds to a piece, sent and freed, received into a slot and added to the rank's own at the end of
// the step, or kept as its own when it has none). Pure: the same for any backend with buffers.
#include <map>
#include <utility>
#include <vector>

#include "planner/plan.hpp"

namespace tasp::planner {

struct StepSlots {
  std::map<long, int> held;      // K/V pieces held during the step: key -> slot (what computes and sends read)
  std::map<long, int> arrivals;  // K/V pieces received in the step: key -> slot
  // Backward.
  std::vector<int> grad_zero;          // accumulator slots to clear before the step's kernel (new accumulators)
  std::map<long, int> grad_compute;    // key -> the accumulator slot the step's kernel adds into
  std::map<long, int> grad_send;       // key -> the accumulator slot sent (to the transfer's dst)
  std::map<std::pair<long, int>, int> grad_recv;  // (key, sender) of a transfer to this rank -> its arrival slot
  std::vector<std::pair<int, int>> grad_add;  // after the step's transfers: slot `first` += slot `second`
};

struct RankSlots {
  std::vector<StepSlots> steps;
  int kv_slots = 0, grad_slots = 0;
  std::map<long, int> held_final;  // the K/V pieces the rank holds after the last step: key -> slot
  std::map<long, int> grad_final;  // the accumulators the rank holds after the last step: key -> slot
};

// key = owner * pieces_per_rank + piece. Several accumulators of one piece may arrive in one step (a
// reduce-scatter): each gets its slot and all are added. A backward that keeps K/V (Schedule::keeps_kv) starts
// where the forward ends: the forward frees no piece it received, and the backward finds each in its slot.
// `by_owner`: every K/V piece in its slot by_owner_slot (n * P slots, own ones included, piece-major), so that a step
// gathering a piece is one all-gather into the slots in place (the cuda backend's collective exchanges).
RankSlots plan_slots(const Plan& p, Pass pass, int rank, bool by_owner = false);
// The most accumulators a rank sends and receives in one step of a slot plan (the bf16 staging it needs).
std::pair<int, int> most_grad_transfers(const RankSlots& s);
// K/V piece (owner, piece)'s slot when slots are by owner: piece * ranks + owner (piece c's n blocks side by side).
int by_owner_slot(const Plan& p, int owner, int piece);

// One add of received dK/dV accumulators into a rank's own at the end of a point-to-point step, in the order a backend
// makes them (step_adds): fp32 accumulators as grad_add lists them; `half` (bf16 in transit) each received one from
// its 16-bit staging (grad_recv's order) into the own slot grad_add maps its arrival to, or adopted by the arrival's
// own fp32 slot when the rank holds none of that piece.
struct StepAdd {
  int into = 0;        // the fp32 accumulator slot written
  int from = -1;       // the fp32 accumulator slot added, or -1
  int from16 = -1;     // the received bf16 accumulator's staging index (grad_recv's order), or -1
  bool adopt = false;  // `into` takes the received values (it held nothing)
};
std::vector<StepAdd> step_adds(const StepSlots& s, bool half);

// The last point-to-point add into each of rank r's own final dK/dV accumulators (grad_final) in a backward's last
// step, with its own piece: a caller that casts the final accumulators out anyway (a training framework's rank,
// executor/rank_runner.cpp) makes that add part of the cast, one pass over the accumulator instead of two (medium on
// 2x H200: four 61 us casts after the backward's last adds, 2026-11-26); the simulator counts it (framework_io_us).
// Only an add nothing later in the step reads or writes around: the last one into its slot, from a source no later
// add changes.
struct FinalAdd : StepAdd {
  int piece = 0;  // the own piece
};
std::vector<FinalAdd> final_adds(const RankSlots& rs, int rank, int pieces_per_rank, bool half);

// Whether each accumulator of a backward's slot plan is one launch's whole sum: one step, no accumulator sent,
// received or added (a head-parallel pass on its own GPU: Ulysses):
// the backward can write each in 16 bits (kernels::GradPiece::dk16) where one CTA writes each key row.
bool grads_written_once(const RankSlots& rs);

// The accumulators of a backward's slot plan that one launch makes whole and that then only leave, once: cleared and
// computed into at `step` alone, sent at `send_step` and used no other way, and no accumulator leaves the rank before
// `send_step` (the staging it travels from is not in use). With bf16 accumulators the kernel writes each straight into
// its staging in 16 bits (allgather's sum for a gathered piece: no fp32 slot to clear, reduce into and cast).
struct SendWrittenOnce {
  int step, slot;
  long key;
  int send_step;
};
std::vector<SendWrittenOnce> sends_written_once(const RankSlots& rs);

}  // namespace tasp::planner
