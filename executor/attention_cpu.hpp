#pragma once
// Block attention with log-sum-exp on the CPU, the numerically stable (out, LSE) merge, and an
// independent single-rank fp64 reference. Layouts: Q/O [B][rows][H][D], K/V [B][len][Hkv][D], LSE [B][rows][H].
#include <cstddef>
#include <vector>

#include "planner/mask.hpp"
#include "planner/workload.hpp"

namespace tasp::executor {

// Attention of `rows` queries (global positions qpos) against `len` keys (positions kpos) under mask `m`, head h
// reading KV head h / (H / Hkv). Fully masked rows get out = 0 and LSE = -inf. Returns unmasked (q, k) pairs per head.
template <class T>
long block_attention(const T* q, const std::vector<long>& qpos, const T* k, const T* v, const std::vector<long>& kpos, int B,
                     int H, int Hkv, int D, const planner::Mask& m, T* out, T* lse);

// Fold (ob, lseb) into the running (o, lse) in place: rows*H entries of D values.
template <class T>
void merge_block(T* o, T* lse, const T* ob, const T* lseb, std::size_t rows_heads, int D);

// One block's backward (FlashAttention's formulation, ../notes/backward-and-head-parallel.md): with the
// forward's final out `o` and `lse` for the queries, dO `dout` and the row sums `dsum` = rowsum(dO * O)
// ([B][rows][H]), adds the block's contribution to dq (queries' layout) and to dk, dv ([B][len][Hkv][D],
// summed over each KV head's query heads). Because P uses the final LSE, blocks add up exactly in any order.
template <class T>
void block_attention_backward(const T* q, const std::vector<long>& qpos, const T* k, const T* v, const std::vector<long>& kpos,
                              const T* lse, const T* dout, const T* dsum, int B, int H, int Hkv, int D, const planner::Mask& m,
                              T* dq, T* dk, T* dv);
// dsum[b][i][h] = sum_d dout * o over the rows' D values.
template <class T>
void row_dot(const T* dout, const T* o, std::size_t rows_heads, int D, T* dsum);

// Plain softmax attention over the whole sequence in double, written separately from the above (its mask
// too: same document, causal, window, straight from the workload's definition).
void reference_attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const planner::Workload& w, std::vector<double>& out, std::vector<double>& lse);

// Gradients of sum(dout * attention(q, k, v)) in double over the whole sequence, by the textbook chain rule
// through each row of the probability matrix (dS = P * (dP - rowsum(P * dP))), independent of the block code.
void reference_attention_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& dout, const planner::Workload& w, std::vector<double>& dq,
                                  std::vector<double>& dk, std::vector<double>& dv);

}  // namespace tasp::executor
