// Readable differences between two JSON reports of the same scenario, for
// `agtrace check --golden`: facts a person recognises ("walk of y: +GeluBackward0",
// "ReluBackward0._saved_result: 32 B -> 64 B", "memory.peak_bytes: 416 -> 832"), then
// any other changed value by JSON pointer. Volatile fields (the version) are ignored.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace agtrace {

std::vector<std::string> report_differences(const nlohmann::json& golden, const nlohmann::json& now);

// The report without volatile fields, as stored in a golden file.
nlohmann::json stable_report(const nlohmann::json& report);

}  // namespace agtrace
