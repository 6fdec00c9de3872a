#pragma once
// Bad input refused with a planner::InputError that names what is wrong: each case's text given to `load` must throw
// one whose message holds the case's words (and `also`, when given: the name of the file it came from). The loaders'
// tests share it (timelines, runs and samples CSVs, profiles).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "planner/topology.hpp"

namespace tasp::test_support {

template <class Load>
void expect_input_errors(Load load, const std::vector<std::pair<std::string, std::string>>& cases,
                         const std::string& also = "") {
  for (const auto& [text, words] : cases) {
    try {
      load(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const planner::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      if (!also.empty()) {
        EXPECT_NE(std::string(e.what()).find(also), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace tasp::test_support
