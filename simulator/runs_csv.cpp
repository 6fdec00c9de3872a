#include "simulator/runs_csv.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "planner/plan.hpp"
#include "planner/topology.hpp"

namespace tasp::simulator {

std::vector<MeasuredRun> read_runs_csv(const std::string& text, const std::string& name, const std::string& default_pass) {
  std::istringstream in(text);
  std::vector<MeasuredRun> rows;
  std::string line;
  int n = 0, pass_col = -1, ranks_col = -1, transport_col = -1, pieces_col = -1;
  auto fail = [&](const std::string& field, const std::string& what) {
    throw planner::InputError(name + ":" + std::to_string(n) + ": " + field + ": " + what);
  };
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("config,", 0) == 0) {
      std::istringstream h(line);
      std::string col;
      for (int i = 0; std::getline(h, col, ','); ++i)
        if (col == "pass") pass_col = i;
        else if (col == "ranks") ranks_col = i;
        else if (col == "transport") transport_col = i;
        else if (col == "pieces") pieces_col = i;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    // "B=1,...,causal",scheme,measured_ms[,...]: the quoted config holds commas.
    if (line[0] != '"') fail("config", "expected a quoted workload");
    const auto close = line.find('"', 1);
    if (close == std::string::npos) fail("config", "missing closing quote");
    if (close + 1 >= line.size() || line[close + 1] != ',') fail("scheme", "missing after the workload");
    MeasuredRun r;
    r.config = line.substr(1, close - 1);
    r.pass = default_pass;
    r.line = n;
    std::istringstream rest(line.substr(close + 2));
    std::string ms, field;
    std::getline(rest, r.scheme, ',');
    if (r.scheme.empty()) fail("scheme", "missing");
    std::getline(rest, ms, ',');
    auto count = [&](const std::string& what, long most) {
      char* end = nullptr;
      const long v = std::strtol(field.c_str(), &end, 10);
      if (field.empty() || *end || v < 1 || v > most)
        fail(what, "expected an integer from 1 to " + std::to_string(most) + ", got '" + field + "'");
      return int(v);
    };
    for (int col = 3; std::getline(rest, field, ','); ++col)
      if (col == ranks_col) {
        r.ranks = count("ranks", 1 << 20);
      } else if (col == pieces_col) {
        if (!field.empty() && field.back() == 'p') r.pruned = true, field.pop_back();
        else if (!field.empty() && field.back() == 'q') r.pruned = r.moved = true, field.pop_back();
        if (field.find('+') == std::string::npos) {
          r.gather_pieces = count("pieces", 64);
          continue;
        }
        // Steps of several pieces: "a+b+c", each at least 1, 64 in all at most.
        std::istringstream parts(field + "+");
        std::string part;
        r.gather_pieces = 0;
        while (std::getline(parts, part, '+')) {
          char* end = nullptr;
          const long v = std::strtol(part.c_str(), &end, 10);
          if (part.empty() || *end || v < 1 || r.gather_pieces + v > 64)
            fail("pieces", "expected a count of pieces or steps of them (2+1+1), 64 in all at most, got '" + field + "'");
          r.gather_steps.push_back(int(v)), r.gather_pieces += int(v);
        }
      } else if (col == pass_col) {
        planner::Passes p;
        if (!planner::parse_passes(field, &p)) fail("pass", "expected fwd, bwd or fwd+bwd, got '" + field + "'");
        r.pass = field;
      } else if (col == transport_col) {
        if (field != "collectives" && field != "sendrecv" && !field.empty())
          fail("transport", "expected collectives or sendrecv, got '" + field + "'");
        r.transport = field;
      }
    char* end = nullptr;
    r.measured_ms = std::strtod(ms.c_str(), &end);
    if (ms.empty() || *end || !std::isfinite(r.measured_ms) || !(r.measured_ms > 0))
      fail("measured_ms", "expected a positive number, got '" + ms + "'");
    rows.push_back(r);
  }
  if (rows.empty()) throw planner::InputError(name + ": no runs");
  return rows;
}

}  // namespace tasp::simulator
