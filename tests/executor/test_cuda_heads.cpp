// The cuda backend's head-parallel all-to-alls, replayed on the host: every copy list applied to host
// buffers and the exchange done by copying send buffers into receive buffers. Checks that each GPU's head
// layout gets exactly its heads of its group's tokens (Q rows, K/V piece slots) and that the results travel
// back to the token parts, with replicated K/V heads' gradients summed. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "executor/cuda_heads.hpp"
#include "planner/query_moves.hpp"
#include "planner/schemes/schemes.hpp"
#include "planner/topology.hpp"

using namespace tasp;
using namespace tasp::planner;
using tasp::kernels::BlockCopy;
using tasp::kernels::Elem;

namespace {

float get(const void* p, Elem t, int64_t i) {
  if (t == Elem::FP32) return static_cast<const float*>(p)[i];
  const uint32_t u = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;  // bf16 (the test's values are exact)
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
void put(void* p, Elem t, int64_t i, float v) {
  if (t == Elem::FP32) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint32_t u;
  std::memcpy(&u, &v, 4);
  static_cast<uint16_t*>(p)[i] = uint16_t(u >> 16);
}
// The copies of one launch run concurrently: no two may write the same bytes.
void expect_disjoint_writes(const std::vector<BlockCopy>& list) {
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const BlockCopy& c : list) {
    const uintptr_t e = c.dst_type == Elem::FP32 ? 4 : 2, base = reinterpret_cast<uintptr_t>(c.dst);
    for (int b = 0; b < c.batches; ++b)
      for (int64_t r = 0; r < c.rows; ++r) {
        const uintptr_t a = base + (b * c.dst_batch_stride + r * c.dst_row_stride) * e;
        spans.push_back({a, a + c.width * e});
      }
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].second, spans[i].first) << "two copies of one launch write the same bytes";
}

void apply(const std::vector<BlockCopy>& list) {
  ASSERT_NO_THROW(kernels::check_copies(list));
  expect_disjoint_writes(list);
  for (const BlockCopy& c : list)
    for (int b = 0; b < c.batches; ++b)
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t x = 0; x < c.width; ++x) {
          const int64_t d = b * c.dst_batch_stride + r * c.dst_row_stride + x;
          const float v = get(c.src, c.src_type, b * c.src_batch_stride + r * c.src_row_stride + x);
          put(c.dst, c.dst_type, d, c.add ? get(c.dst, c.dst_type, d) + v : v);
        }
}

// Values exact in bf16 (small integers) that still tell tokens, heads and elements apart.
float code(int b, long token, int head, int d) { return float((b * 5 + token * 7 + head * 3 + d) % 23 + 1); }

// Visits rank r's head layout for slice hs: every query row element (index into a [B][rows][heads][D] buffer)
// and every K-half element of its own pieces' slots (index into the slot buffer), with batch, token, the
// global head and the element.
template <class Fq, class Fkv>
void each_head_element(const executor::cuda::Geometry& g, const Workload& w, int r, const HeadSlice& hs, size_t se,
                       Fq on_q, Fkv on_kv) {
  for (int b = 0; b < w.B; ++b) {
    long row = 0;
    for (const Range& rg : g.qranges[r])
      for (long t = rg.begin; t < rg.end; ++t, ++row)
        for (int h = 0; h < hs.q_heads; ++h)
          for (int d = 0; d < w.D; ++d) on_q(((b * g.qrows[r] + row) * hs.q_heads + h) * w.D + d, b, t, hs.q_begin + h, d);
    for (int c = 0; c < g.P; ++c) {
      long j = 0;
      for (const Range& rg : g.pranges[g.key(r, c)])
        for (long t = rg.begin; t < rg.end; ++t, ++j)
          for (int h = 0; h < hs.kv_heads; ++h)
            for (int d = 0; d < w.D; ++d)
              on_kv(int64_t(se * c + (b * g.max_piece + j) * g.row_elems + h * w.D + d), b, t, hs.kv_begin + h, d);
    }
  }
}

// Visits the rows of GPU rank * u + slot's token part: batch, row in the part, token.
template <class F>
void each_part_row(const executor::cuda::Geometry& g, const Workload& w, int r, int u, int slot, F f) {
  const executor::cuda::Part part = executor::cuda::token_part(g.qrows[r], u, slot);
  for (int b = 0; b < w.B; ++b) {
    long i = 0;
    for (const Range& rg : executor::cuda::shard_rows_tokens(g, r, part.begin, part.begin + part.size))
      for (long t = rg.begin; t < rg.end; ++t, ++i) f(b, i, t);
  }
}

struct Gpu {
  std::vector<std::vector<char>> mem;
  void* take(size_t bytes) {
    mem.emplace_back(bytes + 64, 0);
    auto p = reinterpret_cast<uintptr_t>(mem.back().data());
    return reinterpret_cast<void*>((p + 63) / 64 * 64);
  }
  std::vector<executor::cuda::RankBuffers> b;  // per head group
  executor::cuda::SeqBuffers s;
};

// The exchanges of a plan cut into `groups` head groups: each group's copy lists replayed one group after another
// on the same layer-side tensors, as the cuda backend runs them.
void check_exchange(const Plan& p, const Workload& w, int groups) {
  using namespace executor::cuda;
  const int u = p.ulysses, n = p.gpus();
  ASSERT_EQ(check_head_groups(u, groups, w), "");
  const Workload wg = head_group_workload(groups, w), sw = slot_workload(u, wg);
  const Geometry g = make_geometry(p, sw);
  const size_t se = g.slot_elems(), count = a2a_max_count(g, wg, u);
  const long HD = long(w.H) * w.D, HkvD = long(w.Hkv) * w.D;
  std::vector<Gpu> gpu(n);
  std::vector<std::vector<HeadExchange>> hx(groups, std::vector<HeadExchange>(n));
  for (int x = 0; x < n; ++x) {
    const int r = x / u, slot = x % u;
    const long rows = g.qrows[r], chunk = part_chunk(rows, u);
    const size_t nq = size_t(w.B) * rows * sw.H * w.D;
    Gpu& G = gpu[x];
    const size_t cq = size_t(w.B) * chunk * HD, ck = size_t(w.B) * chunk * HkvD;
    G.s.q = G.take(cq * 2), G.s.k = G.take(ck * 2), G.s.v = G.take(ck * 2), G.s.dout = G.take(cq * 2), G.s.out = G.take(cq * 2);
    G.s.dq = G.take(cq * 2), G.s.dk = G.take(ck * 2), G.s.dv = G.take(ck * 2);
    G.s.send = G.take(u * count * 2), G.s.recv = G.take(u * count * 2);
    std::map<long, int> final_slot;
    for (int c = 0; c < g.P; ++c) final_slot[g.key(r, c)] = c;
    G.b.resize(groups);
    for (int grp = 0; grp < groups; ++grp) {
      RankBuffers& b = G.b[grp];
      b.q = G.take(nq * 2), b.dout = G.take(nq * 2), b.kv = G.take(se * g.P * 2);
      b.out = static_cast<float*>(G.take(nq * 4)), b.dq = static_cast<float*>(G.take(nq * 4));
      b.grad = static_cast<float*>(G.take(se * g.P * 4));
      hx[grp][x] = make_head_exchange(g, wg, u, r, slot, b, G.s, final_slot, layer_side(w, groups, grp));
      for (const A2a* a : {&hx[grp][x].fwd_in, &hx[grp][x].fwd_out, &hx[grp][x].bwd_in, &hx[grp][x].bwd_out})
        ASSERT_LE(a->count, count) << "an exchange larger than the staging buffers";
    }
    // The layer's side: this GPU's tokens with every head (V = K + 1, dO = Q + 2).
    each_part_row(g, w, r, u, slot, [&](int b, long i, long t) {
          for (int d = 0; d < w.D; ++d) {
            for (int h = 0; h < w.H; ++h) {
              put(G.s.q, Elem::BF16, (b * chunk + i) * HD + h * w.D + d, code(b, t, h, d));
              put(G.s.dout, Elem::BF16, (b * chunk + i) * HD + h * w.D + d, code(b, t, h, d) + 2);
            }
            for (int h = 0; h < w.Hkv; ++h) {
              put(G.s.k, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d, code(b, t, h, d));
              put(G.s.v, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d, code(b, t, h, d) + 1);
            }
            // What a previous step left on the layer's side: every result must be overwritten, not added to.
            for (int h = 0; h < w.H; ++h) put(G.s.dq, Elem::BF16, (b * chunk + i) * HD + h * w.D + d, 99);
            for (int h = 0; h < w.Hkv; ++h)
              put(G.s.dk, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d, 99), put(G.s.dv, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d, 99);
          }
    });
  }
  // One all-to-all of one head group: pack everywhere, move slot j's block of each group member's send buffer, unpack.
  auto exchange = [&](int grp, A2a HeadExchange::*which) {
    for (int x = 0; x < n; ++x) apply((hx[grp][x].*which).pack);
    for (int x = 0; x < n; ++x)
      for (int j = 0; j < u; ++j) {
        const int peer = x / u * u + j;
        const size_t c = (hx[grp][x].*which).count;
        std::memcpy(static_cast<uint16_t*>(gpu[peer].s.recv) + (x % u) * c, static_cast<uint16_t*>(gpu[x].s.send) + j * c, c * 2);
      }
    for (int x = 0; x < n; ++x)
      for (const auto& wave : (hx[grp][x].*which).unpack) apply(wave);
  };
  // Head layout of group grp: Q and dO rows in shard order, K/V pieces in slots 0..P-1, of this slot's heads only.
  auto head_slice_of = [&](int grp, int slot) {
    HeadSlice hs = head_slice(u, wg, slot);
    const LayerSide side = layer_side(w, groups, grp);
    hs.q_begin += side.q_head0, hs.kv_begin += side.kv_head0;
    return hs;
  };
  for (int grp = 0; grp < groups; ++grp) {
    exchange(grp, &HeadExchange::fwd_in);
    exchange(grp, &HeadExchange::bwd_in);
    for (int x = 0; x < n; ++x) {
      const RankBuffers& b = gpu[x].b[grp];
      each_head_element(
          g, w, x / u, head_slice_of(grp, x % u), se,
          [&](int64_t i, int bb, long t, int h, int d) {
            ASSERT_EQ(get(b.q, Elem::BF16, i), code(bb, t, h, d)) << "GPU " << x << " group " << grp << " token " << t;
            ASSERT_EQ(get(b.dout, Elem::BF16, i), code(bb, t, h, d) + 2);
          },
          [&](int64_t i, int bb, long t, int h, int d) {
            ASSERT_EQ(get(b.kv, Elem::BF16, i), code(bb, t, h, d)) << "GPU " << x << " group " << grp << " token " << t;
            ASSERT_EQ(get(b.kv, Elem::BF16, i + g.half_slot()), code(bb, t, h, d) + 1);
          });
    }
  }
  // Results in the head layout: O = dQ - 3 = the code; dK/dV of each replica = the code times its weight (1 or 2
  // by slot parity: sums of up to 8 replicas stay exact in bf16).
  auto weight = [](int slot) { return float(slot % 2 + 1); };
  for (int grp = 0; grp < groups; ++grp)
    for (int x = 0; x < n; ++x) {
      RankBuffers& b = gpu[x].b[grp];
      each_head_element(
          g, w, x / u, head_slice_of(grp, x % u), se,
          [&](int64_t i, int bb, long t, int h, int d) { b.out[i] = code(bb, t, h, d), b.dq[i] = code(bb, t, h, d) + 3; },
          [&](int64_t i, int bb, long t, int h, int d) {
            b.grad[i] = code(bb, t, h, d) * weight(x % u), b.grad[i + g.half_slot()] = -code(bb, t, h, d) * weight(x % u);
          });
    }
  for (int grp = 0; grp < groups; ++grp) {
    exchange(grp, &HeadExchange::fwd_out);
    exchange(grp, &HeadExchange::bwd_out);
  }
  for (int x = 0; x < n; ++x) {
    const int r = x / u;
    const long rows = g.qrows[r], chunk = part_chunk(rows, u);
    const Gpu& G = gpu[x];
    each_part_row(g, w, r, u, x % u, [&](int b, long i, long t) {
          for (int d = 0; d < w.D; ++d) {
            for (int h = 0; h < w.H; ++h) {
              ASSERT_EQ(get(G.s.out, Elem::BF16, (b * chunk + i) * HD + h * w.D + d), code(b, t, h, d)) << "GPU " << x;
              ASSERT_EQ(get(G.s.dq, Elem::BF16, (b * chunk + i) * HD + h * w.D + d), code(b, t, h, d) + 3);
            }
            for (int h = 0; h < w.Hkv; ++h) {
              float replicas = 0;  // the slots holding K/V head h (in its group), each weighted
              const int grp = h / (w.Hkv / groups);
              for (int s = 0; s < u; ++s) {
                const HeadSlice o = head_slice_of(grp, s);
                if (h >= o.kv_begin && h < o.kv_begin + o.kv_heads) replicas += weight(s);
              }
              ASSERT_EQ(get(G.s.dk, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d), code(b, t, h, d) * replicas)
                  << "GPU " << x << " head " << h;
              ASSERT_EQ(get(G.s.dv, Elem::BF16, (b * chunk + i) * HkvD + h * w.D + d), -code(b, t, h, d) * replicas);
            }
          }
    });
  }
}

}  // namespace

TEST(CudaHeads, ExchangesPutEveryHeadAndTokenInPlace) {
  struct Case {
    std::string topology, scheme, inner;
    int ulysses, H, Hkv;
    bool causal;
    long S;
  };
  std::map<int, int> checked;  // head groups -> cases checked with them
  const std::vector<Case> cases{
      {"complete:2", "ulysses", "", 0, 4, 2, false, 40},
      {"complete:3", "ulysses", "", 0, 6, 3, true, 20},       // 20 rows over 3 parts: 7, 7, 6
      {"complete:4", "ulysses", "", 0, 8, 2, true, 48},       // K/V heads replicated on 2 slots each
      {"complete:8", "ulysses", "", 0, 8, 1, false, 64},      // one K/V head on every slot
      {"cluster:2x4", "usp", "hamilton", 0, 8, 4, true, 144}, // zigzag pieces span token parts
      {"cluster:2x4", "usp", "ring", 0, 4, 2, false, 40},
      {"cluster:2x4", "usp", "ring", 0, 4, 2, false, 43},      // groups' shards of 21 and 22 rows
      {"cluster:2x4", "usp", "hamilton", 0, 8, 2, true, 149},  // uneven zigzag chunks and pieces
      {"complete:8", "usp", "hamilton", 2, 4, 4, true, 8 * 3 * 2 * 4},
  };
  for (const auto& c : cases) {
    PlanOptions o;
    o.causal = c.causal, o.ulysses = c.ulysses;
    if (!c.inner.empty()) o.inner = c.inner;
    const Plan p = build_plan(load_topology(c.topology), c.scheme, o);
    Workload w;
    w.B = 2, w.S = c.S, w.H = c.H, w.Hkv = c.Hkv, w.D = 8, w.causal = c.causal;
    SCOPED_TRACE(c.topology + " " + c.scheme + " " + c.inner + " S=" + std::to_string(c.S));
    ASSERT_EQ(check_split(split_of(p, w.S)), "");
    for (int groups : {1, 2})
      if (check_head_groups(p.ulysses, groups, w).empty()) {
        SCOPED_TRACE("head groups " + std::to_string(groups));
        check_exchange(p, w, groups);
        ++checked[groups];
      }
  }
  EXPECT_EQ(checked[1], int(cases.size()));
  EXPECT_GE(checked[2], 5) << "too few cases split into two head groups";
}

// A forward alone (no backward buffers: dO, dQ, dK, dV null) has forward copy lists only, and each passes the
// descriptor check the cuda backend applies before launching (a forward-only Ulysses once failed it on dO).
TEST(CudaHeads, ForwardAloneNeedsNoBackwardBuffers) {
  using namespace executor::cuda;
  PlanOptions o;
  o.causal = true;
  const Plan p = build_plan(load_topology("complete:4"), "ulysses", o);
  Workload w;
  w.B = 2, w.S = 48, w.H = 8, w.Hkv = 2, w.D = 8, w.causal = true;
  const Workload sw = slot_workload(p.ulysses, w);
  const Geometry g = make_geometry(p, sw);
  const size_t count = a2a_max_count(g, w, p.ulysses), big = size_t(w.B) * w.S * w.H * w.D * 4;
  for (int x = 0; x < p.gpus(); ++x) {
    Gpu G;
    SeqBuffers& s = G.s;
    s.q = G.take(big), s.k = G.take(big), s.v = G.take(big), s.out = G.take(big);
    s.send = G.take(p.ulysses * count * 2), s.recv = G.take(p.ulysses * count * 2);
    RankBuffers b;
    b.q = G.take(big), b.kv = G.take(big * g.P), b.out = static_cast<float*>(G.take(big));
    const HeadExchange hx = make_head_exchange(g, w, p.ulysses, x / p.ulysses, x % p.ulysses, b, s, {}, layer_side(w, 1, 0));
    EXPECT_TRUE(hx.bwd_in.pack.empty() && hx.bwd_in.unpack[0].empty() && hx.bwd_out.pack.empty());
    for (const A2a* a : {&hx.fwd_in, &hx.fwd_out}) {
      EXPECT_FALSE(a->pack.empty());
      EXPECT_NO_THROW(kernels::check_copies(a->pack));
      for (const auto& wave : a->unpack) EXPECT_NO_THROW(kernels::check_copies(wave));
    }
  }
}

// Collective exchanges: allgather's gather and reduce-scatter steps are recognised (and nothing else is), and K/V
// slots laid out by owner put every piece at owner * P + piece, the forward's kept ones too.
TEST(CudaExchange, AllGatherAndReduceScatterSteps) {
  using executor::cuda::Exchange;
  using executor::cuda::exchange_of;
  for (int n : {2, 3, 5}) {
    PlanOptions o;
    o.causal = true;
    Plan p = build_plan(load_topology("complete:" + std::to_string(n)), "allgather", o);
    ASSERT_TRUE(p.backward.keeps_kv);
    EXPECT_EQ(exchange_of(plan_step(p, 0, Pass::Fwd), n, 1), Exchange::AllGather);
    EXPECT_EQ(exchange_of(plan_step(p, 1, Pass::Fwd), n, 1), Exchange::PointToPoint);  // no transfers
    EXPECT_EQ(exchange_of(plan_step(p, 0, Pass::Bwd), n, 1), Exchange::PointToPoint);
    EXPECT_EQ(exchange_of(plan_step(p, 1, Pass::Bwd), n, 1), Exchange::ReduceScatter);
    o.keep_kv = false;
    const Plan q = build_plan(load_topology("complete:" + std::to_string(n)), "allgather", o);
    EXPECT_EQ(exchange_of(plan_step(q, 0, Pass::Bwd), n, 1), Exchange::AllGather);
    EXPECT_EQ(exchange_of(plan_step(q, 2, Pass::Bwd), n, 1), Exchange::ReduceScatter);
    // A ring step, and a gather with one transfer missing or repeated, are point to point.
    const Plan ring = build_plan(load_topology("complete:" + std::to_string(n)), "ring", o);
    EXPECT_EQ(exchange_of(plan_step(ring, 0, Pass::Fwd), n, 1), n == 2 ? Exchange::AllGather : Exchange::PointToPoint);
    Step missing = plan_step(p, 0, Pass::Fwd);
    missing.transfers.pop_back();
    EXPECT_EQ(exchange_of(missing, n, 1), Exchange::PointToPoint);
    Step twice = plan_step(p, 0, Pass::Fwd);
    twice.transfers.back() = twice.transfers.front();
    EXPECT_EQ(exchange_of(twice, n, 1), Exchange::PointToPoint);
    for (int r = 0; r < n; ++r) {
      const RankSlots f = plan_slots(p, Pass::Fwd, r, true), b = plan_slots(p, Pass::Bwd, r, true);
      EXPECT_EQ(f.kv_slots, n);
      for (int o = 0; o < n; ++o) {
        EXPECT_EQ(f.held_final.at(o), o) << "rank " << r << " owner " << o;  // kept, by owner
        EXPECT_EQ(b.steps[0].held.at(o), o);
      }
      EXPECT_EQ(f.steps[0].held.at(r), r);
    }
  }
}

// A rank runner's copies between the caller's shard (tokens in shard order) and the rank's own pieces' slots, replayed
// on the host: K/V go in so that every slot row holds its piece's token, dK/dV come back so that every shard row gets
// its token's; for zigzag pieces spanning both chunks, several pieces per rank, uneven lengths and batches.
TEST(CudaHeads, ShardCopiesPutEveryOwnTokenInItsSlotAndBack) {
  struct Case {
    std::string topology, scheme;
    bool causal;
    long S;
  };
  for (const Case& c : {Case{"complete:2", "zigzag", true, 40}, Case{"complete:3", "zigzag", true, 61},
                        Case{"complete:4", "hamilton", true, 98}, Case{"complete:3", "ring", false, 31},
                        Case{"complete:4", "allgather", false, 64}}) {
    SCOPED_TRACE(c.topology + " " + c.scheme);
    PlanOptions o;
    o.causal = c.causal;
    const Plan p = build_plan(load_topology(c.topology), c.scheme, o);
    Workload w;
    w.B = 2, w.S = c.S, w.H = 2, w.Hkv = 1, w.D = 8, w.causal = c.causal;
    const executor::cuda::Geometry g = executor::cuda::make_geometry(p, w);
    for (int r = 0; r < p.ranks; ++r) {
      const long rows = g.qrows[r], width = g.row_elems;
      std::vector<long> shard_tokens;
      for (const Range& q : g.qranges[r])
        for (long t = q.begin; t < q.end; ++t) shard_tokens.push_back(t);
      auto value = [&](int b, long t, long e) { return double(b * 100000 + t * 100 + e); };
      std::vector<double> shard(size_t(w.B) * rows * width), slots(g.half_slot() * g.P, -1);
      for (int b = 0; b < w.B; ++b)
        for (long i = 0; i < rows; ++i)
          for (long e = 0; e < width; ++e) shard[(size_t(b) * rows + i) * width + e] = value(b, shard_tokens[i], e);
      const auto copies = executor::cuda::shard_copies(g, r);
      for (const auto& cp : copies)  // in: shard -> slot (one half; slots laid out half after half here)
        for (size_t h = 0; h < cp.height; ++h)
          for (size_t x = 0; x < cp.width; ++x)
            slots[g.half_slot() * cp.piece + cp.slot_off + h * cp.slot_pitch + x] = shard[cp.shard_off + h * cp.shard_pitch + x];
      for (int piece = 0; piece < g.P; ++piece) {
        long j = 0;
        for (const Range& rg : g.pranges[g.key(r, piece)])
          for (long t = rg.begin; t < rg.end; ++t, ++j)
            for (int b = 0; b < w.B; ++b)
              for (long e = 0; e < width; ++e)
                ASSERT_EQ(slots[g.half_slot() * piece + (size_t(b) * g.max_piece + j) * width + e], value(b, t, e))
                    << "rank " << r << " piece " << piece << " row " << j;
      }
      std::vector<double> back(shard.size(), -1);
      for (const auto& cp : copies)  // out: slot -> shard
        for (size_t h = 0; h < cp.height; ++h)
          for (size_t x = 0; x < cp.width; ++x)
            back[cp.shard_off + h * cp.shard_pitch + x] = slots[g.half_slot() * cp.piece + cp.slot_off + h * cp.slot_pitch + x];
      EXPECT_EQ(back, shard) << "rank " << r << ": every shard row back from its slot";
    }
  }
}

// A rank runner points each call's work lists at the caller's `saved` slots (rebase_kv): every K/V piece of both
// passes moves with the slots, by the same offset, and nothing else does; moved back, the lists are as made. The same
// for the launches over query rows moved to GPU 1 (planner/query_moves.hpp), which read its own pieces.
TEST(CudaPass, RebasedWorkListsFollowTheKvSlots) {
  using namespace executor::cuda;
  for (bool move : {false, true}) {
    SCOPED_TRACE(move ? "queries moved" : "allgather");
    Workload w;
    w.B = 2, w.S = 64, w.H = 4, w.Hkv = 2, w.D = 8, w.causal = true;
    PlanOptions o;
    o.causal = true;
    if (move) o.workload = w, o.prune_plain = o.move_queries = true, o.gather_pieces = 2;
    const Plan p = build_plan(load_topology("complete:2"), "allgather", o);
    ASSERT_TRUE(p.has_backward && p.backward.keeps_kv);
    ASSERT_EQ(p.query_moves.size(), size_t(move));
    const Geometry g = make_geometry(p, w);
    const size_t kv_bytes = g.slot_elems() * 2 * 4;  // (up to four slots of 16-bit K/V)
    Gpu G;
    std::vector<RankBuffers> bufs(2);
    for (RankBuffers& b : bufs) {
      b.q = G.take(4096), b.dout = G.take(4096), b.kv = G.take(kv_bytes), b.out = static_cast<float*>(G.take(8192));
      b.lse = static_cast<float*>(G.take(1024)), b.dsum = static_cast<float*>(G.take(1024));
      b.dq = static_cast<float*>(G.take(8192)), b.dq_accum = static_cast<float*>(G.take(1 << 16));
      b.grad = static_cast<float*>(G.take(g.slot_elems() * 4 * 4));
    }
    if (move) {
      const int len = int(moved_range(p, w.S, p.query_moves[0]).size());
      for (int r = 0; r < 2; ++r) {
        RankBuffers::MovedRows& mv = bufs[r].moved;
        mv.move = 0, mv.owner = r == p.query_moves[0].owner, mv.len = len, mv.send = mv.recv = G.take(8192);
        if (!mv.owner) mv.q = mv.in = G.take(8192), mv.out = mv.lse = mv.dq_accum = static_cast<float*>(G.take(1 << 16));
      }
    }
    PassWork fwd = make_pass_work(p, planner::Pass::Fwd, w, g, {0, 1}, bufs), bwd = make_pass_work(p, planner::Pass::Bwd, w, g, {0, 1}, bufs);
    const PassWork fwd0 = fwd, bwd0 = bwd;
    // Every list of a pass's GPU: its own rows' launches, then the moved rows'.
    const auto lists = [](const PassWork& pw, int gpu) {
      std::vector<const std::vector<kernels::KvPiece>*> l;
      if (pw.pass == planner::Pass::Bwd) {
        for (const auto& b : pw.bwd[gpu]) l.push_back(&b.pieces);
        for (const auto& b : pw.mbwd[gpu]) l.push_back(&b.pieces);
      } else {
        for (const auto& b : pw.fwd[gpu]) l.push_back(&b.pieces);
        for (const auto& b : pw.mfwd[gpu]) l.push_back(&b.pieces);
      }
      return l;
    };
    char* saved = static_cast<char*>(G.take(kv_bytes));
    const auto in = [](const void* a, const void* base, size_t n) {
      return a >= base && static_cast<const char*>(a) < static_cast<const char*>(base) + n;
    };
    for (PassWork* pw : {&fwd, &bwd}) rebase_kv(*pw, 1, bufs[1].kv, saved, kv_bytes);
    int moved = 0, moved_rows = 0;
    for (auto [pw, pw0] : {std::pair{&fwd, &fwd0}, std::pair{&bwd, &bwd0}}) {
      for (int gpu = 0; gpu < 2; ++gpu) {
        const auto now_lists = lists(*pw, gpu), was_lists = lists(*pw0, gpu);
        ASSERT_EQ(now_lists.size(), was_lists.size());
        const size_t own_lists = size_t(pw->num_steps());
        for (size_t t = 0; t < now_lists.size(); ++t) {
          const auto &now = *now_lists[t], &was = *was_lists[t];
          ASSERT_EQ(now.size(), was.size());
          for (size_t i = 0; i < now.size(); ++i)
            for (auto [a, b] : {std::pair{now[i].k, was[i].k}, std::pair{now[i].v, was[i].v}}) {
              if (gpu == 0 || !in(b, bufs[1].kv, kv_bytes)) {  // GPU 0's lists, and anything outside the slots: as made
                EXPECT_EQ(a, b);
                continue;
              }
              EXPECT_EQ(static_cast<const char*>(a) - saved, static_cast<const char*>(b) - static_cast<const char*>(bufs[1].kv));
              ++(t < own_lists ? moved : moved_rows);  // (own rows' lists first)
            }
        }
        if (pw == &bwd) {  // the accumulators stay where they were
          for (size_t t = 0; t < pw->bwd[gpu].size(); ++t)
            for (size_t i = 0; i < pw->bwd[gpu][t].grads.size(); ++i)
              EXPECT_EQ(pw->bwd[gpu][t].grads[i].dk, pw0->bwd[gpu][t].grads[i].dk);
        }
      }
    }
    EXPECT_GT(moved, 4);  // both passes' pieces of GPU 1, K and V
    EXPECT_EQ(moved_rows > 0, move);
    for (PassWork* pw : {&fwd, &bwd}) rebase_kv(*pw, 1, saved, bufs[1].kv, kv_bytes);
    for (auto [pw, pw0] : {std::pair{&fwd, &fwd0}, std::pair{&bwd, &bwd0}}) {
      const auto now_lists = lists(*pw, 1), was_lists = lists(*pw0, 1);
      for (size_t t = 0; t < now_lists.size(); ++t)
        for (size_t i = 0; i < now_lists[t]->size(); ++i) {
          EXPECT_EQ((*now_lists[t])[i].k, (*was_lists[t])[i].k);
          EXPECT_EQ((*now_lists[t])[i].v, (*was_lists[t])[i].v);
        }
    }
  }
}

// A head-parallel rank runner makes each exchange's device lists once and refills them every call with the copies
// bound to that call's tensors: the lists' lengths and waves must not depend on the addresses.
TEST(CudaHeads, CopyListsKeepTheirShapeWhateverTheAddresses) {
  using namespace executor::cuda;
  PlanOptions o;
  o.causal = true;
  for (const char* scheme : {"ulysses", "usp"}) {
    SCOPED_TRACE(scheme);
    PlanOptions po = o;
    if (std::string(scheme) == "usp") po.ulysses = 2, po.inner = "ring";
    const Plan p = build_plan(load_topology(std::string(scheme) == "usp" ? "complete:4" : "complete:2"), scheme, po);
    Workload w;
    w.B = 2, w.S = 64, w.H = 8, w.Hkv = 2, w.D = 8, w.causal = true;
    const Workload sw = slot_workload(p.ulysses, w);
    const Geometry g = make_geometry(p, sw);
    const size_t count = a2a_max_count(g, w, p.ulysses), big = size_t(w.B) * w.S * w.H * w.D * 4;
    std::vector<std::vector<size_t>> shapes;
    for (int call = 0; call < 2; ++call) {
      Gpu G;
      if (call) G.take(4096);  // other addresses the second time
      SeqBuffers s;
      s.q = G.take(big), s.k = G.take(big), s.v = G.take(big), s.out = G.take(big), s.dout = G.take(big);
      s.dq = G.take(big), s.dk = G.take(big), s.dv = G.take(big);
      s.send = G.take(p.ulysses * count * 2), s.recv = G.take(p.ulysses * count * 2);
      RankBuffers b;
      b.q = G.take(big), b.kv = G.take(big * 4), b.out = static_cast<float*>(G.take(big)), b.dout = G.take(big);
      b.dq = static_cast<float*>(G.take(big)), b.grad = static_cast<float*>(G.take(big * 4));
      std::map<long, int> fin;
      for (int c = 0; c < g.P; ++c) fin[g.key(0, c)] = c;
      const HeadExchange hx = make_head_exchange(g, w, p.ulysses, 0, 1, b, s, fin, layer_side(w, 1, 0));
      std::vector<size_t> shape;
      for (const A2a* a : {&hx.fwd_in, &hx.fwd_out, &hx.bwd_in, &hx.bwd_out}) {
        shape.push_back(a->pack.size());
        shape.push_back(a->unpack.size());
        for (const auto& wave : a->unpack) shape.push_back(wave.size());
        shape.push_back(a->count);
      }
      shapes.push_back(shape);
    }
    EXPECT_EQ(shapes[0], shapes[1]);
    EXPECT_GT(shapes[0][0], 0u);
  }
}
