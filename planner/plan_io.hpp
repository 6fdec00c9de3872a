#pragma once
// Reading and writing tasp-plan/1 as JSON or YAML (the same tree). Writers stream (plans at n = 128
// hold millions of entries); the JSON reader is a SAX reader for the same reason.
#include <iosfwd>
#include <string>

#include "planner/plan.hpp"

namespace tasp::planner {

void write_plan_json(std::ostream& out, const Plan& p);
void write_plan_yaml(std::ostream& out, const Plan& p);
// Throw InputError naming the file and the field (JSON path) at fault.
Plan read_plan_json(std::istream& in, const std::string& name_for_errors);
Plan read_plan_file(const std::string& path);  // .yaml/.yml by extension, JSON otherwise

}  // namespace tasp::planner
