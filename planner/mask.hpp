#pragma once
// Which keys a query sees: causal, packed documents (no query sees another document), a sliding window.
// Every query's visible keys form one interval [lo(q), hi(q)] (its document, cut by the window and by
// causality), and lo and hi never decrease with q; the kernels, the CPU executor, the simulator's FLOPs and
// the planner's pruning all use that shape.
#include <vector>

#include "planner/layout.hpp"
#include "planner/workload.hpp"

namespace tasp::planner {

struct Mask {
  long S = 0;
  bool causal = false;
  long left = -1, right = -1;  // window sides in keys; -1: unbounded
  std::vector<long> starts;    // first positions of the documents after the first (ascending); empty: one

  bool plain() const { return left < 0 && right < 0 && starts.empty(); }
  long doc_begin(long q) const;  // the document of position q: [doc_begin, doc_end)
  long doc_end(long q) const;
  long lo(long q) const;  // first key q sees
  long hi(long q) const;  // last key q sees (>= lo(q): a query always sees itself)
  bool visible(long q, long k) const { return k >= lo(q) && k <= hi(q); }
};

Mask make_mask(const Workload& w);
Mask make_mask(long S, bool causal, long left, long right, const std::vector<long>& docs);

// Unmasked (query, key) pairs of query range q against key range k, exact (closed form per document).
double visible_pairs(const Mask& m, const Range& q, const Range& k);
// The range cut at document boundaries (the kernels take query runs inside one document).
std::vector<Range> split_at_docs(const Mask& m, const Range& r);
// Keys of range k that some query of range q sees: [first, last + 1) clipped to k (empty when none).
Range seen_keys(const Mask& m, const Range& q, const Range& k);

}  // namespace tasp::planner
