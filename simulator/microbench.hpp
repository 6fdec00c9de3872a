#pragma once
// The communication microbenchmarks (what calibration measures) replayed on the flow model, so fits
// can be checked against the measurements they came from. Pure.
#include <string>

#include "simulator/network.hpp"
#include "simulator/profile.hpp"

namespace tasp::simulator {

// kind: ring (B to the next rank, from the previous), multi (B/(n-1) to and from every other rank),
// pairs (B both ways with rank^1), allgather (B/(n-1) from every rank to every other; allgather-roots: the same
// bytes as one broadcast from each rank, each on a communicator of its own: executor::CudaOptions::root_comms),
// reducescatter[-roots] (the same bytes summed at their owners: one reduce-scatter, or one reduce a root; on 2 ranks
// -roots as the executor moves it, a broadcast from the other rank since 2026-11-27), broadcast-one-root (B/(n-1) from
// rank 0 to every other, no other root sending: CommProfile::one_root_gbps). Ranks 0..n-1
// of the network take part. Returns the slowest rank's step time in microseconds.
double predict_comm_step_us(const Network& net, const Profile& prof, const std::string& kind, int n, double bytes);
bool is_comm_kind(const std::string& kind);

}  // namespace tasp::simulator
