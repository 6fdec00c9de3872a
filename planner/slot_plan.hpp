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
// `by_owner`: every K/V piece in slot owner * pieces_per_rank + piece (n * P slots, own ones included), so that a
// step gathering every piece is one all-gather into the slots in place (the cuda backend's collective exchanges).
RankSlots plan_slots(const Plan& p, Pass pass, int rank, bool by_owner = false);

}  // namespace tasp::planner
