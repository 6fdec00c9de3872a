#include "planner/layout.hpp"

#include <algorithm>

namespace tasp::planner {

const char* layout_name(Layout l) {
  return l == Layout::Zigzag ? "zigzag" : l == Layout::ZigzagDocs ? "zigzag-docs" : "contiguous";
}
bool parse_layout(const std::string& s, Layout* out) {
  if (s == "contiguous") return *out = Layout::Contiguous, true;
  if (s == "zigzag") return *out = Layout::Zigzag, true;
  if (s == "zigzag-docs") return *out = Layout::ZigzagDocs, true;
  return false;
}

// S tokens in `parts` chunks whose lengths differ by one at most (the first S % parts... spread evenly): chunk
// i is [i * S / parts, (i + 1) * S / parts). No padding: every token is real, so results do not change.
static Range chunk(long S, long parts, long i) { return {i * S / parts, (i + 1) * S / parts}; }

std::string pieces_by_chunk_error(Layout layout, int pieces, int sub) {
  if (layout == Layout::ZigzagDocs) return "pieces_by_chunk: not for the zigzag-docs layout";
  const int chunks = layout == Layout::Zigzag ? 2 * std::max(1, sub) : 1;
  if (pieces % chunks != 0)
    return "pieces_by_chunk: " + std::to_string(pieces) + " pieces a rank do not divide among its " +
           std::to_string(chunks) + " chunks";
  return "";
}

std::string check_split(const Split& s) {
  if (s.S <= 0) return "S must be positive";
  if (s.layout == Layout::ZigzagDocs) {
    long sum = 0;
    for (long d : *s.docs) sum += d;
    if (s.docs->empty() || sum != s.S)
      return "the zigzag-docs layout's document lengths sum to " + std::to_string(sum) + ", not S=" + std::to_string(s.S);
    for (int r = 0; r < s.n; ++r)
      for (int p = 0; p < s.pieces; ++p) {
        long tokens = 0;
        for (const Range& x : piece_ranges(s, r, p)) tokens += x.size();
        if (tokens == 0)
          return "the documents leave rank " + std::to_string(r) + "'s piece " + std::to_string(p) +
                 " without a token in the zigzag-docs layout (too few or too short documents for " + std::to_string(s.n) +
                 " ranks x " + std::to_string(s.pieces) + " pieces)";
      }
    return {};
  }
  const long parts = s.layout == Layout::Zigzag ? 2L * s.n * s.sub : s.n;
  if (s.by_chunk) {
    const long chunks = s.layout == Layout::Zigzag ? 2L * s.sub : 1;
    if (std::string e = pieces_by_chunk_error(s.layout, s.pieces, s.sub); !e.empty()) return e;
    if (s.S / parts < s.pieces / chunks)
      return "S=" + std::to_string(s.S) + " leaves fewer than " + std::to_string(s.pieces / chunks) +
             " tokens per chunk for its pieces: S must be at least " + std::to_string(parts * s.pieces / chunks);
    return {};
  }
  if (s.S / parts < s.pieces)
    return "S=" + std::to_string(s.S) + " leaves fewer than " + std::to_string(s.pieces) + " tokens per " +
           (s.layout == Layout::Zigzag ? "zigzag chunk (2 per rank)" : "shard") + " for " + std::to_string(s.pieces) +
           " pieces: S must be at least " + std::to_string(parts * s.pieces);
  return {};
}

std::vector<Range> shard_ranges(const Split& s, int r) {
  if (s.layout == Layout::Contiguous) return {chunk(s.S, s.n, r)};
  if (s.layout == Layout::Zigzag) {
    const long N = long(s.n) * s.sub;
    std::vector<Range> out;
    for (long g = long(r) * s.sub; g < long(r + 1) * s.sub; ++g) out.push_back(chunk(s.S, 2 * N, g)), out.push_back(chunk(s.S, 2 * N, 2 * N - 1 - g));
    return out;
  }
  std::vector<Range> out;
  long at = 0;
  for (long d : *s.docs) {
    for (long c : {long(r), 2L * s.n - 1 - r}) {
      const Range x = chunk(d, 2L * s.n, c);
      if (x.size() > 0) out.push_back({at + x.begin, at + x.end});
    }
    at += d;
  }
  return out;
}

std::vector<Range> piece_ranges(const Split& s, int r, int p) {
  std::vector<Range> out;
  if (s.by_chunk && s.layout != Layout::ZigzagDocs) {  // slice p % per of chunk p / per (check_split: per whole)
    const std::vector<Range> chunks = shard_ranges(s, r);
    const int per = std::max(1, s.pieces / int(chunks.size()));
    const Range h = chunks.at(std::min(size_t(p / per), chunks.size() - 1));
    const long len = h.size(), j = p % per;
    out.push_back({h.begin + len * j / per, h.begin + len * (j + 1) / per});
    return out;
  }
  for (Range h : shard_ranges(s, r)) {
    const long len = h.size();
    const Range x{h.begin + len * p / s.pieces, h.begin + len * (p + 1) / s.pieces};
    if (x.size() > 0 || s.layout != Layout::ZigzagDocs) out.push_back(x);
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
