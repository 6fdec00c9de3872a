#include "kernels/bwd_tail.hpp"

#include <algorithm>
#include <functional>
#include <queue>

namespace tasp::kernels::bwd {
namespace {

using Slots = std::priority_queue<double, std::vector<double>, std::greater<double>>;  // when each slot is free

// The next CTA (cost c) onto the slot that frees first.
void dispatch(Slots& q, double c) {
  const double t = q.top();
  q.pop();
  q.push(t + c);
}

double makespan(Slots q) {
  double end = 0;
  for (; !q.empty(); q.pop()) end = std::max(end, q.top());
  return end;
}

}  // namespace

TailSplit plan_tail(const std::vector<int>& walks, long long reps, int slots) {
  TailSplit best;
  if (walks.empty() || reps <= 0 || slots <= 0) return best;
  const long long n = (long long)walks.size() * reps;
  const auto visits = [&](long long i) { return walks[size_t(i % (long long)walks.size())]; };
  const int kmax = int(std::min<long long>(slots, n));
  Slots q;
  for (int s = 0; s < slots; ++s) q.push(0);
  for (long long i = 0; i < n - kmax; ++i) dispatch(q, visits(i) + kCtaCost);
  {  // unsplit
    Slots rest = q;
    for (long long i = n - kmax; i < n; ++i) dispatch(rest, visits(i) + kCtaCost);
    best.before = best.after = makespan(rest);
  }
  int best_parts = 0;
  std::vector<int> parts;
  for (int k = kmax; k >= 1; --k) {  // q: the CTAs before the last k dispatched
    for (int length : kPartLengths) {
      parts.clear();
      int total = 0;
      for (long long i = n - k; i < n; ++i) parts.push_back(parts_of(visits(i), length)), total += parts.back();
      if (total == k || total > 3 * slots) continue;  // nothing split, or more rounds of parts than a tail needs
      Slots rest = q;
      for (int g = 0; g < k; ++g) {
        const int v = visits(n - k + g);
        if (parts[g] == 1) dispatch(rest, v + kCtaCost);
        for (int part = 0; part < parts[g] && parts[g] > 1; ++part)
          dispatch(rest, part_range(0, v, part, parts[g]).count + kCtaCost + kPartCost);
      }
      const double end = makespan(rest);
      if (end < best.after - 1e-9 || (end <= best.after + 1e-9 && best_parts > 0 && total < best_parts))
        best.after = end, best.first = n - k, best.parts = parts, best_parts = total;
    }
    dispatch(q, visits(n - k) + kCtaCost);
  }
  if (best_parts > 0 && best.after > 0.99 * best.before) best.first = 0, best.parts.clear(), best.after = best.before;
  return best;
}

}  // namespace tasp::kernels::bwd
