#pragma once
// Steps that are one NCCL collective: every rank sends its own pieces to every other rank (an all-gather of K/V), or
// every rank sends every other owner its accumulators of that owner's pieces (a reduce-scatter of dK/dV). The cuda
// backend runs such steps as ncclAllGather / ncclReduceScatter when asked (--collectives), and the simulator times
// them at the profile's collective rate. Pure: no I/O.
#include <vector>

#include "planner/plan.hpp"

namespace tasp::planner {

enum class Collective { None, AllGather, ReduceScatter };
// What step `s` of a plan of `n` ranks with `P` pieces per rank is: None unless, for the pieces it moves, it holds
// every (sender, owner, piece, receiver) of one of the two patterns exactly once. Each piece is then one collective
// (collective_pieces): with the K/V slots piece-major (planner::plan_slots by owner: slot piece * n + owner) a
// piece's n blocks lie side by side, as NCCL's all-gather fills them and its reduce-scatter reads them, so an
// allgather in pieces (PlanOptions::gather_pieces) gathers and reduce-scatters piece by piece beside its compute.
Collective collective_of(const Step& s, int n, int P);
// The same where each root has a communicator of its own (a broadcast or reduce a root): every (owner, piece) the step
// moves goes from its owner to every other rank, or comes home from every other rank, but not every owner need move
// a piece (a plan pruned for its mask: on 2 ranks a step in which one rank sends and the other does not).
Collective per_root_of(const Step& s, int n, int P);
// The pieces a collective step moves, ascending; those of one owner (`owner` >= 0), for a step a root at a time.
std::vector<int> collective_pieces(const Step& s, int owner = -1);
// Whether a plan's steps may run as collectives at all: allgather's, token-parallel (its gathers and reduce-scatters;
// the backends, the simulator and the C ABI ask this one question).
bool collectives_apply(const Plan& p);

}  // namespace tasp::planner
