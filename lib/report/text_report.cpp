// The report for people: a one-screen summary first, then the program, the walks with
// each node's saved values, errors with their facts, lifetimes and byte accounting.
#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "interp/value.hpp"
#include "report/report.hpp"
#include "report/text_lines.hpp"

namespace agtrace {

std::string human_bytes(int64_t bytes) { return std::string(text_lines::HumanBytes(bytes).view()); }

namespace {

using text_lines::HumanBytes;
using text_lines::integer;
using text_lines::Lines;
using text_lines::padded;
using text_lines::right_aligned;
using text_lines::right_aligned_integer;

struct Style {
  bool on;
  // `s` appended to `out`, wrapped in the style's escape codes when on (no temporary string:
  // the report's per-node and per-row lines are built in one reused buffer).
  template <typename Out>
  void bold_to(Out& out, std::string_view s) const { wrap_to(out, "\x1b[1m", s); }
  template <typename Out>
  void dim_to(Out& out, std::string_view s) const { wrap_to(out, "\x1b[2m", s); }
  template <typename Out>
  void wrap_to(Out& out, const char* code, std::string_view s) const {
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

const char* dtype_short(DType d) {
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
void saved_line_to(Lines& line, const SavedSnapshot& s, const StorageNames& storage_name) {
  const size_t start = line.size();
  line += "_saved_";
  line += s.attr.str();
  text_lines::pad_from(line, start, 24);
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
  text_lines::pad_from(line, shape_start, 14);
  right_aligned(line, HumanBytes(s.bytes).view(), 9);
  line += "  ";
  if (!s.hooks.empty()) {
    // Saved under hooks (issue #4): what the hooks keep; unpack builds a new object.
    if (s.hooks == "checkpoint") {
      line += "checkpoint: nothing kept, recomputed when needed";
    } else if (s.released) {
      line += "saved under ";
      line += s.hooks.str();
      line += " hooks";
    } else {
      line += s.hooks.str();
      line += " hooks keep ";
      line += HumanBytes(s.packed_bytes).view();
      line += " (";
      storage_name.append_to(line, s.packed_storage_id);
      line += ')';
    }
    line += ", unpacks as a new object";
  } else if (s.from_python_number) {
    line += "a Python number as a 0-d tensor";
  } else if (!s.is_output) {
    // An input bound to no name is an intermediate (or a view) on some op's storage.
    if (s.same_object_as.empty()) {
      line += "an unnamed tensor on ";
      storage_name.append_to(line, s.storage_id);
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
      storage_name.append_to(line, s.storage_id);
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
  // A name's uses are counted by what the name is made of, not by its text: an op's storage
  // is named by (allocating op, statement) — statement_ref prints every negative statement
  // but -2 as "setup" — and a leaf's by its declared name. A pair of pointer and number is
  // the key, instead of a name built and hashed per storage (that was most of this
  // constructor's time on a 10,000-op chain). The maps are only counted, never iterated:
  // their order does not reach the report.
  struct Key {
    const std::string* allocated_by;
    int statement;  // kLeaf for a leaf
    bool operator==(const Key& o) const { return allocated_by == o.allocated_by && statement == o.statement; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.allocated_by) * 31 + std::hash<int>()(k.statement);
    }
  };
  constexpr int kLeaf = INT_MIN;
  const auto is_leaf = [](const std::string& by) { return by.size() >= 5 && std::memcmp(by.data(), "leaf ", 5) == 0; };
  // A leaf whose name holds '@' could read like an op's name (relu@[3]): then uses are
  // counted by the names' text.
  bool by_text = false;
  int64_t last_id = -1;
  for (const StorageLifetime& s : r.storages) {
    const std::string& by = s.allocated_by.str();
    if (s.id >= 0 && is_leaf(by) && by.find('@', 5) != std::string::npos) by_text = true;
    last_id = std::max(last_id, s.id);
  }
  by_id_.resize(static_cast<size_t>(last_id + 1));  // once: grown id by id, it touched twice the memory
  std::unordered_map<Key, int, KeyHash> uses;
  std::unordered_map<std::string, int> uses_by_text;
  if (!by_text) uses.reserve(r.storages.size());
  for (const StorageLifetime& s : r.storages) {
    if (s.id < 0) continue;
    Name n;
    n.allocated_by = &s.allocated_by.str();
    n.statement = s.allocated_at;
    n.leaf = is_leaf(*n.allocated_by);
    if (by_text) {
      std::string name;
      append_base(name, n);
      n.use = ++uses_by_text[name];
    } else {
      const int statement = n.leaf ? kLeaf : s.allocated_at == -2 || s.allocated_at >= 0 ? s.allocated_at : -1;
      n.use = ++uses[Key{n.allocated_by, statement}];
    }
    by_id_[static_cast<size_t>(s.id)] = n;
  }
}

void write_report_text(std::ostream& o, const RunResult& r, const TextOptions& opt) {
  Style st{opt.color};
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
    std::string status = s.status == "ok" ? st.green(text_lines::padded_text("ok", 8))
                         : s.status == "error" ? st.red(text_lines::padded_text("error", 8))
                                               : st.dim(text_lines::padded_text("not run", 8));
    o << "  " << text_lines::right_aligned_text(statement_ref(s.index), 5) << " " << status << s.source;
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
  Lines out(o);
  const StorageNames storage_name(r);  // after the summary: -q prints no storage
  std::map<int64_t, const std::string*> shown_in;  // node id -> the walk that printed it
  for (const auto& w : r.walks) {
    out += '\n';
    st.bold_to(out, "Walk of " + w.key);
    st.dim_to(out, "  (captured at " + statement_ref(w.statement) + ")");
    out.end_line();
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
      out.append(indent, ' ');
      if (f.depth > kMaxWalkIndent) {
        out += "[depth ";
        integer(out, f.depth);
        out += "] ";
      }
      const auto seen = shown_in.emplace(n.id, &w.key);
      if (!seen.second) {
        const std::string where = seen.first->second == &w.key ? "above" : "see the walk of " + *seen.first->second;
        const std::string variable = n.variable.empty() ? "" : " (" + n.variable + ")";
        st.dim_to(out, n.name.str() + " #" + std::to_string(n.id) + variable + " (" + where + ")");
        out.end_line();
        continue;
      }
      st.bold_to(out, n.name.str());
      char id_text[24] = " #";
      st.dim_to(out, std::string_view(id_text, static_cast<size_t>(write_decimal(id_text + 2, n.id) - id_text)));
      if (!n.variable.empty()) {
        out += " (";
        out += n.variable.str();
        out += ')';
      }
      if (!n.wraps.empty()) {
        out += " (wraps ";
        out += n.wraps.str();
        out += ')';
      }
      if (n.saved_bytes > 0) {
        out += "  keeps ";
        out += HumanBytes(n.saved_bytes).view();
      }
      out.end_line();
      for (const auto& s : n.saved) {
        out.append(indent + 4, ' ');
        const bool dim = st.on && s.is_tensor && s.defined && s.released;
        if (dim) out += "\x1b[2m";
        saved_line_to(out, s, storage_name);
        if (dim) out += "\x1b[0m";
        out.end_line();
      }
      for (size_t i = n.next.size(); i-- > 0;)
        if (n.next[i].node >= 0) stack.push_back({n.next[i].node, f.depth + 1});
    }
  }

  // ---- gradients
  if (!r.grads.empty()) {
    std::ostringstream g_text;
    g_text << "\n" << st.bold("Gradients") << "\n";
    for (const auto& g : r.grads) {
      g_text << "  " << text_lines::padded_text(g.name, 10) << dtype_short(g.dtype) << nlohmann::json(g.shape).dump();
      if (opt.values && !g.values.empty()) {
        g_text << "  [";
        for (size_t i = 0; i < g.values.size(); ++i) g_text << (i ? ", " : "") << float_repr(g.values[i]);
        g_text << "]";
      }
      if (opt.values && g.values_elided > 0) g_text << "  (" << g.values_elided << " values, beyond --values-limit)";
      g_text << "\n";
    }
    out += g_text.str();
  }

  // ---- memory by statement
  out += '\n';
  st.bold_to(out, "Memory by statement");
  out += "  (bytes live after the statement, peak inside it)\n";
  out += "  ";
  padded(out, "stmt", 7);
  right_aligned(out, "live", 10);
  right_aligned(out, "peak", 10);
  right_aligned(out, "temps", 10);
  out += "  categories\n";
  for (const auto& m : r.memory_by_statement) {
    out += "  ";
    const size_t ref_start = out.size();
    text_lines::statement_ref(out, m.index);
    text_lines::pad_from(out, ref_start, 7);
    right_aligned_integer(out, m.live_after, 10);
    right_aligned_integer(out, m.peak_inside, 10);
    right_aligned_integer(out, m.temporary_bytes, 10);
    out += "  ";
    bool first = true;
    for (const auto& [k, v] : m.categories) {
      if (!first) out += ", ";
      out += std::string_view(k);
      out += ' ';
      integer(out, v);
      first = false;
    }
    out.end_line();
  }

  // ---- lifetimes
  out += '\n';
  st.bold_to(out, "Storage lifetimes");
  out += "\n  ";
  padded(out, "storage", 24);
  right_aligned(out, "bytes", 8);
  out += "  ";
  padded(out, "freed", 8);
  out += "held by\n";
  for (const auto& s : r.storages) {
    out += "  ";
    const size_t name_start = out.size();
    storage_name.append_to(out, s.id);
    text_lines::pad_from(out, name_start, 24);
    right_aligned_integer(out, s.bytes, 8);
    out += "  ";
    const size_t freed_start = out.size();
    if (s.freed) text_lines::statement_ref(out, s.freed_at);
    else out += "alive";
    text_lines::pad_from(out, freed_start, 8);
    if (s.holders.empty()) st.dim_to(out, "temporary");
    for (size_t i = 0; i < s.holders.size(); ++i) {
      if (i) out += "; ";
      out += s.holders[i].str();
    }
    out.end_line();
  }
  if (!r.saved.empty()) {
    out += '\n';
    st.bold_to(out, "Saved values");
    out += '\n';
    for (const auto& s : r.saved) {
      out += "  ";
      padded(out, s.what.str(), 34);
      char bytes_text[32];
      char* end = std::to_chars(bytes_text, bytes_text + 24, s.bytes).ptr;
      *end++ = ' ';
      *end++ = 'B';
      right_aligned(out, std::string_view(bytes_text, static_cast<size_t>(end - bytes_text)), 8);
      out += "  on ";
      storage_name.append_to(out, s.storage_id);
      out += "  saved at ";
      text_lines::statement_ref(out, s.saved_at);
      if (s.released_at >= 0) {
        out += ", released at ";
        text_lines::statement_ref(out, s.released_at);
      } else {
        out += ", alive";
      }
      out.end_line();
    }
  }
  write_account_text(out, r);  // issue #4: accounting, why saved, what-if, reconciliation
  write_events_text(out, r);   // issue #4: timeline, checkpoints, hooks warnings
  out.flush();  // here, where a write error can be thrown (Lines' destructor drops it)
}

}  // namespace agtrace
