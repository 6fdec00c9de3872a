// CPU backend: each rank is a thread. Transfers go through per-rank receive buffers that become usable
// at the next step (the double buffering the GPU backend has); pieces are freed after their last use.
// The backward runs the plan's backward steps after the forward: K/V pieces travel again, and dK/dV
// accumulators move as the plan says (one leaves its sender and is added to the receiver's own at the end
// of the step; a rank's contributions go into its own accumulator of the piece, made on first use).
#include <barrier>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "executor/attention_cpu.hpp"
#include "executor/backend.hpp"
#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"
#include "planner/mask.hpp"
#include "planner/query_moves.hpp"

namespace tasp::executor {
namespace {

using planner::Pass;
using planner::Plan;
using planner::Range;
using Clock = std::chrono::steady_clock;

std::vector<long> positions(const std::vector<Range>& rs) {
  std::vector<long> p;
  for (const Range& r : rs)
    for (long x = r.begin; x < r.end; ++x) p.push_back(x);
  return p;
}

template <class T>
struct KvPiece {
  std::vector<T> k, v;  // [B][len][Hkv][D]
};

// A rank's dK/dV accumulator of one piece.
template <class T>
struct Grad {
  std::vector<T> dk, dv;
  void add(const Grad& o) {
    for (size_t i = 0; i < dk.size(); ++i) dk[i] += o.dk[i], dv[i] += o.dv[i];
  }
};

// A thread per rank runs `steps` steps: `body(r, t)`, a barrier, `boundary(r, t)` (what ends the step:
// frees and arrivals), a barrier. The first exception of any rank is rethrown after all have joined.
void run_ranks(int n, int steps, const std::function<void(int, int)>& body, const std::function<void(int, int)>& boundary) {
  std::barrier sync(n);
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto rank_main = [&](int r) {
    for (int t = 0; t < steps; ++t) {
      try {
        body(r, t);
      } catch (...) {
        std::lock_guard<std::mutex> g(failure_lock);
        if (!failure) failure = std::current_exception();
      }
      sync.arrive_and_wait();
      boundary(r, t);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  for (auto& th : threads) th.join();
  if (failure) std::rethrow_exception(failure);
}

template <class T>
class CpuBackend : public Backend {
 public:
  explicit CpuBackend(std::string prec) : prec_(std::move(prec)) {}
  std::string name() const override { return "cpu-" + prec_; }
  Result run(const Plan& plan, const Problem& pr, planner::Passes passes) override;

 private:
  Result run_head_parallel(const Plan& plan, const Problem& pr, planner::Passes passes);
  std::string prec_;
};

// One run's state: every rank's queries and outputs, the pieces' token positions, the step lists.
template <class T>
class CpuRun {
 public:
  CpuRun(const Plan& plan, const Problem& pr)
      : plan_(plan), pr_(pr), w_(pr.w), mask_(planner::make_mask(pr.w)), n_(plan.ranks), P_(plan.pieces_per_rank) {
    if (w_.causal != plan.causal) throw std::invalid_argument("workload and plan disagree on causal");
    qpos_.resize(n_), qranges_.resize(n_);
    q_.resize(n_), o_.resize(n_), lse_.resize(n_);
    ppos_.resize(size_t(n_) * P_), pranges_.resize(size_t(n_) * P_);
    for (int r = 0; r < n_; ++r) {
      qranges_[r] = planner::shard_ranges(planner::split_of(plan, w_.S), r);
      qpos_[r] = positions(qranges_[r]);
      q_[r] = gather(pr.q, qpos_[r], w_.H);
      o_[r].assign(q_[r].size(), T(0));
      lse_[r].assign(size_t(w_.B) * qpos_[r].size() * w_.H, -std::numeric_limits<T>::infinity());
      for (int c = 0; c < P_; ++c) {
        pranges_[key(r, c)] = planner::piece_ranges(planner::split_of(plan, w_.S), r, c);
        ppos_[key(r, c)] = positions(pranges_[key(r, c)]);
      }
    }
    for (const planner::QueryMove& m : plan.query_moves) {
      Moved mv;
      mv.pos = positions({planner::moved_range(plan, w_.S, m)});
      for (int i = 0; i < m.range; ++i) mv.row0 += qranges_[m.owner].at(i).size();
      moved_.push_back(std::move(mv));
    }
  }

  // Runs one pass; its per-rank step timings (relative to `t0`) go to `timing`. A plan whose backward keeps K/V:
  // the forward frees no piece it received and the backward starts with what the forward held (kept_).
  void pass(Pass pass, Clock::time_point t0, std::vector<std::vector<planner::StepTiming>>& timing);

  // Scatters per-rank rows back into the global [B][S][heads*D] layout.
  std::vector<double> global_rows(const std::vector<std::vector<T>>& per_rank, int width) const {
    std::vector<double> g(size_t(w_.B) * w_.S * width, 0.0);
    for (int r = 0; r < n_; ++r)
      for (int b = 0; b < w_.B; ++b)
        for (size_t i = 0; i < qpos_[r].size(); ++i)
          for (int x = 0; x < width; ++x)
            g[(size_t(b) * w_.S + qpos_[r][i]) * width + x] = double(per_rank[r][(size_t(b) * qpos_[r].size() + i) * width + x]);
    return g;
  }
  void outputs(Result& res) const {
    res.out = global_rows(o_, w_.H * w_.D);
    res.lse = global_rows(lse_, w_.H);
    if (dq_.empty()) return;
    res.dq = global_rows(dq_, w_.H * w_.D);
    const int width = w_.Hkv * w_.D;
    res.dk.assign(size_t(w_.B) * w_.S * width, 0.0);
    res.dv.assign(res.dk.size(), 0.0);
    for (const auto& [k, g] : final_grads_) {
      const auto& pos = ppos_[k];
      for (int b = 0; b < w_.B; ++b)
        for (size_t i = 0; i < pos.size(); ++i)
          for (int x = 0; x < width; ++x) {
            const size_t src = (size_t(b) * pos.size() + i) * width + x, dst = (size_t(b) * w_.S + pos[i]) * width + x;
            res.dk[dst] = double(g.dk[src]), res.dv[dst] = double(g.dv[src]);
          }
    }
  }

 private:
  const Plan& plan_;
  const Problem& pr_;
  const planner::Workload& w_;
  const planner::Mask mask_;
  int n_, P_;
  std::vector<std::vector<long>> qpos_;
  std::vector<std::vector<planner::Range>> qranges_, pranges_;  // shards' and pieces' ranges (pranges_ by key)
  std::vector<std::vector<T>> q_, o_, lse_;
  std::vector<std::vector<long>> ppos_;  // token positions of piece key(owner, piece)
  // Query rows moved to another rank (Plan::query_moves), as `at` holds them: the forward's Q (kept for the backward)
  // and partial out/LSE; the backward's dO, final LSE, D and partial dQ. row0: where they lie in the owner's rows.
  struct Moved {
    std::vector<long> pos;
    size_t row0 = 0;
    std::vector<T> q, o, lse, dout, lse_final, dsum, dq;
  };
  std::vector<Moved> moved_;
  std::vector<std::vector<T>> dq_;
  std::map<long, Grad<T>> final_grads_;  // each piece's accumulator as its owner holds it after the backward
  std::vector<std::map<long, KvPiece<T>>> kept_;  // the forward's final holdings, for a backward that keeps K/V

  long key(int owner, int piece) const { return long(owner) * P_ + piece; }
  std::vector<T> gather(const std::vector<double>& src, const std::vector<long>& pos, int heads) const {
    std::vector<T> out(size_t(w_.B) * pos.size() * heads * w_.D);
    for (int b = 0; b < w_.B; ++b)
      for (size_t i = 0; i < pos.size(); ++i)
        for (int x = 0; x < heads * w_.D; ++x)
          out[(size_t(b) * pos.size() + i) * heads * w_.D + x] = T(src[(size_t(b) * w_.S + pos[i]) * heads * w_.D + x]);
    return out;
  }
  // Rows [row0, row0 + len) of a rank's [B][rows][width] tensor, and the reverse (added with `add`).
  std::vector<T> rows_of(const std::vector<T>& src, size_t rows, size_t row0, size_t len, size_t width) const {
    std::vector<T> out(size_t(w_.B) * len * width);
    for (int b = 0; b < w_.B; ++b)
      std::copy_n(src.begin() + (size_t(b) * rows + row0) * width, len * width, out.begin() + size_t(b) * len * width);
    return out;
  }
  void put_rows(std::vector<T>& dst, size_t rows, size_t row0, const std::vector<T>& src, size_t len, size_t width, bool add) const {
    for (int b = 0; b < w_.B; ++b)
      for (size_t i = 0; i < len * width; ++i) {
        T& d = dst[(size_t(b) * rows + row0) * width + i];
        d = add ? d + src[size_t(b) * len * width + i] : src[size_t(b) * len * width + i];
      }
  }
  Grad<T> zero_grad(long k) const {
    const size_t sz = size_t(w_.B) * ppos_[k].size() * w_.Hkv * w_.D;
    return {std::vector<T>(sz, T(0)), std::vector<T>(sz, T(0))};
  }
};

template <class T>
void CpuRun<T>::pass(Pass pass, Clock::time_point t0, std::vector<std::vector<planner::StepTiming>>& timing) {
  const bool bwd = pass == Pass::Bwd;
  const int steps = plan_.num_steps(pass);
  const bool keep = plan_.has_backward && plan_.backward.keeps_kv;
  std::vector<std::map<long, KvPiece<T>>> held(n_), incoming(n_);
  std::vector<std::map<long, Grad<T>>> grads(n_);  // each rank's own accumulators
  std::vector<std::vector<std::pair<long, Grad<T>>>> grads_in(n_);
  std::vector<std::mutex> inbox_lock(n_);
  if (bwd && keep) {
    held = kept_;
  } else {
    for (int r = 0; r < n_; ++r)
      for (int c = 0; c < P_; ++c) {
        const long k = key(r, c);
        held[r][k] = {gather(pr_.k, ppos_[k], w_.Hkv), gather(pr_.v, ppos_[k], w_.Hkv)};
      }
  }
  // The backward's inputs: dO of the rank's rows and D = rowsum(dO * O) from the forward's final out.
  std::vector<std::vector<T>> dout(n_), dsum(n_);
  if (bwd) {
    dq_.assign(n_, {});
    for (int r = 0; r < n_; ++r) {
      dout[r] = gather(pr_.dout, qpos_[r], w_.H);
      dsum[r].assign(lse_[r].size(), T(0));
      row_dot(dout[r].data(), o_[r].data(), dsum[r].size(), w_.D, dsum[r].data());
      dq_[r].assign(q_[r].size(), T(0));
    }
  }
  // Last step each rank needs each K/V piece (compute or forward), to free buffers early.
  std::vector<std::map<long, int>> last_use(n_);
  std::vector<planner::Step> step_list;
  for (int t = 0; t < steps; ++t) {
    planner::Step scratch;
    step_list.push_back(planner::step_at(plan_, t, scratch, pass));
    for (auto& c : step_list.back().compute) last_use[c.rank][key(c.owner, c.piece)] = t;
    for (auto& x : step_list.back().transfers)
      if (!x.grad) last_use[x.src][key(x.owner, x.piece)] = t;
  }
  timing.assign(n_, std::vector<planner::StepTiming>(steps));
  auto us = [&] { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); };
  auto piece = [&](int r, int owner, int pc, int t) -> const KvPiece<T>& {
    auto it = held[r].find(key(owner, pc));
    if (it == held[r].end())
      throw std::runtime_error(std::string(bwd ? "backward " : "") + "step " + std::to_string(t) + ": rank " + std::to_string(r) +
                               " does not hold piece (owner " + std::to_string(owner) + ", piece " + std::to_string(pc) +
                               "): the plan is invalid");
    return it->second;
  };
  auto body = [&](int r, int t) {
    planner::StepTiming& tm = timing[r][t];
    const planner::Step& s = step_list[t];
    tm.comm_start_us = us();
    for (const auto& x : s.transfers) {
      if (x.src != r) continue;
      const long k = key(x.owner, x.piece);
      if (x.grad) {
        // The accumulator as it stood at the start of the step leaves the rank; none yet is a zero one.
        auto it = grads[r].find(k);
        Grad<T> g = it == grads[r].end() ? zero_grad(k) : std::move(it->second);
        if (it != grads[r].end()) grads[r].erase(it);
        tm.bytes += double(g.dk.size() + g.dv.size()) * sizeof(T);
        std::lock_guard<std::mutex> lk(inbox_lock[x.dst]);
        grads_in[x.dst].push_back({k, std::move(g)});
        continue;
      }
      const KvPiece<T>& kp = piece(r, x.owner, x.piece, t);
      tm.bytes += double(kp.k.size() + kp.v.size()) * sizeof(T);
      std::lock_guard<std::mutex> lk(inbox_lock[x.dst]);
      incoming[x.dst][k] = kp;
    }
    for (const planner::RowsTransfer& x : s.rows) {
      const planner::QueryMove& m = plan_.query_moves.at(x.move);
      Moved& mv = moved_[x.move];
      const size_t rows = qpos_[m.owner].size(), len = mv.pos.size(), hd = size_t(w_.H) * w_.D;
      if (!x.back && r == m.owner) {  // out: what `at` needs of the rows, read at the step's start
        if (bwd) {
          mv.dout = rows_of(dout[r], rows, mv.row0, len, hd);
          mv.lse_final = rows_of(lse_[r], rows, mv.row0, len, w_.H);
          mv.dsum = rows_of(dsum[r], rows, mv.row0, len, w_.H);
          mv.dq.assign(mv.dout.size(), T(0));
          tm.bytes += double(mv.dout.size() + 2 * mv.dsum.size()) * sizeof(T);
        } else {
          mv.q = rows_of(q_[r], rows, mv.row0, len, hd);
          mv.o.assign(mv.q.size(), T(0));
          mv.lse.assign(size_t(w_.B) * len * w_.H, -std::numeric_limits<T>::infinity());
          tm.bytes += double(mv.q.size()) * sizeof(T);
        }
      } else if (x.back && r == m.at) {  // back: folded into the owner's rows at the step's end (boundary)
        tm.bytes += double(mv.q.size() + (bwd ? 0 : mv.lse.size())) * sizeof(T);
      }
    }
    tm.comm_end_us = us();
    tm.compute_start_us = tm.comm_end_us;
    std::vector<T> ob, lb;
    if (!bwd) ob.resize(o_[r].size()), lb.resize(lse_[r].size());
    for (const auto& c : s.compute) {
      if (c.rank != r) continue;
      const KvPiece<T>& kp = piece(r, c.owner, c.piece, t);
      const long k = key(c.owner, c.piece);
      const auto& kpos = ppos_[k];
      if (c.move >= 0) {  // moved rows, held here (`at`), on this rank's own piece
        Moved& mv = moved_.at(c.move);
        const std::vector<Range> rr{planner::moved_range(plan_, w_.S, plan_.query_moves.at(c.move))};
        double pairs = 0;
        for (const auto& kr : pranges_[k]) pairs += planner::visible_pairs(mask_, rr[0], kr);
        if (bwd) {
          auto it = grads[r].find(k);
          if (it == grads[r].end()) it = grads[r].emplace(k, zero_grad(k)).first;
          block_attention_backward(mv.q.data(), mv.pos, kp.k.data(), kp.v.data(), kpos, mv.lse_final.data(), mv.dout.data(),
                                   mv.dsum.data(), w_.B, w_.H, w_.Hkv, w_.D, mask_, mv.dq.data(), it->second.dk.data(),
                                   it->second.dv.data());
          tm.flops += 10.0 * pairs * w_.B * w_.H * w_.D;
        } else {
          std::vector<T> mo(mv.o.size()), ml(mv.lse.size());
          block_attention(mv.q.data(), mv.pos, kp.k.data(), kp.v.data(), kpos, w_.B, w_.H, w_.Hkv, w_.D, mask_, mo.data(), ml.data());
          merge_block(mv.o.data(), mv.lse.data(), mo.data(), ml.data(), mv.lse.size(), w_.D);
          tm.flops += 4.0 * pairs * w_.B * w_.H * w_.D;
        }
        continue;
      }
      const double pairs = [&] {
        double sum = 0;
        for (const auto& qr : qranges_[r])
          for (const auto& kr : pranges_[k])
            sum += planner::visible_pairs(mask_, qr, kr);
        return sum;
      }();
      if (bwd) {
        auto it = grads[r].find(k);
        if (it == grads[r].end()) it = grads[r].emplace(k, zero_grad(k)).first;
        block_attention_backward(q_[r].data(), qpos_[r], kp.k.data(), kp.v.data(), kpos, lse_[r].data(), dout[r].data(),
                                 dsum[r].data(), w_.B, w_.H, w_.Hkv, w_.D, mask_, dq_[r].data(), it->second.dk.data(),
                                 it->second.dv.data());
        tm.flops += 10.0 * pairs * w_.B * w_.H * w_.D;
      } else {
        block_attention(q_[r].data(), qpos_[r], kp.k.data(), kp.v.data(), kpos, w_.B, w_.H, w_.Hkv, w_.D, mask_,
                        ob.data(), lb.data());
        merge_block(o_[r].data(), lse_[r].data(), ob.data(), lb.data(), lse_[r].size(), w_.D);
        tm.flops += 4.0 * pairs * w_.B * w_.H * w_.D;
      }
    }
    tm.compute_end_us = us();
  };
  // Step boundary: drop what is no longer needed, then make this step's arrivals usable.
  auto boundary = [&](int r, int t) {
    for (auto it = held[r].begin(); it != held[r].end();) {
      auto lu = last_use[r].find(it->first);
      if (!(keep && !bwd) && (lu == last_use[r].end() || lu->second <= t)) it = held[r].erase(it);
      else ++it;
    }
    for (auto& [k, kp] : incoming[r]) held[r][k] = std::move(kp);
    incoming[r].clear();
    // Moved rows returned this step: the partial out and LSE merged into the owner's rows, or the partial dQ added.
    for (const planner::RowsTransfer& x : step_list[t].rows) {
      const planner::QueryMove& m = plan_.query_moves.at(x.move);
      if (!x.back || r != m.owner) continue;
      Moved& mv = moved_[x.move];
      const size_t rows = qpos_[r].size(), len = mv.pos.size(), hd = size_t(w_.H) * w_.D;
      if (bwd) {
        put_rows(dq_[r], rows, mv.row0, mv.dq, len, hd, true);
      } else {
        std::vector<T> o = rows_of(o_[r], rows, mv.row0, len, hd), l = rows_of(lse_[r], rows, mv.row0, len, w_.H);
        merge_block(o.data(), l.data(), mv.o.data(), mv.lse.data(), l.size(), w_.D);
        put_rows(o_[r], rows, mv.row0, o, len, hd, false);
        put_rows(lse_[r], rows, mv.row0, l, len, w_.H, false);
      }
    }
    for (auto& [k, g] : grads_in[r]) {
      auto it = grads[r].find(k);
      if (it == grads[r].end()) grads[r].emplace(k, std::move(g));
      else it->second.add(g);
    }
    grads_in[r].clear();
  };
  run_ranks(n_, steps, body, boundary);
  if (keep && !bwd) kept_ = held;
  if (bwd) {
    // Each piece's dK/dV is what its owner holds; contributions left elsewhere are lost (a wrong plan).
    final_grads_.clear();
    for (int o = 0; o < n_; ++o)
      for (int c = 0; c < P_; ++c) {
        auto it = grads[o].find(key(o, c));
        final_grads_[key(o, c)] = it == grads[o].end() ? zero_grad(key(o, c)) : std::move(it->second);
      }
  }
}

template <class T>
Result CpuBackend<T>::run(const Plan& plan, const Problem& pr, planner::Passes passes) {
  if (passes.bwd && !plan.has_backward) throw std::invalid_argument("the plan has no backward part");
  if (passes.bwd && pr.dout.empty()) throw std::invalid_argument("the backward needs dO (Problem::dout)");
  if (plan.ulysses > 1) return run_head_parallel(plan, pr, passes);
  CpuRun<T> run(plan, pr);
  Result res;
  res.timeline.source = name();
  res.timeline.scheme = plan.scheme;
  res.timeline.ranks = plan.ranks;
  res.timeline.pass = planner::passes_name(passes);
  const auto t0 = Clock::now();
  std::vector<std::vector<planner::StepTiming>> fwd, bwd;
  run.pass(Pass::Fwd, t0, fwd);  // the backward's input even when only the backward is timed
  if (passes.fwd) res.timeline.per_rank = std::move(fwd);
  res.timeline.fwd_steps = passes.fwd ? plan.num_steps() : 0;
  if (passes.bwd) {
    const auto t1 = Clock::now();
    run.pass(Pass::Bwd, passes.fwd ? t0 : t1, bwd);
    if (!passes.fwd) res.timeline.per_rank.assign(plan.ranks, {});
    for (int r = 0; r < plan.ranks; ++r)
      res.timeline.per_rank[r].insert(res.timeline.per_rank[r].end(), bwd[r].begin(), bwd[r].end());
  }
  run.outputs(res);
  return res;
}

// Ulysses groups: after the all-to-all, slot i of every group holds heads slice(i) of its group's tokens, and
// the slots run the plan's steps independently (same-slot GPUs of the groups exchange); the output's
// all-to-all puts each slice back. On the CPU the all-to-alls are the copies of head slices in and out.
template <class T>
Result CpuBackend<T>::run_head_parallel(const Plan& plan, const Problem& pr, planner::Passes passes) {
  const int u = plan.ulysses;
  const planner::Workload& w = pr.w;
  // Head groups (plan.head_groups) only order the GPUs' work; the arithmetic, and so the result, is the same.
  if (const std::string e = planner::check_head_groups(u, plan.head_groups, w); !e.empty())
    throw planner::InputError("workload: " + e);
  Plan inner = plan;
  inner.ulysses = 1;
  Result res;
  const size_t rows = size_t(w.B) * w.S;
  res.out.assign(rows * w.H * w.D, 0.0), res.lse.assign(rows * w.H, 0.0);
  if (passes.bwd) res.dq.assign(res.out.size(), 0.0), res.dk.assign(rows * w.Hkv * w.D, 0.0), res.dv.assign(res.dk.size(), 0.0);
  // Copies heads [h0, h0 + n) of rows of width H*D from one layout to another (per head: D values).
  auto copy_heads = [&](const std::vector<double>& from, int from_heads, int from_h0, std::vector<double>& to, int to_heads,
                        int to_h0, int n, int width, bool add) {
    for (size_t r = 0; r < rows; ++r)
      for (int h = 0; h < n; ++h)
        for (int x = 0; x < width; ++x) {
          const double v = from[(r * from_heads + from_h0 + h) * width + x];
          double& d = to[(r * to_heads + to_h0 + h) * width + x];
          d = add ? d + v : v;
        }
  };
  for (int slot = 0; slot < u; ++slot) {
    const planner::HeadSlice hs = planner::head_slice(u, w, slot);
    Problem sp;
    sp.w = planner::slot_workload(u, w);
    sp.q.resize(rows * hs.q_heads * w.D), sp.k.resize(rows * hs.kv_heads * w.D), sp.v.resize(sp.k.size());
    copy_heads(pr.q, w.H, hs.q_begin, sp.q, hs.q_heads, 0, hs.q_heads, w.D, false);
    copy_heads(pr.k, w.Hkv, hs.kv_begin, sp.k, hs.kv_heads, 0, hs.kv_heads, w.D, false);
    copy_heads(pr.v, w.Hkv, hs.kv_begin, sp.v, hs.kv_heads, 0, hs.kv_heads, w.D, false);
    if (passes.bwd) {
      sp.dout.resize(sp.q.size());
      copy_heads(pr.dout, w.H, hs.q_begin, sp.dout, hs.q_heads, 0, hs.q_heads, w.D, false);
    }
    Result r = run(inner, sp, passes);
    copy_heads(r.out, hs.q_heads, 0, res.out, w.H, hs.q_begin, hs.q_heads, w.D, false);
    copy_heads(r.lse, hs.q_heads, 0, res.lse, w.H, hs.q_begin, hs.q_heads, 1, false);
    if (passes.bwd) {
      copy_heads(r.dq, hs.q_heads, 0, res.dq, w.H, hs.q_begin, hs.q_heads, w.D, false);
      // Replicated K/V heads: the output all-to-all sums the replicas' dK/dV.
      copy_heads(r.dk, hs.kv_heads, 0, res.dk, w.Hkv, hs.kv_begin, hs.kv_heads, w.D, true);
      copy_heads(r.dv, hs.kv_heads, 0, res.dv, w.Hkv, hs.kv_begin, hs.kv_heads, w.D, true);
    }
    if (slot == 0) res.timeline = std::move(r.timeline);  // every slot runs the same steps
  }
  res.timeline.scheme = plan.scheme;
  return res;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const std::string& precision) {
  if (precision == "fp64") return std::make_unique<CpuBackend<double>>("fp64");
  if (precision == "fp32") return std::make_unique<CpuBackend<float>>("fp32");
  throw std::invalid_argument("cpu backend precision must be fp64 or fp32, not '" + precision + "'");
}

}  // namespace tasp::executor
