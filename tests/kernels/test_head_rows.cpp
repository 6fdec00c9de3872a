// The backward's staged 16-bit end (kernels/head_rows.hpp) on the CPU: every element of a CTA's [keys][D] dK or dV
// tile gets its own place inside its own row, 16-byte chunks stay whole, and the store of a warp's eight rows from
// the registers (bwd_sm90.cuh: lane g's row key0 + g, lane t4's column pair 2 t4 of each chunk) meets every bank
// once. Rows as wide as the head dim break the second property at D=80 and D=96: the fault the GPU test found first.
#include <gtest/gtest.h>

#include <set>

#include "kernels/head_rows.hpp"

namespace tasp::kernels::bwd {
namespace {

// Row width `row` (a template argument in the kernels) at run time, for the test's loops.
int at(int row, int j, int d) {
  switch (row) {
    case 64: return row16_at<64>(j, d);
    case 80: return row16_at<80>(j, d);
    case 96: return row16_at<96>(j, d);
    case 128: return row16_at<128>(j, d);
    case 256: return row16_at<256>(j, d);
  }
  ADD_FAILURE() << "no row width " << row;
  return 0;
}

// Whether every element of a [keys][D] tile lands in its own row, at its own place, chunks whole (8 consecutive
// elements from a chunk's first).
bool rows_hold(int row, int D, int keys) {
  std::set<int> seen;
  for (int j = 0; j < keys; ++j)
    for (int d = 0; d < D; ++d) {
      const int a = at(row, j, d);
      if (a / row != j || !seen.insert(a).second) return false;
      if (a != at(row, j, d - d % 8) + d % 8 || at(row, j, d - d % 8) % 8 != 0) return false;
    }
  return true;
}

TEST(HeadRows, EveryElementHasItsOwnPlaceInItsRow) {
  for (int D : {64, 80, 96, 128}) EXPECT_TRUE(rows_hold(padded_dim(D), D, 128)) << "D=" << D;
  EXPECT_TRUE(rows_hold(256, 256, 64));  // the wide kernel's 64-key tiles
}

TEST(HeadRows, RowsAsWideAsAnUnpaddedHeadDimSpill) {
  EXPECT_FALSE(rows_hold(80, 80, 128));
  EXPECT_FALSE(rows_hold(96, 96, 128));
  EXPECT_EQ(padded_dim(80), 128);
  EXPECT_EQ(padded_dim(64), 64);
}

TEST(HeadRows, AWarpsStoreMeetsEveryBankOnce) {
  for (int D : {64, 80, 96, 128}) {
    const int row = padded_dim(D);
    for (int key0 = 0; key0 < 128; key0 += 16)  // a warp's first row (16 rows a warp)
      for (int hf = 0; hf < 2; ++hf)
        for (int c = 0; c < D / 8; ++c) {
          std::set<int> banks;
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t4 = lane % 4;
            const int bytes = 2 * at(row, key0 + 8 * hf + g, 8 * c + 2 * t4);  // 16-bit elements, 4 bytes a lane
            banks.insert(bytes / 4 % 32);
          }
          EXPECT_EQ(banks.size(), 32u) << "D=" << D << " key0=" << key0 << " chunk " << c;
        }
  }
}

}  // namespace
}  // namespace tasp::kernels::bwd
