#include "planner/query_moves.hpp"

#include <stdexcept>

#include "planner/mask.hpp"
#include "planner/prune.hpp"

namespace tasp::planner {

Range moved_range(const Plan& p, long S, const QueryMove& m) { return shard_ranges(split_of(p, S), m.owner).at(m.range); }

double rows_transfer_bytes(const Plan& p, const Workload& w, const RowsTransfer& x, Pass pass, int element_bytes) {
  const double rows = double(moved_range(p, w.S, p.query_moves.at(x.move)).size()) * w.B;
  const double e = element_bytes > 0 ? element_bytes : w.dtype_bytes, f = element_bytes > 0 ? element_bytes : 4;
  const double tensor = rows * w.H * w.D * e, per_row = rows * w.H * f;  // Q, O, dO or dQ; LSE or D
  if (pass == Pass::Fwd) return tensor + (x.back ? per_row : 0);
  return tensor + (x.back ? 0 : 2 * per_row);
}

std::string query_moves_error(const Plan& p, long S) {
  if (p.query_moves.empty()) return {};
  if (!p.pruned.any()) return "query_moves: only a plan pruned for its mask (pruned_for) moves queries";
  if (p.ulysses != 1) return "query_moves: head-parallel plans move heads, not query rows";
  const Split split = split_of(p, S);
  const Mask m = plan_mask(p, S);
  for (size_t i = 0; i < p.query_moves.size(); ++i) {
    const QueryMove& q = p.query_moves[i];
    const std::string at = "query_moves[" + std::to_string(i) + "]: ";
    if (q.owner < 0 || q.owner >= p.ranks || q.at < 0 || q.at >= p.ranks) return at + "owner or at out of range";
    if (q.owner == q.at) return at + "moves rank " + std::to_string(q.owner) + "'s rows to itself";
    const std::vector<Range> own = shard_ranges(split, q.owner);
    if (q.range < 0 || q.range >= int(own.size()))
      return at + "range " + std::to_string(q.range) + " is not one of rank " + std::to_string(q.owner) + "'s " +
             std::to_string(own.size()) + " query ranges";
    for (size_t j = 0; j < i; ++j)
      if (p.query_moves[j].owner == q.owner && (p.query_moves[j].range == q.range || p.query_moves[j].at == q.at))
        return at + "moves rank " + std::to_string(q.owner) + "'s rows a second time (one move an owner range and rank)";
    // The owner computes none of `at`'s pieces: its other rows must see none of them.
    for (int r = 0; r < int(own.size()); ++r) {
      if (r == q.range) continue;
      for (int c = 0; c < p.pieces_per_rank; ++c)
        for (const Range& k : piece_ranges(split, q.at, c))
          if (visible_pairs(m, own[r], k) > 0)
            return at + "rank " + std::to_string(q.owner) + "'s range " + std::to_string(r) + " sees rank " +
                   std::to_string(q.at) + "'s piece " + std::to_string(c) + " too: move those rows as well, or none";
    }
  }
  return {};
}

std::string move_queries_refusal(const Plan& p, const Workload& w) {
  if (p.scheme != "allgather") return "moving queries is built for allgather plans (scheme " + p.scheme + ")";
  if (p.ranks != 2 || p.ulysses != 1) return "moving the late chunk's queries is built for 2 ranks";
  if (!w.causal || !make_mask(w).plain()) return "moving the late chunk's queries needs a plain causal mask (no documents, no window)";
  if (p.layout != Layout::Zigzag) return "moving the late chunk's queries needs the zigzag layout";
  if (!p.pieces_by_chunk || p.pieces_per_rank % 2) return "moving the late chunk's queries needs pieces cut by chunk (--prune-plain)";
  if (!p.has_backward || !p.backward.keeps_kv)
    return "moving the late chunk's queries needs a backward that keeps the forward's K/V (and moved queries)";
  return {};
}

void move_late_queries(Plan& p, const Workload& w) {
  if (const std::string e = move_queries_refusal(p, w); !e.empty()) throw std::invalid_argument(e);
  const int P = p.pieces_per_rank, h = P / 2;  // rank 0's early chunk: pieces [0, h)
  p.query_moves = {{0, 1, 1}};
  auto own = [&](int r, int move = -1) {
    std::vector<Compute> c;
    for (int x = 0; x < P; ++x) c.push_back({r, r, x, move});
    return c;
  };
  auto append = [](std::vector<Compute>& to, const std::vector<Compute>& from) { to.insert(to.end(), from.begin(), from.end()); };
  // Rank 1's blocks on rank 0's early pieces [a, b); those pieces leaving (forward: K/V to rank 1; backward: their
  // dK/dV home).
  auto on_early = [](Step& s, int a, int b) {
    for (int j = a; j < b; ++j) s.compute.push_back({1, 0, j, -1});
  };
  auto early_go = [](Step& s, int a, int b, bool grad) {
    for (int j = a; j < b; ++j) s.transfers.push_back(grad ? Transfer{1, 0, 0, j, true} : Transfer{0, 1, 0, j, false});
  };
  // In 2 pieces, for a medium both directions share (host memory): the fewest steps. In 4 or more, for fabrics whose
  // two directions run apart (sockets): what comes back crosses what goes out.
  const bool cross = P > 2;
  std::vector<Step> f(cross ? 4 : 3), b(cross ? 4 : 3);
  // Forward, both: Q of c3 leaves first, beside both ranks' own blocks; the moved rows' blocks next.
  f[0].rows = {{0, false}};
  f[0].compute = own(0);
  append(f[0].compute, own(1));
  f[1].compute = own(1, 0);
  if (!cross) {
    // Rank 0's early piece out beside the moved rows' blocks, the partial out back beside rank 1's blocks on it.
    // Backward: dO (with LSE and D) out beside rank 1's blocks on rank 0's piece; its dK/dV home beside the moved
    // rows' blocks and rank 0's own; the moved rows' dQ back beside rank 1's own blocks. Rank 0's own blocks go beside
    // the dK/dV coming home, not beside dO leaving: a step's transfers start once both ranks are done with the step
    // before, and rank 1's next blocks wait for them.
    early_go(f[1], 0, h, false);
    on_early(f[2], 0, h);
    f[2].rows = {{0, true}};
    b[0].rows = {{0, false}};
    on_early(b[0], 0, h);
    early_go(b[1], 0, h, true);
    b[1].compute = own(1, 0);
    append(b[1].compute, own(0));
    b[2].rows = {{0, true}};
    b[2].compute = own(1);
  } else {
    // The early chunk's first half out beside the moved rows' blocks; its second half out while the partial out comes
    // back, beside rank 1's blocks on the first; rank 1's blocks on the second. Backward: rank 1's blocks on the first
    // half before anything moves, so that dO going out and their dK/dV going home cross; the second half's dK/dV home
    // beside the moved rows' blocks and rank 0's own; the moved rows' dQ back beside rank 1's own. Each direction
    // then carries its bytes back to back, where the 2-piece order sends 16 + 32 MiB out, then 16 back, one after
    // another (B=1 S=8192 H=32: 1.40x its bound over loopback sockets on 2x H200, 2026-11-27).
    const int a = (h + 1) / 2;
    early_go(f[1], 0, a, false);
    early_go(f[2], a, h, false);
    f[2].rows = {{0, true}};
    on_early(f[2], 0, a);
    on_early(f[3], a, h);
    on_early(b[0], 0, a);
    b[1].rows = {{0, false}};
    early_go(b[1], 0, a, true);
    on_early(b[1], a, h);
    early_go(b[2], a, h, true);
    b[2].compute = own(1, 0);
    append(b[2].compute, own(0));
    b[3].rows = {{0, true}};
    b[3].compute = own(1);
  }
  p.steps = std::move(f), p.schedule.clear(), p.step_count = 0;
  p.backward.steps = std::move(b), p.backward.rule.clear(), p.backward.step_count = 0;
  p.gather_steps.clear();
  p.note += std::string(p.note.empty() ? "" : "; ") + "rank 0's late chunk's queries computed at rank 1 (query_moves)";
}

}  // namespace tasp::planner
