// The slot plan the cuda backend runs on, replayed symbolically on the CPU: every compute finds its K/V piece
// and accumulator in the slots the plan names, every transfer moves the right content, no slot is reused
// while its content is still needed, and every piece's dK/dV ends at its owner with all ranks' contributions.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "planner/collective.hpp"
#include "planner/slot_plan.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"
#include "planner/verify_plan.hpp"
#include "tests/planner/scheme_plans.hpp"

using namespace tasp;
using namespace tasp::planner;

namespace {

struct Acc {
  long key = -1;
  int count = 0;
};

void replay(const Plan& p, Pass pass) {
  const int n = p.ranks, P = p.pieces_per_rank, steps = p.num_steps(pass);
  std::vector<planner::RankSlots> rs;
  for (int r = 0; r < n; ++r) {
    rs.push_back(planner::plan_slots(p, pass, r));
    if (pass == Pass::Fwd) {
      ASSERT_EQ(rs.back().grad_slots, 0) << "the forward has no accumulators";
    }
  }
  std::vector<std::vector<long>> kv(n);
  std::vector<std::vector<Acc>> acc(n);
  for (int r = 0; r < n; ++r) {
    kv[r].assign(rs[r].kv_slots, -1);
    acc[r].assign(rs[r].grad_slots, Acc{});
    for (const auto& [k, s] : rs[r].steps[0].held) kv[r][s] = k;
  }
  auto key = [P](int o, int c) { return long(o) * P + c; };
  for (int t = 0; t < steps; ++t) {
    Step scratch;
    const Step& st = step_at(p, t, scratch, pass);
    SCOPED_TRACE("step " + std::to_string(t));
    for (int r = 0; r < n; ++r) {
      const auto& s = rs[r].steps[t];
      for (const auto& [k, slot] : s.held) ASSERT_EQ(kv[r][slot], k) << "rank " << r << " slot " << slot;
      for (int slot : s.grad_zero) acc[r][slot] = Acc{};
    }
    std::vector<std::vector<std::pair<int, long>>> kv_in(n);
    std::vector<std::vector<std::pair<int, Acc>>> acc_in(n);
    for (const auto& x : st.transfers) {
      const long k = key(x.owner, x.piece);
      const auto &src = rs[x.src].steps[t], &dst = rs[x.dst].steps[t];
      if (x.grad) {
        const int from = src.grad_send.at(k);
        ASSERT_EQ(acc[x.src][from].key, k);
        acc_in[x.dst].push_back({dst.grad_recv.at({k, x.src}), acc[x.src][from]});
        acc[x.src][from] = Acc{-2, 0};  // gone: reading it again would fail
      } else {
        ASSERT_EQ(kv[x.src][src.held.at(k)], k);
        kv_in[x.dst].push_back({dst.arrivals.at(k), k});
      }
    }
    for (const auto& c : st.compute) {
      const long k = key(c.owner, c.piece);
      const auto& s = rs[c.rank].steps[t];
      ASSERT_EQ(kv[c.rank][s.held.at(k)], k);
      if (pass == Pass::Bwd) {
        Acc& a = acc[c.rank][s.grad_compute.at(k)];
        ASSERT_TRUE(a.key == -1 || a.key == k) << "accumulator slot of another piece";
        a.key = k, ++a.count;
      }
    }
    for (int r = 0; r < n; ++r) {
      for (const auto& [slot, k] : kv_in[r]) kv[r][slot] = k;
      for (const auto& [slot, a] : acc_in[r]) acc[r][slot] = a;
      for (const auto& [into, from] : rs[r].steps[t].grad_add) {
        ASSERT_EQ(acc[r][into].key, acc[r][from].key);
        acc[r][into].count += acc[r][from].count;
      }
    }
  }
  if (pass != Pass::Bwd) return;
  for (int o = 0; o < n; ++o)
    for (int c = 0; c < P; ++c) {
      const Acc& a = acc[o][rs[o].grad_final.at(key(o, c))];
      EXPECT_EQ(a.key, key(o, c));
      EXPECT_EQ(a.count, n) << "owner " << o << " piece " << c;
    }
}

}  // namespace

TEST(SlotPlan, EverySchemeBothPassesReplay) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9})
    for (const char* s : {"ring", "zigzag", "allgather", "hamilton"}) {
      PlanOptions o;
      o.causal = std::string(s) == "zigzag";
      Plan p = build_plan(load_topology("complete:" + std::to_string(n)), s, o);
      SCOPED_TRACE(std::string(s) + " n=" + std::to_string(n));
      replay(p, Pass::Fwd);
      replay(p, Pass::Bwd);
    }
  Plan two = build_plan(load_topology("cluster:2x4"), "two-level", PlanOptions{true});
  replay(two, Pass::Bwd);
}

// A ring's backward needs few buffers: its own pieces (slots 0..P-1, kept), one arriving and one held piece
// per ring, and up to four accumulators per ring (its own block's, kept for the sum coming home; the one being
// computed, the one being sent, the one arriving).
TEST(SlotPlan, RingBackwardUsesFewSlotsAndKeepsOwnPieces) {
  Plan p = build_plan(load_topology("complete:8"), "hamilton", PlanOptions{});
  for (int r = 0; r < 8; ++r) {
    const auto s = planner::plan_slots(p, Pass::Bwd, r);
    EXPECT_LE(s.kv_slots, 3 * p.pieces_per_rank) << r;
    EXPECT_LE(s.grad_slots, 4 * p.pieces_per_rank) << r;
    for (const auto& st : s.steps)
      for (int c = 0; c < p.pieces_per_rank; ++c) EXPECT_EQ(st.held.at(long(r) * p.pieces_per_rank + c), c);
  }
}

// 16-bit accumulators (RankBuffers::grad16) only where one launch makes each whole: Ulysses' heads on their own GPU,
// not a ring's or a gather's steps, nor usp's ring inside its head groups.
TEST(SlotPlan, GradsWrittenOnceOnlyInOneStepWithoutTransfers) {
  for (int n : {2, 4, 8}) {
    const Plan u = build_plan(load_topology("complete:" + std::to_string(n)), "ulysses", PlanOptions{});
    ASSERT_EQ(u.ulysses, n);
    for (int r = 0; r < u.ranks; ++r) EXPECT_TRUE(grads_written_once(plan_slots(u, Pass::Bwd, r))) << n;
    for (const char* scheme : {"ring", "zigzag", "allgather", "hamilton", "usp"}) {
      PlanOptions o;
      o.causal = true;
      if (std::string(scheme) == "usp") {
        if (n < 4) continue;
        o.ulysses = 2;
      }
      const Plan p = build_plan(load_topology("complete:" + std::to_string(n)), scheme, o);
      for (int r = 0; r < p.ranks; ++r)
        EXPECT_FALSE(grads_written_once(plan_slots(p, Pass::Bwd, r))) << scheme << " on " << n << " rank " << r;
    }
  }
}

// Accumulators the kernel may write into their send's staging in 16 bits (sends_written_once): replaying every
// scheme's backward slot plan (point to point and by owner), each one found is cleared and computed into at its step
// alone, sent once at the pass's first sending step and touched nowhere else; allgather's gathered pieces are (in
// pieces, the first piece's).
TEST(SlotPlan, SendsWrittenOnceAreClearedComputedAndSentOnly) {
  size_t gathered = 0;
  tasp::testing::for_each_scheme_plan([&](const Plan& p, const std::string& scheme) {
    const int n = p.ranks;
    for (bool by_owner : {false, true}) {
          SCOPED_TRACE(by_owner ? "by owner" : "point to point");
          for (int r = 0; r < n; ++r) {
            const RankSlots rs = plan_slots(p, Pass::Bwd, r, by_owner);
            const auto found = sends_written_once(rs);
            if (scheme == "allgather") {
              // Every gathered piece's accumulator, or in pieces the first piece's (the later ones' staging is the
              // earlier pieces' while those leave).
              EXPECT_EQ(found.size(), size_t(n - 1)) << "rank " << r;
              gathered += found.size();
            }
            for (const auto& f : found) {
              ASSERT_LT(f.step, f.send_step);
              // The accumulator's lifetime in its slot: from its clearing to the slot's next clearing or arrival
              // (another accumulator, overwriting it).
              int next = int(rs.steps.size()) + 1;
              for (int t = f.step + 1; t < int(rs.steps.size()) && next > int(rs.steps.size()); ++t) {
                const StepSlots& s = rs.steps[t];
                bool arrives = std::count(s.grad_zero.begin(), s.grad_zero.end(), f.slot) > 0;
                for (const auto& [ks, slot] : s.grad_recv) arrives = arrives || slot == f.slot;
                if (arrives) next = t;
              }
              ASSERT_GT(next, f.send_step) << "slot " << f.slot << " overwritten before its accumulator leaves";
              int uses = 0;
              for (int t = 0; t < std::min(next, int(rs.steps.size())); ++t) {
                const StepSlots& s = rs.steps[t];
                for (int slot : s.grad_zero) uses += slot == f.slot && t != f.step ? 100 : 0;
                for (const auto& [k, slot] : s.grad_compute)
                  if (slot == f.slot) uses += t == f.step && k == f.key ? 1 : 100;
                for (const auto& [k, slot] : s.grad_send) {
                  if (slot == f.slot) uses += t == f.send_step && k == f.key ? 1 : 100;
                  EXPECT_GE(t, f.send_step) << "an accumulator leaves before the staging's first use";
                }
                for (const auto& [ks, slot] : s.grad_recv) uses += slot == f.slot ? 100 : 0;
                for (const auto& [into, from] : s.grad_add) uses += into == f.slot || from == f.slot ? 100 : 0;
              }
              if (next > int(rs.steps.size()))
                for (const auto& [k, slot] : rs.grad_final) uses += slot == f.slot ? 100 : 0;
              EXPECT_EQ(uses, 2) << "slot " << f.slot;
              EXPECT_TRUE(std::count(rs.steps[f.step].grad_zero.begin(), rs.steps[f.step].grad_zero.end(), f.slot));
            }
          }
    }
  });
  EXPECT_GT(gathered, 0u);
}

// allgather in pieces as collectives: each exchanging step moves whole pieces (one collective each), K/V slots by
// owner are piece-major (piece c's n blocks side by side, as an in-place all-gather fills them), and a step that
// leaves a (sender, owner) pair of a piece out is no collective.
TEST(SlotPlan, AllgatherInPiecesIsOneCollectivePerPiece) {
  for (int n : {2, 3, 5})
    for (int P : {1, 2, 3})
      for (bool keep : {true, false}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(P) + " pieces" + (keep ? "" : ", gathered again"));
        PlanOptions o;
        o.causal = true, o.gather_pieces = P, o.keep_kv = keep;
        const Plan p = build_plan(load_topology("complete:" + std::to_string(n)), "allgather", o);
        ASSERT_EQ(p.pieces_per_rank, P);
        ASSERT_EQ(p.num_steps(), P + 1);
        for (int t = 0; t < p.num_steps(); ++t) {
          Step scratch;
          const Step& s = step_at(p, t, scratch, Pass::Fwd);
          if (t < P) {
            EXPECT_EQ(collective_of(s, n, P), Collective::AllGather) << "step " << t;
            EXPECT_EQ(collective_pieces(s), std::vector<int>{t});
          } else {
            EXPECT_TRUE(s.transfers.empty());
          }
        }
        for (int t = 0; t < p.num_steps(Pass::Bwd); ++t) {
          Step scratch;
          const Step& s = step_at(p, t, scratch, Pass::Bwd);
          if (s.transfers.empty()) continue;
          const bool grads = s.transfers.front().grad;
          EXPECT_EQ(collective_of(s, n, P), grads ? Collective::ReduceScatter : Collective::AllGather) << "step " << t;
          if (keep) EXPECT_EQ(collective_pieces(s), std::vector<int>{t - 1});
        }
        for (int r = 0; r < n; ++r) {
          const RankSlots rs = plan_slots(p, Pass::Fwd, r, true);
          for (int c = 0; c < P; ++c) EXPECT_EQ(rs.steps[0].held.at(long(r) * P + c), c * n + r);
          for (int t = 0; t < P; ++t)
            for (const auto& [k, slot] : rs.steps[t].arrivals) EXPECT_EQ(slot, int(k % P) * n + int(k / P));
        }
      }
  // A gather step missing one (sender, owner) pair of its piece: send/recv, not a collective.
  PlanOptions o;
  o.gather_pieces = 2;
  const Plan p = build_plan(load_topology("complete:3"), "allgather", o);
  Step scratch;
  Step s = step_at(p, 0, scratch, Pass::Fwd);
  s.transfers.pop_back();
  EXPECT_EQ(collective_of(s, 3, 2), Collective::None);
}

// Steps of several pieces (PlanOptions::gather_steps): the forward's step t gathers its group and computes the one
// before; the keeping backward takes the sizes last first (its first, exposed step the smallest), every step one
// collective per piece it moves, and the plan verifies in both passes.
TEST(SlotPlan, AllgatherStepsOfSeveralPieces) {
  for (int n : {2, 3}) {
    PlanOptions o;
    o.causal = true, o.gather_pieces = 6, o.gather_steps = {3, 2, 1};
    const Plan p = build_plan(load_topology("complete:" + std::to_string(n)), "allgather", o);
    ASSERT_EQ(p.gather_steps, (std::vector<int>{3, 2, 1}));
    ASSERT_EQ(p.num_steps(Pass::Fwd), 4);
    ASSERT_EQ(p.num_steps(Pass::Bwd), 4);
    EXPECT_EQ(verify_plan(p), "");
    const std::vector<std::vector<int>> gathered{{0, 1, 2}, {3, 4}, {5}, {}}, sent{{}, {0}, {1, 2}, {3, 4, 5}};
    for (int t = 0; t < 4; ++t) {
      Step scratch;
      const Step& f = step_at(p, t, scratch, Pass::Fwd);
      EXPECT_EQ(collective_pieces(f), gathered[t]) << "forward step " << t;
      if (!f.transfers.empty()) EXPECT_EQ(collective_of(f, n, 6), Collective::AllGather);
      std::set<int> computed;
      for (const auto& c : f.compute)
        if (c.owner != c.rank) computed.insert(c.piece);
      EXPECT_EQ(std::vector<int>(computed.begin(), computed.end()), t ? gathered[t - 1] : std::vector<int>{}) << t;
      Step scratch_b;
      const Step& b = step_at(p, t, scratch_b, Pass::Bwd);
      EXPECT_EQ(collective_pieces(b), sent[t]) << "backward step " << t;
      if (!b.transfers.empty()) EXPECT_EQ(collective_of(b, n, 6), Collective::ReduceScatter);
    }
  }
  // The sizes must cover the pieces, each at least one.
  PlanOptions bad;
  bad.gather_pieces = 4, bad.gather_steps = {2, 1};
  EXPECT_THROW(build_plan(load_topology("complete:2"), "allgather", bad), InputError);
  bad.gather_steps = {4, 0};
  EXPECT_THROW(build_plan(load_topology("complete:2"), "allgather", bad), InputError);
  // All ones is the plain plan (no gather_steps written).
  bad.gather_steps = {1, 1, 1, 1};
  EXPECT_TRUE(build_plan(load_topology("complete:2"), "allgather", bad).gather_steps.empty());
}
