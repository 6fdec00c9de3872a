// The validation figures against numbers worked by hand: error statistics, ties named rather than broken,
// rank correlation only where there is an order.
#include <gtest/gtest.h>

#include "tests/input_errors.hpp"
#include "simulator/choose.hpp"
#include "simulator/runs_csv.hpp"
#include "simulator/validation.hpp"

using tasp::simulator::RunPoint;
using tasp::simulator::validate;

TEST(Validation, ErrorFiguresByHand) {
  // Errors -10%, +5%, +20%, -2%: median of |e| (2, 5, 10, 20) is 7.5%, mean signed +3.25%, max 20%.
  const std::vector<RunPoint> runs = {{"c1", "ring", 10, 9}, {"c1", "hamilton", 10, 10.5}, {"c2", "ring", 5, 6},
                                      {"c2", "hamilton", 50, 49}};
  const auto v = validate(runs, 0.02);
  EXPECT_EQ(v.runs, 4u);
  EXPECT_NEAR(v.median_abs, 0.075, 1e-12);
  EXPECT_NEAR(v.mean_signed, 0.0325, 1e-12);
  EXPECT_NEAR(v.max_abs, 0.20, 1e-12);
  ASSERT_EQ(v.orders.size(), 2u);
  EXPECT_EQ(v.orders[0].config, "c1");  // first-seen order
}

TEST(Validation, TiesAreNamedOnBothSides) {
  // Measured: a and b within 2% (a tie), c well behind. Predicted: b a hair ahead of a, also within 2%.
  std::vector<RunPoint> runs = {{"x", "a", 10.0, 9.05}, {"x", "b", 10.1, 9.0}, {"x", "c", 12.0, 11.0}};
  auto v = validate(runs, 0.02);
  const auto& o = v.orders[0];
  EXPECT_TRUE(o.tie);
  EXPECT_FALSE(o.all_tied);
  EXPECT_EQ(o.fastest_measured, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.fastest_predicted, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(o.agrees);
  EXPECT_TRUE(o.ranked());
  EXPECT_NEAR(o.spearman, 0.5, 1e-12);  // ranks (1,2,3) against (2,1,3)
  // A false winner: c predicted fastest by more than the margin disagrees with the measured tie.
  runs[2].predicted = 8.0;
  v = validate(runs, 0.02);
  EXPECT_EQ(v.orders[0].fastest_predicted, (std::vector<std::string>{"c"}));
  EXPECT_FALSE(v.orders[0].agrees);
  EXPECT_NEAR(v.agreement(), 0.0, 1e-12);
  // Everything within the margin: no order to rank, so no correlation is claimed.
  const std::vector<RunPoint> flat = {{"y", "a", 10.0, 9.0}, {"y", "b", 10.1, 9.5}, {"y", "c", 10.15, 9.2}};
  v = validate(flat, 0.02);
  EXPECT_TRUE(v.orders[0].all_tied);
  EXPECT_FALSE(v.orders[0].ranked());
  EXPECT_EQ(v.ranked(), 0u);
  EXPECT_EQ(v.mean_rank_correlation(), 0.0);
}

// The runs CSV (tasp report --runs): rows with their optional columns, and each kind of bad row named by line and
// field, never an escaping std::out_of_range (a workload closed at the end of its line once did).
// --scheme auto's near ties: the other schemes predicted within the band of the pick either way, in the runs' order,
// each with how far; none beyond the band, never the pick itself.
TEST(Validation, NearTiesOfTheAutoPick) {
  std::vector<tasp::simulator::SchemeRun> runs(4);
  const char* names[] = {"ring", "zigzag", "allgather", "ulysses"};
  const double us[] = {104.0, 101.7, 100.0, 102.999};
  for (int i = 0; i < 4; ++i) runs[i].scheme = names[i], runs[i].sim.total_us = us[i];
  EXPECT_EQ(tasp::simulator::near_ties(runs, 2), "zigzag +1.7%, ulysses +3.0%");
  EXPECT_EQ(tasp::simulator::near_ties(runs, 2, 0.02), "zigzag +1.7%");
  EXPECT_EQ(tasp::simulator::near_ties(runs, 2, 0.01), "");
  EXPECT_EQ(tasp::simulator::near_ties(runs, 0), "zigzag -2.2%, ulysses -1.0%");  // a pick that is not the fastest
}

TEST(RunsCsv, ColumnsAndBadRows) {
  using tasp::simulator::read_runs_csv;
  const auto rows = read_runs_csv(
      "config,scheme,measured_ms,ranks,pass,transport,pieces\n# a comment\n\"B=1,H=8,D=128,S=8192,causal\",allgather,45.5,2,"
      "fwd+bwd,collectives,3\r\n\"B=1,H=8,D=128,S=8192\",ring,1.5,2,fwd,,1\n",
      "runs.csv", "bwd");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].config, "B=1,H=8,D=128,S=8192,causal");
  EXPECT_EQ(rows[0].scheme, "allgather");
  EXPECT_DOUBLE_EQ(rows[0].measured_ms, 45.5);
  EXPECT_EQ(rows[0].ranks, 2);
  EXPECT_EQ(rows[0].pass, "fwd+bwd");
  EXPECT_EQ(rows[0].transport, "collectives");
  EXPECT_EQ(rows[0].line, 3);
  EXPECT_EQ(rows[0].gather_pieces, 3);
  EXPECT_EQ(rows[1].transport, "");
  EXPECT_EQ(rows[1].gather_pieces, 1);
  EXPECT_EQ(read_runs_csv("\"B=1,H=8,D=128,S=64\",allgather,2\n", "r", "bwd")[0].gather_pieces, 1);  // no column: one
  const tasp::simulator::MeasuredRun steps = read_runs_csv("config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,2,2+1+1\n", "r", "fwd")[0];
  EXPECT_EQ(steps.gather_pieces, 4);
  EXPECT_EQ(steps.gather_steps, (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(tasp::planner::gather_steps_text(steps.gather_steps), "2+1+1");
  EXPECT_FALSE(steps.pruned);
  // "p" after the pieces: pruned for the causal mask, the pieces by chunk (tasp report predicts the row so).
  const auto pruned = read_runs_csv("config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,2,2+1+1p\n", "r", "fwd")[0];
  EXPECT_TRUE(pruned.pruned);
  EXPECT_EQ(pruned.gather_steps, (std::vector<int>{2, 1, 1}));
  EXPECT_TRUE(read_runs_csv("config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,2,4p\n", "r", "fwd")[0].pruned);
  EXPECT_FALSE(pruned.moved);
  // "q": its late chunk's queries moved too (PlanOptions::move_queries).
  const auto moved = read_runs_csv("config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,2,2q\n", "r", "fwd")[0];
  EXPECT_TRUE(moved.moved);
  EXPECT_TRUE(moved.pruned);
  EXPECT_EQ(moved.gather_pieces, 2);
  EXPECT_EQ(read_runs_csv("\"B=1,H=8,D=128,S=64\",ring,2\n", "r", "bwd")[0].pass, "bwd");  // no header: the default
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"B=1,ring,1\n", "runs.csv:1: config"},
      {"\"B=1,H=8,D=128,S=64\n", "runs.csv:1: config"},
      {"\"B=1,H=8,D=128,S=64\"\n", "runs.csv:1: scheme"},
      {"\"B=1,H=8,D=128,S=64\",ring,-1\n", "runs.csv:1: measured_ms"},
      {"\"B=1,H=8,D=128,S=64\",ring,inf\n", "runs.csv:1: measured_ms"},
      {"config,scheme,measured_ms,ranks\n\"B=1,H=8,D=128,S=64\",ring,1,0\n", "runs.csv:2: ranks"},
      {"config,scheme,measured_ms,pass\n\"B=1,H=8,D=128,S=64\",ring,1,both\n", "runs.csv:2: pass"},
      {"config,scheme,measured_ms,transport\n\"B=1,H=8,D=128,S=64\",ring,1,nccl\n", "runs.csv:2: transport"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,0\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,p\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,65\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,2+0\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,2++1\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms,pieces\n\"B=1,H=8,D=128,S=64\",allgather,1,60+5\n", "runs.csv:2: pieces"},
      {"config,scheme,measured_ms\n", "runs.csv: no runs"},
  };
  tasp::test_support::expect_input_errors([](const std::string& t) { read_runs_csv(t, "runs.csv", "fwd"); }, bad);
}
