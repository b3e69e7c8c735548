// libFuzzer harness: the readers of `agtrace diff` and `agtrace check --golden`, fed any
// bytes as a JSON report. Parsing is bounded (size, nesting); a report that is not one is
// an InputError (diff) or a nlohmann::json::exception that check turns into one (golden);
// nothing else may escape, and nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/diff_report.hpp"
#include "report/golden_diff.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"

using namespace agtrace;

namespace {

// A real report to compare the input against, made once.
const nlohmann::json& reference_report() {
  static const nlohmann::json report = [] {
    auto sc = load_scenario_text(
        R"JSON({"name": "ref", "tensors": {"x": {"shape": [2, 3], "requires_grad": true}},
            "program": ["y = (x * x).relu().sum()", "y.backward()", "print(x.grad.shape)"]})JSON",
        "reference.json");
    return nlohmann::json::parse(report_json(run_scenario(*sc, RunOptions{}), true).dump());
  }();
  return report;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json& ref = reference_report();
  nlohmann::json j;
  try {
    j = nlohmann::json(parse_json_bounded(text, "fuzz.json"));
  } catch (const InputError& e) {
    if (e.kind.empty()) __builtin_trap();
    return 0;
  }
  // The golden reader: check --golden refuses a non-object first, then reports a report of
  // the wrong shape through the json exception it catches.
  if (j.is_object()) {
    try {
      (void)report_differences(j, ref);
      (void)report_differences(ref, j);
    } catch (const nlohmann::json::exception&) {
    }
  }
  // The diff reader: a report must pass check_diffable_report before it is compared.
  try {
    check_diffable_report(j, "fuzz.json");
    (void)diff_text(diff_reports(j, ref));
    (void)diff_json(diff_reports(ref, j)).dump();
  } catch (const InputError& e) {
    if (e.kind.empty()) __builtin_trap();
  }
  return 0;
}
