// tasp-profile/1 YAML: read with field-naming errors, written back by calibration.
#include <iomanip>
#include <ostream>

#include "planner/yaml_ctx.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {
namespace {

using planner::YamlCtx;

double positive(const YamlCtx& cx, const YAML::Node& n, const std::string& field, bool allow_zero = false) {
  double v = cx.num(n, field);
  if (!(v > 0 || (allow_zero && v == 0))) cx.fail(n, field, allow_zero ? "must be >= 0" : "must be > 0");
  return v;
}

// A list of [x, y] pairs, x increasing; `x_name` and `y_name` name them in errors.
Curve curve(const YamlCtx& cx, const YAML::Node& n, const std::string& field, const std::string& x_name = "bytes",
            const std::string& y_name = "GB/s") {
  const std::string pair = "[" + x_name + ", " + y_name + "]";
  if (!n.IsDefined()) cx.fail(n, field, "missing");
  if (!n.IsSequence() || n.size() == 0) cx.fail(n, field, "expected a list of " + pair + " pairs");
  Curve c;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!n[i].IsSequence() || n[i].size() != 2) cx.fail(n[i], f, "expected " + pair);
    double x = positive(cx, n[i][0], f + "[0]"), y = positive(cx, n[i][1], f + "[1]");
    if (!c.points.empty() && x <= c.points.back().first) cx.fail(n[i], f, x_name + " must increase along the list");
    c.points.push_back({x, y});
  }
  return c;
}

// A rate's GQA curve: [query heads per K/V head, fraction of the MHA rate] from a group of 1.
Curve gqa_curve(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  Curve c = curve(cx, n, field, "group", "fraction");
  for (size_t i = 0; i < c.points.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (c.points[i].first < 1) cx.fail(n[i][0], f + "[0]", "a group is >= 1 query heads per K/V head");
    if (c.points[i].second > 2) cx.fail(n[i][1], f + "[1]", "must be in (0, 2]: a fraction of the MHA rate");
  }
  return c;
}

Profile parse(const YAML::Node& root, const YamlCtx& cx) {
  if (!root.IsDefined() || root.IsNull()) cx.fail(root, "(document)", "empty profile file");
  cx.only_keys(root, "(top level)", {"format", "name", "description", "link_efficiency", "comm", "compute", "executor"});
  Profile p;
  if (root["format"] && cx.str(root["format"], "format") != "tasp-profile/1")
    cx.fail(root["format"], "format", "unsupported format (expected tasp-profile/1)");
  p.name = cx.str(root["name"], "name");
  if (root["description"]) p.description = cx.str(root["description"], "description");
  if (root["link_efficiency"]) {
    p.link_efficiency = positive(cx, root["link_efficiency"], "link_efficiency");
    if (p.link_efficiency > 1) cx.fail(root["link_efficiency"], "link_efficiency", "must be in (0, 1]");
  }
  const YAML::Node comm = root["comm"];
  if (!comm.IsDefined()) cx.fail(root, "comm", "missing");
  if (!comm.IsSequence() || comm.size() == 0) cx.fail(comm, "comm", "expected a non-empty list");
  for (size_t i = 0; i < comm.size(); ++i) {
    const std::string f = "comm[" + std::to_string(i) + "]";
    const YAML::Node c = comm[i];
    cx.only_keys(c, f, {"ranks", "latency_us", "peer_latency_us", "flow_cap_gbps", "rank_cap_gbps", "collective_gbps",
                        "collectives_per_root", "reduce_gbps", "one_root_gbps"});
    CommProfile cp;
    if (!c["ranks"]) cx.fail(c, f + ".ranks", "missing");
    cp.ranks = int(cx.integer(c["ranks"], f + ".ranks"));
    if (cp.ranks < 2) cx.fail(c["ranks"], f + ".ranks", "must be >= 2");
    for (const auto& other : p.comm)
      if (other.ranks == cp.ranks) cx.fail(c["ranks"], f + ".ranks", "duplicate communicator size");
    if (!c["latency_us"]) cx.fail(c, f + ".latency_us", "missing");
    cp.latency_us = positive(cx, c["latency_us"], f + ".latency_us", true);
    if (c["peer_latency_us"]) cp.peer_latency_us = positive(cx, c["peer_latency_us"], f + ".peer_latency_us", true);
    cp.flow_cap_gbps = curve(cx, c["flow_cap_gbps"], f + ".flow_cap_gbps");
    cp.rank_cap_gbps = curve(cx, c["rank_cap_gbps"], f + ".rank_cap_gbps");
    if (c["collective_gbps"]) cp.collective_gbps = curve(cx, c["collective_gbps"], f + ".collective_gbps");
    if (c["reduce_gbps"]) cp.reduce_gbps = curve(cx, c["reduce_gbps"], f + ".reduce_gbps");
    if (c["one_root_gbps"]) cp.one_root_gbps = curve(cx, c["one_root_gbps"], f + ".one_root_gbps");
    if (c["collectives_per_root"]) cp.collectives_per_root = cx.boolean(c["collectives_per_root"], f + ".collectives_per_root");
    p.comm.push_back(cp);
  }
  const YAML::Node k = root["compute"];
  if (!k.IsDefined()) cx.fail(root, "compute", "missing");
  cx.only_keys(k, "compute", {"launch_us", "half_len", "sms", "tile_m", "hbm_gbps", "small_launch_us", "elementwise_gbps", "bwd_estimate", "rates"});
  ComputeProfile& cp = p.compute;
  if (k["launch_us"]) cp.launch_us = positive(cx, k["launch_us"], "compute.launch_us", true);
  if (k["half_len"]) cp.half_len = positive(cx, k["half_len"], "compute.half_len", true);
  if (k["sms"]) {
    cp.sms = int(cx.integer(k["sms"], "compute.sms"));
    if (cp.sms < 1) cx.fail(k["sms"], "compute.sms", "must be >= 1");
  }
  if (k["tile_m"]) {
    cp.tile_m = int(cx.integer(k["tile_m"], "compute.tile_m"));
    if (cp.tile_m < 1) cx.fail(k["tile_m"], "compute.tile_m", "must be >= 1");
  }
  if (k["hbm_gbps"]) cp.hbm_gbps = positive(cx, k["hbm_gbps"], "compute.hbm_gbps");
  if (k["small_launch_us"]) cp.small_launch_us = positive(cx, k["small_launch_us"], "compute.small_launch_us", true);
  if (k["elementwise_gbps"]) cp.elementwise_gbps = positive(cx, k["elementwise_gbps"], "compute.elementwise_gbps");
  if (k["bwd_estimate"]) {
    cp.bwd_estimate = positive(cx, k["bwd_estimate"], "compute.bwd_estimate");
    if (cp.bwd_estimate > 2) cx.fail(k["bwd_estimate"], "compute.bwd_estimate", "must be in (0, 2]");
  }
  const YAML::Node rates = k["rates"];
  if (!rates.IsDefined()) cx.fail(k, "compute.rates", "missing");
  if (!rates.IsSequence() || rates.size() == 0) cx.fail(rates, "compute.rates", "expected a non-empty list");
  for (size_t i = 0; i < rates.size(); ++i) {
    const std::string f = "compute.rates[" + std::to_string(i) + "]";
    cx.only_keys(rates[i], f, {"head_dim", "full_tflops", "causal_tflops", "full_half_len", "causal_half_len", "tile_m",
                               "bwd_full_tflops", "bwd_causal_tflops", "bwd_full_half_len", "bwd_causal_half_len",
                               "sustained", "bwd_sustained", "mix_sustained", "bwd_mix_sustained", "gqa", "bwd_gqa"});
    ComputeRate r;
    if (!rates[i]["head_dim"]) cx.fail(rates[i], f + ".head_dim", "missing");
    r.head_dim = int(cx.integer(rates[i]["head_dim"], f + ".head_dim"));
    if (r.head_dim < 1) cx.fail(rates[i]["head_dim"], f + ".head_dim", "must be >= 1");
    if (!rates[i]["full_tflops"]) cx.fail(rates[i], f + ".full_tflops", "missing");
    r.full_tflops = positive(cx, rates[i]["full_tflops"], f + ".full_tflops");
    r.causal_tflops = rates[i]["causal_tflops"] ? positive(cx, rates[i]["causal_tflops"], f + ".causal_tflops")
                                                : r.full_tflops;
    if (rates[i]["full_half_len"]) r.full_half_len = positive(cx, rates[i]["full_half_len"], f + ".full_half_len", true);
    if (rates[i]["causal_half_len"])
      r.causal_half_len = positive(cx, rates[i]["causal_half_len"], f + ".causal_half_len", true);
    if (rates[i]["tile_m"]) {
      r.tile_m = int(cx.integer(rates[i]["tile_m"], f + ".tile_m"));
      if (r.tile_m < 1) cx.fail(rates[i]["tile_m"], f + ".tile_m", "must be >= 1");
    }
    if (rates[i]["bwd_full_tflops"]) r.bwd_full_tflops = positive(cx, rates[i]["bwd_full_tflops"], f + ".bwd_full_tflops");
    if (rates[i]["bwd_causal_tflops"]) {
      if (!rates[i]["bwd_full_tflops"]) cx.fail(rates[i], f + ".bwd_full_tflops", "missing (bwd_causal_tflops needs it)");
      r.bwd_causal_tflops = positive(cx, rates[i]["bwd_causal_tflops"], f + ".bwd_causal_tflops");
    }
    for (auto [key, field] : {std::pair{"bwd_full_half_len", &r.bwd_full_half_len}, std::pair{"bwd_causal_half_len", &r.bwd_causal_half_len}})
      if (rates[i][key]) *field = positive(cx, rates[i][key], f + "." + key, true);
    for (auto [key, field] : {std::pair{"sustained", &r.sustained}, std::pair{"bwd_sustained", &r.bwd_sustained},
                              std::pair{"mix_sustained", &r.mix_sustained}, std::pair{"bwd_mix_sustained", &r.bwd_mix_sustained}})
      if (rates[i][key]) {
        *field = positive(cx, rates[i][key], f + "." + key);
        if (*field > 1) cx.fail(rates[i][key], f + "." + key, "must be in (0, 1]: a fraction of the rate");
      }
    for (auto [key, field] : {std::pair{"gqa", &r.gqa}, std::pair{"bwd_gqa", &r.bwd_gqa}})
      if (rates[i][key]) *field = gqa_curve(cx, rates[i][key], f + "." + key);
    cp.rates.push_back(r);
  }
  if (const YAML::Node e = root["executor"]; e.IsDefined()) {
    cx.only_keys(e, "executor", {"fwd_start_us", "bwd_start_us", "step_gap_us", "comm_compute_share"});
    if (e["comm_compute_share"]) {
      p.executor.comm_compute_share = positive(cx, e["comm_compute_share"], "executor.comm_compute_share", true);
      if (p.executor.comm_compute_share >= 1)
        cx.fail(e["comm_compute_share"], "executor.comm_compute_share", "must be in [0, 1): a share of the kernel's throughput");
    }
    if (e["fwd_start_us"]) p.executor.fwd_start_us = positive(cx, e["fwd_start_us"], "executor.fwd_start_us", true);
    if (e["bwd_start_us"]) p.executor.bwd_start_us = positive(cx, e["bwd_start_us"], "executor.bwd_start_us", true);
    if (e["step_gap_us"]) p.executor.step_gap_us = positive(cx, e["step_gap_us"], "executor.step_gap_us", true);
  }
  return p;
}

// [[x, y], ...]; whole_x: x written as an integer (message bytes).
void write_points(std::ostream& o, const Curve& c, bool whole_x = false) {
  o << "[";
  for (size_t i = 0; i < c.points.size(); ++i) {
    o << (i ? ", " : "") << "[";
    if (whole_x) o << std::llround(c.points[i].first);
    else o << c.points[i].first;
    o << ", " << c.points[i].second << "]";
  }
  o << "]";
}

void write_curve(std::ostream& o, const char* key, const Curve& c) {
  o << "    " << key << ": ";
  write_points(o, c, true);
  o << "\n";
}

}  // namespace

Profile profile_from_yaml_text(const std::string& text, const std::string& name_for_errors) {
  return planner::parse_yaml_text<Profile>(text, name_for_errors, parse);
}

Profile load_profile(const std::string& path) {
  return profile_from_yaml_text(planner::read_text_file(path, "profile file"), path);
}

void write_profile_yaml(std::ostream& o, const Profile& p) {
  o << std::setprecision(5);
  o << "format: tasp-profile/1\nname: " << p.name << "\n";
  if (!p.description.empty()) o << "description: >-\n  " << p.description << "\n";
  o << "link_efficiency: " << p.link_efficiency << "\n";
  o << "# Curves: [message bytes, GB/s], linear in log2(bytes) between points, flat beyond the ends.\ncomm:\n";
  for (const auto& c : p.comm) {
    o << "  - ranks: " << c.ranks << "\n    latency_us: " << c.latency_us << "\n    peer_latency_us: "
      << c.peer_latency_us << "\n";
    write_curve(o, "flow_cap_gbps", c.flow_cap_gbps);
    write_curve(o, "rank_cap_gbps", c.rank_cap_gbps);
    if (!c.collective_gbps.points.empty()) write_curve(o, "collective_gbps", c.collective_gbps);
    if (!c.reduce_gbps.points.empty()) write_curve(o, "reduce_gbps", c.reduce_gbps);
    if (!c.one_root_gbps.points.empty()) write_curve(o, "one_root_gbps", c.one_root_gbps);
    if (c.collectives_per_root) o << "    collectives_per_root: true\n";
  }
  const auto& k = p.compute;
  o << "compute:\n  launch_us: " << k.launch_us << "\n  half_len: " << k.half_len << "\n  sms: " << k.sms
    << "\n  tile_m: " << k.tile_m << "\n  hbm_gbps: " << k.hbm_gbps << "\n  small_launch_us: " << k.small_launch_us << "\n  elementwise_gbps: " << k.elementwise_gbps
    << "\n  bwd_estimate: " << k.bwd_estimate << "\n  rates:\n";
  for (const auto& r : k.rates)
  {
    o << "    - {head_dim: " << r.head_dim << ", full_tflops: " << r.full_tflops << ", causal_tflops: " << r.causal_tflops;
    if (r.full_half_len >= 0) o << ", full_half_len: " << r.full_half_len;
    if (r.causal_half_len >= 0) o << ", causal_half_len: " << r.causal_half_len;
    if (r.tile_m > 0) o << ", tile_m: " << r.tile_m;
    if (r.bwd_full_tflops > 0) o << ", bwd_full_tflops: " << r.bwd_full_tflops << ", bwd_causal_tflops: " << r.bwd_causal_tflops;
    if (r.bwd_full_half_len >= 0) o << ", bwd_full_half_len: " << r.bwd_full_half_len;
    if (r.bwd_causal_half_len >= 0) o << ", bwd_causal_half_len: " << r.bwd_causal_half_len;
    if (r.sustained != 1) o << ", sustained: " << r.sustained;
    if (r.bwd_sustained != 1) o << ", bwd_sustained: " << r.bwd_sustained;
    if (r.mix_sustained != 1) o << ", mix_sustained: " << r.mix_sustained;
    if (r.bwd_mix_sustained != 1) o << ", bwd_mix_sustained: " << r.bwd_mix_sustained;
    if (!r.gqa.empty()) o << ", gqa: ", write_points(o, r.gqa);
    if (!r.bwd_gqa.empty()) o << ", bwd_gqa: ", write_points(o, r.bwd_gqa);
    o << "}\n";
  }
  const auto& e = p.executor;
  o << "# What tasp's executor adds around kernels and NCCL steps (tasp calibrate --timeline).\nexecutor:\n  fwd_start_us: "
    << e.fwd_start_us << "\n  bwd_start_us: " << e.bwd_start_us << "\n  step_gap_us: " << e.step_gap_us
    << "\n  comm_compute_share: " << e.comm_compute_share << "\n";
}

}  // namespace tasp::simulator
