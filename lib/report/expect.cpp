// `expect` assertions (spec "expect: assertions for CI"): each fact written in the
// scenario is compared with what happened; anything not written is not checked.
#include "account/korthikanti.hpp"
#include "report/report.hpp"

namespace agtrace {

namespace {

std::string list_str(const std::vector<std::string>& v) {
  return nlohmann::json(v).dump();
}

std::vector<std::string> walk_names(const RunResult& r, const std::string& key, bool& found) {
  std::vector<std::string> out;
  found = false;
  for (const auto& w : r.walks) {
    if (w.key != key) continue;
    found = true;
    for (int64_t id : w.nodes) {
      auto it = r.nodes.find(id);
      out.push_back(it != r.nodes.end() ? it->second.name : "?");
    }
  }
  return out;
}

int64_t memory_fact(const RunResult& r, const std::string& key) {
  if (key == "peak_bytes") return r.memory.peak_bytes;
  if (key == "saved_bytes") return r.memory.saved_bytes;
  if (key == "saved_unique_bytes") return r.memory.saved_unique_bytes;
  return r.memory.graph_only_bytes;
}

nlohmann::json error_json(const ErrorRecord& e) {
  nlohmann::json j = e.facts;
  j["statement"] = e.statement;
  j["phase"] = e.phase;
  j["kind"] = e.kind;
  return j;
}

}  // namespace

bool walk_matches(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  // can[j]: expected[0, i) matches actual[0, j), row by row over i.
  std::vector<bool> can(actual.size() + 1, false);
  can[0] = true;
  for (const std::string& e : expected) {
    std::vector<bool> next(actual.size() + 1, false);
    if (e == "...") {
      bool reachable = false;
      for (size_t j = 0; j <= actual.size(); ++j) next[j] = reachable = reachable || can[j];
    } else {
      for (size_t j = 1; j <= actual.size(); ++j) next[j] = can[j - 1] && actual[j - 1] == e;
    }
    can.swap(next);
  }
  return can[actual.size()];
}

std::vector<CheckFailure> check_raised(const RunResult& r) {
  std::vector<CheckFailure> out;
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& named = r.expect.contains("errors") ? r.expect["errors"] : none;
  for (const ErrorRecord& e : r.errors) {
    if (e.caught) continue;
    const std::string what = e.kind + " at statement " + std::to_string(e.statement) + ": " + e.message;
    if (e.kind == "unsupported") {
      out.push_back({"raised outside try", "no unsupported operation", what});
      continue;
    }
    bool expected = false;
    for (const auto& n : named)
      expected = expected || (n.value("statement", -2) == e.statement && n.value("kind", std::string()) == e.kind);
    if (!expected) out.push_back({"raised outside try", "no error, or one expect.errors names", what});
  }
  return out;
}

std::vector<CheckFailure> check_expect(const RunResult& r) {
  std::vector<CheckFailure> out;
  const nlohmann::json& ex = r.expect;
  if (ex.contains("walk")) {
    for (auto it = ex["walk"].begin(); it != ex["walk"].end(); ++it) {
      bool found = false;
      std::vector<std::string> actual = walk_names(r, it.key(), found);
      std::vector<std::string> expected = it.value().get<std::vector<std::string>>();
      if (!found) out.push_back({"walk of " + it.key(), list_str(expected), "no walk"});
      else if (!walk_matches(expected, actual)) out.push_back({"walk of " + it.key(), list_str(expected), list_str(actual)});
    }
  }
  if (ex.contains("printed")) {
    std::vector<std::string> expected = ex["printed"].get<std::vector<std::string>>();
    if (expected != r.printed) out.push_back({"printed", list_str(expected), list_str(r.printed)});
  }
  if (ex.contains("errors")) {
    const auto& expected = ex["errors"];
    if (expected.size() != r.errors.size())
      out.push_back({"errors (count)", std::to_string(expected.size()), std::to_string(r.errors.size())});
    for (size_t i = 0; i < expected.size() && i < r.errors.size(); ++i) {
      nlohmann::json actual = error_json(r.errors[i]);
      for (auto it = expected[i].begin(); it != expected[i].end(); ++it) {
        const std::string fact = "errors[" + std::to_string(i) + "]." + it.key();
        if (!actual.contains(it.key())) out.push_back({fact, it.value().dump(), "absent"});
        else if (actual[it.key()] != it.value()) out.push_back({fact, it.value().dump(), actual[it.key()].dump()});
      }
    }
  }
  if (ex.contains("memory")) {
    for (auto it = ex["memory"].begin(); it != ex["memory"].end(); ++it) {
      const int64_t actual = memory_fact(r, it.key());
      const std::string fact = "memory." + it.key();
      const auto& v = it.value();
      if (v.is_number_integer()) {
        if (actual != v.get<int64_t>()) out.push_back({fact, v.dump(), std::to_string(actual)});
      } else {
        if (v.contains("max") && actual > v["max"].get<int64_t>())
          out.push_back({fact, "<= " + v["max"].dump(), std::to_string(actual)});
        if (v.contains("min") && actual < v["min"].get<int64_t>())
          out.push_back({fact, ">= " + v["min"].dump(), std::to_string(actual)});
      }
    }
  }
  // Extension (issue #4): every byte of the Korthikanti reconciliation is explained.
  KorthikantiShape ks;
  if (korthikanti_requested(r, ks)) {
    const KorthikantiReport k = reconcile_korthikanti(r, ks);
    if (k.unexplained_bytes != 0)
      out.push_back({"korthikanti.unexplained_bytes", "0", std::to_string(k.unexplained_bytes)});
  }
  return out;
}

}  // namespace agtrace
