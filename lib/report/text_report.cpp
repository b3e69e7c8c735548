// The report for people: a one-screen summary first, then the program, the walks with
// each node's saved values, errors with their facts, lifetimes and byte accounting.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "interp/value.hpp"
#include "report/report.hpp"
#include "report/text_lines.hpp"

namespace agtrace {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

namespace {

using text_lines::integer;
using text_lines::padded;
using text_lines::right_aligned;
using text_lines::right_aligned_integer;

struct Style {
  bool on;
  // `s` appended to `out`, wrapped in the style's escape codes when on (no temporary string:
  // the report's per-node and per-row lines are built in one reused buffer).
  void bold_to(std::string& out, std::string_view s) const { wrap_to(out, "\x1b[1m", s); }
  void dim_to(std::string& out, std::string_view s) const { wrap_to(out, "\x1b[2m", s); }
  void wrap_to(std::string& out, const char* code, std::string_view s) const {
    if (on) out += code;
    out += s;
    if (on) out += "\x1b[0m";
  }
  std::string bold(const std::string& s) const { return on ? "\x1b[1m" + s + "\x1b[0m" : s; }
  std::string red(const std::string& s) const { return on ? "\x1b[31m" + s + "\x1b[0m" : s; }
  std::string green(const std::string& s) const { return on ? "\x1b[32m" + s + "\x1b[0m" : s; }
  std::string dim(const std::string& s) const { return on ? "\x1b[2m" + s + "\x1b[0m" : s; }
  std::string yellow(const std::string& s) const { return on ? "\x1b[33m" + s + "\x1b[0m" : s; }
};

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string lpad(const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }
std::string dtype_short(DType d) {
  switch (d) {
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Int64: return "i64";
    case DType::Bool: return "bool";
  }
  return "?";
}

// A saved value's line in the walks, appended to `line`.
void saved_line_to(std::string& line, const SavedSnapshot& s, const StorageNames& storage_name) {
  const size_t start = line.size();
  line += "_saved_";
  line += s.attr.str();
  if (line.size() - start < 24) line.append(24 - (line.size() - start), ' ');
  if (!s.is_tensor) {
    line += "= ";
    line += s.value.str();
    return;
  }
  if (!s.defined) {
    line += "None (not needed)";
    return;
  }
  const size_t shape_start = line.size();
  line += dtype_short(s.dtype);
  line += '[';
  for (size_t i = 0; i < s.shape.size(); ++i) {
    if (i) line += ", ";
    integer(line, s.shape[i]);
  }
  line += ']';
  if (line.size() - shape_start < 14) line.append(14 - (line.size() - shape_start), ' ');
  right_aligned(line, human_bytes(s.bytes), 9);
  line += "  ";
  if (!s.hooks.empty()) {
    // Saved under hooks (issue #4): what the hooks keep; unpack builds a new object.
    if (s.hooks == "checkpoint")
      line += "checkpoint: nothing kept, recomputed when needed";
    else if (s.released)
      line += "saved under " + s.hooks + " hooks";
    else
      line += s.hooks + " hooks keep " + human_bytes(s.packed_bytes) + " (" + storage_name(s.packed_storage_id) + ")";
    line += ", unpacks as a new object";
  } else if (s.from_python_number) {
    line += "a Python number as a 0-d tensor";
  } else if (!s.is_output) {
    // An input bound to no name is an intermediate (or a view) on some op's storage.
    if (s.same_object_as.empty()) {
      line += "an unnamed tensor on ";
      line += storage_name(s.storage_id);
    } else {
      line += "same object as ";
      line += s.same_object_as.str();
    }
  } else {
    line += "new object";
    if (!s.shares_with.empty()) {
      line += ", shares storage with ";
      for (size_t i = 0; i < s.shares_with.size(); ++i) {
        if (i) line += ", ";
        line += static_cast<const std::string&>(s.shares_with[i]);
      }
    } else {
      line += " on ";
      line += storage_name(s.storage_id);
    }
  }
  line += "; v";
  integer(line, s.saved_version);
  line += ", saved at ";
  text_lines::statement_ref(line, s.saved_at);
  if (s.released) {
    line += ", released at ";
    text_lines::statement_ref(line, s.released_at);
  } else {
    line += ", alive";
  }
}

}  // namespace

std::string statement_ref(int i) {
  std::string out;
  text_lines::statement_ref(out, i);
  return out;
}

std::string report_text(const RunResult& r, const TextOptions& opt) {
  std::ostringstream o;
  write_report_text(o, r, opt);
  return o.str();
}

StorageNames::StorageNames(const RunResult& r) {
  // Only counted, never iterated: the order of a hash map does not reach the report.
  std::unordered_map<std::string, int> uses;
  uses.reserve(r.storages.size());
  std::string name;
  for (const StorageLifetime& s : r.storages) {
    if (s.id < 0) continue;
    const std::string& by = s.allocated_by.str();
    name.clear();
    if (by.compare(0, 5, "leaf ") == 0) {
      name.append(by, 5, std::string::npos);
    } else {
      name += by;
      name += '@';
      text_lines::statement_ref(name, s.allocated_at);
    }
    const int use = ++uses[name];
    if (use > 1) {
      name += " (";
      integer(name, use);
      name += ')';
    }
    if (static_cast<size_t>(s.id) >= by_id_.size()) by_id_.resize(static_cast<size_t>(s.id) + 1);
    by_id_[static_cast<size_t>(s.id)] = name;
  }
}

const std::string& StorageNames::operator()(int64_t storage_id) const {
  if (storage_id < 0 || static_cast<size_t>(storage_id) >= by_id_.size() || by_id_[static_cast<size_t>(storage_id)].empty())
    return unknown_;
  return by_id_[static_cast<size_t>(storage_id)];
}

void write_report_text(std::ostream& o, const RunResult& r, const TextOptions& opt) {
  Style st{opt.color};
  const StorageNames storage_name(r);
  o << st.bold("agtrace") << " — scenario " << st.bold(r.scenario) << " (" << r.device << ")\n";
  if (!r.description.empty()) o << r.description << "\n";

  // ---- summary
  int ok = 0, err = 0, not_run = 0;
  for (const auto& s : r.statements) {
    if (s.status == "ok") ++ok;
    else if (s.status == "error") ++err;
    else ++not_run;
  }
  const size_t saved_count = r.saved.size();
  o << "\n" << st.bold("Summary") << "\n";
  o << "  statements   " << r.statements.size() << " (" << ok << " ok, " << err << " raised, " << not_run
    << " not run)\n";
  o << "  peak         " << human_bytes(r.memory.peak_bytes) << " (" << r.memory.peak_bytes << " B)";
  if (r.memory.peak_statement >= -1) o << " during " << statement_ref(r.memory.peak_statement);
  o << "\n";
  o << "  saved        " << human_bytes(r.memory.saved_bytes) << " in " << saved_count << " saved tensors, "
    << human_bytes(r.memory.saved_unique_bytes) << " of distinct storage\n";
  o << "  graph-only   " << human_bytes(r.memory.graph_only_bytes) << " at peak";
  if (r.memory.graph_only_statement >= 0) o << " (after " << statement_ref(r.memory.graph_only_statement) << ")";
  o << "\n";
  if (r.memory.autocast_copies > 0)
    o << "  autocast     " << r.memory.autocast_copies << " cast copies, " << human_bytes(r.memory.autocast_copy_bytes)
      << "; " << human_bytes(r.memory.autocast_saved_bytes) << " of saved values are casts\n";
  if (r.memory.autocast_copies > 0) {
    o << "  by dtype     ";
    const char* category_sep = "";
    for (const auto& [category, dtypes] : r.memory.categories_at_end_by_dtype) {
      o << category_sep << category;
      const char* dtype_sep = " ";
      for (const auto& [dtype, bytes] : dtypes) {
        o << dtype_sep << dtype << " " << human_bytes(bytes);
        dtype_sep = ", ";
      }
      category_sep = "; ";
    }
    o << "  (live at the end)\n";
  }
  if (r.autocast_comparison.present) {
    const AutocastComparison& c = r.autocast_comparison;
    o << "  no autocast  ";
    if (c.raised_at >= 0)
      o << "the program raises " << c.raised_kind << " at " << statement_ref(c.raised_at) << ": " << c.raised_message;
    else
      o << "saved " << human_bytes(c.saved_bytes_without) << ", peak " << human_bytes(c.peak_bytes_without)
        << ", graph-only " << human_bytes(c.graph_only_bytes_without);
    o << "  (autocast blocks run as plain statements)\n";
  }
  if (!r.errors.empty()) {
    o << "  errors       " << r.errors.size() << ":";
    for (const auto& e : r.errors) o << " " << statement_ref(e.statement) << " " << st.red(e.kind);
    o << "\n";
  }
  if (!r.expect.empty()) {
    auto failures = check_expect(r);
    o << "  expect       " << (failures.empty() ? st.green("all facts hold") : st.red(std::to_string(failures.size()) + " facts differ")) << "\n";
    // Each differing fact as `agtrace check` states it, even with --quiet: a count alone
    // sends the user to another command to learn which.
    for (const CheckFailure& f : failures)
      o << "               " << f.describe() << "\n";
  }
  if (opt.quiet) return;

  // ---- program
  o << "\n" << st.bold("Program") << "\n";
  for (const auto& s : r.statements) {
    std::string status = s.status == "ok" ? st.green(pad("ok", 8)) : s.status == "error" ? st.red(pad("error", 8)) : st.dim(pad("not run", 8));
    o << "  " << lpad(statement_ref(s.index), 5) << " " << status << s.source;
    if (!s.block.empty()) o << st.dim("   (" + s.block + ")");
    if (s.runs > 1) o << st.dim("   x" + std::to_string(s.runs));
    o << "\n";
  }
  if (!r.printed.empty()) {
    o << "\n" << st.bold("Printed") << "\n";
    for (const auto& p : r.printed) o << "  " << p << "\n";
  }

  // ---- errors
  if (!r.errors.empty()) {
    o << "\n" << st.bold("Errors") << "\n";
    for (const auto& e : r.errors) {
      o << "  " << statement_ref(e.statement) << " " << st.red(e.kind) << " (" << e.phase
        << (e.caught ? ", caught by try" : ", ended the program") << ")\n";
      o << "      " << e.message << "\n";
      if (e.kind == "saved_tensor_modified") {
        o << "      " << e.facts.value("node", std::string("?")) << "." << e.facts.value("attribute", std::string("?"))
          << " was saved at " << statement_ref(e.facts.value("saved_at", -1)) << " at version "
          << e.facts.value("expected_version", 0) << "; it was edited in place at "
          << statement_ref(e.facts.value("modified_at", -1)) << " and is now at version "
          << e.facts.value("found_version", 0) << "\n";
      } else if (e.kind == "saved_tensors_freed") {
        o << "      " << e.facts.value("node", std::string("?")) << "." << e.facts.value("attribute", std::string("?"))
          << " was released by the backward at " << statement_ref(e.facts.value("released_at", -1))
          << " (no retain_graph=True)\n";
      } else if (!e.facts.empty()) {
        o << "      facts: " << e.facts.dump() << "\n";
      }
    }
  }

  // ---- walks
  // A node already printed, here or in an earlier walk, is named, not expanded: the walks of
  // a model's many named tensors share their subtrees, and printing each again made the
  // report grow with (names x depth).
  std::map<int64_t, const std::string*> shown_in;  // node id -> the walk that printed it
  std::string line, text;  // a node's lines, and a piece of one, reused from node to node
  for (const auto& w : r.walks) {
    o << "\n" << st.bold("Walk of " + w.key) << st.dim("  (captured at " + statement_ref(w.statement) + ")") << "\n";
    struct Frame {
      int64_t id;
      int depth;
    };
    std::vector<Frame> stack{{w.nodes.empty() ? -1 : w.nodes.front(), 1}};
    while (!stack.empty()) {
      Frame f = stack.back();
      stack.pop_back();
      auto it = r.nodes.find(f.id);
      if (it == r.nodes.end()) continue;
      const NodeSnapshot& n = it->second;
      // A chain of thousands of ops would indent by thousands of columns (a report
      // quadratic in the program's length): past kMaxWalkIndent levels the indentation
      // stays put and each node line names its depth instead.
      constexpr int kMaxWalkIndent = 40;
      const size_t indent = static_cast<size_t>(std::min(f.depth, kMaxWalkIndent)) * 2;
      line.assign(indent, ' ');
      if (f.depth > kMaxWalkIndent) {
        line += "[depth ";
        integer(line, f.depth);
        line += "] ";
      }
      const auto seen = shown_in.emplace(n.id, &w.key);
      if (!seen.second) {
        const std::string where = seen.first->second == &w.key ? "above" : "see the walk of " + *seen.first->second;
        const std::string variable = n.variable.empty() ? "" : " (" + n.variable + ")";
        st.dim_to(line, n.name.str() + " #" + std::to_string(n.id) + variable + " (" + where + ")");
        line += '\n';
        o.write(line.data(), static_cast<std::streamsize>(line.size()));
        continue;
      }
      st.bold_to(line, n.name.str());
      text.assign(" #");
      integer(text, n.id);
      st.dim_to(line, text);
      if (!n.variable.empty()) line += " (" + n.variable + ")";
      if (!n.wraps.empty()) line += " (wraps " + n.wraps + ")";
      if (n.saved_bytes > 0) {
        line += "  keeps ";
        line += human_bytes(n.saved_bytes);
      }
      line += '\n';
      for (const auto& s : n.saved) {
        line.append(indent + 4, ' ');
        text.clear();
        saved_line_to(text, s, storage_name);
        if (s.is_tensor && s.defined && s.released) st.dim_to(line, text);
        else line += text;
        line += '\n';
      }
      o.write(line.data(), static_cast<std::streamsize>(line.size()));
      for (size_t i = n.next.size(); i-- > 0;)
        if (n.next[i].node >= 0) stack.push_back({n.next[i].node, f.depth + 1});
    }
  }

  // ---- gradients
  if (!r.grads.empty()) {
    o << "\n" << st.bold("Gradients") << "\n";
    for (const auto& g : r.grads) {
      o << "  " << pad(g.name, 10) << dtype_short(g.dtype) << nlohmann::json(g.shape).dump();
      if (opt.values && !g.values.empty()) {
        o << "  [";
        for (size_t i = 0; i < g.values.size(); ++i) o << (i ? ", " : "") << float_repr(g.values[i]);
        o << "]";
      }
      if (opt.values && g.values_elided > 0) o << "  (" << g.values_elided << " values, beyond --values-limit)";
      o << "\n";
    }
  }

  // ---- memory by statement
  o << "\n" << st.bold("Memory by statement") << "  (bytes live after the statement, peak inside it)\n";
  o << "  " << pad("stmt", 7) << lpad("live", 10) << lpad("peak", 10) << lpad("temps", 10) << "  categories\n";
  for (const auto& m : r.memory_by_statement) {
    line.assign("  ");
    text.clear();
    text_lines::statement_ref(text, m.index);
    padded(line, text, 7);
    right_aligned_integer(line, m.live_after, 10);
    right_aligned_integer(line, m.peak_inside, 10);
    right_aligned_integer(line, m.temporary_bytes, 10);
    line += "  ";
    bool first = true;
    for (const auto& [k, v] : m.categories) {
      if (!first) line += ", ";
      line += std::string_view(k);
      line += ' ';
      integer(line, v);
      first = false;
    }
    line += '\n';
    o.write(line.data(), static_cast<std::streamsize>(line.size()));
  }

  // ---- lifetimes
  o << "\n" << st.bold("Storage lifetimes") << "\n";
  o << "  " << pad("storage", 24) << lpad("bytes", 8) << "  " << pad("freed", 8) << "held by\n";
  for (const auto& s : r.storages) {
    line.assign("  ");
    padded(line, storage_name(s.id), 24);
    right_aligned_integer(line, s.bytes, 8);
    line += "  ";
    text.clear();
    if (s.freed) text_lines::statement_ref(text, s.freed_at);
    else text += "alive";
    padded(line, text, 8);
    if (s.holders.empty()) st.dim_to(line, "temporary");
    for (size_t i = 0; i < s.holders.size(); ++i) {
      if (i) line += "; ";
      line += s.holders[i].str();
    }
    line += '\n';
    o.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
  if (!r.saved.empty()) {
    o << "\n" << st.bold("Saved values") << "\n";
    for (const auto& s : r.saved) {
      line.assign("  ");
      padded(line, s.what.str(), 34);
      text.clear();
      integer(text, s.bytes);
      text += " B";
      right_aligned(line, text, 8);
      line += "  on ";
      line += storage_name(s.storage_id);
      line += "  saved at ";
      text_lines::statement_ref(line, s.saved_at);
      if (s.released_at >= 0) {
        line += ", released at ";
        text_lines::statement_ref(line, s.released_at);
      } else {
        line += ", alive";
      }
      line += '\n';
      o.write(line.data(), static_cast<std::streamsize>(line.size()));
    }
  }
  o << report_account_text(r);  // issue #4: accounting, why saved, what-if, reconciliation
  o << report_events_text(r);   // issue #4: timeline, checkpoints, hooks warnings
}

}  // namespace agtrace
