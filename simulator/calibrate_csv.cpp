// Measurement CSV for `tasp calibrate --fit` (format in calibrate.hpp).
#include <map>
#include <sstream>

#include "planner/topology.hpp"
#include "simulator/calibrate.hpp"
#include "simulator/microbench.hpp"

namespace tasp::simulator {
namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) {
    size_t a = cell.find_first_not_of(" \t\r"), b = cell.find_last_not_of(" \t\r");
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

}  // namespace

Samples read_samples_csv(const std::string& text, const std::string& file) {
  Samples s;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, size_t> col;
  int lineno = 0;
  auto fail = [&](const std::string& field, const std::string& msg) {
    throw planner::InputError(file + ":" + std::to_string(lineno) + ": " + field + ": " + msg);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    auto cells = split_csv(line);
    if (col.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i].empty()) fail("(header)", "empty column name in column " + std::to_string(i + 1));
        if (!col.emplace(cells[i], i).second) fail(cells[i], "column named twice in the header");
      }
      for (const char* need : {"kind", "ms"})
        if (!col.count(need)) fail("(header)", std::string("missing column '") + need + "'");
      continue;
    }
    if (cells.size() != col.size())
      fail("(row)", "has " + std::to_string(cells.size()) + " cells, the header " + std::to_string(col.size()));
    auto get = [&](const std::string& name) -> const std::string& {
      auto it = col.find(name);
      if (it == col.end() || cells[it->second].empty()) fail(name, "missing");
      return cells[it->second];
    };
    auto number = [&](const std::string& name, bool integer) {
      const std::string& v = get(name);
      size_t used = 0;
      double x = 0;
      try {
        x = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      // Integers become ints: above 2^30 one is no count a machine measured (and its cast would be undefined:
      // found by tools/fuzz.sh, H=38888888882).
      if (used != v.size() || !(x > 0) || !std::isfinite(x) || (integer && (x != std::floor(x) || x > (1 << 30))))
        fail(name, "expected a positive " + std::string(integer ? "integer up to 2^30" : "number") + ", got '" + v + "'");
      return x;
    };
    const std::string kind = get("kind");
    const double ms = number("ms", false);
    if (is_comm_kind(kind)) {
      CommSample c{kind, int(number("ranks", true)), number("bytes", false), ms * 1e3};
      if (c.ranks < 2) fail("ranks", "must be >= 2");
      s.comm.push_back(c);
    } else if (kind == "attention" || kind == "attention_bwd") {
      KernelSample k;
      k.backward = kind == "attention_bwd";
      k.B = int(number("B", true)), k.H = int(number("H", true)), k.D = int(number("D", true));
      if (col.count("Hkv") && !cells[col["Hkv"]].empty()) {
        k.Hkv = int(number("Hkv", true));
        if (k.H % k.Hkv != 0) fail("Hkv", "must divide H (" + std::to_string(k.H) + "), got " + std::to_string(k.Hkv));
      }
      if (col.count("S") && !cells[col["S"]].empty()) k.lq = k.lk = number("S", true);
      else k.lq = number("Lq", true), k.lk = number("Lk", true);
      const std::string c = col.count("causal") ? cells[col["causal"]] : "";
      if (c != "" && c != "0" && c != "1" && c != "true" && c != "false") fail("causal", "expected 0/1/true/false");
      k.causal = c == "1" || c == "true";
      k.us = ms * 1e3;
      if (col.count("heat_ms") && !cells[col["heat_ms"]].empty() && cells[col["heat_ms"]] != "0")
        k.heat_ms = number("heat_ms", false);
      if (col.count("mix")) {
        const std::string& m = cells[col["mix"]];
        if (m != "" && m != "0" && m != "1") fail("mix", "expected 0 or 1");
        k.mix = m == "1";
      }
      s.kernel.push_back(k);
    } else {
      fail("kind", "unknown kind '" + kind + "' (ring, multi, pairs, allgather, attention, attention_bwd)");
    }
  }
  if (col.empty()) throw planner::InputError(file + ": empty measurement file (no header)");
  if (s.comm.empty() && s.kernel.empty()) throw planner::InputError(file + ": no measurement rows");
  return s;
}

}  // namespace tasp::simulator
