#include "planner/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "planner/topology.hpp"

namespace tasp::planner {

double StepTiming::end_us() const { return std::max({comm_end_us, compute_end_us, post_us() > 0 ? post_end_us : 0.0}); }

double Timeline::total_us() const {
  double t = 0;
  for (const auto& r : per_rank)
    for (const auto& s : r) t = std::max(t, s.end_us());
  return t;
}
// The slowest rank's sum of one kind of interval.
static double slowest_sum(const std::vector<std::vector<StepTiming>>& per_rank, double StepTiming::*start,
                          double StepTiming::*end) {
  double m = 0;
  for (const auto& r : per_rank) {
    double c = 0;
    for (const auto& s : r) c += s.*end - s.*start;
    m = std::max(m, c);
  }
  return m;
}
double Timeline::comm_us() const { return slowest_sum(per_rank, &StepTiming::comm_start_us, &StepTiming::comm_end_us); }
double Timeline::compute_us() const {
  double m = 0;
  for (const auto& r : per_rank) {
    double c = 0;
    for (const auto& s : r) c += s.compute_end_us - s.compute_start_us + s.post_us();
    m = std::max(m, c);
  }
  return m;
}
double Timeline::exposed_comm_us() const { return std::max(0.0, total_us() - compute_us()); }

Timeline::PassBytes Timeline::busiest_sent() const {
  PassBytes most;
  for (const auto& rank : per_rank) {
    PassBytes mine;
    for (size_t s = 0; s < rank.size(); ++s) (backward_step(int(s)) ? mine.bwd : mine.fwd) += rank[s].bytes;
    most.fwd = std::max(most.fwd, mine.fwd), most.bwd = std::max(most.bwd, mine.bwd);
  }
  return most;
}

Timeline::PassBytes Timeline::total_sent() const {
  PassBytes all;
  for (const auto& rank : per_rank)
    for (size_t s = 0; s < rank.size(); ++s) (backward_step(int(s)) ? all.bwd : all.fwd) += rank[s].bytes;
  return all;
}

Timeline::PerPass Timeline::slowest_compute() const {
  PerPass most;
  for (const auto& rank : per_rank) {
    PerPass mine;
    for (size_t s = 0; s < rank.size(); ++s)
      (backward_step(int(s)) ? mine.bwd : mine.fwd) += rank[s].compute_end_us - rank[s].compute_start_us + rank[s].post_us();
    most.fwd = std::max(most.fwd, mine.fwd), most.bwd = std::max(most.bwd, mine.bwd);
  }
  return most;
}

RunBound run_bound(const Timeline& t, double peak_gbps, double bwd_peak_gbps, double alone_gbps) {
  const Timeline::PerPass sent = t.busiest_sent(), all = t.total_sent(), kernels = t.slowest_compute();
  if (bwd_peak_gbps < 0) bwd_peak_gbps = peak_gbps;
  const double n = double(std::max<size_t>(1, t.per_rank.size()));
  auto at = [](double bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e3) : 0.0; };
  auto pass_us = [&](double busiest, double total, double peak) {
    if (alone_gbps <= 0) return at(busiest, peak);
    const double alone = std::max(alone_gbps, peak);
    double us = std::max(at(busiest, alone), at(total, n * peak));
    // Two GPUs: the lighter's bytes go beside as many of the busier's, each at the peak, and the rest of the busier's
    // alone, no faster than `alone`. Where one GPU alone cannot fill the medium (through host memory on 2x H200, 48
    // GB/s alone against 2 x 32 together), n x the peak above is more than the busier GPU can take once the other
    // is done: allgather pruned at B=1 S=8192 sends 67 and 34 MB a pass, 1.74 ms so, not 1.56.
    if (n == 2) us = std::max(us, at(total - busiest, peak) + at(2 * busiest - total, alone));
    return us;
  };
  const double fwd = pass_us(sent.fwd, all.fwd, peak_gbps), bwd = pass_us(sent.bwd, all.bwd, bwd_peak_gbps);
  RunBound b;
  b.kernels_us = t.compute_us();
  b.bytes_us = fwd + bwd;
  b.whole_us = std::max(b.kernels_us, b.bytes_us);
  b.per_pass_us = std::max(kernels.fwd, fwd) + std::max(kernels.bwd, bwd);
  return b;
}

void Timeline::append(const Timeline& later, double offset_us) {
  const size_t rows = std::min(per_rank.size(), later.per_rank.size());
  per_rank.resize(rows);
  for (size_t r = 0; r < rows; ++r)
    for (StepTiming s : later.per_rank[r]) {
      s.comm_start_us += offset_us, s.comm_end_us += offset_us;
      s.compute_start_us += offset_us, s.compute_end_us += offset_us;
      s.post_start_us += offset_us, s.post_end_us += offset_us;
      per_rank[r].push_back(s);
    }
}

namespace {

double slowest_end(const Timeline& t, size_t step) {
  double end = 0;
  for (const auto& r : t.per_rank) end = std::max(end, r[step].end_us());
  return end;
}

}  // namespace

void write_steps_table(std::ostream& o, const Timeline& t, const Timeline* predicted, bool with_fwd) {
  const size_t steps = t.per_rank.empty() ? 0 : t.per_rank[0].size();
  const bool with_pred = predicted && !predicted->per_rank.empty() && predicted->per_rank[0].size() == steps;
  char line[128];
  o << "  pass step     comm_us  compute_us      end_us" << (with_pred ? "  predicted_end_us" : "") << "  (slowest rank)\n";
  for (size_t s = 0; s < steps; ++s) {
    double cm = 0, cp = 0;
    for (const auto& r : t.per_rank) {
      cm = std::max(cm, r[s].comm_end_us - r[s].comm_start_us);
      cp = std::max(cp, r[s].compute_end_us - r[s].compute_start_us + r[s].post_us());
    }
    const bool b = t.backward_step(int(s));
    std::snprintf(line, sizeof line, "  %s %4d%12.1f%12.1f%12.1f", b ? "bwd" : "fwd", b && with_fwd ? int(s) - t.fwd_steps : int(s),
                  cm, cp, slowest_end(t, s));
    o << line;
    if (with_pred) std::snprintf(line, sizeof line, "%18.1f", slowest_end(*predicted, s)), o << line;
    o << "\n";
  }
}

void write_timeline_json(std::ostream& o, const Timeline& t) {
  nlohmann::json j;
  j["format"] = "tasp-timeline/1";
  j["source"] = t.source;
  j["scheme"] = t.scheme;
  j["topology"] = t.topology;
  j["workload"] = t.workload;
  j["ranks"] = t.ranks;
  j["pass"] = t.pass;
  if (t.pass == "fwd+bwd") j["fwd_steps"] = t.fwd_steps;
  j["steps"] = t.per_rank.empty() ? 0 : t.per_rank[0].size();
  j["total_us"] = t.total_us();
  j["comm_us"] = t.comm_us();
  j["compute_us"] = t.compute_us();
  j["exposed_comm_us"] = t.exposed_comm_us();
  j["ccr"] = t.compute_us() > 0 ? t.comm_us() / t.compute_us() : 0.0;
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < t.per_rank.size(); ++r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : t.per_rank[r]) {
      nlohmann::json st = {{"comm_start_us", s.comm_start_us}, {"comm_end_us", s.comm_end_us},
                           {"compute_start_us", s.compute_start_us}, {"compute_end_us", s.compute_end_us},
                           {"bytes", s.bytes}, {"flops", s.flops}};
      if (s.post_us() > 0) st["post_start_us"] = s.post_start_us, st["post_end_us"] = s.post_end_us;
      steps.push_back(st);
    }
    ranks.push_back({{"rank", r}, {"steps", steps}});
  }
  j["per_rank"] = ranks;
  o << j.dump(1) << "\n";
}

void write_chrome_trace(std::ostream& o, const Timeline& t) {
  nlohmann::json ev = nlohmann::json::array();
  for (size_t r = 0; r < t.per_rank.size(); ++r)
    for (size_t s = 0; s < t.per_rank[r].size(); ++s) {
      const auto& x = t.per_rank[r][s];
      const std::string step = (t.backward_step(int(s)) ? "bwd " : "fwd ") +
                               std::to_string(t.pass == "fwd+bwd" && t.backward_step(int(s)) ? int(s) - t.fwd_steps : int(s));
      if (x.comm_end_us > x.comm_start_us)
        ev.push_back({{"name", "comm " + step}, {"ph", "X"}, {"pid", r}, {"tid", 0},
                      {"ts", x.comm_start_us}, {"dur", x.comm_end_us - x.comm_start_us}, {"args", {{"bytes", x.bytes}}}});
      if (x.compute_end_us > x.compute_start_us)
        ev.push_back({{"name", "compute " + step}, {"ph", "X"}, {"pid", r}, {"tid", 1},
                      {"ts", x.compute_start_us}, {"dur", x.compute_end_us - x.compute_start_us}, {"args", {{"flops", x.flops}}}});
      if (x.post_us() > 0)
        ev.push_back({{"name", "accumulate " + step}, {"ph", "X"}, {"pid", r}, {"tid", 1}, {"ts", x.post_start_us},
                      {"dur", x.post_us()}});
    }
  o << nlohmann::json{{"traceEvents", ev}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

namespace {

// An integer field as the file states it: a JSON integer in [lo, 2^30] (a float or a string is refused, not cast:
// a float beyond int's range cast to int is undefined, which fuzzing the reader found).
int int_field(const nlohmann::json& j, const char* key, const std::string& name, int lo, const int* fallback) {
  if (!j.contains(key)) {
    if (fallback) return *fallback;
    throw InputError(name + ": " + key + ": missing");
  }
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > (1LL << 30))
    throw InputError(name + ": " + key + ": expected an integer from " + std::to_string(lo) + ", got " + v.dump());
  return int(v.get<long long>());
}

// A time, byte or FLOP count: a finite number >= 0.
double amount(const nlohmann::json& s, const char* key, const std::string& where, bool required) {
  if (!s.contains(key)) {
    if (required) throw InputError(where + ": " + key + ": missing");
    return 0;
  }
  const nlohmann::json& v = s.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    throw InputError(where + ": " + key + ": expected a finite number >= 0, got " + v.dump());
  return v.get<double>();
}

}  // namespace

Timeline read_timeline_json(std::istream& in, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw InputError(name + ": " + e.what());
  }
  try {
    if (!j.is_object() || !j.contains("format") || j.at("format") != "tasp-timeline/1")
      throw InputError(name + ": format: not tasp-timeline/1");
    Timeline t;
    t.source = j.at("source").get<std::string>();
    t.scheme = j.value("scheme", "");
    t.topology = j.value("topology", "");
    t.workload = j.value("workload", "");
    t.ranks = int_field(j, "ranks", name, 1, nullptr);
    t.pass = j.value("pass", "fwd");
    if (t.pass != "fwd" && t.pass != "bwd" && t.pass != "fwd+bwd") throw InputError(name + ": pass: expected fwd, bwd or fwd+bwd");
    const int none = -1;
    t.fwd_steps = int_field(j, "fwd_steps", name, -1, &none);
    if (t.pass == "fwd+bwd" && t.fwd_steps < 0) throw InputError(name + ": fwd_steps: missing for a fwd+bwd timeline");
    const auto& ranks = j.at("per_rank");
    if (!ranks.is_array() || ranks.empty() || ranks.size() > size_t(t.ranks))
      throw InputError(name + ": per_rank: expected 1 to ranks (" + std::to_string(t.ranks) + ") ranks' steps");
    for (const auto& r : ranks) {
      std::vector<StepTiming> steps;
      const auto& list = r.at("steps");
      if (!list.is_array()) throw InputError(name + ": per_rank: steps: expected a list");
      for (const auto& s : list) {
        const std::string at = name + ": per_rank " + std::to_string(t.per_rank.size()) + " step " + std::to_string(steps.size());
        steps.push_back({amount(s, "comm_start_us", at, true), amount(s, "comm_end_us", at, true),
                         amount(s, "compute_start_us", at, true), amount(s, "compute_end_us", at, true),
                         amount(s, "bytes", at, true), amount(s, "flops", at, true), amount(s, "post_start_us", at, false),
                         amount(s, "post_end_us", at, false)});
      }
      // Every rank runs the plan's steps: the readers line ranks up step by step.
      if (!t.per_rank.empty() && steps.size() != t.per_rank[0].size())
        throw InputError(name + ": per_rank " + std::to_string(t.per_rank.size()) + ": " + std::to_string(steps.size()) +
                         " steps, rank 0 has " + std::to_string(t.per_rank[0].size()));
      t.per_rank.push_back(std::move(steps));
    }
    if (t.fwd_steps > int(t.per_rank[0].size()))
      throw InputError(name + ": fwd_steps: " + std::to_string(t.fwd_steps) + ", more than the " +
                       std::to_string(t.per_rank[0].size()) + " steps");
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(name + ": " + e.what());
  }
}

Timeline read_timeline_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open timeline");
  return read_timeline_json(in, path);
}

}  // namespace tasp::planner
