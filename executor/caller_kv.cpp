#include "executor/caller_kv.hpp"

#include <cstdint>

namespace tasp::executor::cuda {

std::vector<OwnMessage> own_messages(const Geometry& g, int owner, int piece) {
  std::vector<OwnMessage> out;
  for (const ShardCopy& c : shard_copies(g, owner)) {
    if (c.piece != piece) continue;
    for (int half = 0; half < 2; ++half)
      for (size_t b = 0; b < c.height; ++b)
        out.push_back({half, c.shard_off + b * c.shard_pitch, half * g.half_slot() + c.slot_off + b * c.slot_pitch, c.width});
  }
  return out;
}

std::vector<std::vector<OwnMessage>> first_hop_messages(const Geometry& g) {
  std::vector<std::vector<OwnMessage>> out(size_t(g.n) * g.P);
  for (int owner = 0; owner < g.n; ++owner)
    for (int piece = 0; piece < g.P; ++piece) out[g.key(owner, piece)] = own_messages(g, owner, piece);
  return out;
}

std::optional<std::vector<OwnRef>> own_refs(const PassWork& fwd, const PassWork& bwd, int gpu, const Geometry& g, int r,
                                            const void* kv) {
  const std::vector<ShardCopy> copies = shard_copies(g, r);
  const auto base = reinterpret_cast<uintptr_t>(kv);
  const size_t se = g.slot_elems(), row = size_t(g.row_elems);
  std::vector<OwnRef> refs;
  bool runs = true;
  // The run of the shard that holds a piece lying `at` elements into own slot `slot`, `len` tokens long.
  auto run_of = [&](size_t slot, size_t at, size_t len) -> const ShardCopy* {
    for (const ShardCopy& c : copies)
      if (size_t(c.piece) == slot && at >= c.slot_off && at + len * row <= c.slot_off + c.width) return &c;
    return nullptr;
  };
  auto scan = [&](const std::vector<kernels::KvPiece>& pieces, bool bwd_pass, int step, bool moved) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto a = reinterpret_cast<uintptr_t>(pieces[i].k);
      if (a < base || a >= base + 2 * se * g.P) continue;  // not in the own slots
      const size_t e = (a - base) / 2, at = e % se;
      if (const ShardCopy* c = run_of(e / se, at, size_t(pieces[i].len)))
        refs.push_back({bwd_pass, moved, step, int(i), c->shard_off + (at - c->slot_off), (long long)c->shard_pitch, e,
                        pieces[i].batch_stride});
      else
        runs = false;
    }
  };
  if (size_t(gpu) < fwd.fwd.size())
    for (size_t t = 0; t < fwd.fwd[gpu].size(); ++t) scan(fwd.fwd[gpu][t].pieces, false, int(t), false);
  if (size_t(gpu) < bwd.bwd.size())
    for (size_t t = 0; t < bwd.bwd[gpu].size(); ++t) scan(bwd.bwd[gpu][t].pieces, true, int(t), false);
  // Moved query rows computed here read this rank's own pieces too (planner/query_moves.hpp).
  if (size_t(gpu) < fwd.mfwd.size())
    for (size_t t = 0; t < fwd.mfwd[gpu].size(); ++t) scan(fwd.mfwd[gpu][t].pieces, false, int(t), true);
  if (size_t(gpu) < bwd.mbwd.size())
    for (size_t t = 0; t < bwd.mbwd[gpu].size(); ++t) scan(bwd.mbwd[gpu][t].pieces, true, int(t), true);
  if (!runs) return std::nullopt;
  return refs;
}

namespace {
kernels::KvPiece& piece_of(PassWork& fwd, PassWork& bwd, int gpu, const OwnRef& o) {
  if (o.moved) return o.bwd ? bwd.mbwd[gpu][o.step].pieces[o.index] : fwd.mfwd[gpu][o.step].pieces[o.index];
  return o.bwd ? bwd.bwd[gpu][o.step].pieces[o.index] : fwd.fwd[gpu][o.step].pieces[o.index];
}
}  // namespace

void point_own_refs(PassWork& fwd, PassWork& bwd, int gpu, const std::vector<OwnRef>& refs, const void* k, const void* v) {
  for (const OwnRef& o : refs) {
    kernels::KvPiece& kp = piece_of(fwd, bwd, gpu, o);
    kp.k = static_cast<const uint16_t*>(k) + o.shard_off;
    kp.v = static_cast<const uint16_t*>(v) + o.shard_off;
    kp.batch_stride = o.batch_stride;
  }
}

void point_own_refs_at_slots(PassWork& fwd, PassWork& bwd, int gpu, const Geometry& g, const std::vector<OwnRef>& refs,
                             const void* kv) {
  for (const OwnRef& o : refs) {
    kernels::KvPiece& kp = piece_of(fwd, bwd, gpu, o);
    kp.k = static_cast<const uint16_t*>(kv) + o.slot_off;
    kp.v = static_cast<const uint16_t*>(kv) + o.slot_off + g.half_slot();
    kp.batch_stride = o.slot_stride;
  }
}

}  // namespace tasp::executor::cuda
