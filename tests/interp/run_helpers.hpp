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

// ---- misc: the same with element values kept, on `device` with the run's backend (null:
// none), for the device tests.
inline RunResult run_text_on(const std::string& json, const std::string& device, DeviceBackend* backend) {
  auto sc = load_scenario_text(json, "<test>");
  RunOptions o;
  o.keep_values = true;
  o.device = device;
  o.device_backend = backend;
  return run_scenario(*sc, o);
}

}  // namespace agtrace::test
