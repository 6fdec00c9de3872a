#include "planner/mask.hpp"

#include <algorithm>
#include <limits>

namespace tasp::planner {

Mask make_mask(long S, bool causal, long left, long right, const std::vector<long>& docs) {
  Mask m;
  m.S = S, m.causal = causal, m.left = left, m.right = causal ? -1 : right;  // causal: hi(q) <= q already
  long at = 0;
  for (size_t i = 0; i + 1 < docs.size(); ++i) m.starts.push_back(at += docs[i]);
  return m;
}

Mask make_mask(const Workload& w) { return make_mask(w.S, w.causal, w.window_left, w.window_right, w.docs); }

long Mask::doc_begin(long q) const {
  auto it = std::upper_bound(starts.begin(), starts.end(), q);
  return it == starts.begin() ? 0 : *(it - 1);
}
long Mask::doc_end(long q) const {
  auto it = std::upper_bound(starts.begin(), starts.end(), q);
  return it == starts.end() ? S : *it;
}
long Mask::lo(long q) const {
  long x = doc_begin(q);
  if (left >= 0) x = std::max(x, q - left);
  return x;
}
long Mask::hi(long q) const {
  long x = doc_end(q) - 1;
  if (causal) x = std::min(x, q);
  if (right >= 0) x = std::min(x, q + right);
  return x;
}

namespace {

constexpr long kInf = std::numeric_limits<long>::max() / 4;

// Sum over i in [0, n) of max(0, f0 + s * i), s in {-1, 0, 1}.
double positive_sum(long f0, int s, long n) {
  if (n <= 0) return 0;
  if (s == 0) return f0 > 0 ? double(f0) * double(n) : 0;
  if (s < 0) f0 -= n - 1;  // the same values, ascending
  const long i0 = std::max(0L, 1 - f0);
  if (i0 >= n) return 0;
  const double c = double(n - i0);
  return c * double(f0) + (double(i0) + double(n - 1)) * c / 2;
}

}  // namespace

// Inside one document [db, de) with keys clipped to [a, b): a query q sees [max(a, q - L), min(b - 1, q + R)]
// (R = 0 when causal), whose length is concave and piecewise linear in q with slopes -1, 0, 1 between the
// breakpoints q = a + L and q = b - 1 - R. Summing the positive part segment by segment is exact.
double visible_pairs(const Mask& m, const Range& q, const Range& k) {
  if (q.size() <= 0 || k.size() <= 0) return 0;
  if (m.plain()) return visible_pairs(q, k, m.causal);
  const long L = m.left >= 0 ? m.left : kInf;
  const long R = m.causal ? (m.right >= 0 ? std::min(m.right, 0L) : 0) : (m.right >= 0 ? m.right : kInf);
  double total = 0;
  for (const Range& seg : split_at_docs(m, q)) {
    const long db = m.doc_begin(seg.begin), de = m.doc_end(seg.begin);
    const long a = std::max(k.begin, db), b = std::min(k.end, de);
    if (b <= a) continue;
    std::vector<long> cuts{seg.begin, seg.end};
    for (long c : {a + L, b - 1 - R})
      if (c > seg.begin && c < seg.end) cuts.push_back(c);
    std::sort(cuts.begin(), cuts.end());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const long s0 = cuts[i], n = cuts[i + 1] - s0;
      if (n <= 0) continue;
      const bool lo_moves = s0 - L >= a, hi_moves = s0 + R < b - 1;  // within the segment, as at its start
      const long lo0 = std::max(a, s0 - L), hi0 = std::min(b - 1, s0 + R);
      total += positive_sum(hi0 - lo0 + 1, int(hi_moves) - int(lo_moves), n);
    }
  }
  return total;
}

std::vector<Range> split_at_docs(const Mask& m, const Range& r) {
  std::vector<Range> out;
  for (long at = r.begin; at < r.end;) {
    const long e = std::min(r.end, m.doc_end(at));
    out.push_back({at, e});
    at = e;
  }
  return out;
}

Range seen_keys(const Mask& m, const Range& q, const Range& k) {
  if (q.size() <= 0 || k.size() <= 0) return {k.begin, k.begin};
  long first = kInf, last = -kInf;
  for (const Range& seg : split_at_docs(m, q)) {
    first = std::min(first, std::max(k.begin, m.lo(seg.begin)));
    last = std::max(last, std::min(k.end - 1, m.hi(seg.end - 1)));
  }
  if (last < first) return {k.begin, k.begin};
  return {first, last + 1};
}

}  // namespace tasp::planner
