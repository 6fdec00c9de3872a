// complete:N, mesh:N, cluster:UxM, torus:AxB. Link figures are typical of the hardware each one stands
// for; machine profiles (simulator) carry the measured behaviour, these only the wiring and peak rates.
#include <regex>
#include <string>

#include "planner/topology.hpp"

namespace tasp::planner {
namespace {

constexpr double kNvSwitchPortGBps = 450;  // H100/H200 NV18: 18 links x 25 GB/s per direction
constexpr double kNvSwitchLatencyUs = 0.7;
constexpr double kXgmiLinkGBps = 64;       // MI300X: one xGMI link per peer, 64 GB/s per direction
constexpr double kXgmiLatencyUs = 1.0;
constexpr double kNicGBps = 50;            // 400 Gb/s NIC per GPU
constexpr double kNicLatencyUs = 3.0;
constexpr double kTorusLinkGBps = 50;
constexpr double kTorusLatencyUs = 1.0;
constexpr int kMaxRanks = 1 << 17;

int parse_count(const std::string& spec, const std::string& s, int lo) {
  long v = std::stol(s);
  if (v < lo || v > kMaxRanks)
    throw InputError(spec + ": " + s + " is out of range (" + std::to_string(lo) + ".." + std::to_string(kMaxRanks) + ")");
  return int(v);
}

}  // namespace

bool topology_from_shorthand(const std::string& spec, Topology* out) {
  static const std::regex one(R"((complete|mesh):(\d{1,7}))"), two(R"((cluster|torus):(\d{1,7})x(\d{1,7}))");
  static const std::regex looks_like(R"((complete|mesh|cluster|torus):.*)");
  std::smatch m;
  Topology t;
  t.source = spec;
  t.name = spec;
  if (std::regex_match(spec, m, one)) {
    const int n = parse_count(spec, m[2], 1);
    t.family = m[1];
    t.dims = {n};
    t.gpus_per_node = n;
    for (int r = 0; r < n; ++r) add_gpu(t, "gpu" + std::to_string(r), 0);
    if (t.family == "complete") {
      Vertex sw = add_switch(t, "nvswitch", 0);
      for (int r = 0; r < n; ++r) add_link(t, t.gpu_vertex[r], sw, kNvSwitchPortGBps, kNvSwitchLatencyUs, "nvswitch");
    } else {
      for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) add_link(t, t.gpu_vertex[a], t.gpu_vertex[b], kXgmiLinkGBps, kXgmiLatencyUs, "xgmi");
    }
  } else if (std::regex_match(spec, m, two)) {
    t.family = m[1];
    const int a = parse_count(spec, m[2], 1), b = parse_count(spec, m[3], 1);
    if (long(a) * b > kMaxRanks) throw InputError(spec + ": too many GPUs");
    t.dims = {a, b};
    if (t.family == "cluster") {
      if (a < 1 || b < 1) throw InputError(spec + ": needs U >= 1 nodes of M >= 1 GPUs");
      t.nodes = a;
      t.gpus_per_node = b;
      for (int u = 0; u < a; ++u)
        for (int g = 0; g < b; ++g) add_gpu(t, "node" + std::to_string(u) + "/gpu" + std::to_string(g), u);
      for (int u = 0; u < a; ++u) {
        Vertex sw = add_switch(t, "node" + std::to_string(u) + "/nvswitch", u);
        for (int g = 0; g < b; ++g) add_link(t, t.gpu_vertex[u * b + g], sw, kNvSwitchPortGBps, kNvSwitchLatencyUs, "nvswitch");
      }
      // Rail-optimized: GPU g of every node hangs off rail switch g; a spine joins the rails
      // (non-blocking), so traffic between rails exists but takes two more switch hops.
      Vertex spine = add_switch(t, "spine", -1);
      for (int g = 0; g < b; ++g) {
        Vertex rail = add_switch(t, "rail" + std::to_string(g), -1);
        for (int u = 0; u < a; ++u) add_link(t, t.gpu_vertex[u * b + g], rail, kNicGBps, kNicLatencyUs, "network");
        add_link(t, rail, spine, kNicGBps * a, kNicLatencyUs, "network");
      }
    } else {
      if (long(a) * b < 2) throw InputError(spec + ": a torus needs at least 2 GPUs");
      t.gpus_per_node = a * b;
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < b; ++j) add_gpu(t, "gpu" + std::to_string(i) + "_" + std::to_string(j), 0);
      auto at = [&](int i, int j) { return t.gpu_vertex[((i + a) % a) * b + (j + b) % b]; };
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < b; ++j) {
          if (b > 1 && !(b == 2 && j == 1)) add_link(t, at(i, j), at(i, j + 1), kTorusLinkGBps, kTorusLatencyUs, "torus");
          if (a > 1 && !(a == 2 && i == 1)) add_link(t, at(i, j), at(i + 1, j), kTorusLinkGBps, kTorusLatencyUs, "torus");
        }
    }
  } else if (std::regex_match(spec, looks_like)) {
    throw InputError(spec + ": malformed topology shorthand (expected complete:N, mesh:N, cluster:UxM or torus:AxB)");
  } else {
    return false;
  }
  *out = std::move(t);
  return true;
}

}  // namespace tasp::planner
