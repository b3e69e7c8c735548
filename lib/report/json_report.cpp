#include <cmath>
#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "report/json_text.hpp"
#include "account/analysis.hpp"
#include "report/report.hpp"

#ifndef AGTRACE_VERSION
#define AGTRACE_VERSION "dev"
#endif

namespace agtrace {

using ojson = nlohmann::ordered_json;

namespace {

// Element values for JSON, which has no infinities or NaN: those are the strings "inf",
// "-inf" and "nan" (the scenario format's rule, everywhere in the report).
ojson values_json(const std::vector<double>& values) {
  ojson out = ojson::array();
  for (double v : values) {
    if (std::isnan(v)) out.push_back("nan");
    else if (std::isinf(v)) out.push_back(v > 0 ? "inf" : "-inf");
    else out.push_back(v);
  }
  return out;
}

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
  j["shares_storage_with"] = s.shares_with.items();
  j["saved_version"] = s.saved_version;
  j["saved_at"] = s.saved_at;
  j["released_at"] = s.released ? ojson(s.released_at) : ojson(nullptr);
  j["why"] = s.why;
  return j;
}

}  // namespace

namespace {
ojson build_report(const RunResult& r, bool with_values, bool streamed, const MemoryAnalysis* analysis);

// The arrays dump_report_json writes element by element, each with its placeholder.
const char* const kNodesPlaceholder = "\x01agtrace: nodes\x01";
const char* const kStoragesPlaceholder = "\x01agtrace: storages\x01";
const char* const kSavedPlaceholder = "\x01agtrace: saved\x01";
const char* const kByStatementPlaceholder = "\x01agtrace: by_statement\x01";
// Walk i's node names ("walks") and node ids ("walk_nodes"): one node per element, so a long
// program's walks were most of the skeleton that nlohmann built and dumped (callgrind, a
// 2,000-op chain: 19 of the report's 52 million instructions).
std::string walk_names_placeholder(size_t i) { return "\x01agtrace: walk names " + std::to_string(i) + "\x01"; }
std::string walk_ids_placeholder(size_t i) { return "\x01agtrace: walk nodes " + std::to_string(i) + "\x01"; }
const std::string& walk_node_name(const RunResult& r, int64_t id) {
  static const std::string unknown = "?";
  auto it = r.nodes.find(id);
  return it != r.nodes.end() ? it->second.name.str() : unknown;
}

ojson node_json(const NodeSnapshot& n, bool with_values) {
  ojson nj{{"id", n.id}, {"name", n.name}, {"created_at", n.created_at}};
  ojson next = ojson::array();
  for (size_t i = 0; i < n.next.size(); ++i)
    next.push_back(n.next[i].node < 0 ? ojson(nullptr) : ojson{{"node", n.next[i].node}, {"input_nr", n.next[i].input_nr}});
  nj["next_functions"] = next;
  if (!n.variable.empty()) nj["variable"] = n.variable;
  if (!n.wraps.empty()) nj["wraps"] = n.wraps;
  ojson saved = ojson::array();
  for (const auto& s : n.saved) saved.push_back(saved_json(s, with_values));
  nj["saved"] = saved;
  nj["saved_bytes"] = n.saved_bytes;
  nj["released_at"] = n.released ? ojson(n.released_at) : ojson(nullptr);
  return nj;
}
ojson storage_json(const StorageLifetime& s) {
  return {{"id", s.id},
          {"bytes", s.bytes},
          {"allocated_at", s.allocated_at},
          {"allocated_by", s.allocated_by},
          {"in_backward", s.in_backward},
          {"freed_at", s.freed ? ojson(s.freed_at) : ojson(nullptr)},
          {"holders", s.holders.items()}};
}
ojson saved_lifetime_json(const SavedLifetime& s) {
  return {{"id", s.id},
          {"node", s.node_id},
          {"what", s.what},
          {"bytes", s.bytes},
          {"storage", s.storage_id},
          {"saved_at", s.saved_at},
          {"released_at", s.released_at < 0 ? ojson(nullptr) : ojson(s.released_at)}};
}
ojson statement_memory_json(const StatementMemory& m) {
  ojson mj{{"statement", m.index},
           {"live_after", m.live_after},
           {"peak_inside", m.peak_inside},
           {"temporary_bytes", m.temporary_bytes}};
  ojson c = ojson::object();
  for (const auto& [k, v] : m.categories) c[k] = v;
  mj["categories"] = c;
  return mj;
}

// The same records as text, without a json value (report/json_text.hpp; the test of
// dump_report_json checks them against the functions above through whole reports).
void write_storage_json(json_text::Writer& out, const json_text::Layout& layout, const StorageLifetime& s) {
  json_text::Object o(out, layout);
  o.field("id", s.id).field("bytes", s.bytes).field("allocated_at", s.allocated_at);
  o.field("allocated_by", s.allocated_by.str()).field("in_backward", s.in_backward);
  o.field_or_null("freed_at", s.freed, s.freed_at).string_array("holders", s.holders);
  o.close();
}
void write_saved_lifetime_json(json_text::Writer& out, const json_text::Layout& layout, const SavedLifetime& s) {
  json_text::Object o(out, layout);
  o.field("id", s.id).field("node", s.node_id).field("what", s.what.str()).field("bytes", s.bytes);
  o.field("storage", s.storage_id).field("saved_at", s.saved_at);
  o.field_or_null("released_at", s.released_at >= 0, s.released_at);
  o.close();
}
void write_statement_memory_json(json_text::Writer& out, const json_text::Layout& layout, const StatementMemory& m) {
  json_text::Object o(out, layout);
  o.field("statement", m.index).field("live_after", m.live_after).field("peak_inside", m.peak_inside);
  o.field("temporary_bytes", m.temporary_bytes).int_object("categories", m.categories);
  o.close();
}

// A node as node_json(n).dump(2) writes it: `layout` for the node's own line, `inner` for
// the objects inside its arrays (four spaces deeper).
void write_saved_json(json_text::Writer& out, const json_text::Layout& layout, const SavedSnapshot& s) {
  json_text::Object o(out, layout);
  o.field("attr", "_saved_" + s.attr.str());
  if (!s.is_tensor) {
    o.field("kind", "value").field("value", s.value.str());
    o.close();
    return;
  }
  o.field("kind", "tensor");
  if (!s.defined) {
    o.field("value", "None");
    o.close();
    return;
  }
  o.int_array("shape", s.shape).field("dtype", dtype_name(s.dtype)).field("bytes", s.bytes);
  o.field("storage", s.storage_id).field("storage_bytes", s.storage_bytes);
  if (s.hooks.empty()) {
    o.field("relation", s.is_output ? "new_object_shares_storage" : "same_object");
  } else {
    // saved_json sets "relation" twice: the key keeps its first place, the value is the last.
    o.field("relation", "unpacked_by_hooks").field("hooks", s.hooks.str()).field("packed_bytes", s.packed_bytes);
  }
  if (s.from_python_number) o.field("from_python_number", true);
  o.field("tensor", s.tensor_id);
  if (!s.same_object_as.empty()) o.field("same_object_as", s.same_object_as.str());
  o.string_array("shares_storage_with", s.shares_with).field("saved_version", s.saved_version);
  o.field("saved_at", s.saved_at).field_or_null("released_at", s.released, s.released_at);
  o.field("why", s.why.str());
  o.close();
}
struct NodeLayouts {
  json_text::Layout node, inner;
};
void write_node_json(json_text::Writer& out, const NodeLayouts& layouts, const NodeSnapshot& n) {
  json_text::Object o(out, layouts.node);
  o.field("id", n.id).field("name", n.name).field("created_at", n.created_at);
  o.open_array("next_functions");
  for (size_t i = 0; i < n.next.size(); ++i) {
    o.item(i == 0);
    if (n.next[i].node < 0) {
      out.put("null");
      continue;
    }
    json_text::Object edge(out, layouts.inner);
    edge.field("node", n.next[i].node).field("input_nr", n.next[i].input_nr);
    edge.close();
  }
  o.close_array(n.next.size());
  if (!n.variable.empty()) o.field("variable", n.variable);
  if (!n.wraps.empty()) o.field("wraps", n.wraps);
  o.open_array("saved");
  for (size_t i = 0; i < n.saved.size(); ++i) {
    o.item(i == 0);
    write_saved_json(out, layouts.inner, n.saved[i]);
  }
  o.close_array(n.saved.size());
  o.field("saved_bytes", n.saved_bytes).field_or_null("released_at", n.released, n.released_at);
  o.close();
}

// One streamed array: its placeholder, a maker of its elements as json values, in order
// (the reference, and what fill_placeholders uses), and a writer of the same elements as
// text (write_elements below).
struct Streamed {
  std::string placeholder;
  std::function<void(const std::function<void(const ojson&)>&)> each;
  std::function<size_t(std::string&, const json_text::Layout&, const std::string&)> write;
};
// Writes `records` as the elements of one array (Streamed::write): each as ",\n" (or "[\n"
// for the first) + inner + its text by write_record(writer, layout, record); returns how
// many it wrote.
// While write_report_json streams, where the text made so far goes once it passes
// kDrainBytes (so a 10,000-op chain's 30 MB report is never whole in memory).
thread_local const ReportSink* streaming_sink = nullptr;
constexpr size_t kDrainBytes = size_t(1) << 20;
template <typename Records, typename Write>
size_t write_elements(std::string& out, const json_text::Layout& layout, const std::string& inner,
                      const Records& records, Write write_record) {
  json_text::Writer writer(out);
  size_t count = 0;
  for (const auto& record : records) {
    writer.put(count++ == 0 ? "[\n" : ",\n");
    writer.put(inner);
    write_record(writer, layout, record);
    if (streaming_sink && out.size() >= kDrainBytes) {
      writer.flush();
      (*streaming_sink)(out);
      out.clear();
    }
  }
  return count;
}
template <typename Records, typename Write>
auto writer_of(const Records& records, Write write_record) {
  return [&records, write_record](std::string& out, const json_text::Layout& layout, const std::string& inner) {
    return write_elements(out, layout, inner, records, write_record);
  };
}
std::vector<Streamed> streamed_arrays(const RunResult& r, bool with_values, SharedAnalysis analysis) {
  // The accountant's per-node and per-saved-value records: from the caller's analysis, or
  // made here.
  if (!analysis) analysis = std::make_shared<const MemoryAnalysis>(analyse_memory(r));
  std::vector<Streamed> arrays = {
      {kByStatementPlaceholder, [&r](const auto& emit) { for (const auto& m : r.memory_by_statement) emit(statement_memory_json(m)); },
       writer_of(r.memory_by_statement, write_statement_memory_json)},
      {kNodesPlaceholder, [&r, with_values](const auto& emit) { for (const auto& [id, n] : r.nodes) emit(node_json(n, with_values)); },
       [&r](std::string& out, const json_text::Layout& layout, const std::string& inner) {
         const NodeLayouts layouts{layout, json_text::Layout(inner + "    ")};
         return write_elements(out, layout, inner, r.nodes, [&layouts](json_text::Writer& w, const json_text::Layout&,
                                                                       const auto& entry) {
           write_node_json(w, layouts, entry.second);
         });
       }},
      {kStoragesPlaceholder, [&r](const auto& emit) { for (const auto& s : r.storages) emit(storage_json(s)); },
       writer_of(r.storages, write_storage_json)},
      {kSavedPlaceholder, [&r](const auto& emit) { for (const auto& s : r.saved) emit(saved_lifetime_json(s)); },
       writer_of(r.saved, write_saved_lifetime_json)},
      {kEventsPlaceholder, [&r](const auto& emit) { for (const auto& e : r.events) emit(event_json(e)); },
       writer_of(r.events, write_event_json)},
      {kAccountNodesPlaceholder, [analysis](const auto& emit) { for (const auto& n : analysis->nodes) emit(account_node_json(n)); },
       [analysis](std::string& out, const json_text::Layout& layout, const std::string& inner) {
         return write_elements(out, layout, inner, analysis->nodes, write_account_node_json);
       }},
      {kAccountSavedPlaceholder, [analysis](const auto& emit) { for (const auto& s : analysis->saved) emit(account_saved_json(s)); },
       [analysis](std::string& out, const json_text::Layout& layout, const std::string& inner) {
         return write_elements(out, layout, inner, analysis->saved, write_account_saved_json);
       }},
  };
  for (size_t i = 0; i < r.walks.size(); ++i) {
    const WalkRecord& w = r.walks[i];
    arrays.push_back({walk_names_placeholder(i),
                      [&r, &w](const auto& emit) { for (int64_t id : w.nodes) emit(ojson(walk_node_name(r, id))); },
                      [&r, &w](std::string& out, const json_text::Layout& layout, const std::string& inner) {
                        return write_elements(out, layout, inner, w.nodes,
                                              [&r](json_text::Writer& writer, const json_text::Layout&, int64_t id) {
                                                writer.string(walk_node_name(r, id));
                                              });
                      }});
    arrays.push_back({walk_ids_placeholder(i), [&w](const auto& emit) { for (int64_t id : w.nodes) emit(ojson(id)); },
                      [&w](std::string& out, const json_text::Layout& layout, const std::string& inner) {
                        return write_elements(out, layout, inner, w.nodes,
                                              [](json_text::Writer& writer, const json_text::Layout&, int64_t id) {
                                                writer.integer(id);
                                              });
                      }});
  }
  return arrays;
}

// Replaces every placeholder string in `j` by its array (the slow path, and the reference).
void fill_placeholders(ojson& j, const std::vector<Streamed>& arrays) {
  if (j.is_string()) {
    for (const Streamed& a : arrays)
      if (j.get_ref<const std::string&>() == a.placeholder) {
        ojson out = ojson::array();
        a.each([&](const ojson& e) { out.push_back(e); });
        j = std::move(out);
        return;
      }
  } else if (j.is_structured()) {
    for (auto& v : j) fill_placeholders(v, arrays);
  }
}
}  // namespace

nlohmann::ordered_json report_json(const RunResult& r, bool with_values) {
  return build_report(r, with_values, false, nullptr);
}
nlohmann::ordered_json report_json_skeleton(const RunResult& r, bool with_values, const SharedAnalysis& analysis) {
  return build_report(r, with_values, true, analysis.get());
}

// The skeleton's text with each placeholder replaced by its array, each element written as
// text by its Streamed writer at its depth (nlohmann's pretty printer indents a nested value
// by two spaces per level and nothing else, so this is the same text). A placeholder a caller
// replaced is left alone; if one is found twice (only a caller adding one could do that),
// the arrays are built in a copy of the skeleton and the whole document is dumped instead.
namespace {
// dump_report_json's text; with `sink`, handed to it piece by piece instead of returned.
std::string dump_or_stream(const nlohmann::ordered_json& skeleton, const RunResult& r, bool with_values,
                           const ReportSink* sink, const SharedAnalysis& analysis) {
  struct Restore {
    ~Restore() { streaming_sink = nullptr; }
  } restore;
  streaming_sink = sink;
  const std::vector<Streamed> arrays = streamed_arrays(r, with_values, analysis);
  const std::string text = skeleton.dump(2);
  struct Found {
    size_t at, length;
    const Streamed* array;
  };
  std::vector<Found> found;
  bool unique = true;
  for (const Streamed& a : arrays) {
    const std::string marker = ojson(a.placeholder).dump();
    const size_t at = text.find(marker);
    if (at == std::string::npos) continue;  // e.g. a caller replaced it
    if (text.find(marker, at + 1) != std::string::npos) unique = false;
    found.push_back({at, marker.size(), &a});
  }
  if (!unique) {
    ojson full = skeleton;
    fill_placeholders(full, arrays);
    std::string whole = full.dump(2);
    if (!sink) return whole;
    (*sink)(whole);
    return {};
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.at < b.at; });
  std::string out;
  // Room for the arrays at once (a few bytes more per element than a 10,000-op chain's
  // averages: events 170, nodes 680, storages 210, saved values 190, statements 240): the
  // doublings of a 31 MB report copied it several times over. Reserved, not written, pages
  // cost no memory.
  if (sink)
    out.reserve(kDrainBytes + (size_t(64) << 10));
  else
    out.reserve(text.size() + 200 * r.events.size() + 800 * r.nodes.size() + 250 * r.storages.size() +
                220 * r.saved.size() + 280 * r.memory_by_statement.size());
  size_t copied = 0;
  for (const Found& f : found) {
    out.append(text, copied, f.at - copied);
    copied = f.at + f.length;
    const size_t line = text.rfind('\n', f.at) + 1;  // the document starts with '{', so a line break precedes
    const std::string indent(text.find_first_not_of(' ', line) - line, ' ');
    const std::string inner = indent + "  ";
    const bool empty = f.array->write(out, json_text::Layout(inner), inner) == 0;
    out += empty ? "[]" : "\n" + indent + "]";
  }
  out.append(text, copied, std::string::npos);
  if (!sink) return out;
  (*sink)(out);
  return {};
}
}  // namespace

std::string dump_report_json(const nlohmann::ordered_json& skeleton, const RunResult& r, bool with_values,
                             const SharedAnalysis& analysis) {
  return dump_or_stream(skeleton, r, with_values, nullptr, analysis);
}

void write_report_json(const nlohmann::ordered_json& skeleton, const RunResult& r, bool with_values,
                       const ReportSink& sink, const SharedAnalysis& analysis) {
  dump_or_stream(skeleton, r, with_values, &sink, analysis);
}

namespace {
ojson build_report(const RunResult& r, bool with_values, bool streamed, const MemoryAnalysis* analysis) {
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
  for (size_t i = 0; i < r.walks.size(); ++i) {
    const WalkRecord& w = r.walks[i];
    if (streamed) {
      walks[w.key] = walk_names_placeholder(i);
      continue;
    }
    ojson names = ojson::array();
    for (int64_t id : w.nodes) names.push_back(walk_node_name(r, id));
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
    if (with_values && g.values_elided > 0) gj["values_elided"] = g.values_elided;
    else if (with_values) gj["values"] = values_json(g.values);
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
  if (streamed) {
    mem["by_statement"] = kByStatementPlaceholder;
  } else {
    ojson by = ojson::array();
    for (const auto& m : r.memory_by_statement) by.push_back(statement_memory_json(m));
    mem["by_statement"] = by;
  }
  j["memory"] = mem;

  ojson leaves = ojson::array();
  for (const auto& l : r.leaves) {
    ojson lj{{"name", l.name}, {"shape", l.shape}, {"dtype", dtype_name(l.dtype)},
             {"requires_grad", l.requires_grad}, {"bytes", l.bytes}};
    if (with_values && l.values_elided > 0) lj["values_elided"] = l.values_elided;
    else if (with_values) lj["values"] = values_json(l.values);
    leaves.push_back(lj);
  }
  j["leaves"] = leaves;

  if (streamed) {
    j["nodes"] = kNodesPlaceholder;
  } else {
    ojson nodes = ojson::array();
    for (const auto& [id, n] : r.nodes) nodes.push_back(node_json(n, with_values));
    j["nodes"] = nodes;
  }
  ojson walk_ids = ojson::object();
  for (size_t i = 0; i < r.walks.size(); ++i) {
    const WalkRecord& w = r.walks[i];
    walk_ids[w.key] = {{"captured_at", w.statement}, {"nodes", streamed ? ojson(walk_ids_placeholder(i)) : ojson(w.nodes)}};
  }
  j["walk_nodes"] = walk_ids;

  if (streamed) {
    j["lifetimes"] = {{"storages", kStoragesPlaceholder}, {"saved", kSavedPlaceholder}};
  } else {
    ojson storages = ojson::array(), saved = ojson::array();
    for (const auto& s : r.storages) storages.push_back(storage_json(s));
    for (const auto& s : r.saved) saved.push_back(saved_lifetime_json(s));
    j["lifetimes"] = {{"storages", storages}, {"saved", saved}};
  }
  add_events_json(j, r, streamed);  // issue #4: events timeline, hooks, checkpoints
  j["accountant"] = report_account_json(r, streamed, analysis);  // issue #4: model, peak, per node, why, what-if

  if (!r.expect.empty()) {
    ojson checks = ojson::array();
    for (const auto& f : check_expect(r))
      checks.push_back({{"fact", f.fact}, {"expected", f.expected}, {"actual", f.actual}});
    j["expect"] = {{"passed", checks.empty()}, {"failures", checks}};
  }
  j["raised"] = r.raised;
  return j;
}
}  // namespace

}  // namespace agtrace
