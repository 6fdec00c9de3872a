#include "simulator/compute_model.hpp"

#include <algorithm>
#include <cmath>

#include "planner/layout.hpp"

namespace tasp::simulator {

double shard_tokens(const planner::Plan& p, const planner::Workload& w, int rank) {
  double t = 0;
  for (const auto& r : planner::shard_ranges(p.layout, p.ranks, w.S, rank)) t += double(r.size());
  return t;
}

double piece_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece) {
  double tokens = 0;
  for (const auto& r : planner::piece_ranges(p.layout, p.ranks, p.pieces_per_rank, w.S, owner, piece))
    tokens += double(r.size());
  return tokens * w.B * w.Hkv * w.D * 2.0 * w.dtype_bytes;
}

double grad_bytes(const planner::Plan& p, const planner::Workload& w, int owner, int piece) {
  return piece_bytes(p, w, owner, piece) / w.dtype_bytes * p.accumulator_bytes;
}

BlockWork block_work(const planner::Plan& p, const planner::Workload& w, int rank, int owner, int piece) {
  BlockWork bw;
  const double per_pair = 4.0 * w.B * w.H * w.D;
  const auto q = planner::shard_ranges(p.layout, p.ranks, w.S, rank);
  const auto k = planner::piece_ranges(p.layout, p.ranks, p.pieces_per_rank, w.S, owner, piece);
  for (const auto& kr : k) bw.lk += double(kr.size());
  for (const auto& qr : q) {
    bw.lq += double(qr.size());
    for (const auto& kr : k) {
      const double all = double(qr.size()) * double(kr.size());
      const double pairs = planner::visible_pairs(qr, kr, w.causal);
      (pairs == all ? bw.full_flops : bw.causal_flops) += pairs * per_pair;
    }
  }
  return bw;
}

namespace {

// Kernel time over a step's work list at the given peak rates, with the forward's size curves and waves.
double math_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, double full_tflops,
               double causal_tflops, double flops_factor) {
  const ComputeRate& r = cp.rate(w.D);
  // Tiles of tile_m query rows per (batch, head) run in waves over the SMs; a part-filled last wave idles.
  const double ctas = double(w.B) * w.H * std::ceil(sum.lq / cp.tile_rows(w.D));
  const double waves = std::ceil(ctas / cp.sms);
  const double fill = ctas / (waves * cp.sms);
  const double inv = 1 / std::max(1.0, sum.lq) + 1 / std::max(1.0, sum.lk);
  const double hf = r.full_half_len >= 0 ? r.full_half_len : cp.half_len;
  const double hc = r.causal_half_len >= 0 ? r.causal_half_len : cp.half_len;
  return flops_factor * (sum.full_flops / full_tflops * (1 + hf * inv) + sum.causal_flops / causal_tflops * (1 + hc * inv)) *
         1e-6 / fill;
}

}  // namespace

double backward_fixed_us(const ComputeProfile& cp, const planner::Workload& w, double lq, bool first) {
  // dO (2-byte) and O (4-byte, the forward's fp32 output) read once, D written.
  const double pre = first ? cp.small_launch_us + double(w.B) * w.H * lq * (w.D * 6.0 + 4) / (cp.hbm_gbps * 1e3) : 0;
  return cp.launch_us + pre;
}

double backward_compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool first) {
  if (sum.flops() <= 0) return 0;
  const BwdRate br = cp.bwd_rate(w.D);
  return backward_fixed_us(cp, w, sum.lq, first) + math_us(cp, w, sum, br.full_tflops, br.causal_tflops, kBackwardFlopsFactor);
}

double accumulate_us(const ComputeProfile& cp, double bytes) {
  return bytes > 0 ? cp.small_launch_us + 3 * bytes / (cp.hbm_gbps * 1e3) : 0;
}

double compute_us(const ComputeProfile& cp, const planner::Workload& w, const BlockWork& sum, bool merge) {
  if (sum.flops() <= 0) return 0;
  const ComputeRate& r = cp.rate(w.D);
  const double m = math_us(cp, w, sum, r.full_tflops, r.causal_tflops, 1.0);
  // The merge into the running fp32 out/LSE is fused into the kernel's epilogue: it reads the running
  // values and writes them back, hidden under the math unless the block is too small to cover it.
  const double merge_us = merge ? 2.0 * w.B * w.H * sum.lq * (w.D + 1) * 4.0 / (cp.hbm_gbps * 1e3) : 0;
  return cp.launch_us + std::max(m, merge_us);
}

}  // namespace tasp::simulator
