#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "planner/topology.hpp"

using namespace tasp::planner;
namespace fs = std::filesystem;

TEST(Topology, Shorthands) {
  Topology c = load_topology("complete:8");
  EXPECT_EQ(c.ranks(), 8);
  EXPECT_TRUE(rank_digraph(c).is_complete());
  Topology m = load_topology("mesh:8");
  EXPECT_TRUE(rank_digraph(m).is_complete());
  Topology cl = load_topology("cluster:2x8");
  EXPECT_EQ(cl.ranks(), 16);
  EXPECT_EQ(cl.nodes, 2);
  EXPECT_EQ(cl.gpus_per_node, 8);
  Digraph g = rank_digraph(cl);
  EXPECT_TRUE(g.has(0, 8));  // same rail
  EXPECT_TRUE(g.has(0, 9));  // through the spine
  Topology t = load_topology("torus:4x4");
  Digraph tg = rank_digraph(t);
  EXPECT_EQ(tg.arc_count(), 64);
  EXPECT_TRUE(tg.has(0, 1) && tg.has(0, 4) && tg.has(0, 3) && tg.has(0, 12));
  EXPECT_FALSE(tg.has(0, 5));
  for (const char* bad : {"complete:0", "complete:x", "torus:4", "cluster:2x", "mesh:-3", "torus:1x1"})
    EXPECT_THROW(load_topology(bad), InputError) << bad;
}

TEST(Topology, ShippedFilesLoad) {
  for (auto& e : fs::directory_iterator(std::string(TASP_SOURCE_DIR) + "/topologies")) {
    if (e.path().string().find(".profile.yaml") != std::string::npos) continue;  // machine profiles
    Topology t = load_topology(e.path().string());
    EXPECT_GE(t.ranks(), 2) << e.path();
  }
  Topology h = load_topology(std::string(TASP_SOURCE_DIR) + "/topologies/h200-hgx-8.yaml");
  EXPECT_TRUE(rank_digraph(h).is_complete());
  // Built-in names load the compiled-in copies.
  EXPECT_EQ(load_topology("h200-hgx-8").ranks(), 8);
  EXPECT_EQ(builtin_topology_names().size(), 11u);
  for (const char* fabric : {"h100x2-socket", "h200x2-socket", "h200x2-shm"})  // docs/measurements/fabrics.md
    EXPECT_EQ(load_topology(fabric).ranks(), 2) << fabric;
  EXPECT_TRUE(rank_digraph(load_topology("gb200-nvl72")).is_complete());  // one NVLink domain of 72
  Topology mi = load_topology(std::string(TASP_SOURCE_DIR) + "/topologies/mi300x-8.yaml");
  EXPECT_EQ(rank_digraph(mi).arc_count(), 56);
}

// Every bad file gives an InputError naming the file, a line and the field.
TEST(Topology, BadInputCorpus) {
  struct Case {
    const char* file;
    const char* expect;
  } cases[] = {
      {"syntax.yaml", "(syntax)"},
      {"unknown_key.yaml", "links[0].colour: unknown key"},
      {"missing_bandwidth.yaml", "links[0].bandwidth_gbps: missing"},
      {"negative_bandwidth.yaml", "links[0].bandwidth_gbps: must be a positive"},
      {"zero_bandwidth.yaml", "bandwidth_gbps: must be a positive"},
      {"duplicate_id.yaml", "duplicate id 'a'"},
      {"unknown_device.yaml", "unknown device 'c'"},
      {"disconnected.yaml", "GPU 'c' is disconnected"},
      {"self_link.yaml", "to itself"},
      {"no_gpus.yaml", "gpus: missing"},
      {"bandwidth_not_number.yaml", "expected a number"},
      {"negative_latency.yaml", "latency_us"},
      {"gpus_not_list.yaml", "gpus: expected a non-empty list"},
      {"empty.yaml", "empty topology"},
      {"zero_count.yaml", "count: must be between"},
      {"bad_format.yaml", "unsupported format"},
  };
  const std::string dir = std::string(TASP_SOURCE_DIR) + "/tests/data/bad_topologies/";
  for (const Case& c : cases) {
    try {
      load_topology(dir + c.file);
      ADD_FAILURE() << c.file << " loaded";
    } catch (const InputError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(c.file), std::string::npos) << m;
      EXPECT_NE(m.find(c.expect), std::string::npos) << c.file << ": " << m;
      if (std::string(c.file) != "empty.yaml") {
        EXPECT_NE(m.find(".yaml:"), std::string::npos) << "no line: " << m;
      }
    }
  }
}

// Mutation fuzzing: byte flips, deletions, truncations and duplicated lines of valid files either load
// or fail with InputError; nothing else (no crash, no other exception).
TEST(Topology, FuzzLoader) {
  std::vector<std::string> seeds;
  for (auto& e : fs::directory_iterator(std::string(TASP_SOURCE_DIR) + "/topologies")) {
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().size() < 4000) seeds.push_back(ss.str());
  }
  ASSERT_FALSE(seeds.empty());
  std::mt19937 rng(2026);
  const char alphabet[] = "{}[]:,-#&*!|>'\"%@` \n\t0123456789abcxyz.e";
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: s.erase(at, 1 + rng() % 8); break;
        case 2: s.resize(at); break;
        default: s.insert(at, s.substr(at, rng() % 40)); break;
      }
    }
    try {
      topology_from_yaml_text(s, "fuzz.yaml");
      ++loaded;
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.yaml", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(loaded, 10);
}
