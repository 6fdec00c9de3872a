#include "executor/cuda_pass.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>

#include "planner/collective.hpp"
#include "planner/query_moves.hpp"

namespace tasp::executor::cuda {

using planner::Pass;
using planner::Range;

Geometry make_geometry(const planner::Plan& p, const planner::Workload& w) {
  Geometry g;
  g.n = p.ranks, g.P = p.pieces_per_rank, g.B = w.B;
  g.row_elems = long(w.Hkv) * w.D;
  g.qranges.resize(g.n), g.qrows.assign(g.n, 0);
  g.pranges.resize(size_t(g.n) * g.P), g.ptokens.assign(size_t(g.n) * g.P, 0);
  for (int r = 0; r < g.n; ++r) {
    g.qranges[r] = planner::shard_ranges(planner::split_of(p, w.S), r);
    for (const auto& q : g.qranges[r]) g.qrows[r] += q.size();
    for (int c = 0; c < g.P; ++c) {
      const long k = g.key(r, c);
      g.pranges[k] = planner::piece_ranges(planner::split_of(p, w.S), r, c);
      for (const auto& x : g.pranges[k]) g.ptokens[k] += x.size();
      g.max_piece = std::max(g.max_piece, g.ptokens[k]);
    }
  }
  return g;
}

std::vector<kernels::WorkItem> masked_items(const planner::Workload& w, const planner::Mask& m, const Range& rows, int row0,
                                            int pieces, bool accumulate) {
  // The kernels' window sides: -1 for unbounded, and for sides as long as the sequence (the same thing).
  const auto side = [&](long x) { return x < 0 || x >= w.S ? -1 : int(x); };
  std::vector<kernels::WorkItem> items;
  for (const Range& seg : planner::split_at_docs(m, rows)) {
    kernels::WorkItem it;
    it.q_row0 = row0 + int(seg.begin - rows.begin), it.q_len = int(seg.size()), it.q_pos0 = seg.begin;
    it.piece_begin = 0, it.piece_count = pieces;
    it.causal = w.causal, it.accumulate = accumulate;
    it.k_begin = m.doc_begin(seg.begin), it.k_end = m.doc_end(seg.begin);
    it.window_left = side(w.window_left), it.window_right = w.causal ? -1 : side(w.window_right);
    items.push_back(it);
  }
  return items;
}

size_t dq_tiles(const planner::Mask& m, const std::vector<Range>& qranges, int rows) {
  size_t tiles = 0;
  for (const Range& q : qranges)
    for (const Range& seg : planner::split_at_docs(m, q)) tiles += (seg.size() + rows - 1) / rows;
  return tiles;
}

std::vector<std::pair<int, int>> slots_zeroed_ahead(const planner::RankSlots& rs) {
  std::set<int> used;
  std::vector<std::pair<int, int>> ahead;
  for (size_t t = 0; t < rs.steps.size(); ++t) {
    const planner::StepSlots& s = rs.steps[t];
    if (t > 0)
      for (int slot : s.grad_zero)
        if (!used.count(slot)) ahead.push_back({int(t), slot});
    for (int slot : s.grad_zero) used.insert(slot);
    for (const auto& [k, slot] : s.grad_compute) used.insert(slot);
    for (const auto& [k, slot] : s.grad_send) used.insert(slot);
    for (const auto& [k, slot] : s.grad_recv) used.insert(slot);
    for (const auto& [into, from] : s.grad_add) used.insert(into), used.insert(from);
  }
  return ahead;
}

bool items_cover_rows(const std::vector<kernels::WorkItem>& items, long q_rows) {
  std::vector<std::pair<long, long>> spans;
  for (const kernels::WorkItem& it : items) spans.push_back({it.q_row0, long(it.q_row0) + it.q_len});
  std::sort(spans.begin(), spans.end());
  long end = 0;
  for (const auto& [b, e] : spans) {
    if (b > end) return false;
    end = std::max(end, e);
  }
  return end >= q_rows;
}

MovedLayout moved_layout(const planner::Workload& w, long len) {
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  MovedLayout l;
  l.tensor = size_t(w.B) * len * w.H * w.D * 2;
  l.rows = size_t(w.B) * w.H * len * 4;
  l.lse_at = up(l.tensor);
  l.dsum_at = l.lse_at + up(l.rows);
  return l;
}

Exchange exchange_of(const planner::Step& s, int n, int P, bool per_root) {
  planner::Collective c = planner::collective_of(s, n, P);
  if (c == planner::Collective::None && per_root) c = planner::per_root_of(s, n, P);
  switch (c) {
    case planner::Collective::AllGather: return Exchange::AllGather;
    case planner::Collective::ReduceScatter: return Exchange::ReduceScatter;
    default: return Exchange::PointToPoint;
  }
}

namespace {

// Rank r's accumulators that one launch makes whole and that then only leave (planner::sends_written_once): (compute
// step, key) -> where that launch writes it in 16 bits, the staging its send reads: point to point the n-th of the
// rank's accumulator sends in that step, in its transfers' order (issue_step's), or the reduce-scatter's piece-major
// block (piece, owner). Each one's send and clearing are marked done in `pw` (sent_as_written, not_cleared).
std::map<std::pair<int, long>, uint16_t*> sends_into_staging(PassWork& pw, int gpu, int r, const Geometry& g,
                                                             const RankBuffers& x) {
  std::map<std::pair<int, long>, uint16_t*> to;
  for (const planner::SendWrittenOnce& o : planner::sends_written_once(pw.slots[gpu])) {
    uint16_t* at = nullptr;
    int nth = 0;
    for (const auto& tr : pw.steps[o.send_step].transfers) {
      if (!tr.grad || tr.src != r) continue;
      if (g.key(tr.owner, tr.piece) == o.key) {
        if (pw.exchange[o.send_step] == Exchange::ReduceScatter)
          at = static_cast<uint16_t*>(x.rs_send) + g.slot_elems() * (size_t(tr.piece) * g.n + tr.owner);
        else if (pw.exchange[o.send_step] == Exchange::PointToPoint)
          at = x.grad_send16 + g.slot_elems() * nth;
        break;
      }
      ++nth;
    }
    if (!at) continue;
    to[{o.step, o.key}] = at;
    pw.sent_as_written[gpu].insert({o.send_step, o.key});
    pw.not_cleared[gpu].insert({o.step, o.slot});
  }
  return to;
}

}  // namespace

PassWork make_pass_work(const planner::Plan& p, Pass pass, const planner::Workload& w, const Geometry& g,
                        const std::vector<int>& local, const std::vector<RankBuffers>& bufs, int u, bool collectives,
                        bool per_root) {
  PassWork pw;
  pw.pass = pass;
  pw.accumulator_bytes = p.accumulator_bytes;
  const int steps = p.num_steps(pass), n = g.n;
  pw.steps.resize(steps);
  pw.exchange.assign(steps, Exchange::PointToPoint);
  for (int t = 0; t < steps; ++t) {
    planner::Step scratch;
    pw.steps[t] = planner::step_at(p, t, scratch, pass);
    if (collectives) pw.exchange[t] = exchange_of(pw.steps[t], p.ranks, p.pieces_per_rank, per_root);
  }
  const bool bwd = pass == Pass::Bwd;
  const planner::Mask mask = planner::make_mask(w);
  const double flop_factor = bwd ? 2.5 : 1.0;
  const double acc_bytes = p.accumulator_bytes;  // an accumulator in transit: fp32 or bf16 (K/V: 16-bit)
  // What each rank sends and computes per step, for the timeline (every rank: rank 0 reports them all).
  pw.bytes.assign(n, std::vector<double>(steps, 0));
  pw.flops = pw.bytes;
  for (int t = 0; t < steps; ++t) {
    for (const auto& tr : pw.steps[t].transfers)
      pw.bytes[tr.src][t] += double(g.ptokens[g.key(tr.owner, tr.piece)]) * w.B * g.row_elems * 2 * (tr.grad ? acc_bytes : 2);
    for (const auto& x : pw.steps[t].rows) {
      const planner::QueryMove& m = p.query_moves.at(x.move);
      const MovedLayout l = moved_layout(w, planner::moved_range(p, w.S, m).size());
      pw.bytes[x.back ? m.at : m.owner][t] += double(bwd ? (x.back ? l.bwd_back() : l.bwd_out()) : (x.back ? l.fwd_back() : l.fwd_out()));
    }
    for (const auto& c : pw.steps[t].compute) {
      const std::vector<Range> rows =
          c.move >= 0 ? std::vector<Range>{planner::moved_range(p, w.S, p.query_moves.at(c.move))} : g.qranges[c.rank];
      for (const auto& q : rows)
        for (const auto& k : g.pranges[g.key(c.owner, c.piece)])
          pw.flops[c.rank][t] += 4.0 * flop_factor * planner::visible_pairs(mask, q, k) * w.B * w.H * w.D;
    }
  }
  pw.slots.resize(size_t(n) * u);
  if (bwd) pw.bwd.resize(size_t(n) * u), pw.mbwd.resize(size_t(n) * u);
  else pw.fwd.resize(size_t(n) * u), pw.mfwd.resize(size_t(n) * u);
  pw.moved_steps.assign(size_t(n) * u, {-1, -1});
  pw.query_moves = p.query_moves;
  if (bwd) pw.grad_zero_ahead.resize(size_t(n) * u), pw.sent_as_written.resize(size_t(n) * u), pw.not_cleared.resize(size_t(n) * u);
  for (int gpu : local) {
    const int r = gpu / u;
    pw.slots[gpu] = planner::plan_slots(p, pass, r, collectives);
    // Head-parallel passes keep their local steps off the comm stream (the head groups' all-to-alls queue there).
    if (bwd && u == 1) pw.grad_zero_ahead[gpu] = slots_zeroed_ahead(pw.slots[gpu]);
    const RankBuffers& x = bufs[gpu];
    if (bwd && x.grad16 && !(planner::grads_written_once(pw.slots[gpu]) && kernels::grads16_allowed(w.H, w.Hkv, false)))
      throw std::logic_error("make_pass_work: 16-bit accumulators where a launch does not write each one whole");
    // bf16 accumulators that one launch makes whole and that then only leave: written by the kernel in 16 bits into
    // their staging, where the send reads them (MHA: one writing CTA a key row). The kernel writes the batch's type and
    // the staging travels as bf16 (issue_step's casts, ncclBfloat16), so an fp16 workload keeps the fp32 slot and cast:
    // its fp16 bits read as bf16 were ~1e-19, the peer's share of dK/dV lost (tasp.torch's fp16 check, 2026-11-27).
    const auto written16 = bwd && p.accumulator_bytes == 2 && dtype_of(w) == kernels::DType::BF16 &&
                                   kernels::grads16_allowed(w.H, w.Hkv, false) && !x.grad16
                               ? sends_into_staging(pw, gpu, r, g, x)
                               : std::map<std::pair<int, long>, uint16_t*>{};
    bool first = true;
    for (int t = 0; t < steps; ++t) {
      const planner::StepSlots& s = pw.slots[gpu].steps[t];
      // One item per query range, over every piece the rank computes on in the step; a piece's token
      // ranges are views into its slot (and, backward, into its accumulator's slot).
      std::vector<kernels::KvPiece> pieces;
      std::vector<kernels::GradPiece> grads;
      std::vector<Range> keys;  // the step's key ranges
      // The moved rows' launch (their own Q, out and dQ scratch) gets its pieces apart: `at`'s own.
      std::vector<kernels::KvPiece> mpieces;
      std::vector<kernels::GradPiece> mgrads;
      for (const auto& c : pw.steps[t].compute) {
        if (c.rank != r) continue;
        const long k = g.key(c.owner, c.piece);
        const auto* kv = static_cast<const uint16_t*>(x.kv) + g.slot_elems() * s.held.at(k);
        const size_t acc_at = bwd ? g.slot_elems() * s.grad_compute.at(k) : 0;
        const auto direct = written16.find({t, k});
        uint16_t* const to16 = direct != written16.end() ? direct->second : nullptr;
        const bool moved = c.move >= 0;
        long off = 0;
        for (const Range& rg : g.pranges[k]) {
          kernels::KvPiece kp;
          kp.k = kv + off * g.row_elems;
          kp.v = kv + g.half_slot() + off * g.row_elems;
          kp.len = int(rg.size()), kp.pos0 = rg.begin, kp.batch_stride = g.max_piece * g.row_elems;
          (moved ? mpieces : pieces).push_back(kp);
          if (bwd) {
            const size_t dk = acc_at + off * g.row_elems, dv = dk + g.half_slot();
            kernels::GradPiece gp;
            gp.batch_stride = kp.batch_stride;
            if (x.grad16) gp.dk16 = x.grad16 + dk, gp.dv16 = x.grad16 + dv;
            else if (to16) gp.dk16 = to16 + (dk - acc_at), gp.dv16 = to16 + (dv - acc_at);
            else gp.dk = x.grad + dk, gp.dv = x.grad + dv;
            (moved ? mgrads : grads).push_back(gp);
          }
          off += rg.size();
          if (!moved) keys.push_back(rg);
        }
      }
      {
        const RankBuffers::MovedRows& mv = x.moved;
        if (!mpieces.empty() && (mv.move < 0 || mv.owner || !mv.q))
          throw std::logic_error("make_pass_work: moved rows computed where they have no buffers");
        auto& first_last = pw.moved_steps[gpu];
        const bool first_moved = first_last.first < 0;
        std::vector<kernels::WorkItem> mitems;
        if (!mpieces.empty()) {
          mitems = masked_items(w, mask, planner::moved_range(p, w.S, p.query_moves.at(mv.move)), 0, int(mpieces.size()),
                                !first_moved);
          if (first_moved) first_last.first = t;
          first_last.second = t;
        }
        if (bwd) {
          kernels::AttentionBackwardBatch b;
          b.dtype = dtype_of(w), b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
          if (!mpieces.empty()) {
            const MovedLayout l = moved_layout(w, mv.len);
            b.q = mv.q, b.dout = mv.in, b.q_rows = mv.len;
            b.lse = reinterpret_cast<const float*>(static_cast<const char*>(mv.in) + l.lse_at);
            b.dsum = reinterpret_cast<const float*>(static_cast<const char*>(mv.in) + l.dsum_at);
            b.dq_accum = mv.dq_accum;
          }
          b.items = std::move(mitems), b.pieces = std::move(mpieces), b.grads = std::move(mgrads);
          pw.mbwd[gpu].push_back(std::move(b));
        } else {
          kernels::AttentionBatch b;
          b.dtype = dtype_of(w), b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
          if (!mpieces.empty()) b.q = mv.q, b.q_rows = mv.len, b.out = mv.out, b.lse = mv.lse;
          b.items = std::move(mitems), b.pieces = std::move(mpieces);
          pw.mfwd[gpu].push_back(std::move(b));
        }
      }
      // One item per query range and document in it (the kernels mask by the item's document). A forward
      // item that sees none of the step's keys is left out, except in the launch that writes out/LSE first;
      // the backward keeps every item (its dQ scratch is laid out by the item list, the same in every step).
      std::vector<kernels::WorkItem> items;
      int row = 0;
      for (const Range& rg : g.qranges[r]) {
        for (const kernels::WorkItem& it : masked_items(w, mask, rg, row, int(pieces.size()), !first)) {
          if (!bwd && !first && !mask.plain()) {
            double seen = 0;
            for (const Range& k : keys) seen += planner::visible_pairs(mask, {long(it.q_pos0), long(it.q_pos0) + it.q_len}, k);
            if (seen == 0) continue;
          }
          items.push_back(it);
        }
        row += int(rg.size());
      }
      if (!pieces.empty()) first = false;
      if (bwd) {
        kernels::AttentionBackwardBatch b;
        b.dtype = dtype_of(w), b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
        b.q = x.q, b.dout = x.dout, b.q_rows = int(g.qrows[r]), b.lse = x.lse, b.dsum = x.dsum, b.dq_accum = x.dq_accum;
        b.items = std::move(items), b.pieces = std::move(pieces), b.grads = std::move(grads);
        pw.bwd[gpu].push_back(std::move(b));
      } else {
        kernels::AttentionBatch b;
        b.dtype = dtype_of(w), b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
        b.q = x.q, b.q_rows = int(g.qrows[r]), b.out = x.out, b.lse = x.lse;
        b.items = std::move(items), b.pieces = std::move(pieces);
        pw.fwd[gpu].push_back(std::move(b));
      }
    }
  }
  return pw;
}

void rebase_kv(PassWork& pw, int gpu, const void* from, const void* to, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(from), at = reinterpret_cast<uintptr_t>(to);
  auto move = [&](const void*& p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a >= lo && a < lo + bytes) p = reinterpret_cast<const void*>(at + (a - lo));
  };
  auto pieces = [&](std::vector<kernels::KvPiece>& ps) {
    for (kernels::KvPiece& kp : ps) move(kp.k), move(kp.v);
  };
  if (size_t(gpu) < pw.fwd.size())
    for (auto& b : pw.fwd[gpu]) pieces(b.pieces);
  if (size_t(gpu) < pw.bwd.size())
    for (auto& b : pw.bwd[gpu]) pieces(b.pieces);
  if (size_t(gpu) < pw.mfwd.size())
    for (auto& b : pw.mfwd[gpu]) pieces(b.pieces);
  if (size_t(gpu) < pw.mbwd.size())
    for (auto& b : pw.mbwd[gpu]) pieces(b.pieces);
}

}  // namespace tasp::executor::cuda
