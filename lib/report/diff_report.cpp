#include "report/diff_report.hpp"

#include <map>
#include <sstream>

#include "errors.hpp"
#include "report/report.hpp"

namespace agtrace {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& ptr, const std::string& what) {
  InputError e("schema", what);
  e.file = file;
  e.json_pointer = ptr;
  throw e;
}

const json& need(const json& obj, const std::string& key, const std::string& ptr, const std::string& file,
                 json::value_t type) {
  if (!obj.contains(key)) bad(file, ptr, "missing key '" + key + "' (not an agtrace report?)");
  const json& v = obj.at(key);
  const bool ok = type == json::value_t::number_integer ? v.is_number_integer()
                  : type == json::value_t::object       ? v.is_object()
                  : type == json::value_t::array        ? v.is_array()
                                                        : v.is_string();
  if (!ok) {
    const char* want = type == json::value_t::number_integer ? "an integer"
                       : type == json::value_t::object       ? "an object"
                       : type == json::value_t::array        ? "an array"
                                                             : "a string";
    bad(file, ptr + "/" + key, std::string("expected ") + want + ", found " + v.type_name());
  }
  return v;
}

const char* kSummary[] = {"peak_bytes", "saved_bytes", "saved_unique_bytes", "graph_only_bytes"};

std::string ordinal(int n) {
  const int m = n % 100;
  const char* suffix = (m >= 11 && m <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// Nodes are matched by name and occurrence: the k-th MulBackward0 of A with the k-th of B.
std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> node_rows(const json& report) {
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> out;
  if (!report.contains("accountant")) return out;
  std::map<std::string, int> seen;
  for (const auto& n : report["accountant"]["nodes"]) {
    const std::string name = n["name"].get<std::string>();
    const int k = ++seen[name];
    out.push_back({k == 1 ? name : name + " (" + ordinal(k) + ")",
                   {n["saved_bytes"].get<int64_t>(), n["new_bytes"].get<int64_t>()}});
  }
  return out;
}

void merge(std::vector<DiffRow>& rows, const std::string& key, bool is_a, int64_t v, int64_t nv = 0) {
  for (auto& r : rows)
    if (r.key == key) {
      (is_a ? r.in_a : r.in_b) = true;
      (is_a ? r.a : r.b) = v;
      (is_a ? r.new_a : r.new_b) = nv;
      return;
    }
  DiffRow r;
  r.key = key;
  (is_a ? r.in_a : r.in_b) = true;
  (is_a ? r.a : r.b) = v;
  (is_a ? r.new_a : r.new_b) = nv;
  rows.push_back(r);
}

std::string delta(int64_t a, int64_t b) {
  const int64_t d = b - a;
  std::string s = d > 0 ? "+" + std::to_string(d) : std::to_string(d);
  if (a != 0 && d != 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%+.1f%%)", 100.0 * static_cast<double>(d) / static_cast<double>(a));
    s += buf;
  }
  return s;
}

std::string cell(bool present, int64_t v) { return present ? std::to_string(v) : "-"; }
std::string padr(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string padl(const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

}  // namespace

void check_diffable_report(const json& report, const std::string& file) {
  if (!report.is_object()) bad(file, "", std::string("expected a report object, found ") + report.type_name());
  need(report, "scenario", "", file, json::value_t::string);
  const json& mem = need(report, "memory", "", file, json::value_t::object);
  for (const char* k : kSummary) need(mem, k, "/memory", file, json::value_t::number_integer);
  if (mem.contains("categories_at_end")) {
    const json& c = need(mem, "categories_at_end", "/memory", file, json::value_t::object);
    for (auto it = c.begin(); it != c.end(); ++it)
      if (!it.value().is_number_integer()) bad(file, "/memory/categories_at_end/" + it.key(), "expected an integer");
  }
  if (report.contains("accountant")) {
    const json& acc = need(report, "accountant", "", file, json::value_t::object);
    const json& nodes = need(acc, "nodes", "/accountant", file, json::value_t::array);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string p = "/accountant/nodes/" + std::to_string(i);
      if (!nodes[i].is_object()) bad(file, p, "expected an object");
      need(nodes[i], "name", p, file, json::value_t::string);
      need(nodes[i], "saved_bytes", p, file, json::value_t::number_integer);
      need(nodes[i], "new_bytes", p, file, json::value_t::number_integer);
    }
    need(acc, "new_bytes", "/accountant", file, json::value_t::number_integer);
  }
}

ReportDiff diff_reports(const json& a, const json& b) {
  ReportDiff d;
  d.name_a = a["scenario"].get<std::string>();
  d.name_b = b["scenario"].get<std::string>();
  for (int side = 0; side < 2; ++side) {
    const json& r = side == 0 ? a : b;
    const bool is_a = side == 0;
    for (const char* k : kSummary) merge(d.summary, k, is_a, r["memory"][k].get<int64_t>());
    if (r.contains("accountant")) {
      merge(d.summary, "new_bytes", is_a, r["accountant"]["new_bytes"].get<int64_t>());
      if (r["accountant"].contains("model") && r["accountant"]["model"].contains("peak_bytes"))
        merge(d.summary, "model peak_bytes", is_a, r["accountant"]["model"]["peak_bytes"].get<int64_t>());
    }
    if (r["memory"].contains("categories_at_end"))
      for (auto it = r["memory"]["categories_at_end"].begin(); it != r["memory"]["categories_at_end"].end(); ++it)
        merge(d.categories, it.key(), is_a, it.value().get<int64_t>());
    for (const auto& [key, v] : node_rows(r)) merge(d.nodes, key, is_a, v.first, v.second);
  }
  return d;
}

std::string diff_text(const ReportDiff& d) {
  std::ostringstream o;
  o << "agtrace diff — A: " << d.name_a << "   B: " << d.name_b << "   (bytes; delta = B - A)\n";
  auto table = [&](const std::string& title, const std::vector<DiffRow>& rows, bool with_new) {
    if (rows.empty()) return;
    o << "\n" << title << "\n";
    o << "  " << padr("", 34) << padl("A", 14) << padl("B", 14) << "  delta";
    if (with_new) o << "          new A / new B";
    o << "\n";
    for (const auto& r : rows) {
      o << "  " << padr(r.key, 34) << padl(cell(r.in_a, r.a), 14) << padl(cell(r.in_b, r.b), 14) << "  ";
      if (with_new) o << padr(delta(r.a, r.b), 15) << "  " << cell(r.in_a, r.new_a) << " / " << cell(r.in_b, r.new_b);
      else o << delta(r.a, r.b);
      o << "\n";
    }
  };
  table("Memory", d.summary, false);
  table("By category at the end", d.categories, false);
  table("Saved bytes by node (k-th node of a name matched with the k-th)", d.nodes, true);
  return o.str();
}

nlohmann::ordered_json diff_json(const ReportDiff& d) {
  auto rows = [](const std::vector<DiffRow>& rs, bool with_new) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : rs) {
      nlohmann::ordered_json j{{"key", r.key},
                               {"a", r.in_a ? nlohmann::ordered_json(r.a) : nlohmann::ordered_json(nullptr)},
                               {"b", r.in_b ? nlohmann::ordered_json(r.b) : nlohmann::ordered_json(nullptr)},
                               {"delta", r.b - r.a}};
      if (with_new) {
        j["new_a"] = r.in_a ? nlohmann::ordered_json(r.new_a) : nlohmann::ordered_json(nullptr);
        j["new_b"] = r.in_b ? nlohmann::ordered_json(r.new_b) : nlohmann::ordered_json(nullptr);
      }
      arr.push_back(j);
    }
    return arr;
  };
  return {{"a", d.name_a}, {"b", d.name_b}, {"memory", rows(d.summary, false)},
          {"categories", rows(d.categories, false)}, {"nodes", rows(d.nodes, true)}};
}

}  // namespace agtrace
