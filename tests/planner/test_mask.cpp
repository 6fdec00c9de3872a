// The mask's closed forms against a pair-by-pair count written from the definition (same document, causal,
// window), on random documents (1-token ones included), windows and ranges.
#include <gtest/gtest.h>

#include <random>

#include "planner/mask.hpp"

using namespace tasp::planner;

namespace {

struct Brute {
  std::vector<long> doc;  // document index of each position
  bool causal;
  long left, right;
  bool sees(long q, long k) const {
    if (doc[q] != doc[k]) return false;
    if (causal && k > q) return false;
    if (left >= 0 && q - k > left) return false;
    if (right >= 0 && k - q > right) return false;
    return true;
  }
};

Workload random_workload(std::mt19937& rng, long S) {
  Workload w;
  w.S = S, w.H = w.Hkv = 1, w.D = 8;
  w.causal = rng() % 2;
  const int wk = rng() % 4;  // none, small, larger than S, unbounded left
  if (wk == 1) w.window_left = rng() % 7, w.window_right = w.causal ? 0 : long(rng() % 5) - 1;
  if (wk == 2) w.window_left = S + 3, w.window_right = w.causal ? 0 : S + 1;
  if (wk == 3) w.window_left = -1, w.window_right = w.causal ? 0 : long(rng() % 3);
  if (rng() % 3) {
    for (long left = S; left > 0;) {
      const long len = std::min<long>(left, rng() % 3 == 0 ? 1 : 1 + rng() % (S / 2 + 1));
      w.docs.push_back(len);
      left -= len;
    }
  }
  return w;
}

Brute brute_of(const Workload& w) {
  Brute b{std::vector<long>(w.S, 0), w.causal, w.window_left, w.causal ? 0 : w.window_right};
  long at = 0;
  for (size_t d = 0; d < w.docs.size(); ++d)
    for (long i = 0; i < w.docs[d]; ++i) b.doc[at++] = long(d);
  return b;
}

}  // namespace

TEST(Mask, IntervalsAndPairCountsMatchTheDefinition) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const long S = 1 + rng() % 40;
    const Workload w = random_workload(rng, S);
    const Mask m = make_mask(w);
    const Brute b = brute_of(w);
    for (long q = 0; q < S; ++q) {
      ASSERT_LE(m.lo(q), q);
      ASSERT_GE(m.hi(q), q);
      if (q) {
        ASSERT_LE(m.lo(q - 1), m.lo(q));
        ASSERT_LE(m.hi(q - 1), m.hi(q));
      }
      for (long k = 0; k < S; ++k) ASSERT_EQ(m.visible(q, k), b.sees(q, k)) << to_string(w) << " q=" << q << " k=" << k;
    }
    for (int r = 0; r < 20; ++r) {
      long q0 = rng() % S, q1 = rng() % (S + 1), k0 = rng() % S, k1 = rng() % (S + 1);
      if (q1 < q0) std::swap(q0, q1);
      if (k1 < k0) std::swap(k0, k1);
      double want = 0;
      long first = -1, last = -1;
      for (long q = q0; q < q1; ++q)
        for (long k = k0; k < k1; ++k)
          if (b.sees(q, k)) {
            ++want;
            first = first < 0 ? k : std::min(first, k), last = std::max(last, k);
          }
      ASSERT_EQ(visible_pairs(m, {q0, q1}, {k0, k1}), want) << to_string(w) << " q=[" << q0 << "," << q1 << ") k=[" << k0 << "," << k1 << ")";
      const Range seen = seen_keys(m, {q0, q1}, {k0, k1});
      if (want == 0) {
        ASSERT_EQ(seen.size(), 0);
      } else {
        ASSERT_EQ(seen.begin, first);
        ASSERT_EQ(seen.end, last + 1);
      }
    }
  }
}

TEST(Mask, SplitAtDocsKeepsEveryTokenOnce) {
  Workload w;
  w.S = 10, w.docs = {3, 1, 6};
  const Mask m = make_mask(w);
  const auto parts = split_at_docs(m, {2, 9});
  ASSERT_EQ(parts.size(), 3u);
  const long want[3][2] = {{2, 3}, {3, 4}, {4, 9}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(parts[i].begin, want[i][0]);
    EXPECT_EQ(parts[i].end, want[i][1]);
  }
}
