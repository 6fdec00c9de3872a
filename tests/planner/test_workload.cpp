// The workload text form and the named catalogue: every key, every mistake named, overrides over a config.
#include <gtest/gtest.h>

#include <fstream>

#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "planner/workload_catalogue.hpp"

using namespace tasp::planner;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_workload(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Workload, KeysAndDefaults) {
  Workload w = parse_workload("S=128k,H=32,Hkv=8,D=128,causal,fp16,window=4096,B=2");
  EXPECT_EQ(w.B, 2);
  EXPECT_EQ(w.S, 131072);
  EXPECT_EQ(w.Hkv, 8);
  EXPECT_TRUE(w.causal);
  EXPECT_EQ(w.dtype, "fp16");
  EXPECT_EQ(w.window_left, 4096);
  EXPECT_EQ(w.window_right, 0);
  w = parse_workload("S=9000,H=8,D=64,docs=4096+1000+3904,window=100:-1,dtype=bf16");
  EXPECT_EQ(w.Hkv, 8);
  EXPECT_EQ(w.docs, (std::vector<long>{4096, 1000, 3904}));
  EXPECT_EQ(w.window_right, -1);
  EXPECT_EQ(parse_workload(to_string(w)).docs, w.docs);  // the text form round trips
}

TEST(Workload, MistakesAreNamed) {
  EXPECT_NE(error_of("B=1,B=2,S=64,H=2,D=16").find("B given twice"), std::string::npos);
  EXPECT_NE(error_of("S=-1,H=2,D=16").find("S=-1: must be positive"), std::string::npos);
  EXPECT_NE(error_of("S=0,H=2,D=16").find("must be positive"), std::string::npos);
  EXPECT_NE(error_of("S=1x,H=2,D=16").find("not an integer"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,causal,full").find("given twice"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=3,Hkv=2,D=16").find("not a multiple of Hkv"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2").find("needs S, H and D"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,docs=30+30").find("sum to 60, not S=64"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,docs=64+0").find("must be positive"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,window=-5").find("window"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,dtype=fp8").find("bf16 or fp16"), std::string::npos);
  EXPECT_NE(error_of("S=64,H=2,D=16,X=1").find("unknown key 'X'"), std::string::npos);
  EXPECT_NE(error_of("S=99999999999999999,H=2,D=16").find("S="), std::string::npos);
}

TEST(WorkloadCatalogue, EveryNameAndOverrides) {
  for (const char* n : {"tiny", "small", "small_fp16", "small_window", "medium", "medium_large_head", "medium_many_heads",
                        "medium_fp16", "medium_window", "large", "large_seq", "large_head", "xlarge", "large_window",
                        "qwen3_235b_a22b", "qwen3_30b_a3b", "qwen3_4b", "qwen3_32b", "qwen3_14b", "zigzag_tiny",
                        "zigzag_small", "zigzag_medium", "zigzag_large", "zigzag_fp16", "zigzag_gqa", "llama3-8b", "llama3-70b"})
    EXPECT_EQ(find_workload(n).name, n);
  const Workload q = workload_from("qwen3_14b", "");
  EXPECT_EQ(q.H, 40);
  EXPECT_EQ(q.Hkv, 8);
  EXPECT_EQ(q.D, 128);
  const Workload o = workload_from("qwen3_14b", "S=32k,H=48,B=1");  // -w keys override; Hkv kept
  EXPECT_EQ(o.S, 32768);
  EXPECT_EQ(o.H, 48);
  EXPECT_EQ(o.Hkv, 8);
  EXPECT_EQ(o.B, 1);
  EXPECT_EQ(o.config, "qwen3_14b");
  EXPECT_EQ(workload_from("small_window", "").window_left, 512);
  try {
    find_workload("mediun");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("close: medium"), std::string::npos) << e.what();
  }
  EXPECT_THROW(workload_from("", ""), InputError);
}

TEST(Workload, DocumentFilesAndMaskErrors) {
  const std::string dir = ::testing::TempDir();
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + name) << text;
    return dir + name;
  };
  const Workload w = workload_from("", "S=9000,H=8,D=64,causal", file("docs_ok.txt", "4096 1000\n# a comment\n3903+1\n"));
  EXPECT_EQ(w.docs, (std::vector<long>{4096, 1000, 3903, 1}));
  auto error = [&](const std::string& keys, const std::string& path) {
    try {
      workload_from("", keys, path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("S=9000,H=8,D=64", file("docs_bad.txt", "4096\n1000 x3\n")).find("docs_bad.txt:2: 'x3'"), std::string::npos);
  EXPECT_NE(error("S=9000,H=8,D=64", file("docs_zero.txt", "9000 0\n")).find("docs_zero.txt:1: '0'"), std::string::npos);
  EXPECT_NE(error("S=9001,H=8,D=64", file("docs_sum.txt", "9000\n")).find("sum to 9000, not S=9001"), std::string::npos);
  EXPECT_NE(error("S=9000,H=8,D=64", dir + "missing.txt").find("cannot open"), std::string::npos);
  // The workload's own keys: lengths that do not sum to S, a zero length, a negative window, a right side on a
  // causal workload.
  EXPECT_NE(error_of("S=100,H=1,D=8,docs=50+49").find("sum to 99, not S=100"), std::string::npos);
  EXPECT_NE(error_of("S=100,H=1,D=8,docs=50+0+50").find("must be positive"), std::string::npos);
  EXPECT_NE(error_of("S=100,H=1,D=8,window=-5").find("window=-5"), std::string::npos);
  EXPECT_NE(error_of("S=100,H=1,D=8,causal,window=10:3").find("sees no key after it"), std::string::npos);
}
