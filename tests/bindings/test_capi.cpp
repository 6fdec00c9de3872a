// The C ABI as a caller sees it: plans described as JSON, the whole problem through a plan on the cpu backend
// against the independent fp64 reference, and every misuse an error code with a message naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bindings/tasp.h"
#include "executor/attention_cpu.hpp"
#include "planner/workload.hpp"

namespace {

double rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - ref[i]) * (x[i] - ref[i]), den += ref[i] * ref[i];
  return std::sqrt(num / den);
}

std::vector<double> randn(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> x(n);
  for (auto& e : x) e = nd(rng);
  return x;
}

nlohmann::json describe(tasp_plan* p) { return nlohmann::json::parse(tasp_plan_json(p)); }

}  // namespace

TEST(CApi, PlansRunExactlyOnTheCpu) {
  ASSERT_EQ(tasp_api_version(), TASP_API_VERSION);
  struct Case {
    const char *topology, *scheme, *workload, *options;
  } cases[] = {
      {"complete:3", "hamilton", "B=2,S=96,H=4,Hkv=2,D=16,causal", nullptr},
      {"complete:4", "ulysses", "B=1,S=64,H=8,Hkv=2,D=16", nullptr},
      {"complete:2", "allgather", "B=1,S=60,H=2,D=8,causal,window=7:0", nullptr},
      {"complete:2", "auto", "B=1,S=64,H=4,Hkv=1,D=8,causal,docs=20+44", nullptr},
      {"complete:3", "zigzag", "B=2,S=96,H=4,Hkv=2,D=16,causal", "{\"prune_plain\": true}"},
      // allgather pruned for the causal mask: its pieces by chunk, rank 0's late chunk kept home, K/V kept.
      {"complete:2", "allgather", "B=2,S=128,H=4,Hkv=2,D=16,causal", "{\"prune_plain\": true, \"gather_pieces\": 4}"},
      // and rank 0's late chunk's queries computed at rank 1 (query_moves), as a framework's rank runs them.
      {"complete:2", "allgather", "B=2,S=128,H=4,Hkv=2,D=16,causal", "{\"move_queries\": true, \"gather_pieces\": 2}"},
      {"complete:4", "auto", "B=1,S=64,H=4,D=8,causal", "{\"schemes\": \"ring,hamilton\", \"layout\": \"zigzag\"}"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.scheme) + " " + c.workload + " " + (c.options ? c.options : ""));
    tasp_plan* p = nullptr;
    ASSERT_EQ(tasp_plan_create(c.topology, c.scheme, c.workload, c.options, &p), TASP_OK) << tasp_last_error();
    const nlohmann::json j = describe(p);
    EXPECT_EQ(j["pieces_by_chunk"].get<bool>(), std::string(c.scheme) == "allgather" && c.options != nullptr) << j.dump();
    EXPECT_EQ(j["queries_moved"].get<bool>(), c.options && std::string(c.options).find("move_queries") != std::string::npos)
        << j.dump();
    if (c.options && std::string(c.options).find("schemes") != std::string::npos) {
      const std::string chosen = j["scheme"].get<std::string>();
      EXPECT_TRUE(chosen == "ring" || chosen == "hamilton") << chosen;  // auto among the schemes asked for
    }
    const tasp::planner::Workload w = tasp::planner::parse_workload(c.workload);
    EXPECT_EQ(j["gpus"].get<int>(), std::stoi(std::string(c.topology).substr(9)));
    // Every token is on exactly one GPU.
    std::vector<int> seen(w.S, 0);
    for (const auto& gpu : j["gpu_tokens"])
      for (const auto& r : gpu)
        for (long t = r[0].get<long>(); t < r[1].get<long>(); ++t) ++seen[t];
    for (long t = 0; t < w.S; ++t) ASSERT_EQ(seen[t], 1) << "token " << t;
    const size_t nq = size_t(w.B) * w.S * w.H * w.D, nk = size_t(w.B) * w.S * w.Hkv * w.D;
    const auto q = randn(nq, 1), k = randn(nk, 2), v = randn(nk, 3), dout = randn(nq, 4);
    std::vector<double> out(nq), lse(size_t(w.B) * w.S * w.H), dq(nq), dk(nk), dv(nk);
    ASSERT_EQ(tasp_cpu_run(p, 64, q.data(), k.data(), v.data(), dout.data(), out.data(), lse.data(), dq.data(), dk.data(),
                           dv.data()),
              TASP_OK)
        << tasp_last_error();
    std::vector<double> ro, rl, rdq, rdk, rdv;
    tasp::executor::reference_attention(q, k, v, w, ro, rl);
    tasp::executor::reference_attention_backward(q, k, v, dout, w, rdq, rdk, rdv);
    EXPECT_LT(rel_err(out, ro), 1e-12);
    EXPECT_LT(rel_err(lse, rl), 1e-12);
    EXPECT_LT(rel_err(dq, rdq), 1e-12);
    EXPECT_LT(rel_err(dk, rdk), 1e-12);
    EXPECT_LT(rel_err(dv, rdv), 1e-12);
    tasp_plan_destroy(p);
  }
}

TEST(CApi, MisuseIsAnErrorNamingTheArgument) {
  tasp_plan* p = nullptr;
  auto fails = [&](const char* topo, const char* scheme, const char* workload, const char* opts, const std::string& names) {
    EXPECT_EQ(tasp_plan_create(topo, scheme, workload, opts, &p), TASP_ERR_INPUT) << names;
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::string(tasp_last_error()).find(names), std::string::npos) << tasp_last_error();
  };
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8,bogus=1", nullptr, "bogus");
  fails("complete:2", "nosuch", "B=1,S=64,H=4,D=8", nullptr, "nosuch");
  fails("complete:3", "ulysses", "B=1,S=64,H=4,D=8", nullptr, "H=4");
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8", "{\"head_group\": 2}", "options.head_group");
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8", "{\"pass\": \"bwd\"}", "options.pass");
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8", "[1", "options");
  fails("nosuch.yaml", "ring", "B=1,S=64,H=4,D=8", nullptr, "nosuch.yaml");
  fails("complete:2", "auto", "B=1,S=64,H=4,D=8", "{\"schemes\": \"ring,spiral\"}", "spiral");
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8", "{\"prune_plain\": 1}", "options.prune_plain");
  fails("complete:2", "allgather", "B=1,S=64,H=4,D=8,causal", "{\"move_queries\": 1}", "options.move_queries");
  fails("complete:2", "ring", "B=1,S=64,H=4,D=8", "{\"accumulator\": \"fp8\"}", "options.accumulator");
  fails("complete:2", "allgather", "B=1,S=64,H=4,D=8", "{\"collectives\": \"yes\"}", "options.collectives");
  fails("complete:2", "allgather", "B=1,S=64,H=4,D=8", "{\"gather_steps\": [2, 0]}", "options.gather_steps");
  fails("complete:2", "allgather", "B=1,S=64,H=4,D=8", "{\"gather_steps\": 3}", "options.gather_steps");
  fails("complete:2", "allgather", "B=1,S=512,H=4,D=8", "{\"gather_steps\": [2, 1], \"gather_pieces\": 4}", "--gather-steps");
  fails("complete:4", "usp", "B=1,S=64,H=4,D=8", "{\"ulysses\": 1099511627776}", "options.ulysses");
  fails("complete:4", "usp", "B=1,S=64,H=4,D=8", "{\"head_groups\": 18446744073709551615}", "options.head_groups");
  EXPECT_EQ(tasp_plan_create(nullptr, "ring", "B=1,S=64,H=4,D=8", nullptr, &p), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("topology"), std::string::npos);
  // A run without a backward part asked for one; a NULL buffer; an unknown precision.
  ASSERT_EQ(tasp_plan_create("complete:2", "ring", "B=1,S=16,H=2,D=8", "{\"pass\": \"fwd\"}", &p), TASP_OK);
  std::vector<double> x(16 * 2 * 8, 0.5), l(16 * 2);
  EXPECT_EQ(tasp_cpu_run(p, 64, x.data(), x.data(), x.data(), x.data(), x.data(), l.data(), x.data(), x.data(), x.data()),
            TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("dout"), std::string::npos);
  EXPECT_EQ(tasp_cpu_run(p, 64, x.data(), nullptr, x.data(), nullptr, x.data(), l.data(), nullptr, nullptr, nullptr),
            TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("k:"), std::string::npos);
  EXPECT_EQ(tasp_cpu_run(p, 16, x.data(), x.data(), x.data(), nullptr, x.data(), l.data(), nullptr, nullptr, nullptr),
            TASP_ERR_INPUT);
  EXPECT_EQ(tasp_cpu_run(p, 64, x.data(), x.data(), x.data(), nullptr, x.data(), l.data(), nullptr, nullptr, nullptr), TASP_OK);
  EXPECT_STREQ(tasp_last_error(), "");
  tasp_plan_destroy(p);
  tasp_plan_destroy(nullptr);  // harmless
}

// A rank of a plan on GPUs: what can be checked without one. Misuse names the argument; a head-parallel plan is
// refused before any device is touched; without a GPU (or a CUDA build) a group cannot be made, with a message,
// never a crash. The ranks' numbers are checked on GPUs (tests/python/gpu, tools/gpu/python.sh).
TEST(CApi, RankMisuseAndNoGpuAreErrors) {
  tasp_plan* p = nullptr;
  ASSERT_EQ(tasp_plan_create("complete:2", "zigzag", "B=1,S=64,H=4,D=64,causal", nullptr, &p), TASP_OK);
  unsigned char id[TASP_NCCL_ID_BYTES] = {};
  tasp_group* g = nullptr;
  tasp_rank* r = nullptr;
  EXPECT_EQ(tasp_group_create(2, 0, 0, nullptr, &g), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("id"), std::string::npos);
  EXPECT_EQ(tasp_group_create(2, 2, 0, id, &g), TASP_ERR_INPUT);  // rank 2 of 2
  EXPECT_NE(std::string(tasp_last_error()).find("rank"), std::string::npos) << tasp_last_error();
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(tasp_rank_create(nullptr, g, 0, &r), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("plan"), std::string::npos);
  EXPECT_EQ(tasp_rank_create(p, nullptr, 0, &r), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("group"), std::string::npos);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(tasp_rank_forward(nullptr, id, id, id, id, nullptr, nullptr, 0.f, nullptr), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("rank"), std::string::npos);
  EXPECT_EQ(tasp_rank_backward(nullptr, id, id, id, id, nullptr, nullptr, id, id, id, id, 0.f, nullptr), TASP_ERR_INPUT);
  size_t bytes = 1;
  EXPECT_EQ(tasp_rank_saved_bytes(nullptr, &bytes), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("rank"), std::string::npos);
  EXPECT_EQ(tasp_rank_wait(nullptr), TASP_ERR_INPUT);
  const long long cu[] = {0, 10, 64};
  EXPECT_EQ(tasp_rank_documents(nullptr, cu, 3), TASP_ERR_INPUT);
  EXPECT_EQ(tasp_rank_device_bytes(nullptr, &bytes), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("rank"), std::string::npos);
  EXPECT_EQ(tasp_group_watch(nullptr, 10), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("group"), std::string::npos);
  tasp_rank_destroy(nullptr), tasp_group_destroy(nullptr);  // harmless
  tasp_plan_destroy(p);
  // Head-parallel plans run too (the group is what is missing), but their GPUs need equal token parts.
  ASSERT_EQ(tasp_plan_create("complete:2", "ulysses", "B=1,S=64,H=4,D=64", nullptr, &p), TASP_OK);
  EXPECT_EQ(tasp_rank_create(p, nullptr, 0, &r), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("group"), std::string::npos) << tasp_last_error();
  tasp_plan_destroy(p);
  ASSERT_EQ(tasp_plan_create("complete:2", "ulysses", "B=1,S=66,H=4,D=64", nullptr, &p), TASP_OK);
  EXPECT_EQ(tasp_rank_create(p, nullptr, 0, &r), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("equal token parts"), std::string::npos) << tasp_last_error();
  tasp_plan_destroy(p);
}

// Measuring a group's fabric: what can be checked without GPUs. Each argument and option is named, the options and the
// topology read before the group is needed (so a bad one is said before the measuring, not after 20 s of it), and
// nothing is written where nothing was measured.
TEST(CApi, FabricMeasuringMisuseNamesTheArgument) {
  const std::string out = ::testing::TempDir() + "capi-fabric.profile.yaml";
  std::remove(out.c_str());
  const char* said = "untouched";
  auto fails = [&](const char* topo, const char* opts, const char* path, const std::string& names) {
    EXPECT_EQ(tasp_group_measure_fabric(nullptr, topo, opts, path, &said), TASP_ERR_INPUT) << names;
    EXPECT_NE(std::string(tasp_last_error()).find(names), std::string::npos) << tasp_last_error();
    EXPECT_EQ(said, nullptr);
  };
  fails(nullptr, nullptr, out.c_str(), "topology");
  fails("complete:2", nullptr, nullptr, "profile_out");
  fails("complete:2", "{\"iters\": 0}", out.c_str(), "options.iters");
  fails("complete:2", "{\"timeout_s\": \"60\"}", out.c_str(), "options.timeout_s");
  fails("complete:2", "{\"per_root\": 1}", out.c_str(), "options.per_root");
  fails("complete:2", "{\"warmup\": 1}", out.c_str(), "options.warmup");
  fails("complete:2", "[1", out.c_str(), "options");
  fails("complete:2", "{\"profile\": \"nosuch.profile.yaml\"}", out.c_str(), "nosuch.profile.yaml");
  fails("nosuch.yaml", nullptr, out.c_str(), "nosuch.yaml");
  fails("complete:2", "{\"iters\": 3, \"per_root\": false}", out.c_str(), "group");  // all good but the group
  EXPECT_FALSE(std::ifstream(out).good());
}

// How a plan's ranks exchange allgather's steps ("collectives"): as the profile times them by default ("auto"): over
// sockets (the socket fabric's profile, whose all-gather outruns its send/recv) collectives, on NVLink between 2 GPUs
// not; NCCL collectives when asked (allgather only: other schemes' steps are not collectives), send/recv when refused.
TEST(CApi, CollectivesAsAskedOrAsTheProfileTimesThem) {
  const std::string src = TASP_SOURCE_DIR;
  const std::string sock = "{\"profile\": \"" + src + "/topologies/h100x2-socket.profile.yaml\", \"collectives\": ";
  const std::string socket_topology = src + "/topologies/h100x2-socket.yaml";
  struct Case {
    std::string topology, scheme, options;
    bool collectives;
  } cases[] = {
      {"complete:2", "allgather", "", false},
      {"complete:2", "allgather", "{\"collectives\": false}", false},
      {"complete:2", "allgather", "{\"collectives\": true}", true},
      {"complete:2", "ring", "{\"collectives\": true}", false},
      {"complete:2", "allgather", "{\"collectives\": \"auto\"}", false},
      {socket_topology, "allgather", sock + "\"auto\"}", true},
      {socket_topology, "allgather", sock + "false}", false},
      {socket_topology, "allgather", "{\"profile\": \"" + src + "/topologies/h100x2-socket.profile.yaml\"}", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.topology + " " + c.scheme + " " + c.options);
    tasp_plan* p = nullptr;
    ASSERT_EQ(tasp_plan_create(c.topology.c_str(), c.scheme.c_str(), "B=1,S=8192,H=32,D=128,causal",
                               c.options.empty() ? nullptr : c.options.c_str(), &p),
              TASP_OK)
        << tasp_last_error();
    EXPECT_EQ(describe(p)["collectives"].get<bool>(), c.collectives);
    tasp_plan_destroy(p);
  }
}

// Whether those collectives go one a root ("root_comms"): as the profile measured them (the 2x H200 socket fabric's
// profile, fitted from broadcasts one a root, says so; the 2x H100 one, from one all-gather, does not), or as asked;
// never without collectives.
TEST(CApi, RootCommsAsTheProfileMeasuredThem) {
  const std::string src = TASP_SOURCE_DIR;
  const std::string h200 = "\"profile\": \"" + src + "/topologies/h200x2-socket.profile.yaml\"";
  const std::string h100 = "\"profile\": \"" + src + "/topologies/h100x2-socket.profile.yaml\"";
  const std::string topology = src + "/topologies/h200x2-socket.yaml";
  struct Case {
    std::string scheme, options;
    bool root_comms;
  } cases[] = {
      {"allgather", "{" + h200 + "}", true},
      {"allgather", "{" + h200 + ", \"root_comms\": false}", false},
      {"allgather", "{" + h200 + ", \"collectives\": false}", false},
      {"ring", "{" + h200 + "}", false},
      {"allgather", "{" + h100 + "}", false},
      {"allgather", "{" + h100 + ", \"root_comms\": true}", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.scheme + " " + c.options);
    tasp_plan* p = nullptr;
    ASSERT_EQ(tasp_plan_create(topology.c_str(), c.scheme.c_str(), "B=1,S=8192,H=32,D=128,causal", c.options.c_str(), &p), TASP_OK)
        << tasp_last_error();
    EXPECT_EQ(describe(p)["root_comms"].get<bool>(), c.root_comms);
    tasp_plan_destroy(p);
  }
  tasp_plan* p = nullptr;
  EXPECT_EQ(tasp_plan_create(topology.c_str(), "allgather", "B=1,S=8192,H=32,D=128,causal", "{\"root_comms\": 1}", &p), TASP_ERR_INPUT);
  EXPECT_NE(std::string(tasp_last_error()).find("options.root_comms"), std::string::npos) << tasp_last_error();
}

