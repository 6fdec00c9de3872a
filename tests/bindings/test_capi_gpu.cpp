// The C ABI's group calls on 2 GPUs, each rank a thread of this process with its own group (as a training job's
// processes hold theirs): skipped without 2 GPUs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bindings/tasp.h"
#include "executor/nccl_bench.hpp"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

// Every rank measures the fabric together and fits the same profile: the ranks' files are equal byte for byte (each
// takes every round's slowest rank), every kind and size is there, and the plans made with it on either rank agree.
TEST(CApiGpu, GroupMeasuresOneFabricForAllRanks) {
  if (tasp::executor::local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  unsigned char id[TASP_NCCL_ID_BYTES];
  ASSERT_EQ(tasp_nccl_id(id), TASP_OK) << tasp_last_error();
  const std::string dir = ::testing::TempDir();
  std::vector<std::string> profiles = {dir + "fabric-rank0.yaml", dir + "fabric-rank1.yaml"}, said(2), plans(2);
  const std::string csv = dir + "fabric-rank0.csv";
  std::vector<int> status(2, -1);
  auto rank = [&](int r) {
    tasp_group* g = nullptr;
    if ((status[r] = tasp_group_create(2, r, r, id, &g)) != TASP_OK) return;
    tasp_group_watch(g, 60);
    const std::string opts = r == 0 ? "{\"iters\": 2, \"csv\": \"" + csv + "\"}" : "{\"iters\": 2}";
    const char* result = nullptr;
    status[r] = tasp_group_measure_fabric(g, "complete:2", opts.c_str(), profiles[r].c_str(), &result);
    if (status[r] == TASP_OK) {
      said[r] = result;
      const std::string plan_opts = "{\"profile\": \"" + profiles[r] + "\"}";
      tasp_plan* p = nullptr;
      status[r] = tasp_plan_create("complete:2", "auto", "B=1,S=8192,H=32,D=128,causal", plan_opts.c_str(), &p);
      if (p) plans[r] = tasp_plan_json(p), tasp_plan_destroy(p);
    }
    if (status[r] != TASP_OK) said[r] = tasp_last_error();
    tasp_group_destroy(g);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join(), t1.join();
  ASSERT_EQ(status[0], TASP_OK) << said[0];
  ASSERT_EQ(status[1], TASP_OK) << said[1];
  const std::string a = read_all(profiles[0]);
  EXPECT_NE(a.find("refitted to the fabric now"), std::string::npos);
  EXPECT_EQ(a, read_all(profiles[1]));
  const auto j = nlohmann::json::parse(said[0]);
  EXPECT_EQ(j.at("steps").get<int>(), 36);  // 6 kinds (the gather one a root) x 6 sizes, 256 KiB..256 MiB
  EXPECT_GT(j.at("now_over_profile").at("median").get<double>(), 0);
  EXPECT_EQ(j.at("path").get<std::string>(), profiles[0]);
  std::ifstream rows(csv);
  std::string line;
  int n = 0;
  while (std::getline(rows, line)) ++n;
  EXPECT_EQ(n, 37);  // the header and the 36 steps
  EXPECT_EQ(nlohmann::json::parse(plans[0]).at("predicted_us"), nlohmann::json::parse(plans[1]).at("predicted_us"));
}
