// tasp report: measured against simulated, as markdown and HTML with SVG plots.
//   --runs CSV (config,scheme,measured_ms): every row simulated on --topology with --profile -> table,
//       error per row, median |error|, a bar chart per configuration.
//   --simulated T1 --measured T2 (tasp-timeline/1): step by step comparison and a Gantt chart of both.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "planner/timeline.hpp"
#include "tools/tasp/cli.hpp"
#include "tools/tasp/compare.hpp"

namespace tasp::cli {
namespace {

using namespace tasp::planner;

struct RunRow {
  std::string config, scheme, pass = "fwd";
  double measured_ms = 0, predicted_ms = 0, comm_ms = 0, compute_ms = 0;
  double error() const { return (predicted_ms - measured_ms) / measured_ms; }
};

// Rows of "WORKLOAD",scheme,measured_ms[,...]; a header line naming a `pass` column gives each row its pass
// (fwd, bwd or fwd+bwd), otherwise every row has `default_pass`.
std::vector<RunRow> read_runs(const std::string& path, const std::string& default_pass) {
  std::istringstream in(read_text_file(path, "runs file"));
  std::vector<RunRow> rows;
  std::string line;
  int n = 0, pass_col = -1;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("config,", 0) == 0) {
      std::istringstream h(line);
      std::string name;
      for (int i = 0; std::getline(h, name, ','); ++i)
        if (name == "pass") pass_col = i;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    // "B=1,...,causal",scheme,measured_ms[,...]: the quoted config holds commas.
    if (line[0] != '"') throw InputError(path + ":" + std::to_string(n) + ": config: expected a quoted workload");
    const auto close = line.find('"', 1);
    if (close == std::string::npos) throw InputError(path + ":" + std::to_string(n) + ": config: missing closing quote");
    RunRow r;
    r.config = line.substr(1, close - 1);
    r.pass = default_pass;
    std::istringstream rest(line.substr(close + 2));
    std::string ms, field;
    std::getline(rest, r.scheme, ',');
    std::getline(rest, ms, ',');
    for (int col = 3; std::getline(rest, field, ','); ++col)
      if (col == pass_col) {
        planner::Passes p;
        if (!parse_passes(field, &p))
          throw InputError(path + ":" + std::to_string(n) + ": pass: expected fwd, bwd or fwd+bwd, got '" + field + "'");
        r.pass = field;
      }
    try {
      size_t used = 0;
      r.measured_ms = std::stod(ms, &used);
      if (used != ms.size() || !(r.measured_ms > 0)) throw std::invalid_argument(ms);
    } catch (const std::exception&) {
      throw InputError(path + ":" + std::to_string(n) + ": measured_ms: expected a positive number, got '" + ms + "'");
    }
    rows.push_back(r);
  }
  if (rows.empty()) throw InputError(path + ": no runs");
  return rows;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

// Grouped bars: measured and predicted per scheme, one group per configuration.
std::string bars_svg(const std::vector<RunRow>& rows) {
  std::vector<std::string> configs;
  for (const auto& r : rows)
    if (std::find(configs.begin(), configs.end(), r.config) == configs.end()) configs.push_back(r.config);
  const int bar = 9, gap = 4, h = 160, label = 14;
  std::ostringstream o;
  int x = 10, width = 10;
  for (const auto& c : configs) {
    int k = 0;
    for (const auto& r : rows) k += r.config == c;
    width += k * (2 * bar + gap) + 30;
  }
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << h + 4 * label + 10
    << "' font-family='sans-serif' font-size='10'>\n";
  for (const auto& c : configs) {
    double mx = 0;
    for (const auto& r : rows)
      if (r.config == c) mx = std::max({mx, r.measured_ms, r.predicted_ms});
    const int x0 = x;
    for (const auto& r : rows) {
      if (r.config != c) continue;
      const int hm = int(h * r.measured_ms / mx), hp = int(h * r.predicted_ms / mx);
      o << "<rect x='" << x << "' y='" << h - hm + 5 << "' width='" << bar << "' height='" << hm << "' fill='#3b6fb6'><title>"
        << esc(r.scheme) << " measured " << r.measured_ms << " ms</title></rect>\n";
      o << "<rect x='" << x + bar << "' y='" << h - hp + 5 << "' width='" << bar << "' height='" << hp
        << "' fill='#e39b3b'><title>" << esc(r.scheme) << " predicted " << r.predicted_ms << " ms</title></rect>\n";
      o << "<text x='" << x << "' y='" << h + 5 + label << "' transform='rotate(45 " << x << "," << h + 5 + label << ")'>"
        << esc(r.scheme) << "</text>\n";
      x += 2 * bar + gap;
    }
    o << "<text x='" << x0 << "' y='" << h + 4 * label + 5 << "'>" << esc(c) << "</text>\n";
    x += 30;
  }
  o << "<text x='10' y='12' fill='#3b6fb6'>measured</text><text x='70' y='12' fill='#e39b3b'>predicted</text></svg>\n";
  return o.str();
}

// Gantt: per rank two lanes (comm, compute) for each timeline, stacked.
std::string gantt_svg(const std::vector<std::pair<std::string, const Timeline*>>& tls) {
  double end = 0;
  int lanes = 0;
  for (auto& [name, t] : tls) end = std::max(end, t->total_us()), lanes += 2 * int(t->per_rank.size()) + 1;
  const int lane = 9, w = 900, left = 110;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w + left + 10 << "' height='" << lanes * lane + 30
    << "' font-family='sans-serif' font-size='9'>\n";
  int y = 5;
  auto X = [&](double us) { return left + w * us / std::max(end, 1e-9); };
  for (auto& [name, t] : tls) {
    o << "<text x='2' y='" << y + 8 << "' font-weight='bold'>" << esc(name) << "</text>\n";
    y += lane;
    for (size_t r = 0; r < t->per_rank.size(); ++r) {
      for (int kind = 0; kind < 2; ++kind) {
        o << "<text x='2' y='" << y + 8 << "'>rank " << r << (kind ? " compute" : " comm") << "</text>\n";
        for (size_t s = 0; s < t->per_rank[r].size(); ++s) {
          const auto& st = t->per_rank[r][s];
          // Compute lanes also show the step's closing work (accumulator adds) in a darker shade.
          for (int part = 0; part < (kind ? 2 : 1); ++part) {
            const double a = part ? st.post_start_us : kind ? st.compute_start_us : st.comm_start_us;
            const double b = part ? st.post_end_us : kind ? st.compute_end_us : st.comm_end_us;
            if (b <= a) continue;
            const char* fill = part ? "#2d6b3a" : kind ? (s % 2 ? "#4c9a5b" : "#6fbf7e") : (s % 2 ? "#b64b3b" : "#e07b6b");
            o << "<rect x='" << X(a) << "' y='" << y << "' width='" << std::max(0.5, X(b) - X(a)) << "' height='" << lane - 1
              << "' fill='" << fill << "'><title>" << (t->backward_step(int(s)) ? "bwd" : "fwd") << " step " << s
              << (part ? " accumulate" : "") << ": " << a << " - " << b << " us</title></rect>\n";
          }
        }
        y += lane;
      }
    }
  }
  o << "<text x='" << left << "' y='" << y + 12 << "'>0</text><text x='" << left + w - 60 << "' y='" << y + 12 << "'>"
    << std::fixed << std::setprecision(1) << end / 1e3 << " ms</text></svg>\n";
  return o.str();
}

void write_pair(const std::string& dir, const std::string& md, const std::string& html_body) {
  std::filesystem::create_directories(dir);
  write_output(dir + "/report.md", [&](std::ostream& o) { o << md; });
  write_output(dir + "/report.html", [&](std::ostream& o) {
    o << "<!doctype html><html><head><meta charset='utf-8'><title>tasp report</title><style>body{font-family:sans-serif;"
         "max-width:1100px;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
         "text-align:right}</style></head><body>\n"
      << html_body << "</body></html>\n";
  });
}

}  // namespace

void register_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Simulated against measured: markdown + HTML with SVG plots");
  struct Args {
    std::string runs, simulated, measured, out = "report", topology = "h200-hgx-8", profile, pass = "fwd";
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--runs", a->runs, "CSV of measured runs: \"WORKLOAD\",scheme,measured_ms (tools/gpu/executor.sh writes it)");
  cmd->add_option("--simulated", a->simulated, "A simulated tasp-timeline/1 (tasp simulate --timeline)");
  cmd->add_option("--measured", a->measured, "The measured tasp-timeline/1 of the same run (tasp run --timeline)");
  cmd->add_option("-t,--topology", a->topology, "Topology the runs were made on (for --runs)")->capture_default_str();
  cmd->add_option("--profile", a->profile, "Machine profile for the predictions (default: built-in)");
  cmd->add_option("--pass", a->pass, "fwd | bwd | fwd+bwd: what the --runs rows measured, unless the CSV has a pass column")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->out, "Directory for report.md and report.html")->capture_default_str();
  cmd->callback([a] {
    std::ostringstream md, html;
    md << "# tasp report\n\n";
    html << "<h1>tasp report</h1>\n";
    if (a->runs.empty() && (a->simulated.empty() || a->measured.empty()))
      throw InputError("report: give --runs CSV, or --simulated and --measured timelines");
    if (!a->runs.empty()) {
      const Topology t = load_topology(a->topology);
      const auto prof = choose_profile(a->profile, t, &std::cerr);
      planner::Passes check;
      if (!parse_passes(a->pass, &check)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + a->pass + "'");
      auto rows = read_runs(a->runs, a->pass);
      std::vector<double> errs;
      for (auto& r : rows) {
        const Workload w = parse_workload(r.config);
        simulator::SimOptions so;
        parse_passes(r.pass, &so.passes);
        auto sim = run_schemes(t, w, select_schemes(r.scheme, t, w.causal), prof, so);
        r.predicted_ms = sim[0].sim.total_us / 1e3;
        r.comm_ms = sim[0].sim.comm_us / 1e3;
        r.compute_ms = sim[0].sim.compute_us / 1e3;
        errs.push_back(std::abs(r.error()));
      }
      std::sort(errs.begin(), errs.end());
      const double med = errs[errs.size() / 2];
      md << "Topology " << t.name << ", profile " << prof.name << ", " << rows.size() << " runs: median |error| "
         << std::fixed << std::setprecision(1) << 100 * med << "%, max " << 100 * errs.back() << "%.\n\n"
         << "| workload | scheme | pass | measured ms | predicted ms | error | predicted comm ms | predicted compute ms |\n"
            "|---|---|---|---:|---:|---:|---:|---:|\n";
      html << "<p>Topology " << esc(t.name) << ", profile " << esc(prof.name) << ", " << rows.size()
           << " runs: median |error| " << std::fixed << std::setprecision(1) << 100 * med << "%, max " << 100 * errs.back()
           << "%.</p>\n" << bars_svg(rows)
           << "<table><tr><th>workload</th><th>scheme</th><th>pass</th><th>measured ms</th><th>predicted ms</th><th>error</th>"
              "<th>pred. comm ms</th><th>pred. compute ms</th></tr>\n";
      for (const auto& r : rows) {
        md << "| " << r.config << " | " << r.scheme << " | " << r.pass << " | " << std::setprecision(3) << r.measured_ms << " | "
           << r.predicted_ms << " | " << std::setprecision(1) << 100 * r.error() << "% | " << std::setprecision(3)
           << r.comm_ms << " | " << r.compute_ms << " |\n";
        html << "<tr><td>" << esc(r.config) << "</td><td>" << esc(r.scheme) << "</td><td>" << r.pass << "</td><td>"
             << std::setprecision(3)
             << r.measured_ms << "</td><td>" << r.predicted_ms << "</td><td>" << std::setprecision(1) << 100 * r.error()
             << "%</td><td>" << std::setprecision(3) << r.comm_ms << "</td><td>" << r.compute_ms << "</td></tr>\n";
      }
      html << "</table>\n";
      md << "\nThe HTML report has the bar chart (measured blue, predicted orange).\n";
    }
    if (!a->simulated.empty() && !a->measured.empty()) {
      const Timeline s = read_timeline_file(a->simulated), m = read_timeline_file(a->measured);
      if (s.per_rank.empty() || m.per_rank.empty()) throw InputError("report: empty timeline");
      const size_t steps = std::min(s.per_rank[0].size(), m.per_rank[0].size());
      md << "\n## " << m.scheme << " on " << m.ranks << " ranks, " << m.workload << "\n\n"
         << "| | total ms | comm ms | compute ms | exposed comm ms |\n|---|---:|---:|---:|---:|\n";
      for (auto* t : {&s, &m})
        md << "| " << (t == &s ? "simulated" : "measured") << " | " << std::fixed << std::setprecision(3) << t->total_us() / 1e3
           << " | " << t->comm_us() / 1e3 << " | " << t->compute_us() / 1e3 << " | " << t->exposed_comm_us() / 1e3 << " |\n";
      md << "\nError of the total: " << std::setprecision(1) << 100 * (s.total_us() - m.total_us()) / m.total_us()
         << "%. Steps compared: " << steps << ".\n";
      html << "<h2>" << esc(m.scheme) << " on " << m.ranks << " ranks, " << esc(m.workload) << "</h2>\n<p>total simulated "
           << std::setprecision(3) << s.total_us() / 1e3 << " ms, measured " << m.total_us() / 1e3 << " ms</p>\n"
           << gantt_svg({{"simulated", &s}, {"measured", &m}});
    }
    write_pair(a->out, md.str(), html.str());
    std::cout << md.str();
  });
}

}  // namespace tasp::cli
