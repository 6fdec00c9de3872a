#include "planner/workload.hpp"

#include <numeric>
#include <set>
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
    if (num.empty() || num[0] == '-' || num[0] == '+') return -1;
    const long x = std::stol(num, &used);
    if (used != num.size() || x > (1L << 50) / mult) return -1;
    return x * mult;
  } catch (const std::exception&) {
    return -1;
  }
}

namespace {

void apply(Workload& w, const std::string& text, bool need_core) {
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> seen;
  bool got_hkv = false;
  auto fail = [&](const std::string& m) { throw InputError("--workload '" + text + "': " + m); };
  auto once = [&](const std::string& k) {
    if (!seen.insert(k).second) fail(k + " given twice");
  };
  // A positive integer that fits `limit`; names the key when it is negative, zero or not a number.
  auto positive = [&](const std::string& k, const std::string& v, long limit) {
    if (!v.empty() && v[0] == '-') fail(k + "=" + v + ": must be positive");
    const long x = parse_count(v);
    if (x < 0) fail(k + "=" + v + ": not an integer");
    if (x == 0) fail(k + "=" + v + ": must be positive");
    if (x > limit) fail(k + "=" + v + ": larger than " + std::to_string(limit));
    return x;
  };
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "causal" || item == "full") {
      once("causal/full");
      w.causal = item == "causal";
      continue;
    }
    if (item == "bf16" || item == "fp16") {
      once("dtype");
      w.dtype = item;
      continue;
    }
    const auto eq = item.find('=');
    if (eq == std::string::npos) fail("expected KEY=VALUE, got '" + item + "'");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    once(k == "dtype" ? "dtype" : k);
    if (k == "B") w.B = int(positive(k, v, 1 << 20));
    else if (k == "S") w.S = positive(k, v, 1L << 40);
    else if (k == "H") w.H = int(positive(k, v, 1 << 16));
    else if (k == "Hkv") w.Hkv = int(positive(k, v, 1 << 16)), got_hkv = true;
    else if (k == "D") w.D = int(positive(k, v, 1 << 16));
    else if (k == "dtype") {
      if (v != "bf16" && v != "fp16") fail("dtype=" + v + ": expected bf16 or fp16");
      w.dtype = v;
    } else if (k == "window") {
      // LEFT or LEFT:RIGHT; 0 is a valid side (RIGHT=0: nothing after the query), -1 unbounded.
      const auto colon = v.find(':');
      const std::string l = v.substr(0, colon), r = colon == std::string::npos ? "0" : v.substr(colon + 1);
      auto side = [&](const std::string& s) -> long {
        if (s == "-1") return -1;
        if (!s.empty() && s[0] == '-') fail("window=" + v + ": a side is a count of keys (>= 0) or -1 (unbounded)");
        const long x = parse_count(s);
        if (x < 0) fail("window=" + v + ": expected LEFT or LEFT:RIGHT (counts of keys)");
        return x;
      };
      w.window_left = side(l), w.window_right = side(r);
    } else if (k == "docs") {
      w.docs.clear();
      std::stringstream ds(v);
      std::string len;
      while (std::getline(ds, len, '+')) w.docs.push_back(positive("docs", len, 1L << 40));
      if (w.docs.empty()) fail("docs=: expected lengths like 4096+1000+3904");
    } else {
      fail("unknown key '" + k + "' (expected B, S, H, Hkv, D, causal, full, bf16, fp16, dtype, window, docs)");
    }
  }
  if (need_core && (!seen.count("S") || !seen.count("H") || !seen.count("D"))) fail("needs S, H and D");
  if (!got_hkv && w.Hkv == 0) w.Hkv = w.H;  // over a config, H alone keeps the config's Hkv
  if (w.Hkv > 0 && w.H % w.Hkv)
    fail("H=" + std::to_string(w.H) + " is not a multiple of Hkv=" + std::to_string(w.Hkv) + (got_hkv ? "" : " (give Hkv)"));
  if (w.causal && w.window_right > 0)
    fail("window=" + std::to_string(w.window_left) + ":" + std::to_string(w.window_right) +
         ": a causal query sees no key after it; give window=LEFT (or LEFT:0)");
  if (!w.docs.empty()) {
    const long sum = std::accumulate(w.docs.begin(), w.docs.end(), 0L);
    if (sum != w.S) fail("docs: the lengths sum to " + std::to_string(sum) + ", not S=" + std::to_string(w.S));
  }
}

}  // namespace

Workload parse_workload(const std::string& text) {
  Workload w;
  apply(w, text, true);
  return w;
}

Workload parse_workload_over(const Workload& base, const std::string& text) {
  Workload w = base;
  apply(w, text, base.S == 0);
  return w;
}

std::string to_string(const Workload& w) {
  std::ostringstream o;
  o << "B=" << w.B << ",S=" << w.S << ",H=" << w.H << ",Hkv=" << w.Hkv << ",D=" << w.D << (w.causal ? ",causal" : "");
  if (w.dtype != "bf16") o << "," << w.dtype;
  if (w.windowed()) o << ",window=" << w.window_left << ":" << w.window_right;
  if (!w.docs.empty()) {
    o << ",docs=";
    for (size_t i = 0; i < w.docs.size(); ++i) o << (i ? "+" : "") << w.docs[i];
  }
  return o.str();
}

}  // namespace tasp::planner
