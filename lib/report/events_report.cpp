// The event timeline, saved-tensor hooks and checkpoint sections of the reports (issue #4):
// the JSON report's "events", "hook_warnings", "checkpoints" and "checkpoint_comparison"
// keys and memory.hooks_*, and the text report's compact timeline.
#include <algorithm>
#include <map>
#include <sstream>

#include "report/json_text.hpp"
#include "report/report.hpp"

namespace agtrace {

using ojson = nlohmann::ordered_json;

namespace {
ojson stmt_or_null(int s) { return s == -1 ? ojson(nullptr) : ojson(s); }
}  // namespace

const char* const kEventsPlaceholder = "\x01agtrace: events\x01";

ojson event_json(const EventRecord& e) {
  ojson ej;
  ej["kind"] = e.kind;
  ej["statement"] = e.statement;
  if (e.recompute_statement >= 0) ej["recompute_statement"] = e.recompute_statement;
  ej["phase"] = e.in_backward ? "backward" : "forward";
  if (!e.op.empty()) ej["op"] = e.op;
  if (e.storage_id >= 0) ej["storage"] = e.storage_id;
  ej["bytes"] = e.bytes;
  if (e.saved_id >= 0) ej["saved"] = e.saved_id;
  if (e.node_id >= 0) ej["node"] = e.node_id;
  if (!e.what.empty()) ej["what"] = e.what;
  if (!e.hooks.empty()) {
    ej["hooks"] = e.hooks;
    if (e.kind == "save" || e.kind == "pack") {
      ej["packed_bytes"] = e.packed_bytes;
      ej["packed_storage"] = e.packed_storage_id < 0 ? ojson(nullptr) : ojson(e.packed_storage_id);
    }
  }
  if (e.kind == "version_bump") ej["version"] = e.version;
  if (e.kind == "unpack") {
    ej["version"] = e.version;
    ej["expected_version"] = e.expected_version;
  }
  return ej;
}

void write_event_json(json_text::Writer& out, const json_text::Layout& layout, const EventRecord& e) {
  // The fields of event_json above, in its order and under its conditions.
  json_text::Object o(out, layout);
  o.field("kind", e.kind.str()).field("statement", e.statement);
  if (e.recompute_statement >= 0) o.field("recompute_statement", e.recompute_statement);
  o.field("phase", e.in_backward ? "backward" : "forward");
  if (!e.op.empty()) o.field("op", e.op.str());
  if (e.storage_id >= 0) o.field("storage", e.storage_id);
  o.field("bytes", e.bytes);
  if (e.saved_id >= 0) o.field("saved", e.saved_id);
  if (e.node_id >= 0) o.field("node", e.node_id);
  if (!e.what.empty()) o.field("what", e.what.str());
  if (!e.hooks.empty()) {
    o.field("hooks", e.hooks.str());
    if (e.kind == "save" || e.kind == "pack") {
      o.field("packed_bytes", e.packed_bytes);
      o.field_or_null("packed_storage", e.packed_storage_id >= 0, e.packed_storage_id);
    }
  }
  if (e.kind == "version_bump") o.field("version", e.version);
  if (e.kind == "unpack") o.field("version", e.version).field("expected_version", e.expected_version);
  o.close();
}

void add_events_json(ojson& j, const RunResult& r, bool events_placeholder) {
  ojson& mem = j["memory"];
  mem["hooks_saved_bytes"] = r.memory.hooks_saved_bytes;
  mem["hooks_packed_bytes"] = r.memory.hooks_packed_bytes;
  mem["host_bytes"] = r.memory.host_bytes;
  mem["checkpoint_avoided_bytes"] = r.memory.checkpoint_avoided_bytes;
  if (r.memory.autocast_copies > 0) {  // only runs that cast: other reports keep their keys
    mem["autocast_copies"] = r.memory.autocast_copies;
    mem["autocast_copy_bytes"] = r.memory.autocast_copy_bytes;
    mem["autocast_saved_bytes"] = r.memory.autocast_saved_bytes;
    ojson by_dtype = ojson::object();
    for (const auto& [category, dtypes] : r.memory.categories_at_end_by_dtype)
      for (const auto& [dtype, bytes] : dtypes) by_dtype[category][dtype] = bytes;
    mem["categories_at_end_by_dtype"] = std::move(by_dtype);
  }

  if (events_placeholder) {
    j["events"] = kEventsPlaceholder;
  } else {
    ojson events = ojson::array();
    for (const EventRecord& e : r.events) events.push_back(event_json(e));
    j["events"] = std::move(events);
  }

  ojson warnings = ojson::array();
  for (const HookWarning& w : r.hook_warnings)
    warnings.push_back({{"kind", "inplace_hidden_by_hooks"},
                        {"statement", w.statement},
                        {"what", w.what},
                        {"hooks", w.hooks},
                        {"expected_version", w.expected_version},
                        {"found_version", w.found_version},
                        {"saved_at", stmt_or_null(w.saved_at)},
                        {"message", w.message}});
  j["hook_warnings"] = std::move(warnings);

  ojson cps = ojson::array();
  for (const CheckpointRecord& c : r.checkpoints)
    cps.push_back({{"first_statement", c.first_statement},
                   {"last_statement", c.last_statement},
                   {"inputs", c.inputs},
                   {"outputs", c.outputs},
                   {"packs", c.packs},
                   {"avoided_saved_bytes", c.packed_bytes},
                   {"recomputations", c.recomputations},
                   {"recomputed_at", c.recomputed_at}});
  j["checkpoints"] = std::move(cps);
  if (r.checkpoint_comparison.present) {
    const CheckpointComparison& c = r.checkpoint_comparison;
    j["checkpoint_comparison"] = {
        {"method", "the same program run again with every checkpoint block as a plain call of the same function"},
        {"with", {{"saved_bytes", c.saved_bytes_with}, {"peak_bytes", c.peak_bytes_with},
                  {"graph_only_bytes", c.graph_only_bytes_with}}},
        {"without", {{"saved_bytes", c.saved_bytes_without}, {"peak_bytes", c.peak_bytes_without},
                     {"graph_only_bytes", c.graph_only_bytes_without}}}};
  }
  if (r.autocast_comparison.present) {
    const AutocastComparison& c = r.autocast_comparison;
    ojson without = {{"saved_bytes", c.saved_bytes_without}, {"peak_bytes", c.peak_bytes_without},
                     {"graph_only_bytes", c.graph_only_bytes_without}};
    j["autocast_comparison"] = {
        {"method", "the same program run again with every autocast block's body as plain statements"},
        {"with", {{"saved_bytes", c.saved_bytes_with}, {"peak_bytes", c.peak_bytes_with},
                  {"graph_only_bytes", c.graph_only_bytes_with}}},
        {"without", std::move(without)}};
    if (c.raised_at >= 0)
      j["autocast_comparison"]["raises_without"] = {
          {"statement", c.raised_at}, {"kind", c.raised_kind}, {"message", c.raised_message}};
  }
}

// A compact timeline: one line per statement that had events, counting each kind, with the
// bytes allocated and freed, and the recomputations and hook packs spelled out.
void write_events_text(text_lines::Lines& out, const RunResult& r) {
  if (r.events.empty()) return;
  // Kinds compared as interned strings (one pointer each) and counted in a short list per
  // statement, printed in name order: the timeline has about 6 events per op, and a map
  // keyed by a string made from each event's kind was most of this section's time.
  struct Line {
    std::vector<std::pair<InternedString, int>> counts;  // kind, events
    int64_t alloc = 0, freed = 0, saved = 0, packed = 0;
    std::vector<std::string> notes;
    bool has(InternedString kind) const {
      for (const auto& c : counts)
        if (c.first == kind) return true;
      return false;
    }
    int& count(InternedString kind) {
      for (auto& c : counts)
        if (c.first == kind) return c.second;
      counts.emplace_back(kind, 0);
      return counts.back().second;
    }
  };
  const InternedString alloc_kind("alloc"), free_kind("free"), save_kind("save"), pack_kind("pack");
  const InternedString recompute_kind("recompute");
  const InternedString checkpoint("checkpoint"), checkpoint_recompute("checkpoint_recompute");
  std::map<int, Line> lines;
  Line* l = nullptr;
  int l_statement = 0;
  for (const EventRecord& e : r.events) {
    if (!l || e.statement != l_statement) {
      l = &lines[e.statement];
      l_statement = e.statement;
    }
    ++l->count(e.kind);
    if (e.kind == alloc_kind) l->alloc += e.bytes;
    if (e.kind == free_kind) l->freed += e.bytes;
    if (e.kind == save_kind && !(e.hooks == checkpoint) && !(e.hooks == checkpoint_recompute)) l->saved += e.bytes;
    if (e.kind == pack_kind && !(e.hooks == checkpoint_recompute)) l->packed += e.packed_bytes;
    if (e.kind == recompute_kind && e.what.rfind("begin", 0) == 0)
      l->notes.push_back("recompute " + e.what.substr(7) + (e.op.empty() ? "" : " (at " + e.op + ")"));
  }
  for (auto& [stmt, line] : lines)
    std::sort(line.counts.begin(), line.counts.end(),
              [](const auto& a, const auto& b) { return a.first.str() < b.first.str(); });
  out += "\nTimeline (events per statement: allocations, frees, saves, releases, version bumps)\n";
  for (const auto& [stmt, line] : lines) {
    out += "  ";
    if (stmt == -1) {
      out += "setup";
    } else if (stmt == -2) {
      out += "end";
    } else {
      out += '[';
      text_lines::integer(out, stmt);
      out += ']';
    }
    out += "  +";
    out += text_lines::HumanBytes(line.alloc).view();
    out += " -";
    out += text_lines::HumanBytes(line.freed).view();
    for (const auto& [k, n] : line.counts) {
      out += "  ";
      out += k.str();
      out += ' ';
      text_lines::integer(out, n);
    }
    if (line.saved) {
      out += "  saved ";
      out += text_lines::HumanBytes(line.saved).view();
    }
    if (line.has(pack_kind)) {
      out += "  hooks keep ";
      out += text_lines::HumanBytes(line.packed).view();
    }
    out.end_line();
    for (const std::string& n : line.notes) {
      out += "      ";
      out += n;
      out.end_line();
    }
  }
  std::ostringstream o;
  if (!r.checkpoints.empty()) {
    o << "\nCheckpoints\n";
    for (const CheckpointRecord& c : r.checkpoints) {
      o << "  [" << c.first_statement << "-" << c.last_statement << "]  " << c.packs << " saved values not kept ("
        << human_bytes(c.packed_bytes) << "), recomputed " << c.recomputations << "x";
      if (!c.recomputed_at.empty()) {
        o << " at";
        for (int s : c.recomputed_at) o << " [" << s << "]";
      }
      o << "\n";
    }
    if (r.checkpoint_comparison.present) {
      const CheckpointComparison& c = r.checkpoint_comparison;
      o << "  with checkpointing:    saved " << human_bytes(c.saved_bytes_with) << ", peak "
        << human_bytes(c.peak_bytes_with) << ", graph-only " << human_bytes(c.graph_only_bytes_with) << "\n";
      o << "  without checkpointing: saved " << human_bytes(c.saved_bytes_without) << ", peak "
        << human_bytes(c.peak_bytes_without) << ", graph-only " << human_bytes(c.graph_only_bytes_without)
        << "  (same program, checkpoint blocks run as plain calls)\n";
    }
  }
  if (r.memory.hooks_saved_bytes || r.memory.hooks_packed_bytes) {
    o << "\nSaved-tensor hooks\n";
    o << "  handed to pack hooks " << human_bytes(r.memory.hooks_saved_bytes) << ", kept by the hooks "
      << human_bytes(r.memory.hooks_packed_bytes) << ", of which on the host (save_on_cpu) "
      << human_bytes(r.memory.host_bytes) << "\n";
  }
  if (!r.hook_warnings.empty()) {
    o << "\nWarnings\n";
    for (const HookWarning& w : r.hook_warnings) o << "  [" << w.statement << "] " << w.message << "\n";
  }
  out += o.str();
}

}  // namespace agtrace
