#include "executor/cuda_rank.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/env_knob.hpp"
#include "kernels/staging.hpp"
#include "planner/collective.hpp"
#include "planner/query_moves.hpp"

namespace tasp::executor::cuda {

using planner::Pass;
using planner::Range;

void RankDevice::release() {
  cudaSetDevice(dev);
  for (auto& hg : groups)
    for (auto* v : {&hg.ev_fwd, &hg.ev_bwd, &hg.ev_a2a})
      for (auto& e : *v) cudaEventDestroy(e);
  groups.clear();
  if (origin) cudaEventDestroy(origin), cudaEventDestroy(done);
  if (comm) cudaStreamDestroy(comm), cudaStreamDestroy(compute);
  for (void* p : allocs) cudaFree(p);
  allocs.clear();
  for (ncclComm_t* c : {&nccl, &group, &world})
    if (*c) ncclCommDestroy(*c), *c = nullptr;
  for (ncclComm_t c : roots) ncclCommDestroy(c);
  for (cudaStream_t s : root_streams) cudaStreamDestroy(s);
  for (cudaEvent_t e : root_joins) cudaEventDestroy(e);
  if (root_fork) cudaEventDestroy(root_fork);
  if (rows_ready) cudaEventDestroy(rows_ready), rows_ready = nullptr;
  for (cudaEvent_t e : started) cudaEventDestroy(e);
  roots.clear(), root_streams.clear(), root_joins.clear(), root_fork = nullptr, started.clear();
}

void RankDevice::open_root_streams() {
  int least = 0, greatest = 0;
  TASP_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  root_streams.resize(roots.size()), root_joins.resize(roots.size());
  for (size_t q = 0; q < roots.size(); ++q) {
    TASP_CUDA(cudaStreamCreateWithPriority(&root_streams[q], cudaStreamNonBlocking, greatest));
    TASP_CUDA(cudaEventCreateWithFlags(&root_joins[q], cudaEventDisableTiming));
  }
  TASP_CUDA(cudaEventCreateWithFlags(&root_fork, cudaEventDisableTiming));
}

void RankDevice::abort_comms() {
  for (ncclComm_t* c : {&nccl, &group, &world})
    if (*c) ncclCommAbort(*c), *c = nullptr;
  for (ncclComm_t c : roots) ncclCommAbort(c);
  roots.clear();
}

namespace {

// Marks `stream`'s place just before a step's NCCL calls (RankDevice::started[i], made on first use).
void mark_started(RankDevice& x, size_t i, cudaStream_t stream) {
  while (x.started.size() <= i) {
    x.started.push_back(nullptr);
    TASP_CUDA(cudaEventCreateWithFlags(&x.started.back(), cudaEventDisableTiming));
  }
  TASP_CUDA(cudaEventRecord(x.started[i], stream));
}

}  // namespace

bool transfers_first() {
  static const bool on = kernels::env_int("TASP_TRANSFERS_FIRST", 1) != 0;
  return on;
}

bool reduce_as_broadcast(int ranks) {
  static const bool on = kernels::env_int("TASP_REDUCE_AS_BCAST", 1) != 0;
  return on && ranks == 2;
}

// Collectives of one step, one per root on that root's communicator and stream (CudaOptions::root_comms): forked from
// the comm stream after what it queued so far, joined back into it before the step's end event.
// Returns the started events it recorded, one a root.
template <class Issue>
size_t per_root(RankDevice& x, Issue issue) {
  TASP_CUDA(cudaEventRecord(x.root_fork, x.comm));
  for (size_t q = 0; q < x.roots.size(); ++q) {
    TASP_CUDA(cudaStreamWaitEvent(x.root_streams[q], x.root_fork));
    mark_started(x, q, x.root_streams[q]);
    TASP_NCCL(ncclGroupStart());
    issue(int(q), x.roots[q], x.root_streams[q]);
    TASP_NCCL(ncclGroupEnd());
    TASP_CUDA(cudaEventRecord(x.root_joins[q], x.root_streams[q]));
  }
  for (cudaEvent_t e : x.root_joins) TASP_CUDA(cudaStreamWaitEvent(x.comm, e));
  return x.roots.size();
}

// Collectives or send/recv of one step as one group on the plan's communicator and the comm stream; returns the
// started events it recorded (one).
template <class Issue>
size_t on_plan_comm(RankDevice& x, Issue issue) {
  mark_started(x, 0, x.comm);
  TASP_NCCL(ncclGroupStart());
  issue();
  TASP_NCCL(ncclGroupEnd());
  return 1;
}

uint16_t to_half_bits(double x, kernels::DType t) {
  const float f = float(x);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (t == kernels::DType::BF16) {
    if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
    u += 0x7fff + ((u >> 16) & 1);
    return uint16_t(u >> 16);
  }
  // IEEE half: 5-bit exponent (bias 15), 10-bit mantissa; subnormals and overflow to infinity handled.
  const uint32_t sign = (u >> 16) & 0x8000, abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return uint16_t(sign | 0x7e00);
  if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: infinity
  if (abs < 0x38800000) {  // below 2^-14: a subnormal half, m * 2^-24 with m = round(mantissa >> (126 - exponent))
    const int shift = 126 - int(abs >> 23);
    if (shift > 24) return uint16_t(sign);
    const uint32_t m = (abs & 0x7fffff) | 0x800000, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    uint32_t h = m >> shift;
    if (rem > mid || (rem == mid && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((abs - 0x38000000) >> 13);
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

double from_half_bits(uint16_t h, kernels::DType t) {
  if (t == kernels::DType::BF16) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(double(m), -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp(double(m | 0x400), e - 25);
}

std::vector<uint16_t> pack_rows(const std::vector<double>& src, const std::vector<Range>& ranges, int B, long S, long width,
                                long stride, kernels::DType dt) {
  std::vector<uint16_t> h(size_t(B) * stride * width, 0);
  for (int b = 0; b < B; ++b) {
    size_t i = size_t(b) * stride * width;
    for (const Range& rg : ranges)
      for (long t = rg.begin; t < rg.end; ++t)
        for (long e = 0; e < width; ++e) h[i++] = to_half_bits(src[(size_t(b) * S + t) * width + e], dt);
  }
  return h;
}

void issue_step(RankDevice& x, const RankBuffers& buf, const cuda::PassWork& pw, const cuda::Geometry& g,
                const planner::Workload& w, int gpu, int r, int t, cudaEvent_t* e, cudaEvent_t prev_done) {
  const bool bwd = pw.pass == Pass::Bwd;
  const planner::StepSlots& s = pw.slots[gpu].steps[t];
  const size_t se = g.slot_elems();
  auto* kv = static_cast<uint16_t*>(buf.kv);
  // bf16 accumulators: the staging slot of each one received (in grad_recv's order).
  const bool half = pw.accumulator_bytes == 2;
  std::map<std::pair<long, int>, int> recv16;
  if (half)
    for (const auto& [ks, slot] : s.grad_recv) recv16.emplace(ks, int(recv16.size()));
  // A step that moves nothing of this rank's leaves the comm stream alone (its transfer interval is empty): a
  // head-parallel pass's local steps must not wait behind the all-to-alls queued there for later head groups.
  bool moves = false;
  for (const auto& tr : pw.steps[t].transfers) moves = moves || tr.src == r || tr.dst == r;
  const bool kv_moves = moves;
  // Moved query rows (Plan::query_moves) this rank sends or receives in the step: (source, destination, send buffer,
  // receive buffer, bytes). On 2 ranks with a communicator a root they go as the sender's broadcast there, beside its
  // K/V; otherwise as send/recv on the plan's communicator.
  struct RowsMsg {
    int src, dst;
    void* send;
    void* recv;
    size_t bytes;
    bool back;
  };
  std::vector<RowsMsg> rows_msgs;
  const RankBuffers::MovedRows& mv = buf.moved;
  for (const planner::RowsTransfer& rt : pw.steps[t].rows) {
    if (rt.move != mv.move || mv.move < 0) continue;
    const planner::QueryMove& m = pw.query_moves.at(rt.move);
    const MovedLayout l = moved_layout(w, mv.len);
    const size_t bytes = bwd ? (rt.back ? l.bwd_back() : l.bwd_out()) : (rt.back ? l.fwd_back() : l.fwd_out());
    // owner: sends out from `send`, receives back into `recv`; at: receives out into q (forward) or in, sends back from send
    void* at_in = bwd ? mv.in : mv.q;
    rows_msgs.push_back({rt.back ? m.at : m.owner, rt.back ? m.owner : m.at, mv.send,
                         mv.owner ? mv.recv : at_in, bytes, rt.back});
  }
  moves = moves || !rows_msgs.empty();
  const bool rows_bcast = !x.roots.empty() && g.n == 2;
  const auto rows_nccl = [&](int root, ncclComm_t comm, cudaStream_t st) {
    for (const RowsMsg& m : rows_msgs) {
      if (rows_bcast) {
        if (m.src != root) continue;
        void* at = m.src == r ? m.send : m.recv;
        TASP_NCCL(ncclBroadcast(at, at, m.bytes, ncclUint8, m.src, comm, st));
      } else if (m.src == r) {
        TASP_NCCL(ncclSend(m.send, m.bytes, ncclUint8, m.dst, comm, st));
      } else {
        TASP_NCCL(ncclRecv(m.recv, m.bytes, ncclUint8, m.src, comm, st));
      }
    }
  };
  // Where they do not go a root: as send/recv on the plan's communicator, in a group of their own after the K/V's.
  const auto rows_p2p = [&] {
    if (rows_bcast || rows_msgs.empty()) return;
    TASP_NCCL(ncclGroupStart());
    rows_nccl(-1, x.nccl, x.comm);
    TASP_NCCL(ncclGroupEnd());
  };
  const Exchange how = pw.exchange.empty() ? Exchange::PointToPoint : pw.exchange[t];
  const ncclDataType_t kv_type = w.dtype == "fp16" ? ncclFloat16 : ncclBfloat16;
  // Accumulators the kernel already wrote into this step's staging in 16 bits (PassWork::sent_as_written).
  const auto written = [&](long key) { return bwd && pw.sent_as_written[gpu].count({t, key}) > 0; };
  // The transfer interval [e0, e1]: on the comm stream after the previous step when this rank moves something,
  // else an empty one on the compute stream. A backward's first step also clears, on the comm stream, the
  // accumulators later steps start (grad_zero_ahead): the compute stream waits for e1 before its second step.
  const std::vector<std::pair<int, int>> none;
  const auto& ahead = bwd && size_t(gpu) < pw.grad_zero_ahead.size() ? pw.grad_zero_ahead[gpu] : none;
  const bool clear_ahead = t == 0 && !ahead.empty();
  const auto clear = [&] {
    for (const auto& [step, slot] : ahead) TASP_CUDA(cudaMemsetAsync(buf.grad + se * slot, 0, se * 4, x.comm));
  };
  const cudaStream_t on = moves || clear_ahead ? x.comm : x.compute;
  // Transfers first (transfers_first()): the step's kernel waits until its NCCL calls are next on their streams, so
  // that NCCL's CTAs take their SMs before the attention's fill them; a forward's gather waits only for the gather
  // before it (its slots are its own: nothing a kernel reads is overwritten), not for the previous step's kernel.
  const bool first = transfers_first() && moves;
  size_t marks = 0;  // started events recorded for this step
  // On 2 ranks each owner's sum is the other rank's block (its own is zero): a broadcast from the other rank, which
  // host memory moves at a broadcast's rate, 1.18x a reduce's (2x H200: 2.18 against 2.58 ms for 64 MiB; a run of
  // B=1 S=8192 H=32 causal 0.935x, `medium` 0.93x: docs/measurements/executor.md). TASP_REDUCE_AS_BCAST=0: ncclReduce.
  const bool as_bcast = how == Exchange::ReduceScatter && reduce_as_broadcast(g.n) && !x.roots.empty();
  // A reduce-scatter sums this rank's own blocks too, as zeros: cleared on the comm stream, ahead of the wait for the
  // previous step where transfers go first (no kernel writes them).
  const bool zero_own = moves && how == Exchange::ReduceScatter && !as_bcast;
  const auto clear_own = [&] {
    const size_t bytes = size_t(pw.accumulator_bytes);
    for (int c : planner::collective_pieces(pw.steps[t]))
      TASP_CUDA(cudaMemsetAsync(static_cast<char*>(buf.rs_send) + se * (size_t(c) * g.n + r) * bytes, 0, se * bytes, x.comm));
  };
  if (first && zero_own) clear_own();
  // (e[1 - kStepEvents]: the previous step's e[1], the end of its transfers)
  // (moved rows going back wait for the step that computed them)
  const bool sends_back = std::any_of(rows_msgs.begin(), rows_msgs.end(), [&](const RowsMsg& m) { return m.back && m.src == r; });
  const cudaEvent_t after =
      first && !bwd && how == Exchange::AllGather && t > 0 && !sends_back ? e[1 - kStepEvents] : prev_done;
  if (moves || clear_ahead) TASP_CUDA(cudaStreamWaitEvent(x.comm, after));
  if (clear_ahead && !moves) clear();
  TASP_CUDA(cudaEventRecord(e[0], on));
  // What moved rows leave in, made on the comm stream: the owner's rows of Q, or of dO with their LSE and D (the
  // backward's row sums made here first, for all its rows: the kernel waits for them below); `at`'s partial out cast to
  // 16 bits beside its LSE (its dQ the kernel finished into `send` already).
  bool prepared_here = false;
  for (const RowsMsg& m : rows_msgs) {
    if (m.src != r) continue;
    const MovedLayout l = moved_layout(w, mv.len);
    const size_t hd = size_t(w.H) * w.D, q_rows = size_t(g.qrows[r]);
    auto* send = static_cast<char*>(mv.send);
    if (mv.owner) {
      const void* rows16 = bwd ? buf.dout : buf.q;
      TASP_CUDA(cudaMemcpy2DAsync(send, size_t(mv.len) * hd * 2, static_cast<const char*>(rows16) + size_t(mv.row0) * hd * 2,
                                  q_rows * hd * 2, size_t(mv.len) * hd * 2, w.B, cudaMemcpyDeviceToDevice, x.comm));
      if (bwd) {
        if (buf.out16)  // (a framework's rank: the forward's out in its 16-bit tensor)
          kernels::attention_backward_prepare16(buf.out16, buf.dout, dtype_of(w), w.B, int(q_rows), w.H, w.D, buf.dsum, x.comm);
        else
          kernels::attention_backward_prepare(buf.out, buf.dout, dtype_of(w), w.B, int(q_rows), w.H, w.D, buf.dsum, x.comm);
        prepared_here = true;
        for (const auto& [from, at] : {std::pair<const float*, size_t>{buf.lse, l.lse_at}, {buf.dsum, l.dsum_at}})
          TASP_CUDA(cudaMemcpy2DAsync(send + at, size_t(mv.len) * 4, from + mv.row0, q_rows * 4, size_t(mv.len) * 4,
                                      size_t(w.B) * w.H, cudaMemcpyDeviceToDevice, x.comm));
      }
    } else if (!bwd) {
      kernels::cast_out(mv.out, send, dtype_of(w), size_t(w.B) * mv.len * hd, x.comm);
      TASP_CUDA(cudaMemcpyAsync(send + l.lse_at, mv.lse, l.rows, cudaMemcpyDeviceToDevice, x.comm));
    }
  }
  if (prepared_here) {
    if (!x.rows_ready) TASP_CUDA(cudaEventCreateWithFlags(&x.rows_ready, cudaEventDisableTiming));
    TASP_CUDA(cudaEventRecord(x.rows_ready, x.comm));
    TASP_CUDA(cudaStreamWaitEvent(x.compute, x.rows_ready));
  }
  if (!kv_moves && !rows_msgs.empty()) {
    // A step that moves rows alone.
    marks = rows_bcast ? per_root(x, rows_nccl) : on_plan_comm(x, [&] { rows_nccl(-1, x.nccl, x.comm); });
  } else if (moves && how == Exchange::AllGather) {
    // Slots by owner, piece-major (planner::by_owner_slot): piece c's n blocks side by side, this rank's block r of
    // them, which the all-gather fills in place; one all-gather per piece the step moves.
    const std::vector<int> pieces = planner::collective_pieces(pw.steps[t]);
    if (!x.roots.empty()) {  // block (c, q) of every rank from root q, in place (the pieces root q sends this step)
      marks = per_root(x, [&](int q, ncclComm_t comm, cudaStream_t st) {
        for (int c : planner::collective_pieces(pw.steps[t], q)) {
          auto* blk = kv + se * (size_t(c) * g.n + q);
          TASP_NCCL(ncclBroadcast(blk, blk, se, kv_type, q, comm, st));
        }
        if (rows_bcast) rows_nccl(q, comm, st);
      });
    } else {
      marks = on_plan_comm(x, [&] {
        for (int c : pieces)
          TASP_NCCL(ncclAllGather(kv + se * (size_t(c) * g.n + r), kv + se * size_t(c) * g.n, se, kv_type, x.nccl, x.comm));
      });
    }
    rows_p2p();
  } else if (moves && how == Exchange::ReduceScatter) {
    // Every owner's accumulators of piece c in block (c, owner) of rs_send, piece-major (this rank's own block zero:
    // its own accumulators are being computed beside), summed across ranks into rs_recv's block c: what the others
    // added to this rank's piece c. One reduce-scatter per piece the step moves (or, as_bcast, one broadcast a root).
    const size_t bytes = size_t(pw.accumulator_bytes);
    auto* send = static_cast<char*>(buf.rs_send);
    const std::vector<int> pieces = planner::collective_pieces(pw.steps[t]);
    if (!first && zero_own) clear_own();
    for (const auto& tr : pw.steps[t].transfers) {
      if (tr.src != r || written(g.key(tr.owner, tr.piece))) continue;  // (the kernel wrote it there in 16 bits)
      const float* acc = buf.grad + se * s.grad_send.at(g.key(tr.owner, tr.piece));
      char* to = send + se * (size_t(tr.piece) * g.n + tr.owner) * bytes;
      if (half) kernels::cast_out(acc, to, kernels::DType::BF16, se, x.comm);
      else TASP_CUDA(cudaMemcpyAsync(to, acc, se * 4, cudaMemcpyDeviceToDevice, x.comm));
    }
    const ncclDataType_t acc_type = half ? ncclBfloat16 : ncclFloat32;
    if (!x.roots.empty()) {  // block (c, o) of every rank summed into owner o's rs_recv block c (o's pieces moved)
      marks = per_root(x, [&](int q, ncclComm_t comm, cudaStream_t st) {
        // As a broadcast, on its sender's communicator (owner 1 - q's pieces, from q), so that each communicator carries
        // one rank's sends: what a rank sends beside it (moved rows going the other way) runs on the other's at once.
        const int o = as_bcast ? 1 - q : q;
        for (int c : planner::collective_pieces(pw.steps[t], o)) {
          char* block = send + se * (size_t(c) * g.n + o) * bytes;
          char* sum = static_cast<char*>(buf.rs_recv) + se * c * bytes;
          if (as_bcast)  // from the other rank, in place there
            TASP_NCCL(ncclBroadcast(r == o ? sum : block, r == o ? sum : block, se, acc_type, q, comm, st));
          else
            TASP_NCCL(ncclReduce(block, sum, se, acc_type, ncclSum, q, comm, st));
        }
        if (rows_bcast) rows_nccl(q, comm, st);
      });
    } else {
      marks = on_plan_comm(x, [&] {
        for (int c : pieces)
          TASP_NCCL(ncclReduceScatter(send + se * size_t(c) * g.n * bytes, static_cast<char*>(buf.rs_recv) + se * c * bytes,
                                      se, acc_type, ncclSum, x.nccl, x.comm));
      });
    }
    rows_p2p();
  } else if (moves) {
    // bf16 accumulators: each one sent is cast into its staging slot first (on this stream, after the step it was
    // made in; or the kernel wrote it there), received ones land in staging and are added after the step (below).
    int sends16 = 0;
    for (const auto& tr : pw.steps[t].transfers) {
      if (!half || !tr.grad || tr.src != r) continue;
      const long k = g.key(tr.owner, tr.piece);
      if (!written(k))
        kernels::cast_out(buf.grad + se * s.grad_send.at(k), buf.grad_send16 + se * sends16, kernels::DType::BF16, se, x.comm);
      ++sends16;
    }
    sends16 = 0;
    if (rows_bcast && !rows_msgs.empty())
      throw std::logic_error("issue_step: moved rows beside point-to-point K/V on root communicators");
    marks = on_plan_comm(x, [&] {
      for (const auto& tr : pw.steps[t].transfers) {
        const long k = g.key(tr.owner, tr.piece);
        if (tr.grad && half) {
          if (tr.src == r) TASP_NCCL(ncclSend(buf.grad_send16 + se * sends16++, se, ncclBfloat16, tr.dst, x.nccl, x.comm));
          if (tr.dst == r)
            TASP_NCCL(ncclRecv(buf.grad_recv16 + se * recv16.at({k, tr.src}), se, ncclBfloat16, tr.src, x.nccl, x.comm));
        } else if (tr.grad) {
          if (tr.src == r) TASP_NCCL(ncclSend(buf.grad + se * s.grad_send.at(k), se, ncclFloat32, tr.dst, x.nccl, x.comm));
          if (tr.dst == r)
            TASP_NCCL(ncclRecv(buf.grad + se * s.grad_recv.at({k, tr.src}), se, ncclFloat32, tr.src, x.nccl, x.comm));
        } else if (!pw.first_hop.empty() && tr.owner == tr.src) {
          // A piece's first hop, from its owner's framework tensors in runs (caller_kv.hpp); every rank posts the same.
          for (const OwnMessage& m : pw.first_hop[k]) {
            if (tr.src == r)
              TASP_NCCL(ncclSend(static_cast<const uint16_t*>(m.half ? buf.own_v : buf.own_k) + m.shard_off, m.count, kv_type,
                                 tr.dst, x.nccl, x.comm));
            if (tr.dst == r) TASP_NCCL(ncclRecv(kv + se * s.arrivals.at(k) + m.slot_off, m.count, kv_type, tr.src, x.nccl, x.comm));
          }
        } else {
          if (tr.src == r) TASP_NCCL(ncclSend(kv + se * s.held.at(k), se, kv_type, tr.dst, x.nccl, x.comm));
          if (tr.dst == r) TASP_NCCL(ncclRecv(kv + se * s.arrivals.at(k), se, kv_type, tr.src, x.nccl, x.comm));
        }
      }
      rows_nccl(-1, x.nccl, x.comm);
    });
  }
  if (clear_ahead && moves) clear();  // after this step's transfers, not before them
  TASP_CUDA(cudaEventRecord(e[1], on));
  if (first)
    for (size_t i = 0; i < marks; ++i) TASP_CUDA(cudaStreamWaitEvent(x.compute, x.started[i]));
  TASP_CUDA(cudaEventRecord(e[2], x.compute));
  for (int slot : s.grad_zero)  // (16-bit accumulators are written, not added to: nothing to clear)
    if (buf.grad && std::find(ahead.begin(), ahead.end(), std::pair<int, int>{t, slot}) == ahead.end() &&
        !(bwd && pw.not_cleared[gpu].count({t, slot})))
      TASP_CUDA(cudaMemsetAsync(buf.grad + se * slot, 0, se * 4, x.compute));
  // Moved rows' launch, first: what it makes returns in a later step.
  const auto moved_steps = size_t(gpu) < pw.moved_steps.size() ? pw.moved_steps[gpu] : std::pair<int, int>{-1, -1};
  if (bwd && size_t(gpu) < pw.mbwd.size() && !pw.mbwd[gpu][t].pieces.empty()) {
    const auto& mb = pw.mbwd[gpu][t];
    if (t == moved_steps.first) TASP_CUDA(cudaMemsetAsync(mv.dq_accum, 0, kernels::dq_accum_floats(mb) * 4, x.compute));
    kernels::attention_backward(mb, x.ws, x.compute);
    if (t == moved_steps.second) kernels::attention_backward_finish16(mb, mv.send, x.ws, x.compute);
  } else if (!bwd && size_t(gpu) < pw.mfwd.size() && !pw.mfwd[gpu][t].pieces.empty()) {
    kernels::attention_forward(pw.mfwd[gpu][t], x.ws, x.compute);
  }
  if (bwd) {
    const auto& b = pw.bwd[gpu][t];
    if (t == 0) {
      TASP_CUDA(cudaMemsetAsync(buf.dq_accum, 0, kernels::dq_accum_floats(b) * 4, x.compute));
      if (prepared_here) {
        // (made on the comm stream above, before the rows left)
      } else if (buf.out16)
        kernels::attention_backward_prepare16(buf.out16, buf.dout, dtype_of(w), w.B, int(g.qrows[r]), w.H, w.D,
                                              buf.dsum, x.compute);
      else
        kernels::attention_backward_prepare(buf.out, buf.dout, dtype_of(w), w.B, int(g.qrows[r]), w.H, w.D,
                                            buf.dsum, x.compute);
    }
    if (!b.pieces.empty()) kernels::attention_backward(b, x.ws, x.compute);
    if (t == pw.num_steps() - 1) {  // the pass's dQ, from the scratch every step added to
      // The finish writes every row its items cover; only rows no item covers need clearing (none, as the lists are
      // made: every query range is an item; clearing dQ is 67 MB at B=1 S=8192 H=32, about 25 us of a 2.7 ms fwd+bwd).
      const size_t nq = size_t(w.B) * g.qrows[r] * w.H * w.D;
      const bool covered = items_cover_rows(b.items, long(g.qrows[r]));
      if (buf.dq16) {
        if (!covered) TASP_CUDA(cudaMemsetAsync(buf.dq16, 0, nq * 2, x.compute));
        kernels::attention_backward_finish16(b, buf.dq16, x.ws, x.compute);
      } else {
        if (!covered) TASP_CUDA(cudaMemsetAsync(buf.dq, 0, nq * 4, x.compute));
        kernels::attention_backward_finish(b, buf.dq, x.ws, x.compute, covered);
      }
    }
  } else if (!pw.fwd[gpu][t].pieces.empty()) {
    kernels::attention_forward(pw.fwd[gpu][t], x.ws, x.compute);
  }
  TASP_CUDA(cudaEventRecord(e[3], x.compute));
  TASP_CUDA(cudaStreamWaitEvent(x.compute, e[1]));
  // Moved rows home: the forward's partial out and LSE folded into the owner's rows as they arrive; the backward's
  // partial dQ added into its dQ rows after the pass's last step has finished them.
  if (mv.owner) {
    const MovedLayout l = moved_layout(w, mv.len);
    const size_t hd = size_t(w.H) * w.D, q_rows = size_t(g.qrows[r]);
    const bool arrives = std::any_of(rows_msgs.begin(), rows_msgs.end(), [&](const RowsMsg& m) { return m.back; });
    bool returned = false;  // backward: in this step or one before
    for (int s2 = 0; bwd && s2 <= t; ++s2)
      for (const planner::RowsTransfer& rt : pw.steps[s2].rows) returned = returned || (rt.back && rt.move == mv.move);
    if (!bwd && arrives) {
      kernels::merge_rows16(buf.out, buf.lse, int(q_rows), mv.row0, mv.recv,
                            reinterpret_cast<const float*>(static_cast<const char*>(mv.recv) + l.lse_at), dtype_of(w), w.B,
                            mv.len, w.H, w.D, x.compute);
    } else if (bwd && returned && t == pw.num_steps() - 1 && buf.dq16) {
      // A framework's rank: its dQ rows finished in 16 bits above, the moved part added in fp32 and rounded once more
      // (as its dK/dV's last sum: one rounding beside the finish's, well inside bf16's 1e-2).
      kernels::add_rows16(static_cast<uint16_t*>(buf.dq16) + size_t(mv.row0) * hd, q_rows * hd, mv.recv, size_t(mv.len) * hd,
                          dtype_of(w), size_t(mv.len) * hd, size_t(w.B), x.compute);
    } else if (bwd && returned && t == pw.num_steps() - 1) {
      if (!buf.dq) throw std::logic_error("issue_step: moved rows' dQ where dQ is not fp32");
      for (int b = 0; b < w.B; ++b)
        kernels::add_half_into(buf.dq + (size_t(b) * q_rows + mv.row0) * hd,
                               static_cast<const uint16_t*>(mv.recv) + size_t(b) * mv.len * hd, dtype_of(w), size_t(mv.len) * hd,
                               false, x.compute);
    }
  }
  if (how == Exchange::ReduceScatter) {
    // The reduce-scatter's sum of each own piece goes where the slot plan adds what arrives: into the rank's own
    // accumulator, or, where it has none, into the slot it adopts (written).
    for (int c = 0; c < g.P; ++c) {
      const long k = g.key(r, c);
      std::vector<int> arrived;
      for (const auto& [ks, slot] : s.grad_recv)
        if (ks.first == k) arrived.push_back(slot);
      if (arrived.empty()) continue;
      int target = arrived.front();
      for (const auto& [into, from] : s.grad_add)
        if (std::find(arrived.begin(), arrived.end(), from) != arrived.end()) target = into;
      const bool adopted = std::find(arrived.begin(), arrived.end(), target) != arrived.end();
      const char* sum = static_cast<const char*>(buf.rs_recv) + se * c * size_t(pw.accumulator_bytes);
      if (half) {
        kernels::add_half_into(buf.grad + se * target, sum, kernels::DType::BF16, se, adopted, x.compute);
      } else if (adopted) {
        TASP_CUDA(cudaMemcpyAsync(buf.grad + se * target, sum, se * 4, cudaMemcpyDeviceToDevice, x.compute));
      } else {
        kernels::add_into(buf.grad + se * target, reinterpret_cast<const float*>(sum), se, x.compute);
      }
    }
  } else {
    // Each received accumulator added to the rank's own, or (bf16) becoming it; the last step's final adds the caller
    // makes with its casts (deferred_adds) are left to it.
    const bool last = t == pw.num_steps() - 1;
    auto deferred = [&](const planner::StepAdd& a) {
      return last && std::any_of(pw.deferred_adds.begin(), pw.deferred_adds.end(), [&](const planner::StepAdd& d) {
               return a.into == d.into && a.from == d.from && a.from16 == d.from16;
             });
    };
    for (const planner::StepAdd& a : planner::step_adds(s, half)) {
      if (deferred(a)) continue;
      if (half)
        kernels::add_half_into(buf.grad + se * a.into, buf.grad_recv16 + se * a.from16, kernels::DType::BF16, se, a.adopt,
                               x.compute);
      else
        kernels::add_into(buf.grad + se * a.into, buf.grad + se * a.from, se, x.compute);
    }
  }
  TASP_CUDA(cudaEventRecord(e[4], x.compute));
}

size_t dq_scratch_tiles(const planner::Workload& w, const Geometry& g, int r) {
  return dq_tiles(planner::make_mask(w), g.qranges[r], kernels::dq_accum_tile_rows(w.D));
}

size_t dq_scratch_floats(const planner::Workload& w, size_t tiles) {
  return size_t(w.B) * w.H * tiles * kernels::dq_accum_tile_floats(w.D);
}

RankBuffers alloc_rank_buffers(RankDevice& x, const planner::Plan& p, const planner::Workload& w, const Geometry& g, int r,
                               int kv_slots, int grad_slots, bool backward, bool collectives, bool caller_io) {
  const size_t nq = size_t(w.B) * g.qrows[r] * w.H * w.D, nl = size_t(w.B) * w.H * g.qrows[r], se = g.slot_elems();
  RankBuffers b;
  if (!caller_io) b.q = x.alloc<uint16_t>(nq);
  b.kv = x.alloc<uint16_t>(se * kv_slots);
  b.out = x.alloc<float>(nq);
  b.lse = x.alloc<float>(nl);
  for (size_t i = 0; i < p.query_moves.size(); ++i) {
    const planner::QueryMove& m = p.query_moves[i];
    if (m.owner != r && m.at != r) continue;
    RankBuffers::MovedRows& mv = b.moved;
    if (mv.move >= 0)
      throw planner::InputError("cuda backend: rank " + std::to_string(r) + " has more than one query move (query_moves[" +
                                std::to_string(i) + "]); it runs one a rank");
    const planner::Range rows = planner::moved_range(p, w.S, m);
    mv.move = int(i), mv.owner = m.owner == r, mv.len = int(rows.size()), mv.row0 = 0;
    for (int j = 0; j < m.range; ++j) mv.row0 += int(g.qranges[m.owner].at(j).size());
    const MovedLayout l = moved_layout(w, mv.len);
    auto bytes = [&](size_t n) { return static_cast<void*>(x.alloc<uint32_t>((n + 3) / 4)); };
    const size_t out = std::max(l.fwd_out(), backward ? l.bwd_out() : 0), back = std::max(l.fwd_back(), backward ? l.bwd_back() : 0);
    if (mv.owner) {
      mv.send = bytes(out), mv.recv = bytes(back);
      continue;
    }
    mv.send = bytes(back), mv.q = bytes(l.tensor);
    mv.out = x.alloc<float>(size_t(w.B) * mv.len * w.H * w.D), mv.lse = x.alloc<float>(size_t(w.B) * w.H * mv.len);
    if (backward) {
      mv.in = bytes(l.bwd_out());
      mv.dq_accum = x.alloc<float>(dq_scratch_floats(w, dq_tiles(planner::make_mask(w), {rows}, kernels::dq_accum_tile_rows(w.D))));
    }
  }
  if (!backward) return b;
  // A head-parallel pass's dQ and (where a launch writes each whole) dK/dV leave through the all-to-all out in 16
  // bits: the kernels write them so (kernels.md, "What a backward writes").
  const bool heads = p.ulysses > 1 && !caller_io;
  if (!caller_io) b.dout = x.alloc<uint16_t>(nq);
  if (heads) b.dq16 = x.alloc<uint16_t>(nq);
  else if (!caller_io) b.dq = x.alloc<float>(nq);
  b.dsum = x.alloc<float>(nl);
  b.dq_accum = x.alloc<float>(dq_scratch_floats(w, dq_scratch_tiles(w, g, r)));
  if (heads && kernels::grads16_allowed(w.H, w.Hkv, false) && planner::grads_written_once(planner::plan_slots(p, planner::Pass::Bwd, r, collectives)))
    b.grad16 = x.alloc<uint16_t>(se * std::max(1, grad_slots));
  else
    b.grad = x.alloc<float>(se * std::max(1, grad_slots));
  if (p.accumulator_bytes == 2) {
    const auto [sends, recvs] = planner::most_grad_transfers(planner::plan_slots(p, planner::Pass::Bwd, r, collectives));
    b.grad_send16 = x.alloc<uint16_t>(se * std::max(1, sends));
    b.grad_recv16 = x.alloc<uint16_t>(se * std::max(1, recvs));
  }
  if (collectives) {  // a reduce-scatter's every owner's slots, and this rank's share of the result
    const size_t own = se * p.pieces_per_rank;
    b.rs_send = x.alloc<uint32_t>(own * p.ranks * p.accumulator_bytes / 4 + 1);
    b.rs_recv = x.alloc<uint32_t>(own * p.accumulator_bytes / 4 + 1);
  }
  return b;
}

A2aLaunch upload_a2a(RankDevice& x, const A2a& a) {
  A2aLaunch l;
  auto put = [&](const std::vector<kernels::BlockCopy>& c) {
    A2aLaunch::Copies d;
    d.vectors = kernels::check_copies(c), d.n = int(c.size());
    auto* list = x.alloc<kernels::BlockCopy>(c.size());
    TASP_CUDA(cudaMemcpy(list, c.data(), c.size() * sizeof(kernels::BlockCopy), cudaMemcpyHostToDevice));
    d.list = list;
    return d;
  };
  l.pack = put(a.pack);
  for (const auto& wave : a.unpack) l.unpack.push_back(put(wave));
  l.count = a.count, l.bytes = a.bytes;
  return l;
}

void refill_a2a(RankDevice& x, A2aLaunch& l, const A2a& a, cudaStream_t stream) {
  auto put = [&](A2aLaunch::Copies& d, const std::vector<kernels::BlockCopy>& c) {
    if (int(c.size()) != d.n) throw std::logic_error("refill_a2a: a copy list changed its length");
    d.vectors = kernels::check_copies(c);  // (the vector width follows the addresses' alignment)
    // Through pinned staging: a copy from pageable memory may wait for the stream (kernels/staging.hpp).
    kernels::copy_to_device(kernels::staging_of(x.ws), const_cast<kernels::BlockCopy*>(d.list), c.data(),
                            c.size() * sizeof(kernels::BlockCopy), stream);
  };
  if (l.unpack.size() != a.unpack.size() || l.count != a.count) throw std::logic_error("refill_a2a: the exchange changed");
  put(l.pack, a.pack);
  for (size_t i = 0; i < a.unpack.size(); ++i) put(l.unpack[i], a.unpack[i]);
}

void issue_a2a(RankDevice& x, const A2aLaunch& a, const planner::Workload& w, int u, bool sendrecv, cudaEvent_t* e,
               cudaEvent_t prev_done) {
  const ncclDataType_t t = w.dtype == "fp16" ? ncclFloat16 : ncclBfloat16;
  TASP_CUDA(cudaStreamWaitEvent(x.comm, prev_done));
  TASP_CUDA(cudaEventRecord(e[0], x.comm));
  kernels::run_copies(a.pack.list, a.pack.n, a.pack.vectors, x.comm);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (!sendrecv) {
    TASP_NCCL(ncclAlltoAll(x.seq.send, x.seq.recv, a.count, t, x.group, x.comm));
  } else
#endif
  {
    TASP_NCCL(ncclGroupStart());
    for (int j = 0; j < u; ++j) {
      TASP_NCCL(ncclSend(static_cast<const uint16_t*>(x.seq.send) + j * a.count, a.count, t, j, x.group, x.comm));
      TASP_NCCL(ncclRecv(static_cast<uint16_t*>(x.seq.recv) + j * a.count, a.count, t, j, x.group, x.comm));
    }
    TASP_NCCL(ncclGroupEnd());
  }
  for (const auto& wave : a.unpack) kernels::run_copies(wave.list, wave.n, wave.vectors, x.comm);
  for (int k = 1; k < kStepEvents; ++k) TASP_CUDA(cudaEventRecord(e[k], x.comm));
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
  kernels::DeviceAllocs dev;
  auto upload = [&](const std::vector<double>& x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = to_half_bits(x[i], dtype_of(w));
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
  b.dtype = dtype_of(w), b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
  b.q = q, b.q_rows = int(w.S), b.out = o, b.lse = l;
  b.pieces.push_back({k, v, int(w.S), 0, 0});
  b.items = masked_items(w, planner::make_mask(w), {0, w.S}, 0, 1, false);
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
    kernels::attention_backward_prepare(o, dout, dtype_of(w), w.B, int(w.S), w.H, w.D, dsum, nullptr);
    kernels::AttentionBackwardBatch bb;
    bb.dtype = dtype_of(w), bb.B = w.B, bb.H = w.H, bb.Hkv = w.Hkv, bb.D = w.D;
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
  return true;
}

double device_used_bytes() {
  size_t free = 0, total = 0;
  TASP_CUDA(cudaMemGetInfo(&free, &total));
  return double(total - free);
}

double single_device_us(const planner::Workload& w, planner::Passes passes, int warmup, int iters, bool deterministic) {
  TASP_CUDA(cudaSetDevice(0));
  const kernels::DType dt = dtype_of(w);
  const size_t no = size_t(w.B) * w.S * w.H * w.D, nl = size_t(w.B) * w.H * w.S, nk = size_t(w.B) * w.S * w.Hkv * w.D;
  kernels::DeviceAllocs dev;
  void *q = dev(no * 2), *k = dev(nk * 2), *v = dev(nk * 2);
  kernels::fill_random(q, dt, no, 1, nullptr), kernels::fill_random(k, dt, nk, 2, nullptr);
  kernels::fill_random(v, dt, nk, 3, nullptr);
  auto* o = static_cast<float*>(dev(no * 4));
  auto* l = static_cast<float*>(dev(nl * 4));
  kernels::AttentionBatch b;
  b.dtype = dt, b.B = w.B, b.H = w.H, b.Hkv = w.Hkv, b.D = w.D;
  b.q = q, b.q_rows = int(w.S), b.out = o, b.lse = l;
  b.pieces.push_back({k, v, int(w.S), 0, 0});
  b.items = masked_items(w, planner::make_mask(w), {0, w.S}, 0, 1, false);
  kernels::AttentionBackwardBatch bb;
  float* dq = nullptr;
  if (passes.bwd) {
    bb.dtype = dt, bb.B = w.B, bb.H = w.H, bb.Hkv = w.Hkv, bb.D = w.D;
    bb.q = q, bb.q_rows = int(w.S), bb.lse = l, bb.pieces = b.pieces, bb.items = b.items;
    bb.deterministic = deterministic;
    void* dout = dev(no * 2);
    kernels::fill_random(dout, dt, no, 4, nullptr);
    bb.dout = dout;
    bb.dsum = static_cast<float*>(dev(nl * 4));
    dq = static_cast<float*>(dev(no * 4));
    auto* grad = static_cast<float*>(dev(2 * nk * 4));
    TASP_CUDA(cudaMemset(grad, 0, 2 * nk * 4));
    bb.grads.push_back({grad, grad + nk, 0});
    bb.dq_accum = static_cast<float*>(dev(kernels::dq_accum_floats(bb) * 4));
  }
  kernels::Workspace ws;
  if (!passes.fwd) kernels::attention_forward(b, ws, nullptr);  // the backward's input, untimed
  auto once = [&] {
    if (passes.fwd) kernels::attention_forward(b, ws, nullptr);
    if (!passes.bwd) return;
    kernels::attention_backward_prepare(o, bb.dout, dt, w.B, int(w.S), w.H, w.D, const_cast<float*>(bb.dsum), nullptr);
    TASP_CUDA(cudaMemsetAsync(bb.dq_accum, 0, kernels::dq_accum_floats(bb) * 4));
    kernels::attention_backward(bb, ws, nullptr);
    kernels::attention_backward_finish(bb, dq, ws, nullptr);
  };
  cudaEvent_t e0, e1;
  TASP_CUDA(cudaEventCreate(&e0));
  TASP_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; ++i) once();
  std::vector<float> ms;
  for (int i = 0; i < std::max(1, iters); ++i) {
    TASP_CUDA(cudaEventRecord(e0));
    once();
    TASP_CUDA(cudaEventRecord(e1));
    TASP_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    TASP_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

}  // namespace tasp::executor::cuda
