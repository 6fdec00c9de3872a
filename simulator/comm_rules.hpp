#pragma once
// How a profile turns a step's shape into flow parameters; shared by the engine and the fitting checks.
#include <algorithm>
#include <limits>

#include "simulator/profile.hpp"

namespace tasp::simulator {

// From a rank posting its step to bytes moving: one peer's latency plus a little per further peer.
inline double step_latency_us(const CommProfile& cp, int peers) {
  return cp.latency_us + cp.peer_latency_us * std::max(0, peers - 1);
}
// A rank talking to several peers at once shares NCCL's channels among them: a cap on its total.
inline double rank_cap_gbps(const CommProfile& cp, int peers, double rank_bytes) {
  return peers >= 2 ? cp.rank_cap_gbps.at(rank_bytes) : std::numeric_limits<double>::infinity();
}

}  // namespace tasp::simulator
