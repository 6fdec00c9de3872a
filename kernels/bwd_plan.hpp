#pragma once
// The backward's work for one launch, planned on the host (pure: no CUDA, no I/O; tested on the CPU): the CTAs
// (a key tile of a piece each), each with the query tiles whose rows see some of its keys (of every item that
// lists the piece) and their masks, longest walks first, and, for a deterministic dQ, each visit's turn at its
// dQ tile.
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/band.hpp"

namespace tasp::kernels::bwd {

// One query tile of a CTA's walk, as the kernel uses it: the key rows each of its rows sees (when `mask`), the
// dQ scratch's tile of its rows (the scratch numbers the items' tiles in order), its first row in q, its rows, and
// with a deterministic dQ the CTA's turn at that scratch tile. Resolved here rather than by the kernel's walking
// thread, which read each of the piece's query tiles, skipped those its keys do not see and built the mask: ~900
// cycles of a 5,900-cycle tile on the thread whose warpgroup waits for it, wherever it was placed (traced tile by tile,
// docs/measurements/kernels.md). A visit is two 16-byte loads.
struct alignas(16) Visit {
  TileMask m;
  int tile, qrow;
  int turn;  // deterministic dQ: visits of the scratch tile by CTAs launched before (in walk order), 0 if not asked
  short rows;
  bool mask;  // some key of the tile is hidden from some row (or lies past the piece's end)
};
static_assert(sizeof(Visit) == 32, "a visit is two 16-byte loads");

// A CTA's work: keys [j0, j0 + bn) of piece `piece` (bn: make_plan's key tile), against the query tiles visits[vbegin, vbegin + vcount)
// (each for every query head of the CTA's KV head).
struct Tile {
  int piece, j0, vbegin, vcount;
};
constexpr int kKeyTile = 128;  // bwd_sm90.cuh's key tile (bwd_sm90_wide.cuh's: 64)

struct Plan {
  std::vector<Visit> visits;  // the CTAs' walks, one run each, in launch order
  std::vector<Tile> tiles;    // the CTAs in launch order: longest walks first
  int dq_tiles = 0;           // tiles of the dQ scratch (per batch and head)
};

// Items and pieces as attention_backward has checked them; bm: query rows per tile (block_m), bn: keys per CTA. stagger: a CTA whose
// walk has no masked visit starts it at another point (key tile k of a piece's n k / n of the way in, then wraps
// around), so that the CTAs of a head do not read the same Q tile and add into the same dQ tile at once.
Plan make_plan(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, int bn, bool deterministic,
               bool stagger = false);

// Everything make_plan's result depends on (the items' rows, positions, pieces and masks, the pieces' lengths and
// positions, bm and the flags; not the buffers' addresses), as one value: equal keys, equal plans. A training step
// repeats its launches' work lists every iteration, so the launch keeps plans by key (bwd_plan_cache.hpp).
std::vector<long long> plan_key(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, int bn,
                                bool deterministic, bool stagger);

}  // namespace tasp::kernels::bwd
