// Queries moved to keys (planner/query_moves.hpp): the plan allgather pruned becomes, its replay's rules, its file form.
#include <gtest/gtest.h>

#include <sstream>

#include "planner/plan_io.hpp"
#include "planner/query_moves.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/verify_plan.hpp"

using namespace tasp::planner;

namespace {

Plan moved_plan(int pieces, const std::string& workload = "B=2,S=512,H=4,D=16,causal") {
  PlanOptions o;
  o.causal = true, o.prune_plain = true, o.move_queries = true, o.gather_pieces = pieces;
  o.workload = parse_workload(workload);
  return build_plan(load_topology("complete:2"), "allgather", o);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// Rank 0's late chunk at rank 1: the forward moves Q of c3 and rank 0's early pieces (3 chunk-tensors) and returns the
// partial out (1); rank 0 gets none of rank 1's K/V; the backward moves dO over and dQ and c0's dK/dV back.
TEST(QueryMoves, LateChunkPlanVerifiesAndMovesTheFewestUnits) {
  for (int pieces : {2, 4, 8}) {
    const Plan p = moved_plan(pieces);
    SCOPED_TRACE(pieces);
    ASSERT_EQ(verify_plan(p), "");
    ASSERT_EQ(p.query_moves.size(), 1u);
    EXPECT_EQ(p.query_moves[0].owner, 0);
    EXPECT_EQ(p.query_moves[0].range, 1);
    EXPECT_EQ(p.query_moves[0].at, 1);
    int kv_to_0 = 0, kv_to_1 = 0, moved_blocks = 0, rows_out = 0, rows_back = 0;
    for (const Step& s : p.steps) {
      for (const Transfer& x : s.transfers) (x.dst == 0 ? kv_to_0 : kv_to_1) += 1;
      for (const Compute& c : s.compute) moved_blocks += c.move >= 0;
      for (const RowsTransfer& x : s.rows) (x.back ? rows_back : rows_out) += 1;
    }
    EXPECT_EQ(kv_to_0, 0);
    EXPECT_EQ(kv_to_1, pieces / 2);  // rank 0's early chunk
    EXPECT_EQ(moved_blocks, pieces);  // the moved rows against every piece of rank 1
    EXPECT_EQ(rows_out, 1);
    EXPECT_EQ(rows_back, 1);
    int grads = 0;
    for (const Step& s : p.backward.steps)
      for (const Transfer& x : s.transfers) grads += x.grad && x.dst == 0 && x.owner == 0;
    EXPECT_EQ(grads, pieces / 2);
    EXPECT_EQ(rows_transfer_bytes(p, parse_workload("B=2,S=512,H=4,D=16,causal"), {0, false}, Pass::Fwd), 2.0 * 128 * 4 * 16 * 2);
    EXPECT_EQ(rows_transfer_bytes(p, parse_workload("B=2,S=512,H=4,D=16,causal"), {0, false}, Pass::Bwd),
              2.0 * 128 * 4 * 16 * 2 + 2 * 2.0 * 4 * 128 * 4);
  }
}

TEST(QueryMoves, RefusedWhereTheyDoNotApply) {
  PlanOptions o;
  o.causal = true, o.prune_plain = true, o.move_queries = true, o.gather_pieces = 2;
  o.workload = parse_workload("S=512,H=4,D=16,causal");
  EXPECT_THROW(build_plan(load_topology("complete:4"), "allgather", o), InputError);  // 2 ranks only
  EXPECT_THROW(build_plan(load_topology("complete:2"), "zigzag", o), InputError);
  PlanOptions docs = o;
  docs.workload = parse_workload("S=512,H=4,D=16,causal,docs=256+256");
  EXPECT_THROW(build_plan(load_topology("complete:2"), "allgather", docs), InputError);
  PlanOptions full = o;
  full.causal = false, full.workload.causal = false;
  EXPECT_THROW(build_plan(load_topology("complete:2"), "allgather", full), InputError);
  PlanOptions fwd_only = o;
  fwd_only.backward = false;
  try {
    build_plan(load_topology("complete:2"), "allgather", fwd_only);
    ADD_FAILURE() << "moved queries without a keeping backward";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.what(), "keeps")) << e.what();
  }
}

// Each rule of the replay fails a plan that breaks it, naming what is wrong.
TEST(QueryMoves, ReplayCatchesBrokenMoves) {
  const Plan good = moved_plan(2);
  ASSERT_EQ(verify_plan(good), "");
  auto broken = [&](auto edit) {
    Plan p = good;
    edit(p);
    return verify_plan(p);
  };
  // The partial out never comes home.
  EXPECT_TRUE(has(broken([](Plan& p) { p.steps[2].rows.clear(); }), "never return")) << broken([](Plan& p) { p.steps[2].rows.clear(); });
  // Rows computed before they arrive.
  EXPECT_TRUE(has(broken([](Plan& p) { std::swap(p.steps[0].rows, p.steps[1].rows); }), "before they arrive"));
  // Rows returned in the step that computes them.
  EXPECT_TRUE(has(broken([](Plan& p) { p.steps[1].rows = p.steps[2].rows, p.steps[2].rows.clear(); }), "before a step"));
  // The owner computes a block the move makes too.
  EXPECT_TRUE(has(broken([](Plan& p) {
                    p.steps[2].compute.push_back({0, 1, 0, -1});
                    p.steps[1].transfers.push_back({1, 0, 1, 0, false});
                  }),
                  "second time"));
  // A moved block made at the wrong rank, or on another rank's piece.
  EXPECT_TRUE(has(broken([](Plan& p) { p.steps[1].compute[0].rank = 0; }), "own pieces"));
  // A move naming a range the owner does not have, or the owner's early rows (which see nothing of rank 1).
  EXPECT_TRUE(has(broken([](Plan& p) { p.query_moves[0].range = 2; }), "not one of rank 0's"));
  EXPECT_TRUE(has(broken([](Plan& p) { p.query_moves[0].at = 0; }), "to itself"));
  // The backward's dQ never returns; its dK/dV left behind.
  EXPECT_TRUE(has(broken([](Plan& p) { p.backward.steps[2].rows.clear(); }), "never return"));
  EXPECT_TRUE(has(broken([](Plan& p) { p.backward.steps[1].transfers.pop_back(); }), "not at its owner"));
  // A move's rows unlisted in the steps.
  EXPECT_TRUE(has(broken([](Plan& p) { p.steps[0].rows.clear(); }), "before they arrive"));
}

// In 4 pieces each direction's bytes go back to back: the partial out returns beside the early chunk's second half
// going out, and the backward computes rank 1's blocks on the first half before anything moves, so that dO going out
// crosses that half's dK/dV going home. In 2, the fewest steps (a medium both directions share).
TEST(QueryMoves, InFourPiecesWhatComesBackCrossesWhatGoesOut) {
  const auto crosses = [](const Step& s) {
    bool out = false, back = false;
    for (const Transfer& x : s.transfers) (x.src == 0 ? out : back) = true;
    for (const RowsTransfer& x : s.rows) (x.back ? back : out) = true;
    return out && back;
  };
  const Plan p = moved_plan(4);
  ASSERT_EQ(p.steps.size(), 4u);
  ASSERT_EQ(p.backward.steps.size(), 4u);
  EXPECT_TRUE(crosses(p.steps[2]));
  EXPECT_TRUE(p.backward.steps[0].transfers.empty() && p.backward.steps[0].rows.empty());
  EXPECT_FALSE(p.backward.steps[0].compute.empty());
  EXPECT_TRUE(crosses(p.backward.steps[1]));
  const Plan two = moved_plan(2);
  for (const auto* steps : {&two.steps, &two.backward.steps})
    for (const Step& s : *steps) EXPECT_FALSE(crosses(s));
}

TEST(QueryMoves, RoundTripThroughJsonAndYaml) {
  for (int pieces : {2, 4}) {
    SCOPED_TRACE(pieces);
    const Plan p = moved_plan(pieces);
    std::stringstream js, ys;
    write_plan_json(js, p);
    write_plan_yaml(ys, p);
    for (const Plan& q : {read_plan_json(js, "mem.json"), plan_from_yaml_text(ys.str(), "mem.yaml")}) {
      ASSERT_EQ(verify_plan(q), "");
      ASSERT_EQ(q.query_moves.size(), 1u);
      EXPECT_EQ(q.query_moves[0].range, 1);
      ASSERT_EQ(q.steps.size(), p.steps.size());
      for (size_t t = 0; t < p.steps.size(); ++t) {
        ASSERT_EQ(q.steps[t].rows.size(), p.steps[t].rows.size());
        for (size_t i = 0; i < p.steps[t].rows.size(); ++i) EXPECT_EQ(q.steps[t].rows[i].back, p.steps[t].rows[i].back);
        ASSERT_EQ(q.steps[t].compute.size(), p.steps[t].compute.size());
        for (size_t i = 0; i < p.steps[t].compute.size(); ++i) EXPECT_EQ(q.steps[t].compute[i].move, p.steps[t].compute[i].move);
      }
      ASSERT_EQ(q.backward.steps.size(), p.backward.steps.size());
      EXPECT_EQ(q.backward.steps.back().rows.size(), 1u);
    }
  }
}
