#pragma once
// The backward's work for one launch, planned on the host (pure: no CUDA, no I/O; tested on the CPU): the query
// tiles of every item against each piece it lists, the CTAs (a key tile of a piece each, with the run of query
// tiles it walks), longest walks first, and, for a deterministic dQ, each visit's turn at its dQ tile.
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/band.hpp"

namespace tasp::kernels::bwd {

// A query tile (bm rows) of an item that lists the piece, with what the walk needs of it: the keys its rows
// together see [see_lo, see_hi] and all see [all_lo, all_hi], the band of its rows (for the mask), the item,
// its first row in q, its rows, and the dQ scratch's tile of those rows (the scratch numbers the items' tiles
// in order). Reading the item and building its band per tile on the device took ~13% of the warp samples
// (Nsight Compute), though doing it here changed the time little: the other warpgroup's products covered most.
struct alignas(16) QEntry {  // aligned: the walking thread reads each pair of fields in one 16-byte load
  long long see_lo, see_hi, all_lo, all_hi;
  RowsBand band;  // from the tile's first row
  int item, qrow, rows, tile;
};

// A CTA's work: keys [j0, j0 + kKeyTile) of piece `piece`, against qlist[qbegin, qbegin + qcount); with a
// deterministic dQ, the turns of those entries start at turns[turn0].
struct Tile {
  int piece, j0, qbegin, qcount, turn0;
};
constexpr int kKeyTile = 128;

// Whether a CTA whose keys are [k0, k1] visits the entry (the device walk skips the others).
#ifdef __CUDACC__
__host__ __device__
#endif
inline bool visits(long long see_lo, long long see_hi, long long k0, long long k1) {
  return see_lo <= k1 && see_hi >= k0;
}
#ifdef __CUDACC__
__host__ __device__
#endif
inline bool visits(const QEntry& q, long long k0, long long k1) {
  return visits(q.see_lo, q.see_hi, k0, k1);
}

struct Plan {
  std::vector<QEntry> qlist;
  std::vector<Tile> tiles;  // the CTAs in launch order: most visited entries first
  int dq_tiles = 0;         // tiles of the dQ scratch (per batch and head)
  // Deterministic dQ only: turns[t.turn0 + (e - t.qbegin)] is CTA t's turn at entry e's dQ tile, counted over
  // the visits of that dQ tile in launch order (CTA, then walk order): the CTA adds its part once the tile's
  // counter has reached it. Waiting only on CTAs launched earlier cannot deadlock. -1 for entries not visited.
  std::vector<int> turns;
};

// Items and pieces as attention_backward has checked them; bm: query rows per tile (block_m).
Plan make_plan(const std::vector<WorkItem>& items, const std::vector<KvPiece>& pieces, int bm, bool deterministic);

}  // namespace tasp::kernels::bwd
