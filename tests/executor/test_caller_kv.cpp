// A framework rank's own K/V read and sent where the framework keeps them (executor/caller_kv.hpp), checked on the
// host against the token positions each buffer must hold: the messages an owner sends from its shard fill a
// receiver's slot exactly as staging the shard into a slot and sending the slot did, and the work lists' own pieces,
// pointed at the shard, read the rows of the positions they name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/caller_kv.hpp"
#include "host_buffers.hpp"
#include "planner/query_moves.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"

using namespace tasp;
using namespace tasp::planner;
using namespace tasp::executor::cuda;

namespace {

struct Case {
  std::string scheme;
  int n;
  bool causal;
  std::vector<long> docs;
  bool moved = false;  // allgather in 2 pieces pruned, rank 0's late chunk's queries moved to rank 1 (query_moves)
};

const std::vector<Case> kCases = {{"zigzag", 2, true, {}},        {"allgather", 3, true, {}},  {"ring", 4, false, {}},
                                  {"hamilton", 4, true, {}},      {"allgather", 2, false, {}},
                                  {"zigzag", 3, true, {50, 13, 33}}, {"allgather", 2, true, {20, 60, 16}},
                                  {"allgather", 2, true, {}, true}};

Plan plan_of(const Case& c, const Workload& w) {
  PlanOptions o;
  o.causal = c.causal;
  if (!c.docs.empty()) o.workload = w;
  if (c.moved) o.workload = w, o.prune_plain = o.move_queries = true, o.gather_pieces = 2;
  return build_plan(load_topology("complete:" + std::to_string(c.n)), c.scheme, o);
}

// The case's rank buffers on the host (host_buffers), moved rows' included.
std::pair<std::vector<RankBuffers>, std::vector<int>> buffers_of(const Plan& p, const Workload& w, std::vector<char>& mem,
                                                                 size_t kv_at) {
  std::vector<int> lens;
  for (const QueryMove& m : p.query_moves) lens.push_back(int(moved_range(p, w.S, m).size()));
  return host_buffers(p.ranks, mem, kv_at, p.query_moves, lens);
}

Workload workload_of(const Case& c) {
  Workload w;
  w.B = 2, w.S = 96, w.H = 2, w.Hkv = 1, w.D = 4, w.causal = c.causal, w.docs = c.docs;
  return w;
}

// A case's workload, plan and geometry.
struct CaseGeometry {
  Workload w;
  Plan p;
  Geometry g;
  explicit CaseGeometry(const Case& c) : w(workload_of(c)), p(plan_of(c, w)), g(make_geometry(p, w)) {}
};

// Global positions of a rank's shard rows, in shard order.
std::vector<long> shard_positions(const Geometry& g, int r) {
  std::vector<long> pos;
  for (const Range& q : g.qranges[r])
    for (long t = q.begin; t < q.end; ++t) pos.push_back(t);
  return pos;
}

// The value a framework's K (half 0) or V (half 1) holds at batch b, global position p, element e.
double value(int half, size_t b, long p, size_t e) { return half * 1e6 + double(b) * 1e5 + double(p) * 10 + double(e); }

}  // namespace

TEST(CallerKv, OwnMessagesFillTheSlotAsStagingDid) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.scheme + " on " + std::to_string(c.n));
    const Geometry g = CaseGeometry(c).g;
    const size_t row = size_t(g.row_elems);
    for (int owner = 0; owner < c.n; ++owner) {
      const std::vector<long> pos = shard_positions(g, owner);
      std::vector<double> shard[2];
      for (int half = 0; half < 2; ++half)
        for (size_t b = 0; b < size_t(g.B); ++b)
          for (size_t t = 0; t < pos.size(); ++t)
            for (size_t e = 0; e < row; ++e) shard[half].push_back(value(half, b, pos[t], e));
      for (int piece = 0; piece < g.P; ++piece) {
        std::vector<double> slot(g.slot_elems(), -1);
        for (const OwnMessage& m : own_messages(g, owner, piece))
          for (size_t i = 0; i < m.count; ++i) {
            ASSERT_EQ(slot.at(m.slot_off + i), -1) << "written twice";
            slot.at(m.slot_off + i) = shard[m.half].at(m.shard_off + i);
          }
        // The slot's rows hold the piece's positions in its range order, batch by batch, K then V.
        std::vector<long> ppos;
        for (const Range& rg : g.pranges[g.key(owner, piece)])
          for (long t = rg.begin; t < rg.end; ++t) ppos.push_back(t);
        for (int half = 0; half < 2; ++half)
          for (size_t b = 0; b < size_t(g.B); ++b)
            for (size_t t = 0; t < ppos.size(); ++t)
              for (size_t e = 0; e < row; ++e)
                ASSERT_EQ(slot[half * g.half_slot() + (b * g.max_piece + t) * row + e], value(half, b, ppos[t], e))
                    << "owner " << owner << " piece " << piece << " half " << half << " batch " << b << " token " << t;
      }
    }
  }
}

TEST(CallerKv, OwnPiecesReadTheFrameworksRows) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.scheme + " on " + std::to_string(c.n));
    const CaseGeometry x(c);
    const Plan& p = x.p;
    const Geometry& g = x.g;
    std::vector<char> mem(1 << 20);
    const auto [bufs, local] = buffers_of(p, x.w, mem, 1 << 16);
    ASSERT_EQ(c.moved, !p.query_moves.empty());
    for (int r = 0; r < p.ranks; ++r) {
      PassWork fwd = make_pass_work(p, Pass::Fwd, x.w, g, local, bufs), bwd = make_pass_work(p, Pass::Bwd, x.w, g, local, bufs);
      const auto refs = own_refs(fwd, bwd, r, g, r, bufs[r].kv);
      ASSERT_TRUE(refs.has_value()) << "rank " << r;
      // Own pieces in the lists before: each one has a ref, and after pointing them at a framework's K (V beside it),
      // its rows are the positions it names; the others keep their slots.
      const auto* k = reinterpret_cast<const uint16_t*>(mem.data() + (1 << 18));
      const auto* v = reinterpret_cast<const uint16_t*>(mem.data() + (1 << 19));
      const auto kv = reinterpret_cast<uintptr_t>(bufs[r].kv);
      size_t own = 0;
      auto count = [&](const std::vector<kernels::KvPiece>& pieces) {
        for (const kernels::KvPiece& kp : pieces) {
          const auto a = reinterpret_cast<uintptr_t>(kp.k);
          own += a >= kv && a < kv + 2 * g.slot_elems() * g.P;
        }
      };
      for (const auto& batch : fwd.fwd[r]) count(batch.pieces);
      for (const auto& batch : bwd.bwd[r]) count(batch.pieces);
      // and in the moved rows' launches (rank 1 computes rank 0's late rows on its own pieces)
      const size_t rows_own = own;
      for (const auto& batch : fwd.mfwd[r]) count(batch.pieces);
      for (const auto& batch : bwd.mbwd[r]) count(batch.pieces);
      EXPECT_EQ(own > rows_own, c.moved && r == p.query_moves[0].at);
      EXPECT_EQ(refs->size(), own);
      EXPECT_GT(own, 0u);
      const PassWork fwd0 = fwd, bwd0 = bwd;
      point_own_refs(fwd, bwd, r, *refs, k, v);
      const std::vector<long> pos = shard_positions(g, r);
      for (const OwnRef& o : *refs) {
        const auto& fl = o.moved ? fwd.mfwd[r] : fwd.fwd[r];
        const auto& bl = o.moved ? bwd.mbwd[r] : bwd.bwd[r];
        const kernels::KvPiece& kp = o.bwd ? bl.at(o.step).pieces.at(o.index) : fl.at(o.step).pieces.at(o.index);
        const long first = long(static_cast<const uint16_t*>(kp.k) - k);
        ASSERT_EQ(first % g.row_elems, 0);
        EXPECT_EQ(static_cast<const uint16_t*>(kp.v) - v, first);
        EXPECT_EQ(kp.batch_stride, g.qrows[r] * g.row_elems);
        for (long j = 0; j < kp.len; ++j) ASSERT_EQ(pos.at(size_t(first / g.row_elems + j)), kp.pos0 + j);
      }
      // And back at the slots (a call whose tensors the kernels cannot read in place): the lists as made.
      point_own_refs_at_slots(fwd, bwd, r, g, *refs, bufs[r].kv);
      auto same = [](const std::vector<kernels::KvPiece>& a, const std::vector<kernels::KvPiece>& b) {
        for (size_t i = 0; i < a.size(); ++i)
          if (a[i].k != b[i].k || a[i].v != b[i].v || a[i].batch_stride != b[i].batch_stride) return false;
        return a.size() == b.size();
      };
      for (size_t t = 0; t < fwd.fwd[r].size(); ++t) EXPECT_TRUE(same(fwd.fwd[r][t].pieces, fwd0.fwd[r][t].pieces)) << t;
      for (size_t t = 0; t < bwd.bwd[r].size(); ++t) EXPECT_TRUE(same(bwd.bwd[r][t].pieces, bwd0.bwd[r][t].pieces)) << t;
      for (size_t t = 0; t < fwd.mfwd[r].size(); ++t) EXPECT_TRUE(same(fwd.mfwd[r][t].pieces, fwd0.mfwd[r][t].pieces)) << t;
      for (size_t t = 0; t < bwd.mbwd[r].size(); ++t) EXPECT_TRUE(same(bwd.mbwd[r][t].pieces, bwd0.mbwd[r][t].pieces)) << t;
    }
  }
}
