#include "simulator/choose.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <ostream>
#include <sstream>

#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"

namespace tasp::simulator {

using namespace tasp::planner;

void set_gather_pieces(const PlanChoices& h, bool applies, PlanOptions& o) {
  if (h.gather_pieces < 0 || h.gather_pieces > 64) throw InputError("--gather-pieces: must be 0 (choose) or 1 to 64");
  o.gather_pieces = applies ? std::max(1, h.gather_pieces) : 1;
  if (!applies || h.gather_steps.empty()) return;
  const int sum = std::accumulate(h.gather_steps.begin(), h.gather_steps.end(), 0);
  if (h.gather_pieces != 0 && h.gather_pieces != sum)
    throw InputError("--gather-steps: its pieces sum to " + std::to_string(sum) + ", --gather-pieces says " +
                     std::to_string(h.gather_pieces) + " (give one of the two)");
  if (const std::string e = planner::gather_steps_error(h.gather_steps, sum); !e.empty() || sum > 64)
    throw InputError("--gather-steps: " + (e.empty() ? "at most 64 pieces in all" : e));
  o.gather_pieces = sum, o.gather_steps = h.gather_steps;
}

PlanOptions plan_options(const std::string& scheme, const Workload& w, const PlanChoices& h) {
  PlanOptions o;
  o.causal = w.causal;
  o.workload = w;
  o.ulysses = h.ulysses;
  o.inner = h.inner == "auto" ? "hamilton" : h.inner;
  o.head_groups = std::max(1, h.head_groups);
  o.prune_plain = h.prune_plain || h.move_queries;
  o.move_queries = h.move_queries;
  o.accumulator_bytes = accumulator_bytes_of(h.accumulator);
  // allgather's, and usp's across its groups when that is allgather (its groups' slots gather in pieces alike).
  set_gather_pieces(h, scheme == "allgather" || (scheme == "usp" && h.inner == "allgather"), o);
  if (!(h.memory_budget_gib >= 0)) throw InputError("--memory-budget: must be 0 (none) or a positive number of GiB");
  o.memory_budget_bytes = h.memory_budget_gib * double(1 << 30);
  if (h.ulysses < 0) throw InputError("--ulysses: must be a positive group size");
  if (h.head_groups < 0) throw InputError("--head-groups: must be 0 (choose) or a positive count");
  if (scheme == "ring") o.layout_given = true, o.layout = Layout::Contiguous;
  if (!h.layout.empty()) {
    if (!parse_layout(h.layout, &o.layout)) throw InputError("layout: expected contiguous, zigzag or zigzag-docs, got '" + h.layout + "'");
    o.layout_given = true;
  }
  return o;
}

int accumulator_bytes_of(const std::string& accumulator, const std::string& what) {
  if (accumulator == "fp32") return 4;
  if (accumulator == "bf16") return 2;
  if (accumulator == "auto") return 0;
  throw InputError(what + ": expected fp32, bf16 or auto, got '" + accumulator + "'");
}

std::vector<std::string> select_schemes(const std::string& list, const Topology& t, bool causal) {
  std::vector<std::string> out;
  if (list == "all") {
    for (const auto& s : scheme_names())
      if (scheme_applies(s, t, causal, nullptr)) out.push_back(s);
    return out;
  }
  std::stringstream ss(list);
  std::string s;
  while (std::getline(ss, s, ',')) {
    std::string why;
    if (s.empty()) continue;
    if (!scheme_applies(s, t, causal, &why)) throw InputError("--schemes: " + s + ": " + why);
    out.push_back(s);
  }
  if (out.empty()) throw InputError("--schemes: no scheme named");
  return out;
}

Profile choose_profile(const std::string& path, const Topology& t, std::ostream* log) {
  if (!path.empty()) return load_profile(path);
  std::string chosen;
  Profile p = builtin_profile(t.name, &chosen);
  if (log && chosen != t.name)
    *log << "note: no profile for '" << t.name << "': using the built-in " << chosen << " profile (--profile to choose)\n";
  return p;
}

std::string misfit(const Plan& p, const Workload& w) {
  std::string why = check_split(split_of(p, w.S));
  if (why.empty() && p.ulysses > 1) why = check_head_groups(p.ulysses, p.head_groups, w);
  return why;
}

namespace {

// Plans `scheme` into r.plan: "" when the workload fits it, else why not (pieces, heads).
std::string plan_for(const Topology& t, const Workload& w, const std::string& scheme, const PlanChoices& head, SchemeRun& r) {
  r.scheme = scheme;
  r.plan = build_plan(t, scheme, plan_options(scheme, w, head));
  return misfit(r.plan, w);
}

// usp with the group size and scheme across groups that simulate fastest, simulated; an empty scheme when
// none fits, and `why` says how the first one failed. Group sizes: the one given; on a cluster a node's GPUs
// (the all-to-alls stay on NVSwitch and the NICs carry the fewest heads: smaller groups lost every case of
// docs/measurements/scheme-tables.md, and searching them on 128 nodes tripled the time of `simulate`); on one
// node every divisor >= 2 of its GPUs that leaves two groups. Pieces far below a kernel tile (128 keys) cannot win and cost the most to simulate (hamilton
// across 128 groups: 127 rings of 4-token pieces): not tried. Causal ring across groups takes the zigzag
// layout, so it is zigzag itself.
SchemeRun best_usp(const Topology& t, const Workload& w, const Profile& prof, const SimOptions& opt,
                   const PlanChoices& head, std::string* why) {
  SchemeRun best;
  std::string tried, first_no;
  std::vector<int> sizes;
  if (head.ulysses > 0) sizes = {head.ulysses};
  else if (t.nodes >= 2) sizes = {t.gpus_per_node};
  else
    for (int u = 2; u <= t.ranks() / 2; ++u)
      if (t.ranks() % u == 0 && check_heads(u, w).empty()) sizes.push_back(u);
  if (sizes.empty()) {
    *why = "no group size of at least 2 GPUs splits the heads (H=" + std::to_string(w.H) + ", Hkv=" + std::to_string(w.Hkv) + ")";
    return best;
  }
  const std::vector<std::string> inners =
      head.inner == "auto" ? std::vector<std::string>{"ring", "zigzag", "allgather", "hamilton", "two-level"}
                           : std::vector<std::string>{head.inner};
  for (int u : sizes)
  for (const std::string& inner : inners) {
    if (inner == "ring" && w.causal) continue;
    PlanChoices h = head;
    h.inner = inner, h.ulysses = u;
    const std::string name = (sizes.size() > 1 ? std::to_string(u) + "x" : "") + inner;
    SchemeRun r;
    std::string no;
    try {
      no = plan_for(t, w, "usp", h, r);
    } catch (const InputError& e) {
      no = e.what();
    }
    if (!no.empty()) {
      if (first_no.empty()) first_no = name + ": " + no;
      continue;
    }
    const double piece_tokens =
        double(w.S) / (double(r.plan.ranks) * r.plan.pieces_per_rank * (r.plan.layout == Layout::Contiguous ? 1 : 2));
    if (r.plan.ranks > 1 && piece_tokens < 32) {
      tried += (tried.empty() ? "" : ", ") + name + " not tried (" + std::to_string(long(piece_tokens)) + "-token pieces)";
      continue;
    }
    r.sim = simulate(r.plan, t, w, prof, opt);
    tried += (tried.empty() ? "" : ", ") + name + " " + std::to_string(r.sim.total_us / 1e3).substr(0, 7);
    if (best.scheme.empty() || r.sim.total_us < best.sim.total_us) best = std::move(r), best.inner = inner;
  }
  if (!best.scheme.empty())
    best.detail = "groups of " + std::to_string(best.plan.ulysses) + ", across them " + best.inner + " (tried" +
                  (sizes.size() > 1 ? ", groups x scheme" : "") + ", ms: " + tried + ")";
  else *why = first_no.empty() ? "no scheme across groups fits" : first_no;
  return best;
}

}  // namespace

std::vector<SchemeRun> run_schemes(const Topology& t, const Workload& w, const std::vector<std::string>& schemes,
                                   const Profile& prof, const SimOptions& opt,
                                   std::vector<Skipped>* skipped, const PlanChoices& head) {
  std::vector<SchemeRun> runs;
  std::string first_why;
  for (const auto& s : schemes) {
    SchemeRun r;
    std::string why;
    const bool search = s == "usp" && (head.inner == "auto" || head.ulysses == 0);
    if (search) {
      r = best_usp(t, w, prof, opt, head, &why);
      if (!why.empty() && !skipped) throw InputError("usp: " + why);
    } else {
      try {
        why = plan_for(t, w, s, head, r);
      } catch (const InputError& e) {  // a scheme that cannot take these choices (zigzag and a contiguous layout)
        if (!skipped) throw;
        why = e.what();
      }
    }
    if (!why.empty() && skipped) {
      skipped->push_back({s, why});
      if (first_why.empty()) first_why = s + ": " + why;
      continue;
    }
    if (!search) {
      if (head.head_groups == 0 && r.plan.ulysses > 1) r.detail = choose_head_groups(r.plan, t, w, prof, opt);
      r.sim = simulate(r.plan, t, w, prof, opt);  // a misfit throws its own clear error
    }
    // Packed causal documents: zigzag shards balance each rank's total work, zigzag-docs ones each step's (every
    // document split in 2n chunks), both spread every document over all ranks; contiguous ones keep short
    // documents on one rank so that pruning drops their transfers. Which wins depends on the documents and
    // the GPUs (docs/measurements/executor.md): simulate all three.
    if (!search && head.layout.empty() && w.causal && w.packed() && !w.windowed() && r.plan.layout == Layout::Zigzag &&
        r.plan.ranks > 1) {
      auto ms = [](const SchemeRun& x) { return std::to_string(x.sim.total_us / 1e3).substr(0, 7); };
      std::string tried = " (tried zigzag " + ms(r) + " ms";
      for (Layout l : {Layout::ZigzagDocs, Layout::Contiguous}) {
        if (s == "zigzag" && l == Layout::Contiguous) continue;  // the zigzag scheme is a zigzag layout
        PlanOptions o = plan_options(s, w, head);
        o.layout_given = true, o.layout = l;
        SchemeRun c = r;
        try {
          c.plan = build_plan(t, s, o);
        } catch (const InputError& e) {
          tried += std::string(", ") + layout_name(l) + " does not fit";
          continue;
        }
        c.sim = simulate(c.plan, t, w, prof, opt);
        tried += std::string(", ") + layout_name(l) + " " + ms(c) + " ms";
        if (c.sim.total_us < r.sim.total_us) r = std::move(c);
      }
      r.detail = std::string("layout ") + layout_name(r.plan.layout) + tried + ")";
    }
    if (!search && head.choose_pieces() && s == "allgather") {
      PlanOptions o = plan_options(s, w, head);
      o.layout_given = true, o.layout = r.plan.layout;
      const std::string d = choose_gather_pieces(r.plan, t, w, prof, opt, o);
      r.sim = simulate(r.plan, t, w, prof, opt);
      r.detail += (r.detail.empty() ? "" : "; ") + d;
    }
    runs.push_back(std::move(r));
  }
  if (runs.empty()) throw InputError("workload: no scheme fits it (" + first_why + ")");
  return runs;
}

std::string choose_head_groups(Plan& p, const Topology& t, const Workload& w, const Profile& prof,
                               const SimOptions& opt) {
  if (p.ulysses < 2) return "";
  std::string tried;
  int best = 1;
  double best_us = 0;
  for (int g : {1, 2, 4, 8, 16}) {
    if (!check_head_groups(p.ulysses, g, w).empty()) continue;
    p.head_groups = g;
    SimOptions o = opt;
    o.max_timeline_cells = 0;
    const double us = simulate(p, t, w, prof, o).total_us;
    tried += (tried.empty() ? "" : ", ") + std::to_string(g) + ": " + std::to_string(us / 1e3).substr(0, 7);
    if (g == 1 || us < best_us) best = g, best_us = us;
  }
  p.head_groups = best;
  return "head groups " + std::to_string(best) + " (tried, ms: " + tried + ")";
}

std::string choose_gather_pieces(Plan& p, const Topology& t, const Workload& w, const Profile& prof,
                                 const SimOptions& opt, PlanOptions o) {
  if (p.scheme != "allgather") return "";
  const double shard = double(w.S) / (double(p.ranks) * (p.layout == Layout::Contiguous ? 1 : 2));
  // One piece a step (1 to 4 pieces), and steps of several pieces that shrink toward the forward's end (the backward
  // takes them in reverse), in the order of their pieces: over loopback sockets on 2x H200 (2026-11-27) 4 pieces in
  // steps of 4, 2, 1, 1 ran `medium` 0.84x and `qwen3_14b` 0.92x the time of 4 and 2 pieces one a step, and through host
  // memory 3, 1 ran B=1 S=8192 H=32 causal 0.96x of 2 (docs/measurements/executor.md).
  static const std::vector<std::vector<int>> candidates{{1}, {1, 1}, {2, 1}, {1, 1, 1}, {3, 1}, {2, 1, 1}, {1, 1, 1, 1}, {4, 2, 1, 1}};
  std::string tried, best_name = "1";
  double best_us = 0;
  bool any = false;
  // Pruned for the causal mask, a zigzag allgather cuts its pieces by chunk: an even count (planner::build_plan). Asked
  // for (--prune-plain), every candidate is; else, where the profile measured one root's broadcast alone (a medium both
  // directions share: through host memory on 2x H200 pruned steps ran B=1 S=8192 and `medium` 0.82-0.89x, 2026-11-27)
  // and the mask is plain causal, pruned candidates run beside the whole ones (through tasp run, and through the C ABI's
  // ranks as tasp.torch runs them: both checked against one GPU on 2x H200, 2026-11-27); not where they were declined
  // (SimOptions::try_pruned).
  // The same medium moves fewer bytes still where rank 0's late chunk's queries go to rank 1 instead of rank 1's K/V to
  // them (planner/query_moves.hpp; 2 ranks; not where declined, SimOptions::try_moved): through host memory on 2x H200
  // 0.91-0.94x the time of 3+1 pruned at B=1 S=8192 H=32 and `medium` (2026-11-27; through tasp.torch's ranks 0.90x at
  // B=1 S=8192). Its pieces: 2 (the early chunk at once) or 4 (in two halves, what comes back crossing what goes out).
  const bool plain_causal = o.causal && p.layout == Layout::Zigzag && p.ranks > 1 && !w.windowed() && !w.packed();
  const bool asked_moved = o.move_queries && plain_causal;
  const bool asked = o.prune_plain && plain_causal && !asked_moved;
  const bool shared = !asked && !asked_moved && plain_causal && opt.try_pruned && !prof.comm_for(p.gpus()).one_root_gbps.empty() &&
                      prof.comm_for(p.gpus()).collectives_per_root && opt.collectives != Collectives::Off;
  enum Mode { Whole, Pruned, Moved };
  const bool can_move = p.ranks == 2 && p.ulysses == 1 && opt.try_moved && o.backward;
  std::vector<Mode> modes{asked_moved ? Moved : asked ? Pruned : Whole};
  if (shared) modes = {Whole, Pruned};
  // Moved queries also where the directions run apart (sockets), as broadcasts a root, the transport measured there:
  // in 4 pieces, what comes back crossing what goes out, B=1 S=8192 H=32 and `medium` ran 0.76x and 0.73x the time
  // of the whole exchange in 4 pieces over loopback sockets on 2x H200 (2026-11-27).
  const bool per_root = prof.comm_for(p.gpus()).collectives_per_root && opt.collectives != Collectives::Off;
  // (Moved plans are pruned ones: where pruning was declined, SimOptions::try_pruned, so are they.)
  if (!asked && !asked_moved && plain_causal && can_move && per_root && opt.try_pruned) modes.push_back(Moved);
  for (const std::vector<int>& steps : candidates)
    for (Mode mode : modes) {
      const int P = std::accumulate(steps.begin(), steps.end(), 0);
      if (P > 1 && shard / P < 128) continue;  // pieces under a kernel tile: launches for nothing
      if (mode != Whole && P % 2 != 0) continue;
      const bool equal = std::all_of(steps.begin(), steps.end(), [](int k) { return k == 1; });
      if (mode == Moved && (!equal || (P != 2 && P != 4))) continue;
      o.gather_pieces = P;
      o.gather_steps = equal ? std::vector<int>{} : steps;
      o.prune_plain = mode != Whole;
      o.move_queries = mode == Moved;
      Plan c;
      try {
        c = build_plan(t, "allgather", o);
      } catch (const InputError&) {
        if (mode == Moved && !asked_moved) continue;  // (a forward alone, a budget that drops the kept K/V: not moved)
        throw;
      }
      if (!misfit(c, w).empty()) continue;
      SimOptions so = opt;
      so.max_timeline_cells = 0;
      const double us = simulate(c, t, w, prof, so).total_us;
      const std::string name = std::to_string(P) + (equal ? "" : " in steps of " + gather_steps_text(steps)) +
                               (mode == Pruned && !asked ? " pruned" : mode == Moved && !asked_moved ? " queries moved" : "");
      tried += (tried.empty() ? "" : ", ") + name + ": " + std::to_string(us / 1e3).substr(0, 7);
      // More pieces must gain 1%: their launches and collectives are what the model prices least well (B=1 S=8192
      // through shm: 2 pieces predicted 6% faster, measured 1.8%; 4 in steps of 2, 1, 1 predicted 1.9% faster, measured
      // 3.7% slower).
      if (!any || us < 0.99 * best_us) best_name = name, best_us = us, p = std::move(c);
      any = true;
    }
  return "gather pieces " + best_name + " (tried, ms: " + tried + ")";
}

std::string near_ties(const std::vector<SchemeRun>& runs, size_t best, double band) {
  std::string out;
  const double t0 = runs.at(best).sim.total_us;
  for (size_t i = 0; i < runs.size(); ++i) {
    const double rel = runs[i].sim.total_us / t0 - 1;
    if (i == best || std::abs(rel) > band) continue;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.1f%%", 100 * rel);
    out += (out.empty() ? "" : ", ") + runs[i].scheme + " " + pct;
  }
  return out;
}

size_t fastest(const std::vector<SchemeRun>& runs) {
  size_t best = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].sim.total_us < runs[best].sim.total_us) best = i;
  return best;
}

}  // namespace tasp::simulator
