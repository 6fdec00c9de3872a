#include "executor/cuda_rank.hpp"

#include <cstring>

namespace tasp::executor::cuda {

using planner::Pass;
using planner::Range;

void RankDevice::release() {
  cudaSetDevice(dev);
  for (auto* v : {&ev_fwd, &ev_bwd})
    for (auto& e : *v) cudaEventDestroy(e);
  if (origin) cudaEventDestroy(origin), cudaEventDestroy(done);
  if (comm) cudaStreamDestroy(comm), cudaStreamDestroy(compute);
  for (void* p : allocs) cudaFree(p);
  allocs.clear();
  if (nccl) ncclCommDestroy(nccl);
}

uint16_t to_bf16(double x) {
  float f = float(x);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

std::vector<uint16_t> pack_rows(const std::vector<double>& src, const std::vector<Range>& ranges, int B, long S, long width,
                                long stride) {
  std::vector<uint16_t> h(size_t(B) * stride * width, 0);
  for (int b = 0; b < B; ++b) {
    size_t i = size_t(b) * stride * width;
    for (const Range& rg : ranges)
      for (long t = rg.begin; t < rg.end; ++t)
        for (long e = 0; e < width; ++e) h[i++] = to_bf16(src[(size_t(b) * S + t) * width + e]);
  }
  return h;
}

void issue_step(RankDevice& x, const cuda::PassWork& pw, const cuda::Geometry& g, const planner::Workload& w, int r, int t,
                cudaEvent_t prev_done) {
  const bool bwd = pw.pass == Pass::Bwd;
  cudaEvent_t* e = &(bwd ? x.ev_bwd : x.ev_fwd)[kStepEvents * t];
  const StepSlots& s = pw.slots[r].steps[t];
  const size_t se = g.slot_elems();
  auto* kv = static_cast<uint16_t*>(x.buf.kv);
  TASP_CUDA(cudaStreamWaitEvent(x.comm, prev_done));
  TASP_CUDA(cudaEventRecord(e[0], x.comm));
  TASP_NCCL(ncclGroupStart());
  for (const auto& tr : pw.steps[t].transfers) {
    const long k = g.key(tr.owner, tr.piece);
    if (tr.grad) {
      if (tr.src == r) TASP_NCCL(ncclSend(x.buf.grad + se * s.grad_send.at(k), se, ncclFloat32, tr.dst, x.nccl, x.comm));
      if (tr.dst == r)
        TASP_NCCL(ncclRecv(x.buf.grad + se * s.grad_recv.at({k, tr.src}), se, ncclFloat32, tr.src, x.nccl, x.comm));
    } else {
      if (tr.src == r) TASP_NCCL(ncclSend(kv + se * s.held.at(k), se, ncclBfloat16, tr.dst, x.nccl, x.comm));
      if (tr.dst == r) TASP_NCCL(ncclRecv(kv + se * s.arrivals.at(k), se, ncclBfloat16, tr.src, x.nccl, x.comm));
    }
  }
  TASP_NCCL(ncclGroupEnd());
  TASP_CUDA(cudaEventRecord(e[1], x.comm));
  TASP_CUDA(cudaEventRecord(e[2], x.compute));
  for (int slot : s.grad_zero) TASP_CUDA(cudaMemsetAsync(x.buf.grad + se * slot, 0, se * 4, x.compute));
  if (bwd) {
    const auto& b = pw.bwd[r][t];
    if (t == 0) {
      TASP_CUDA(cudaMemsetAsync(x.buf.dq_accum, 0, kernels::dq_accum_floats(b) * 4, x.compute));
      kernels::attention_backward_prepare(x.buf.out, x.buf.dout, kernels::DType::BF16, w.B, int(g.qrows[r]), w.H, w.D,
                                          x.buf.dsum, x.compute);
    }
    if (!b.pieces.empty()) kernels::attention_backward(b, x.ws, x.compute);
    if (t == pw.num_steps() - 1) {  // the pass's dQ, from the scratch every step added to
      TASP_CUDA(cudaMemsetAsync(x.buf.dq, 0, size_t(w.B) * g.qrows[r] * w.H * w.D * 4, x.compute));
      kernels::attention_backward_finish(b, x.buf.dq, x.ws, x.compute);
    }
  } else if (!pw.fwd[r][t].pieces.empty()) {
    kernels::attention_forward(pw.fwd[r][t], x.ws, x.compute);
  }
  TASP_CUDA(cudaEventRecord(e[3], x.compute));
  TASP_CUDA(cudaStreamWaitEvent(x.compute, e[1]));
  for (const auto& [into, from] : s.grad_add) kernels::add_into(x.buf.grad + se * into, x.buf.grad + se * from, se, x.compute);
  TASP_CUDA(cudaEventRecord(e[4], x.compute));
}

planner::StepTiming step_timing(cudaEvent_t origin, const cudaEvent_t* e, double bytes, double flops, bool post) {
  float v[kStepEvents];
  for (int k = 0; k < kStepEvents; ++k) TASP_CUDA(cudaEventElapsedTime(&v[k], origin, e[k]));
  planner::StepTiming st;
  st.comm_start_us = v[0] * 1e3, st.comm_end_us = v[1] * 1e3;
  st.compute_start_us = v[2] * 1e3, st.compute_end_us = v[3] * 1e3;
  if (post) st.post_start_us = std::max(v[1], v[3]) * 1e3, st.post_end_us = v[4] * 1e3;
  st.bytes = bytes, st.flops = flops;
  return st;
}

bool single_device_reference(const Problem& pr, planner::Passes passes, Result& ref) {
  const auto& w = pr.w;
  if (passes.bwd && !kernels::backward_supported()) return false;
  TASP_CUDA(cudaSetDevice(0));
  std::vector<void*> allocs;
  auto dev = [&](size_t bytes) {
    void* d = nullptr;
    TASP_CUDA(cudaMalloc(&d, std::max<size_t>(16, bytes)));
    allocs.push_back(d);
    return d;
  };
  auto upload = [&](const std::vector<double>& x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = to_bf16(x[i]);
    void* d = dev(h.size() * 2);
    TASP_CUDA(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
  };
  auto download = [&](const float* d, size_t cnt) {
    std::vector<float> h(cnt);
    TASP_CUDA(cudaMemcpy(h.data(), d, cnt * 4, cudaMemcpyDeviceToHost));
    return std::vector<double>(h.begin(), h.end());
  };
  void *q = upload(pr.q), *k = upload(pr.k), *v = upload(pr.v);
  const size_t no = size_t(w.B) * w.S * w.H * w.D, nl = size_t(w.B) * w.H * w.S, nk = size_t(w.B) * w.S * w.Hkv * w.D;
  auto* o = static_cast<float*>(dev(no * 4));
  auto* l = static_cast<float*>(dev(nl * 4));
  kernels::AttentionBatch b;
  b.dtype = kernels::DType::BF16, b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
  b.q = q, b.q_rows = int(w.S), b.out = o, b.lse = l;
  b.pieces.push_back({k, v, int(w.S), 0, 0});
  b.items.push_back({0, int(w.S), 0, 0, 1, w.causal, false});
  kernels::Workspace ws;
  kernels::attention_forward(b, ws, nullptr);
  if (passes.bwd) {
    void* dout = upload(pr.dout);
    auto* dsum = static_cast<float*>(dev(nl * 4));
    auto* dq = static_cast<float*>(dev(no * 4));
    auto* dk = static_cast<float*>(dev(nk * 4));
    auto* dv = static_cast<float*>(dev(nk * 4));
    TASP_CUDA(cudaMemset(dq, 0, no * 4));
    TASP_CUDA(cudaMemset(dk, 0, nk * 4));
    TASP_CUDA(cudaMemset(dv, 0, nk * 4));
    kernels::attention_backward_prepare(o, dout, kernels::DType::BF16, w.B, int(w.S), w.H, w.D, dsum, nullptr);
    kernels::AttentionBackwardBatch bb;
    bb.dtype = kernels::DType::BF16, bb.B = w.B, bb.H = w.H, bb.Hkv = w.Hkv, bb.D = w.D;
    bb.q = q, bb.dout = dout, bb.q_rows = int(w.S), bb.lse = l, bb.dsum = dsum;
    bb.pieces = b.pieces, bb.items = b.items;
    bb.grads.push_back({dk, dv, 0});
    bb.dq_accum = static_cast<float*>(dev(kernels::dq_accum_floats(bb) * 4));
    TASP_CUDA(cudaMemset(bb.dq_accum, 0, kernels::dq_accum_floats(bb) * 4));
    kernels::attention_backward(bb, ws, nullptr);
    kernels::attention_backward_finish(bb, dq, ws, nullptr);
    ref.dq = download(dq, no), ref.dk = download(dk, nk), ref.dv = download(dv, nk);
  }
  ref.out = download(o, no);
  const std::vector<double> hl = download(l, nl);
  ref.lse.resize(size_t(w.B) * w.S * w.H);  // [B][S][H] like the backends' results
  for (int bb = 0; bb < w.B; ++bb)
    for (int h = 0; h < w.H; ++h)
      for (long s = 0; s < w.S; ++s) ref.lse[(size_t(bb) * w.S + s) * w.H + h] = hl[(size_t(bb) * w.H + h) * w.S + s];
  for (void* p : allocs) cudaFree(p);
  return true;
}

}  // namespace tasp::executor::cuda
