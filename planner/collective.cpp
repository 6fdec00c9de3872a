#include "planner/collective.hpp"

#include <algorithm>
#include <vector>

namespace tasp::planner {

bool collectives_apply(const Plan& p) { return p.ulysses == 1 && p.scheme == "allgather"; }

namespace {

// Every transfer once and of one kind, from its owner (K/V) or to it (accumulators); per (owner, piece) the count of
// ranks it reaches or comes from into `per`. Collective::None when the step is not of that shape.
Collective shape_of(const Step& s, int n, int P, std::vector<long>& per) {
  if (s.transfers.empty() || n < 2 || P < 1) return Collective::None;
  const bool grad = s.transfers.front().grad;
  std::vector<char> seen(size_t(n) * n * P, 0);
  per.assign(size_t(n) * P, 0);
  for (const auto& x : s.transfers) {
    if (x.grad != grad || x.src == x.dst || x.src < 0 || x.dst < 0 || x.src >= n || x.dst >= n || x.owner < 0 ||
        x.owner >= n || x.piece < 0 || x.piece >= P)
      return Collective::None;
    if (grad ? x.dst != x.owner : x.src != x.owner) return Collective::None;
    char& c = seen[(size_t(grad ? x.src : x.dst) * n + x.owner) * P + x.piece];
    if (c) return Collective::None;
    c = 1, ++per[size_t(x.owner) * P + x.piece];
  }
  return grad ? Collective::ReduceScatter : Collective::AllGather;
}

}  // namespace

Collective per_root_of(const Step& s, int n, int P) {
  std::vector<long> per;
  const Collective c = shape_of(s, n, P, per);
  for (long k : per)
    if (k != 0 && k != n - 1) return Collective::None;
  return c;
}


Collective collective_of(const Step& s, int n, int P) {
  // Every (sender, owner, piece, receiver) once, for each piece moved: own pieces to every other rank, or
  // accumulators to their owners, by every owner.
  std::vector<long> per;
  const Collective c = shape_of(s, n, P, per);
  for (int x = 0; c != Collective::None && x < P; ++x) {
    long k = 0;
    for (int o = 0; o < n; ++o) k += per[size_t(o) * P + x];
    if (k != 0 && k != long(n) * (n - 1)) return Collective::None;
  }
  return c;
}

std::vector<int> collective_pieces(const Step& s, int owner) {
  std::vector<int> pieces;
  for (const auto& x : s.transfers)
    if (owner < 0 || x.owner == owner) pieces.push_back(x.piece);
  std::sort(pieces.begin(), pieces.end());
  pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
  return pieces;
}

}  // namespace tasp::planner
