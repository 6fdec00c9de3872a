#pragma once
// The backward's last wave, planned on the host (pure: no CUDA, no I/O; tested on the CPU). A launch's CTAs are
// dispatched in order onto its slots (SMs times CTAs an SM holds) as slots free up. With walks of equal length the
// CTAs run in whole waves, and the last wave's few CTAs run alone for a whole walk: 4,096 CTAs on 132 SMs are 31.03
// waves, 3% of the launch with 4 SMs busy. Causal walks are ordered longest first within each head, so the last
// head's long walks start late and end alone (B=1 H=32 S=8192: 5% over the launch's work spread evenly). Splitting
// the last CTAs' walks into parts that run side by side, each part adding its dK and dV (the last part of a CTA
// writing them), turns that tail into a fraction of a walk (docs/measurements/kernels.md).
#include <vector>

#include "kernels/host_device.hpp"

namespace tasp::kernels::bwd {

// CTAs [first, first + parts.size()) of the launch order, CTA first + g run as parts[g] CTAs (1: as it is) walking
// consecutive runs of its visits; none split when parts is empty. before / after: the modelled launch length (in
// visits) unsplit and as split.
struct TailSplit {
  long long first = 0;
  std::vector<int> parts;
  double before = 0, after = 0;
  int total_parts() const {
    int n = 0;
    for (int p : parts) n += p;
    return n;
  }
};

// Query rows of one visit (a query tile of a walk) per head dim: 128 at D=64, 64 in the wide kernel (D=256), 80
// between. The kernels' tiles (bwd_sm90.cuh block_m, bwd_sm90_wide.cuh Shape::BM) and the simulator's visits per walk
// (simulator::launch_fill) take it from here.
TASP_HD constexpr int visit_rows(int D) { return D == 64 ? 128 : D > 128 ? 64 : 80; }

// What the model charges, in visits: a CTA's entry and end (its prologue and the dK/dV stores: ~25k cycles of a
// ~6.5k-cycle visit at D=256, traced), and a part's adds of its dK and dV on top.
constexpr int kCtaCost = 4, kPartCost = 1;
// A part walks at least this many visits (so that its entry and end stay a small share of it) ...
constexpr int kMinPartVisits = 8;
// ... and about one of these many: a CTA of v visits becomes ceil(v / length) parts (at most v / kMinPartVisits).
constexpr int kPartLengths[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
inline int parts_of(int visits, int length) {
  const int most = visits / kMinPartVisits, want = (visits + length - 1) / length;
  return most < 2 ? 1 : want < most ? want : most;
}

// The launch: walks[i % walks.size()] visits for CTA i of walks.size() * reps (the plan's tiles, repeated for every KV
// head split and batch, the tiles fastest), on `slots` slots. The split of the last CTAs (the last k, each in
// parts_of(its visits, length) parts, for every k up to `slots` and every length above, at most 3 x slots parts in
// all) that the model finds shortest, if it saves at least 1% of the launch; ties go to fewer parts.
TailSplit plan_tail(const std::vector<int>& walks, long long reps, int slots);

// The visits [begin, begin + count) of part `part` of `parts` of a walk of `vcount` visits from vbegin.
struct PartRange {
  int begin, count;
};
TASP_HD PartRange part_range(int vbegin, int vcount, int part, int parts) {
  const long long a = (long long)vcount * part / parts, b = (long long)vcount * (part + 1) / parts;
  return {vbegin + int(a), int(b - a)};
}

}  // namespace tasp::kernels::bwd
