#pragma once
// Block attention with log-sum-exp on the CPU, the numerically stable (out, LSE) merge, and an
// independent single-rank fp64 reference. Layouts: Q/O [B][rows][H][D], K/V [B][len][Hkv][D], LSE [B][rows][H].
#include <cstddef>
#include <vector>

namespace tasp::executor {

// Attention of `rows` queries (global positions qpos) against `len` keys (positions kpos), head h reading
// KV head h / (H / Hkv). Fully masked rows get out = 0 and LSE = -inf. Returns unmasked (q, k) pairs per head.
template <class T>
long block_attention(const T* q, const std::vector<long>& qpos, const T* k, const T* v, const std::vector<long>& kpos, int B,
                     int H, int Hkv, int D, bool causal, T* out, T* lse);

// Fold (ob, lseb) into the running (o, lse) in place: rows*H entries of D values.
template <class T>
void merge_block(T* o, T* lse, const T* ob, const T* lseb, std::size_t rows_heads, int D);

// Plain softmax attention over the whole sequence in double, written separately from the above.
void reference_attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, int B,
                         long S, int H, int Hkv, int D, bool causal, std::vector<double>& out, std::vector<double>& lse);

}  // namespace tasp::executor
