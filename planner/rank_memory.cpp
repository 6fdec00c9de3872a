#include "planner/query_moves.hpp"
#include "planner/rank_memory.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "planner/collective.hpp"
#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"
#include "planner/slot_plan.hpp"

namespace tasp::planner {

RankMemory rank_memory(const Plan& p, const Workload& whole, Passes passes, int r, bool collectives) {
  // A head-parallel GPU computes its slot's heads over its group's tokens.
  // Head groups (Plan::head_groups) hold the same buffers between them as one group would.
  const Workload w = p.ulysses > 1 && check_heads(p.ulysses, whole).empty() ? slot_workload(p.ulysses, whole) : whole;
  const int n = p.ranks, P = p.pieces_per_rank;
  long rows = 0, max_piece = 0;
  for (const auto& q : shard_ranges(split_of(p, w.S), r)) rows += q.size();
  // Shards come in few kinds of chunk lengths (chunks differ by a token at most): the largest piece over the
  // kinds, a piece being a slice [len * c / P, len * (c + 1) / P) of each chunk.
  std::set<std::vector<long>> kinds;
  for (int o = 0; o < n; ++o) {
    std::vector<long> lens;
    for (const Range& x : shard_ranges(split_of(p, w.S), o)) lens.push_back(x.size());
    kinds.insert(std::move(lens));
  }
  for (const auto& lens : kinds)
    for (long c = 0; c < P; ++c) {
      long t = 0;
      for (long a : lens) t += a * (c + 1) / P - a * c / P;
      max_piece = std::max(max_piece, t);
    }
  RankMemory m;
  const double qe = double(w.B) * rows * w.H * w.D;
  m.queries = qe * (2 + 4) + double(w.B) * w.H * rows * 4;  // Q (16-bit), out fp32, LSE
  if (passes.bwd) {
    const long tiles = (rows + 63) / 64 + 2;  // the dQ scratch rounds each query range up to 64 rows
    // dO (16-bit), dQ (fp32; a head-parallel GPU's leaves its finish in 16 bits), D, and the dQ scratch, whose rows
    // hold D rounded up to 64 (kernels::dq_accum_tile_floats: 80 and 96 padded to 128; counted at D, `qwen3_4b`'s
    // prediction read 1.65 GiB against 1.84 allocated).
    const int dq_bytes = p.ulysses > 1 ? 2 : 4;
    const long dq_cols = (long(w.D) + 63) / 64 * 64;
    m.queries += qe * (2 + dq_bytes) + double(w.B) * w.H * rows * 4 + double(w.B) * w.H * tiles * 64 * dq_cols * 4;
  }
  // Slots: replayed for plans of a few thousand pieces, else what the schedules hold at most (ring flow: the
  // own pieces, the one being forwarded and the one arriving per ring, and in the backward a fourth accumulator,
  // the owner's own block's, kept for the sum coming home; allgather: every piece).
  collectives = collectives && collectives_apply(p);
  int staged = 0;        // accumulators staged in bf16 at once, out and in
  bool grads16 = false;  // a head-parallel GPU's dK/dV written once each, in 16 bits (executor alloc_rank_buffers)
  if (double(n) * n * P <= 4e6 || !p.compact()) {
    for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
      if (pass == Pass::Bwd && !passes.bwd) continue;
      const RankSlots s = plan_slots(p, pass, r, collectives);
      m.kv_slots = std::max(m.kv_slots, s.kv_slots), m.grad_slots = std::max(m.grad_slots, s.grad_slots);
      if (pass == Pass::Bwd) {
        const auto [sends, recvs] = most_grad_transfers(s);
        staged = std::max(1, sends) + std::max(1, recvs);
        // One CTA writes each key row where the heads are not grouped (kernels::grads16_allowed).
        grads16 = p.ulysses > 1 && w.H == w.Hkv && grads_written_once(s);
      }
    }
  } else {
    const int per = p.schedule == "allgather" ? n : 3;
    m.kv_slots = per * P;
    m.grad_slots = passes.bwd ? (p.schedule == "allgather" ? n : 4) * P : 0;
    staged = 2 * P;
  }
  const double slot = 2.0 * w.B * max_piece * w.Hkv * w.D;  // [K|V] or [dK|dV] elements
  m.kv = m.kv_slots * slot * w.dtype_bytes;
  m.grads = std::max(1, m.grad_slots) * slot * (grads16 ? 2 : 4) * (passes.bwd ? 1 : 0);
  if (passes.bwd) {
    if (p.accumulator_bytes == 2) m.exchange += staged * slot * 2;
    if (collectives) m.exchange += slot * P * (n + 1) * p.accumulator_bytes;
  }
  // Moved query rows (planner/query_moves.hpp): the owner's buffers out and back; at `at` the rows' Q, fp32 out and LSE,
  // what returns, and with the backward dO, LSE and D and the dQ scratch (the executor's alloc_rank_buffers).
  for (const QueryMove& q : p.query_moves) {
    if (q.owner != r && q.at != r) continue;
    const double len = double(moved_range(p, w.S, q).size()), tensor = double(w.B) * len * w.H * w.D, rows_f = double(w.B) * w.H * len * 4;
    const double out = std::max(tensor * w.dtype_bytes, passes.bwd ? tensor * w.dtype_bytes + 2 * rows_f : 0);
    const double back = tensor * w.dtype_bytes + rows_f;
    if (q.owner == r) m.exchange += out + back;
    else m.exchange += back + tensor * w.dtype_bytes + tensor * 4 + rows_f +
                       (passes.bwd ? tensor * w.dtype_bytes + 2 * rows_f + tensor / w.D * ((long(w.D) + 63) / 64 * 64) * 4 : 0);
  }
  if (w.H != whole.H || w.Hkv != whole.Hkv) {
    // The layer's side of the all-to-alls (its token part with every head, 16-bit: Q, K, V, O; dO, dQ, dK, dV
    // with the backward) and the send and receive buffers (u peers x one head group's largest exchange).
    const int u = p.ulysses;
    const double chunk = double((rows + u - 1) / u) * w.B * w.D;
    m.a2a = chunk * (2.0 * whole.H + 2.0 * whole.Hkv) * 2;
    if (passes.bwd) m.a2a += chunk * (2.0 * whole.H + 2.0 * whole.Hkv) * 2;
    m.a2a += 2.0 * u * chunk * (w.H + 2.0 * w.Hkv) * 2 / std::max(1, p.head_groups);
  }
  return m;
}

RankMemory peak_rank_memory(const Plan& p, const Workload& w, Passes passes, bool collectives) {
  RankMemory best;
  for (int r : {0, 1, p.ranks / 2, p.ranks - 1}) {
    if (r < 0 || r >= p.ranks) continue;
    const RankMemory m = rank_memory(p, w, passes, r, collectives);
    if (m.total() > best.total()) best = m;
  }
  return best;
}

}  // namespace tasp::planner
