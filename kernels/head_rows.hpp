#pragma once
// A head dim's rows in the backward's shared memory (bwd_sm90.cuh, bwd_sm90_wide.cuh). Host and device.
#include "kernels/host_device.hpp"

namespace tasp::kernels::bwd {

// Head dims that are not a multiple of 64 (80, 96) sit in shared memory as DP = D rounded up to 64 columns, as in
// the forward: TMA zero-fills the columns past D, the products over the head dim (S^T, dP^T) stop at D and those
// with D as their N (dV, dK) are N = D wide. Only dQ^T, whose M is the head dim in blocks of 64, runs over DP: the
// padded rows come out zero and are not written (attention_backward_finish), 16 of 80 rows of one of the five
// products at D=80.
TASP_HD constexpr int padded_dim(int D) { return (D + 63) / 64 * 64; }

// The 16-bit end's staging (GradPiece::dk16): element (key j, head-dim column d) of [key][ROW] rows whose 16-byte
// chunks (8 elements) are swizzled by the key, so that the eight rows a warp's store covers land in different banks.
// ROW must be a multiple of 64 (8 chunks): at D=80 rows of 80 elements would send chunk 9 ^ 7 = 14 into the next
// row (a fault the GPU test found, 2026-11-27); tests/kernels/test_head_rows.cpp.
template <int ROW>
TASP_HD constexpr int row16_at(int j, int d) { return j * ROW + (((d / 8) ^ (j & 7)) * 8) + d % 8; }

}  // namespace tasp::kernels::bwd
