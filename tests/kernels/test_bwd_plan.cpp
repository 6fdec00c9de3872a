// The backward's host planning (kernels/bwd_plan.hpp) on the CPU, against brute force over the definition of
// what a row sees: every (query tile, key tile) pair with a visible key is walked by exactly the CTA of that key
// tile, the CTAs start with the longest walks, the dQ scratch's tiles are numbered in item order, and the
// deterministic turns count each dQ tile's visits in launch order.
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

TEST(BwdPlan, WalksEveryVisiblePairLongestFirst) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const Problem pr = random_problem(rng);
    const Built in = build(pr);
    for (int bm : {80, 128}) {
      const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, bm, trial % 2 == 0);
      // The scratch's tiles in item order.
      int tiles = 0;
      std::map<std::pair<int, int>, int> tile_of;  // (item, first row) -> dQ tile
      for (size_t i = 0; i < pr.items.size(); ++i)
        for (int r = 0; r < pr.items[i].q_len; r += bm) tile_of[{int(i), r}] = tiles++;
      ASSERT_EQ(plan.dq_tiles, tiles);
      // What each CTA walks: (item, first row) of the entries it visits.
      std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> walked;  // (piece, j0) -> visits
      std::vector<long long> counts;
      for (const bwd::Tile& t : plan.tiles) {
        const KvPiece& kp = in.pieces[t.piece];
        const long long k0 = kp.pos0 + t.j0, k1 = kp.pos0 + std::min(kp.len, t.j0 + bwd::kKeyTile) - 1;
        ASSERT_TRUE(walked.find({t.piece, t.j0}) == walked.end()) << "two CTAs for one key tile";
        auto& v = walked[{t.piece, t.j0}];
        for (int e = t.qbegin; e < t.qbegin + t.qcount; ++e) {
          const bwd::QEntry& q = plan.qlist[e];
          const int r = q.qrow - pr.items[q.item].q_row0;
          ASSERT_EQ(q.tile, (tile_of[{q.item, r}])) << "trial " << trial;
          ASSERT_EQ(q.rows, std::min(bm, pr.items[q.item].q_len - r));
          if (bwd::visits(q, k0, k1)) v.push_back({q.item, r});
        }
        ASSERT_GT(v.size(), 0u) << "a CTA with nothing to walk";
        counts.push_back((long long)v.size());
      }
      ASSERT_TRUE(std::is_sorted(counts.rbegin(), counts.rend())) << "trial " << trial << ": not longest first";
      // Brute force: every (item, query tile, piece, key tile) with a visible key is walked by that key tile's CTA.
      for (size_t i = 0; i < pr.items.size(); ++i) {
        const ItemSpec& it = pr.items[i];
        for (int pc : it.pieces)
          for (int j0 = 0; j0 < pr.pieces[pc].len; j0 += bwd::kKeyTile)
            for (int r = 0; r < it.q_len; r += bm) {
              bool any = false;
              for (int rr = r; rr < std::min(it.q_len, r + bm) && !any; ++rr)
                for (int j = j0; j < std::min(pr.pieces[pc].len, j0 + bwd::kKeyTile) && !any; ++j)
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
    const bwd::Plan plan = bwd::make_plan(in.items, in.pieces, 80, true);
    std::vector<int> next(plan.dq_tiles, 0);
    size_t seen = 0;
    for (const bwd::Tile& t : plan.tiles) {
      ASSERT_EQ(t.turn0, int(seen));
      const KvPiece& kp = in.pieces[t.piece];
      const long long k0 = kp.pos0 + t.j0, k1 = kp.pos0 + std::min(kp.len, t.j0 + bwd::kKeyTile) - 1;
      for (int e = t.qbegin; e < t.qbegin + t.qcount; ++e, ++seen) {
        const bwd::QEntry& q = plan.qlist[e];
        ASSERT_EQ(plan.turns.at(seen), bwd::visits(q, k0, k1) ? next[q.tile]++ : -1) << "trial " << trial;
      }
    }
    ASSERT_EQ(seen, plan.turns.size());
    EXPECT_TRUE(bwd::make_plan(in.items, in.pieces, 80, false).turns.empty());
  }
}

}  // namespace
}  // namespace tasp::kernels::testing
