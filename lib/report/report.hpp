// Printers of a RunResult: JSON (the spec's stable core and more, described by
// schema/report.schema.json), text for people, and Graphviz DOT.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "interp/result.hpp"
#include "report/json_text.hpp"
#include "report/text_lines.hpp"
#include "util/profile.hpp"

namespace agtrace {

nlohmann::ordered_json report_json(const RunResult& r, bool with_values);

// The JSON report as text, as report_json(r, with_values).dump(2) writes it, byte for byte,
// without building its long arrays as trees: the event timeline, the nodes, the storage and
// saved-value lifetimes and the memory by statement grow with the program (for a 10,000-op
// chain they are 85 % of the document), and their trees were most of the memory a long
// program's JSON report took (issue #6). `skeleton` is report_json_skeleton's document, with
// a placeholder string in each of those arrays' places (callers may add keys, e.g.
// "profile"); dump_report_json writes each array element by element in its place.
//
// `analysis` is analyse_memory(r) where the caller has it: given to both calls, the skeleton's
// accountant totals and the streamed per-node and per-value records come from one analysis
// (made in each, it was 8 % of a 10,000-op chain's `agtrace run --format json` under
// callgrind). Left out, each call makes its own.
struct MemoryAnalysis;
using SharedAnalysis = std::shared_ptr<const MemoryAnalysis>;
nlohmann::ordered_json report_json_skeleton(const RunResult& r, bool with_values, const SharedAnalysis& analysis = nullptr);
std::string dump_report_json(const nlohmann::ordered_json& skeleton, const RunResult& r, bool with_values,
                             const SharedAnalysis& analysis = nullptr);
// Where a streamed report's text goes, piece by piece (a file, stdout, a minifier).
using ReportSink = std::function<void(std::string_view)>;
// The same text as dump_report_json, handed to `sink` a megabyte or so at a time as it is
// written, so the report is never whole in memory.
void write_report_json(const nlohmann::ordered_json& skeleton, const RunResult& r, bool with_values,
                       const ReportSink& sink, const SharedAnalysis& analysis = nullptr);

struct TextOptions {
  bool color = false;
  bool values = false;
  bool quiet = false;  // summary only
};
std::string report_text(const RunResult& r, const TextOptions& opt);
// The same text written to `out` as it is made.
void write_report_text(std::ostream& out, const RunResult& r, const TextOptions& opt);

// What the picture shows (agtrace run --at, --no-saved, --max-nodes, --edges).
struct DotOptions {
  static constexpr int kAtPeak = -3;  // after the statement when the most saved bytes were alive
  static constexpr int kAtEnd = -2;   // at the end of the program
  int at = kAtPeak;                   // or a statement index: the graph after it ran
  bool saved = true;                  // the saved tensors' rows in each node's box
  int64_t max_nodes = 0;              // > 0: repeats folded, then the earliest nodes, to stay within it
  bool forward_edges = false;         // torchviz's direction, input -> consumer (default: next_functions)
};
std::string report_dot(const RunResult& r, const DotOptions& options = {});

// `agtrace run --profile` (lib/report/profile_report.cpp): the rows of util/profile for
// the run, as the report's "profile" key and as a text table. total_s: the run's wall time.
nlohmann::ordered_json report_profile_json(const RunResult& r, const std::vector<profile::Row>& rows, double total_s);
std::string report_profile_text(const RunResult& r, const std::vector<profile::Row>& rows, double total_s);

// The accountant's sections (lib/report/account_report.cpp, issue #4): the JSON report's
// "accountant" key and the text report's accounting, what-if and reconciliation tables.
// With `placeholders`, its per-node and per-saved-value arrays are the strings below, for
// dump_report_json to write as text in their places (account_node_json / account_saved_json
// give one record as a tree, write_account_*_json the same record as text).
// `analysis`: analyse_memory(r) where the caller has it.
nlohmann::ordered_json report_account_json(const RunResult& r, bool placeholders = false,
                                           const MemoryAnalysis* analysis = nullptr);
extern const char* const kAccountNodesPlaceholder;
extern const char* const kAccountSavedPlaceholder;
struct NodeMemory;
struct SavedExplained;
nlohmann::ordered_json account_node_json(const NodeMemory& n);
nlohmann::ordered_json account_saved_json(const SavedExplained& s);
void write_account_node_json(json_text::Writer& out, const json_text::Layout& layout, const NodeMemory& n);
void write_account_saved_json(json_text::Writer& out, const json_text::Layout& layout, const SavedExplained& s);
void write_account_text(text_lines::Lines& out, const RunResult& r);

// The event timeline, saved-tensor hooks and checkpoint sections (lib/report/events_report.cpp,
// issue #4): adds "events", "hook_warnings", "checkpoints", "checkpoint_comparison" and
// memory.hooks_* to the JSON report; the text report's timeline, checkpoints and warnings.
void add_events_json(nlohmann::ordered_json& j, const RunResult& r, bool events_placeholder = false);
// One record of the "events" array.
nlohmann::ordered_json event_json(const EventRecord& e);
// The same record as text, laid out as event_json(e).dump(2) is when its first line sits at
// the layout's indentation (report/json_text.hpp), written into `out` without a json value.
void write_event_json(json_text::Writer& out, const json_text::Layout& layout, const EventRecord& e);
// The string report_json_skeleton puts where "events" goes.
extern const char* const kEventsPlaceholder;
void write_events_text(text_lines::Lines& out, const RunResult& r);

// Storages as people know them: a leaf's by its name, any other by the op or backward node
// and the statement that allocated it (relu@[3], MmBackward0@[7]); a name given to several
// storages (one statement run in a loop) gets its ordinal from the second on: mul@[3] (2).
class StorageNames {
 public:
  explicit StorageNames(const RunResult& r);
  // The name, or "an unrecorded storage" for an id no storage has.
  std::string operator()(int64_t storage_id) const {
    std::string out;
    append_to(out, storage_id);
    return out;
  }
  // The same text appended to `out` (a std::string or the text report's Lines): names are
  // made where they are printed, from two fields, not kept as a string per storage.
  template <typename Out>
  void append_to(Out& out, int64_t storage_id) const {
    const Name* n = find(storage_id);
    if (!n) {
      out += std::string_view(kUnknown);
      return;
    }
    append_base(out, *n);
    if (n->use > 1) {
      out += " (";
      text_lines::integer(out, n->use);
      out += ')';
    }
  }

 private:
  static constexpr const char* kUnknown = "an unrecorded storage";
  struct Name {
    const std::string* allocated_by = nullptr;  // null: no storage has this id
    int statement = 0;                          // allocated_at, as printed by statement_ref
    int use = 0;                                // 2 and on: printed as " (use)"
    bool leaf = false;                          // "leaf x": printed as "x"
  };
  // The name without its use count: "x" for "leaf x", else "op@statement".
  template <typename Out>
  static void append_base(Out& out, const Name& n) {
    const std::string& by = *n.allocated_by;
    if (n.leaf) {
      out += std::string_view(by).substr(5);
    } else {
      out += std::string_view(by);
      out += '@';
      text_lines::statement_ref(out, n.statement);
    }
  }
  const Name* find(int64_t storage_id) const {
    if (storage_id < 0 || static_cast<size_t>(storage_id) >= by_id_.size()) return nullptr;
    const Name& n = by_id_[static_cast<size_t>(storage_id)];
    // "leaf " with no name, used once, is the empty text, which reads as unrecorded.
    if (!n.allocated_by || (n.leaf && n.allocated_by->size() == 5 && n.use == 1)) return nullptr;
    return &n;
  }
  std::vector<Name> by_id_;
};

// A statement as the reports print it: "[3]", "setup" (before the program), "end".
std::string statement_ref(int statement);

// Human byte units: "416 B", "1.5 KiB", "3.0 MiB".
std::string human_bytes(int64_t bytes);

// One fact of `expect` that differs from what happened.
struct CheckFailure {
  std::string fact;      // "walk of y", "printed[1]", "errors[0].kind", "memory.peak_bytes"
  std::string expected;
  std::string actual;
  // "walk of y: expected [...], got [...]": how run and check state it.
  std::string describe() const { return fact + ": expected " + expected + ", got " + actual; }
};
std::vector<CheckFailure> check_expect(const RunResult& r);
// What `agtrace check` also fails on: an error raised outside a `try` block that the
// scenario's expect.errors does not name (statement and kind), and `unsupported` raised
// outside a `try` block even when named: the program did not run as PyTorch runs it.
std::vector<CheckFailure> check_raised(const RunResult& r);
// expect.walk's comparison: "..." stands for any run of nodes, the empty run included.
bool walk_matches(const std::vector<std::string>& expected, const std::vector<std::string>& actual);

}  // namespace agtrace
