// The C ABI (bindings/tasp.h) over the planner, the simulator's choices and the cpu backend. Every entry point
// catches everything: an error becomes a status and a message for tasp_last_error(), never an exception across
// the C boundary or an abort.
#include "bindings/tasp.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "executor/backend.hpp"
#include "executor/cuda_heads.hpp"
#include "executor/nccl_bench.hpp"
#include "executor/rank_runner.hpp"
#include "planner/collective.hpp"
#include "planner/head_parallel.hpp"
#include "planner/layout.hpp"
#include "planner/topology.hpp"
#include "planner/verify_plan.hpp"
#include "planner/workload_catalogue.hpp"
#include "planner/workload.hpp"
#include "simulator/calibrate.hpp"
#include "simulator/choose.hpp"

struct tasp_plan {
  tasp::planner::Plan plan;
  tasp::planner::Workload workload;
  std::string json;
  bool deterministic = false;  // its ranks' backward: dQ bit-identical run to run
  bool collectives = false;    // its ranks run allgather's gathers and reduce-scatters as NCCL collectives
  bool root_comms = false;     // ... one a root, each on a communicator of its own (executor::CudaOptions::root_comms)
};

// A group is shared by its handle and its ranks' handles, so they may be destroyed in any order (a garbage collector
// that finalises a cycle picks its own order: the group handle first, then a rank whose runner synchronised on the
// group's freed streams, crashed PyTorch's process on 2x H200, 2026-11-26).
struct tasp_group {
  std::shared_ptr<tasp::executor::RankGroup> group;
  std::string fabric_json;  // tasp_group_measure_fabric's last result
};

struct tasp_rank {
  std::shared_ptr<tasp::executor::RankGroup> group;  // declared first: outlives the runner
  tasp::executor::RankRunnerPtr runner;
};

namespace tasp::bindings {
namespace {

thread_local std::string last_error;

// Runs `f`, turning what it throws into a status and the thread's message.
template <class F>
int guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return TASP_OK;
  } catch (const planner::InputError& e) {
    last_error = e.what();
    return TASP_ERR_INPUT;
  } catch (const std::invalid_argument& e) {
    last_error = e.what();
    return TASP_ERR_INPUT;
  } catch (const std::exception& e) {
    last_error = e.what();
    return TASP_ERR_RUNTIME;
  } catch (...) {
    last_error = "unknown error";
    return TASP_ERR_RUNTIME;
  }
}

void need(const void* p, const char* name) {
  if (!p) throw std::invalid_argument(std::string(name) + ": must not be NULL");
}

struct Options {
  simulator::PlanChoices choices;
  std::string profile, schemes = "all";
  planner::Passes passes{true, true};
  bool deterministic = false, framework = false;
  bool try_pruned = true;  // "prune_plain": false: allgather's pieces never pruned (SimOptions::try_pruned)
  bool try_moved = true;   // "move_queries": false: no query rows moved (SimOptions::try_moved)
  // As tasp run: allgather's steps as NCCL collectives where the profile times them clearly faster (over sockets;
  // simulator::kCollectivesMargin), grouped send/recv elsewhere (NVLink). The ranks' collectives passed
  // tests/python/gpu/check_attention.py on 2x H200 (2026-11-26) before this became the default.
  simulator::Collectives collectives = simulator::Collectives::Auto;
  int root_comms = -1;  // -1: as the profile measured its collectives (CommProfile::collectives_per_root); 0 or 1: asked
};

// An options argument's JSON object (empty for NULL or "").
nlohmann::json options_object(const char* text) {
  if (!text || !*text) return nlohmann::json::object();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw planner::InputError(std::string("options: not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) throw planner::InputError("options: expected a JSON object");
  return j;
}

Options parse_options(const char* text) {
  Options o;
  const nlohmann::json j = options_object(text);
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    const nlohmann::json& v = item.value();  // named, not a structured binding: clang 14's C++17 lambdas cannot capture one
    auto integer = [&] {
      // Bounded before the cast: 2^40 would come out of int() as 0, a group of no GPUs.
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1 << 20))
        throw planner::InputError("options." + k + ": expected an integer from 0 to 2^20");
      return int(v.get<long long>());
    };
    auto text_of = [&] {
      if (!v.is_string()) throw planner::InputError("options." + k + ": expected a string");
      return v.get<std::string>();
    };
    if (k == "profile") o.profile = text_of();
    else if (k == "schemes") o.schemes = text_of();
    else if (k == "accumulator") simulator::accumulator_bytes_of(o.choices.accumulator = text_of(), "options.accumulator");
    else if (k == "prune_plain" || k == "deterministic" || k == "framework") {
      if (!v.is_boolean()) throw planner::InputError("options." + k + ": expected true or false");
      (k == "deterministic" ? o.deterministic : k == "framework" ? o.framework : o.choices.prune_plain) = v.get<bool>();
      if (k == "prune_plain") o.try_pruned = v.get<bool>();
    }
    else if (k == "move_queries") {
      if (!v.is_boolean()) throw planner::InputError("options.move_queries: expected true or false");
      o.choices.move_queries = o.try_moved = v.get<bool>();
    }
    else if (k == "root_comms") {
      if (!v.is_boolean()) throw planner::InputError("options.root_comms: expected true or false");
      o.root_comms = v.get<bool>() ? 1 : 0;
    }
    else if (k == "collectives") {
      if (v.is_boolean()) o.collectives = v.get<bool>() ? simulator::Collectives::On : simulator::Collectives::Off;
      else if (v.is_string() && v.get<std::string>() == "auto") o.collectives = simulator::Collectives::Auto;
      else throw planner::InputError("options.collectives: expected true, false or \"auto\"");
    }
    else if (k == "layout") {
      planner::Layout l;
      if (!planner::parse_layout(o.choices.layout = text_of(), &l))
        throw planner::InputError("options.layout: expected contiguous, zigzag or zigzag-docs");
    }
    else if (k == "inner") o.choices.inner = text_of();
    else if (k == "ulysses") o.choices.ulysses = integer();
    else if (k == "head_groups") o.choices.head_groups = integer();
    else if (k == "gather_pieces") o.choices.gather_pieces = integer();
    else if (k == "gather_steps") {
      if (!v.is_array() || v.empty() || v.size() > 64)
        throw planner::InputError("options.gather_steps: expected a list of 1 to 64 counts of pieces");
      o.choices.gather_steps.clear();
      for (const auto& e : v) {
        if (!e.is_number_integer() || e.get<long long>() < 1 || e.get<long long>() > 64)
          throw planner::InputError("options.gather_steps: expected counts of pieces from 1 to 64");
        o.choices.gather_steps.push_back(int(e.get<long long>()));
      }
    }
    else if (k == "memory_budget_gib") {
      if (!v.is_number() || v.get<double>() < 0) throw planner::InputError("options.memory_budget_gib: expected a non-negative number");
      o.choices.memory_budget_gib = v.get<double>();
    } else if (k == "pass") {
      if (!planner::parse_passes(text_of(), &o.passes) || !o.passes.fwd)
        throw planner::InputError("options.pass: expected fwd or fwd+bwd");
    } else {
      throw planner::InputError("options." + k + ": unknown option (profile, schemes, layout, inner, ulysses, "
                                "head_groups, gather_pieces, gather_steps, memory_budget_gib, accumulator, prune_plain, move_queries, pass, "
                                "deterministic, framework, collectives, root_comms)");
    }
  }
  return o;
}

// Each GPU's tokens of the sequence, in the order it holds them: its plan rank's shard, or with head parallelism
// its part of its group's shard (executor/cuda_heads.hpp).
nlohmann::json gpu_tokens(const planner::Plan& p, const planner::Workload& w) {
  nlohmann::json all = nlohmann::json::array();
  const int u = p.ulysses;
  const planner::Workload sw = u > 1 ? planner::slot_workload(u, planner::head_group_workload(p.head_groups, w)) : w;
  const executor::cuda::Geometry g = executor::cuda::make_geometry(p, sw);
  for (int gpu = 0; gpu < p.gpus(); ++gpu) {
    const int r = gpu / u;
    std::vector<planner::Range> ranges = g.qranges[r];
    if (u > 1) {
      const executor::cuda::Part part = executor::cuda::token_part(g.qrows[r], u, gpu % u);
      ranges = executor::cuda::shard_rows_tokens(g, r, part.begin, part.begin + part.size);
    }
    nlohmann::json mine = nlohmann::json::array();
    for (const auto& x : ranges) mine.push_back({x.begin, x.end});
    all.push_back(mine);
  }
  return all;
}

}  // namespace
}  // namespace tasp::bindings

using namespace tasp;
using bindings::guarded;

extern "C" int tasp_api_version(void) { return TASP_API_VERSION; }

extern "C" const char* tasp_last_error(void) { return bindings::last_error.c_str(); }

extern "C" int tasp_plan_create(const char* topology, const char* scheme, const char* workload, const char* options_json,
                                tasp_plan** out) {
  return guarded([&] {
    bindings::need(topology, "topology"), bindings::need(scheme, "scheme"), bindings::need(workload, "workload");
    bindings::need(out, "out");
    *out = nullptr;
    const bindings::Options o = bindings::parse_options(options_json);
    auto h = std::make_unique<tasp_plan>();
    h->workload = planner::parse_workload(workload);
    h->deterministic = o.deterministic;
    const planner::Topology t = planner::load_topology(topology);
    const simulator::Profile prof = simulator::choose_profile(o.profile, t, nullptr);
    simulator::SimOptions so;
    so.passes = o.passes;
    so.max_timeline_cells = 0;
    so.framework = o.framework;
    so.try_pruned = o.try_pruned;
    so.try_moved = o.try_moved;
    so.collectives = o.collectives;
    std::string s = scheme, detail;
    double predicted = 0;
    if (s == "auto") {
      std::vector<simulator::Skipped> skipped;
      auto runs = simulator::run_schemes(t, h->workload, simulator::select_schemes(o.schemes, t, h->workload.causal), prof, so,
                                         &skipped, o.choices);
      const size_t pick = simulator::fastest(runs);
      const std::string near = simulator::near_ties(runs, pick);
      simulator::SchemeRun& best = runs[pick];
      h->plan = std::move(best.plan), s = best.scheme, detail = best.detail, predicted = best.sim.total_us;
      h->collectives = best.sim.collectives;
      std::string tried;
      for (const auto& r : runs) tried += (tried.empty() ? "" : ", ") + r.scheme + " " + std::to_string(r.sim.total_us);
      detail = "auto: fastest simulated (us: " + tried + ")" + (detail.empty() ? "" : "; " + detail) +
               (near.empty() ? "" : "; within 3%, inside the model's error: " + near);
    } else {
      planner::PlanOptions po = simulator::plan_options(s, h->workload, o.choices);
      po.backward = o.passes.bwd;
      h->plan = planner::build_plan(t, s, po);
      if (const std::string e = simulator::misfit(h->plan, h->workload); !e.empty()) throw planner::InputError("workload: " + e);
      if (o.choices.head_groups == 0) detail = simulator::choose_head_groups(h->plan, t, h->workload, prof, so);
      if (o.choices.choose_pieces())
        if (const std::string d = simulator::choose_gather_pieces(h->plan, t, h->workload, prof, so, po); !d.empty())
          detail += (detail.empty() ? "" : "; ") + d;
      const simulator::SimResult sim = simulator::simulate(h->plan, t, h->workload, prof, so);
      predicted = sim.total_us, h->collectives = sim.collectives;
    }
    if (const std::string e = planner::verify_plan(h->plan); !e.empty()) throw std::logic_error("invalid plan: " + e);
    const planner::Plan& p = h->plan;
    // Asked for, collectives run whatever the profile knows of them (allgather's steps only); "auto": as predicted.
    if (o.collectives == simulator::Collectives::On) h->collectives = planner::collectives_apply(p);
    h->root_comms = h->collectives && p.ulysses <= 1 &&
                    (o.root_comms >= 0 ? o.root_comms == 1 : prof.comm_for(p.ranks).collectives_per_root);
    nlohmann::json j = {{"scheme", s},
                        {"ranks", p.ranks},
                        {"gpus", p.gpus()},
                        {"ulysses", p.ulysses},
                        {"head_groups", p.head_groups},
                        {"pieces_per_rank", p.pieces_per_rank},
                        {"gather_steps", p.gather_steps},
                        {"pieces_by_chunk", p.pieces_by_chunk},
                        {"pruned", p.pruned.any()},
                        {"queries_moved", !p.query_moves.empty()},
                        {"layout", planner::layout_name(p.layout)},
                        {"causal", p.causal},
                        {"accumulator", p.accumulator_bytes == 2 ? "bf16" : "fp32"},
                        {"keeps_kv", p.has_backward && p.backward.keeps_kv},
                        {"deterministic", h->deterministic},
                        {"collectives", h->collectives},
                        {"root_comms", h->root_comms},
                        {"detail", detail},
                        {"profile", prof.name},
                        {"predicted_us", predicted},
                        {"workload", planner::to_string(h->workload)},
                        {"gpu_tokens", bindings::gpu_tokens(p, h->workload)}};
    h->json = j.dump();
    *out = h.release();
  });
}

extern "C" void tasp_plan_destroy(tasp_plan* plan) { delete plan; }

extern "C" const char* tasp_configs_json(void) {
  static const std::string text = planner::workload_catalogue_json();
  return text.c_str();
}

extern "C" const char* tasp_plan_json(const tasp_plan* plan) { return plan ? plan->json.c_str() : ""; }

extern "C" int tasp_cpu_run(const tasp_plan* plan, int precision_bits, const double* q, const double* k, const double* v,
                            const double* dout, double* out, double* lse, double* dq, double* dk, double* dv) {
  return guarded([&] {
    bindings::need(plan, "plan"), bindings::need(q, "q"), bindings::need(k, "k"), bindings::need(v, "v");
    bindings::need(out, "out"), bindings::need(lse, "lse");
    if (dout) bindings::need(dq, "dq"), bindings::need(dk, "dk"), bindings::need(dv, "dv");
    if (precision_bits != 64 && precision_bits != 32) throw std::invalid_argument("precision_bits: 64 or 32");
    if (dout && !plan->plan.has_backward) throw std::invalid_argument("dout: the plan has no backward (options.pass)");
    const planner::Workload& w = plan->workload;
    const size_t nq = size_t(w.B) * w.S * w.H * w.D, nk = size_t(w.B) * w.S * w.Hkv * w.D, nl = size_t(w.B) * w.S * w.H;
    executor::Problem pr;
    pr.w = w;
    pr.q.assign(q, q + nq), pr.k.assign(k, k + nk), pr.v.assign(v, v + nk);
    if (dout) pr.dout.assign(dout, dout + nq);
    auto backend = executor::make_cpu_backend(precision_bits == 64 ? "fp64" : "fp32");
    const executor::Result r = backend->run(plan->plan, pr, planner::Passes{true, dout != nullptr});
    std::copy(r.out.begin(), r.out.end(), out);
    std::copy(r.lse.begin(), r.lse.end(), lse);
    if (r.out.size() != nq || r.lse.size() != nl) throw std::logic_error("cpu backend: unexpected output sizes");
    if (dout) std::copy(r.dq.begin(), r.dq.end(), dq), std::copy(r.dk.begin(), r.dk.end(), dk), std::copy(r.dv.begin(), r.dv.end(), dv);
  });
}

extern "C" int tasp_nccl_id(unsigned char* id) {
  return guarded([&] {
    bindings::need(id, "id");
    executor::make_nccl_id(id);
  });
}

extern "C" int tasp_group_create(int ranks, int rank, int device, const unsigned char* id, tasp_group** out) {
  return guarded([&] {
    bindings::need(id, "id"), bindings::need(out, "out");
    *out = nullptr;
    auto h = std::make_unique<tasp_group>();
    h->group = executor::open_rank_group(ranks, rank, device, id);
    *out = h.release();
  });
}

extern "C" void tasp_group_destroy(tasp_group* group) { delete group; }

extern "C" int tasp_group_watch(tasp_group* group, int timeout_s) {
  return guarded([&] {
    bindings::need(group, "group");
    executor::watch_rank_group(*group->group, timeout_s);
  });
}

namespace tasp::bindings {
namespace {

// tasp_group_measure_fabric's options.
struct FabricOptions {
  std::string profile, csv;
  int iters = 5, timeout_s = 60;
  bool per_root = true;
};

FabricOptions parse_fabric_options(const char* text) {
  FabricOptions o;
  const nlohmann::json j = options_object(text);
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    const nlohmann::json& v = item.value();
    if (k == "profile" || k == "csv") {
      if (!v.is_string()) throw planner::InputError("options." + k + ": expected a string");
      (k == "profile" ? o.profile : o.csv) = v.get<std::string>();
    } else if (k == "iters" || k == "timeout_s") {
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 100000)
        throw planner::InputError("options." + k + ": expected an integer from 1 to 100000");
      (k == "iters" ? o.iters : o.timeout_s) = int(v.get<long long>());
    } else if (k == "per_root") {
      if (!v.is_boolean()) throw planner::InputError("options.per_root: expected true or false");
      o.per_root = v.get<bool>();
    } else {
      throw planner::InputError("options." + k + ": unknown option (profile, iters, per_root, timeout_s, csv)");
    }
  }
  return o;
}

}  // namespace
}  // namespace tasp::bindings

extern "C" int tasp_group_measure_fabric(tasp_group* group, const char* topology, const char* options_json,
                                         const char* profile_out, const char** result_json) {
  return guarded([&] {
    if (result_json) *result_json = nullptr;
    bindings::need(topology, "topology"), bindings::need(profile_out, "profile_out");
    const bindings::FabricOptions o = bindings::parse_fabric_options(options_json);
    const planner::Topology t = planner::load_topology(topology);
    const simulator::Profile base = simulator::choose_profile(o.profile, t, nullptr);
    bindings::need(group, "group");
    std::ofstream out(profile_out);  // opened first: a path that cannot be written is said before 20 s of measuring
    if (!out) throw planner::InputError(std::string("profile_out: cannot write '") + profile_out + "'");
    const int ranks = executor::rank_group_size(*group->group);
    if (t.ranks() != ranks)
      throw planner::InputError("topology: " + std::string(topology) + " has " + std::to_string(t.ranks()) +
                                " GPUs, the group " + std::to_string(ranks));
    const auto start = std::chrono::steady_clock::now();
    const auto m = executor::measure_group_steps(*group->group, executor::fabric_step_sizes(), 2, o.iters, o.per_root,
                                                 o.timeout_s);
    if (!o.csv.empty()) {
      std::ofstream csv(o.csv);
      if (!csv) throw planner::InputError("options.csv: cannot write '" + o.csv + "'");
      executor::write_steps_csv(csv, m);
    }
    std::vector<simulator::CommSample> steps;
    for (const auto& x : m) steps.push_back({x.kind, x.ranks, x.bytes, x.us});
    const simulator::CommRefit r =
        simulator::refit_comm(steps, base, simulator::build_network(t, base.link_efficiency));
    simulator::write_profile_yaml(out, r.profile);
    out.close();
    if (!out) throw std::runtime_error(std::string("profile_out: writing '") + profile_out + "' failed");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    group->fabric_json = nlohmann::json{{"profile", r.profile.name},
                                        {"path", profile_out},
                                        {"steps", m.size()},
                                        {"seconds", seconds},
                                        {"now_over_profile", {{"median", r.median_ratio}, {"min", r.min_ratio}, {"max", r.max_ratio}}}}
                             .dump();
    if (result_json) *result_json = group->fabric_json.c_str();
  });
}

extern "C" int tasp_rank_create(const tasp_plan* plan, tasp_group* group, int timeout_s, tasp_rank** out) {
  return guarded([&] {
    bindings::need(plan, "plan"), bindings::need(out, "out");
    *out = nullptr;
    executor::check_rank_plan(plan->plan, plan->workload, plan->plan.gpus());  // before any device is needed
    bindings::need(group, "group");
    auto h = std::make_unique<tasp_rank>();
    h->group = group->group;
    h->runner = executor::open_rank_runner(plan->plan, plan->workload, *group->group, timeout_s, plan->deterministic,
                                           plan->collectives, plan->root_comms);
    *out = h.release();
  });
}

extern "C" void tasp_rank_destroy(tasp_rank* rank) { delete rank; }

extern "C" int tasp_rank_saved_bytes(const tasp_rank* rank, size_t* bytes) {
  return guarded([&] {
    bindings::need(rank, "rank"), bindings::need(bytes, "bytes");
    *bytes = executor::runner_saved_bytes(*rank->runner);
  });
}

extern "C" int tasp_rank_device_bytes(const tasp_rank* rank, size_t* bytes) {
  return guarded([&] {
    bindings::need(rank, "rank"), bindings::need(bytes, "bytes");
    *bytes = executor::runner_device_bytes(*rank->runner);
  });
}

extern "C" int tasp_rank_documents(tasp_rank* rank, const long long* cu_seqlens, size_t count) {
  return guarded([&] {
    bindings::need(rank, "rank");
    if (count) bindings::need(cu_seqlens, "cu_seqlens");
    const std::vector<long> docs = executor::document_lengths(cu_seqlens, count);
    executor::runner_documents(*rank->runner, docs);
  });
}

extern "C" int tasp_rank_forward(tasp_rank* rank, const void* q, const void* k, const void* v, void* out, float* lse,
                                 void* saved, float softmax_scale, void* stream) {
  return guarded([&] {
    bindings::need(rank, "rank");
    executor::ShardTensors t;
    t.q = q, t.k = k, t.v = v, t.out = out, t.lse = lse, t.saved = saved, t.scale = softmax_scale;
    executor::runner_forward(*rank->runner, t, stream);
  });
}

extern "C" int tasp_rank_backward(tasp_rank* rank, const void* q, const void* k, const void* v, const void* out,
                                  const float* lse, const void* saved, const void* dout, void* dq, void* dk, void* dv,
                                  float softmax_scale, void* stream) {
  return guarded([&] {
    bindings::need(rank, "rank");
    executor::ShardTensors t;
    t.scale = softmax_scale;
    t.q = q, t.k = k, t.v = v, t.out = const_cast<void*>(out), t.lse = const_cast<float*>(lse), t.dout = dout;
    t.saved = const_cast<void*>(saved);
    t.dq = dq, t.dk = dk, t.dv = dv;
    executor::runner_backward(*rank->runner, t, stream);
  });
}

extern "C" int tasp_rank_wait(tasp_rank* rank) {
  return guarded([&] {
    bindings::need(rank, "rank");
    executor::runner_wait(*rank->runner);
  });
}
