#pragma once
// Checked reads from a YAML tree: every failure names the file, line, column and field (loaders of
// topologies and machine profiles share it).
#include <yaml-cpp/yaml.h>

#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "planner/topology.hpp"

namespace tasp::planner {

struct YamlCtx {
  std::string file;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& field, const std::string& msg) const {
    std::ostringstream o;
    o << file;
    if (n.IsDefined() && n.Mark().line >= 0) o << ":" << n.Mark().line + 1 << ":" << n.Mark().column + 1;
    o << ": " << field << ": " << msg;
    throw InputError(o.str());
  }
  void only_keys(const YAML::Node& n, const std::string& field, const std::set<std::string>& allowed) const {
    if (!n.IsMap()) fail(n, field, "expected a mapping");
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = it->first.as<std::string>();
      if (!allowed.count(k)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(it->first, field + "." + k, "unknown key (expected one of: " + list + ")");
      }
    }
  }
  std::string str(const YAML::Node& n, const std::string& field) const {
    if (!n.IsDefined()) fail(n, field, "missing");
    if (!n.IsScalar()) fail(n, field, "expected a string");
    return n.as<std::string>();
  }
  double num(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) fail(n, field, "expected a number");
    try {
      return n.as<double>();
    } catch (const YAML::Exception&) {
      fail(n, field, "expected a number, got '" + n.as<std::string>() + "'");
    }
  }
  long integer(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) fail(n, field, "expected an integer");
    try {
      return n.as<long>();
    } catch (const YAML::Exception&) {
      fail(n, field, "expected an integer, got '" + n.as<std::string>() + "'");
    }
  }
  bool boolean(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) fail(n, field, "expected true or false");
    try {
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(n, field, "expected true or false, got '" + n.as<std::string>() + "'");
    }
  }
  std::vector<std::pair<std::string, YAML::Node>> names(const YAML::Node& n, const std::string& field) const {
    std::vector<std::pair<std::string, YAML::Node>> out;
    if (!n.IsDefined()) fail(n, field, "missing");
    if (n.IsSequence()) {
      if (n.size() == 0) fail(n, field, "empty list");
      for (size_t i = 0; i < n.size(); ++i) out.push_back({str(n[i], field + "[" + std::to_string(i) + "]"), n[i]});
    } else {
      out.push_back({str(n, field), n});
    }
    return out;
  }
};

// A document whose tree, aliases followed, has more nodes than its text has bytes repeats parts through
// aliases (*name); nested ones grow exponentially ("billion laughs"). Refused before anything walks it:
// the count stops at the budget, so this costs O(bytes). Nesting is capped too: no tasp format goes deeper
// than a few levels, and an alias inside its own anchor makes a cycle that only the depth cap ends before
// the stack does (found by fuzzing).
inline void check_yaml_expansion(const YAML::Node& root, size_t text_bytes, const std::string& name) {
  const size_t budget = 2 * text_bytes + 1024;
  constexpr int max_depth = 64;
  size_t count = 0;
  std::function<void(const YAML::Node&, int)> walk = [&](const YAML::Node& n, int depth) {
    if (++count > budget)
      throw InputError(name + ": the document expands to more than " + std::to_string(budget) +
                       " nodes through aliases (*name); write the repeated parts out");
    if (depth > max_depth)
      throw InputError(name + ":" + std::to_string(n.Mark().line + 1) + ": nested deeper than " +
                       std::to_string(max_depth) + " levels (or an alias refers to its own anchor)");
    if (n.IsSequence())
      for (const auto& e : n) walk(e, depth + 1);
    else if (n.IsMap())
      for (auto it = n.begin(); it != n.end(); ++it) walk(it->first, depth + 1), walk(it->second, depth + 1);
  };
  walk(root, 0);
}

// Parses `text` (up to 1 GiB) into a tree, turning yaml-cpp's exceptions into InputError with file and line.
inline YAML::Node load_yaml_checked(const std::string& text, const std::string& name_for_errors) {
  if (text.size() > (size_t(1) << 30)) throw InputError(name_for_errors + ": larger than 1 GiB (use JSON for big plans)");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    std::ostringstream o;
    o << name_for_errors << ":" << e.mark.line + 1 << ":" << e.mark.column + 1 << ": (syntax): " << e.msg;
    throw InputError(o.str());
  }
  check_yaml_expansion(root, text.size(), name_for_errors);
  return root;
}

// Parses `text` with `body`, turning yaml-cpp's own exceptions into InputError with file and line.
template <class T>
T parse_yaml_text(const std::string& text, const std::string& name_for_errors,
                  const std::function<T(const YAML::Node&, const YamlCtx&)>& body) {
  YamlCtx cx{name_for_errors};
  const YAML::Node root = load_yaml_checked(text, name_for_errors);
  try {
    return body(root, cx);
  } catch (const YAML::Exception& e) {  // anything the checks did not anticipate
    std::ostringstream o;
    o << name_for_errors << ":" << e.mark.line + 1 << ": " << e.msg;
    throw InputError(o.str());
  }
}

}  // namespace tasp::planner
