#include "tools/tasp/compare.hpp"

#include <ostream>
#include <sstream>

namespace tasp::cli {

using namespace tasp::planner;

PlanOptions plan_options(const std::string& scheme, const Workload& w) {
  PlanOptions o;
  o.causal = w.causal;
  if (scheme == "ring") o.layout_given = true, o.layout = Layout::Contiguous;
  return o;
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

simulator::Profile choose_profile(const std::string& path, const Topology& t, std::ostream* log) {
  if (!path.empty()) return simulator::load_profile(path);
  std::string chosen;
  simulator::Profile p = simulator::builtin_profile(t.name, &chosen);
  if (log && chosen != t.name)
    *log << "note: no profile for '" << t.name << "': using the built-in " << chosen << " profile (--profile to choose)\n";
  return p;
}

std::vector<SchemeRun> run_schemes(const Topology& t, const Workload& w, const std::vector<std::string>& schemes,
                                   const simulator::Profile& prof, const simulator::SimOptions& opt) {
  std::vector<SchemeRun> runs;
  for (const auto& s : schemes) {
    SchemeRun r;
    r.scheme = s;
    r.plan = build_plan(t, s, plan_options(s, w));
    r.sim = simulator::simulate(r.plan, t, w, prof, opt);
    runs.push_back(std::move(r));
  }
  return runs;
}

size_t fastest(const std::vector<SchemeRun>& runs) {
  size_t best = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].sim.total_us < runs[best].sim.total_us) best = i;
  return best;
}

}  // namespace tasp::cli
