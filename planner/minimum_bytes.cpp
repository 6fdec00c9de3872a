#include "planner/minimum_bytes.hpp"

#include <algorithm>

namespace tasp::planner {

std::optional<Timeline::PassBytes> minimum_sent_bytes(const Plan& p, const Workload& w, int element_bytes) {
  const int n = p.gpus();
  if (n < 1 || (p.ulysses > 1 && p.ulysses != n)) return std::nullopt;
  const int e = element_bytes > 0 ? element_bytes : w.dtype_bytes, acc_bytes = element_bytes > 0 ? element_bytes : p.accumulator_bytes;
  const double row = double(w.S) / n * w.B * w.D * e;  // one head of a GPU's shard
  Timeline::PassBytes b;
  if (p.ulysses > 1) {
    // Q, K, V, O; dO, dQ, dK, dV. Fewer K/V heads than GPUs: each GPU still needs one (replicated).
    b.fwd = b.bwd = (n - 1.0) / n * row * (2.0 * w.H + 2.0 * std::max(w.Hkv, n));
    return b;
  }
  const double kv = 2.0 * w.Hkv * row, acc = kv / e * acc_bytes;
  if (!p.query_moves.empty() && n == 2) {
    // (2 ranks in zigzag chunks of S/4: the moved chunk's rows; `at`'s rows see the owner's other chunk, half a shard)
    const double rows = double(w.S) / 4 * w.B, tensor = rows * w.H * w.D * e, per_row = rows * w.H * (element_bytes > 0 ? e : 4);
    b.fwd = std::max(tensor + kv / 2, tensor + per_row);
    b.bwd = std::max(tensor + 2 * per_row, tensor + acc / 2);
    return b;
  }
  b.fwd = (n - 1.0) * kv;
  b.bwd = p.has_backward ? (n - 1.0) * (acc + (p.backward.keeps_kv ? 0 : kv)) : 0;
  return b;
}

}  // namespace tasp::planner
