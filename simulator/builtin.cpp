#include <algorithm>

#include "simulator/profile.hpp"

namespace tasp::simulator {

const std::vector<std::pair<std::string, std::string>>& builtin_profile_table();  // generated

namespace {
std::string stem(const std::string& file) { return file.substr(0, file.size() - std::string(".profile.yaml").size()); }
}  // namespace

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> out;
  for (const auto& [file, text] : builtin_profile_table()) out.push_back(stem(file));
  return out;
}

std::string builtin_profile_text(const std::string& name) {
  for (const auto& [file, text] : builtin_profile_table())
    if (stem(file) == name) return text;
  return {};
}

Profile builtin_profile(const std::string& topology_name, std::string* chosen) {
  std::string name = builtin_profile_text(topology_name).empty() ? "h200-hgx-8" : topology_name;
  if (chosen) *chosen = name;
  return profile_from_yaml_text(builtin_profile_text(name), "(built-in) " + name + ".profile.yaml");
}

}  // namespace tasp::simulator
