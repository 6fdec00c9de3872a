// tasp bench kernel: attention forward and backward timings on this GPU (median of timed launches, CUDA events).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executor/cuda_pass.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "planner/mask.hpp"
#include "planner/plan.hpp"
#include "planner/topology.hpp"
#include "planner/workload.hpp"
#include "planner/workload_catalogue.hpp"
#include "tools/tasp/cli.hpp"

namespace tasp::cli {
namespace {

using kernels::DType;

struct Shape {
  int B, H, D;
  long S;
  bool causal;
  int pieces;  // KV split into this many separate buffers (a plan step's work list)
  int Hkv = 0;  // 0: H
  long window_left = -1, window_right = -1;
  std::vector<long> docs{};  // packed documents: one item each
  int kv_heads() const { return Hkv > 0 ? Hkv : H; }
  // The workload as far as the kernels' items and the mask go.
  planner::Workload workload() const {
    planner::Workload w;
    w.B = B, w.S = S, w.H = H, w.Hkv = kv_heads(), w.D = D, w.causal = causal;
    w.window_left = window_left, w.window_right = window_right, w.docs = docs;
    return w;
  }
  planner::Mask mask() const { return planner::make_mask(workload()); }
  // Unmasked (query, key) pairs: what the TFLOP/s count.
  double pairs() const { return planner::visible_pairs(mask(), {0, S}, {0, S}); }
  std::string mask_name() const {
    if (!docs.empty() && (window_left >= 0 || window_right >= 0)) return "docs+win";
    if (!docs.empty()) return "docs";
    if (window_left >= 0 || window_right >= 0) return "window";
    return causal ? "causal" : "none";
  }
};

Shape shape_of(const planner::Workload& w, int pieces) {
  Shape s{w.B, w.H, w.D, w.S, w.causal, pieces, w.Hkv};
  s.window_left = w.window_left, s.window_right = w.causal ? -1 : w.window_right, s.docs = w.docs;
  return s;
}

struct Row {
  Shape s;
  double ms, tflops;
};

// How a shape is timed (the command's options): `heat_ms`: the kernel runs that long first; with `mix` the forward
// and the backward take turns then and between the timed launches (as in training, where the clock follows
// their mix); `deterministic`: the backward's dQ in launch order.
struct Timing {
  int warmup = 3, iters = 20;
  double heat_ms = 0;
  bool mix = false, deterministic = false;
  bool accumulate = false;  // the backward's fp32 ends (a ring step's), not a training step's 16-bit ones
};

// Median ms of the forward launch, or with `backward` of the backward (row sums, kernel, dQ finish) on the
// forward's out and LSE.
double time_shape(const Shape& sh, DType dt, bool backward, const Timing& tm) {
  const int warmup = tm.warmup, iters = tm.iters;
  const double heat_ms = tm.heat_ms;
  const bool mix = tm.mix;
  const size_t elt = 2, qn = size_t(sh.B) * sh.S * sh.H * sh.D, kn = size_t(sh.B) * sh.S * sh.kv_heads() * sh.D;
  kernels::DeviceAllocs dev;
  void *q = dev(qn * elt), *k = dev(kn * elt), *v = dev(kn * elt);
  auto* out = static_cast<float*>(dev(qn * 4));
  auto* lse = static_cast<float*>(dev(size_t(sh.B) * sh.H * sh.S * 4));
  kernels::fill_random(q, dt, qn, 1, nullptr);
  kernels::fill_random(k, dt, kn, 2, nullptr);
  kernels::fill_random(v, dt, kn, 3, nullptr);
  kernels::AttentionBatch b;
  b.dtype = dt, b.B = sh.B, b.H = sh.H, b.Hkv = sh.kv_heads(), b.D = sh.D, b.q = q, b.q_rows = int(sh.S), b.out = out, b.lse = lse;
  // Pieces are separate buffers: slices of one allocation laid out [B, len, Hkv, D] each.
  long pos = 0;
  for (int p = 0; p < sh.pieces; ++p) {
    const long len = sh.S * (p + 1) / sh.pieces - sh.S * p / sh.pieces;
    const size_t off = size_t(sh.B) * pos * sh.kv_heads() * sh.D * elt;
    b.pieces.push_back({static_cast<char*>(k) + off, static_cast<char*>(v) + off, int(len), pos});
    pos += len;
  }
  // One item per document, each over all pieces (the kernels skip what its rows do not see).
  b.items = executor::cuda::masked_items(sh.workload(), sh.mask(), {0, sh.S}, 0, sh.pieces, false);
  kernels::Workspace ws;
  kernels::AttentionBackwardBatch bb;
  float* dq = nullptr;  // fp32, or the 16-bit dQ without `accumulate`
  void *out16 = nullptr, *grad16 = nullptr;
  bool grads_direct = false;
  if (backward || mix) {
    kernels::attention_forward(b, ws, nullptr);
    bb.dtype = dt, bb.B = sh.B, bb.H = sh.H, bb.Hkv = sh.kv_heads(), bb.D = sh.D, bb.q = q, bb.q_rows = int(sh.S);
    bb.dout = dev(qn * elt);
    kernels::fill_random(const_cast<void*>(bb.dout), dt, qn, 4, nullptr);
    bb.lse = lse, bb.dsum = static_cast<float*>(dev(size_t(sh.B) * sh.H * sh.S * 4));
    dq = static_cast<float*>(dev(qn * 4));
    float* grad = static_cast<float*>(dev(2 * kn * 4));
    TASP_CUDA(cudaMemset(dq, 0, qn * 4));
    TASP_CUDA(cudaMemset(grad, 0, 2 * kn * 4));
    bb.items = b.items, bb.pieces = b.pieces;
    bb.deterministic = tm.deterministic;
    bb.dq_accum = static_cast<float*>(dev(kernels::dq_accum_floats(bb) * 4));
    // A training step's ends: the output as the framework keeps it (16 bits), dK/dV written in 16 bits where one
    // CTA writes each key row, else into fp32 and cast (timed: clearing, kernel, cast).
    out16 = dev(qn * elt);
    kernels::cast_out(out, out16, dt, qn, nullptr);
    grad16 = dev(2 * kn * elt);
    grads_direct = !tm.accumulate && kernels::grads16_allowed(sh.H, sh.kv_heads(), tm.deterministic);
    for (const auto& kp : b.pieces) {
      const size_t off = size_t(sh.B) * kp.pos0 * sh.kv_heads() * sh.D;
      kernels::GradPiece g{grad + off, grad + kn + off, 0};
      if (grads_direct) g = {}, g.dk16 = static_cast<char*>(grad16) + off * elt, g.dv16 = static_cast<char*>(grad16) + (kn + off) * elt;
      bb.grads.push_back(g);
    }
  }
  auto forward = [&] { kernels::attention_forward(b, ws, nullptr); };
  auto backward_launch = [&] {
    // What one backward costs: row sums, the scratch cleared, the kernel, dQ out of the scratch; without
    // `accumulate`, as SDPA's: from the 16-bit output to 16-bit dQ, dK, dV.
    TASP_CUDA(cudaMemsetAsync(bb.dq_accum, 0, kernels::dq_accum_floats(bb) * 4));
    if (tm.accumulate) {
      kernels::attention_backward_prepare(out, bb.dout, dt, sh.B, int(sh.S), sh.H, sh.D, const_cast<float*>(bb.dsum), nullptr);
      kernels::attention_backward(bb, ws, nullptr);
      kernels::attention_backward_finish(bb, dq, ws, nullptr);
      return;
    }
    kernels::attention_backward_prepare16(out16, bb.dout, dt, sh.B, int(sh.S), sh.H, sh.D, const_cast<float*>(bb.dsum), nullptr);
    if (!grads_direct) TASP_CUDA(cudaMemsetAsync(bb.grads[0].dk, 0, 2 * kn * 4));
    kernels::attention_backward(bb, ws, nullptr);
    kernels::attention_backward_finish16(bb, dq, ws, nullptr);
    if (!grads_direct) kernels::cast_out(bb.grads[0].dk, grad16, dt, 2 * kn, nullptr);
  };
  auto launch = [&] { backward ? backward_launch() : forward(); };
  auto other = [&] {  // the other pass, with `mix`
    if (mix) backward ? forward() : backward_launch();
  };
  cudaEvent_t e0, e1;
  TASP_CUDA(cudaEventCreate(&e0));
  TASP_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; ++i) launch();
  // Heat: keep the GPU busy with this kernel until its clock settles under the power limit, in batches of
  // about 20 ms so that host round trips do not let it cool.
  if (heat_ms > 0) {
    TASP_CUDA(cudaEventRecord(e0));
    launch();
    TASP_CUDA(cudaEventRecord(e1));
    TASP_CUDA(cudaEventSynchronize(e1));
    float one = 0;
    TASP_CUDA(cudaEventElapsedTime(&one, e0, e1));
    const int batch = std::max(1, int(20 / std::max(one, 1e-3f)));
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < heat_ms) {
      for (int i = 0; i < batch; ++i) launch(), other();
      TASP_CUDA(cudaDeviceSynchronize());
    }
  }
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    TASP_CUDA(cudaEventRecord(e0));
    launch();
    TASP_CUDA(cudaEventRecord(e1));
    TASP_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    TASP_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
    other();
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void register_bench_kernel(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("kernel",
                                   "Attention kernel timings on this GPU (TFLOP/s count 4*B*H*D per unmasked (query, key) pair\n"
                                   "forward, 2.5x that backward: S*S, half when causal, exact for documents and windows)");
  auto dtype = std::make_shared<std::string>("bf16"), pass = std::make_shared<std::string>("fwd");
  auto shapes = std::make_shared<std::vector<std::string>>(), configs = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<std::string>(), csv = std::make_shared<std::string>();
  auto tm = std::make_shared<Timing>();
  cmd->add_option("--dtype", *dtype, "bf16 | fp16")->capture_default_str();
  cmd->add_option("--pass", *pass, "fwd | bwd | fwd+bwd: which kernels to time (bwd: row sums + backward kernel)")
      ->capture_default_str();
  cmd->add_option("--iters", tm->iters, "Timed launches (median reported)")->capture_default_str();
  cmd->add_option("--warmup", tm->warmup, "Untimed launches first")->capture_default_str();
  cmd->add_option("--heat-ms", tm->heat_ms, "Keep the GPU busy with each kernel this long before timing it, so that it runs at the\n"
                                          "clock it settles to under the power limit (a hot sample for tasp calibrate; 0: cold). The limiter\n"
                                          "settles over about a second: 2000 on an H200 (300 still read what ran before)")
      ->capture_default_str();
  cmd->add_flag("--mix", tm->mix, "With --heat-ms: the forward and the backward take turns (heating and between timed launches),\n"
                               "as in training; each is timed in that mix (a mixed hot sample)");
  cmd->add_flag("--deterministic", tm->deterministic, "The backward with dQ bit-identical run to run (the CTAs that share a dQ tile add into it\n"
                                                   "in launch order; docs/measurements/kernels.md has what it costs)");
  cmd->add_flag("--accumulate", tm->accumulate,
                "The backward's fp32 ends, as a ring step runs it (the executor's rank path; calibration rows): row sums\n"
                "from an fp32 output, dQ added into fp32, dK/dV into fp32 accumulators. Default: a training step's ends,\n"
                "as SDPA's: from the 16-bit output to 16-bit dQ, dK, dV (dK/dV through fp32 and a cast where GQA splits\n"
                "a group over CTAs)");
  cmd->add_option("--shape", *shapes, "B=..,S=..,H=..[,Hkv=..],D=..[,causal][,window=L[:R]][,docs=L1+..][,pieces=P] (repeatable;\n"
                                      "default: the issue's set); masked shapes count TFLOP/s over the pairs the mask leaves");
  cmd->add_option("-c,--config", *configs, "A named workload's shape (tasp configs; repeatable)");
  cmd->add_option("--json", *json, "Also write the rows as JSON here");
  cmd->add_option("--csv", *csv, "Also write the rows as calibration CSV (tasp calibrate --fit) here");
  cmd->callback([=] {
    if (*dtype != "bf16" && *dtype != "fp16") throw planner::InputError("--dtype: expected bf16 or fp16");
    if (tm->iters < 1 || tm->warmup < 0) throw planner::InputError("--iters must be >= 1, --warmup >= 0");
    if (!(tm->heat_ms >= 0) || tm->heat_ms > 600000) throw planner::InputError("--heat-ms must be in [0, 600000]");
    if (tm->mix && tm->heat_ms <= 0) throw planner::InputError("--mix needs --heat-ms");
    if (tm->deterministic && !csv->empty())
      throw planner::InputError("--csv: calibration rows come from the default backward, not --deterministic");
    planner::Passes passes;
    if (!planner::parse_passes(*pass, &passes)) throw planner::InputError("--pass: expected fwd, bwd or fwd+bwd");
    if (!csv->empty() && (passes.bwd || tm->mix) && !tm->accumulate)
      throw planner::InputError("--csv: calibration rows time the backward as the executor's steps run it: add --accumulate");
    if (!kernels::cuda_device_available()) throw Exit(kBadInput, "bench kernel: no CUDA device visible");
    if ((passes.bwd || tm->mix) && !kernels::backward_supported())
      throw Exit(kBadInput, "bench kernel: the backward kernel needs a Hopper GPU (compute capability 9.0)");
    const DType dt = *dtype == "bf16" ? DType::BF16 : DType::FP16;
    std::vector<Shape> list;
    auto check_head_dim = [&](int D, const std::string& where) {
      if (const std::string e = kernels::unsupported_head_dim(D, passes.fwd, passes.bwd); !e.empty())
        throw planner::InputError(where + ": " + e);
    };
    for (const auto& text : *shapes) {
      std::string rest = text;
      int pieces = 1;
      if (auto at = rest.find(",pieces="); at != std::string::npos) {
        pieces = int(planner::parse_count(rest.substr(at + 8)));
        rest = rest.substr(0, at);
        if (pieces < 1) throw planner::InputError("--shape " + text + ": pieces must be a positive integer");
      }
      const planner::Workload w = planner::parse_workload(rest);
      check_head_dim(w.D, "--shape " + text);
      list.push_back(shape_of(w, pieces));
    }
    for (const auto& name : *configs) {
      const planner::Workload w = planner::find_workload(name).w;
      check_head_dim(w.D, "--config " + name);
      list.push_back(shape_of(w, 1));
    }
    if (list.empty())
      list = {{1, 32, 128, 16384, false, 1}, {1, 32, 128, 16384, true, 1}, {2, 16, 64, 16384, false, 1},
              {2, 16, 64, 16384, true, 1},  {1, 32, 128, 8192, false, 1},  {1, 32, 128, 16384, false, 7}};
    int dev = 0;
    cudaDeviceProp prop;
    TASP_CUDA(cudaGetDevice(&dev));
    TASP_CUDA(cudaGetDeviceProperties(&prop, dev));
    std::cout << "# tasp bench kernel: " << prop.name << ", " << *dtype << ", median of " << tm->iters << " after " << tm->warmup
              << " warm-up" << (tm->heat_ms > 0 ? ", each kernel heated " + std::to_string(long(tm->heat_ms)) + " ms first" : "")
              << (tm->mix ? ", forward and backward taking turns" : "") << (tm->deterministic ? ", deterministic dQ" : "")
              << (passes.bwd ? tm->accumulate ? ", backward into fp32 accumulators" : ", backward from and to 16 bits" : "") << "\n#" << std::setw(4) << "pass" << std::setw(5) << "B" << std::setw(6) << "H" << std::setw(5) << "Hkv"
              << std::setw(8) << "S" << std::setw(6) << "D" << std::setw(9) << "mask" << std::setw(8) << "pieces" << std::setw(11)
              << "ms" << std::setw(10) << "TFLOP/s" << std::setw(10) << "Mtok/s\n";
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& s : list)
      for (bool bwd : {false, true}) {
        if (bwd ? !passes.bwd : !passes.fwd) continue;
        const double ms = time_shape(s, dt, bwd, *tm);
        const bool masked = s.window_left >= 0 || s.window_right >= 0 || !s.docs.empty();
        const double pairs = masked ? s.pairs() : double(s.S) * double(s.S) * (s.causal ? 0.5 : 1.0);
        const double flops = 4.0 * s.B * s.H * pairs * s.D * (bwd ? 2.5 : 1.0);
        const double tf = flops / (ms * 1e-3) / 1e12;
        std::cout << " " << std::setw(4) << (bwd ? "bwd" : "fwd") << std::setw(5) << s.B << std::setw(6) << s.H << std::setw(5)
                  << s.kv_heads() << std::setw(8) << s.S << std::setw(6) << s.D << std::setw(9) << s.mask_name()
                  << std::setw(8) << s.pieces << std::fixed << std::setprecision(3) << std::setw(11) << ms << std::setprecision(1)
                  << std::setw(9) << tf << std::setw(10) << std::setprecision(2) << s.B * double(s.S) / (ms * 1e3) << std::endl;
        rows.push_back({{"pass", bwd ? "bwd" : "fwd"}, {"B", s.B}, {"H", s.H}, {"Hkv", s.kv_heads()}, {"S", s.S}, {"D", s.D},
                        {"causal", s.causal}, {"mask", s.mask_name()}, {"window_left", s.window_left},
                        {"window_right", s.window_right}, {"docs", s.docs.size()}, {"pairs", pairs}, {"pieces", s.pieces},
                        {"ms", ms}, {"tflops", tf},
                        {"tokens_per_s", s.B * double(s.S) / (ms * 1e-3)}, {"dtype", *dtype},
                        {"device", prop.name}, {"heat_ms", tm->heat_ms}, {"mix", tm->mix}, {"deterministic", tm->deterministic},
                        {"accumulate", tm->accumulate}});
      }
    if (!json->empty()) write_output(*json, [&](std::ostream& o) { o << rows.dump(1) << "\n"; });
    if (!csv->empty())
      write_output(*csv, [&](std::ostream& o) {
        o << "kind,B,H,Hkv,S,D,causal,ms,heat_ms,mix\n";
        for (const auto& r : rows)
          if (r["pieces"] == 1 && (r["mask"] == "causal" || r["mask"] == "none"))
            o << (r["pass"] == "bwd" ? "attention_bwd," : "attention,") << r["B"] << "," << r["H"] << "," << r["Hkv"] << "," << r["S"] << ","
              << r["D"] << "," << (r["causal"].get<bool>() ? 1 : 0) << "," << r["ms"].get<double>() << "," << tm->heat_ms << ","
              << (tm->mix ? 1 : 0) << "\n";
      });
  });
}

}  // namespace tasp::cli
