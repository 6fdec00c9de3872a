#include "executor/attention_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tasp::executor {

template <class T>
long block_attention(const T* q, const std::vector<long>& qpos, const T* k, const T* v, const std::vector<long>& kpos, int B,
                     int H, int Hkv, int D, const planner::Mask& msk, T* out, T* lse) {
  const long rows = long(qpos.size()), len = long(kpos.size());
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(T(D));
  const T ninf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(len);
  long pairs = 0;
  for (int b = 0; b < B; ++b)
    for (long i = 0; i < rows; ++i)
      for (int h = 0; h < H; ++h) {
        const T* qi = q + ((size_t(b) * rows + i) * H + h) * D;
        T* oi = out + ((size_t(b) * rows + i) * H + h) * D;
        const int hk = h / group;
        const long lo = msk.lo(qpos[i]), hi = msk.hi(qpos[i]);
        T m = ninf;
        for (long j = 0; j < len; ++j) {
          if (kpos[j] < lo || kpos[j] > hi) {
            s[j] = ninf;
            continue;
          }
          const T* kj = k + ((size_t(b) * len + j) * Hkv + hk) * D;
          T acc = 0;
          for (int d = 0; d < D; ++d) acc += qi[d] * kj[d];
          s[j] = acc * scale;
          m = std::max(m, s[j]);
          if (b == 0 && h == 0) ++pairs;
        }
        std::fill(oi, oi + D, T(0));
        T& l = lse[(size_t(b) * rows + i) * H + h];
        if (m == ninf) {
          l = ninf;
          continue;
        }
        T sum = 0;
        for (long j = 0; j < len; ++j) {
          if (s[j] == ninf) continue;
          const T p = std::exp(s[j] - m);
          sum += p;
          const T* vj = v + ((size_t(b) * len + j) * Hkv + hk) * D;
          for (int d = 0; d < D; ++d) oi[d] += p * vj[d];
        }
        for (int d = 0; d < D; ++d) oi[d] /= sum;
        l = m + std::log(sum);
      }
  return pairs * B;
}

template <class T>
void merge_block(T* o, T* lse, const T* ob, const T* lseb, std::size_t rows_heads, int D) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (std::size_t r = 0; r < rows_heads; ++r) {
    const T a = lse[r], b = lseb[r];
    if (b == ninf) continue;
    if (a == ninf) {
      std::copy(ob + r * D, ob + (r + 1) * D, o + r * D);
      lse[r] = b;
      continue;
    }
    const T m = std::max(a, b);
    const T wa = std::exp(a - m), wb = std::exp(b - m);
    const T l = m + std::log(wa + wb);
    const T ca = std::exp(a - l), cb = std::exp(b - l);
    for (int d = 0; d < D; ++d) o[r * D + d] = ca * o[r * D + d] + cb * ob[r * D + d];
    lse[r] = l;
  }
}

template <class T>
void block_attention_backward(const T* q, const std::vector<long>& qpos, const T* k, const T* v, const std::vector<long>& kpos,
                              const T* lse, const T* dout, const T* dsum, int B, int H, int Hkv, int D, const planner::Mask& m,
                              T* dq, T* dk, T* dv) {
  const long rows = long(qpos.size()), len = long(kpos.size());
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(T(D));
  for (int b = 0; b < B; ++b)
    for (long i = 0; i < rows; ++i)
      for (int h = 0; h < H; ++h) {
        const size_t qi = (size_t(b) * rows + i) * H + h;
        const T l = lse[qi];
        if (l == -std::numeric_limits<T>::infinity()) continue;  // a row that saw no key has no gradient
        const T* qr = q + qi * D;
        const T* dor = dout + qi * D;
        T* dqr = dq + qi * D;
        const int hk = h / group;
        const long lo = m.lo(qpos[i]), hi = m.hi(qpos[i]);
        for (long j = 0; j < len; ++j) {
          if (kpos[j] < lo || kpos[j] > hi) continue;
          const size_t kj = ((size_t(b) * len + j) * Hkv + hk) * D;
          T s = 0, dp = 0;
          for (int d = 0; d < D; ++d) s += qr[d] * k[kj + d], dp += dor[d] * v[kj + d];
          const T pr = std::exp(s * scale - l);
          const T ds = pr * (dp - dsum[qi]) * scale;
          for (int d = 0; d < D; ++d) {
            dv[kj + d] += pr * dor[d];
            dqr[d] += ds * k[kj + d];
            dk[kj + d] += ds * qr[d];
          }
        }
      }
}

template <class T>
void row_dot(const T* dout, const T* o, std::size_t rows_heads, int D, T* dsum) {
  for (std::size_t r = 0; r < rows_heads; ++r) {
    T acc = 0;
    for (int d = 0; d < D; ++d) acc += dout[r * D + d] * o[r * D + d];
    dsum[r] = acc;
  }
}

template long block_attention<float>(const float*, const std::vector<long>&, const float*, const float*, const std::vector<long>&,
                                     int, int, int, int, const planner::Mask&, float*, float*);
template long block_attention<double>(const double*, const std::vector<long>&, const double*, const double*,
                                      const std::vector<long>&, int, int, int, int, const planner::Mask&, double*, double*);
template void block_attention_backward<float>(const float*, const std::vector<long>&, const float*, const float*,
                                              const std::vector<long>&, const float*, const float*, const float*, int, int,
                                              int, int, const planner::Mask&, float*, float*, float*);
template void block_attention_backward<double>(const double*, const std::vector<long>&, const double*, const double*,
                                               const std::vector<long>&, const double*, const double*, const double*, int, int,
                                               int, int, const planner::Mask&, double*, double*, double*);
template void row_dot<float>(const float*, const float*, std::size_t, int, float*);
template void row_dot<double>(const double*, const double*, std::size_t, int, double*);
template void merge_block<float>(float*, float*, const float*, const float*, std::size_t, int);
template void merge_block<double>(double*, double*, const double*, const double*, std::size_t, int);

namespace {

// Whether query i sees key j, from the workload's words: the same document, not after it when causal, and
// within the window's sides.
struct RefMask {
  std::vector<long> doc;
  bool causal;
  long left, right;
  explicit RefMask(const planner::Workload& w)
      : doc(w.S, 0), causal(w.causal), left(w.window_left), right(w.causal ? 0 : w.window_right) {
    long at = 0;
    for (size_t d = 0; d < w.docs.size(); ++d)
      for (long i = 0; i < w.docs[d] && at < w.S; ++i) doc[at++] = long(d);
  }
  bool sees(long i, long j) const {
    return doc[i] == doc[j] && !(causal && j > i) && !(left >= 0 && i - j > left) && !(right >= 0 && j - i > right);
  }
};

// Query row i's probabilities over the keys it sees into P (the others untouched) and its log-sum-exp: `qi` the
// row's D values, `kj(j)` key j's. The forward and the backward's references share it.
template <class KeyRow>
double probability_row(const double* qi, KeyRow kj, long i, long S, int D, double scale, const RefMask& mask,
                       std::vector<double>& P) {
  double mx = -1e300;
  for (long j = 0; j < S; ++j) if (mask.sees(i, j)) {
    double acc = 0;
    const double* k = kj(j);
    for (int d = 0; d < D; ++d) acc += qi[d] * k[d];
    P[j] = acc * scale;
    mx = std::max(mx, P[j]);
  }
  double z = 0;
  for (long j = 0; j < S; ++j) if (mask.sees(i, j)) z += (P[j] = std::exp(P[j] - mx));
  for (long j = 0; j < S; ++j) if (mask.sees(i, j)) P[j] /= z;
  return mx + std::log(z);
}

}  // namespace

void reference_attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const planner::Workload& w, std::vector<double>& out, std::vector<double>& lse) {
  const int B = w.B, H = w.H, Hkv = w.Hkv, D = w.D;
  const long S = w.S;
  const RefMask mask(w);
  out.assign(size_t(B) * S * H * D, 0.0);
  lse.assign(size_t(B) * S * H, 0.0);
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> p(S);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hkv);
      auto kj = [&](long j) { return &k[((size_t(b) * S + j) * Hkv + hk) * D]; };
      for (long i = 0; i < S; ++i) {
        lse[(size_t(b) * S + i) * H + h] = probability_row(&q[((size_t(b) * S + i) * H + h) * D], kj, i, S, D, scale, mask, p);
        double* o = &out[((size_t(b) * S + i) * H + h) * D];
        for (long j = 0; j < S; ++j) if (mask.sees(i, j))
          for (int d = 0; d < D; ++d) o[d] += p[j] * v[((size_t(b) * S + j) * Hkv + hk) * D + d];
      }
    }
}

void reference_attention_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& dout, const planner::Workload& w, std::vector<double>& dq,
                                  std::vector<double>& dk, std::vector<double>& dv) {
  const int B = w.B, H = w.H, Hkv = w.Hkv, D = w.D;
  const long S = w.S;
  const RefMask mask(w);
  dq.assign(size_t(B) * S * H * D, 0.0);
  dk.assign(size_t(B) * S * Hkv * D, 0.0);
  dv.assign(dk.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(D));
  auto Q = [&](int b, long i, int h) { return &q[((size_t(b) * S + i) * H + h) * D]; };
  auto KV = [&](const std::vector<double>& x, int b, long j, int hk) { return &x[((size_t(b) * S + j) * Hkv + hk) * D]; };
  // One query row at a time: its probability row P and dP = dO V^T, then the softmax Jacobian
  // dS_j = P_j (dP_j - sum_l P_l dP_l). O(S) memory.
  std::vector<double> P(S), dP(S);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hkv);
      for (long i = 0; i < S; ++i) {
        probability_row(Q(b, i, h), [&](long j) { return KV(k, b, j, hk); }, i, S, D, scale, mask, P);
        const double* go = &dout[((size_t(b) * S + i) * H + h) * D];
        double c = 0;
        for (long j = 0; j < S; ++j) if (mask.sees(i, j)) {
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += go[d] * KV(v, b, j, hk)[d];
          dP[j] = acc;
          c += P[j] * dP[j];
        }
        double* gq = &dq[((size_t(b) * S + i) * H + h) * D];
        for (long j = 0; j < S; ++j) if (mask.sees(i, j)) {
          const double ds = P[j] * (dP[j] - c) * scale;
          double* gk = &dk[((size_t(b) * S + j) * Hkv + hk) * D];
          double* gv = &dv[((size_t(b) * S + j) * Hkv + hk) * D];
          for (int d = 0; d < D; ++d) {
            gq[d] += ds * KV(k, b, j, hk)[d];
            gk[d] += ds * Q(b, i, h)[d];
            gv[d] += P[j] * go[d];
          }
        }
      }
    }
}

}  // namespace tasp::executor
