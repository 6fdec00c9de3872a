#pragma once
// Which tokens each rank and each KV piece holds. Pieces of a zigzag shard take a slice of both halves,
// so every piece carries the same causal work.
#include <string>
#include <vector>

#include "planner/plan.hpp"

namespace tasp::planner {

struct Range {
  long begin = 0, end = 0;
  long size() const { return end - begin; }
};

// Shards (contiguous: one chunk per rank; zigzag: chunks r and 2n-1-r of 2n) and pieces (a slice of each chunk)
// need not be equal: lengths differ by a token at most. Empty string if S tokens give every piece a token in
// this layout; else why not.
std::string check_split(Layout l, int n, int pieces, long S);
std::vector<Range> shard_ranges(Layout l, int n, long S, int rank);
std::vector<Range> piece_ranges(Layout l, int n, int pieces, long S, int rank, int piece);

// (q, k) pairs of query range q and key range k that attention computes: all of them, or with causal
// masking those with k <= q (closed form; the simulator's FLOPs and the executors' timelines use it).
double visible_pairs(const Range& q, const Range& k, bool causal);

}  // namespace tasp::planner
