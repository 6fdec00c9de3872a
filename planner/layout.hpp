#pragma once
// Which tokens each rank and each KV piece holds. Pieces of a zigzag shard take a slice of both halves (or, by chunk,
// of one; Plan::pieces_by_chunk),
// so every piece carries the same causal work.
#include <string>
#include <vector>

#include "planner/plan.hpp"

namespace tasp::planner {

struct Range {
  long begin = 0, end = 0;
  long size() const { return end - begin; }
};

// How a plan splits S tokens: shards (contiguous: one chunk per rank; zigzag: chunks r and 2n-1-r of 2n;
// zigzag-docs: those two chunks of every document) and pieces (a slice of each chunk). Chunks need not be
// equal: lengths differ by a token at most. A view: `docs` points into the plan.
// Head-parallel plans (`sub` = Plan::ulysses GPUs per rank): a zigzag rank's shard is its GPUs' zigzag shards over all
// n * sub GPUs, GPU by GPU (GPU g = r * sub + j: chunks g and 2N-1-g of 2N, N = n * sub), so that the token part
// each GPU of the group holds (cuda_heads.hpp: the shard cut into sub equal parts) is that GPU's own zigzag shard, the
// one a token-parallel zigzag plan of N ranks gives it: a model sharded once serves both families. The rank's causal
// work stays balanced (each GPU's two chunks pair off).
struct Split {
  Layout layout = Layout::Contiguous;
  int n = 1, pieces = 1;
  long S = 0;
  const std::vector<long>* docs = nullptr;  // ZigzagDocs: the documents' lengths
  int sub = 1;
  bool by_chunk = false;  // Plan::pieces_by_chunk: a piece is a slice of one chunk, the chunks' pieces in turn
};
inline Split split_of(const Plan& p, long S) {
  return {p.layout, p.ranks, p.pieces_per_rank, S, &p.layout_docs, p.ulysses, p.pieces_by_chunk};
}

// "" when `pieces` a rank can be cut by chunk (Plan::pieces_by_chunk) in this layout (`sub` GPUs a rank: 2 * sub
// zigzag chunks), else why not: not for zigzag-docs, and the chunks must share the pieces evenly.
std::string pieces_by_chunk_error(Layout layout, int pieces, int sub);
// Empty string if S tokens give every piece a token in this split; else why not.
std::string check_split(const Split& s);
std::vector<Range> shard_ranges(const Split& s, int rank);
std::vector<Range> piece_ranges(const Split& s, int rank, int piece);

// (q, k) pairs of query range q and key range k that attention computes: all of them, or with causal
// masking those with k <= q (closed form; the simulator's FLOPs and the executors' timelines use it).
double visible_pairs(const Range& q, const Range& k, bool causal);

}  // namespace tasp::planner
