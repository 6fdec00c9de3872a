// Every scheme computes exact attention on the CPU backend: compared with direct fp64 attention.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "executor/attention_cpu.hpp"
#include "executor/launch_env.hpp"
#include "executor/run.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/verify_plan.hpp"
#include "planner/topology.hpp"

using namespace tasp;
using namespace tasp::planner;

namespace {

// A test name from a case's text: gtest takes letters, digits and '_'.
std::string test_name(std::string s) {
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

struct Config {
  std::string topology, scheme;
  bool causal;
  int gather_pieces = 1;  // allgather: PlanOptions::gather_pieces
  bool keep_kv = true;
  std::vector<int> gather_steps = {};  // allgather: PlanOptions::gather_steps (summing to gather_pieces)
};

// The fewest tokens the plan's split gives every piece one: a zigzag head-parallel plan chunks over all its GPUs.
long unit_tokens(const Plan& p) {
  return long(p.layout == Layout::Zigzag ? 2 * p.ulysses : 1) * p.ranks * p.pieces_per_rank;
}

// Forward and backward through the plan against the direct fp64 forward and backward.
void check_plan(const Plan& p, const Workload& w, const std::string& prec, double tol, const std::string& what) {
  auto be = executor::make_cpu_backend(prec);
  executor::RunOptions ro;
  ro.check = true;
  ro.passes = {true, true};
  ro.seed = unsigned(w.S * 31 + w.H);
  executor::RunReport r = executor::run_plan(*be, p, w, ro);
  ASSERT_EQ(r.checks.size(), 5u);
  for (const auto& x : r.checks) {
    EXPECT_LT(x.rel_err, tol) << x.name << " " << what << " " << to_string(w) << " " << prec;
    if (x.name != "lse") {
      EXPECT_GT(x.rel_err, 0.0) << x.name;  // zero would mean the check compared nothing
    }
    EXPECT_GT(x.cosine, 1 - tol) << x.name;
  }
}

void run_and_check(const Config& c, int H, int Hkv, int D, int mult, const std::string& prec, double tol, long extra = 0) {
  Topology t = load_topology(c.topology);
  PlanOptions o;
  o.causal = c.causal;
  o.gather_pieces = c.gather_pieces, o.keep_kv = c.keep_kv, o.gather_steps = c.gather_steps;
  Plan p = build_plan(t, c.scheme, o);
  Workload w;
  w.B = mult == 1 ? 2 : 1;
  w.S = unit_tokens(p) * mult + extra;
  w.H = H;
  w.Hkv = Hkv;
  w.D = D;
  w.causal = c.causal;
  check_plan(p, w, prec, tol, c.topology + " " + c.scheme);
}

std::vector<Config> configs() {
  std::vector<Config> v;
  for (int n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16}) {
    const std::string t = "complete:" + std::to_string(n);
    v.push_back({t, "ring", false});
    v.push_back({t, "zigzag", true});
    v.push_back({t, "allgather", false});
    v.push_back({t, "allgather", true});
    v.push_back({t, "hamilton", false});
    v.push_back({t, "hamilton", true});
  }
  // allgather piece by piece (the gathers and reduce-scatters beside the compute), kept K/V and gathered again.
  for (int n : {2, 3, 5, 8})
    for (bool causal : {false, true}) {
      v.push_back({"complete:" + std::to_string(n), "allgather", causal, 2});
      v.push_back({"complete:" + std::to_string(n), "allgather", causal, 3, false});
    }
  // Steps of several pieces, the forward's shrinking (the backward takes them in reverse), kept and gathered again.
  for (int n : {2, 3})
    for (bool causal : {false, true}) {
      v.push_back({"complete:" + std::to_string(n), "allgather", causal, 6, true, {3, 2, 1}});
      v.push_back({"complete:" + std::to_string(n), "allgather", causal, 4, false, {1, 3}});
    }
  for (const char* c : {"cluster:2x4", "cluster:3x4"}) {
    v.push_back({c, "two-level", false});
    v.push_back({c, "two-level", true});
    v.push_back({c, "hamilton", true});
  }
  return v;
}

}  // namespace

class EveryScheme : public ::testing::TestWithParam<Config> {};

TEST_P(EveryScheme, MhaD16AndGqaD64InFp64) {
  run_and_check(GetParam(), 2, 2, 16, 1, "fp64", 1e-10);  // MHA, B=2
  run_and_check(GetParam(), 4, 2, 64, 3, "fp64", 1e-10);  // GQA, S not a power of two
}

TEST_P(EveryScheme, MqaInFp32) { run_and_check(GetParam(), 4, 1, 16, 3, "fp32", 1e-5); }

// S that does not split evenly: shards and pieces differ by a token (S = 13441-like lengths), no padding.
TEST_P(EveryScheme, UnevenSequenceInFp64) {
  run_and_check(GetParam(), 2, 1, 16, 2, "fp64", 1e-10, 7);
  run_and_check(GetParam(), 2, 2, 16, 1, "fp64", 1e-10, 1);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryScheme, ::testing::ValuesIn(configs()), [](const auto& info) {
  const Config& c = info.param;
  return test_name(c.topology + "_" + c.scheme + (c.causal ? "_causal" : "_full") +
                   (c.gather_pieces > 1 ? "_pieces" + std::to_string(c.gather_pieces) : "") +
                   (c.gather_steps.empty() ? "" : "_in_" + std::to_string(c.gather_steps.size()) + "_steps") +
                   (c.keep_kv ? "" : "_gathered_again"));
});

// Packed documents and sliding windows: plans pruned for the mask (fewer blocks and transfers), exact in fp64
// against the direct masked attention, forward and backward. Random documents (1-token ones, ones spanning
// several pieces), windows smaller than a piece and larger than S, with and without causal, S that does not
// divide.
struct MaskCase {
  int n;
  std::string scheme;
  std::string topology = "";  // default complete:n
  bool doc_zigzag = false;    // the zigzag-docs layout (zigzag within every document)
};

class MaskedEveryScheme : public ::testing::TestWithParam<MaskCase> {};

TEST_P(MaskedEveryScheme, DocumentsAndWindowsExactInFp64) {
  const MaskCase c = GetParam();
  std::mt19937 rng(unsigned(c.n * 131 + c.scheme.size()));
  const Topology t = load_topology(c.topology.empty() ? "complete:" + std::to_string(c.n) : c.topology);
  int checked = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const bool causal = c.scheme == "zigzag" || c.doc_zigzag || (trial % 2 == 1);
    PlanOptions probe;
    probe.causal = causal;
    probe.ulysses = c.scheme == "usp" ? 2 : 0;
    const long unit = unit_tokens(build_plan(t, c.scheme, probe));
    Workload w;
    w.B = 1 + trial % 2, w.H = c.scheme == "ulysses" ? 2 * c.n : 2, w.Hkv = c.scheme == "ulysses" ? c.n : 1 + trial % 2, w.D = 8;
    w.causal = causal;
    w.S = unit * (4 + trial % 3 + (c.doc_zigzag ? 1 : 0)) + long(rng() % 5);
    const long piece = std::max(1L, w.S / unit);
    switch (trial % 3) {
      case 0: w.window_left = 1 + long(rng() % piece); break;  // smaller than a piece
      case 1: w.window_left = w.S + 5; break;                    // larger than S
      default: w.window_left = -1;
    }
    if (!causal && w.window_left >= 0) w.window_right = long(rng() % 4);
    if (trial != 1) {  // documents: 1-token ones and ones spanning several pieces
      for (long left = w.S; left > 0;) {
        // (zigzag-docs: the first document long enough to give every piece of every rank a token)
        const long first = 2 * piece + 1 + (c.doc_zigzag ? unit : 0);
        const long len = std::min<long>(left, w.docs.empty() ? first : rng() % 3 == 0 ? 1 : 1 + long(rng() % (3 * piece)));
        w.docs.push_back(len);
        left -= len;
      }
    }
    PlanOptions o;
    o.causal = causal;
    o.workload = w;
    o.ulysses = c.scheme == "usp" ? 2 : 0;
    if (c.doc_zigzag) o.layout_given = true, o.layout = Layout::ZigzagDocs;
    Plan p;
    try {
      p = build_plan(t, c.scheme, o);
    } catch (const InputError& e) {
      // Documents too short to give every rank's every piece a token: refused with that reason.
      ASSERT_TRUE(c.doc_zigzag && std::string(e.what()).find("without a token") != std::string::npos) << e.what();
      continue;
    }
    if (c.doc_zigzag) {
      ASSERT_EQ(p.layout, Layout::ZigzagDocs);
      ASSERT_EQ(p.layout_docs, w.docs.empty() ? std::vector<long>{w.S} : w.docs);
    }
    ASSERT_EQ(verify_plan(p), "") << to_string(w);
    if (w.windowed() || w.packed()) {
      EXPECT_TRUE(p.pruned.any()) << to_string(w);
    }
    check_plan(p, w, "fp64", 1e-10, c.scheme + " n=" + std::to_string(c.n));
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> v;
  for (int n : {2, 3, 4, 7, 8})
    for (const char* s : {"ring", "zigzag", "allgather", "hamilton"}) v.push_back({n, s});
  v.push_back({4, "usp"});
  v.push_back({8, "usp"});
  v.push_back({2, "ulysses"});
  v.push_back({4, "ulysses"});
  v.push_back({8, "two-level", "cluster:2x4"});
  for (int n : {2, 3, 4, 7})
    for (const char* s : {"zigzag", "hamilton"}) v.push_back({n, s, "", true});
  v.push_back({8, "allgather", "", true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cpu, MaskedEveryScheme, ::testing::ValuesIn(mask_cases()), [](const auto& info) {
  return test_name(info.param.scheme + std::to_string(info.param.n) + (info.param.doc_zigzag ? "_zigzag_docs" : ""));
});

// Plain masks pruned on request (PlanOptions::prune_plain): under a causal mask a rank gets only the K/V its
// queries see, and every owner's partial dK/dV stays home; exact in fp64 for every token-moving scheme, full and
// causal, lengths that divide and do not.
TEST(CpuExecutor, PlainMasksPrunedOnRequestAreExact) {
  struct Case {
    std::string topology, scheme;
  };
  std::vector<Case> cases;
  for (int n : {2, 3, 4, 8})
    for (const char* s : {"ring", "zigzag", "hamilton"}) cases.push_back({"complete:" + std::to_string(n), s});
  cases.push_back({"cluster:2x4", "two-level"});
  cases.push_back({"complete:4", "usp"});
  for (int n : {2, 3, 4}) cases.push_back({"complete:" + std::to_string(n), "allgather"});  // causal: by chunk, K/V kept
  for (const Case& c : cases)
    for (bool causal : {false, true}) {
      if (c.scheme == "zigzag" && !causal) continue;
      const Topology t = load_topology(c.topology);
      PlanOptions o;
      o.causal = causal, o.prune_plain = true, o.ulysses = c.scheme == "usp" ? 2 : 0;
      const long unit = unit_tokens(build_plan(t, c.scheme, o));
      Workload w;
      w.B = 2, w.H = 4, w.Hkv = 2, w.D = 8, w.causal = causal, w.S = unit * 3 + (causal ? 0 : 1);
      o.workload = w;
      const Plan p = build_plan(t, c.scheme, o);
      SCOPED_TRACE(c.topology + " " + c.scheme + (causal ? " causal" : " full"));
      ASSERT_EQ(verify_plan(p), "");
      if (c.scheme == "allgather") {
        // Pruned for a causal mask only, its zigzag pieces cut by chunk and the forward's K/V kept; a full mask
        // leaves it whole.
        EXPECT_TRUE(p.backward.keeps_kv);
        EXPECT_EQ(p.pruned.any(), causal);
        EXPECT_EQ(p.pieces_by_chunk, causal);
      }
      else if (c.scheme != "usp") {
        EXPECT_TRUE(p.pruned.any());
      }
      check_plan(p, w, "fp64", 1e-10, c.scheme);
    }
}

// Queries moved to keys (planner/query_moves.hpp): rank 0's late chunk computed at rank 1, its partial out merged
// and its partial dQ added at home; exact in fp64, MHA and GQA, lengths that divide the pieces and not.
TEST(CpuExecutor, MovedQueriesAreExact) {
  for (int pieces : {2, 4})
    for (const char* wl : {"B=2,S=1,H=4,Hkv=2,D=8,causal", "B=1,S=1,H=2,Hkv=2,D=16,causal"})
      for (long extra : {0L, 3L}) {
        PlanOptions o;
        o.causal = true, o.prune_plain = true, o.move_queries = true, o.gather_pieces = pieces;
        Workload w = parse_workload(wl);
        w.S = 8L * pieces * 5 + extra;
        o.workload = w;
        const Plan p = build_plan(load_topology("complete:2"), "allgather", o);
        SCOPED_TRACE(std::to_string(pieces) + " pieces, " + to_string(w));
        ASSERT_EQ(verify_plan(p), "");
        ASSERT_FALSE(p.query_moves.empty());
        check_plan(p, w, "fp64", 1e-10, "allgather, queries moved");
      }
}

// A window narrower than a shard on a contiguous ring: only the neighbour's piece moves, so the plan shrinks
// to two forward steps; a plan pruned for one mask refuses another.
TEST(CpuExecutor, WindowedRingShrinksAndPrunedPlansKeepTheirMask) {
  PlanOptions o;
  o.causal = true;
  o.workload = parse_workload("S=800,H=2,D=8,causal,window=50");
  const Plan p = build_plan(load_topology("complete:8"), "ring", o);
  EXPECT_EQ(p.layout, Layout::Contiguous);
  EXPECT_EQ(p.num_steps(), 2);
  EXPECT_EQ(p.backward.num_steps(), 3);
  auto be = executor::make_cpu_backend("fp64");
  executor::RunOptions ro;
  try {
    executor::run_plan(*be, p, parse_workload("S=800,H=2,D=8,causal,window=60"), ro);
    ADD_FAILURE() << "ran a plan pruned for another window";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pruned for another mask"), std::string::npos) << e.what();
  }
}

TEST(CpuExecutor, CorruptedPlansAreRefusedAndFailTheCheckUnverified) {
  Topology t = load_topology("complete:8");
  PlanOptions o;
  o.causal = true;
  Plan good = build_plan(t, "hamilton", o);
  Workload w = parse_workload("B=1,S=224,H=2,D=16,causal");
  o.backward = false;
  good = build_plan(t, "hamilton", o);
  auto be = executor::make_cpu_backend("fp64");
  std::vector<Plan> bad(3, good);
  bad[0].steps[1].transfers.erase(bad[0].steps[1].transfers.begin() + 3);  // dropped transfer
  bad[1].steps[2].compute.push_back(bad[1].steps[0].compute[0]);           // duplicated compute
  for (auto& c : bad[2].steps[0].compute)  // wrong piece: rank 0 computes its piece 1 where piece 0 was due
    if (c.rank == 0 && c.piece == 0) c.piece = 1;
  for (size_t i = 0; i < bad.size(); ++i) {
    executor::RunOptions ro;
    ro.check = true;
    try {
      executor::run_plan(*be, bad[i], w, ro);
      ADD_FAILURE() << "corrupted plan " << i << " ran";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("verifier"), std::string::npos) << e.what();
    }
  }
  // Verification off: the run goes ahead where it physically can, and the numbers are wrong.
  for (size_t i : {1u, 2u}) {
    executor::RunOptions ro;
    ro.check = true;
    ro.verify = false;
    executor::RunReport r = executor::run_plan(*be, bad[i], w, ro);
    EXPECT_GT(r.rel_err("out"), 1e-3) << i;
  }
  // A dropped transfer leaves the receiver without the piece: the run stops with an error naming it.
  executor::RunOptions ro;
  ro.verify = false;
  try {
    executor::run_plan(*be, bad[0], w, ro);
    ADD_FAILURE() << "ran without a piece";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold"), std::string::npos) << e.what();
  }
}

// Backward plans with a dropped accumulator return, a block counted twice, or an accumulator sent before it
// was made: refused by the verifier, and run unverified, caught by the numeric check.
TEST(CpuExecutor, CorruptedBackwardPlansAreRefusedAndFailTheCheckUnverified) {
  Topology t = load_topology("complete:5");
  PlanOptions o;
  o.causal = true;
  const Plan good = build_plan(t, "hamilton", o);
  ASSERT_TRUE(good.has_backward);
  const Workload w = parse_workload("B=1,S=120,H=2,Hkv=1,D=8,causal");
  auto be = executor::make_cpu_backend("fp64");
  std::vector<Plan> bad(3, good);
  auto& last = bad[0].backward.steps.back().transfers;  // the return hop of one accumulator
  ASSERT_TRUE(last.front().grad);
  last.erase(last.begin());
  bad[1].backward.steps[3].compute.push_back(bad[1].backward.steps[1].compute[2]);  // one block twice
  auto& s2 = bad[2].backward.steps[2].transfers;  // an accumulator sent one step early
  for (size_t i = 0; i < s2.size(); ++i)
    if (s2[i].grad) {
      bad[2].backward.steps[1].transfers.push_back(s2[i]);
      s2.erase(s2.begin() + long(i));
      break;
    }
  const char* why[] = {"not at its owner", "second time", "does not hold"};
  executor::RunOptions ro;
  ro.check = true;
  ro.passes = {false, true};
  for (size_t i = 0; i < bad.size(); ++i) {
    try {
      executor::run_plan(*be, bad[i], w, ro);
      ADD_FAILURE() << "corrupted backward plan " << i << " ran";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why[i]), std::string::npos) << e.what();
    }
  }
  ro.verify = false;
  for (size_t i = 0; i < bad.size(); ++i) {
    executor::RunReport r = executor::run_plan(*be, bad[i], w, ro);
    EXPECT_GT(r.max_rel_err(), 1e-3) << i;
  }
  ro.verify = true;
  EXPECT_LT(executor::run_plan(*be, good, w, ro).max_rel_err(), 1e-10);
}

TEST(CpuExecutor, BackwardOfAPlanWithoutOneIsAClearError) {
  PlanOptions o;
  o.backward = false;
  Plan p = build_plan(load_topology("complete:4"), "ring", o);
  auto be = executor::make_cpu_backend("fp64");
  executor::RunOptions ro;
  ro.passes = {true, true};
  try {
    executor::run_plan(*be, p, parse_workload("S=64,H=2,D=16"), ro);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no backward part"), std::string::npos) << e.what();
  }
}

// The fp64 reference backward is itself checked against central finite differences of
// L = sum(dO * attention(q, k, v)) on tiny shapes (GQA, full and causal).
TEST(CpuAttention, ReferenceBackwardMatchesFiniteDifferences) {
  // Full, causal, and documents with windows (masked pairs must get no gradient).
  for (const char* text : {"B=2,S=5,H=4,Hkv=2,D=3", "B=2,S=5,H=4,Hkv=2,D=3,causal", "B=2,S=5,H=4,Hkv=2,D=3,causal,docs=2+3,window=1",
                           "B=2,S=5,H=4,Hkv=2,D=3,docs=1+4,window=1:2"}) {
    const Workload w = parse_workload(text);
    executor::Problem pr = executor::random_problem(w, w.causal ? 7 : 3, true);
    std::vector<double> dq, dk, dv;
    executor::reference_attention_backward(pr.q, pr.k, pr.v, pr.dout, w, dq, dk, dv);
    auto loss = [&](const executor::Problem& x) {
      std::vector<double> o, l;
      executor::reference_attention(x.q, x.k, x.v, w, o, l);
      double sum = 0;
      for (size_t i = 0; i < o.size(); ++i) sum += o[i] * x.dout[i];
      return sum;
    };
    const double h = 1e-5;
    auto check = [&](std::vector<double> executor::Problem::*field, const std::vector<double>& grad, const char* name) {
      double num = 0, den = 0;
      for (size_t i = 0; i < grad.size(); ++i) {
        executor::Problem a = pr, b = pr;
        (a.*field)[i] += h;
        (b.*field)[i] -= h;
        const double fd = (loss(a) - loss(b)) / (2 * h);
        num += (fd - grad[i]) * (fd - grad[i]);
        den += grad[i] * grad[i];
      }
      EXPECT_LT(std::sqrt(num / den), 1e-7) << name << " " << text;
      EXPECT_GT(den, 1e-3) << name;  // gradients that are not all zero
    };
    check(&executor::Problem::q, dq, "dq");
    check(&executor::Problem::k, dk, "dk");
    check(&executor::Problem::v, dv, "dv");
  }
}

// The backward alone (its forward untimed) gives the same gradients, and its timeline only backward steps.
TEST(CpuExecutor, BackwardPassAlone) {
  PlanOptions o;
  o.causal = true;
  Plan p = build_plan(load_topology("complete:3"), "zigzag", o);
  auto be = executor::make_cpu_backend("fp64");
  executor::RunOptions ro;
  ro.check = true;
  ro.passes = {false, true};
  executor::RunReport r = executor::run_plan(*be, p, parse_workload("B=1,S=48,H=2,D=8,causal"), ro);
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[0].name, "dq");
  EXPECT_LT(r.max_rel_err(), 1e-10);
  EXPECT_EQ(r.result.timeline.pass, "bwd");
  EXPECT_EQ(int(r.result.timeline.per_rank[0].size()), p.num_steps(Pass::Bwd));
}

TEST(CpuExecutor, UnsplittableSequenceIsAClearError) {
  Plan p = build_plan(load_topology("complete:8"), "hamilton", PlanOptions{true});
  auto be = executor::make_cpu_backend("fp64");
  try {
    executor::run_plan(*be, p, parse_workload("S=100,H=2,D=16,causal"), {});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 112"), std::string::npos) << e.what();  // 16 chunks x 7 pieces
  }
  EXPECT_THROW(parse_workload("S=64,H=3,Hkv=2,D=16"), InputError);
  EXPECT_THROW(parse_workload("S=64,H=2"), InputError);
}

TEST(CpuAttention, MergeOfTwoHalvesEqualsWhole) {
  // Attention over keys split in two blocks, merged, equals attention over all keys at once.
  const int B = 1, H = 2, Hkv = 1, D = 8;
  std::vector<long> qpos{5, 9, 17}, kall, k1, k2;
  for (long i = 0; i < 20; ++i) (i % 3 ? k1 : k2).push_back(i), kall.push_back(i);
  auto rnd = [](size_t n, int s) {
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = std::sin(double(i * 7 + s) * 0.37) * 1.5;
    return x;
  };
  auto pick = [](const std::vector<double>& full, const std::vector<long>& pos, int per) {
    std::vector<double> x;
    for (long p : pos) x.insert(x.end(), full.begin() + p * per, full.begin() + (p + 1) * per);
    return x;
  };
  std::vector<double> q = rnd(qpos.size() * H * D, 1), K = rnd(20 * Hkv * D, 2), V = rnd(20 * Hkv * D, 3);
  for (bool causal : {false, true}) {
    planner::Mask mask;
    mask.S = 20, mask.causal = causal;
    std::vector<double> o(q.size()), l(qpos.size() * H), o1(q.size()), l1(l.size()), o2(q.size()), l2(l.size());
    executor::block_attention(q.data(), qpos, K.data(), V.data(), kall, B, H, Hkv, D, mask, o.data(), l.data());
    auto K1 = pick(K, k1, D), V1 = pick(V, k1, D), K2 = pick(V, k2, D), V2 = pick(V, k2, D);
    K2 = pick(K, k2, D);
    executor::block_attention(q.data(), qpos, K1.data(), V1.data(), k1, B, H, Hkv, D, mask, o1.data(), l1.data());
    executor::block_attention(q.data(), qpos, K2.data(), V2.data(), k2, B, H, Hkv, D, mask, o2.data(), l2.data());
    executor::merge_block(o1.data(), l1.data(), o2.data(), l2.data(), l.size(), D);
    for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], o1[i], 1e-12);
    for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(l[i], l1[i], 1e-12);
  }
}


TEST(LaunchEnv, ReadsLaunchersAndRejectsNonsense) {
  using tasp::executor::launch_env;
  auto from = [](std::map<std::string, std::string> m) {
    return [m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  auto none = launch_env(from({}));
  EXPECT_FALSE(none.multi_process());
  auto o = launch_env(from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  EXPECT_TRUE(o.multi_process());
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.size, 8);
  EXPECT_EQ(o.launcher, "mpirun");
  auto s = launch_env(from({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(s.rank, 9);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.launcher, "slurm");
  EXPECT_THROW(launch_env(from({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}})), std::invalid_argument);
  EXPECT_THROW(launch_env(from({{"PMI_RANK", "x"}, {"PMI_SIZE", "4"}})), std::invalid_argument);
  EXPECT_GE(tasp::executor::allowed_cpu_count(), 1);  // this process may run somewhere (0: unknown, not Linux)
}

// Head parallelism: Ulysses on one group and usp (Ulysses groups x a ring scheme across them), MHA, GQA split
// over the slots and GQA with K/V heads replicated (fewer K/V heads than slots), causal and full; usp with allgather
// across its groups also in pieces (its groups' slots gather piece by piece), kept K/V and gathered again.
TEST(HeadParallel, UlyssesAndUspAreExact) {
  struct Case {
    std::string topology, scheme, inner;
    int ulysses, H, Hkv;
    int gather_pieces = 1;
    bool keep_kv = true;
  };
  const std::vector<Case> cases{
      {"complete:2", "ulysses", "", 0, 4, 2},      {"complete:4", "ulysses", "", 0, 8, 4},
      {"complete:4", "ulysses", "", 0, 8, 2},      {"complete:8", "ulysses", "", 0, 16, 2},
      {"cluster:2x4", "usp", "hamilton", 0, 8, 4}, {"cluster:2x4", "usp", "ring", 0, 4, 1},
      {"cluster:4x4", "usp", "hamilton", 0, 4, 2}, {"cluster:4x4", "usp", "allgather", 0, 8, 8},
      {"cluster:3x8", "usp", "hamilton", 0, 8, 8}, {"cluster:3x8", "usp", "ring", 0, 16, 4},
      {"cluster:2x4", "usp", "two-level", 2, 4, 2}, {"complete:8", "usp", "hamilton", 2, 4, 4},
      {"complete:4", "usp", "allgather", 2, 4, 2, 2}, {"cluster:3x4", "usp", "allgather", 0, 8, 4, 3, false},
  };
  for (const auto& c : cases)
    for (bool causal : {false, true}) {
      PlanOptions o;
      o.causal = causal;
      o.ulysses = c.ulysses;
      if (!c.inner.empty()) o.inner = c.inner;
      o.gather_pieces = c.gather_pieces, o.keep_kv = c.keep_kv;
      const Topology t = load_topology(c.topology);
      const Plan p = build_plan(t, c.scheme, o);
      if (c.inner == "allgather") {
        EXPECT_EQ(p.pieces_per_rank, c.gather_pieces) << c.topology;
      }
      EXPECT_EQ(p.gpus(), t.ranks());
      EXPECT_EQ(verify_plan(p, nullptr, nullptr, false, true), "");
      const Digraph g = rank_digraph(t);
      EXPECT_EQ(verify_plan(p, &g, nullptr, false, true), "") << c.topology;
      Workload w;
      w.S = unit_tokens(p) * 3;
      w.H = c.H, w.Hkv = c.Hkv, w.D = 16, w.causal = causal;
      check_plan(p, w, "fp64", 1e-10, c.topology + " " + c.scheme + " " + c.inner);
    }
}

TEST(HeadParallel, HeadsThatDoNotSplitAreAClearError) {
  const Plan p = build_plan(load_topology("complete:4"), "ulysses", {});
  auto be = executor::make_cpu_backend("fp64");
  for (const char* bad : {"B=1,S=16,H=6,D=16", "B=1,S=16,H=12,Hkv=3,D=16", "B=1,S=16,H=4,Hkv=2,D=16"}) {
    // H=6 over 4; H=12, Hkv=3: Hkv neither splits over nor divides 4; H=4, Hkv=2 over 4 splits (one query head per slot).
    const Workload w = parse_workload(bad);
    executor::RunOptions ro;
    ro.check = true;
    if (std::string(bad).find("H=4,") != std::string::npos) {
      EXPECT_NO_THROW(executor::run_plan(*be, p, w, ro));
    } else {
      EXPECT_THROW(executor::run_plan(*be, p, w, ro), InputError) << bad;
    }
  }
  // usp on one node needs the group size.
  EXPECT_THROW(build_plan(load_topology("complete:8"), "usp", {}), InputError);
}
