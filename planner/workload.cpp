#include "planner/workload.hpp"

#include <sstream>

#include "planner/topology.hpp"

namespace tasp::planner {

long parse_count(const std::string& v) {
  try {
    size_t used = 0;
    long mult = 1;
    std::string num = v;
    if (!v.empty() && (v.back() == 'k' || v.back() == 'K')) mult = 1024, num = v.substr(0, v.size() - 1);
    if (!v.empty() && (v.back() == 'm' || v.back() == 'M')) mult = 1024 * 1024, num = v.substr(0, v.size() - 1);
    const long x = std::stol(num, &used) * mult;
    return used == num.size() && !num.empty() && num[0] != '-' && num[0] != '+' ? x : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

Workload parse_workload(const std::string& text) {
  Workload w;
  std::stringstream ss(text);
  std::string item;
  bool got_s = false, got_h = false, got_d = false, got_hkv = false;
  auto fail = [&](const std::string& m) { throw InputError("--workload '" + text + "': " + m); };
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "causal") { w.causal = true; continue; }
    if (item == "full") { w.causal = false; continue; }
    auto eq = item.find('=');
    if (eq == std::string::npos) fail("expected KEY=VALUE, got '" + item + "'");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    long x = parse_count(v);
    if (x < 0) fail(k + ": '" + v + "' is not an integer");
    if (x <= 0) fail(k + ": must be positive");
    if (k == "B") w.B = int(x);
    else if (k == "S") w.S = x, got_s = true;
    else if (k == "H") w.H = int(x), got_h = true;
    else if (k == "Hkv") w.Hkv = int(x), got_hkv = true;
    else if (k == "D") w.D = int(x), got_d = true;
    else fail("unknown key '" + k + "' (expected B, S, H, Hkv, D, causal)");
  }
  if (!got_s || !got_h || !got_d) fail("needs S, H and D");
  if (!got_hkv) w.Hkv = w.H;
  if (w.H % w.Hkv) fail("H must be a multiple of Hkv");
  return w;
}

std::string to_string(const Workload& w) {
  std::ostringstream o;
  o << "B=" << w.B << ",S=" << w.S << ",H=" << w.H << ",Hkv=" << w.Hkv << ",D=" << w.D << (w.causal ? ",causal" : "");
  return o.str();
}

}  // namespace tasp::planner
