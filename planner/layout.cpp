#include "planner/layout.hpp"

#include <algorithm>

namespace tasp::planner {

const char* layout_name(Layout l) { return l == Layout::Zigzag ? "zigzag" : "contiguous"; }
bool parse_layout(const std::string& s, Layout* out) {
  if (s == "contiguous") return *out = Layout::Contiguous, true;
  if (s == "zigzag") return *out = Layout::Zigzag, true;
  return false;
}

// S tokens in `parts` chunks whose lengths differ by one at most (the first S % parts... spread evenly): chunk
// i is [i * S / parts, (i + 1) * S / parts). No padding: every token is real, so results do not change.
static Range chunk(long S, long parts, long i) { return {i * S / parts, (i + 1) * S / parts}; }

std::string check_split(Layout l, int n, int pieces, long S) {
  const long parts = l == Layout::Zigzag ? 2L * n : n;
  if (S <= 0) return "S must be positive";
  if (S / parts < pieces)
    return "S=" + std::to_string(S) + " leaves fewer than " + std::to_string(pieces) + " tokens per " +
           (l == Layout::Zigzag ? "zigzag chunk (2 per rank)" : "shard") + " for " + std::to_string(pieces) +
           " pieces: S must be at least " + std::to_string(parts * pieces);
  return {};
}

std::vector<Range> shard_ranges(Layout l, int n, long S, int r) {
  if (l == Layout::Contiguous) return {chunk(S, n, r)};
  return {chunk(S, 2L * n, r), chunk(S, 2L * n, 2L * n - 1 - r)};
}

std::vector<Range> piece_ranges(Layout l, int n, int pieces, long S, int r, int p) {
  std::vector<Range> out;
  for (Range h : shard_ranges(l, n, S, r)) {
    long len = h.size();
    out.push_back({h.begin + len * p / pieces, h.begin + len * (p + 1) / pieces});
  }
  return out;
}

double visible_pairs(const Range& q, const Range& k, bool causal) {
  if (q.size() <= 0 || k.size() <= 0) return 0;
  if (!causal) return double(q.size()) * double(k.size());
  double total = 0;
  // Rows inside the key range see keys [k.begin, row]: row - k.begin + 1 of them.
  const long lo = std::max(q.begin, k.begin), hi = std::min(q.end, k.end);
  if (hi > lo) total += (double(lo - k.begin + 1) + double(hi - k.begin)) * double(hi - lo) / 2;
  // Rows past the key range see all of it.
  const long past = std::max(q.begin, k.end);
  if (q.end > past) total += double(q.end - past) * double(k.size());
  return total;
}

}  // namespace tasp::planner
