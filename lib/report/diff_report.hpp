// `agtrace diff A B`: two runs' memory side by side — the summary figures, bytes by
// category at the end, and saved / new bytes per node — e.g. the same block with and
// without checkpointing. Works on JSON reports (`agtrace run --format json`), so a report
// saved in CI can be compared with a fresh run.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace agtrace {

struct DiffRow {
  std::string key;          // "peak_bytes", "graph_only", "MulBackward0 (2nd)"
  bool in_a = false, in_b = false;
  int64_t a = 0, b = 0;     // bytes (0 when absent)
  int64_t new_a = 0, new_b = 0;  // per node: new bytes
};

struct ReportDiff {
  std::string name_a, name_b;  // scenario names
  std::vector<DiffRow> summary, categories, nodes;
};

// Checks the keys the diff reads and throws InputError("schema") naming `file` and the
// JSON pointer of the first bad value.
void check_diffable_report(const nlohmann::json& report, const std::string& file);

ReportDiff diff_reports(const nlohmann::json& a, const nlohmann::json& b);
std::string diff_text(const ReportDiff& d);
nlohmann::ordered_json diff_json(const ReportDiff& d);

}  // namespace agtrace
