// The command line's contract: exit 0 / 1 (verification failed) / 2 (bad input), no partial files.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

static int run(const std::string& args) {
  std::string cmd = std::string(TASP_BINARY) + " " + args + " > /dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Cli, PlanVerifyAndErrors) {
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "/cli_plan.json";
  fs::remove(out);
  EXPECT_EQ(run("plan -t complete:8 -s hamilton --causal -o " + out), 0);
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(run("verify " + out + " -t complete:8"), 0);
  EXPECT_EQ(run("verify " + out + " -t complete:7"), 2);  // plan does not match the topology
  // Corrupt one owner: verify fails with status 1.
  std::string text = slurp(out);
  auto at = text.find("\"owner\":", text.find("\"transfers\""));
  text[at + 8] = text[at + 8] == '0' ? '1' : '0';
  const std::string bad = dir + "/cli_bad.json";
  std::ofstream(bad) << text;
  EXPECT_EQ(run("verify " + bad), 1);
  // Bad input: status 2 and no output file left behind.
  const std::string none = dir + "/cli_none.json";
  fs::remove(none);
  EXPECT_EQ(run("plan -t complete:0 -o " + none), 2);
  EXPECT_EQ(run("plan -t " + std::string(TASP_SOURCE_DIR) + "/tests/data/bad_topologies/disconnected.yaml -o " + none), 2);
  EXPECT_EQ(run("plan -t complete:8 -s nonsense -o " + none), 2);
  EXPECT_EQ(run("plan -t complete:8 --format xml -o " + none), 2);
  EXPECT_FALSE(fs::exists(none));
  EXPECT_FALSE(fs::exists(none + ".tmp"));
  EXPECT_EQ(run("verify /nonexistent.json"), 2);
  EXPECT_EQ(run("--help"), 0);
}

TEST(Cli, RunChecksAndWritesTimeline) {
  const std::string dir = ::testing::TempDir();
  const std::string plan = dir + "/cli_run_plan.json", tl = dir + "/cli_run_tl.json";
  ASSERT_EQ(run("plan -t complete:4 -s hamilton --causal -q -o " + plan), 0);
  EXPECT_EQ(run("run --plan " + plan + " -w B=1,S=64,H=2,D=16,causal --check --timeline " + tl), 0);
  EXPECT_TRUE(fs::exists(tl));
  EXPECT_EQ(run("run --plan " + plan + " -w B=1,S=64,H=2,D=16,causal --check --precision fp32"), 0);
  EXPECT_EQ(run("run --plan " + plan + " -w B=1,S=61,H=2,D=16,causal --check"), 0);  // uneven shards
  EXPECT_EQ(run("run --plan " + plan + " -w B=1,S=12,H=2,D=16,causal"), 2);   // fewer tokens than 8 chunks x 2 pieces
  EXPECT_EQ(run("run --plan " + plan + " -w B=1,S=64,H=2,D=16"), 2);          // plan is causal
  // A duplicated compute: refused by the verifier (2); with --no-verify the numeric check fails (1).
  std::string text = slurp(plan);
  auto at = text.find("\"compute\": [") + 13;
  auto end = text.find("}", at) + 1;
  std::string entry = text.substr(at, end - at);
  text.insert(end, "," + entry);
  const std::string bad = dir + "/cli_run_bad.json";
  std::ofstream(bad) << text;
  EXPECT_EQ(run("run --plan " + bad + " -w B=1,S=64,H=2,D=16,causal --check"), 2);
  EXPECT_EQ(run("run --plan " + bad + " -w B=1,S=64,H=2,D=16,causal --check --no-verify"), 1);
}

// Removes the first accumulator transfer of the backward's last step (its return hop to the owner).
static std::string drop_last_return(std::string text) {
  const auto last_step = text.rfind("{\"transfers\": [");
  const auto at = text.find("{\"src\"", last_step);
  const auto end = text.find("}", at) + 1;
  EXPECT_NE(text.substr(at, end - at).find("grad"), std::string::npos);
  return text.erase(at, end - at + (text[end] == ',' ? 1 : 0));
}

TEST(Cli, BackwardPlanVerifyRunAndErrors) {
  const std::string dir = ::testing::TempDir();
  const std::string plan = dir + "/cli_bwd.json", fwd_only = dir + "/cli_fwd_only.json";
  ASSERT_EQ(run("plan -t complete:4 -s hamilton --causal -q -o " + plan), 0);  // fwd+bwd by default
  EXPECT_NE(slurp(plan).find("tasp-plan/2"), std::string::npos);
  EXPECT_EQ(run("verify " + plan + " -t complete:4 --pass bwd"), 0);
  ASSERT_EQ(run("plan -t complete:4 -s hamilton --causal --pass fwd -q -o " + fwd_only), 0);
  EXPECT_NE(slurp(fwd_only).find("tasp-plan/1"), std::string::npos);
  const std::string w = " -w B=1,S=64,H=2,Hkv=1,D=16,causal";
  EXPECT_EQ(run("run --plan " + plan + w + " --check"), 0);
  EXPECT_EQ(run("run --plan " + plan + w + " --check --pass bwd --precision fp32"), 0);
  EXPECT_EQ(run("run --plan " + fwd_only + w + " --check --pass fwd"), 0);
  // The backward of a plan without one: bad input.
  EXPECT_EQ(run("run --plan " + fwd_only + w + " --check"), 2);
  EXPECT_EQ(run("verify " + fwd_only + " --pass bwd"), 2);
  EXPECT_EQ(run("simulate -t complete:4 --plan " + fwd_only + " -w B=1,S=64k,H=2,D=64,causal"), 2);
  EXPECT_EQ(run("run --plan " + plan + w + " --pass sideways"), 2);
  EXPECT_EQ(run("plan -t complete:4 --pass bwd -q -o " + dir + "/none.json"), 2);
  EXPECT_EQ(run("plan -t complete:4 --accumulator fp8 -q -o " + dir + "/none.json"), 2);
  // allgather in pieces: a plan of P + 1 steps that runs exactly; fewer than none, or too many, is bad input.
  const std::string pieces = dir + "/cli_pieces.json";
  EXPECT_EQ(run("plan -t complete:4 -s allgather --causal --gather-pieces 2 -q -o " + pieces), 0);
  EXPECT_NE(slurp(pieces).find("\"pieces_per_rank\": 2"), std::string::npos);
  EXPECT_EQ(run("run --plan " + pieces + w + " --check"), 0);
  EXPECT_EQ(run("run --backend cpu -t complete:3 -s allgather --gather-pieces 3" + w + " --check"), 0);
  EXPECT_EQ(run("plan -t complete:4 -s allgather --gather-pieces=-1 -q -o " + dir + "/none.json"), 2);
  // 0 (the default): a plan alone is one piece; run and simulate take the count the profile simulates fastest.
  EXPECT_EQ(run("plan -t complete:4 -s allgather --causal --gather-pieces 0 -q -o " + pieces), 0);
  EXPECT_NE(slurp(pieces).find("\"pieces_per_rank\": 1"), std::string::npos);
  EXPECT_EQ(run("simulate -t complete:4 -s allgather --gather-pieces 65" + w), 2);
  // zigzag's layout is its name: a contiguous one given is refused, not ignored.
  EXPECT_EQ(run("plan -t complete:2 -s zigzag --causal --layout contiguous -q -o " + dir + "/none.json"), 2);
  EXPECT_FALSE(fs::exists(dir + "/none.json"));
  // A plain causal mask pruned on request: the plan says so, and runs exactly for its workload.
  const std::string pruned = dir + "/cli_pruned.json";
  EXPECT_EQ(run("plan -t complete:2 -s zigzag --causal" + w + " --prune-plain -q -o " + pruned), 0);
  EXPECT_NE(slurp(pruned).find("\"pruned_for\""), std::string::npos);
  EXPECT_EQ(run("run --plan " + pruned + w + " --check"), 0);
  // A dropped accumulator return: verify fails (1); run refuses it (2), or with --no-verify fails the check (1).
  const std::string bad = dir + "/cli_bwd_bad.json";
  std::ofstream(bad) << drop_last_return(slurp(plan));
  EXPECT_EQ(run("verify " + bad), 1);
  EXPECT_EQ(run("verify " + bad + " --pass fwd"), 0);
  EXPECT_EQ(run("run --plan " + bad + w + " --check"), 2);
  EXPECT_EQ(run("run --plan " + bad + w + " --check --no-verify"), 1);
  // YAML plans carry the backward too.
  const std::string yaml = dir + "/cli_bwd.yaml";
  ASSERT_EQ(run("plan -t complete:5 -s zigzag --causal -f yaml -q -o " + yaml), 0);
  EXPECT_EQ(run("run --plan " + yaml + " -w B=1,S=50,H=2,D=8,causal --check --pass bwd"), 0);
  const std::string tl = dir + "/cli_bwd_tl.json", tr = dir + "/cli_bwd_trace.json";
  EXPECT_EQ(run("run --plan " + plan + w + " --timeline " + tl + " --trace " + tr), 0);
  EXPECT_NE(slurp(tl).find("\"fwd_steps\""), std::string::npos);
  EXPECT_NE(slurp(tr).find("bwd 4"), std::string::npos);
}

TEST(Cli, SimulateCalibrateAndAuto) {
  const std::string dir = ::testing::TempDir();
  const std::string src = TASP_SOURCE_DIR;
  EXPECT_EQ(run("simulate"), 0);  // the README's main job: embedded default
  const std::string json = dir + "/sim.json", tl = dir + "/sim_tl.json", tr = dir + "/sim_trace.json", csv = dir + "/sweep.csv";
  EXPECT_EQ(run("simulate -t complete:8 -w B=1,S=16k,H=32,D=128 --json " + json + " --timeline " + tl + " --trace " + tr), 0);
  EXPECT_TRUE(fs::exists(json) && fs::exists(tl) && fs::exists(tr));
  std::string text = slurp(json);
  EXPECT_NE(text.find("\"fastest\""), std::string::npos);
  EXPECT_NE(text.find("\"bwd_us\""), std::string::npos);  // fwd+bwd by default
  EXPECT_EQ(run("simulate -t complete:8 -w B=1,S=16k,H=32,D=128 --pass bwd"), 0);
  EXPECT_EQ(run("simulate -t complete:8 -w B=1,S=16k,H=32,D=128 --pass fwd"), 0);
  EXPECT_EQ(run("simulate -t h200-hgx-8 -s ring,hamilton --sweep S=8k:64k -o " + csv), 0);
  std::ifstream c(csv);
  int lines = 0;
  for (std::string l; std::getline(c, l);) ++lines;
  EXPECT_EQ(lines, 1 + 4 * 2);
  const std::string plan = dir + "/auto.json";
  EXPECT_EQ(run("plan -t h200-hgx-8 -s auto --workload B=1,S=16k,H=32,D=128 -o " + plan), 0);
  EXPECT_EQ(run("simulate -t h200-hgx-8 --plan " + plan + " -w B=1,S=16k,H=32,D=128"), 0);
  // On the socket fabric NCCL's all-gather outruns its send/recv (the profile's collective rate): auto weighs it as
  // the run will go, and the chosen scheme changes (Ulysses with send/recv, allgather with collectives, which is also
  // what a run picks by default there); the two flags exclude each other.
  const std::string sock = " -t " + src + "/topologies/h100x2-socket.yaml --profile " + src +
                           "/topologies/h100x2-socket.profile.yaml -w B=1,S=8192,H=32,D=128,causal -s auto -o ";
  const std::string p2p = dir + "/p2p.json", coll = dir + "/coll.json", dflt = dir + "/default.json";
  EXPECT_EQ(run("plan" + sock + p2p + " --sendrecv"), 0);
  EXPECT_EQ(run("plan" + sock + coll + " --collectives"), 0);
  EXPECT_EQ(run("plan" + sock + dflt), 0);
  EXPECT_NE(slurp(p2p).find("\"scheme\": \"ulysses\""), std::string::npos);
  EXPECT_NE(slurp(coll).find("\"scheme\": \"allgather\""), std::string::npos);
  EXPECT_NE(slurp(dflt).find("\"scheme\": \"allgather\""), std::string::npos);
  EXPECT_NE(run("plan" + sock + dflt + " --sendrecv --collectives"), 0);
  // Through host memory auto's allgather is the one timed fastest with rank 0's late chunk's queries moved: the plan
  // written has them (query_moves), and so does the plan `run --scheme auto` runs (here on the CPU, checked).
  const std::string shm = " -t " + src + "/topologies/h200x2-shm.yaml --profile " + src + "/topologies/h200x2-shm.profile.yaml";
  const std::string moved = dir + "/moved.json";
  EXPECT_EQ(run("plan" + shm + " -w B=1,S=8192,H=32,D=128,causal -s auto -o " + moved), 0);
  EXPECT_NE(slurp(moved).find("\"query_moves\""), std::string::npos);
  EXPECT_NE(slurp(moved).find("\"pieces_by_chunk\": true"), std::string::npos);
  EXPECT_EQ(run("run" + shm + " -w B=1,S=512,H=2,D=16,causal -s auto --check"), 0);
  EXPECT_EQ(run("run -t complete:2 -s auto"), 2);  // auto needs a workload
  // --measure-fabric measures NCCL steps from one process driving the GPUs: with the cpu backend, an error.
  EXPECT_EQ(run("run -t complete:2 -s ring -w B=1,S=64,H=2,D=8 --measure-fabric"), 2);
  EXPECT_NE(run("run -t complete:2 -s ring -w B=1,S=64,H=2,D=8 --fabric-csv " + dir + "/steps.csv"), 0);
  // Under a launcher (mpirun) every rank measures together; a launch of another size than the plan's is named before
  // any GPU is touched.
  const std::string said = dir + "/launched.txt";
  const int rc = std::system(("OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0 " +
                              std::string(TASP_BINARY) + " run --backend cuda -t complete:2 -s ring -w B=1,S=64,H=2,D=8 "
                              "--measure-fabric > " + said + " 2>&1").c_str());
  EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 2);
  EXPECT_NE(slurp(said).find("launched as 3 processes"), std::string::npos) << slurp(said);
  const std::string sj = dir + "/sock-sim.json";
  EXPECT_EQ(run("simulate -s allgather,ring --json " + sj + sock.substr(0, sock.find(" -s auto"))), 0);
  EXPECT_NE(slurp(sj).find("\"collectives\": true"), std::string::npos);
  const std::string prof = dir + "/fit.profile.yaml";
  EXPECT_EQ(run("calibrate --fit " + src + "/docs/measurements/data/nccl/h200x8-steps-2026-11-22.csv -o " + prof), 0);
  EXPECT_EQ(run("simulate --profile " + prof), 0);
  // Every scheme: one whose pieces do not fit (31 pieces of 8 tokens) is left out and named; asked by name, an error.
  const std::string some = dir + "/some.json";
  EXPECT_EQ(run("simulate -t complete:32 -w B=1,S=256,H=8,D=64 --json " + some), 0);
  const std::string stext = slurp(some);
  EXPECT_NE(stext.find("\"left_out\""), std::string::npos);
  EXPECT_NE(stext.find("\"ring\""), std::string::npos);
  EXPECT_EQ(run("simulate -t complete:32 -w B=1,S=256,H=8,D=64 -s hamilton"), 2);
  // Head-parallel plans: planned, verified against the topology, simulated, run exactly on the CPU.
  const std::string usp = dir + "/usp.json";
  EXPECT_EQ(run("plan -t cluster:2x4 -s usp --inner ring -o " + usp), 0);
  EXPECT_EQ(run("verify " + usp + " -t cluster:2x4"), 0);
  EXPECT_EQ(run("verify " + usp + " -t cluster:2x8"), 2);
  EXPECT_EQ(run("simulate -t cluster:2x4 -s ulysses,usp -w B=1,S=16k,H=8,Hkv=4,D=64,causal"), 0);
  EXPECT_EQ(run("run -t cluster:2x4 -s usp --ulysses 2 --inner two-level -w B=1,S=64,H=4,D=16,causal --check"), 0);
  EXPECT_EQ(run("simulate -t cluster:2x4 -s ulysses -w B=1,S=16k,H=12,D=64"), 2);  // 12 heads over 8 GPUs
  EXPECT_EQ(run("plan -t complete:8 -s usp"), 2);                                 // one node: needs --ulysses
  EXPECT_EQ(run("plan -t cluster:4x4 -s auto -w B=1,S=64k,H=16,Hkv=4,D=128,causal -o " + usp), 0);  // may pick usp
  // On one node auto's usp is planned with the group size it was timed with (4 heads: groups of 4 GPUs; without it
  // the plan stopped at "usp on one node: give the group size").
  EXPECT_EQ(run("plan -t complete:8 -s auto -w B=1,S=128k,H=4,D=128,causal -o " + usp), 0);
  EXPECT_NE(slurp(usp).find("\"ulysses\": 4"), std::string::npos);
  // simulate searches usp's group size too (here 2 and 4 GPUs on one node of 8) and says what it tried.
  const std::string uj = dir + "/usp-search.json";
  EXPECT_EQ(run("simulate -t h200-hgx-8 -s usp -w B=1,S=64k,H=32,Hkv=8,D=128,causal --json " + uj), 0);
  const std::string ut = slurp(uj);
  EXPECT_NE(ut.find("groups of"), std::string::npos);
  EXPECT_NE(ut.find("2xzigzag"), std::string::npos);
  EXPECT_NE(ut.find("4xzigzag"), std::string::npos);
  // Bad input: status 2, nothing written.
  const std::string none = dir + "/none.out";
  fs::remove(none);
  EXPECT_EQ(run("simulate -w S=5,H=1,D=64 --json " + none), 2);           // fewer tokens than GPUs
  EXPECT_EQ(run("simulate -s zigzag -w S=8k,H=1,D=64 --json " + none), 2); // zigzag needs causal
  EXPECT_EQ(run("simulate --profile " + src + "/README.md --json " + none), 2);
  EXPECT_EQ(run("simulate --sweep S=64k:8k -o " + none), 2);
  EXPECT_EQ(run("calibrate --fit " + src + "/README.md -o " + none), 2);
  EXPECT_EQ(run("plan -s auto -o " + none), 2);  // auto needs a workload
  EXPECT_FALSE(fs::exists(none));
}

// Named workloads: listed, usable wherever -w is, overridable; a wrong name lists the close ones.
TEST(Cli, ConfigsAndMetrics) {
  const std::string dir = ::testing::TempDir();
  const std::string list = dir + "/configs.txt", json = dir + "/configs.json";
  ASSERT_EQ(run("configs > " + list + " 2>&1; true"), 0);
  ASSERT_EQ(std::system((std::string(TASP_BINARY) + " configs > " + list).c_str()), 0);
  const std::string text = slurp(list);
  for (const char* n : {"tiny", "small_window", "medium_large_head", "xlarge", "qwen3_235b_a22b", "qwen3_4b", "zigzag_gqa",
                        "llama3-8b", "llama3-70b"})
    EXPECT_NE(text.find(n), std::string::npos) << n;
  ASSERT_EQ(std::system((std::string(TASP_BINARY) + " configs --json > " + json).c_str()), 0);
  EXPECT_NE(slurp(json).find("\"qwen3_14b\""), std::string::npos);
  const std::string sim = dir + "/sim_cfg.json";
  EXPECT_EQ(run("simulate --config qwen3_14b -t h200-hgx-8 --json " + sim), 0);
  const std::string st = slurp(sim);
  for (const char* k : {"\"config\": \"qwen3_14b\"", "tokens_per_s", "peak_memory_bytes", "parallel_efficiency", "speedup_vs_1gpu"})
    EXPECT_NE(st.find(k), std::string::npos) << k;
  EXPECT_EQ(run("simulate --config qwen3_14b -w S=32k,B=1 -t h200-hgx-8"), 0);  // -w keys override
  EXPECT_EQ(run("simulate --config mediun"), 2);
  EXPECT_EQ(run("simulate --config small_window"), 0);  // a window: plans pruned for it
  const std::string rj = dir + "/run.json";
  EXPECT_EQ(run("run --backend cpu -t complete:2 -s zigzag --config tiny -w S=256 --check --json " + rj), 0);
  const std::string r = slurp(rj);
  for (const char* k : {"tasp-run/1", "tokens_per_s", "\"cosine\"", "check_passed"}) EXPECT_NE(r.find(k), std::string::npos) << k;
}

// The inputs that used to hang, exhaust memory or be accepted silently: each ends in under 2 s, exit 2, no file.
TEST(Cli, HostileInputsEndFastWithAClearError) {
  const std::string dir = ::testing::TempDir();
  std::string bomb = "format: \"tasp-plan/1\"\nranks: 2\na0: &a0 [1,1,1,1,1,1,1,1,1]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 9; ++j) bomb += (j ? ",*a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  bomb += "steps: *a9\n";
  std::ofstream(dir + "/bomb.yaml") << bomb;
  const std::string out = dir + "/hostile.out";
  const std::vector<std::string> cmds = {
      "verify " + dir + "/bomb.yaml",
      "plan -t complete:100000 -o " + out,
      "run --backend cpu -t complete:8 -s hamilton -w B=1,S=100000000,H=64,D=128 --timeline " + out,
      "run --backend cpu -t complete:2 -s ring -w B=1,B=2,S=64,H=2,D=16 --timeline " + out,
      "run --backend cpu -t complete:2 -s ring -w S=-1,H=2,D=16 --timeline " + out,
  };
  for (const auto& c : cmds) {
    fs::remove(out);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(run(c), 2) << c;
    // Ends, not hangs: 0.2 s in a release build, 1.1 s under ASan+UBSan, twice that on a loaded 2-core machine.
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0) << c;
    EXPECT_FALSE(fs::exists(out)) << c;
    EXPECT_FALSE(fs::exists(out + ".tmp")) << c;
  }
}

// Without a GPU (CI) the GPU commands end with a clear error and status 2, never a crash.
TEST(Cli, GpuCommandsWithoutGpu) {
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0) GTEST_SKIP() << "a GPU is visible";
  EXPECT_EQ(run("run --backend cuda -t complete:2 -s ring -w B=1,S=64,H=2,D=64"), 2);
  EXPECT_EQ(run("bench kernel"), 2);
  EXPECT_EQ(run("calibrate --measure --ranks 2"), 2);
  // Calibration rows of the backward time a ring step's fp32 ends: --csv without --accumulate is refused by name,
  // before any device is looked for (in a build with the CUDA bench, whose help lists the flag).
  const std::string help = ::testing::TempDir() + "/bench_help.log", log = ::testing::TempDir() + "/bench_csv.log";
  std::system((std::string(TASP_BINARY) + " bench kernel --help > " + help + " 2>&1").c_str());
  if (slurp(help).find("--accumulate") != std::string::npos) {
    const int rc = std::system((std::string(TASP_BINARY) + " bench kernel --pass bwd --csv " + ::testing::TempDir() +
                                "/rows.csv > " + log + " 2>&1").c_str());
    EXPECT_EQ(WEXITSTATUS(rc), 2);
    EXPECT_NE(slurp(log).find("add --accumulate"), std::string::npos) << slurp(log);
  }
}

TEST(Cli, ReportFromRunsAndTimelines) {
  const std::string dir = ::testing::TempDir();
  const std::string runs = dir + "/runs.csv", out = dir + "/rep";
  std::ofstream(runs) << "config,scheme,measured_ms\n\"B=1,H=8,D=128,S=8192\",ring,1.5\n\"B=1,H=8,D=128,S=8192\",hamilton,1.2\n";
  fs::remove_all(out);
  EXPECT_EQ(run("report --runs " + runs + " -t h200-hgx-8 -o " + out), 0);
  EXPECT_TRUE(fs::exists(out + "/report.md") && fs::exists(out + "/report.html"));
  std::string text = slurp(out + "/report.html");
  EXPECT_NE(text.find("<svg"), std::string::npos);
  // Timelines: a simulated one against a CPU run of the same plan.
  const std::string sim = dir + "/sim_tl.json", cpu = dir + "/cpu_tl.json", out2 = dir + "/rep2";
  EXPECT_EQ(run("simulate -t complete:4 -s ring -w B=1,S=64,H=2,D=16 --timeline " + sim), 0);
  EXPECT_EQ(run("run --backend cpu -t complete:4 -s ring -w B=1,S=64,H=2,D=16 --timeline " + cpu), 0);
  EXPECT_EQ(run("report --simulated " + sim + " --measured " + cpu + " -o " + out2), 0);
  EXPECT_TRUE(fs::exists(out2 + "/report.html"));
  // Bad input: a run without a quoted workload, a missing file, nothing to report.
  const std::string bad = dir + "/bad_runs.csv";
  std::ofstream(bad) << "config,scheme,measured_ms\nB=1,ring,1.0\n";
  EXPECT_EQ(run("report --runs " + bad + " -o " + dir + "/rep3"), 2);
  EXPECT_EQ(run("report --runs " + dir + "/missing.csv -o " + dir + "/rep3"), 2);
  EXPECT_EQ(run("report -o " + dir + "/rep3"), 2);
  // A ranks column picks complete:N when no topology is given, and a topology of another size is refused
  // (its predictions would be for other runs); a bad ranks value is named.
  const std::string ranked = dir + "/ranked.csv";
  std::ofstream(ranked) << "config,scheme,measured_ms,ranks\n\"B=1,H=8,D=128,S=8192\",ring,1.5,2\n";
  EXPECT_EQ(run("report --runs " + ranked + " -o " + dir + "/rep4"), 0);
  EXPECT_EQ(run("report --runs " + ranked + " -t h200-hgx-8 -o " + dir + "/rep5"), 2);
  EXPECT_FALSE(fs::exists(dir + "/rep5/report.md"));
  std::ofstream(ranked) << "config,scheme,measured_ms,ranks\n\"B=1,H=8,D=128,S=8192\",ring,1.5,two\n";
  EXPECT_EQ(run("report --runs " + ranked + " -o " + dir + "/rep6"), 2);
  // A transport column predicts each allgather row as it ran: over sockets NCCL's collectives outrun its send/recv,
  // so the row that ran them is predicted well under the same row as send/recv; a bad value is named.
  const std::string src = TASP_SOURCE_DIR, moved = dir + "/moved.csv";
  const std::string sock = " -t " + src + "/topologies/h100x2-socket.yaml --profile " + src + "/topologies/h100x2-socket.profile.yaml";
  auto predicted_as = [&](const std::string& transport) {  // the report's predicted ms: the row's fifth cell
    std::ofstream(moved) << "config,scheme,measured_ms,ranks,transport\n\"B=1,H=32,D=128,S=8192,causal\",allgather,45,2,"
                         << transport << "\n";
    EXPECT_EQ(run("report --runs " + moved + sock + " -o " + dir + "/rep7"), 0);
    const std::string md = slurp(dir + "/rep7/report.md");
    const auto at = md.find("| B=1,H=32,D=128,S=8192,causal |");
    if (at == std::string::npos) return 0.0;
    std::istringstream row(md.substr(at, md.find('\n', at) - at));
    std::string cell;
    for (int i = 0; i < 6; ++i) std::getline(row, cell, '|');
    return std::stod(cell);
  };
  const double collectives = predicted_as("collectives"), sendrecv = predicted_as("sendrecv");
  EXPECT_GT(collectives, 0);
  EXPECT_LT(collectives * 1.2, sendrecv);
  std::ofstream(moved) << "config,scheme,measured_ms,transport\n\"B=1,H=8,D=128,S=8192\",allgather,1.5,nccl\n";
  EXPECT_EQ(run("report --runs " + moved + " -o " + dir + "/rep9"), 2);
}

// A figure of a `tasp report` summary: report_figure(md, "median |error| ") of "median |error| 4.7%" is 4.7 (1e9: none).
static double report_figure(const std::string& md, const std::string& what) {
  const auto at = md.find(what);
  return at == std::string::npos ? 1e9 : std::stod(md.substr(at + what.size()));
}

// The shipped profiles predict the runs measured where communication is exposed (committed under
// docs/measurements/data/: 2x H200 over NVLink, host memory and sockets) within what the model is held to there
// (issue 41: median |error| <= 5%, max <= 12%) and name the fastest scheme of every configuration: a change to the
// simulator or a refit that breaks them fails here, without a GPU. Where a set's host moved its sockets at a rate of its
// own, the profile is the one fitted to the steps its call measured first (`steps`, in data/fabrics/; the shipped one's
// other terms kept), as `FABRIC=socket tools/gpu/compare.sh` fits it.
TEST(Cli, FabricProfilesPredictTheirRuns) {
  const std::string dir = ::testing::TempDir(), src = TASP_SOURCE_DIR, data = src + "/docs/measurements/data/";
  struct Fabric {
    std::string topology, profile, runs;  // topology: a file in topologies/, or a shorthand
    std::string steps = {};
  };
  // The slow fabrics' runs since 2026-11-27's executor (each step's kernel after its transfers' launch, a 2-rank
  // reduce as a broadcast), which their profiles' steps describe; the runs before it read 4-13% under them. The
  // socket runs of queries moved in the crossing order (2026-11-27, last) on their host's steps: 2.6%, 8.4%.
  for (const Fabric& f : {Fabric{"complete:2", "h200-hgx-8", "h200x2-schemes-2026-11-27.csv"},
                          Fabric{"h200x2-shm", "h200x2-shm", "h200x2-shm-first-2026-11-27.csv"},
                          Fabric{"h200x2-shm", "h200x2-shm", "h200x2-shm-pruned-3-1-2026-11-27.csv"},
                          Fabric{"h200x2-shm", "h200x2-shm", "h200x2-shm-moved-2026-11-27.csv"},
                          Fabric{"h200x2-shm", "h200x2-shm", "h200x2-shm-moved-exposed-2026-11-27.csv"},
                          Fabric{"h200x2-socket", "h200x2-socket", "h200x2-socket-first-2026-11-27.csv"},
                          Fabric{"h200x2-socket", "h200x2-socket", "h200x2-socket-qwen3-steps-2026-11-27.csv"},
                          Fabric{"h200x2-socket", "h200x2-socket", "h200x2-socket-moved-steps-2026-11-27.csv",
                                 "h200x2-socket-steps-2026-11-27-moved-before.csv"}}) {
    SCOPED_TRACE(f.runs);
    const std::string out = dir + "/fabric-" + f.profile;
    const std::string topo = f.topology.find(':') != std::string::npos ? f.topology : src + "/topologies/" + f.topology + ".yaml";
    fs::remove_all(out);
    std::string profile;
    if (!f.steps.empty()) {
      const std::string fitted = dir + "/fitted-" + f.profile + ".yaml";
      ASSERT_EQ(run("calibrate -q --fit " + data + "fabrics/" + f.steps + " --base " + src + "/topologies/" + f.profile +
                    ".profile.yaml -t " + topo + " --name " + f.profile + " -o " + fitted),
                0);
      profile = " --profile " + fitted;
    }
    ASSERT_EQ(run("report --runs " + data + "executor/" + f.runs + " -t " + topo + profile + " -o " + out), 0);
    const std::string md = slurp(out + "/report.md");
    EXPECT_NE(md.find("profile " + f.profile + ","), std::string::npos) << "the built-in profile it was fitted as";
    EXPECT_LE(report_figure(md, "median |error| "), 5.0);
    EXPECT_LE(report_figure(md, "max |error| "), 12.0);
    EXPECT_NE(md.find("among the measured fastest in 100% of configurations"), std::string::npos);
  }
}

// allgather's kernels in pieces (2x H200 NVLink, 2026-11-27: 1, 2+1, 2, 3+1, 2+1+1, 4, 4+2+1+1 at B=1 S=8192 H=32,
// `medium` and `qwen3_14b`, send/recv, where the transfers hide): a step's pieces are one walk of the kernel and every
// merging forward step reads and writes the running out. Summing each piece's blocks instead had put 4+2+1+1 35% and
// 3+1 14% over. The max is qwen3_14b's, whose runs spread 10% within the call.
TEST(Cli, PiecesKernelsPredicted) {
  const std::string dir = ::testing::TempDir() + "/pieces", src = TASP_SOURCE_DIR;
  fs::remove_all(dir);
  ASSERT_EQ(run("report --runs " + src + "/docs/measurements/data/executor/h200x2-nvlink-pieces-2026-11-27.csv -t complete:2 -o " + dir), 0);
  const std::string md = slurp(dir + "/report.md");
  EXPECT_LE(report_figure(md, "median |error| "), 5.0);
  EXPECT_LE(report_figure(md, "max |error| "), 16.0);
}

// The memory a rank's buffers take, as `tasp run` predicts it beside what the cuda backend allocated: the allocations
// `tasp run` printed on 2x H200 (2026-11-26/27: `GPU memory per rank: X GiB of tasp buffers`, two decimals; the
// head-dim configurations' CSV three) for schemes, transports, pieces and head dims, against `tasp simulate`'s
// peak_memory_bytes for the same plan (planner::peak_rank_memory). Before the exchange buffers, the padded dQ scratch
// and a head-parallel GPU's 16-bit results were counted, these read 11% over to 29% under.
TEST(Cli, MemoryPredictionsMatchTheGpuRuns) {
  const std::string dir = ::testing::TempDir(), src = TASP_SOURCE_DIR;
  struct Row {
    std::string topology, scheme, workload, flags;
    double gib;
  } rows[] = {
      {"complete:2", "allgather", "B=1,H=32,D=128,S=8192,causal", "--gather-pieces 1 --sendrecv", 0.88},
      {"complete:2", "ulysses", "B=1,H=32,D=128,S=8192,causal", "", 0.70},
      {"complete:2", "ulysses", "B=4,H=24,D=128,S=8192,causal", "", 1.94},
      {"complete:2", "ulysses", "B=4,H=40,Hkv=8,D=128,S=16384,causal", "", 4.30},
      {"complete:2", "allgather", "B=4,S=16384,H=32,Hkv=4,D=80,causal", "--gather-pieces 1 --sendrecv", 1.84},
      {"complete:2", "ulysses", "B=4,S=16384,H=32,Hkv=4,D=80,causal", "", 2.31},
      {"h200x2-shm", "allgather", "B=1,H=32,D=128,S=8192,causal", "--gather-pieces 2 --collectives", 0.88},
      {"h200x2-shm", "allgather", "B=4,H=24,D=128,S=8192,causal", "--gather-pieces 2 --collectives", 2.63},
      {"h200x2-shm", "allgather", "B=4,H=40,Hkv=8,D=128,S=16384,causal", "--gather-pieces 1 --sendrecv", 3.77},
      {"h200x2-socket", "allgather", "B=1,H=32,D=128,S=8192,causal", "--gather-pieces 4 --collectives", 0.78},
      {"h200x2-socket", "allgather", "B=4,H=24,D=128,S=8192,causal", "--gather-pieces 4 --collectives", 2.35},
      {"h200x2-socket", "allgather", "B=1,H=32,Hkv=8,D=128,S=65536,causal", "--gather-pieces 2 --collectives", 3.26},
      // in steps of several pieces (2026-11-27)
      {"h200x2-socket", "allgather", "B=4,H=40,Hkv=8,D=128,S=16384,causal", "--gather-steps 2,1 --collectives", 3.90},
      {"h200x2-socket", "allgather", "B=1,H=32,Hkv=8,D=128,S=65536,causal", "--gather-steps 2,1 --collectives", 3.39},
      {"h200x2-shm", "allgather", "B=1,H=32,D=128,S=8192,causal", "--gather-steps 2,1 --collectives", 0.95},
      {"h200x2-shm", "allgather", "B=4,H=24,D=128,S=8192,causal", "--gather-steps 2,1 --collectives", 2.83},
      {"complete:2", "allgather", "B=4,S=8192,H=12,D=256", "", 2.631},
      {"complete:2", "allgather", "B=4,S=16384,H=24,D=256", "", 10.507},
      // `tasp configs` names on 2x H200 (2026-11-26): a window, D=64 GQA, a 128K layer, the largest.
      {"complete:2", "allgather", "B=4,S=8192,H=24,D=128,causal,window=512:0", "--gather-pieces 1 --sendrecv", 2.26},
      {"complete:2", "allgather", "B=2,S=16384,H=64,Hkv=4,D=64,causal", "--gather-pieces 1 --sendrecv", 1.16},
      {"complete:2", "allgather", "B=1,S=131072,H=32,Hkv=8,D=128,causal", "--gather-pieces 1 --sendrecv", 6.52},
      {"complete:2", "allgather", "B=8,S=32768,H=32,D=128,causal", "--gather-pieces 1 --sendrecv", 28.04},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.scheme + " " + r.workload + " " + r.flags);
    const std::string topo = r.topology.find(':') != std::string::npos ? r.topology : src + "/topologies/" + r.topology + ".yaml";
    const std::string json = dir + "/memory.json";
    fs::remove(json);
    ASSERT_EQ(run("simulate -t " + topo + " -s " + r.scheme + " -w " + r.workload + " --pass fwd+bwd " + r.flags + " --json " + json + " -q"), 0);
    const std::string j = slurp(json);
    const auto at = j.find("\"peak_memory_bytes\":");
    ASSERT_NE(at, std::string::npos);
    const double gib = std::stod(j.substr(at + 20)) / (1 << 30);
    // Token-parallel plans to the printed digit; Ulysses within 1.6% (its copy lists and per-group rounding).
    EXPECT_NEAR(gib, r.gib, 0.006 + 0.012 * r.gib);
  }
}
