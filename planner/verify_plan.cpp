#include "planner/verify_plan.hpp"

#include <algorithm>

namespace tasp::planner {
namespace {

std::string piece_name(int owner, int piece) {
  return "piece (owner " + std::to_string(owner) + ", piece " + std::to_string(piece) + ")";
}

}  // namespace

std::string verify_plan(const Plan& p, const Digraph* arcs, PlanStats* stats) {
  if (p.format != "tasp-plan/1") return "format: '" + p.format + "' is not tasp-plan/1";
  if (p.ranks < 1) return "ranks: must be >= 1";
  if (p.pieces_per_rank < 1) return "pieces_per_rank: must be >= 1";
  const int n = p.ranks, P = p.pieces_per_rank;
  if (arcs && arcs->n != n)
    return "ranks: the plan has " + std::to_string(n) + " ranks, the topology " + std::to_string(arcs->n) + " GPUs";
  for (size_t c = 0; c < p.rings.size(); ++c) {
    const auto& R = p.rings[c];
    std::vector<char> seen(n, 0);
    if (int(R.size()) != n) return "rings[" + std::to_string(c) + "]: has " + std::to_string(R.size()) + " ranks, not " + std::to_string(n);
    for (int v : R) {
      if (v < 0 || v >= n || seen[v]) return "rings[" + std::to_string(c) + "]: is not a permutation of the ranks";
      seen[v] = 1;
    }
  }
  const size_t pieces = size_t(n) * P;
  std::vector<uint8_t> held(size_t(n) * pieces, 0), done(size_t(n) * pieces, 0);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < P; ++c) held[r * pieces + size_t(r) * P + c] = 1;
  const bool multi_ring = p.rings.size() > 1;
  std::vector<int> pair_step(size_t(n) * n, -1);
  std::vector<Transfer> arrivals;
  PlanStats st;
  st.steps = p.num_steps();
  Step scratch;
  for (int t = 0; t < st.steps; ++t) {
    const Step& s = step_at(p, t, scratch);
    const std::string where = "steps[" + std::to_string(t) + "]";
    auto bad_id = [&](int v, int lim) { return v < 0 || v >= lim; };
    for (size_t i = 0; i < s.compute.size(); ++i) {
      const Compute& c = s.compute[i];
      const std::string at = where + ".compute[" + std::to_string(i) + "]";
      if (bad_id(c.rank, n) || bad_id(c.owner, n) || bad_id(c.piece, P))
        return at + ": rank, owner or piece out of range";
      const size_t k = c.rank * pieces + size_t(c.owner) * P + c.piece;
      if (!held[k]) return at + ": rank " + std::to_string(c.rank) + " computes on " + piece_name(c.owner, c.piece) + " it does not hold yet";
      if (done[k]) return at + ": rank " + std::to_string(c.rank) + " computes on " + piece_name(c.owner, c.piece) + " a second time";
      done[k] = 1;
    }
    arrivals.clear();
    int arcs_used = 0;
    for (size_t i = 0; i < s.transfers.size(); ++i) {
      const Transfer& x = s.transfers[i];
      const std::string at = where + ".transfers[" + std::to_string(i) + "]";
      if (bad_id(x.src, n) || bad_id(x.dst, n) || bad_id(x.owner, n) || bad_id(x.piece, P))
        return at + ": src, dst, owner or piece out of range";
      if (x.src == x.dst) return at + ": rank " + std::to_string(x.src) + " sends to itself";
      if (!held[x.src * pieces + size_t(x.owner) * P + x.piece])
        return at + ": rank " + std::to_string(x.src) + " sends " + piece_name(x.owner, x.piece) + " it does not hold";
      if (arcs && !arcs->has(x.src, x.dst))
        return at + ": " + std::to_string(x.src) + "->" + std::to_string(x.dst) + " is not an arc of the topology";
      int& ps = pair_step[size_t(x.src) * n + x.dst];
      if (ps == t && multi_ring)
        return at + ": pair " + std::to_string(x.src) + "->" + std::to_string(x.dst) + " used twice in one step";
      if (ps != t) ++arcs_used;
      ps = t;
      arrivals.push_back(x);
    }
    // Received pieces become usable from the next step on.
    for (const Transfer& x : arrivals) {
      uint8_t& h = held[x.dst * pieces + size_t(x.owner) * P + x.piece];
      if (h) return where + ": rank " + std::to_string(x.dst) + " receives " + piece_name(x.owner, x.piece) + " it already holds";
      h = 1;
    }
    st.transfers += long(s.transfers.size());
    st.computes += long(s.compute.size());
    st.max_arcs_per_step = std::max(st.max_arcs_per_step, arcs_used);
  }
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < n; ++o)
      for (int c = 0; c < P; ++c)
        if (!done[r * pieces + size_t(o) * P + c])
          return "rank " + std::to_string(r) + " never computes on " + piece_name(o, c);
  if (stats) *stats = st;
  return {};
}

}  // namespace tasp::planner
