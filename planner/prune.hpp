#pragma once
// Plans for one mask: packed documents and sliding windows leave many (rank, piece) blocks with no visible
// pair, and a piece no rank downstream needs need not travel. Pruning drops those computes and transfers,
// sends a backward accumulator straight home once nobody ahead adds to it, and removes steps left empty.
#include <string>
#include <vector>

#include "planner/digraph.hpp"
#include "planner/mask.hpp"
#include "planner/plan.hpp"

namespace tasp::planner {

// The mask a plan holds for: the one it was pruned for, or just its causality over S tokens.
Mask plan_mask(const Plan& p, long S);
// needed[(rank * ranks + owner) * pieces + piece]: the rank's queries see some key of the piece.
std::vector<unsigned char> needed_blocks(const Plan& p, const Mask& m);
// Prunes `p` (expanding compact passes) for workload `w`'s mask; a no-op when the mask is plain (no documents,
// no window) unless `plain` asks for it, or when the plan has more than `max_ranks` ranks. A backward accumulator
// goes straight to its owner only over an arc of `arcs` (any pair when null) that the step does not already use.
void prune(Plan& p, const Workload& w, const Digraph* arcs, int max_ranks = 128, bool plain = false);
// Empty when plan `p` can run workload `w` as far as masks go; else why not.
std::string mask_mismatch(const Plan& p, const Workload& w);

}  // namespace tasp::planner
