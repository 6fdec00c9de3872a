// The kernels' mask arithmetic (kernels/band.hpp) on the CPU against the definition of what a row sees: the
// Band's per-row limits, and the 32-bit TileMask every kernel masks with, on random items, tiles far from their
// rows (past the 2^29 clamp), windows wider than the clamp and ragged piece ends.
#include <gtest/gtest.h>

#include <random>

#include "item_spec.hpp"
#include "kernels/band.hpp"

namespace tasp::kernels::testing {
namespace {

// Random items: causal or not, a document or none, windows none / narrow / wide / beyond the clamp.
ItemSpec random_item(std::mt19937_64& rng, long long q0) {
  auto pick = [&](int n) { return int(rng() % n); };
  ItemSpec it{0, 256, q0, {}, pick(2) == 0};
  const int wins[] = {-1, 0, 1, 37, 300, 1 << 20, (1 << 29) + 5, 0x7fffffff};
  it.wl = wins[pick(8)];
  it.wr = wins[pick(8)];
  if (pick(3) > 0) {  // a document around the rows
    it.k_begin = q0 - (long long)(rng() % 4096) - (pick(4) == 0 ? (1LL << 31) : 0);
    it.k_end = q0 + 1 + (long long)(rng() % 4096) + (pick(4) == 0 ? (1LL << 31) : 0);
  }
  return it;
}

TEST(Band, RowLimitsMatchTheDefinition) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const long long q0 = (long long)(rng() % (1LL << 40));
    const ItemSpec it = random_item(rng, q0);
    const Band band(work_item(it));
    for (int r = 0; r < 8; ++r) {
      const long long q = q0 + (long long)(rng() % 512);
      for (int c = 0; c < 64; ++c) {
        const long long k = q + (long long)(rng() % 1024) - 512;
        ASSERT_EQ(k >= band.lo(q) && k <= band.hi(q), sees(it, q, k)) << "trial " << trial << " q " << q << " k " << k;
      }
    }
  }
}

// Every row r in [0, 256) of rows starting at q0 against every column of a key tile at key0 with `keys` keys
// before the piece ends: TileMask's [first(r), last(r)] is exactly what the row sees of the tile.
void check_tile(const ItemSpec& it, long long key0, int keys, int tile_cols, const char* what, int trial) {
  const TileMask m(RowsBand(Band(work_item(it)), it.q_pos0), key0, keys);
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < tile_cols; ++c) {
      const bool want = c < keys && sees(it, it.q_pos0 + r, key0 + c);
      const bool got = c >= m.first(r) && c <= m.last(r);
      ASSERT_EQ(got, want) << what << " trial " << trial << ": row " << r << " column " << c << " (key0 - q0 = "
                           << key0 - it.q_pos0 << ", keys " << keys << ", causal " << it.causal << ", window " << it.wl
                           << "/" << it.wr << ", document [" << it.k_begin - it.q_pos0 << ", " << it.k_end - it.q_pos0
                           << ") from q0)";
    }
}

TEST(Band, TileMaskMatchesTheDefinition) {
  std::mt19937_64 rng(11);
  const long long far[] = {0, 1LL << 29, (1LL << 29) - 100, (1LL << 29) + 100, 1LL << 31, 1LL << 35};
  for (int trial = 0; trial < 1500; ++trial) {
    const long long q0 = (1LL << 36) + (long long)(rng() % (1LL << 34));
    const ItemSpec it = random_item(rng, q0);
    // Tiles near the rows (the diagonal, windows, document edges) and far on either side.
    const long long near = (long long)(rng() % 1200) - 700;
    const long long off = far[rng() % 6] * (rng() % 2 ? 1 : -1);
    const int tile_cols = (int[]){64, 80, 128, 192}[rng() % 4];
    const int keys = rng() % 3 ? tile_cols : 1 + int(rng() % tile_cols);  // a ragged piece end
    check_tile(it, q0 + near + off, keys, tile_cols, "random", trial);
  }
}

// The clamp's edges: a window just inside and just past 2^29, the tile exactly that far away.
TEST(Band, TileMaskIsExactAcrossTheClamp) {
  int trial = 0;
  for (int w : {(1 << 29) - 300, (1 << 29) - 1, 1 << 29, (1 << 29) + 1, (1 << 29) + 300})
    for (long long d : {-(1LL << 29) - 200, -(1LL << 29) - 128, -(1LL << 29), -(1LL << 29) + 100, (1LL << 29) - 50,
                        1LL << 29, (1LL << 29) + 7})
      for (bool causal : {false, true}) {
        ItemSpec it{0, 256, 1LL << 40, {}, causal};
        it.wl = w, it.wr = w;
        check_tile(it, it.q_pos0 + d, 128, 128, "clamp", trial++);
        it.wr = -1;
        check_tile(it, it.q_pos0 + d, 128, 128, "clamp, no right window", trial++);
      }
}

}  // namespace
}  // namespace tasp::kernels::testing
