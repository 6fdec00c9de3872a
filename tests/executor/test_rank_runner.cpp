// A rank runner re-masked for new packed documents (runner_documents): what it accepts, and that the work lists it
// makes again over the unchanged schedule compute every pair the new mask shows, once, and nothing else, with a dQ
// scratch (cuda::dq_tiles) that holds their items. On the host: the lists are plain data; no GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "executor/cuda_pass.hpp"
#include "host_buffers.hpp"
#include "executor/rank_runner.hpp"
#include "planner/mask.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/slot_plan.hpp"
#include "planner/topology.hpp"
#include "tests/planner/scheme_plans.hpp"

using namespace tasp;
using namespace tasp::planner;

namespace {

Plan plan_of(const std::string& scheme, int n, bool causal, Layout layout, const Workload* pruned_for = nullptr) {
  PlanOptions o;
  o.causal = causal, o.layout_given = true, o.layout = layout;
  if (pruned_for) o.workload = *pruned_for;
  return build_plan(load_topology("complete:" + std::to_string(n)), scheme, o);
}

Workload workload(long S, bool causal, std::vector<long> docs = {}) {
  Workload w;
  w.B = 2, w.S = S, w.H = 4, w.Hkv = 2, w.D = 8, w.causal = causal, w.docs = std::move(docs);
  return w;
}

bool mentions(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(RankRunner, DocumentLengthsFromOffsets) {
  const long long cu[] = {0, 5, 6, 64};
  EXPECT_EQ(executor::document_lengths(cu, 4), (std::vector<long>{5, 1, 58}));
  EXPECT_TRUE(executor::document_lengths(nullptr, 0).empty());
  const long long one[] = {0};
  const long long late[] = {3, 10};
  const long long flat[] = {0, 5, 5, 64};
  for (auto [p, n, what] : {std::tuple{one, size_t(1), "one offset"}, std::tuple{late, size_t(2), "starts at 3"},
                            std::tuple{flat, size_t(4), "offset 2 (5) is not past offset 1 (5)"},
                            std::tuple{static_cast<const long long*>(nullptr), size_t(3), "NULL"}}) {
    try {
      executor::document_lengths(p, n);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InputError& e) {
      EXPECT_TRUE(mentions(e.what(), "cu_seqlens")) << e.what();
      EXPECT_TRUE(mentions(e.what(), what)) << e.what();
    }
  }
}

TEST(RankRunner, RemaskRefusesPlansThatFollowTheirMask) {
  const Workload w = workload(64, true);
  EXPECT_EQ(executor::remask_refusal(plan_of("allgather", 2, true, Layout::Contiguous), w, {10, 54}), "");
  EXPECT_EQ(executor::remask_refusal(plan_of("zigzag", 2, true, Layout::Zigzag), w, {10, 54}), "");
  EXPECT_EQ(executor::remask_refusal(plan_of("ring", 3, true, Layout::Contiguous), w, {}), "");  // back to one sequence
  const Workload docs = workload(64, true, {10, 54});
  EXPECT_TRUE(mentions(executor::remask_refusal(plan_of("ring", 2, true, Layout::Contiguous, &docs), w, {20, 44}), "pruned"));
  EXPECT_TRUE(mentions(executor::remask_refusal(plan_of("ring", 2, true, Layout::Contiguous), w, {20, 40}), "sum to 60"));
  EXPECT_TRUE(mentions(executor::remask_refusal(plan_of("ring", 2, true, Layout::Contiguous), w, {64, 0}), "positive"));
  PlanOptions o;
  o.causal = true;
  o.ulysses = 2;
  const Plan uly = build_plan(load_topology("complete:2"), "ulysses", o);
  EXPECT_TRUE(mentions(executor::remask_refusal(uly, w, {10, 54}), "head-parallel"));
  o = {};
  o.causal = true, o.layout_given = true, o.layout = Layout::ZigzagDocs, o.workload = docs;
  const Plan zd = build_plan(load_topology("complete:2"), "zigzag", o);
  EXPECT_FALSE(executor::remask_refusal(zd, w, {10, 54}).empty());
}

// Every scheme whose schedule ignores documents, re-masked for documents its plan never saw: over a pass, each rank's
// items against their pieces see exactly the new mask's pairs of the rank's queries, each once; the backward's items
// (split at documents) fit the scratch dq_tiles sizes; the schedule (steps, transfers) is the plan's.
TEST(CudaPass, RemaskedWorkListsComputeExactlyTheNewMask) {
  using namespace executor::cuda;
  struct Case {
    std::string scheme;
    int n;
    bool causal;
    Layout layout;
    std::vector<long> docs;
  };
  const long S = 96;
  const std::vector<Case> cases = {{"allgather", 2, true, Layout::Contiguous, {10, 1, 40, 45}},
                                   {"allgather", 3, false, Layout::Contiguous, {50, 46}},
                                   {"zigzag", 2, true, Layout::Zigzag, {7, 33, 56}},
                                   {"ring", 3, true, Layout::Contiguous, {30, 30, 36}},
                                   {"hamilton", 4, true, Layout::Zigzag, {1, 94, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scheme + " on " + std::to_string(c.n));
    const Plan p = plan_of(c.scheme, c.n, c.causal, c.layout);
    const Workload w0 = workload(S, c.causal), w = workload(S, c.causal, c.docs);
    ASSERT_EQ(executor::remask_refusal(p, w0, c.docs), "");
    const Geometry g = make_geometry(p, w);
    std::vector<char> mem(1 << 20);
    const auto [bufs, local] = executor::cuda::host_buffers(p.ranks, mem);
    const Mask m = make_mask(w);
    for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
      const PassWork pw = make_pass_work(p, pass, w, g, local, bufs);
      const PassWork pw0 = make_pass_work(p, pass, w0, g, local, bufs);
      ASSERT_EQ(pw.num_steps(), pw0.num_steps());
      for (int t = 0; t < pw.num_steps(); ++t) EXPECT_EQ(pw.steps[t].transfers.size(), pw0.steps[t].transfers.size());
      for (int r = 0; r < p.ranks; ++r) {
        std::map<std::pair<long, long>, int> seen;  // (query, key) -> times computed
        const int steps = pass == Pass::Fwd ? int(pw.fwd[r].size()) : int(pw.bwd[r].size());
        for (int t = 0; t < steps; ++t) {
          const auto& items = pass == Pass::Fwd ? pw.fwd[r][t].items : pw.bwd[r][t].items;
          const auto& pieces = pass == Pass::Fwd ? pw.fwd[r][t].pieces : pw.bwd[r][t].pieces;
          for (const kernels::WorkItem& it : items)
            for (long q = it.q_pos0; q < it.q_pos0 + it.q_len; ++q)
              for (int i = it.piece_begin; i < it.piece_begin + it.piece_count; ++i)
                for (long k = pieces[i].pos0; k < pieces[i].pos0 + pieces[i].len; ++k)
                  if (k >= it.k_begin && k < it.k_end && (!it.causal || k <= q)) ++seen[{q, k}];
          if (pass == Pass::Bwd) {
            // The dQ finish writes every row (issue_step clears none first); the scratch holds a started tile of
            // `rows` rows per item.
            EXPECT_TRUE(items_cover_rows(items, g.qrows[r])) << "rank " << r << " step " << t;
            for (int rows : {64, 80, 128}) {
              size_t tiles = 0;
              for (const kernels::WorkItem& it : items) tiles += (it.q_len + rows - 1) / rows;
              EXPECT_LE(tiles, dq_tiles(m, g.qranges[r], rows)) << "rank " << r << " step " << t;
            }
          }
        }
        size_t expected = 0;
        for (const Range& qr : g.qranges[r])
          for (long q = qr.begin; q < qr.end; ++q)
            for (long k = 0; k < S; ++k) {
              if (!m.visible(q, k)) continue;
              ++expected;
              const auto f = seen.find({q, k});
              ASSERT_TRUE(f != seen.end()) << "rank " << r << ": pair (" << q << ", " << k << ") never computed";
              ASSERT_EQ(f->second, 1) << "rank " << r << ": pair (" << q << ", " << k << ") computed twice";
            }
        EXPECT_EQ(seen.size(), expected) << "rank " << r << ": pairs the mask hides were computed";
      }
    }
  }
}

TEST(CudaPass, ItemsCoverRows) {
  using executor::cuda::items_cover_rows;
  auto item = [](int row0, int len) {
    kernels::WorkItem it;
    it.q_row0 = row0, it.q_len = len;
    return it;
  };
  EXPECT_TRUE(items_cover_rows({item(40, 60), item(0, 40)}, 100));  // in any order
  EXPECT_TRUE(items_cover_rows({item(0, 70), item(50, 50)}, 100));  // overlapping
  EXPECT_FALSE(items_cover_rows({item(0, 40), item(41, 59)}, 100));  // row 40 in none
  EXPECT_FALSE(items_cover_rows({item(0, 99)}, 100));
  EXPECT_FALSE(items_cover_rows({}, 1));
  EXPECT_TRUE(items_cover_rows({}, 0));
}

// Accumulators cleared when the backward starts (slots_zeroed_ahead, on the comm stream beside step 0): replaying
// every scheme's backward slot plan with those slots cleared at the start and the rest as their steps say, no step
// reads or adds into a slot holding anything but zeros or its own sums, and a slot cleared ahead is still clear
// when its step comes (nothing used it before). allgather's own accumulators are cleared ahead.
TEST(CudaPass, AccumulatorsClearedAheadAreUntouchedUntilTheirStep) {
  enum State { Garbage, Zero, Data };
  size_t ahead_total = 0;
  tasp::testing::for_each_scheme_plan([&](const Plan& p, const std::string&) {
    for (int r = 0; r < p.ranks; ++r) {
      const RankSlots rs = plan_slots(p, Pass::Bwd, r);
      const auto ahead = executor::cuda::slots_zeroed_ahead(rs);
      ahead_total += ahead.size();
      std::vector<State> st(size_t(rs.grad_slots) + 1, Garbage);
      for (const auto& [step, slot] : ahead) {
        ASSERT_GT(step, 0);
        st.at(slot) = Zero;
      }
      for (size_t t = 0; t < rs.steps.size(); ++t) {
        const StepSlots& s = rs.steps[t];
        for (int slot : s.grad_zero) {
          if (std::find(ahead.begin(), ahead.end(), std::pair<int, int>{int(t), slot}) != ahead.end())
            EXPECT_EQ(st.at(slot), Zero) << "slot " << slot << " used before its step " << t;
          else
            st.at(slot) = Zero;
        }
        for (const auto& [k, slot] : s.grad_compute) {
          EXPECT_NE(st.at(slot), Garbage) << "step " << t << " adds into uncleared slot " << slot;
          st.at(slot) = Data;
        }
        for (const auto& [k, slot] : s.grad_send) EXPECT_NE(st.at(slot), Garbage) << "step " << t << " sends slot " << slot;
        for (const auto& [k, slot] : s.grad_recv) st.at(slot) = Data;
        for (const auto& [into, from] : s.grad_add) {
          EXPECT_NE(st.at(into), Garbage);
          EXPECT_NE(st.at(from), Garbage);
          st.at(into) = Data;
        }
      }
    }
  });
  EXPECT_GT(ahead_total, 0u);  // some scheme's later steps start accumulators (allgather's own pieces)
}

// A training framework's rank leaves the backward's last adds into its final dK/dV accumulators to the casts that
// copy them out (planner::final_adds): replaying the last step's adds on random values with and without that deferral gives
// every own piece the same sum, in the same order, for every scheme and accumulator type.
TEST(SlotPlan, FinalAddsFusedWithTheCastGiveTheSameSums) {
  std::map<std::string, int> deferred;  // scheme -> adds deferred over all cases
  tasp::testing::for_each_scheme_plan([&](const Plan& p, const std::string& scheme) {
    for (bool half : {false, true}) {
      SCOPED_TRACE(half ? "bf16" : "fp32");
      for (int r = 0; r < p.ranks; ++r) {
        const RankSlots rs = plan_slots(p, Pass::Bwd, r);
        const StepSlots& s = rs.steps.back();
        std::vector<double> slots(size_t(rs.grad_slots) + 1), stage(s.grad_recv.size());
        for (size_t i = 0; i < slots.size(); ++i) slots[i] = std::sin(1.0 + 7.0 * i + r);
        for (size_t i = 0; i < stage.size(); ++i) stage[i] = std::cos(3.0 + 5.0 * i + r);
        const std::vector<FinalAdd> fused = final_adds(rs, r, p.pieces_per_rank, half);
        deferred[scheme] += int(fused.size());
        // The step's adds in the backend's order (step_adds), skipping the deferred ones when asked.
        auto replay = [&](bool defer) {
          std::vector<double> v = slots;
          for (const StepAdd& a : step_adds(s, half)) {
            const bool skipped = defer && std::any_of(fused.begin(), fused.end(), [&](const FinalAdd& d) {
              return d.into == a.into && d.from == a.from && d.from16 == a.from16;
            });
            if (!skipped) v.at(a.into) = (a.adopt ? 0.0 : v.at(a.into)) + (a.from16 >= 0 ? stage.at(a.from16) : v.at(a.from));
          }
          return v;
        };
        const std::vector<double> plain = replay(false), left = replay(true);
        for (int c = 0; c < p.pieces_per_rank; ++c) {
          const auto f = rs.grad_final.find(long(r) * p.pieces_per_rank + c);
          if (f == rs.grad_final.end()) continue;
          double got = left.at(f->second);
          for (const FinalAdd& a : fused)
            if (a.piece == c) {
              ASSERT_EQ(a.into, f->second);
              got = (a.adopt ? 0.0 : got) + (a.from16 >= 0 ? stage.at(a.from16) : left.at(a.from));
            }
          EXPECT_EQ(got, plain.at(f->second)) << "rank " << r << " piece " << c;
        }
      }
    }
  });
  // Not vacuous: the schemes whose own accumulators take their last partial in the last step defer it.
  EXPECT_GT(deferred["allgather"], 0);
  EXPECT_GT(deferred["ring"], 0);
}

// Where the backward writes an accumulator that only leaves (sends_written_once): the work lists' 16-bit gradients
// of that piece point into the staging the step that sends it reads (point to point: the n-th of the rank's
// accumulator sends in that step, in its transfers' order, as issue_step casts them; collectives: the piece-major block
// (piece, owner) of the reduce-scatter's send buffer), at the same offset in the slot as the fp32 accumulator would
// be; every other accumulator stays fp32. Host buffers: nothing is dereferenced.
TEST(CudaPass, SendsWrittenOnceGoIntoTheirStaging) {
  for (int n : {2, 3})
    for (int P : {1, 2})
      for (bool coll : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(P) + " pieces" + (coll ? ", collectives" : ""));
        PlanOptions o;
        o.causal = true, o.gather_pieces = P;
        const Plan p = build_plan(load_topology("complete:" + std::to_string(n)), "allgather", o);
        ASSERT_EQ(p.accumulator_bytes, 2);
        Workload w;
        w.B = 1, w.S = 48L * n * P, w.H = 2, w.Hkv = 2, w.D = 16, w.causal = true;
        const executor::cuda::Geometry g = executor::cuda::make_geometry(p, w);
        const size_t se = g.slot_elems();
        std::vector<char> mem(size_t(64) << 20);
        auto [bufs, local] = executor::cuda::host_buffers(p.ranks, mem, 1 << 16);
        for (auto& b : bufs) {
          b.grad = reinterpret_cast<float*>(mem.data() + (size_t(8) << 20));
          b.grad_send16 = reinterpret_cast<uint16_t*>(mem.data() + (size_t(24) << 20));
          b.rs_send = mem.data() + (size_t(40) << 20);
        }
        const executor::cuda::PassWork pw = executor::cuda::make_pass_work(p, Pass::Bwd, w, g, local, bufs, 1, coll);
        for (int r = 0; r < p.ranks; ++r) {
          const RankSlots rs = plan_slots(p, Pass::Bwd, r, coll);
          std::map<std::pair<int, long>, int> dest;  // (compute step, key) -> staging slot expected
          for (const SendWrittenOnce& f : sends_written_once(rs)) {
            int nth = 0;
            Step scratch;
            for (const auto& tr : step_at(p, f.send_step, scratch, Pass::Bwd).transfers) {
              if (!tr.grad || tr.src != r) continue;
              if (g.key(tr.owner, tr.piece) == f.key) {
                dest[{f.step, f.key}] = coll ? tr.piece * n + tr.owner : nth;
                break;
              }
              ++nth;
            }
            EXPECT_TRUE(pw.sent_as_written[r].count({f.send_step, f.key}));
            EXPECT_TRUE(pw.not_cleared[r].count({f.step, f.slot}));
          }
          EXPECT_EQ(dest.size(), size_t(n - 1)) << "rank " << r;
          const auto* staging = coll ? static_cast<const uint16_t*>(bufs[r].rs_send) : bufs[r].grad_send16;
          const auto* kv = static_cast<const uint16_t*>(bufs[r].kv);
          size_t written = 0, fp32 = 0;
          for (int t = 0; t < pw.num_steps(); ++t) {
            const auto& batch = pw.bwd[r][t];
            for (size_t i = 0; i < batch.pieces.size(); ++i) {
              const size_t at = static_cast<const uint16_t*>(batch.pieces[i].k) - kv;
              long key = -1;
              for (const auto& [k, slot] : rs.steps[t].held)
                if (size_t(slot) == at / se) key = k;
              ASSERT_GE(key, 0);
              const kernels::GradPiece& gp = batch.grads[i];
              const auto d = dest.find({t, key});
              if (d == dest.end()) {
                EXPECT_TRUE(gp.dk && !gp.dk16) << "step " << t << " key " << key;
                ++fp32;
                continue;
              }
              ASSERT_TRUE(gp.dk16 && !gp.dk);
              const size_t to = static_cast<const uint16_t*>(gp.dk16) - staging;
              EXPECT_EQ(to / se, size_t(d->second)) << "step " << t << " key " << key;
              EXPECT_EQ(to % se, at % se);  // the same place in the slot
              EXPECT_EQ(static_cast<const uint16_t*>(gp.dv16) - static_cast<const uint16_t*>(gp.dk16), long(g.half_slot()));
              ++written;
            }
          }
          EXPECT_GT(written, 0u);
          EXPECT_GT(fp32, 0u);  // the own pieces' accumulators (and later pieces') stay fp32
        }
        // fp16: the staging travels as bf16 and the kernel would write fp16 there, so every accumulator stays fp32.
        w.dtype = "fp16";
        const executor::cuda::PassWork pw16 = executor::cuda::make_pass_work(p, Pass::Bwd, w, g, local, bufs, 1, coll);
        for (int r = 0; r < p.ranks; ++r) {
          EXPECT_TRUE(pw16.sent_as_written[r].empty());
          for (const auto& batch : pw16.bwd[r])
            for (const kernels::GradPiece& gp : batch.grads) EXPECT_TRUE(gp.dk && !gp.dk16);
        }
      }
}
