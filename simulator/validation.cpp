#include "simulator/validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace tasp::simulator {
namespace {

// Ranks 1..n with ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = double(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i] / n, mb += b[i] / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

}  // namespace

double Validation::agreement() const {
  if (orders.empty()) return 0;
  size_t ok = 0;
  for (const auto& o : orders) ok += o.agrees;
  return double(ok) / double(orders.size());
}

double Validation::mean_rank_correlation() const {
  double sum = 0;
  for (const auto& o : orders)
    if (o.ranked()) sum += o.spearman;
  return ranked() ? sum / double(ranked()) : 0;
}

size_t Validation::ranked() const {
  return size_t(std::count_if(orders.begin(), orders.end(), [](const ConfigOrder& o) { return o.ranked(); }));
}

Validation validate(const std::vector<RunPoint>& runs, double tie_margin) {
  Validation v;
  v.runs = runs.size();
  if (runs.empty()) return v;
  std::vector<double> abs;
  for (const auto& r : runs) {
    abs.push_back(std::abs(r.error()));
    v.mean_signed += r.error() / double(runs.size());
  }
  std::sort(abs.begin(), abs.end());
  v.median_abs = abs.size() % 2 ? abs[abs.size() / 2] : (abs[abs.size() / 2 - 1] + abs[abs.size() / 2]) / 2;
  v.max_abs = abs.back();
  std::vector<std::string> order;  // configurations in first-seen order
  std::map<std::string, std::vector<const RunPoint*>> by;
  for (const auto& r : runs) {
    if (!by.count(r.config)) order.push_back(r.config);
    by[r.config].push_back(&r);
  }
  for (const auto& c : order) {
    const auto& rs = by[c];
    ConfigOrder o;
    o.config = c;
    const auto best_m = *std::min_element(rs.begin(), rs.end(), [](auto a, auto b) { return a->measured < b->measured; });
    const auto best_p = *std::min_element(rs.begin(), rs.end(), [](auto a, auto b) { return a->predicted < b->predicted; });
    for (const auto* r : rs) {
      if (r->measured <= best_m->measured * (1 + tie_margin)) o.fastest_measured.push_back(r->scheme);
      if (r->predicted <= best_p->predicted * (1 + tie_margin)) o.fastest_predicted.push_back(r->scheme);
    }
    o.tie = o.fastest_measured.size() > 1;
    o.all_tied = o.fastest_measured.size() == rs.size();
    for (const auto& s : o.fastest_predicted)
      o.agrees |= std::find(o.fastest_measured.begin(), o.fastest_measured.end(), s) != o.fastest_measured.end();
    if (rs.size() >= 3) {
      std::vector<double> m, p;
      for (const auto* r : rs) m.push_back(r->measured), p.push_back(r->predicted);
      o.spearman = pearson(ranks(m), ranks(p));
    }
    v.orders.push_back(o);
  }
  return v;
}

}  // namespace tasp::simulator
