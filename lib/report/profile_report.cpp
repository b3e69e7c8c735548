// The `--profile` section of the report: wall time per op kind (forward ops, backward
// nodes) and per statement (forward, backward), in JSON and text. Times vary from run to
// run, so goldens never include this section; tests check its structure and call counts.
#include <cstdio>
#include <map>

#include "report/report.hpp"

namespace agtrace {

namespace {

using ojson = nlohmann::ordered_json;
using profile::Row;
using profile::Section;

ojson timing(const Row& r) {
  ojson j;
  j["calls"] = r.calls;
  j["total_seconds"] = r.total_s;
  j["self_seconds"] = r.self_s;
  j["average_seconds"] = r.calls ? r.total_s / static_cast<double>(r.calls) : 0.0;
  return j;
}

// "1.23 ms", "850 ns": four significant figures at most, as profilers print.
std::string human_time(double s) {
  char buf[32];
  if (s >= 1.0) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else if (s >= 1e-6) std::snprintf(buf, sizeof buf, "%.3f us", s * 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f ns", s * 1e9);
  return buf;
}

std::string row_line(const std::string& label, int64_t calls, double total, double self) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-34s %8lld %12s %12s %12s\n", label.c_str(), static_cast<long long>(calls),
                human_time(total).c_str(), human_time(self).c_str(),
                human_time(calls ? total / static_cast<double>(calls) : 0.0).c_str());
  return buf;
}

}  // namespace

nlohmann::ordered_json report_profile_json(const RunResult& r, const std::vector<profile::Row>& rows, double total_s) {
  ojson p;
  p["total_seconds"] = total_s;
  p["ops"] = ojson::array();
  std::map<int, ojson> statements;
  for (const Row& row : rows) {
    if (row.section == Section::OpForward || row.section == Section::OpBackward) {
      ojson j;
      j["phase"] = row.section == Section::OpForward ? "forward" : "backward";
      j["name"] = row.name;
      j.update(timing(row));
      p["ops"].push_back(j);
      continue;
    }
    ojson& s = statements[row.statement];
    if (s.is_null()) {
      s["index"] = row.statement;
      s["source"] = row.statement >= 0 && row.statement < static_cast<int>(r.statements.size())
                        ? r.statements[static_cast<size_t>(row.statement)].source
                        : "";
      s["forward"] = nullptr;
      s["backward"] = nullptr;
    }
    s[row.section == Section::StatementForward ? "forward" : "backward"] = timing(row);
  }
  p["statements"] = ojson::array();
  for (auto& [index, s] : statements) p["statements"].push_back(std::move(s));
  return p;
}

std::string report_profile_text(const RunResult& r, const std::vector<profile::Row>& rows, double total_s) {
  std::string out = "\nProfile (wall time, " + human_time(total_s) + " in all; self = total less the rows inside)\n";
  char head[256];
  std::snprintf(head, sizeof head, "  %-34s %8s %12s %12s %12s\n", "", "calls", "total", "self", "average");
  struct Part {
    Section section;
    const char* title;
  } parts[] = {{Section::OpForward, "forward ops"},
               {Section::OpBackward, "backward nodes"},
               {Section::StatementForward, "statements, forward"},
               {Section::StatementBackward, "statements, backward"}};
  for (const Part& part : parts) {
    bool any = false;
    for (const Row& row : rows) {
      if (row.section != part.section) continue;
      if (!any) {
        out += std::string(part.title) + "\n" + head;
        any = true;
      }
      std::string label = row.name;
      if (row.statement >= 0 && row.statement < static_cast<int>(r.statements.size())) {
        label = "[" + std::to_string(row.statement) + "] " + r.statements[static_cast<size_t>(row.statement)].source;
        if (label.size() > 34) label = label.substr(0, 31) + "...";
      }
      out += row_line(label, row.calls, row.total_s, row.self_s);
    }
  }
  return out;
}

}  // namespace agtrace
