#include <map>

#include "report/report.hpp"

#ifndef AGTRACE_VERSION
#define AGTRACE_VERSION "dev"
#endif

namespace agtrace {

using ojson = nlohmann::ordered_json;

namespace {

ojson saved_json(const SavedSnapshot& s, bool) {
  ojson j;
  j["attr"] = "_saved_" + s.attr;
  if (!s.is_tensor) {
    j["kind"] = "value";
    j["value"] = s.value;
    return j;
  }
  j["kind"] = "tensor";
  if (!s.defined) {
    j["value"] = "None";
    return j;
  }
  j["shape"] = s.shape;
  j["dtype"] = dtype_name(s.dtype);
  j["bytes"] = s.bytes;
  j["storage"] = s.storage_id;
  j["storage_bytes"] = s.storage_bytes;
  j["relation"] = s.is_output ? "new_object_shares_storage" : "same_object";
  if (!s.hooks.empty()) {
    // Under saved-tensor hooks unpack always builds a new object (issue #4).
    j["relation"] = "unpacked_by_hooks";
    j["hooks"] = s.hooks;
    j["packed_bytes"] = s.packed_bytes;
  }
  if (s.from_python_number) j["from_python_number"] = true;
  j["tensor"] = s.tensor_id;
  if (!s.same_object_as.empty()) j["same_object_as"] = s.same_object_as;
  j["shares_storage_with"] = s.shares_with;
  j["saved_version"] = s.saved_version;
  j["saved_at"] = s.saved_at;
  j["released_at"] = s.released ? ojson(s.released_at) : ojson(nullptr);
  j["why"] = s.why;
  return j;
}

}  // namespace

nlohmann::ordered_json report_json(const RunResult& r, bool with_values) {
  ojson j;
  j["format"] = 1;
  j["agtrace_version"] = AGTRACE_VERSION;
  j["scenario"] = r.scenario;
  j["description"] = r.description;
  j["device"] = r.device;

  ojson statements = ojson::array();
  for (const auto& s : r.statements) {
    ojson st{{"index", s.index}, {"source", s.source}, {"status", s.status}};
    if (s.runs > 1) st["runs"] = s.runs;
    if (!s.block.empty()) st["block"] = s.block;
    statements.push_back(st);
  }
  j["statements"] = statements;
  j["printed"] = r.printed;

  ojson walks = ojson::object();
  for (const auto& w : r.walks) {
    ojson names = ojson::array();
    for (int64_t id : w.nodes) {
      auto it = r.nodes.find(id);
      names.push_back(it != r.nodes.end() ? it->second.name : "?");
    }
    walks[w.key] = names;
  }
  j["walks"] = walks;

  ojson errors = ojson::array();
  for (const auto& e : r.errors) {
    ojson err{{"statement", e.statement}, {"phase", e.phase}, {"kind", e.kind}};
    for (auto it = e.facts.begin(); it != e.facts.end(); ++it) err[it.key()] = it.value();
    err["message"] = e.message;
    err["caught"] = e.caught;
    errors.push_back(err);
  }
  j["errors"] = errors;

  ojson grads = ojson::object();
  for (const auto& g : r.grads) {
    ojson gj{{"shape", g.shape}, {"dtype", dtype_name(g.dtype)}};
    if (with_values) gj["values"] = g.values;
    grads[g.name] = gj;
  }
  j["grads"] = grads;

  ojson mem;
  mem["peak_bytes"] = r.memory.peak_bytes;
  mem["saved_bytes"] = r.memory.saved_bytes;
  mem["saved_unique_bytes"] = r.memory.saved_unique_bytes;
  mem["graph_only_bytes"] = r.memory.graph_only_bytes;
  mem["peak_statement"] = r.memory.peak_statement;
  mem["graph_only_statement"] = r.memory.graph_only_statement;
  ojson cats = ojson::object();
  for (const auto& [k, v] : r.memory.categories_at_end) cats[k] = v;
  mem["categories_at_end"] = cats;
  ojson by = ojson::array();
  for (const auto& m : r.memory_by_statement) {
    ojson mj{{"statement", m.index},
             {"live_after", m.live_after},
             {"peak_inside", m.peak_inside},
             {"temporary_bytes", m.temporary_bytes}};
    ojson c = ojson::object();
    for (const auto& [k, v] : m.categories) c[k] = v;
    mj["categories"] = c;
    by.push_back(mj);
  }
  mem["by_statement"] = by;
  j["memory"] = mem;

  ojson leaves = ojson::array();
  for (const auto& l : r.leaves) {
    ojson lj{{"name", l.name}, {"shape", l.shape}, {"dtype", dtype_name(l.dtype)},
             {"requires_grad", l.requires_grad}, {"bytes", l.bytes}};
    if (with_values) lj["values"] = l.values;
    leaves.push_back(lj);
  }
  j["leaves"] = leaves;

  ojson nodes = ojson::array();
  for (const auto& [id, n] : r.nodes) {
    ojson nj{{"id", n.id}, {"name", n.name}, {"created_at", n.created_at}};
    ojson next = ojson::array();
    for (size_t i = 0; i < n.next.size(); ++i)
      next.push_back(n.next[i] < 0 ? ojson(nullptr) : ojson{{"node", n.next[i]}, {"input_nr", n.next_input_nr[i]}});
    nj["next_functions"] = next;
    if (!n.variable.empty()) nj["variable"] = n.variable;
    if (!n.wraps.empty()) nj["wraps"] = n.wraps;
    ojson saved = ojson::array();
    for (const auto& s : n.saved) saved.push_back(saved_json(s, with_values));
    nj["saved"] = saved;
    nj["saved_bytes"] = n.saved_bytes;
    nj["released_at"] = n.released ? ojson(n.released_at) : ojson(nullptr);
    nodes.push_back(nj);
  }
  j["nodes"] = nodes;
  ojson walk_ids = ojson::object();
  for (const auto& w : r.walks) walk_ids[w.key] = {{"captured_at", w.statement}, {"nodes", w.nodes}};
  j["walk_nodes"] = walk_ids;

  ojson storages = ojson::array();
  for (const auto& s : r.storages) {
    storages.push_back({{"id", s.id},
                        {"bytes", s.bytes},
                        {"allocated_at", s.allocated_at},
                        {"allocated_by", s.allocated_by},
                        {"in_backward", s.in_backward},
                        {"freed_at", s.freed ? ojson(s.freed_at) : ojson(nullptr)},
                        {"holders", s.holders}});
  }
  ojson saved = ojson::array();
  for (const auto& s : r.saved) {
    saved.push_back({{"id", s.id},
                     {"node", s.node_id},
                     {"what", s.what},
                     {"bytes", s.bytes},
                     {"storage", s.storage_id},
                     {"saved_at", s.saved_at},
                     {"released_at", s.released_at < 0 ? ojson(nullptr) : ojson(s.released_at)}});
  }
  j["lifetimes"] = {{"storages", storages}, {"saved", saved}};
  add_events_json(j, r);  // issue #4: events timeline, hooks, checkpoints
  j["accountant"] = report_account_json(r);  // issue #4: model, peak, per node, why, what-if

  if (!r.expect.empty()) {
    ojson checks = ojson::array();
    for (const auto& f : check_expect(r))
      checks.push_back({{"fact", f.fact}, {"expected", f.expected}, {"actual", f.actual}});
    j["expect"] = {{"passed", checks.empty()}, {"failures", checks}};
  }
  j["raised"] = r.raised;
  return j;
}

}  // namespace agtrace
