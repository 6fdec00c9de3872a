#pragma once
// Reading and writing tasp-plan/1 as JSON or YAML (the same tree). Writers stream (plans at n = 128
// hold millions of entries); the JSON reader is a SAX reader for the same reason.
#include <functional>
#include <iosfwd>
#include <string>

#include "planner/plan.hpp"

namespace tasp::planner {

// `progress(done, total)` is called as steps are written (big plans take a while).
void write_plan_json(std::ostream& out, const Plan& p, const std::function<void(int, int)>& progress = {});
void write_plan_yaml(std::ostream& out, const Plan& p, const std::function<void(int, int)>& progress = {});
// Throw InputError naming the file and the field (JSON path) at fault.
Plan read_plan_json(std::istream& in, const std::string& name_for_errors);
Plan read_plan_file(const std::string& path);  // .yaml/.yml by extension, JSON otherwise
Plan plan_from_yaml_text(const std::string& text, const std::string& name_for_errors);

}  // namespace tasp::planner
