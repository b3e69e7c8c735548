#include "report/golden_diff.hpp"

#include <map>
#include <set>

namespace agtrace {

namespace {

using json = nlohmann::json;

std::string list_text(const json& a) {
  std::string out;
  for (const auto& x : a) out += (out.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
  return "[" + out + "]";
}

// Multiset difference of two name lists: "+GeluBackward0 -ReluBackward0".
std::string name_delta(const json& before, const json& after) {
  std::map<std::string, int> count;
  for (const auto& x : before) count[x.dump()]--;
  for (const auto& x : after) count[x.dump()]++;
  std::string out;
  for (const auto& [k, c] : count) {
    std::string name = json::parse(k).is_string() ? json::parse(k).get<std::string>() : k;
    for (int i = 0; i < c; ++i) out += " +" + name;
    for (int i = 0; i < -c; ++i) out += " -" + name;
  }
  return out.empty() ? " (same nodes, other order)" : out;
}

// Saved tensors keyed by "Node._saved_attr" (with a #n suffix for repeats, in node order).
std::map<std::string, int64_t> saved_bytes_by_attr(const json& report) {
  std::map<std::string, int64_t> out;
  std::map<std::string, int> seen;
  if (!report.contains("nodes")) return out;
  for (const auto& n : report["nodes"]) {
    for (const auto& s : n.value("saved", json::array())) {
      if (s.value("kind", "") != "tensor" || !s.contains("bytes")) continue;
      std::string key = n.value("name", "?") + "." + s.value("attr", "?");
      int k = ++seen[key];
      if (k > 1) key += " #" + std::to_string(k);
      out[key] = s["bytes"].get<int64_t>();
    }
  }
  return out;
}

std::string bytes(int64_t b) { return std::to_string(b) + " B"; }

void flat_diff(const json& a, const json& b, const std::string& path, std::vector<std::string>& out) {
  if (out.size() > 40) return;
  if (a.type() != b.type()) {
    out.push_back(path + ": " + a.dump() + " -> " + b.dump());
    return;
  }
  if (a.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      if (!a.contains(k)) out.push_back(path + "/" + k + ": added " + b[k].dump().substr(0, 80));
      else if (!b.contains(k)) out.push_back(path + "/" + k + ": removed");
      else flat_diff(a[k], b[k], path + "/" + k, out);
    }
  } else if (a.is_array()) {
    if (a.size() != b.size()) {
      out.push_back(path + ": " + std::to_string(a.size()) + " entries -> " + std::to_string(b.size()));
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) flat_diff(a[i], b[i], path + "/" + std::to_string(i), out);
  } else if (a != b) {
    out.push_back(path + ": " + a.dump() + " -> " + b.dump());
  }
}

}  // namespace

json stable_report(const json& report) {
  json r = report;
  r.erase("agtrace_version");
  return r;
}

std::vector<std::string> report_differences(const json& golden_in, const json& now_in) {
  const json golden = stable_report(golden_in), now = stable_report(now_in);
  std::vector<std::string> out;
  // Walks.
  const json gw = golden.value("walks", json::object()), nw = now.value("walks", json::object());
  for (auto it = gw.begin(); it != gw.end(); ++it) {
    if (!nw.contains(it.key())) out.push_back("walk of " + it.key() + ": gone");
    else if (nw[it.key()] != it.value())
      out.push_back("walk of " + it.key() + ":" + name_delta(it.value(), nw[it.key()]) + "  (now " +
                    list_text(nw[it.key()]) + ")");
  }
  for (auto it = nw.begin(); it != nw.end(); ++it)
    if (!gw.contains(it.key())) out.push_back("walk of " + it.key() + ": new " + list_text(it.value()));
  // Saved tensors.
  auto gs = saved_bytes_by_attr(golden), ns = saved_bytes_by_attr(now);
  for (const auto& [k, v] : gs) {
    auto it = ns.find(k);
    if (it == ns.end()) out.push_back(k + ": no longer saved (" + bytes(v) + ")");
    else if (it->second != v) out.push_back(k + ": " + bytes(v) + " -> " + bytes(it->second));
  }
  for (const auto& [k, v] : ns)
    if (!gs.count(k)) out.push_back(k + ": newly saved (" + bytes(v) + ")");
  // Memory totals.
  for (const char* key : {"peak_bytes", "saved_bytes", "saved_unique_bytes", "graph_only_bytes"}) {
    const json g = golden.value("memory", json::object()).value(key, json()), n = now.value("memory", json::object()).value(key, json());
    if (g != n) out.push_back(std::string("memory.") + key + ": " + g.dump() + " -> " + n.dump());
  }
  // Printed lines, statuses, errors.
  if (golden.value("printed", json::array()) != now.value("printed", json::array()))
    out.push_back("printed: " + golden.value("printed", json::array()).dump() + " -> " + now.value("printed", json::array()).dump());
  const json gst = golden.value("statements", json::array()), nst = now.value("statements", json::array());
  for (size_t i = 0; i < gst.size() && i < nst.size(); ++i)
    if (gst[i].value("status", "") != nst[i].value("status", ""))
      out.push_back("statement " + std::to_string(i) + " (" + nst[i].value("source", "") + "): " +
                    gst[i].value("status", "") + " -> " + nst[i].value("status", ""));
  const json ge = golden.value("errors", json::array()), ne = now.value("errors", json::array());
  if (ge.size() != ne.size()) out.push_back("errors: " + std::to_string(ge.size()) + " -> " + std::to_string(ne.size()));
  for (size_t i = 0; i < ge.size() && i < ne.size(); ++i)
    if (ge[i].value("kind", "") != ne[i].value("kind", ""))
      out.push_back("errors[" + std::to_string(i) + "].kind: " + ge[i].value("kind", "") + " -> " + ne[i].value("kind", ""));
  // Anything else, by JSON pointer, when nothing above explained the change.
  if (out.empty() && golden != now) flat_diff(golden, now, "", out);
  return out;
}

}  // namespace agtrace
