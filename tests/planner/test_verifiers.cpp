#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "planner/collective.hpp"
#include "planner/decomposition.hpp"
#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"
#include "planner/plan_io.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/verify_decomposition.hpp"
#include "planner/verify_plan.hpp"
#include "planner/workload.hpp"

using namespace tasp::planner;

TEST(VerifyCycles, CatchesBrokenDecompositions) {
  Digraph k5 = Digraph::complete(5);
  auto good = walecki_cycles(5);
  ASSERT_EQ(check_cycles(k5, good), "");
  auto dup = good;
  dup[1] = dup[0];
  EXPECT_NE(check_cycles(k5, dup).find("reuses arc"), std::string::npos);
  auto rep = good;
  rep[2][1] = rep[2][2];
  EXPECT_NE(check_cycles(k5, rep).find("twice"), std::string::npos);
  auto shortc = good;
  shortc[0].pop_back();
  EXPECT_NE(check_cycles(k5, shortc).find("vertices"), std::string::npos);
  Digraph missing = k5;
  missing.remove(good[3][0], good[3][1]);
  EXPECT_NE(check_cycles(missing, good).find("lacks"), std::string::npos);
  auto out = good;
  out[0][0] = 7;
  EXPECT_NE(check_cycles(k5, out).find("outside"), std::string::npos);
  EXPECT_NE(check_paths(Digraph::complete(4), {{0, 1, 2, 3}, {0, 1, 3, 2}}).find("reuses"), std::string::npos);
}

static Plan hamilton8(bool causal) { return build_plan(load_topology("complete:8"), "hamilton", PlanOptions{causal}); }

TEST(VerifyPlan, AllSchemesVerifyForEveryN) {
  for (int n = 2; n <= 128; ++n) {
    Topology t = load_topology("complete:" + std::to_string(n));
    Digraph g = rank_digraph(t);
    for (const char* s : {"ring", "zigzag", "allgather"}) {
      PlanOptions o;
      o.causal = std::string(s) == "zigzag";
      Plan p = build_plan(t, s, o);
      ASSERT_EQ(verify_plan(p, &g), "") << s << " n=" << n;
    }
  }
}

TEST(VerifyPlan, HamiltonFullAndCausalForEveryN) {
  for (int n = 2; n <= 128; ++n) {
    Topology t = load_topology("complete:" + std::to_string(n));
    Digraph g = rank_digraph(t);
    PlanOptions o;
    o.causal = n % 2 == 0;  // both variants across the range
    o.expand_max_ranks = 0;  // compact: the replay generates each step, which keeps the test quick
    Plan p = build_plan(t, "hamilton", o);
    EXPECT_EQ(p.pieces_per_rank, n == 4 ? 2 : n == 6 ? int(p.rings.size()) : n - 1);
    ASSERT_EQ(verify_plan(p, &g), "") << "n=" << n;
  }
}

TEST(VerifyPlan, ClustersAndTopologyFiles) {
  for (const char* c : {"cluster:2x8", "cluster:4x8", "cluster:3x6", "cluster:2x5"}) {
    Topology t = load_topology(c);
    Digraph g = rank_digraph(t);
    for (const char* s : {"two-level", "hamilton", "ring", "allgather"}) {
      Plan p = build_plan(t, s, PlanOptions{});
      EXPECT_EQ(verify_plan(p, &g), "") << c << " " << s;
    }
  }
  for (const char* f : {"h100-hgx-8", "h200-hgx-8", "h200-hgx-4", "h100-cluster-2x8", "h100-cluster-4x8", "mi300x-8", "torus-4x4"}) {
    Topology t = load_topology(std::string(TASP_SOURCE_DIR) + "/topologies/" + f + ".yaml");
    Digraph g = rank_digraph(t);
    for (const char* s : {"hamilton", "ring"}) {
      PlanOptions o;
      o.causal = true;
      Plan p = build_plan(t, s, o);
      EXPECT_EQ(verify_plan(p, &g), "") << f << " " << s;
    }
  }
}

TEST(VerifyPlan, CorruptedPlansAreRefused) {
  Plan good = hamilton8(true);
  ASSERT_EQ(verify_plan(good), "");
  Plan dropped = good;
  dropped.steps[2].transfers.erase(dropped.steps[2].transfers.begin() + 5);
  EXPECT_NE(verify_plan(dropped), "");
  Plan dup = good;
  dup.steps[3].compute.push_back(dup.steps[1].compute[4]);
  EXPECT_NE(verify_plan(dup).find("second time"), std::string::npos);
  Plan owner = good;
  owner.steps[1].transfers[0].owner = (owner.steps[1].transfers[0].owner + 3) % 8;
  EXPECT_NE(verify_plan(owner).find("does not hold"), std::string::npos);
  Plan early = good;
  std::swap(early.steps[0].compute[0], early.steps[1].compute[0]);
  EXPECT_NE(verify_plan(early).find("does not hold yet"), std::string::npos);
  Plan pair = good;
  pair.steps[0].transfers[1].dst = pair.steps[0].transfers[0].dst;
  pair.steps[0].transfers[1].src = pair.steps[0].transfers[0].src;
  EXPECT_NE(verify_plan(pair), "");
  Plan missing = good;
  missing.steps.back().compute.pop_back();
  EXPECT_NE(verify_plan(missing).find("never computes"), std::string::npos);
  Digraph ring_only = Digraph::empty(8);
  for (int i = 0; i < 8; ++i) ring_only.add(i, (i + 1) % 8);
  EXPECT_NE(verify_plan(good, &ring_only).find("not an arc"), std::string::npos);
}

TEST(PlanIo, JsonAndYamlRoundTrip) {
  for (bool causal : {false, true}) {
    Plan p = hamilton8(causal);
    for (bool yaml : {false, true}) {
      const std::string path = ::testing::TempDir() + (yaml ? "/p.yaml" : "/p.json");
      {
        std::ofstream o(path);
        if (yaml) write_plan_yaml(o, p);
        else write_plan_json(o, p);
      }
      Plan q = read_plan_file(path);
      EXPECT_EQ(q.ranks, p.ranks);
      EXPECT_EQ(q.causal, p.causal);
      EXPECT_EQ(q.layout, p.layout);
      EXPECT_EQ(q.rings, p.rings);
      ASSERT_EQ(q.steps.size(), p.steps.size());
      EXPECT_EQ(q.steps[3].transfers[7].owner, p.steps[3].transfers[7].owner);
      EXPECT_EQ(verify_plan(q), "");
    }
  }
  // Compact plans round trip too.
  PlanOptions o;
  o.expand_max_ranks = 0;
  Plan c = build_plan(load_topology("complete:16"), "hamilton", o);
  std::stringstream ss;
  write_plan_json(ss, c);
  Plan d = read_plan_json(ss, "mem");
  EXPECT_TRUE(d.compact());
  EXPECT_EQ(verify_plan(d), "");
}

// The plan written as JSON and as YAML and read back.
std::vector<Plan> through_files(const Plan& p, const std::string& stem) {
  std::vector<Plan> out;
  for (const std::string ext : {".json", ".yaml"}) {
    const std::string path = ::testing::TempDir() + stem + ext;
    {
      std::ofstream f(path);
      if (ext == ".yaml") write_plan_yaml(f, p);
      else write_plan_json(f, p);
    }
    out.push_back(read_plan_file(path));
  }
  return out;
}

// Head groups (Plan::head_groups) travel with a head-parallel plan and are refused on any other or out of range;
// the workload's heads must split into the groups and each group over the GPUs.
TEST(PlanIo, HeadGroupsRoundTripAndAreChecked) {
  PlanOptions o;
  o.causal = true, o.head_groups = 4;
  const Plan p = build_plan(load_topology("complete:4"), "ulysses", o);
  ASSERT_EQ(p.head_groups, 4);
  for (const Plan& q : through_files(p, "/heads")) {
    EXPECT_EQ(q.head_groups, 4);
    EXPECT_EQ(q.ulysses, 4);
    EXPECT_EQ(verify_plan(q), "");
  }
  Plan none = p;
  none.head_groups = 0;
  EXPECT_NE(verify_plan(none).find("head_groups"), std::string::npos);
  Plan ring = build_plan(load_topology("complete:4"), "ring", {});
  ring.head_groups = 2;
  EXPECT_NE(verify_plan(ring).find("head-parallel"), std::string::npos);
  EXPECT_EQ(check_head_groups(4, 4, parse_workload("B=1,S=64,H=32,Hkv=8,D=64")), "");
  EXPECT_EQ(check_head_groups(4, 2, parse_workload("B=1,S=64,H=32,Hkv=2,D=64")), "");  // 1 K/V head per group, replicated
  EXPECT_NE(check_head_groups(4, 3, parse_workload("B=1,S=64,H=32,Hkv=8,D=64")), "");  // 3 does not split the heads
  EXPECT_NE(check_head_groups(4, 16, parse_workload("B=1,S=64,H=32,Hkv=8,D=64")).find("head groups"), std::string::npos);
  const Workload g = head_group_workload(4, parse_workload("B=2,S=64,H=32,Hkv=8,D=64"));
  EXPECT_EQ(g.H, 8);
  EXPECT_EQ(g.Hkv, 2);
  EXPECT_EQ(g.B, 2);
}

// allgather's steps of several pieces (Plan::gather_steps) travel with the plan, listed and compact, and ones that do
// not sum to the pieces (or on another scheme) are refused.
TEST(PlanIo, GatherStepsRoundTripAndAreChecked) {
  for (int expand : {128, 0}) {
    PlanOptions o;
    o.causal = true, o.gather_pieces = 4, o.gather_steps = {2, 1, 1}, o.expand_max_ranks = expand;
    const Plan p = build_plan(load_topology("complete:3"), "allgather", o);
    for (const Plan& q : through_files(p, "/steps" + std::to_string(expand))) {
      EXPECT_EQ(q.gather_steps, (std::vector<int>{2, 1, 1}));
      EXPECT_EQ(q.num_steps(Pass::Bwd), 4);
      EXPECT_EQ(verify_plan(q), "");
    }
    Plan bad = p;
    bad.gather_steps = {2, 1};
    EXPECT_NE(verify_plan(bad).find("gather_steps"), std::string::npos);
  }
  Plan ring = build_plan(load_topology("complete:3"), "ring", {});
  ring.gather_steps = {1};
  EXPECT_NE(verify_plan(ring).find("gather_steps"), std::string::npos);
  std::stringstream j("{\"format\": \"tasp-plan/1\", \"scheme\": \"allgather\", \"ranks\": 2, \"gather_steps\": [2, 0], "
                      "\"schedule\": \"allgather\", \"step_count\": 3}");
  try {
    read_plan_json(j, "bad.json");
    ADD_FAILURE() << "a step of no pieces was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: gather_steps[1]"), std::string::npos) << e.what();
  }
}

// A plan pruned for documents and a window keeps its mask through JSON and YAML, still verifies, and a
// pruned plan that skips a block its queries see is caught.
TEST(PlanIo, PrunedPlansRoundTripAndAreCheckedAgainstTheirMask) {
  PlanOptions o;
  o.causal = true;
  o.workload = parse_workload("S=1000,H=2,D=8,causal,window=90,docs=400+1+599");
  const Plan p = build_plan(load_topology("complete:4"), "hamilton", o);
  ASSERT_TRUE(p.pruned.any());
  ASSERT_EQ(verify_plan(p), "");
  for (const Plan& q : through_files(p, "pruned")) {
    EXPECT_EQ(q.pruned.S, 1000);
    EXPECT_EQ(q.pruned.window_left, 90);
    EXPECT_EQ(q.pruned.docs, (std::vector<long>{400, 1, 599}));
    EXPECT_EQ(verify_plan(q), "");
  }
  Plan bad = p;
  for (auto& s : bad.steps)
    if (!s.compute.empty()) {
      s.compute.erase(s.compute.begin());
      break;
    }
  EXPECT_NE(verify_plan(bad).find("which its queries see"), std::string::npos) << verify_plan(bad);
}

// The zigzag-docs layout: every document in 2n chunks, rank r holding chunks r and 2n-1-r of each; every token
// on exactly one rank and in exactly one of its pieces; the documents survive JSON and YAML; a plan without
// them (or with lengths that do not sum to S) is refused with the reason.
// allgather pruned for the plain causal mask cuts its zigzag pieces by chunk (Plan::pieces_by_chunk): each piece one
// slice of one chunk, the shard covered once; on 2 ranks rank 0's late chunk (3 of 4), which rank 1 never sees, never
// leaves, half of what rank 0 sends, while rank 1 sends all; the steps go a root at a time (planner::per_root_of), the
// full gather of the first step as a collective too; the plan verifies and survives its files; odd counts are refused.
TEST(Layout, PiecesByChunkPruneTheLateChunk) {
  PlanOptions o;
  o.causal = true, o.prune_plain = true, o.gather_pieces = 4, o.gather_steps = {2, 1, 1};
  o.workload = parse_workload("S=1000,H=2,D=8,causal");
  const Plan p = build_plan(load_topology("complete:2"), "allgather", o);
  ASSERT_TRUE(p.pieces_by_chunk);
  ASSERT_TRUE(p.backward.keeps_kv);
  ASSERT_EQ(verify_plan(p), "");
  const Split s = split_of(p, 1000);
  ASSERT_EQ(check_split(s), "");
  for (int r = 0; r < 2; ++r) {
    const auto chunks = shard_ranges(s, r);
    ASSERT_EQ(chunks.size(), 2u);
    long covered = 0;
    for (int c = 0; c < 4; ++c) {
      const auto x = piece_ranges(s, r, c);
      ASSERT_EQ(x.size(), 1u);
      const Range& h = chunks[c / 2];  // pieces 0, 1 of the first chunk, 2, 3 of the second
      EXPECT_TRUE(x[0].begin >= h.begin && x[0].end <= h.end) << r << " " << c;
      covered += x[0].size();
    }
    EXPECT_EQ(covered, chunks[0].size() + chunks[1].size());
  }
  long sent[2] = {0, 0};
  for (int t = 0; t < p.num_steps(); ++t) {
    const Step st = plan_step(p, t);
    for (const Transfer& x : st.transfers) {
      sent[x.src] += piece_ranges(s, x.owner, x.piece)[0].size();
      if (x.src == 0) {
        EXPECT_LT(x.piece, 2) << "rank 0's late chunk leaves";
      }
    }
    if (!st.transfers.empty()) {
      EXPECT_EQ(per_root_of(st, 2, 4), Collective::AllGather) << "step " << t;
    }
    EXPECT_EQ(collective_of(st, 2, 4), t == 0 ? Collective::AllGather : Collective::None) << "step " << t;
  }
  EXPECT_EQ(sent[0] * 2, sent[1]);
  for (int t = 0; t < p.num_steps(Pass::Bwd); ++t) {
    const Step st = plan_step(p, t, Pass::Bwd);
    if (!st.transfers.empty()) {
      EXPECT_EQ(per_root_of(st, 2, 4), Collective::ReduceScatter) << "backward step " << t;
    }
  }
  for (const Plan& q : through_files(p, "by-chunk")) EXPECT_TRUE(q.pieces_by_chunk);
  o.gather_pieces = 3, o.gather_steps = {};
  EXPECT_THROW(build_plan(load_topology("complete:2"), "allgather", o), InputError);
  o.gather_pieces = 1;  // one a chunk
  EXPECT_EQ(build_plan(load_topology("complete:2"), "allgather", o).pieces_per_rank, 2);
  Plan odd = p;
  odd.pieces_per_rank = 3, odd.gather_steps = {};
  EXPECT_NE(verify_plan(odd), "");
}

TEST(Layout, ZigzagDocsSplitsEveryDocumentAndRoundTrips) {
  PlanOptions o;
  o.causal = true;
  o.layout_given = true, o.layout = Layout::ZigzagDocs;
  o.workload = parse_workload("S=1000,H=2,D=8,causal,docs=400+37+563");
  const Plan p = build_plan(load_topology("complete:4"), "hamilton", o);
  ASSERT_EQ(p.layout, Layout::ZigzagDocs);
  ASSERT_EQ(p.layout_docs, (std::vector<long>{400, 37, 563}));
  ASSERT_EQ(verify_plan(p), "");
  const Split s = split_of(p, 1000);
  ASSERT_EQ(check_split(s), "");
  std::vector<int> owner(1000, -1), in_piece(1000, 0);
  const long starts[] = {0, 400, 437, 1000};
  for (int r = 0; r < 4; ++r) {
    for (const Range& x : shard_ranges(s, r))
      for (long i = x.begin; i < x.end; ++i) {
        EXPECT_EQ(owner[i], -1) << i;
        owner[i] = r;
      }
    for (int c = 0; c < p.pieces_per_rank; ++c)
      for (const Range& x : piece_ranges(s, r, c))
        for (long i = x.begin; i < x.end; ++i) {
          EXPECT_EQ(owner[i], r);
          ++in_piece[i];
        }
    for (int d = 0; d < 3; ++d) {  // within each document a rank holds 2 of 2n chunks: 1/n of it, to a token or two
      long mine = 0;
      for (const Range& x : shard_ranges(s, r)) mine += std::max(0L, std::min(x.end, starts[d + 1]) - std::max(x.begin, starts[d]));
      EXPECT_NEAR(double(mine), double(starts[d + 1] - starts[d]) / 4, 2.0) << "rank " << r << " doc " << d;
    }
  }
  for (long i = 0; i < 1000; ++i) EXPECT_TRUE(owner[i] >= 0 && in_piece[i] == 1) << i;
  for (const Plan& q : through_files(p, "zigzag-docs")) {
    EXPECT_EQ(q.layout, Layout::ZigzagDocs);
    EXPECT_EQ(q.layout_docs, p.layout_docs);
  }
  std::ostringstream js;
  write_plan_json(js, p);
  std::string text = js.str();
  const size_t at = text.find("\"layout_docs\"");
  ASSERT_NE(at, std::string::npos);
  std::string no_docs = text;
  no_docs.erase(at - 2, text.find(']', at) + 1 - (at - 2));  // the ",\n" before it as well
  std::istringstream in(no_docs);
  try {
    read_plan_json(in, "p.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layout_docs: missing"), std::string::npos) << e.what();
  }
  Plan wrong = p;
  wrong.layout_docs = {400, 600, 1};
  EXPECT_NE(check_split(split_of(wrong, 1000)).find("sum to 1001"), std::string::npos);
  o.workload = parse_workload("S=20,H=2,D=8,causal,docs=5+5+5+5");  // 5-token documents in 8 chunks
  try {
    build_plan(load_topology("complete:4"), "hamilton", o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("without a token"), std::string::npos) << e.what();
  }
}

TEST(PlanIo, BadPlanFilesNameTheField) {
  auto err = [](const std::string& text) {
    std::istringstream in(text);
    try {
      read_plan_json(in, "bad.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("{").find("bad.json"), std::string::npos);
  // Moved queries' fields (planner/query_moves.hpp).
  const std::string head = R"({"format": "tasp-plan/1", "scheme": "allgather", "ranks": 2, )";
  EXPECT_NE(err(head + R"("query_moves": [{"owner": 0, "at": 1}]})").find("query_moves[0]: needs owner, range and at"), std::string::npos);
  EXPECT_NE(err(head + R"("query_moves": [{"owner": 0, "range": 1, "at": 1, "x": 2}]})").find("unknown key"), std::string::npos);
  EXPECT_NE(err(head + R"("steps": [{"transfers": [], "compute": [], "rows": [{"back": true}]}]})").find("needs move"), std::string::npos);
  EXPECT_NE(err(head + R"("steps": [{"transfers": [], "compute": [], "rows": [{"move": 0, "back": 1}]}]})").find("true or false"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":2,"bogus":1})").find("bogus: unknown key"), std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":2,"steps":[{"transfers":[{"src":0,"dst":1,"owner":0}]}]})")
                .find("steps[0].transfers[0]"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/3","ranks":2})").find("format"), std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":2,"steps":[],"backward":{"schedule":"ring-flow","step_count":3}})")
                .find("tasp-plan/2"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/2","ranks":2,"steps":[],"backward":{"accumulator":"fp8","steps":[]}})")
                .find("backward.accumulator: expected fp32 or bf16"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/2","ranks":2,"steps":[],"backward":{"steps":[{"transfers":[{"src":0,"dst":1,"owner":0,"piece":0,"kind":"dq"}]}]}})")
                .find("backward.steps[0].transfers[0].kind: expected kv or grad"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/2","ranks":2,"steps":[],"backward":{"steps":[{"transfers":[]}],"schedule":"ring-flow","step_count":3}})")
                .find("backward.schedule"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":2,"steps":[{"transfers":[{"src":0,"dst":1,"owner":0,"piece":0,"kind":"grad"}]}]})")
                .find("steps[0].transfers[0].kind: unknown key"),
            std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":"two"})").find("ranks"), std::string::npos);
  EXPECT_NE(err(R"({"format":"tasp-plan/1","ranks":2,"layout":"spiral"})").find("layout"), std::string::npos);
}

// Compact ring-flow plans are checked by their rule's structure; the replay must agree with it.
TEST(VerifyPlan, RingFlowRuleAgreesWithReplay) {
  for (int n : {2, 3, 5, 8, 12}) {
    Topology t = load_topology("complete:" + std::to_string(n));
    PlanOptions o;
    o.expand_max_ranks = 0;
    Plan p = build_plan(t, "hamilton", o);
    ASSERT_TRUE(p.compact());
    const Digraph g = rank_digraph(t);
    PlanStats a, b;
    EXPECT_EQ(verify_plan(p, &g, &a), "");
    EXPECT_EQ(verify_plan(p, &g, &b, true), "");
    EXPECT_EQ(a.transfers, b.transfers);
    EXPECT_EQ(a.computes, b.computes);
    EXPECT_EQ(a.max_arcs_per_step, b.max_arcs_per_step);
    EXPECT_EQ(a.backward.steps, b.backward.steps);
    EXPECT_EQ(a.backward.transfers, b.backward.transfers);
    EXPECT_EQ(a.backward.grad_transfers, b.backward.grad_transfers);
    EXPECT_EQ(a.backward.computes, b.backward.computes);
    EXPECT_EQ(a.backward.max_arcs_per_step, b.backward.max_arcs_per_step);
    if (p.rings.size() < 2) continue;
    Plan bad = p;
    bad.rings[1] = bad.rings[0];  // two rings on the same arcs
    EXPECT_NE(verify_plan(bad), "");
    EXPECT_NE(verify_plan(bad, nullptr, nullptr, true), "");
    bad = p;
    bad.step_count = n - 1;
    EXPECT_NE(verify_plan(bad), "");
    bad = p;
    bad.backward.step_count = n;  // no return hop
    EXPECT_NE(verify_plan(bad).find("backward.step_count"), std::string::npos);
    EXPECT_NE(verify_plan(bad, nullptr, nullptr, true).find("not at its owner"), std::string::npos);
  }
}

// Every scheme's backward replays: each block adds to dQ and its piece's accumulator once, every accumulator
// ends at its owner after the fewest hops, for every n and both masks, listed and compact.
TEST(VerifyPlan, BackwardOfEverySchemeForEveryN) {
  for (int n = 1; n <= 20; ++n) {
    Topology t = load_topology("complete:" + std::to_string(n));
    Digraph g = rank_digraph(t);
    for (const char* s : {"ring", "zigzag", "allgather", "hamilton"})
      for (int expand : {128, 0}) {
        PlanOptions o;
        o.causal = std::string(s) == "zigzag" || n % 2;
        o.expand_max_ranks = expand;
        Plan p = build_plan(t, s, o);
        ASSERT_TRUE(p.has_backward);
        PlanStats st;
        ASSERT_EQ(verify_plan(p, &g, &st, true), "") << s << " n=" << n;
        EXPECT_EQ(st.backward.computes, long(n) * n * p.pieces_per_rank) << s << " n=" << n;
        // The fewest: each piece's n - 1 other ranks' parts reach its owner, rings and all-gather alike.
        EXPECT_EQ(st.backward.grad_transfers, long(n) * (n - 1) * p.pieces_per_rank) << s << " n=" << n;
      }
  }
  for (const char* c : {"cluster:2x4", "cluster:3x4", "cluster:4x8"}) {
    Topology t = load_topology(c);
    Digraph g = rank_digraph(t);
    Plan p = build_plan(t, "two-level", PlanOptions{true});
    EXPECT_EQ(verify_plan(p, &g, nullptr, true), "") << c;
  }
}

TEST(VerifyPlan, CorruptedBackwardsAreRefused) {
  const Plan good = hamilton8(true);
  ASSERT_TRUE(good.has_backward);
  ASSERT_FALSE(good.backward.compact());
  ASSERT_EQ(verify_plan(good), "");
  const int last = good.num_steps(Pass::Bwd) - 1;
  auto first_grad = [](const Step& s) {
    for (size_t i = 0; i < s.transfers.size(); ++i)
      if (s.transfers[i].grad) return i;
    return s.transfers.size();
  };
  Plan dropped = good;  // one accumulator never returns to its owner
  dropped.backward.steps[last].transfers.erase(dropped.backward.steps[last].transfers.begin() + 3);
  EXPECT_NE(verify_plan(dropped).find("not at its owner"), std::string::npos) << verify_plan(dropped);
  Plan twice = good;  // one block added twice
  twice.backward.steps[4].compute.push_back(twice.backward.steps[2].compute[5]);
  EXPECT_NE(verify_plan(twice).find("second time"), std::string::npos);
  Plan early = good;  // an accumulator sent before it was made
  {
    auto& from = early.backward.steps[3].transfers;
    const size_t i = first_grad(early.backward.steps[3]);
    early.backward.steps[2].transfers.push_back(from[i]);
    from.erase(from.begin() + long(i));
  }
  EXPECT_NE(verify_plan(early).find("does not hold"), std::string::npos) << verify_plan(early);
  Plan kv_early = good;  // a K/V piece sent before it arrived
  std::swap(kv_early.backward.steps[1].transfers[0].owner, kv_early.backward.steps[1].transfers[1].owner);
  EXPECT_NE(verify_plan(kv_early).find("does not hold"), std::string::npos);
  Plan two_acc = good;  // two accumulators on one arc in one step: rank 0's second one redirected
  {
    std::vector<Transfer*> from0;
    for (auto& x : two_acc.backward.steps[2].transfers)
      if (x.grad && x.src == 0) from0.push_back(&x);
    ASSERT_GE(from0.size(), 2u);
    from0[1]->dst = from0[0]->dst;
  }
  EXPECT_NE(verify_plan(two_acc).find("two accumulators"), std::string::npos) << verify_plan(two_acc);
  Plan fwd_grad = good;  // the forward moves no accumulators
  fwd_grad.steps[1].transfers[0].grad = true;
  EXPECT_NE(verify_plan(fwd_grad).find("forward moves no"), std::string::npos);
  // The backward is not looked at when asked not to.
  EXPECT_EQ(verify_plan(dropped, nullptr, nullptr, false, false), "");
}

TEST(PlanIo, BackwardRoundTrips) {
  for (const char* scheme : {"hamilton", "allgather"})
    for (int expand : {128, 0})
      for (bool yaml : {false, true}) {
        PlanOptions o;
        o.causal = true;
        o.expand_max_ranks = expand;
        o.accumulator_bytes = 2;
        Plan p = build_plan(load_topology("complete:6"), scheme, o);
        const std::string path = ::testing::TempDir() + (yaml ? "/b.yaml" : "/b.json");
        {
          std::ofstream out(path);
          if (yaml) write_plan_yaml(out, p);
          else write_plan_json(out, p);
        }
        Plan q = read_plan_file(path);
        SCOPED_TRACE(std::string(scheme) + (expand ? " listed" : " compact") + (yaml ? " yaml" : " json"));
        EXPECT_EQ(q.format, "tasp-plan/2");
        EXPECT_TRUE(q.has_backward);
        EXPECT_EQ(q.accumulator_bytes, 2);
        EXPECT_EQ(q.backward.compact(), p.backward.compact());
        EXPECT_EQ(q.num_steps(Pass::Bwd), p.num_steps(Pass::Bwd));
        if (!p.backward.compact()) {
          const auto& a = p.backward.steps.back().transfers;
          const auto& b = q.backward.steps.back().transfers;
          ASSERT_EQ(a.size(), b.size());
          for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].grad, b[i].grad);
        }
        EXPECT_EQ(verify_plan(q), "");
      }
  // A forward-only plan stays tasp-plan/1.
  PlanOptions o;
  o.backward = false;
  std::stringstream ss;
  write_plan_json(ss, build_plan(load_topology("complete:4"), "ring", o));
  EXPECT_NE(ss.str().find("tasp-plan/1"), std::string::npos);
  EXPECT_EQ(ss.str().find("backward"), std::string::npos);
}

// Schemes that reduce to the same exchange: on 2 ranks K_2* has one Hamiltonian cycle, so hamilton's plan is the
// ring's, step for step, forward and backward (issue 41: their measured times must then agree, and a difference is
// the fabric's spread, not the plan).
TEST(VerifyPlan, HamiltonOnTwoRanksIsTheRing) {
  for (bool causal : {false, true}) {
    PlanOptions o;
    o.causal = causal;
    const Topology t = load_topology("complete:2");
    Plan ring = build_plan(t, "ring", o), ham = build_plan(t, "hamilton", o);
    ham.scheme = ring.scheme, ham.note = ring.note;
    std::ostringstream a, b;
    write_plan_json(a, ring), write_plan_json(b, ham);
    EXPECT_EQ(a.str(), b.str()) << (causal ? "causal" : "full");
  }
}
