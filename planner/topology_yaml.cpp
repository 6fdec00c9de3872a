// YAML topology files (format in docs/topology-format.md). Every error names file, line and field.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "planner/topology.hpp"
#include "planner/yaml_ctx.hpp"

namespace tasp::planner {
namespace {

Topology parse(const YAML::Node& root, const YamlCtx& cx) {
  if (!root.IsDefined() || root.IsNull()) cx.fail(root, "(document)", "empty topology file");
  cx.only_keys(root, "(top level)", {"format", "name", "description", "gpus", "switches", "links"});
  if (root["format"] && cx.str(root["format"], "format") != "tasp-topology/1")
    cx.fail(root["format"], "format", "unsupported format (expected tasp-topology/1)");
  Topology t;
  t.family = "file";
  t.source = cx.file;
  t.name = root["name"] ? cx.str(root["name"], "name") : cx.file;
  std::map<std::string, Vertex> ids;
  std::map<std::string, YAML::Node> where;
  auto define = [&](const std::string& id, const YAML::Node& at, const std::string& field) {
    if (id.empty()) cx.fail(at, field, "empty id");
    if (ids.count(id)) {
      std::string prev = where[id].Mark().line >= 0 ? " (first defined on line " + std::to_string(where[id].Mark().line + 1) + ")" : "";
      cx.fail(at, field, "duplicate id '" + id + "'" + prev);
    }
    where[id] = at;
  };
  const YAML::Node gpus = root["gpus"];
  if (!gpus) cx.fail(root, "gpus", "missing (a topology needs GPUs)");
  if (!gpus.IsSequence() || gpus.size() == 0) cx.fail(gpus, "gpus", "expected a non-empty list");
  std::set<int> node_ids;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string f = "gpus[" + std::to_string(i) + "]";
    const YAML::Node g = gpus[i];
    cx.only_keys(g, f, {"id", "prefix", "count", "node"});
    long node = g["node"] ? cx.integer(g["node"], f + ".node") : 0;
    if (node < 0) cx.fail(g["node"], f + ".node", "must be >= 0");
    node_ids.insert(int(node));
    if (g["id"]) {
      if (g["prefix"] || g["count"]) cx.fail(g, f, "give either id, or prefix and count");
      std::string id = cx.str(g["id"], f + ".id");
      define(id, g["id"], f + ".id");
      ids[id] = add_gpu(t, id, int(node));
    } else {
      if (!g["prefix"] || !g["count"]) cx.fail(g, f, "needs id, or prefix and count");
      std::string prefix = cx.str(g["prefix"], f + ".prefix");
      long count = cx.integer(g["count"], f + ".count");
      if (count < 1 || count > 1 << 20) cx.fail(g["count"], f + ".count", "must be between 1 and 1048576");
      for (long k = 0; k < count; ++k) {
        std::string id = prefix + std::to_string(k);
        define(id, g["prefix"], f + ".prefix");
        ids[id] = add_gpu(t, id, int(node));
      }
    }
  }
  if (const YAML::Node sw = root["switches"]) {
    if (!sw.IsSequence()) cx.fail(sw, "switches", "expected a list");
    for (size_t i = 0; i < sw.size(); ++i) {
      const std::string f = "switches[" + std::to_string(i) + "]";
      cx.only_keys(sw[i], f, {"id", "node", "kind"});
      std::string id = cx.str(sw[i]["id"], f + ".id");
      long node = sw[i]["node"] ? cx.integer(sw[i]["node"], f + ".node") : -1;
      define(id, sw[i]["id"], f + ".id");
      ids[id] = add_switch(t, id, int(node));
    }
  }
  const YAML::Node links = root["links"];
  if (!links) cx.fail(root, "links", "missing");
  if (!links.IsSequence()) cx.fail(links, "links", "expected a list");
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string f = "links[" + std::to_string(i) + "]";
    const YAML::Node l = links[i];
    cx.only_keys(l, f, {"from", "to", "bandwidth_gbps", "latency_us", "bidirectional", "kind", "count"});
    if (!l["bandwidth_gbps"]) cx.fail(l, f + ".bandwidth_gbps", "missing");
    double bw = cx.num(l["bandwidth_gbps"], f + ".bandwidth_gbps");
    if (!(bw > 0) || bw > 1e9) cx.fail(l["bandwidth_gbps"], f + ".bandwidth_gbps", "must be a positive number of GB/s");
    double lat = l["latency_us"] ? cx.num(l["latency_us"], f + ".latency_us") : 0.0;
    if (!(lat >= 0) || lat > 1e9) cx.fail(l["latency_us"], f + ".latency_us", "must be >= 0 microseconds");
    bool both = l["bidirectional"] ? cx.boolean(l["bidirectional"], f + ".bidirectional") : true;
    long count = l["count"] ? cx.integer(l["count"], f + ".count") : 1;
    if (count < 1 || count > 1024) cx.fail(l["count"], f + ".count", "must be between 1 and 1024");
    std::string kind = l["kind"] ? cx.str(l["kind"], f + ".kind") : "link";
    auto from = cx.names(l["from"], f + ".from");
    auto to = cx.names(l["to"], f + ".to");
    for (auto& [a, an] : from)
      if (!ids.count(a)) cx.fail(an, f + ".from", "unknown device '" + a + "'");
    for (auto& [b, bn] : to)
      if (!ids.count(b)) cx.fail(bn, f + ".to", "unknown device '" + b + "'");
    for (auto& [a, an] : from)
      for (auto& [b, bn] : to) {
        if (a == b) {
          if (from.size() == 1 && to.size() == 1) cx.fail(l, f, "a link from '" + a + "' to itself");
          continue;  // list-to-list links skip the diagonal (full meshes)
        }
        for (long c = 0; c < count; ++c) add_link(t, ids[a], ids[b], bw, lat, kind, both);
      }
  }
  // Every GPU must reach every other GPU (through anything) and be reached.
  const auto nv = boost::num_vertices(t.graph);
  auto reach = [&](Vertex s, bool forward) {
    std::vector<char> seen(nv, 0);
    std::vector<Vertex> st{s};
    seen[s] = 1;
    while (!st.empty()) {
      Vertex v = st.back();
      st.pop_back();
      if (forward) {
        for (auto [e, end] = boost::out_edges(v, t.graph); e != end; ++e)
          if (!seen[boost::target(*e, t.graph)]) seen[boost::target(*e, t.graph)] = 1, st.push_back(boost::target(*e, t.graph));
      } else {
        for (auto [e, end] = boost::in_edges(v, t.graph); e != end; ++e)
          if (!seen[boost::source(*e, t.graph)]) seen[boost::source(*e, t.graph)] = 1, st.push_back(boost::source(*e, t.graph));
      }
    }
    return seen;
  };
  if (t.ranks() > 1) {
    auto fw = reach(t.gpu_vertex[0], true), bw = reach(t.gpu_vertex[0], false);
    for (int r = 0; r < t.ranks(); ++r) {
      if (!fw[t.gpu_vertex[r]] || !bw[t.gpu_vertex[r]]) {
        const std::string& id = t.gpu(r).id;
        cx.fail(where[id], "gpus", "GPU '" + id + "' is disconnected from GPU '" + t.gpu(0).id + "'");
      }
    }
  }
  t.nodes = int(node_ids.size());
  std::map<int, int> per;
  for (int r = 0; r < t.ranks(); ++r) per[t.gpu(r).node]++;
  t.gpus_per_node = per.begin()->second;
  for (auto& [k, v] : per)
    if (v != t.gpus_per_node) t.gpus_per_node = 0;
  return t;
}

}  // namespace

Topology topology_from_yaml_text(const std::string& text, const std::string& name_for_errors) {
  return parse_yaml_text<Topology>(text, name_for_errors, parse);
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open " + what);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Topology topology_from_yaml_file(const std::string& path) {
  return topology_from_yaml_text(read_text_file(path, "topology file"), path);
}

const std::vector<std::pair<std::string, std::string>>& builtin_topology_files();  // generated

std::vector<std::string> builtin_topology_names() {
  std::vector<std::string> names;
  for (const auto& [file, text] : builtin_topology_files()) names.push_back(file.substr(0, file.size() - 5));
  return names;
}

Topology load_topology(const std::string& spec) {
  Topology t;
  if (topology_from_shorthand(spec, &t)) return t;
  if (!std::ifstream(spec))
    for (const auto& [file, text] : builtin_topology_files())
      if (file == spec || file == spec + ".yaml") {
        t = topology_from_yaml_text(text, "(built-in) " + file);
        t.source = spec;
        return t;
      }
  return topology_from_yaml_file(spec);
}

}  // namespace tasp::planner
