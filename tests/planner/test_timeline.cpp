// tasp-timeline/1 read back as written, and a bad file refused with its field named: a float or string where a count
// goes, ranks that do not line up, a negative time (tools/fuzz.sh timeline_json reads the same way).
#include <gtest/gtest.h>

#include <sstream>

#include "planner/timeline.hpp"
#include "planner/topology.hpp"
#include "tests/input_errors.hpp"

using namespace tasp::planner;

namespace {

Timeline two_ranks() {
  Timeline t;
  t.source = "simulated", t.scheme = "ring", t.ranks = 2, t.pass = "fwd+bwd", t.fwd_steps = 1;
  for (int r = 0; r < 2; ++r)
    t.per_rank.push_back({{0, 10.5 + r, 1, 9, 1024, 3e9, 0, 0}, {11, 20, 12, 25, 2048, 6e9, 25, 26.5}});
  return t;
}

std::string text_of(const Timeline& t) {
  std::ostringstream o;
  write_timeline_json(o, t);
  return o.str();
}

Timeline read(const std::string& text) {
  std::istringstream in(text);
  return read_timeline_json(in, "t.json");
}

}  // namespace

TEST(Timeline, ReadsBackWhatItWrites) {
  const Timeline t = two_ranks(), back = read(text_of(t));
  EXPECT_EQ(back.ranks, 2);
  EXPECT_EQ(back.fwd_steps, 1);
  ASSERT_EQ(back.per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(back.per_rank[1][0].comm_end_us, 11.5);
  EXPECT_DOUBLE_EQ(back.per_rank[1][1].post_end_us, 26.5);
  EXPECT_DOUBLE_EQ(back.total_us(), t.total_us());
}

TEST(Timeline, BadFieldsAreNamed) {
  const std::string good = text_of(two_ranks());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {with("\"ranks\": 2", "\"ranks\": 1.5"), "ranks"},
      {with("\"ranks\": 2", "\"ranks\": 1e30"), "ranks"},
      {with("\"ranks\": 2", "\"ranks\": \"2\""), "ranks"},
      {with("\"ranks\": 2", "\"ranks\": 1"), "per_rank"},
      {with("\"fwd_steps\": 1", "\"fwd_steps\": 3"), "fwd_steps"},
      {with("\"comm_start_us\": 11.0", "\"comm_start_us\": -1"), "comm_start_us"},
      {with("\"format\": \"tasp-timeline/1\"", "\"format\": \"x\""), "format"},
      {"[1,2]", "format"},
      {"{", "t.json"},
  };
  tasp::test_support::expect_input_errors([](const std::string& text) { read(text); }, bad);
  // Ranks whose step counts differ.
  Timeline uneven = two_ranks();
  uneven.per_rank[1].pop_back();
  EXPECT_THROW(read(text_of(uneven)), InputError);
}

TEST(Timeline, RunBoundByHand) {
  // Rank 0: forward kernels 8 us (1..9) sending 1024 B, backward 13 + 1.5 closing (12..25, 25..26.5) sending 2048 B;
  // rank 1 the same. At 1e-4 GB/s (0.1 B/us): forward bytes 10240 us, backward 20480 us.
  const Timeline t = two_ranks();
  const auto k = t.slowest_compute();
  EXPECT_DOUBLE_EQ(k.fwd, 8);
  EXPECT_DOUBLE_EQ(k.bwd, 14.5);
  RunBound b = run_bound(t, 1e-4);
  EXPECT_DOUBLE_EQ(b.kernels_us, 22.5);
  EXPECT_DOUBLE_EQ(b.bytes_us, 30720);
  EXPECT_DOUBLE_EQ(b.whole_us, 30720);
  EXPECT_DOUBLE_EQ(b.per_pass_us, 30720);
  // At 1 GB/s (1000 B/us) the bytes take 1.024 and 2.048 us: kernels bound each pass, 8 + 14.5.
  b = run_bound(t, 1);
  EXPECT_DOUBLE_EQ(b.per_pass_us, 22.5);
  // At 0.1 GB/s (100 B/us) the bytes take 10.24 and 20.48 us and bind both passes: 10.24 + 20.48.
  b = run_bound(t, 0.1);
  EXPECT_DOUBLE_EQ(b.per_pass_us, 10.24 + 20.48);
  // The backward's bytes at a rate of their own (a reduce-scatter slower than the gathers): 0.05 GB/s, 40.96 us.
  b = run_bound(t, 0.1, 0.05);
  EXPECT_DOUBLE_EQ(b.per_pass_us, 10.24 + 40.96);
  EXPECT_DOUBLE_EQ(b.bytes_us, 10.24 + 40.96);
  // A forward that waits on its bytes beside a backward whose kernels hide its own: per pass longer than whole.
  Timeline u = t;
  for (auto& r : u.per_rank) r[1].bytes = 512;  // backward 5.12 us at 100 B/us, under its 14.5 us of kernels
  b = run_bound(u, 0.1);
  EXPECT_DOUBLE_EQ(b.whole_us, std::max(22.5, 15.36));
  EXPECT_DOUBLE_EQ(b.per_pass_us, 10.24 + 14.5);
  EXPECT_GT(b.per_pass_us, b.whole_us);
  EXPECT_DOUBLE_EQ(run_bound(t, 0).per_pass_us, 22.5);  // no rate: kernels alone
  // A shared medium (alone_gbps): the two ranks send alike, so every rank's bytes at 2x the peak take what the
  // busiest's take at it, and a GPU alone at 0.3 GB/s binds nothing: as without it.
  EXPECT_DOUBLE_EQ(run_bound(t, 0.1, -1, 0.3).per_pass_us, 10.24 + 20.48);
  // Rank 1 pruned to half its bytes: the busiest (rank 0) alone at 0.3 GB/s takes 3.41 and 6.83 us, all 1536 and 3072
  // B at 2 x 0.1 GB/s 7.68 and 15.36 us, the longer binding (the forward's 8 us of kernels over its 7.68); a rate
  // alone under the peak counts as the peak.
  Timeline v = t;
  for (auto& s : v.per_rank[1]) s.bytes /= 2;
  EXPECT_DOUBLE_EQ(run_bound(v, 0.1, -1, 0.3).per_pass_us, 8 + 15.36);
  EXPECT_DOUBLE_EQ(run_bound(v, 0.1, -1, 0.3).bytes_us, 7.68 + 15.36);
  EXPECT_DOUBLE_EQ(run_bound(v, 0.1, -1, 0.05).per_pass_us, 10.24 + 20.48);
  EXPECT_DOUBLE_EQ(run_bound(v, 0.1).per_pass_us, 10.24 + 20.48);  // not shared: the busiest at the peak
  // A GPU alone slower than two together (0.15 GB/s against 2 x 0.1, as through host memory): rank 1's 512 and 1024 B
  // beside as many of rank 0's at 0.1 GB/s, rank 0's other 512 and 1024 B alone at 0.15: 5.12 + 3.41 and 10.24 + 6.83
  // us, over both the busiest alone (6.83, 13.65) and all at 2 x the peak (7.68, 15.36).
  EXPECT_NEAR(run_bound(v, 0.1, -1, 0.15).bytes_us, 512 / 100.0 + 512 / 150.0 + 1024 / 100.0 + 1024 / 150.0, 1e-9);
  EXPECT_NEAR(run_bound(v, 0.1, -1, 0.15).per_pass_us, 512 / 100.0 + 512 / 150.0 + 1024 / 100.0 + 1024 / 150.0, 1e-9);
  EXPECT_DOUBLE_EQ(run_bound(t, 0.1, -1, 0.15).per_pass_us, 10.24 + 20.48);  // alike: the peak's figure still
}

// `tasp run --steps`: the slowest rank's comm and compute a step and the step's end, the backward's steps counted from
// its first; a prediction's ends beside them only where it has as many steps.
TEST(Timeline, StepsTablePutsThePredictedEndsBesideTheMeasured) {
  const Timeline t = two_ranks();
  Timeline pred = t;
  for (auto& r : pred.per_rank)
    for (auto& s : r) s.comm_end_us *= 2, s.compute_end_us *= 2, s.post_end_us *= 2;
  std::ostringstream with, without, mismatched;
  write_steps_table(with, t, &pred, true);
  write_steps_table(without, t, nullptr, true);
  Timeline shorter = pred;
  for (auto& r : shorter.per_rank) r.pop_back();
  write_steps_table(mismatched, t, &shorter, true);
  EXPECT_EQ(with.str(),
            "  pass step     comm_us  compute_us      end_us  predicted_end_us  (slowest rank)\n"
            "  fwd    0        11.5         8.0        11.5              23.0\n"
            "  bwd    0         9.0        14.5        26.5              53.0\n");
  EXPECT_EQ(without.str(),
            "  pass step     comm_us  compute_us      end_us  (slowest rank)\n"
            "  fwd    0        11.5         8.0        11.5\n"
            "  bwd    0         9.0        14.5        26.5\n");
  EXPECT_EQ(mismatched.str(), without.str());
  std::ostringstream bwd_only;
  write_steps_table(bwd_only, t, nullptr, false);  // a run of the backward alone counts its steps from 0 as they are
  EXPECT_NE(bwd_only.str().find("  bwd    1 "), std::string::npos);
}
