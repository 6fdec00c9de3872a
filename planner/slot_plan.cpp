#include "planner/slot_plan.hpp"

#include <algorithm>
#include <map>

namespace tasp::planner {

namespace {

// A pool of interchangeable buffers: reuse a freed one, else add one.
struct Pool {
  std::vector<int> free;
  int count = 0;
  int take() {
    if (free.empty()) return count++;
    const int s = free.back();
    free.pop_back();
    return s;
  }
  void give(int s) { free.push_back(s); }
};

}  // namespace

int by_owner_slot(const Plan& p, int owner, int piece) { return piece * p.ranks + owner; }

RankSlots plan_slots(const Plan& p, Pass pass, int r, bool by_owner) {
  const int P = p.pieces_per_rank, steps = p.num_steps(pass);
  auto key = [P](int owner, int piece) { return long(owner) * P + piece; };
  std::vector<Step> list(steps);
  std::map<long, int> last_use;  // K/V: last step the rank computes on or forwards a piece
  for (int t = 0; t < steps; ++t) {
    Step scratch;
    list[t] = step_at(p, t, scratch, pass);
    for (const auto& c : list[t].compute)
      if (c.rank == r) last_use[key(c.owner, c.piece)] = t;
    for (const auto& x : list[t].transfers)
      if (x.src == r && !x.grad) last_use[key(x.owner, x.piece)] = t;
  }
  RankSlots out;
  out.steps.resize(steps);
  Pool kv, grad;
  std::map<long, int> held, acc;  // K/V held; the rank's current accumulator of each piece
  const bool keep = p.has_backward && p.backward.keeps_kv;
  if (pass == Pass::Bwd && keep) {
    const RankSlots f = plan_slots(p, Pass::Fwd, r, by_owner);
    held = f.held_final;
    kv.count = f.kv_slots;
    std::vector<char> used(kv.count, 0);
    for (const auto& [k, slot] : held) used[slot] = 1;
    for (int s = kv.count - 1; s >= 0; --s)
      if (!used[s]) kv.free.push_back(s);
  } else if (by_owner) {
    kv.count = p.ranks * P;
    for (int c = 0; c < P; ++c) held[key(r, c)] = by_owner_slot(p, r, c);
  } else {
    for (int c = 0; c < P; ++c) held[key(r, c)] = kv.take();
  }
  for (int t = 0; t < steps; ++t) {
    StepSlots& s = out.steps[t];
    s.held = held;
    std::vector<int> sent;  // accumulator slots free once the step's transfers are done
    for (const auto& x : list[t].transfers) {
      const long k = key(x.owner, x.piece);
      if (x.dst == r) {
        if (x.grad) {
          s.grad_recv[{k, x.src}] = grad.take();
        } else {
          s.arrivals[k] = by_owner ? by_owner_slot(p, x.owner, x.piece) : kv.take();
        }
      }
      if (x.src == r && x.grad) {
        // Sending an accumulator the rank does not have sends a cleared one (an invalid plan's numbers fail
        // the check instead of reading stale memory).
        auto it = acc.find(k);
        int slot;
        if (it == acc.end()) slot = grad.take(), s.grad_zero.push_back(slot);
        else slot = it->second, acc.erase(it);
        s.grad_send[k] = slot;
        sent.push_back(slot);
      }
    }
    for (const auto& c : list[t].compute) {
      if (c.rank != r || pass != Pass::Bwd) continue;  // only the backward's computes add to accumulators
      const long k = key(c.owner, c.piece);
      auto it = acc.find(k);
      if (it == acc.end()) it = acc.emplace(k, grad.take()).first, s.grad_zero.push_back(it->second);
      s.grad_compute[k] = it->second;
    }
    // Step end: K/V pieces past their last use are freed, arrivals become held; sent accumulators are
    // freed, received ones added to the rank's own (or become its own).
    for (auto it = held.begin(); it != held.end();) {
      auto lu = last_use.find(it->first);
      const bool own = it->first / P == r, kept = keep && pass == Pass::Fwd;
      if (!own && !kept && (lu == last_use.end() || lu->second <= t)) {
        if (!by_owner) kv.give(it->second);
        it = held.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [k, slot] : s.arrivals) held[k] = slot;
    for (int slot : sent) grad.give(slot);
    for (const auto& [ks, slot] : s.grad_recv) {
      const long k = ks.first;
      auto it = acc.find(k);
      if (it == acc.end()) {
        acc[k] = slot;
      } else {
        s.grad_add.push_back({it->second, slot});
        grad.give(slot);
      }
    }
  }
  out.kv_slots = kv.count;
  out.grad_slots = grad.count;
  out.held_final = held;
  out.grad_final = acc;
  return out;
}

std::vector<StepAdd> step_adds(const StepSlots& s, bool half) {
  std::vector<StepAdd> out;
  if (!half) {
    for (const auto& [into, from] : s.grad_add) out.push_back({into, from, -1, false});
    return out;
  }
  std::map<int, int> adds;  // arrival slot -> the own slot it adds into
  for (const auto& [into, from] : s.grad_add) adds[from] = into;
  int i = 0;
  for (const auto& [ks, slot] : s.grad_recv) {
    const auto a = adds.find(slot);
    out.push_back({a == adds.end() ? slot : a->second, -1, i++, a == adds.end()});
  }
  return out;
}

std::vector<FinalAdd> final_adds(const RankSlots& rs, int r, int pieces_per_rank, bool half) {
  std::vector<FinalAdd> out;
  if (rs.steps.empty()) return out;
  std::map<int, int> piece_of;  // final slot -> own piece
  for (int c = 0; c < pieces_per_rank; ++c)
    if (const auto f = rs.grad_final.find(long(r) * pieces_per_rank + c); f != rs.grad_final.end()) piece_of[f->second] = c;
  const std::vector<StepAdd> adds = step_adds(rs.steps.back(), half);
  std::map<int, FinalAdd> last;  // final slot -> its last add in the step
  for (size_t i = 0; i < adds.size(); ++i) {
    const auto p = piece_of.find(adds[i].into);
    if (p == piece_of.end()) continue;
    bool stays = true;  // no later add changes the source (an fp32 slot; staging is written by none) or reads the sum
    for (size_t j = i + 1; j < adds.size(); ++j)
      stays = stays && (adds[i].from < 0 || adds[j].into != adds[i].from) && adds[j].from != adds[i].into;
    if (stays) last[adds[i].into] = {adds[i], p->second};
    else last.erase(adds[i].into);
  }
  for (const auto& [slot, a] : last) out.push_back(a);
  return out;
}

bool grads_written_once(const RankSlots& rs) {
  if (rs.steps.size() != 1) return false;
  const StepSlots& s = rs.steps[0];
  return s.grad_send.empty() && s.grad_recv.empty() && s.grad_add.empty();
}

std::vector<SendWrittenOnce> sends_written_once(const RankSlots& rs) {
  // Every use of every slot in order: (step, how, key) with how 0 cleared, 1 computed into, 2 sent, 3 received into
  // (overwritten), 4 anything else. A clear or a receive starts a new accumulator in the slot (a lifetime); the one
  // asked for is cleared, computed into and sent, nothing else, in its lifetime (the 16-bit write leaves the slot
  // itself unused, free for the next lifetime).
  struct Use {
    int step, how;
    long key;
  };
  std::map<int, std::vector<Use>> uses;
  int first_send = int(rs.steps.size());
  for (int t = 0; t < int(rs.steps.size()); ++t) {
    const StepSlots& s = rs.steps[t];
    for (int slot : s.grad_zero) uses[slot].push_back({t, 0, -1});
    for (const auto& [k, slot] : s.grad_compute) uses[slot].push_back({t, 1, k});
    for (const auto& [k, slot] : s.grad_send) uses[slot].push_back({t, 2, k}), first_send = std::min(first_send, t);
    for (const auto& [ks, slot] : s.grad_recv) uses[slot].push_back({t, 3, ks.first});
    for (const auto& [into, from] : s.grad_add) uses[into].push_back({t, 4, -1}), uses[from].push_back({t, 4, -1});
  }
  for (const auto& [k, slot] : rs.grad_final) uses[slot].push_back({int(rs.steps.size()), 4, k});
  std::vector<SendWrittenOnce> out;
  for (const auto& [slot, u] : uses)
    for (size_t a = 0; a < u.size(); ++a) {
      if (u[a].how != 0) continue;
      size_t b = a + 1;
      while (b < u.size() && u[b].how != 0 && u[b].how != 3) ++b;  // [a, b): one lifetime
      if (b - a == 3 && u[a + 1].how == 1 && u[a + 2].how == 2 && u[a + 1].step == u[a].step && u[a + 2].key == u[a + 1].key &&
          u[a + 2].step > u[a].step && u[a + 2].step == first_send)
        out.push_back({u[a].step, slot, u[a + 1].key, u[a + 2].step});
      a = b - 1;
    }
  return out;
}

std::pair<int, int> most_grad_transfers(const RankSlots& s) {
  std::pair<int, int> most{0, 0};
  for (const auto& st : s.steps)
    most.first = std::max(most.first, int(st.grad_send.size())), most.second = std::max(most.second, int(st.grad_recv.size()));
  return most;
}

}  // namespace tasp::planner
