// The backward's last-wave split (kernels/bwd_tail.hpp) on the CPU, against a simulation written apart from it (a
// linear scan for the first free slot, every candidate split tried): the split it returns is one of the shortest the
// model allows, its modelled length is the simulation's, only the last CTAs split, each part walks at least
// kMinPartVisits, and a launch of whole waves is left as it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kernels/bwd_tail.hpp"

namespace tasp::kernels::testing {
namespace {

using bwd::TailSplit;

// The launch's length in visits, CTA first + g in parts[g] parts.
double simulate(const std::vector<int>& walks, long long reps, int slots, long long first, const std::vector<int>& parts) {
  std::vector<double> free_at(slots, 0.0);
  auto run = [&](double cost) {
    auto it = std::min_element(free_at.begin(), free_at.end());
    *it += cost;
  };
  const long long n = (long long)walks.size() * reps;
  for (long long i = 0; i < n; ++i) {
    const int v = walks[i % walks.size()];
    const int k = i >= first && i < first + (long long)parts.size() ? parts[i - first] : 1;
    if (k == 1) run(v + bwd::kCtaCost);
    else
      for (int p = 0; p < k; ++p) run(bwd::part_range(0, v, p, k).count + bwd::kCtaCost + bwd::kPartCost);
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

// The shortest any candidate split is: the last k CTAs, each in parts_of(its visits, length) parts, 3 x slots at most.
double shortest_split(const std::vector<int>& walks, long long reps, int slots) {
  const long long n = (long long)walks.size() * reps;
  double best = simulate(walks, reps, slots, 0, {});
  for (int k = 1; k <= slots && k <= n; ++k)
    for (int length : bwd::kPartLengths) {
      std::vector<int> parts;
      int total = 0;
      for (long long i = n - k; i < n; ++i) parts.push_back(bwd::parts_of(walks[i % walks.size()], length)), total += parts.back();
      if (total <= 3 * slots) best = std::min(best, simulate(walks, reps, slots, n - k, parts));
    }
  return best;
}

// every_split: against every candidate split too (the brute force is slow on an H100-sized launch).
void check(const std::vector<int>& walks, long long reps, int slots, bool every_split = true) {
  const TailSplit t = bwd::plan_tail(walks, reps, slots);
  const long long n = (long long)walks.size() * reps;
  EXPECT_DOUBLE_EQ(t.before, simulate(walks, reps, slots, 0, {}));
  EXPECT_DOUBLE_EQ(t.after, simulate(walks, reps, slots, t.first, t.parts));
  EXPECT_LE(t.after, t.before);
  if (t.parts.empty()) {
    if (every_split) EXPECT_GT(shortest_split(walks, reps, slots), 0.99 * t.before - 1e-9) << "a split saving 1% was missed";
    return;
  }
  EXPECT_LE(t.after, 0.99 * t.before);
  if (every_split) EXPECT_NEAR(t.after, shortest_split(walks, reps, slots), 1e-9);
  EXPECT_EQ(t.first + (long long)t.parts.size(), n) << "only the last CTAs split";
  EXPECT_GT(t.total_parts(), int(t.parts.size())) << "something split";
  for (size_t g = 0; g < t.parts.size(); ++g) {
    const int v = walks[(t.first + g) % walks.size()];
    ASSERT_GE(t.parts[g], 1);
    if (t.parts[g] > 1)
      for (int p = 0; p < t.parts[g]; ++p) EXPECT_GE(bwd::part_range(0, v, p, t.parts[g]).count, bwd::kMinPartVisits);
  }
}

// B=1 H=16 S=16384 at D=256: 256 key tiles of 256 visits for 16 heads on an H100's 132 SMs, 31.03 waves: the last
// 4 CTAs in 32 parts of 8 visits each (33 would fit the slots, but not kMinPartVisits).
TEST(BwdTail, EqualWalksSplitTheLastWave) {
  const std::vector<int> walks(256, 256);
  const TailSplit t = bwd::plan_tail(walks, 16, 132);
  EXPECT_EQ(t.parts, std::vector<int>(4, 32));
  EXPECT_LT(t.after, 0.975 * t.before);
  check(walks, 16, 132, false);
}

// A launch of fewer CTAs than slots is all tail: 4 walks of 256 on 132 SMs run as 4 x 32 parts.
TEST(BwdTail, FewCtasSplitAcrossTheSlots) {
  const TailSplit t = bwd::plan_tail(std::vector<int>(4, 256), 1, 132);
  EXPECT_EQ(t.first, 0);
  EXPECT_EQ(t.parts, std::vector<int>(4, 32));
  check(std::vector<int>(4, 256), 1, 132);
}

// Causal walks, longest first in each head (a key tile's walk from its diagonal: 64 tiles of 128 keys against
// 80-row query tiles, 32 heads): the last head's long walks split, its short ones left whole.
TEST(BwdTail, CausalLastHeadSplitsItsLongWalks) {
  std::vector<int> walks;
  for (int j = 0; j < 64; ++j) walks.push_back(103 - 128 * j / 80);
  const TailSplit t = bwd::plan_tail(walks, 32, 132);
  ASSERT_FALSE(t.parts.empty());
  EXPECT_GT(t.parts.front(), 1);
  EXPECT_EQ(t.parts.back(), 1) << "the last walks are too short to split";
  EXPECT_LT(t.after, 0.98 * t.before);
  check(walks, 32, 132, false);
}

TEST(BwdTail, WholeWavesStayWhole) {
  const TailSplit t = bwd::plan_tail(std::vector<int>(132, 200), 31, 132);
  EXPECT_TRUE(t.parts.empty());
  EXPECT_EQ(t.after, t.before);
  EXPECT_TRUE(bwd::plan_tail(std::vector<int>(100, 10), 1, 132).parts.empty()) << "one wave of walks too short to split";
  EXPECT_TRUE(bwd::plan_tail({}, 4, 132).parts.empty());
}

TEST(BwdTail, PartsCoverTheWalkInOrder) {
  for (int v : {8, 9, 100, 257})
    for (int parts : {1, 2, 3, 7, 8}) {
      int next = 5;
      for (int p = 0; p < parts; ++p) {
        const auto r = bwd::part_range(5, v, p, parts);
        EXPECT_EQ(r.begin, next);
        EXPECT_GE(r.count, v / parts);
        EXPECT_LE(r.count, v / parts + 1);
        next += r.count;
      }
      EXPECT_EQ(next, 5 + v);
    }
  EXPECT_EQ(bwd::parts_of(15, 8), 1) << "two parts would walk 7 and 8";
  EXPECT_EQ(bwd::parts_of(16, 8), 2);
  EXPECT_EQ(bwd::parts_of(100, 32), 4);
  EXPECT_EQ(bwd::parts_of(100, 8), 12) << "at most visits / kMinPartVisits";
}

// Causal-like walks (longest first within each repeat) and random ones, on small slot counts (where the brute force
// over every candidate split is quick).
TEST(BwdTail, RandomLaunchesAgainstEverySplit) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 80; ++trial) {
    const int tiles = 1 + int(rng() % 30), slots = 1 + int(rng() % 24);
    const long long reps = 1 + rng() % 6;
    std::vector<int> walks(tiles);
    for (int& w : walks) w = 1 + int(rng() % 300);
    if (trial % 2) std::sort(walks.rbegin(), walks.rend());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": " << tiles << " tiles x " << reps << " on " << slots);
    check(walks, reps, slots);
  }
}

}  // namespace
}  // namespace tasp::kernels::testing
