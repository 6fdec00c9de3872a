// tasp report: measured against simulated, as markdown and HTML with SVG plots.
//   --runs CSV (config,scheme,measured_ms): every row simulated on --topology with --profile -> table,
//       error per row, median |error|, a bar chart per configuration.
//   --simulated T1 --measured T2 (tasp-timeline/1): step by step comparison and a Gantt chart of both.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "planner/schemes/schemes.hpp"
#include "planner/timeline.hpp"
#include "tools/tasp/cli.hpp"
#include "simulator/runs_csv.hpp"
#include "simulator/validation.hpp"
#include "tools/tasp/compare.hpp"
#include "tools/tasp/report_svg.hpp"

namespace tasp::cli {
namespace {

using namespace tasp::planner;

struct RunRow : simulator::MeasuredRun {
  double predicted_ms = 0, comm_ms = 0, compute_ms = 0;
  double error() const { return (predicted_ms - measured_ms) / measured_ms; }
};

std::vector<RunRow> read_runs(const std::string& path, const std::string& default_pass) {
  std::vector<RunRow> rows;
  for (auto& m : simulator::read_runs_csv(read_text_file(path, "runs file"), path, default_pass)) rows.push_back({m});
  return rows;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

std::string pct(double x) {
  std::ostringstream o;
  o << std::showpos << std::fixed << std::setprecision(1) << 100 * x << "%";
  return o.str();
}

void write_pair(const std::string& dir, const std::string& md, const std::string& html_body) {
  std::filesystem::create_directories(dir);
  write_output(dir + "/report.md", [&](std::ostream& o) { o << md; });
  write_output(dir + "/report.html", [&](std::ostream& o) {
    o << "<!doctype html><html><head><meta charset='utf-8'><title>tasp report</title><style>body{font-family:Helvetica,"
         "Arial,sans-serif;max-width:1340px;margin:1.5em auto;color:#222}table{border-collapse:collapse;font-size:13px}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}td:first-child,td:nth-child(2)"
         "{text-align:left}.big{font-size:15px}.tie{color:#555}</style></head><body>\n"
      << html_body << "</body></html>\n";
  });
}

}  // namespace

void register_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Simulated against measured: markdown + HTML with SVG plots");
  struct Args {
    std::string runs, simulated, measured, out = "report", topology, profile, pass = "fwd", clock = "sustained";
    double tie_margin = 0.02;
    CollectivesFlags collectives;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--runs", a->runs, "CSV of measured runs: \"WORKLOAD\",scheme,measured_ms (tools/gpu/compare.sh and model.sh write it;\n"
                                     "a header may name pass, ranks, transport and pieces columns: each row is predicted as it ran)");
  cmd->add_option("--simulated", a->simulated, "A simulated tasp-timeline/1 (tasp simulate --timeline)");
  cmd->add_option("--measured", a->measured, "The measured tasp-timeline/1 of the same run (tasp run --timeline)");
  cmd->add_option("-t,--topology", a->topology, "Topology the runs were made on (for --runs; default: complete:N from the CSV's\n"
                                               "ranks column, else h200-hgx-8)");
  cmd->add_option("--profile", a->profile, "Machine profile for the predictions (default: built-in)");
  cmd->add_option("--pass", a->pass, "fwd | bwd | fwd+bwd: what the --runs rows measured, unless the CSV has a pass column")
      ->capture_default_str();
  cmd->add_option("--clock", a->clock, "Kernel clock of the predictions: sustained | boost (see tasp simulate --help)")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->out, "Directory for report.md and report.html")->capture_default_str();
  cmd->add_option("--tie", a->tie_margin, "Schemes measured within this fraction of the fastest count as tied")->capture_default_str();
  // allgather predicted with the transport its runs took, for rows without a transport column: on the socket fabric
  // of 2026-11-26 the send/recv prediction was 31-49% above runs made with --collectives.
  add_collectives_flags(cmd, a->collectives);
  cmd->callback([a] {
    std::ostringstream md, html;
    md << "# tasp report\n\n";
    html << "<h1>tasp report</h1>\n";
    if (a->runs.empty() && (a->simulated.empty() || a->measured.empty()))
      throw InputError("report: give --runs CSV, or --simulated and --measured timelines");
    if (!a->runs.empty()) {
      planner::Passes check;
      if (!parse_passes(a->pass, &check)) throw InputError("--pass: expected fwd, bwd or fwd+bwd, got '" + a->pass + "'");
      auto rows = read_runs(a->runs, a->pass);
      std::string topo_name = a->topology;
      if (topo_name.empty()) topo_name = rows[0].ranks > 0 ? "complete:" + std::to_string(rows[0].ranks) : "h200-hgx-8";
      const Topology t = load_topology(topo_name);
      for (const auto& r : rows)
        if (r.ranks > 0 && r.ranks != t.ranks())
          throw InputError(a->runs + ":" + std::to_string(r.line) + ": ranks: the run was on " + std::to_string(r.ranks) +
                           " GPUs, topology " + t.name + " has " + std::to_string(t.ranks()) +
                           " (give -t with the topology the runs were made on, e.g. complete:" + std::to_string(r.ranks) + ")");
      const auto prof = choose_profile(a->profile, t, &std::cerr);
      std::vector<simulator::RunPoint> points;
      std::vector<std::string> configs;
      for (auto& r : rows) {
        const Workload w = parse_workload(r.config);
        simulator::SimOptions so;
        so.clock = parse_clock(a->clock);
        // The row's own transport where the CSV records it, else the flags' (by default what the profile times faster).
        so.collectives = r.transport == "collectives" ? simulator::Collectives::On
                         : r.transport == "sendrecv"  ? simulator::Collectives::Off
                                                      : a->collectives.choice();
        parse_passes(r.pass, &so.passes);
        PlanChoices as_run;
        as_run.gather_pieces = r.gather_pieces, as_run.gather_steps = r.gather_steps, as_run.prune_plain = r.pruned;
        as_run.move_queries = r.moved;
        auto sim = run_schemes(t, w, select_schemes(r.scheme, t, w.causal), prof, so, nullptr, as_run);
        r.predicted_ms = sim[0].sim.total_us / 1e3;
        r.comm_ms = sim[0].sim.comm_us / 1e3;
        r.compute_ms = sim[0].sim.compute_us / 1e3;
        const std::string key = r.config + (r.pass == "fwd" ? "" : "," + r.pass);
        points.push_back({key, r.scheme, r.measured_ms, r.predicted_ms});
        if (std::find(configs.begin(), configs.end(), key) == configs.end()) configs.push_back(key);
      }
      const simulator::Validation v = simulator::validate(points, a->tie_margin);
      std::string common;
      const auto labels = short_labels(configs, &common);
      size_t ties = 0;
      for (const auto& o : v.orders) ties += o.tie;
      std::ostringstream summary;
      summary << "Topology " << t.name << ", profile " << prof.name << ", " << v.runs << " runs in " << v.orders.size()
              << " configurations" << (common.empty() ? std::string() : " (" + common + ")") << ": median |error| " << std::fixed << std::setprecision(1)
              << 100 * v.median_abs << "%, mean signed error (bias) " << pct(v.mean_signed) << ", max |error| "
              << 100 * v.max_abs << "%. Predicted fastest scheme among the measured fastest in "
              << std::setprecision(0) << 100 * v.agreement() << "% of configurations (" << ties << " of "
              << v.orders.size() << " have several schemes within " << 100 * a->tie_margin
              << "% of the fastest: a tie, shown as such)";
      if (v.ranked())
        summary << "; mean rank correlation of predicted and measured order " << std::setprecision(2) << v.mean_rank_correlation()
                << " over the " << v.ranked() << " configurations whose schemes spread beyond the tie";
      else
        summary << "; no configuration's schemes spread beyond the tie, so there is no order to rank";
      summary << ".";
      std::cout << summary.str() << "\n";
      md << summary.str() << "\n\n"
         << "| workload | scheme | pass | measured ms | predicted ms | error | predicted comm ms | predicted compute ms |\n"
            "|---|---|---|---:|---:|---:|---:|---:|\n";
      html << "<p class='big'>" << esc(summary.str()) << "</p>\n"
           << "<p>A positive error means the prediction is slower than the measurement. Where several schemes measure within "
           << std::setprecision(0) << 100 * a->tie_margin
           << "% of the fastest they are marked = (a tie: no single winner to predict); * marks the predicted fastest.</p>\n"
           << scatter_svg(points) << "<h2>Per configuration</h2>\n" << bars_svg(points, v, labels)
           << "<h2>Scheme order</h2><table><tr><th>configuration</th><th>measured fastest</th><th>predicted fastest</th>"
              "<th>agrees</th><th>rank correlation</th></tr>\n";
      for (const auto& o : v.orders) {
        std::string label = o.config;
        for (const auto& [full, shortl] : labels)
          if (full == o.config) label = shortl;
        auto join = [](const std::vector<std::string>& v) {
          std::string out;
          for (const auto& s : v) out += (out.empty() ? "" : " = ") + s;
          return v.size() > 1 ? out + " (tie)" : out;
        };
        html << "<tr><td>" << esc(label) << "</td><td>" << esc(join(o.fastest_measured)) << "</td><td>"
             << esc(join(o.fastest_predicted)) << "</td><td>" << (o.agrees ? "yes" : "no") << "</td><td>"
             << (o.ranked() ? std::to_string(o.spearman).substr(0, 5) : o.all_tied ? std::string("- (all tie)") : std::string("-"))
             << "</td></tr>\n";
      }
      html << "</table><h2>Runs</h2><table><tr><th>workload</th><th>scheme</th><th>pass</th><th>measured ms</th>"
              "<th>predicted ms</th><th>error</th><th>pred. comm ms</th><th>pred. compute ms</th></tr>\n";
      for (const auto& r : rows) {
        const std::string scheme =
            r.scheme + (r.gather_steps.size() > 0 ? " (" + planner::gather_steps_text(r.gather_steps) + " pieces)"
                        : r.gather_pieces > 1 ? " (" + std::to_string(r.gather_pieces) + " pieces)" : "");
        md << "| " << r.config << " | " << scheme << " | " << r.pass << " | " << std::setprecision(3) << r.measured_ms << " | "
           << r.predicted_ms << " | " << pct(r.error()) << " | " << r.comm_ms << " | " << r.compute_ms << " |\n";
        html << "<tr><td>" << esc(r.config) << "</td><td>" << esc(scheme) << "</td><td>" << r.pass << "</td><td>"
             << std::setprecision(3) << r.measured_ms << "</td><td>" << r.predicted_ms << "</td><td>" << pct(r.error())
             << "</td><td>" << r.comm_ms << "</td><td>" << r.compute_ms << "</td></tr>\n";
      }
      html << "</table>\n";
      md << "\nThe HTML report has the charts: predicted against measured, and the schemes of each configuration.\n";
    }
    if (!a->simulated.empty() && !a->measured.empty()) {
      const Timeline s = read_timeline_file(a->simulated), m = read_timeline_file(a->measured);
      if (s.per_rank.empty() || m.per_rank.empty()) throw InputError("report: empty timeline");
      const size_t steps = std::min(s.per_rank[0].size(), m.per_rank[0].size());
      md << "\n## " << m.scheme << " on " << m.ranks << " ranks, " << m.workload << ", " << m.pass << "\n\n"
         << "| | total ms | comm ms | compute ms | exposed comm ms |\n|---|---:|---:|---:|---:|\n";
      for (auto* t : {&s, &m})
        md << "| " << (t == &s ? "simulated" : "measured") << " | " << std::fixed << std::setprecision(3) << t->total_us() / 1e3
           << " | " << t->comm_us() / 1e3 << " | " << t->compute_us() / 1e3 << " | " << t->exposed_comm_us() / 1e3 << " |\n";
      const double err = (s.total_us() - m.total_us()) / m.total_us();
      md << "\nError of the total: " << pct(err) << ". Steps compared: " << steps << ".\n";
      html << "<h2>" << esc(m.scheme) << " on " << m.ranks << " ranks, " << esc(m.workload) << ", " << esc(m.pass)
           << "</h2>\n<p>Total: simulated " << std::setprecision(3) << s.total_us() / 1e3 << " ms, measured " << m.total_us() / 1e3
           << " ms (" << pct(err) << "); per rank the simulated lanes above the measured ones.</p>\n" << gantt_svg(s, m);
    }
    write_pair(a->out, md.str(), html.str());
    std::cout << md.str();
  });
}

}  // namespace tasp::cli
