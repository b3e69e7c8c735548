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

// A scenario with element values kept, on `device` with the run's backend (null: none), for
// the device tests; and the same from JSON text.
inline RunResult run_on_device(const Scenario& sc, const std::string& device, DeviceBackend* backend) {
  RunOptions o;
  o.keep_values = true;
  o.device = device;
  o.device_backend = backend;
  return run_scenario(sc, o);
}
inline RunResult run_text_on(const std::string& json, const std::string& device, DeviceBackend* backend) {
  return run_on_device(*load_scenario_text(json, "<test>"), device, backend);
}

}  // namespace agtrace::test
