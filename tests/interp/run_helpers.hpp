// Runs a scenario given as JSON text (for interpreter, accountant and report tests).
#pragma once
#include <string>

#include "interp/interpreter.hpp"
#include "scenario/scenario.hpp"

namespace agtrace::test {

inline RunResult run_text(const std::string& json, bool values = false, const std::string& device = "") {
  auto sc = load_scenario_text(json, "<test>");
  RunOptions o;
  o.keep_values = values;
  o.device = device;
  return run_scenario(*sc, o);
}

}  // namespace agtrace::test
