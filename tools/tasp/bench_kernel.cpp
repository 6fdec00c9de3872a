// tasp bench kernel: attention forward timings on this GPU (median of timed launches, CUDA events).
#include <cuda_runtime.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {
namespace {

using kernels::DType;

struct Shape {
  int B, H, D;
  long S;
  bool causal;
  int pieces;  // KV split into this many separate buffers (a plan step's work list)
};

struct Row {
  Shape s;
  double ms, tflops;
};

double time_shape(const Shape& sh, DType dt, int warmup, int iters) {
  const size_t elt = 2, qn = size_t(sh.B) * sh.S * sh.H * sh.D;
  void *q, *k, *v;
  float *out, *lse;
  TASP_CUDA(cudaMalloc(&q, qn * elt));
  TASP_CUDA(cudaMalloc(&k, qn * elt));
  TASP_CUDA(cudaMalloc(&v, qn * elt));
  TASP_CUDA(cudaMalloc(&out, qn * 4));
  TASP_CUDA(cudaMalloc(&lse, size_t(sh.B) * sh.H * sh.S * 4));
  kernels::fill_random(q, dt, qn, 1, nullptr);
  kernels::fill_random(k, dt, qn, 2, nullptr);
  kernels::fill_random(v, dt, qn, 3, nullptr);
  kernels::AttentionBatch b;
  b.dtype = dt, b.B = sh.B, b.H = sh.H, b.Hkv = sh.H, b.D = sh.D, b.q = q, b.q_rows = int(sh.S), b.out = out, b.lse = lse;
  // Pieces are separate buffers: slices of one allocation laid out [B, len, H, D] each.
  long pos = 0;
  for (int p = 0; p < sh.pieces; ++p) {
    const long len = sh.S * (p + 1) / sh.pieces - sh.S * p / sh.pieces;
    const size_t off = size_t(sh.B) * pos * sh.H * sh.D * elt;
    b.pieces.push_back({static_cast<char*>(k) + off, static_cast<char*>(v) + off, int(len), pos});
    pos += len;
  }
  b.items.push_back({0, int(sh.S), 0, 0, sh.pieces, sh.causal, false});
  kernels::Workspace ws;
  cudaEvent_t e0, e1;
  TASP_CUDA(cudaEventCreate(&e0));
  TASP_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; ++i) kernels::attention_forward(b, ws, nullptr);
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    TASP_CUDA(cudaEventRecord(e0));
    kernels::attention_forward(b, ws, nullptr);
    TASP_CUDA(cudaEventRecord(e1));
    TASP_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    TASP_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out), cudaFree(lse);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void register_bench_kernel(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("kernel", "Attention forward kernel timings on this GPU (TFLOP/s count 4*B*H*S*S*D, half when causal)");
  auto dtype = std::make_shared<std::string>("bf16");
  auto iters = std::make_shared<int>(20), warmup = std::make_shared<int>(3);
  auto shapes = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<std::string>(), csv = std::make_shared<std::string>();
  cmd->add_option("--dtype", *dtype, "bf16 | fp16")->capture_default_str();
  cmd->add_option("--iters", *iters, "Timed launches (median reported)")->capture_default_str();
  cmd->add_option("--warmup", *warmup, "Untimed launches first")->capture_default_str();
  cmd->add_option("--shape", *shapes, "B=..,S=..,H=..,D=..[,causal][,pieces=P] (repeatable; default: the issue's set)");
  cmd->add_option("--json", *json, "Also write the rows as JSON here");
  cmd->add_option("--csv", *csv, "Also write the rows as calibration CSV (tasp calibrate --fit) here");
  cmd->callback([=] {
    if (*dtype != "bf16" && *dtype != "fp16") throw planner::InputError("--dtype: expected bf16 or fp16");
    if (*iters < 1 || *warmup < 0) throw planner::InputError("--iters must be >= 1, --warmup >= 0");
    if (!kernels::cuda_device_available()) throw Exit(kBadInput, "bench kernel: no CUDA device visible");
    const DType dt = *dtype == "bf16" ? DType::BF16 : DType::FP16;
    std::vector<Shape> list;
    for (const auto& text : *shapes) {
      std::string rest = text;
      int pieces = 1;
      if (auto at = rest.find(",pieces="); at != std::string::npos) {
        pieces = int(planner::parse_count(rest.substr(at + 8)));
        rest = rest.substr(0, at);
        if (pieces < 1) throw planner::InputError("--shape " + text + ": pieces must be a positive integer");
      }
      const planner::Workload w = planner::parse_workload(rest);
      if (!kernels::head_dim_supported(w.D)) throw planner::InputError("--shape " + text + ": D must be 64 or 128");
      list.push_back({w.B, w.H, w.D, w.S, w.causal, pieces});
    }
    if (list.empty())
      list = {{1, 32, 128, 16384, false, 1}, {1, 32, 128, 16384, true, 1}, {2, 16, 64, 16384, false, 1},
              {2, 16, 64, 16384, true, 1},  {1, 32, 128, 8192, false, 1},  {1, 32, 128, 16384, false, 7}};
    int dev = 0;
    cudaDeviceProp prop;
    TASP_CUDA(cudaGetDevice(&dev));
    TASP_CUDA(cudaGetDeviceProperties(&prop, dev));
    std::cout << "# tasp bench kernel: " << prop.name << ", " << *dtype << ", median of " << *iters << " after " << *warmup
              << " warm-up\n#" << std::setw(5) << "B" << std::setw(6) << "H" << std::setw(8) << "S" << std::setw(6) << "D"
              << std::setw(8) << "mask" << std::setw(8) << "pieces" << std::setw(11) << "ms" << std::setw(10) << "TFLOP/s\n";
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& s : list) {
      const double ms = time_shape(s, dt, *warmup, *iters);
      const double flops = 4.0 * s.B * s.H * double(s.S) * double(s.S) * s.D * (s.causal ? 0.5 : 1.0);
      const double tf = flops / (ms * 1e-3) / 1e12;
      std::cout << " " << std::setw(5) << s.B << std::setw(6) << s.H << std::setw(8) << s.S << std::setw(6) << s.D
                << std::setw(8) << (s.causal ? "causal" : "none") << std::setw(8) << s.pieces << std::fixed
                << std::setprecision(3) << std::setw(11) << ms << std::setprecision(1) << std::setw(9) << tf << std::endl;
      rows.push_back({{"B", s.B}, {"H", s.H}, {"S", s.S}, {"D", s.D}, {"causal", s.causal}, {"pieces", s.pieces},
                      {"ms", ms}, {"tflops", tf}, {"dtype", *dtype}, {"device", prop.name}});
    }
    if (!json->empty()) write_output(*json, [&](std::ostream& o) { o << rows.dump(1) << "\n"; });
    if (!csv->empty())
      write_output(*csv, [&](std::ostream& o) {
        o << "kind,B,H,S,D,causal,ms\n";
        for (const auto& r : rows)
          if (r["pieces"] == 1)
            o << "attention," << r["B"] << "," << r["H"] << "," << r["S"] << "," << r["D"] << "," << (r["causal"].get<bool>() ? 1 : 0)
              << "," << r["ms"].get<double>() << "\n";
      });
  });
}

}  // namespace tasp::cli
