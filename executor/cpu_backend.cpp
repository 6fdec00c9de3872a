// CPU backend: each rank is a thread. Transfers go through per-rank receive buffers that become usable
// at the next step (the double buffering the GPU backend has); pieces are freed after their last use.
#include <barrier>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "executor/attention_cpu.hpp"
#include "executor/backend.hpp"
#include "planner/layout.hpp"

namespace tasp::executor {
namespace {

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
  std::vector<long> pos;
  std::vector<T> k, v;  // [B][len][Hkv][D]
};

template <class T>
class CpuBackend : public Backend {
 public:
  explicit CpuBackend(std::string prec) : prec_(std::move(prec)) {}
  std::string name() const override { return "cpu-" + prec_; }

  Result run(const Plan& plan, const Problem& pr) override {
    const auto& w = pr.w;
    const int n = plan.ranks, P = plan.pieces_per_rank, steps = plan.num_steps();
    if (w.causal != plan.causal) throw std::invalid_argument("workload and plan disagree on causal");
    auto gather = [&](const std::vector<double>& src, const std::vector<long>& pos, int heads) {
      std::vector<T> out(size_t(w.B) * pos.size() * heads * w.D);
      for (int b = 0; b < w.B; ++b)
        for (size_t i = 0; i < pos.size(); ++i)
          for (int x = 0; x < heads * w.D; ++x)
            out[(size_t(b) * pos.size() + i) * heads * w.D + x] = T(src[(size_t(b) * w.S + pos[i]) * heads * w.D + x]);
      return out;
    };
    // Each rank's inputs: its queries and its own KV pieces.
    std::vector<std::vector<long>> qpos(n);
    std::vector<std::vector<T>> q(n), o(n), lse(n);
    std::vector<std::map<long, KvPiece<T>>> held(n), incoming(n);
    std::vector<std::mutex> inbox_lock(n);
    auto key = [P](int owner, int piece) { return long(owner) * P + piece; };
    for (int r = 0; r < n; ++r) {
      qpos[r] = positions(planner::shard_ranges(plan.layout, n, w.S, r));
      q[r] = gather(pr.q, qpos[r], w.H);
      o[r].assign(q[r].size(), T(0));
      lse[r].assign(size_t(w.B) * qpos[r].size() * w.H, -std::numeric_limits<T>::infinity());
      for (int c = 0; c < P; ++c) {
        KvPiece<T> kp;
        kp.pos = positions(planner::piece_ranges(plan.layout, n, P, w.S, r, c));
        kp.k = gather(pr.k, kp.pos, w.Hkv);
        kp.v = gather(pr.v, kp.pos, w.Hkv);
        held[r][key(r, c)] = std::move(kp);
      }
    }
    // Last step each rank needs each piece (compute or forward), to free buffers early.
    std::vector<std::map<long, int>> last_use(n);
    std::vector<planner::Step> step_list;
    for (int t = 0; t < steps; ++t) {
      planner::Step scratch;
      step_list.push_back(planner::step_at(plan, t, scratch));
      for (auto& c : step_list.back().compute) last_use[c.rank][key(c.owner, c.piece)] = t;
      for (auto& x : step_list.back().transfers) last_use[x.src][key(x.owner, x.piece)] = t;
    }
    Result res;
    res.timeline.source = name();
    res.timeline.scheme = plan.scheme;
    res.timeline.ranks = n;
    res.timeline.per_rank.assign(n, std::vector<planner::StepTiming>(steps));
    std::barrier sync(n);
    const auto t0 = Clock::now();
    auto us = [&] { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); };
    auto piece = [&](int r, int owner, int pc, int t) -> const KvPiece<T>& {
      auto it = held[r].find(key(owner, pc));
      if (it == held[r].end())
        throw std::runtime_error("step " + std::to_string(t) + ": rank " + std::to_string(r) + " does not hold piece (owner " +
                                 std::to_string(owner) + ", piece " + std::to_string(pc) + "): the plan is invalid");
      return it->second;
    };
    std::exception_ptr failure;
    std::mutex failure_lock;
    auto rank_main = [&](int r) {
      for (int t = 0; t < steps; ++t) {
        planner::StepTiming& tm = res.timeline.per_rank[r][t];
        const planner::Step& s = step_list[t];
        try {
          tm.comm_start_us = us();
          for (const auto& x : s.transfers) {
            if (x.src != r) continue;
            const KvPiece<T>& kp = piece(r, x.owner, x.piece, t);
            tm.bytes += double(kp.k.size() + kp.v.size()) * sizeof(T);
            std::lock_guard<std::mutex> g(inbox_lock[x.dst]);
            incoming[x.dst][key(x.owner, x.piece)] = kp;
          }
          tm.comm_end_us = us();
          tm.compute_start_us = tm.comm_end_us;
          std::vector<T> ob(o[r].size()), lb(lse[r].size());
          for (const auto& c : s.compute) {
            if (c.rank != r) continue;
            const KvPiece<T>& kp = piece(r, c.owner, c.piece, t);
            long pairs = block_attention(q[r].data(), qpos[r], kp.k.data(), kp.v.data(), kp.pos, w.B, w.H, w.Hkv, w.D,
                                         plan.causal, ob.data(), lb.data());
            tm.flops += 4.0 * double(pairs) * w.H * w.D;
            merge_block(o[r].data(), lse[r].data(), ob.data(), lb.data(), lse[r].size(), w.D);
          }
          tm.compute_end_us = us();
        } catch (...) {
          std::lock_guard<std::mutex> g(failure_lock);
          if (!failure) failure = std::current_exception();
        }
        sync.arrive_and_wait();
        // Step boundary: drop what is no longer needed, then make this step's arrivals usable.
        for (auto it = held[r].begin(); it != held[r].end();) {
          auto lu = last_use[r].find(it->first);
          if (lu == last_use[r].end() || lu->second <= t) it = held[r].erase(it);
          else ++it;
        }
        for (auto& [k, kp] : incoming[r]) held[r][k] = std::move(kp);
        incoming[r].clear();
        sync.arrive_and_wait();
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
    for (auto& th : threads) th.join();
    if (failure) std::rethrow_exception(failure);
    // Gather outputs into the global layout.
    res.out.assign(size_t(w.B) * w.S * w.H * w.D, 0.0);
    res.lse.assign(size_t(w.B) * w.S * w.H, 0.0);
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < w.B; ++b)
        for (size_t i = 0; i < qpos[r].size(); ++i) {
          for (int x = 0; x < w.H * w.D; ++x)
            res.out[(size_t(b) * w.S + qpos[r][i]) * w.H * w.D + x] = o[r][(size_t(b) * qpos[r].size() + i) * w.H * w.D + x];
          for (int h = 0; h < w.H; ++h)
            res.lse[(size_t(b) * w.S + qpos[r][i]) * w.H + h] = lse[r][(size_t(b) * qpos[r].size() + i) * w.H + h];
        }
    return res;
  }

 private:
  std::string prec_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const std::string& precision) {
  if (precision == "fp64") return std::make_unique<CpuBackend<double>>("fp64");
  if (precision == "fp32") return std::make_unique<CpuBackend<float>>("fp32");
  throw std::invalid_argument("cpu backend precision must be fp64 or fp32, not '" + precision + "'");
}

}  // namespace tasp::executor
