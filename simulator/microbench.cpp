#include "simulator/microbench.hpp"

#include <stdexcept>

#include "simulator/comm_rules.hpp"
#include "simulator/fluid.hpp"

namespace tasp::simulator {

bool is_comm_kind(const std::string& k) {
  return k == "ring" || k == "multi" || k == "pairs" || k == "allgather" || k == "allgather-roots" || k == "reducescatter" ||
         k == "reducescatter-roots" || k == "broadcast-one-root";
}

double predict_comm_step_us(const Network& net, const Profile& prof, const std::string& measured_kind, int n, double bytes) {
  // A gather as one broadcast a root (allgather-roots) moves what one all-gather moves, at the collectives' rate; a
  // reduce-scatter (one, or one reduce a root) the same bytes at the reduce-scatter's.
  const bool reduce = measured_kind.rfind("reducescatter", 0) == 0;
  const std::string kind = measured_kind == "allgather-roots" || reduce ? "allgather" : measured_kind;
  if (n < 2 || n > net.ranks) throw std::invalid_argument("microbenchmark needs 2.." + std::to_string(net.ranks) + " ranks");
  const CommProfile& cp = prof.comm_for(n);
  FlowList f;
  auto add = [&](int s, int d, double b) { f.s.push_back(s), f.d.push_back(d), f.b.push_back(b); };
  int peers = 1;
  if (kind == "ring") {
    for (int r = 0; r < n; ++r) add(r, (r + 1) % n, bytes);
  } else if (kind == "pairs") {
    for (int r = 0; r < n; ++r)
      if ((r ^ 1) < n) add(r, r ^ 1, bytes);
  } else if (kind == "multi" || kind == "allgather") {
    peers = n - 1;
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < n; ++o)
        if (o != r) add(r, o, bytes / (n - 1));
  } else if (kind == "broadcast-one-root") {
    for (int o = 1; o < n; ++o) add(0, o, bytes / (n - 1));
  } else {
    throw std::invalid_argument("unknown microbenchmark kind '" + kind + "'");
  }
  // NCCL's all-gather at its own rate where the profile has one (as the engine times collective steps); one root's
  // broadcast alone at its own.
  const bool one = kind == "broadcast-one-root" && !cp.one_root_gbps.empty();
  const Curve& cc = one ? cp.one_root_gbps : cp.collective_curve(reduce);
  const bool coll = (kind == "allgather" || one) && !cc.empty();
  for (size_t i = 0; i < f.size(); ++i) {
    f.t0.push_back(step_latency_us(cp, peers));
    f.c.push_back(coll ? cc.at(bytes) : cp.flow_cap_gbps.at(f.b[i]));
  }
  const double rate = coll ? cc.at(bytes) : rank_cap_gbps(cp, peers, bytes);
  std::vector<double> caps(net.ranks, rate);
  FluidResult r = run_fluid(net, f, caps, caps);
  double end = 0;
  for (int x = 0; x < n; ++x) end = std::max(end, r.rank_end_us[x]);
  return end;
}

}  // namespace tasp::simulator
