#include "simulator/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/bwd_tail.hpp"
#include "planner/layout.hpp"
#include "planner/mask.hpp"
#include "planner/slot_plan.hpp"

namespace tasp::simulator {

double shard_tokens(const planner::Plan& p, const planner::Workload& w, int rank) {
  double t = 0;
  for (const auto& r : planner::shard_ranges(planner::split_of(p, w.S), rank)) t += double(r.size());
  return t;
}

double piece_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece) {
  double tokens = 0;
  for (const auto& r : planner::piece_ranges(planner::split_of(p, w.S), owner, piece))
    tokens += double(r.size());
  return tokens * w.B * w.Hkv * w.D * 2.0 * w.dtype_bytes;
}

double grad_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece) {
  return piece_bytes(p, w, owner, piece) / w.dtype_bytes * p.accumulator_bytes;
}

BlockWork masked_work(const planner::Workload& w, const planner::Mask& m, const std::vector<planner::Range>& q,
                      const std::vector<planner::Range>& k) {
  BlockWork bw;
  const double per_pair = 4.0 * w.B * w.H * w.D;
  for (const auto& kr : k) {
    bw.lk += double(kr.size());
    long first = kr.end, last = kr.begin - 1;  // the keys some query sees: the backward's key tiles
    for (const auto& qr : q) {
      const planner::Range seen = planner::seen_keys(m, qr, kr);
      if (seen.size() > 0) first = std::min(first, seen.begin), last = std::max(last, seen.end - 1);
    }
    if (last >= first) bw.key_tiles += std::ceil(double(last + 1 - first) / kBackwardKeyTile);
  }
  // Query runs inside one document (the kernels' items); a block's size curve acts on its queries and on the
  // keys a query sees on average (a window's band is as short as the window, whatever the piece's length).
  for (const auto& qr : q) {
    bw.lq += double(qr.size());
    for (const auto& seg : planner::split_at_docs(m, qr))
      for (const auto& kr : k) {
        const double pairs = planner::visible_pairs(m, seg, kr);
        if (pairs <= 0) continue;
        const double all = double(seg.size()) * double(kr.size());
        const double f = pairs * per_pair, inv = 1 / double(seg.size()) + double(seg.size()) / pairs;
        if (pairs == all) bw.full_flops += f, bw.full_inv += f * inv;
        else bw.causal_flops += f, bw.causal_inv += f * inv;
      }
  }
  return bw;
}

BlockWork block_work(const planner::Plan& p, const planner::Workload& w, int rank, int owner, int piece, const planner::Mask* mask) {
  return block_work(p, w, rank, owner, piece, 1, mask);
}

namespace {

// A head-parallel rank's zigzag shard is its GPUs' chunks (planner/layout.hpp, Split::sub): the same tokens as its
// two chunks of 2n, whose shapes the blocks keep (the profile's size curves were fitted on them; 2U small blocks would
// charge the size curve U times over for one walk: Ulysses on 2 GPUs, medium, 4% slower).
planner::Split block_split(const planner::Plan& p, const planner::Workload& w) {
  planner::Split split = planner::split_of(p, w.S);
  if (split.layout == planner::Layout::Zigzag) split.sub = 1;
  return split;
}

}  // namespace

BlockWork block_work(const planner::Plan& p, const planner::Workload& w, int rank, int owner, int piece, int count,
                     const planner::Mask* mask) {
  return block_work(p, w, planner::shard_ranges(block_split(p, w), rank), owner, piece, count, mask);
}

BlockWork block_work(const planner::Plan& p, const planner::Workload& w, const std::vector<planner::Range>& q, int owner,
                     int piece, int count, const planner::Mask* mask) {
  BlockWork bw;
  const double per_pair = 4.0 * w.B * w.H * w.D;
  const planner::Split split = block_split(p, w);
  // Pieces [piece, piece + count) of one owner in one launch: the kernels walk them as one run of keys a chunk (pieces
  // are consecutive parts of each chunk), so the size curves act on their union, not on each piece.
  std::vector<planner::Range> k = planner::piece_ranges(split, owner, piece);
  if (count > 1) {  // the pieces' slices of each chunk joined where they touch (not across chunks: a chunk's own blocks)
    for (int c = 1; c < count; ++c)
      for (const planner::Range& x : planner::piece_ranges(split, owner, piece + c)) k.push_back(x);
    std::sort(k.begin(), k.end(), [](const planner::Range& a, const planner::Range& b) { return a.begin < b.begin; });
    const auto chunks = planner::shard_ranges(split, owner);
    auto chunk_of = [&](const planner::Range& x) {
      for (size_t h = 0; h < chunks.size(); ++h)
        if (x.begin >= chunks[h].begin && x.begin < chunks[h].end) return h;
      return chunks.size();
    };
    std::vector<planner::Range> joined;
    for (const planner::Range& x : k)
      if (!joined.empty() && joined.back().end == x.begin && chunk_of(joined.back()) == chunk_of(x)) joined.back().end = x.end;
      else joined.push_back(x);
    k = std::move(joined);
  }
  if (w.windowed() || w.packed()) return masked_work(w, mask ? *mask : planner::make_mask(w), q, k);
  long last_q = -1;  // the last query position: a causal key after it is seen by no query
  for (const auto& qr : q)
    if (qr.size() > 0) last_q = std::max(last_q, long(qr.end) - 1);
  for (const auto& kr : k) {
    bw.lk += double(kr.size());
    const double seen = w.causal ? std::clamp(double(last_q + 1 - long(kr.begin)), 0.0, double(kr.size())) : double(kr.size());
    bw.key_tiles += std::ceil(seen / kBackwardKeyTile);
  }
  for (const auto& qr : q) {
    bw.lq += double(qr.size());
    for (const auto& kr : k) {
      const double all = double(qr.size()) * double(kr.size());
      const double pairs = planner::visible_pairs(qr, kr, w.causal);
      if (pairs <= 0) continue;
      const double f = pairs * per_pair, inv = 1 / double(qr.size()) + 1 / double(kr.size());
      if (pairs == all) bw.full_flops += f, bw.full_inv += f * inv;
      else bw.causal_flops += f, bw.causal_inv += f * inv;
    }
  }
  return bw;
}

BlockWork whole_block(const planner::Workload& w, double lq, double lk, bool causal) {
  BlockWork b;
  b.lq = lq, b.lk = lk;
  const double per_pair = 4.0 * w.B * w.H * w.D, inv = 1 / std::max(1.0, lq) + 1 / std::max(1.0, lk);
  if (causal) {
    b.causal_flops = planner::visible_pairs({0, long(lq)}, {long(lq - lk), long(lq)}, true) * per_pair;
    b.causal_inv = b.causal_flops * inv;
  } else {
    b.full_flops = lq * lk * per_pair;
    b.full_inv = b.full_flops * inv;
  }
  return b;
}

namespace {

// Kernel time over a step's work list at the given peak rates and size curves (half lengths), in waves.
double math_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, double full_tflops,
               double causal_tflops, double hf, double hc, double flops_factor, bool backward) {
  return flops_factor * ((sum.full_flops + hf * sum.full_inv) / full_tflops + (sum.causal_flops + hc * sum.causal_inv) / causal_tflops) *
         1e-6 / launch_fill(cp, w, sum, backward);
}

}  // namespace

double launch_fill(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool backward) {
  const double tiles = backward ? (sum.key_tiles > 0 ? sum.key_tiles : std::ceil(sum.lk / kBackwardKeyTile))
                                : std::ceil(sum.lq / cp.tile_rows(w.D));
  const double ctas = double(w.B) * w.H * std::max(1.0, tiles) * (backward ? backward_column_parts(w.D) : 1);
  const double whole = ctas / (std::ceil(ctas / cp.sms) * cp.sms);
  if (!backward) return whole;
  // A CTA's visits: the query rows its keys see (the pairs of a head over its key tiles of 128) in tiles.
  const double visits = sum.flops() / (4.0 * w.B * w.H * w.D) / (std::max(1.0, tiles) * kBackwardKeyTile) /
                        kernels::bwd::visit_rows(w.D);
  return whole * backward_tail_gain(ctas, visits, cp.sms);
}

double backward_tail_gain(double ctas, double visits, double slots) {
  namespace bt = kernels::bwd;
  const int v = int(std::lround(visits));
  if (ctas < 1 || slots < 1 || v < 2 * bt::kMinPartVisits) return 1;
  // Whole waves, then the last one's r CTAs in p parts each: ceil(r p / slots) rounds of the longest part.
  const double waves = std::ceil(ctas / slots), r = ctas - (waves - 1) * slots, cta = v + bt::kCtaCost;
  const double before = waves * cta;
  double after = before;
  for (int length : bt::kPartLengths) {
    const int p = bt::parts_of(v, length);
    if (p < 2 || r * p > 3 * slots) continue;
    const double part = std::ceil(double(v) / p) + bt::kCtaCost + bt::kPartCost;
    after = std::min(after, (waves - 1) * cta + std::ceil(r * p / slots) * part);
  }
  return after > 0.99 * before ? 1 : before / after;
}

double backward_fixed_us(const ComputeProfile& cp, const planner::Workload& w, double lq, bool first) {
  // dO (2-byte) and O (4-byte, the forward's fp32 output) read once, D written.
  const double dq_bytes = double(w.B) * w.H * lq * w.D * 4;
  const double pre = first ? 2 * cp.small_launch_us + double(w.B) * w.H * lq * (w.D * 6.0 + 4) / (cp.hbm_gbps * 1e3) +
                                 dq_bytes / (cp.elementwise_gbps * 1e3)
                           : 0;
  return cp.launch_us + pre;
}

double backward_finish_us(const ComputeProfile& cp, const planner::Workload& w, double lq, bool dq16) {
  // The scratch read and an fp32 dq read and written (`tasp run`, calibration's --accumulate), or with `dq16` (a
  // head-parallel pass, a training framework's rank) the scratch read and a 16-bit dq written.
  const double bytes = dq16 ? 4.0 + w.dtype_bytes : 3 * 4.0;
  return 2 * cp.small_launch_us + bytes * double(w.B) * w.H * lq * w.D / (cp.elementwise_gbps * 1e3);
}

double backward_compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool first) {
  if (sum.flops() <= 0) return 0;
  const BwdRate br = cp.bwd_rate(w.D);
  return backward_fixed_us(cp, w, sum.lq, first) + math_us(cp, w, sum, br.full_tflops, br.causal_tflops, br.full_half_len, br.causal_half_len,
                                                           kBackwardFlopsFactor / cp.gqa_fraction(w.D, w.H, w.Hkv, true), true);
}

double backward_alone_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum) {
  return backward_compute_us(cp, w, sum, true) + backward_finish_us(cp, w, sum.lq);
}

double accumulate_us(const ComputeProfile& cp, double bytes) {
  return bytes > 0 ? cp.small_launch_us + 3 * bytes / (cp.hbm_gbps * 1e3) : 0;
}

double compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool merge) {
  if (sum.flops() <= 0) return 0;
  const ComputeRate& r = cp.rate(w.D);
  const double m = math_us(cp, w, sum, r.full_tflops, r.causal_tflops, cp.full_half_len(w.D), cp.causal_half_len(w.D),
                           1 / cp.gqa_fraction(w.D, w.H, w.Hkv, false), false);
  return cp.launch_us + m + (merge ? forward_merge_us(cp, w, sum.lq) : 0);
}

double forward_merge_us(const ComputeProfile& cp, const planner::Workload& w, double lq) {
  // Fused into the kernel's epilogue, yet not hidden by the math: on 2x H200 NVLink (2026-11-27, `tasp run --steps`,
  // allgather in pieces) every merging step ran 20-30 us (B=1 S=8192 H=32) and 75-100 us (B=4 H=24) over the
  // kernel rates, a step of 1/8 of the keys as much as one of all, where the running fp32 out/LSE read and written
  // at the elementwise rate take 34 and 103 us.
  return 2.0 * w.B * w.H * lq * (w.D + 1) * 4.0 / (cp.elementwise_gbps * 1e3);
}

double framework_io_us(const ComputeProfile& cp, const planner::Plan& p, const planner::Workload& w, int rank,
                       planner::Pass pass) {
  const double own = shard_tokens(p, w, rank) * w.B;  // the rank's tokens (its own K/V pieces hold the same)
  const double kv16 = own * w.Hkv * w.D * 2 * w.dtype_bytes;   // its K and V in 16 bits
  if (pass == planner::Pass::Fwd)  // O cast (the own K/V are read and sent where the framework keeps them)
    return cp.small_launch_us + own * w.H * w.D * (4.0 + w.dtype_bytes) / (cp.hbm_gbps * 1e3);
  // dK, dV cast out of their fp32 accumulators. Where the last step adds into (or adopts) a final accumulator, the cast
  // makes that add (planner::final_adds, point to point as the rank path runs) and writes 16 bits where `tasp run`'s
  // add writes 32: less than `tasp run`, in the same launch.
  const auto fused = planner::final_adds(planner::plan_slots(p, planner::Pass::Bwd, rank), rank, p.pieces_per_rank,
                                         p.accumulator_bytes == 2);
  const double f = double(fused.size()) / p.pieces_per_rank, elems = kv16 / w.dtype_bytes;
  return 2.0 * p.pieces_per_rank * (1 - f) * cp.small_launch_us +
         elems * ((1 - f) * (4.0 + w.dtype_bytes) - f * (4.0 - w.dtype_bytes)) / (cp.hbm_gbps * 1e3);
}

}  // namespace tasp::simulator
