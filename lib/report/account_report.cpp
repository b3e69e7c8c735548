// The accountant's sections of the reports (issue #4): allocator model, where the peak is,
// per-node saved and new bytes, why each value is saved, the what-if table and, when the
// scenario asks for it, the Korthikanti reconciliation. json_report.cpp / text_report.cpp
// call the functions report.hpp declares for this file and nothing else of it.
#include <sstream>

#include "account/analysis.hpp"
#include "account/korthikanti.hpp"
#include "report/report.hpp"
#include "report/text_lines.hpp"

namespace agtrace {

using ojson = nlohmann::ordered_json;

namespace {

using text_lines::padded_text;
using text_lines::right_aligned_text;
std::string signed_bytes(int64_t b) { return b > 0 ? "+" + human_bytes(b) : b < 0 ? "-" + human_bytes(-b) : "0 B"; }

ojson korthikanti_json(const KorthikantiReport& k) {
  ojson roles = ojson::array();
  for (const auto& r : k.roles) {
    ojson ex = ojson::array();
    for (const auto& d : r.explained) ex.push_back({{"reason", d.reason}, {"bytes", d.bytes}});
    ojson values = ojson::array();
    for (const auto& v : r.values)
      values.push_back({{"what", v.what}, {"bytes", v.bytes}, {"dtype", v.dtype.empty() ? ojson(nullptr) : ojson(v.dtype)},
                        {"saved_at", v.statement}});
    roles.push_back({{"role", r.role}, {"terms", r.terms}, {"formula_bytes", r.formula_bytes},
                     {"run_bytes", r.run_bytes}, {"saved_count", r.saved_count}, {"saved", values}, {"explained", ex},
                     {"unexplained_bytes", r.unexplained}});
  }
  return {{"formula", "sbh(34 + 5as/h) bytes per layer (Korthikanti et al. 2022, section 4.1)"},
          {"s", k.shape.s}, {"b", k.shape.b}, {"h", k.shape.h}, {"a", k.shape.a},
          {"formula_bytes", k.formula_bytes}, {"activation_bytes", k.activation_bytes},
          {"parameter_bytes", k.parameter_bytes}, {"parameter_cast_bytes", k.parameter_cast_bytes},
          {"explained_bytes", k.explained_bytes},
          {"unexplained_bytes", k.unexplained_bytes}, {"roles", roles}};
}

}  // namespace

const char* const kAccountNodesPlaceholder = "\x01agtrace: accountant nodes\x01";
const char* const kAccountSavedPlaceholder = "\x01agtrace: accountant saved\x01";

ojson account_node_json(const NodeMemory& n) {
  return {{"node", n.node_id}, {"name", n.name}, {"saved_at", n.saved_at}, {"saved_count", n.saved_count},
          {"saved_bytes", n.saved_bytes}, {"new_bytes", n.new_bytes}};
}
void write_account_node_json(json_text::Writer& out, const json_text::Layout& layout, const NodeMemory& n) {
  json_text::Object o(out, layout);
  o.field("node", n.node_id).field("name", n.name).field("saved_at", n.saved_at).field("saved_count", n.saved_count);
  o.field("saved_bytes", n.saved_bytes).field("new_bytes", n.new_bytes);
  o.close();
}

ojson account_saved_json(const SavedExplained& s) {
  return {{"id", s.saved_id}, {"node", s.node_id}, {"what", s.what}, {"bytes", s.bytes},
          {"category", s.category.empty() ? ojson(nullptr) : ojson(s.category)}, {"new", s.is_new},
          {"why", s.why().why}, {"needed_for", s.why().needed_for.empty() ? ojson(nullptr) : ojson(s.why().needed_for)},
          {"if_not_required", s.why().if_not}, {"bytes_less", s.why().bytes_less}};
}
void write_account_saved_json(json_text::Writer& out, const json_text::Layout& layout, const SavedExplained& s) {
  json_text::Object o(out, layout);
  o.field("id", s.saved_id).field("node", s.node_id).field("what", s.what.str()).field("bytes", s.bytes);
  if (s.category.empty()) o.null_field("category");
  else o.field("category", s.category);
  o.field("new", s.is_new).field("why", s.why().why);
  if (s.why().needed_for.empty()) o.null_field("needed_for");
  else o.field("needed_for", s.why().needed_for);
  o.field("if_not_required", s.why().if_not).field("bytes_less", s.why().bytes_less);
  o.close();
}

ojson report_account_json(const RunResult& r, bool placeholders, const MemoryAnalysis* analysis) {
  // With placeholders, the per-node and per-value records are written later: without the
  // caller's analysis only the totals are needed here.
  MemoryAnalysis own;
  if (!analysis) own = analyse_memory(r, /*explain=*/!placeholders);
  const MemoryAnalysis& a = analysis ? *analysis : own;
  const AccountExtras& x = r.account;
  ojson j;
  j["model"] = {{"label", "model: CUDA caching allocator blocks (each allocation rounded up to 512 B; segments not modelled)"},
                {"peak_bytes", x.model.peak_bytes},
                {"peak_statement", x.model.peak_statement},
                {"saved_unique_bytes", x.model.saved_unique_bytes},
                {"graph_only_bytes", x.model.graph_only_bytes},
                {"live_at_end", x.model.live_at_end}};
  if (x.device.present)
    j["device_memory"] = {{"label", "measured: agtrace's device allocator (requested bytes, 512-byte blocks, reserved from the driver)"},
                          {"device", x.device.device},
                          {"requested_peak", x.device.stats.requested_peak},
                          {"block_peak", x.device.stats.block_peak},
                          {"reserved_peak", x.device.stats.reserved_peak},
                          {"requested_at_end", x.device.stats.requested_live},
                          {"block_at_end", x.device.stats.block_live},
                          {"reserved_at_end", x.device.stats.reserved_live},
                          {"driver_calls", x.device.stats.driver_calls}};
  j["peak"] = {{"bytes", r.memory.peak_bytes}, {"statement", x.peak.statement}, {"in_backward", x.peak.in_backward},
               {"op", x.peak.op}};
  j["new_bytes"] = a.new_bytes;
  if (placeholders) {
    // Written as text in their places by dump_report_json (one record per node and per saved
    // value: their trees were most of a long program's JSON report time).
    j["nodes"] = kAccountNodesPlaceholder;
    j["saved"] = kAccountSavedPlaceholder;
  } else {
    ojson nodes = ojson::array();
    for (const auto& n : a.nodes) nodes.push_back(account_node_json(n));
    j["nodes"] = std::move(nodes);
    ojson saved = ojson::array();
    for (const auto& s : a.saved) saved.push_back(account_saved_json(s));
    j["saved"] = std::move(saved);
  }
  ojson wi = ojson::array();
  for (const auto& w : a.what_if)
    wi.push_back({{"change", w.change}, {"device_bytes", w.device_bytes}, {"host_bytes", w.host_bytes}, {"detail", w.detail}});
  j["what_if"] = std::move(wi);
  KorthikantiShape ks;
  if (korthikanti_requested(r, ks)) j["korthikanti"] = korthikanti_json(reconcile_korthikanti(r, ks));
  return j;
}

void write_account_text(text_lines::Lines& out, const RunResult& r) {
  const MemoryAnalysis a = analyse_memory(r);
  const AccountExtras& x = r.account;
  std::ostringstream o;
  o << "\nAccounting\n";
  o << "  peak         " << human_bytes(r.memory.peak_bytes) << " during " << statement_ref(x.peak.statement);
  if (x.peak.in_backward) o << " in backward, node " << (x.peak.op.empty() ? "?" : x.peak.op);
  else if (!x.peak.op.empty()) o << ", allocating for " << x.peak.op;
  o << "\n";
  o << "  new bytes    " << human_bytes(a.new_bytes) << " of saved tensors on storages only the graph holds\n";
  o << "  model        peak " << human_bytes(x.model.peak_bytes) << " (" << x.model.peak_bytes
    << " B), saved distinct " << human_bytes(x.model.saved_unique_bytes) << ", graph-only "
    << human_bytes(x.model.graph_only_bytes) << "  (model: CUDA caching allocator, 512-byte blocks)\n";
  if (x.device.present)
    o << "  measured     peak " << human_bytes(x.device.stats.block_peak) << " (" << x.device.stats.block_peak
      << " B in 512-byte blocks; " << x.device.stats.requested_peak << " B requested, "
      << x.device.stats.reserved_peak << " B reserved), at the end " << human_bytes(x.device.stats.block_live)
      << ", " << x.device.stats.driver_calls << " driver calls  (" << x.device.device << ")\n";
  out += o.str();
  if (!a.nodes.empty()) {
    out += "\nSaved bytes by node  (new: not a leaf, a name or a gradient)\n  ";
    text_lines::padded(out, "node", 32);
    text_lines::right_aligned(out, "saved", 11);
    text_lines::right_aligned(out, "new", 11);
    out += "  at\n";
    for (const auto& n : a.nodes) {
      out += "  ";
      const size_t name_start = out.size();
      out += n.name;
      out += " #";
      text_lines::integer(out, n.node_id);
      text_lines::pad_from(out, name_start, 32);
      text_lines::right_aligned(out, text_lines::HumanBytes(n.saved_bytes).view(), 11);
      text_lines::right_aligned(out, text_lines::HumanBytes(n.new_bytes).view(), 11);
      out += "  ";
      text_lines::statement_ref(out, n.saved_at);
      out.end_line();
    }
    out += "\nWhy saved\n";
    for (const auto& s : a.saved) {
      out += "  ";
      text_lines::padded(out, s.what.str(), 36);
      text_lines::right_aligned(out, text_lines::HumanBytes(s.bytes).view(), 10);
      out += "  ";
      out += s.why().why;
      out += "; ";
      out += s.why().if_not;
      out.end_line();
    }
  }
  o.str("");  // again for the what-if and reconciliation tables (a few rows)
  if (!a.what_if.empty()) {
    o << "\nWhat if  (bytes on the device; computed from this run)\n";
    for (const auto& w : a.what_if) {
      o << "  " << padded_text(w.change, 30) << right_aligned_text(signed_bytes(w.device_bytes), 12);
      if (w.host_bytes) o << "  host " << signed_bytes(w.host_bytes);
      o << "  " << w.detail << "\n";
    }
  }
  KorthikantiShape ks;
  if (korthikanti_requested(r, ks)) {
    const KorthikantiReport k = reconcile_korthikanti(r, ks);
    o << "\nKorthikanti et al. 2022: sbh(34 + 5as/h) with s=" << ks.s << " b=" << ks.b << " h=" << ks.h << " a=" << ks.a
      << "\n";
    o << "  formula " << k.formula_bytes << " B; saved activations " << k.activation_bytes << " B (+ parameters "
      << k.parameter_bytes << " B";
    if (k.parameter_cast_bytes) o << " and their autocast copies " << k.parameter_cast_bytes << " B";
    o << ", not activations); explained " << k.explained_bytes << " B; unexplained " << k.unexplained_bytes << " B\n";
    o << "  " << padded_text("role", 24) << right_aligned_text("formula", 14) << right_aligned_text("agtrace", 14)
      << right_aligned_text("diff", 14) << "\n";
    for (const auto& rr : k.roles) {
      if (!rr.formula_bytes && !rr.run_bytes) continue;
      o << "  " << padded_text(rr.role, 24) << right_aligned_text(std::to_string(rr.formula_bytes), 14)
        << right_aligned_text(std::to_string(rr.run_bytes), 14)
        << right_aligned_text(std::to_string(rr.run_bytes - rr.formula_bytes), 14) << "\n";
      for (const auto& t : rr.terms) o << "      term: " << t << "\n";
      for (const auto& v : rr.values)
        o << "      saved " << statement_ref(v.statement) << " " << padded_text(v.what, 40)
          << right_aligned_text(std::to_string(v.bytes), 12) << " B" << (v.dtype.empty() ? "" : "  " + v.dtype) << "\n";
      for (const auto& d : rr.explained) o << "      +" << d.bytes << " B: " << d.reason << "\n";
      if (rr.unexplained) o << "      UNEXPLAINED " << rr.unexplained << " B\n";
    }
  }
  out += o.str();
}

}  // namespace agtrace
