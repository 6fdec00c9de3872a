#include "executor/cuda_heads.hpp"

#include <algorithm>

namespace tasp::executor::cuda {

using kernels::BlockCopy;
using kernels::Elem;
using planner::Range;

long part_chunk(long rows, int u) { return (rows + u - 1) / u; }

Part token_part(long rows, int u, int slot) {
  const long c = part_chunk(rows, u), b = std::min(rows, slot * c);
  return {b, std::min(rows, b + c) - b};
}

namespace {

// Shard-order position of the first token of each query range of rank r.
long shard_pos(const Geometry& g, int r, long token) {
  long pos = 0;
  for (const Range& q : g.qranges[r]) {
    if (token >= q.begin && token < q.end) return pos + token - q.begin;
    pos += q.size();
  }
  return -1;
}

Elem elem_of(const planner::Workload& w) { return w.dtype == "fp16" ? Elem::FP16 : Elem::BF16; }

template <class T>
T* at(T* p, size_t elems, size_t bytes_per) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(p) + elems * bytes_per);
}
template <class T>
const T* at(const T* p, size_t elems, size_t bytes_per) {
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(p) + elems * bytes_per);
}

// A block of `rows` rows of `width`, B batches, between two sides given as (address, type, batch stride,
// row stride).
struct Side {
  const void* p;
  Elem t;
  long batch, row;
};
BlockCopy block(const Side& s, void* dst, Elem dt, long dbatch, long drow, int B, long rows, long width, bool add = false) {
  BlockCopy c;
  c.src = s.p, c.src_type = s.t, c.src_batch_stride = s.batch, c.src_row_stride = s.row;
  c.dst = dst, c.dst_type = dt, c.dst_batch_stride = dbatch, c.dst_row_stride = drow;
  c.batches = B, c.rows = rows, c.width = width, c.add = add;
  return c;
}
}  // namespace

std::vector<PieceRun> piece_runs(const Geometry& g, int r, Part part) {
  std::vector<PieceRun> runs;
  for (int c = 0; c < g.P; ++c) {
    long off = 0;
    for (const Range& rg : g.pranges[g.key(r, c)]) {
      const long p0 = shard_pos(g, r, rg.begin);
      const long lo = std::max(p0, part.begin), hi = std::min(p0 + rg.size(), part.begin + part.size);
      if (hi > lo) runs.push_back({c, off + lo - p0, lo - part.begin, hi - lo});
      off += rg.size();
    }
  }
  return runs;
}

std::vector<ShardCopy> shard_copies(const Geometry& g, int r) {
  std::vector<ShardCopy> out;
  const size_t row = size_t(g.row_elems);
  for (const PieceRun& run : piece_runs(g, r, {0, g.qrows[r]}))
    out.push_back({run.piece, run.piece_off * row, size_t(g.max_piece) * row, run.part_off * row, size_t(g.qrows[r]) * row,
                   run.len * row, size_t(g.B)});
  return out;
}

std::vector<Range> shard_rows_tokens(const Geometry& g, int r, long begin, long end) {
  std::vector<Range> out;
  long pos = 0;
  for (const Range& q : g.qranges[r]) {
    const long lo = std::max(begin, pos), hi = std::min(end, pos + q.size());
    if (hi > lo) out.push_back({q.begin + lo - pos, q.begin + hi - pos});
    pos += q.size();
  }
  return out;
}

LayerSide layer_side(const planner::Workload& whole, int groups, int group) {
  LayerSide s;
  s.q_row = long(whole.H) * whole.D, s.kv_row = long(whole.Hkv) * whole.D;
  s.q_head0 = group * (whole.H / groups), s.kv_head0 = group * (whole.Hkv / groups);
  return s;
}

size_t a2a_max_count(const Geometry& g, const planner::Workload& w, int u) {
  const planner::HeadSlice h = planner::head_slice(u, w, 0);
  const long rows = *std::max_element(g.qrows.begin(), g.qrows.end());  // shards may differ by a token
  return size_t(w.B) * part_chunk(rows, u) * (h.q_heads + 2 * h.kv_heads) * w.D;
}

HeadExchange make_head_exchange(const Geometry& g, const planner::Workload& w, int u, int r, int slot,
                                const RankBuffers& b, const SeqBuffers& sb, const std::map<long, int>& grad_final,
                                const LayerSide& side) {
  const Elem e16 = elem_of(w);
  const int B = w.B;
  const long D = w.D, rows = g.qrows[r], chunk = part_chunk(rows, u);
  const planner::HeadSlice mine = planner::head_slice(u, w, slot);
  const long hq = long(mine.q_heads) * D, hkv = long(mine.kv_heads) * D;  // a slot's row widths
  const long HD = side.q_row, HkvD = side.kv_row;  // the layer's rows: every head of every group
  const size_t se = g.slot_elems();
  // Per peer: [Q or O or dQ: B x chunk x hq][K or dK: B x chunk x hkv][V or dV: alike].
  const size_t n_q = size_t(B) * chunk * hq, n_kv = size_t(B) * chunk * hkv;
  HeadExchange x;
  for (A2a* a : {&x.fwd_in, &x.fwd_out, &x.bwd_in, &x.bwd_out}) a->unpack.resize(1);
  auto finish = [&](A2a& a, size_t count) {
    a.count = count;
    a.bytes = double(u - 1) * count * 2;
  };
  const Part own = token_part(rows, u, slot);
  for (int j = 0; j < u; ++j) {
    const planner::HeadSlice peer = planner::head_slice(u, w, j);
    const Part theirs = token_part(rows, u, j);
    const long qc = (side.q_head0 + peer.q_begin) * D, kc = (side.kv_head0 + peer.kv_begin) * D;  // peer j's columns
    void* send_q = at(sb.send, j * (n_q + 2 * n_kv), 2);
    const void* recv_q = at(static_cast<const void*>(sb.recv), j * (n_q + 2 * n_kv), 2);
    void* send_o = at(sb.send, j * n_q, 2);
    const void* recv_o = at(static_cast<const void*>(sb.recv), j * n_q, 2);
    // In (forward Q, K, V; backward dO): my part's rows of peer j's heads go to j; from j come its part's rows
    // of my heads.
    if (own.size > 0) {
      x.fwd_in.pack.push_back(block({at(sb.q, qc, 2), e16, chunk * HD, HD}, send_q, e16, chunk * hq, hq, B, own.size, hq));
      for (int kv = 0; kv < 2; ++kv)
        x.fwd_in.pack.push_back(block({at(kv ? sb.v : sb.k, kc, 2), e16, chunk * HkvD, HkvD},
                                      at(send_q, n_q + kv * n_kv, 2), e16, chunk * hkv, hkv, B, own.size, hkv));
      if (!grad_final.empty())  // a forward alone has no dO
        x.bwd_in.pack.push_back(block({at(sb.dout, qc, 2), e16, chunk * HD, HD}, send_o, e16, chunk * hq, hq, B, own.size, hq));
    }
    if (theirs.size > 0) {
      x.fwd_in.unpack[0].push_back(block({recv_q, e16, chunk * hq, hq}, at(b.q, theirs.begin * hq, 2), e16, rows * hq, hq, B, theirs.size, hq));
      for (const auto& run : piece_runs(g, r, theirs))
        for (int kv = 0; kv < 2; ++kv)
          x.fwd_in.unpack[0].push_back(block({at(recv_q, n_q + kv * n_kv + run.part_off * hkv, 2), e16, chunk * hkv, hkv},
                                          at(b.kv, se * run.piece + kv * g.half_slot() + run.piece_off * hkv, 2), e16,
                                          g.max_piece * hkv, hkv, B, run.len, hkv));
      if (!grad_final.empty())
        x.bwd_in.unpack[0].push_back(block({recv_o, e16, chunk * hq, hq}, at(b.dout, theirs.begin * hq, 2), e16, rows * hq, hq, B, theirs.size, hq));
    }
    // Out (forward O; backward dQ, dK, dV): peer j's part's rows of my heads go to j; from j come my part's
    // rows of j's heads.
    if (theirs.size > 0) {
      x.fwd_out.pack.push_back(block({b.out + theirs.begin * hq, Elem::FP32, rows * hq, hq}, send_o, e16, chunk * hq, hq, B, theirs.size, hq));
      if (!grad_final.empty()) {
        // dQ and dK/dV as the backward left them: 16-bit where it wrote them so (RankBuffers::dq16, grad16).
        const Side dq = b.dq16 ? Side{at(static_cast<const void*>(b.dq16), theirs.begin * hq, 2), e16, rows * hq, hq}
                               : Side{b.dq + theirs.begin * hq, Elem::FP32, rows * hq, hq};
        x.bwd_out.pack.push_back(block(dq, send_q, e16, chunk * hq, hq, B, theirs.size, hq));
        for (const auto& run : piece_runs(g, r, theirs))
          for (int kv = 0; kv < 2; ++kv) {
            const size_t acc = se * grad_final.at(g.key(r, run.piece)) + kv * g.half_slot() + run.piece_off * hkv;
            const Side from = b.grad16 ? Side{b.grad16 + acc, e16, g.max_piece * hkv, hkv}
                                       : Side{b.grad + acc, Elem::FP32, g.max_piece * hkv, hkv};
            x.bwd_out.pack.push_back(block(from, at(send_q, n_q + kv * n_kv + run.part_off * hkv, 2), e16, chunk * hkv, hkv, B,
                                           run.len, hkv));
          }
      }
    }
    if (own.size > 0) {
      x.fwd_out.unpack[0].push_back(block({recv_o, e16, chunk * hq, hq}, at(sb.out, qc, 2), e16, chunk * HD, HD, B, own.size, hq));
      if (!grad_final.empty()) {
        x.bwd_out.unpack[0].push_back(block({recv_q, e16, chunk * hq, hq}, at(sb.dq, qc, 2), e16,
                                            chunk * HD, HD, B, own.size, hq));
        // Replicated K/V heads arrive once per replica: the first writes, the others add, a wave per replica.
        const size_t replica = size_t(j % peer.kv_replicas);
        if (x.bwd_out.unpack.size() <= replica) x.bwd_out.unpack.resize(replica + 1);
        for (int kv = 0; kv < 2; ++kv)
          x.bwd_out.unpack[replica].push_back(block({at(recv_q, n_q + kv * n_kv, 2), e16, chunk * hkv, hkv},
                                           at(kv ? sb.dv : sb.dk, kc, 2), e16,
                                           chunk * HkvD, HkvD, B, own.size, hkv, replica > 0));
      }
    }
  }
  finish(x.fwd_in, n_q + 2 * n_kv), finish(x.fwd_out, n_q), finish(x.bwd_in, n_q), finish(x.bwd_out, n_q + 2 * n_kv);
  return x;
}

}  // namespace tasp::executor::cuda
