#include "tools/tasp/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

namespace tasp::cli {
namespace {

const char* kFont = "font-family='Helvetica,Arial,sans-serif'";

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '\'' ? "&#39;" : std::string(1, c);
  return o;
}

std::string num(double x, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << x;
  return o.str();
}

// Milliseconds with about three significant digits.
std::string ms_text(double ms) { return ms == 0 ? "0" : num(ms, ms >= 100 ? 0 : ms >= 10 ? 1 : ms >= 1 ? 2 : 3); }

// The 1-2-5 steps (x 10^k) at or below / at or above v: log axes that end close to the data.
double step125_below(double v) {
  const double d = std::pow(10, std::floor(std::log10(v)));
  return v >= 5 * d ? 5 * d : v >= 2 * d ? 2 * d : d;
}
double step125_above(double v) {
  const double d = std::pow(10, std::floor(std::log10(v)));
  return v <= d ? d : v <= 2 * d ? 2 * d : v <= 5 * d ? 5 * d : 10 * d;
}

const std::vector<std::string> kColours = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};

std::map<std::string, std::string> scheme_colours(const std::vector<simulator::RunPoint>& runs) {
  std::map<std::string, std::string> c;
  for (const auto& r : runs)
    if (!c.count(r.scheme)) c[r.scheme] = kColours[c.size() % kColours.size()];
  return c;
}

// "Nice" axis ticks from 0 to at least `top`: about five steps of 1, 2 or 5 times a power of ten.
std::vector<double> ticks(double top) {
  const double raw = std::max(top, 1e-9) / 5, p = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / p < 1.5 ? p : raw / p < 3.5 ? 2 * p : raw / p < 7.5 ? 5 * p : 10 * p;
  std::vector<double> t;
  for (double x = 0; x <= top * 1.0001 + step; x += step) {
    t.push_back(x);
    if (x >= top) break;
  }
  return t;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> short_labels(const std::vector<std::string>& configs, std::string* common) {
  // Split each workload into its comma items; the items every configuration shares go to `common`.
  std::vector<std::vector<std::string>> items;
  for (const auto& c : configs) {
    std::vector<std::string> v;
    std::stringstream ss(c);
    for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
    items.push_back(v);
  }
  std::vector<std::string> shared;
  if (!items.empty())
    for (const auto& x : items[0])
      if (std::all_of(items.begin(), items.end(), [&](const auto& v) { return std::find(v.begin(), v.end(), x) != v.end(); }))
        shared.push_back(x);
  if (common) {
    common->clear();
    for (const auto& x : shared) *common += (common->empty() ? "" : ",") + x;
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    std::string s;
    for (const auto& x : items[i])
      if (std::find(shared.begin(), shared.end(), x) == shared.end()) s += (s.empty() ? "" : " ") + x;
    if (configs.size() > 1 && std::none_of(items[i].begin(), items[i].end(), [](const std::string& x) { return x == "causal"; }))
      s += s.empty() ? "full" : " full";
    out.push_back({configs[i], s.empty() ? configs[i] : s});
  }
  return out;
}

std::string scatter_svg(const std::vector<simulator::RunPoint>& runs) {
  const int W = 1300, H = 520, left = 80, right = 220, top = 40, bottom = 60;
  const int pw = W - left - right, ph = H - top - bottom;
  double lo = 1e300, hi = 0;
  for (const auto& r : runs) lo = std::min({lo, r.measured, r.predicted}), hi = std::max({hi, r.measured, r.predicted});
  lo = step125_below(lo * 0.8), hi = step125_above(hi * 1.2);
  auto X = [&](double v) { return left + pw * (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)); };
  auto Y = [&](double v) { return top + ph - ph * (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' " << kFont << " font-size='13'>\n";
  o << "<text x='" << left << "' y='22' font-size='16' font-weight='bold'>Predicted against measured (each run)</text>\n";
  // +-10% band around y = x, then the line itself.
  o << "<polygon points='" << X(lo) << "," << Y(lo * 1.1) << " " << X(hi / 1.1) << "," << Y(hi) << " " << X(hi) << "," << Y(hi)
    << " " << X(hi) << "," << Y(hi * 0.9) << " " << X(lo / 0.9) << "," << Y(lo) << " " << X(lo) << "," << Y(lo)
    << "' fill='#e8eef7'/>\n";
  o << "<line x1='" << X(lo) << "' y1='" << Y(lo) << "' x2='" << X(hi) << "' y2='" << Y(hi) << "' stroke='#555' stroke-dasharray='4 3'/>\n";
  // Axes with decade ticks (1, 2, 5 x 10^k) and grid lines.
  o << "<rect x='" << left << "' y='" << top << "' width='" << pw << "' height='" << ph << "' fill='none' stroke='#333'/>\n";
  for (double d = std::pow(10, std::floor(std::log10(lo))); d <= hi * 1.001; d *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = d * m;
      if (v < lo * 0.999) continue;
      if (v > hi * 1.001) break;
      o << "<line x1='" << X(v) << "' y1='" << top << "' x2='" << X(v) << "' y2='" << top + ph << "' stroke='#ddd'/>"
        << "<line x1='" << left << "' y1='" << Y(v) << "' x2='" << left + pw << "' y2='" << Y(v) << "' stroke='#ddd'/>\n";
      o << "<text x='" << X(v) << "' y='" << top + ph + 18 << "' text-anchor='middle'>" << ms_text(v) << "</text>"
        << "<text x='" << left - 8 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << ms_text(v) << "</text>\n";
    }
  o << "<text x='" << left + pw / 2 << "' y='" << H - 14 << "' text-anchor='middle'>measured (ms, log scale)</text>\n"
    << "<text transform='translate(20," << top + ph / 2 << ") rotate(-90)' text-anchor='middle'>predicted (ms, log scale)</text>\n";
  const auto colours = scheme_colours(runs);
  for (const auto& r : runs)
    o << "<circle cx='" << X(r.measured) << "' cy='" << Y(r.predicted) << "' r='6' fill='" << colours.at(r.scheme)
      << "' fill-opacity='0.8' stroke='#fff'><title>" << esc(r.config) << " " << esc(r.scheme) << ": measured "
      << ms_text(r.measured) << " ms, predicted " << ms_text(r.predicted) << " ms (" << num(100 * r.error(), 1)
      << "%)</title></circle>\n";
  // Legend to the right of the plot.
  int ly = top + 10;
  for (const auto& [s, c] : colours) {
    o << "<circle cx='" << left + pw + 30 << "' cy='" << ly << "' r='6' fill='" << c << "'/><text x='" << left + pw + 44
      << "' y='" << ly + 5 << "'>" << esc(s) << "</text>\n";
    ly += 24;
  }
  o << "<rect x='" << left + pw + 22 << "' y='" << ly + 2 << "' width='16' height='12' fill='#e8eef7'/><text x='" << left + pw + 44
    << "' y='" << ly + 13 << "'>within 10%</text>\n";
  o << "<line x1='" << left + pw + 22 << "' y1='" << ly + 30 << "' x2='" << left + pw + 38 << "' y2='" << ly + 30
    << "' stroke='#555' stroke-dasharray='4 3'/><text x='" << left + pw + 44 << "' y='" << ly + 34 << "'>predicted = measured</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string bars_svg(const std::vector<simulator::RunPoint>& runs, const simulator::Validation& v,
                     const std::vector<std::pair<std::string, std::string>>& labels) {
  const int cols = 3, cw = 440, ch = 300, left = 56, top = 46, bottom = 70, gap = 10;
  std::vector<std::string> configs;
  for (const auto& r : runs)
    if (std::find(configs.begin(), configs.end(), r.config) == configs.end()) configs.push_back(r.config);
  const int rows = int(configs.size() + cols - 1) / cols;
  const int W = cols * (cw + gap), H = 34 + rows * (ch + gap);
  const auto colours = scheme_colours(runs);
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' " << kFont << " font-size='12'>\n";
  // Legend once, above the charts.
  o << "<rect x='4' y='8' width='14' height='14' fill='#888'/><text x='22' y='20'>measured</text>"
    << "<rect x='100' y='8' width='14' height='14' fill='#888' fill-opacity='0.35' stroke='#888'/><text x='118' y='20'>predicted</text>"
    << "<text x='200' y='20'>= tied fastest measured (within 2%)   * predicted fastest</text>\n";
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const std::string& c = configs[ci];
    std::vector<const simulator::RunPoint*> rs;
    for (const auto& r : runs)
      if (r.config == c) rs.push_back(&r);
    const simulator::ConfigOrder* ord = nullptr;
    for (const auto& x : v.orders)
      if (x.config == c) ord = &x;
    const int ox = int(ci % cols) * (cw + gap), oy = 34 + int(ci / cols) * (ch + gap);
    double mx = 0;
    for (const auto* r : rs) mx = std::max({mx, r->measured, r->predicted});
    const auto t = ticks(mx * 1.15);
    const double top_v = t.back();
    const int pw = cw - left - 10, ph = ch - top - bottom;
    auto Y = [&](double val) { return oy + top + ph - ph * val / top_v; };
    std::string label = c;
    for (const auto& [full, shortl] : labels)
      if (full == c) label = shortl;
    o << "<g><rect x='" << ox << "' y='" << oy << "' width='" << cw << "' height='" << ch << "' fill='#fafafa' stroke='#ccc'/>\n"
      << "<text x='" << ox + 10 << "' y='" << oy + 20 << "' font-weight='bold' font-size='13'>" << esc(label) << "</text>\n";
    for (double tv : t) {
      o << "<line x1='" << ox + left << "' y1='" << Y(tv) << "' x2='" << ox + left + pw << "' y2='" << Y(tv) << "' stroke='#e3e3e3'/>"
        << "<text x='" << ox + left - 6 << "' y='" << Y(tv) + 4 << "' text-anchor='end'>" << ms_text(tv) << "</text>\n";
    }
    o << "<text transform='translate(" << ox + 14 << "," << oy + top + ph / 2 << ") rotate(-90)' text-anchor='middle'>ms</text>\n";
    const double slot = double(pw) / std::max<size_t>(1, rs.size());
    const double bw = std::min(34.0, slot * 0.36);
    for (size_t i = 0; i < rs.size(); ++i) {
      const auto* r = rs[i];
      const double x0 = ox + left + slot * i + slot / 2 - bw;
      const std::string& col = colours.at(r->scheme);
      o << "<rect x='" << x0 << "' y='" << Y(r->measured) << "' width='" << bw << "' height='" << Y(0) - Y(r->measured)
        << "' fill='" << col << "'><title>" << esc(r->scheme) << " measured " << ms_text(r->measured) << " ms</title></rect>"
        << "<rect x='" << x0 + bw << "' y='" << Y(r->predicted) << "' width='" << bw << "' height='" << Y(0) - Y(r->predicted)
        << "' fill='" << col << "' fill-opacity='0.35' stroke='" << col << "'><title>" << esc(r->scheme) << " predicted "
        << ms_text(r->predicted) << " ms</title></rect>\n";
      // Values above the bars, small and rotated when the bars are narrow.
      for (int k = 0; k < 2; ++k) {
        const double val = k ? r->predicted : r->measured, cx = x0 + bw * k + bw / 2;
        o << "<text x='" << cx << "' y='" << Y(val) - 4 << "' font-size='10' text-anchor='start' transform='rotate(-60 " << cx
          << "," << Y(val) - 4 << ")'>" << ms_text(val) << "</text>";
      }
      const bool tied = ord && std::find(ord->fastest_measured.begin(), ord->fastest_measured.end(), r->scheme) !=
                                   ord->fastest_measured.end();
      const bool pred = ord && std::find(ord->fastest_predicted.begin(), ord->fastest_predicted.end(), r->scheme) !=
                                   ord->fastest_predicted.end();
      o << "<text x='" << x0 + bw << "' y='" << Y(0) + 16 << "' text-anchor='middle'>" << esc(r->scheme) << "</text>"
        << "<text x='" << x0 + bw << "' y='" << Y(0) + 32 << "' text-anchor='middle' font-size='11' fill='#444'>"
        << (tied ? "=" : "") << (pred ? "*" : "") << (r->error() >= 0 ? "+" : "") << num(100 * r->error(), 1) << "%</text>\n";
    }
    o << "</g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string gantt_svg(const planner::Timeline& sim, const planner::Timeline& meas) {
  const int W = 1300, left = 170, right = 20, lane = 14, rank_gap = 10;
  const int ranks = int(std::min(sim.per_rank.size(), meas.per_rank.size()));
  const double end = std::max(sim.total_us(), meas.total_us());
  const int pw = W - left - right;
  const int H = 60 + ranks * (4 * lane + rank_gap) + 50;
  auto X = [&](double us) { return left + pw * us / std::max(end, 1e-9); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' " << kFont << " font-size='12'>\n";
  // Legend.
  int lx = left;
  for (auto [fill, name] : std::vector<std::pair<const char*, const char*>>{{"#e07b6b", "comm (forward)"}, {"#b64b3b", "comm (backward)"},
                                                                          {"#6fbf7e", "compute (forward)"}, {"#3f8f50", "compute (backward)"},
                                                                          {"#1d4d2a", "accumulator adds"}}) {
    o << "<rect x='" << lx << "' y='8' width='14' height='12' fill='" << fill << "'/><text x='" << lx + 18 << "' y='19'>" << name
      << "</text>\n";
    lx += 160;
  }
  int y = 36;
  for (int r = 0; r < ranks; ++r) {
    for (int which = 0; which < 2; ++which) {  // simulated above measured
      const planner::Timeline& t = which ? meas : sim;
      for (int kind = 0; kind < 2; ++kind) {
        o << "<text x='" << left - 8 << "' y='" << y + lane - 3 << "' text-anchor='end'" << (kind ? "" : " font-weight='bold'") << ">rank "
          << r << (which ? " measured " : " simulated ") << (kind ? "compute" : "comm") << "</text>\n";
        o << "<rect x='" << left << "' y='" << y << "' width='" << pw << "' height='" << lane - 2 << "' fill='"
          << (which ? "#f4f4f4" : "#eef2f8") << "'/>\n";
        for (size_t s = 0; s < t.per_rank[r].size(); ++s) {
          const auto& st = t.per_rank[r][s];
          const bool bwd = t.backward_step(int(s));
          for (int part = 0; part < (kind ? 2 : 1); ++part) {
            const double a = part ? st.post_start_us : kind ? st.compute_start_us : st.comm_start_us;
            const double b = part ? st.post_end_us : kind ? st.compute_end_us : st.comm_end_us;
            if (b <= a) continue;
            const char* fill = part ? "#1d4d2a" : kind ? (bwd ? "#3f8f50" : "#6fbf7e") : (bwd ? "#b64b3b" : "#e07b6b");
            o << "<rect x='" << X(a) << "' y='" << y << "' width='" << std::max(0.8, X(b) - X(a)) << "' height='" << lane - 2
              << "' fill='" << fill << "' stroke='#fff' stroke-width='0.5'><title>" << (bwd ? "bwd" : "fwd") << " step " << s
              << (part ? " accumulate" : kind ? " compute" : " comm") << ": " << num(a / 1e3, 3) << " - " << num(b / 1e3, 3)
              << " ms</title></rect>\n";
          }
        }
        y += lane;
      }
    }
    y += rank_gap;
  }
  for (double tv : ticks(end / 1e3)) {
    if (tv * 1e3 > end * 1.0001) break;
    o << "<line x1='" << X(tv * 1e3) << "' y1='36' x2='" << X(tv * 1e3) << "' y2='" << y << "' stroke='#ccc' stroke-dasharray='2 3'/>"
      << "<text x='" << X(tv * 1e3) << "' y='" << y + 16 << "' text-anchor='middle'>" << ms_text(tv) << "</text>\n";
  }
  o << "<text x='" << left + pw / 2 << "' y='" << y + 36 << "' text-anchor='middle'>time (ms)</text></svg>\n";
  return o.str();
}

}  // namespace tasp::cli
