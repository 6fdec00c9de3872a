#pragma once
// A training framework's rank (rank_runner.cpp) keeps its own K/V where the framework holds them ([B][rows][Hkv*D],
// tokens in shard order) instead of staging them into its own slots first: their first hop leaves straight from the
// framework's tensors, and the work lists read them there. Staged, a forward waited for its copies before its first
// exchange could start (4 copies, 149 us, before medium's all-gather on 2x H200, 2026-11-26). Host code: plain data.
#include <optional>
#include <vector>

#include "executor/cuda_heads.hpp"
#include "executor/cuda_pass.hpp"

namespace tasp::executor::cuda {

// The messages (cuda_pass.hpp, OwnMessage) of a K/V piece its owner sends from the framework's tensors: one per run
// of the piece's rows in the shard and batch row; the receiver posts the same list (shard_copies is the same geometry
// on every rank).
std::vector<OwnMessage> own_messages(const Geometry& g, int owner, int piece);
// Every piece's, by key (PassWork::first_hop).
std::vector<std::vector<OwnMessage>> first_hop_messages(const Geometry& g);

// A K/V piece of a pass's work lists that lies in rank r's own slots (0..P-1 of `kv`), and where the framework's
// tensors hold its first token and batch rows.
struct OwnRef {
  bool bwd = false;
  bool moved = false;       // in the launch over moved query rows (PassWork::mfwd, mbwd), not the rank's own rows'
  int step = 0, index = 0;  // the step's batch, and the piece's index in it
  size_t shard_off = 0;     // elements from the tensor's start
  long long batch_stride = 0;
  size_t slot_off = 0;      // and in the slots: elements from their start (K; V half_slot further)
  long long slot_stride = 0;
};
// Every such piece of `fwd` and `bwd` (rank r's lists, `gpu` = r), or nothing when one of them is not a run of the
// shard's rows (documents cut pieces into several runs): then the own K/V are staged as before.
std::optional<std::vector<OwnRef>> own_refs(const PassWork& fwd, const PassWork& bwd, int gpu, const Geometry& g, int r,
                                            const void* kv);
// The lists read the own pieces from `k` and `v` (the call's tensors).
void point_own_refs(PassWork& fwd, PassWork& bwd, int gpu, const std::vector<OwnRef>& refs, const void* k, const void* v);
// The lists read them from their slots at `kv` again (a call whose tensors the kernels cannot read in place).
void point_own_refs_at_slots(PassWork& fwd, PassWork& bwd, int gpu, const Geometry& g, const std::vector<OwnRef>& refs,
                             const void* kv);

}  // namespace tasp::executor::cuda
