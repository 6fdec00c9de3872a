// The workload catalogue as JSON (workload_catalogue.hpp), for the CLI and the C ABI alike.
#include <nlohmann/json.hpp>

#include "planner/workload_catalogue.hpp"

namespace tasp::planner {

std::string workload_catalogue_json() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : workload_catalogue())
    j.push_back({{"name", e.name}, {"group", e.group}, {"workload", to_string(e.w)}, {"B", e.w.B}, {"S", e.w.S},
                 {"H", e.w.H}, {"Hkv", e.w.Hkv}, {"D", e.w.D}, {"causal", e.w.causal}, {"dtype", e.w.dtype},
                 {"window_left", e.w.window_left}, {"window_right", e.w.window_right}, {"note", e.note}});
  return j.dump(1);
}

}  // namespace tasp::planner
