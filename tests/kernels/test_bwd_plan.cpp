// The backward's host planning (kernels/bwd_plan.hpp) on the CPU, against brute force over the definition of
// what a row sees: every (query tile, key tile) pair with a visible key is visited by exactly the CTA of that key
// tile and no other pair is, each visit is masked exactly when some key is hidden and its mask is the definition's,
// the CTAs start with the longest walks, the dQ scratch's tiles are numbered in item order, and the deterministic
// turns count each dQ tile's visits in launch order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "item_spec.hpp"
#include "kernels/bwd_plan.hpp"

namespace tasp::kernels::testing {
namespace {

struct Problem {
  std::vector<PieceSpec> pieces;
  std::vector<ItemSpec> items;
};

// Pieces laid out in positions with gaps, items over consecutive runs of them with documents, windows and
// causal masks, rows from several items sharing the pieces.
Problem random_problem(std::mt19937& rng) {
  auto pick = [&](int n) { return int(rng() % n); };
  Problem pr;
  long long pos = pick(50);
  const int np = 1 + pick(4);
  for (int i = 0; i < np; ++i) {
    pr.pieces.push_back({1 + pick(500), pos});
    pos += pr.pieces.back().len + (pick(3) == 0 ? pick(300) : 0);
  }
  int row = 0;
  const int ni = 1 + pick(4);
  for (int i = 0; i < ni; ++i) {
    const int first = pick(np), count = 1 + pick(np - first);
    ItemSpec it{row, 1 + pick(400), pick(int(pos) + 100), {}, pick(2) == 0};
    for (int p = first; p < first + count; ++p) it.pieces.push_back(p);
    if (pick(3) == 0) it.k_begin = it.q_pos0 - pick(300), it.k_end = it.q_pos0 + it.q_len + pick(300);
    if (pick(3) == 0) it.wl = pick(200);
    if (pick(4) == 0) it.wr = pick(100);
    row += it.q_len;
    pr.items.push_back(it);
  }
  return pr;
}

struct Built {
  std::vector<WorkItem> items;
  std::vector<KvPiece> pieces;
};
Built build(const Problem& pr) {
  Built b;
  for (const auto& ps : pr.pieces) {
    KvPiece kp;
    kp.len = ps.len, kp.pos0 = ps.pos0;
    b.pieces.push_back(kp);
  }
  for (const auto& it : pr.items) {
    WorkItem w = work_item(it);
    w.piece_begin = it.pieces[0], w.piece_count = int(it.pieces.size());
    b.items.push_back(w);
  }
  return b;
}

// The scratch's tiles in item order: tile -> (item, first row).
std::vector<std::pair<int, int>> dq_tiles(const Problem& pr, int bm) {
  std::vector<std::pair<int, int>> tiles;
  for (size_t i = 0; i < pr.items.size(); ++i)
    for (int r = 0; r < pr.items[i].q_len; r += bm) tiles.push_back({int(i), r});
  return tiles;
}

TEST(BwdPlan, WalksEveryVisiblePairLongestFirstWithExactMasks) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const Problem pr = random_problem(rng);
    const Built in = build(pr);
    // (query tile, key tile) of bwd_sm90.cuh's layouts (80 or 128 rows, 128 keys) and of bwd_sm90_wide.cuh's (64, 64).
    for (const auto& [bm, bn] : {std::pair{80, bwd::kKeyTile}, std::pair{128, bwd::kKeyTile}, std::pair{64, 64}}) {
      const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, bm, bn, trial % 2 == 0, trial % 3 == 0);
      const auto tiles = dq_tiles(pr, bm);
      ASSERT_EQ(plan.dq_tiles, int(tiles.size()));
      // What each CTA walks, (item, first row) of each visit, each visit's mask checked against the definition.
      std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> walked;  // (piece, j0) -> visits
      std::vector<long long> counts;
      int next_visit = 0;
      for (const bwd::Tile& t : plan.tiles) {
        ASSERT_EQ(t.vbegin, next_visit) << "the walks one after another in launch order";
        next_visit += t.vcount;
        const PieceSpec& ps = pr.pieces[t.piece];
        const int keys = std::min(ps.len - t.j0, bn);
        ASSERT_EQ(t.j0 % bn, 0);
        ASSERT_TRUE(walked.find({t.piece, t.j0}) == walked.end()) << "two CTAs for one key tile";
        auto& w = walked[{t.piece, t.j0}];
        for (int e = t.vbegin; e < t.vbegin + t.vcount; ++e) {
          const bwd::Visit& v = plan.visits.at(e);
          ASSERT_TRUE(v.tile >= 0 && v.tile < plan.dq_tiles);
          const auto [item, r] = tiles[v.tile];
          const ItemSpec& it = pr.items[item];
          ASSERT_EQ(v.qrow, it.q_row0 + r);
          ASSERT_EQ(v.rows, std::min(bm, it.q_len - r));
          bool any = false, all = keys == bn;
          for (int rr = 0; rr < v.rows; ++rr)
            for (int j = 0; j < keys; ++j) {
              const bool s = sees(it, it.q_pos0 + r + rr, ps.pos0 + t.j0 + j);
              any |= s, all &= s;
              if (v.mask) {
                ASSERT_EQ(s, j >= v.m.first(rr) && j <= v.m.last(rr)) << "trial " << trial << " row " << rr << " key " << j;
              }
            }
          ASSERT_TRUE(any) << "trial " << trial << ": a visit that sees no key";
          ASSERT_EQ(v.mask, !all) << "trial " << trial << ": masked exactly when some key is hidden";
          w.push_back({item, r});
        }
        ASSERT_GT(w.size(), 0u) << "a CTA with nothing to walk";
        counts.push_back((long long)w.size());
      }
      ASSERT_EQ(next_visit, int(plan.visits.size()));
      ASSERT_TRUE(std::is_sorted(counts.rbegin(), counts.rend())) << "trial " << trial << ": not longest first";
      // Brute force: every (item, query tile, piece, key tile) with a visible key is walked by that key tile's CTA.
      for (size_t i = 0; i < pr.items.size(); ++i) {
        const ItemSpec& it = pr.items[i];
        for (int pc : it.pieces)
          for (int j0 = 0; j0 < pr.pieces[pc].len; j0 += bn)
            for (int r = 0; r < it.q_len; r += bm) {
              bool any = false;
              for (int rr = r; rr < std::min(it.q_len, r + bm) && !any; ++rr)
                for (int j = j0; j < std::min(pr.pieces[pc].len, j0 + bn) && !any; ++j)
                  any = sees(it, it.q_pos0 + rr, pr.pieces[pc].pos0 + j);
              if (!any) continue;
              const auto w = walked.find({pc, j0});
              ASSERT_TRUE(w != walked.end() && std::count(w->second.begin(), w->second.end(), std::make_pair(int(i), r)) == 1)
                  << "trial " << trial << ": item " << i << " rows " << r << " piece " << pc << " keys " << j0 << " not walked";
            }
      }
    }
  }
}

TEST(BwdPlan, TurnsCountEachDqTilesVisitsInLaunchOrder) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const Built in = build(random_problem(rng));
    const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, 80, bwd::kKeyTile, true, trial % 2 == 0);
    std::vector<int> next(plan.dq_tiles, 0);
    for (const bwd::Tile& t : plan.tiles)
      for (int e = t.vbegin; e < t.vbegin + t.vcount; ++e) {
        const bwd::Visit& v = plan.visits[e];
        ASSERT_EQ(v.turn, next[v.tile]++) << "trial " << trial;
      }
    for (const bwd::Visit& v : bwd::make_plan(in.items, in.pieces, 80, bwd::kKeyTile, false).visits) ASSERT_EQ(v.turn, 0);
  }
}

// Staggered walks: on a full mask, key tile k of n starts k / n of the way into its walk; a walk with masked
// visits (here the causal diagonal) keeps its order.
TEST(BwdPlan, StaggersOnlyWalksWithoutMasks) {
  for (bool causal : {false, true}) {
    const Problem pr{{{1024, 0}}, {ItemSpec{0, 1024, 0, {0}, causal}}};
    const Built in = build(pr);
    const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, 128, bwd::kKeyTile, false, true);
    ASSERT_EQ(plan.tiles.size(), 8u);
    for (const bwd::Tile& t : plan.tiles) {
      const int k = t.j0 / bwd::kKeyTile;
      ASSERT_EQ(t.vcount, causal ? 8 - k : 8);
      EXPECT_EQ(plan.visits[t.vbegin].tile, k) << "causal " << causal;  // full: rotated by k; causal: the diagonal first
      if (!causal) {
        EXPECT_EQ(plan.visits[t.vbegin + t.vcount - 1].tile, (k + 7) % 8);
      }
    }
    const bwd::Plan flat = bwd::make_plan(in.items, in.pieces, 128, bwd::kKeyTile, false, false);
    for (const bwd::Tile& t : flat.tiles) EXPECT_EQ(flat.visits[t.vbegin].tile, causal ? t.j0 / bwd::kKeyTile : 0);
  }
}

bool same_plan(const bwd::Plan& a, const bwd::Plan& b) {
  auto same_visit = [](const bwd::Visit& x, const bwd::Visit& y) {
    return x.tile == y.tile && x.qrow == y.qrow && x.turn == y.turn && x.rows == y.rows && x.mask == y.mask &&
           (!x.mask || (x.m.lo == y.m.lo && x.m.hi == y.m.hi && x.m.dl == y.m.dl && x.m.dh == y.m.dh));
  };
  auto same_tile = [](const bwd::Tile& x, const bwd::Tile& y) {
    return x.piece == y.piece && x.j0 == y.j0 && x.vbegin == y.vbegin && x.vcount == y.vcount;
  };
  return a.dq_tiles == b.dq_tiles && std::equal(a.visits.begin(), a.visits.end(), b.visits.begin(), b.visits.end(), same_visit) &&
         std::equal(a.tiles.begin(), a.tiles.end(), b.tiles.begin(), b.tiles.end(), same_tile);
}

// The plan cache's key (plan_key): a change of the work list that changes the plan changes the key, and what
// the plan does not depend on (buffers, strides, accumulate) leaves it alone, so that a launch never gets another
// list's plan back and a training step's launches find theirs again.
TEST(BwdPlan, KeyChangesExactlyWithWhatThePlanDependsOn) {
  std::mt19937 rng(21);
  using Mut = void (*)(Built&, std::mt19937&);
  const std::vector<std::pair<const char*, Mut>> changes = {
      {"q_row0", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].q_row0 += 1 + int(r() % 80); }},
      {"q_len", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].q_len += 1 + int(r() % 100); }},
      {"q_pos0", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].q_pos0 += 1 + int(r() % 200); }},
      {"piece_count", [](Built& b, std::mt19937& r) { auto& it = b.items[r() % b.items.size()]; it.piece_count = std::max(1, it.piece_count - 1); }},
      {"causal", [](Built& b, std::mt19937& r) { auto& it = b.items[r() % b.items.size()]; it.causal = !it.causal; }},
      {"document", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].k_begin += 1 + int(r() % 300); }},
      {"document end", [](Built& b, std::mt19937& r) { auto& it = b.items[r() % b.items.size()]; it.k_end = it.q_pos0 + int(r() % 300); }},
      {"window left", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].window_left = int(r() % 100); }},
      {"window right", [](Built& b, std::mt19937& r) { b.items[r() % b.items.size()].window_right = int(r() % 100); }},
      {"piece len", [](Built& b, std::mt19937& r) { b.pieces[r() % b.pieces.size()].len += 1 + int(r() % 200); }},
      {"piece pos0", [](Built& b, std::mt19937& r) { b.pieces[r() % b.pieces.size()].pos0 += 1 + int(r() % 200); }},
  };
  const std::vector<std::pair<const char*, Mut>> same = {
      {"buffers", [](Built& b, std::mt19937& r) { for (auto& p : b.pieces) p.k = p.v = reinterpret_cast<void*>(16 * (1 + r() % 1000)); }},
      {"strides", [](Built& b, std::mt19937& r) { b.pieces[r() % b.pieces.size()].batch_stride = 8 * (1 + r() % 1000); }},
      {"accumulate", [](Built& b, std::mt19937& r) { auto& it = b.items[r() % b.items.size()]; it.accumulate = !it.accumulate; }},
  };
  int changed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Built in = build(random_problem(rng));
    const bool det = trial % 2, stagger = trial % 3 == 0;
    const auto key = bwd::plan_key(in.items, in.pieces, 80, bwd::kKeyTile, det, stagger);
    const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, 80, bwd::kKeyTile, det, stagger);
    ASSERT_EQ(key, bwd::plan_key(in.items, in.pieces, 80, bwd::kKeyTile, det, stagger));
    ASSERT_NE(key, bwd::plan_key(in.items, in.pieces, 80, 64, det, stagger)) << "the key tile";
    for (const auto& [what, mutate] : changes) {
      Built m = in;
      mutate(m, rng);
      if (same_plan(plan, bwd::make_plan(m.items, m.pieces, 80, bwd::kKeyTile, det, stagger))) continue;
      ++changed;
      ASSERT_NE(key, bwd::plan_key(m.items, m.pieces, 80, bwd::kKeyTile, det, stagger)) << what << ", trial " << trial << ": another plan, same key";
    }
    for (const auto& [what, mutate] : same) {
      Built m = in;
      mutate(m, rng);
      ASSERT_TRUE(same_plan(plan, bwd::make_plan(m.items, m.pieces, 80, bwd::kKeyTile, det, stagger))) << what;
      ASSERT_EQ(key, bwd::plan_key(m.items, m.pieces, 80, bwd::kKeyTile, det, stagger)) << what << ": the plan does not depend on it";
    }
    for (int bm : {64, 128}) EXPECT_NE(key, bwd::plan_key(in.items, in.pieces, bm, bwd::kKeyTile, det, stagger));
    EXPECT_NE(key, bwd::plan_key(in.items, in.pieces, 80, bwd::kKeyTile, !det, stagger));
    EXPECT_NE(key, bwd::plan_key(in.items, in.pieces, 80, bwd::kKeyTile, det, !stagger));
  }
  EXPECT_GT(changed, 1000) << "the changes should mostly change the plan";
}

}  // namespace
}  // namespace tasp::kernels::testing
