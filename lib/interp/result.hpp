// What a run produced, as plain data: the printers (text, JSON, DOT) read only this, so
// they never touch live tensors and the order of everything is fixed by creation ids.
#pragma once
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>
#include <stdexcept>
#include <string_view>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "account/event_log.hpp"  // EventRecord, EventLog (issue #4 timeline)
#include "account/extras.hpp"  // issue #4 accountant (helper C)
#include "tensor/tensor.hpp"
#include "util/chunked_vector.hpp"
#include "util/inline_vector.hpp"
#include "util/id_map.hpp"
#include "util/interned_list.hpp"
#include "util/interned_string.hpp"

namespace agtrace {

// Text fields interned: a long graph has a snapshot per node, and these texts repeat
// (issue #6).
struct SavedSnapshot {
  InternedString attr;       // without the `_saved_` prefix
  // Flags and small numbers together (a snapshot per saved value: no padding between them).
  bool is_tensor = false;
  bool defined = false;      // tensor saved (false: reads as None)
  bool is_output = false;    // saved output: unpacking gives a new object on the same storage
  bool from_python_number = false;       // a Python scalar wrapped as a 0-d tensor
  bool released = false;
  DType dtype = DType::Float32;
  int saved_at = -1;
  int released_at = -1;
  InternedString value;      // non-tensor: Python repr of the value
  // Tensors:
  int64_t tensor_id = -1;
  InternedString same_object_as;            // name bound to the very object saved (saved inputs)
  InternedList shares_with;  // names bound to tensors on the same storage
  InternedShape shape;
  int64_t bytes = 0;
  int64_t storage_id = -1;
  int64_t storage_bytes = 0;
  int64_t saved_version = 0;
  InternedString why;        // which gradient needs it
  // Saved under saved-tensor hooks (empty: no hooks): what the hooks keep.
  InternedString hooks;
  int64_t packed_bytes = 0;
  int64_t packed_storage_id = -1;
};

// One entry of a node's next_functions.
struct NodeEdge {
  int64_t node = -1;  // node id; -1 for None
  int input_nr = 0;
  bool operator==(const NodeEdge& o) const { return node == o.node && input_nr == o.input_nr; }
};

struct NodeSnapshot {
  int64_t id = 0;
  InternedString name;
  // The edges as one list, not one of ids and one of input numbers, and with the saved
  // values inline for the first two edges and the first saved value (most nodes have no
  // more): a snapshot is made per backward node, and each vector was a heap block (issue #6).
  InlineVector<NodeEdge, 2> next;
  InlineVector<SavedSnapshot, 1> saved;
  int created_at = -1;
  InternedString variable;         // AccumulateGrad: the leaf's name
  InternedString wraps;            // CopySlices: the in-place node it runs on the view's slice
  int64_t variable_tensor_id = -1;
  bool released = false;
  int released_at = -1;
  int64_t saved_bytes = 0;         // bytes of its saved tensors (held or released)
};

struct WalkRecord {
  std::string key;                 // name of the root tensor or "statement N"
  int statement = -1;              // when captured; -2 at the end of the program
  std::vector<int64_t> nodes;      // DFS order, each node once
};

struct ErrorRecord {
  int statement = -1;
  int iteration = -1;
  std::string phase;               // forward | backward
  std::string kind;
  std::string message;
  nlohmann::json facts = nlohmann::json::object();
  bool caught = false;             // inside a try block
};

struct StatementResult {
  int index = 0;
  std::string source;
  std::string status = "not_run";  // ok | error | not_run
  int runs = 0;                    // > 1 inside repeat blocks
  std::string block;               // enclosing blocks, e.g. "try" or "no_grad"
};

struct StorageLifetime {
  int64_t id = 0;
  int64_t bytes = 0;
  InternedString allocated_by;     // op, or backward node
  // Every holder seen at statement ends, in first-seen order. Interned (issue #6): most
  // storages are held by one list for their whole life (a name, then a saved value), so the
  // record takes the current list's pointer instead of a vector allocated per storage.
  InternedList holders;
  int allocated_at = -1;
  int freed_at = -1;               // statement that freed it (-1: setup); see `freed`
  bool in_backward = false;
  bool freed = false;
};

struct SavedLifetime {
  int64_t id = 0;
  int64_t node_id = 0;
  InternedString what;             // "MmBackward0._saved_self"
  int64_t bytes = 0;
  int64_t storage_id = -1;
  int saved_at = -1;
  int released_at = -1;            // -1: alive at the end
};

// Bytes by holder category, listed in name order as the reports print them. At most one
// entry per category (six), kept inline: a statement end used to build a std::map of them
// (three allocations per statement of a 10,000-op chain; issue #6). A record is kept per
// statement run, so it holds only the bytes and a bit per category present (56 bytes; as
// six (name, bytes) pairs it was 104, and the per-statement records made the 10,000-op
// chain 4 % slower, measured by leaving them out): the names are the six fixed ones.
class CategoryBytes {
 public:
  using Entry = std::pair<const char*, int64_t>;  // name (a static string), bytes
  // The category names in name order (the holder categories of lib/account/accountant.hpp).
  static constexpr const char* kNames[] = {"grad", "graph_only", "leaf_input", "leaf_param", "named", "other"};
  static constexpr size_t kMax = sizeof(kNames) / sizeof(kNames[0]);
  // Adds a category not present yet; std::logic_error for a name that is not one of kNames.
  void add(std::string_view name, int64_t bytes) { set_at(index_of(name), bytes); }
  // The same by position in kNames (the accountant's, which knows its categories' order).
  void set_at(size_t index, int64_t bytes) {
    bytes_[index] = bytes;
    present_ = static_cast<uint8_t>(present_ | (1u << index));
  }
  // Like std::map::at: std::out_of_range for a category not present.
  int64_t at(std::string_view name) const {
    for (size_t i = 0; i < kMax; ++i)
      if (name == kNames[i] && has(i)) return bytes_[i];
    throw std::out_of_range("no category " + std::string(name));
  }
  size_t count(std::string_view name) const {
    for (size_t i = 0; i < kMax; ++i)
      if (name == kNames[i]) return has(i) ? 1 : 0;
    return 0;
  }
  size_t size() const { return static_cast<size_t>(__builtin_popcount(present_)); }
  bool empty() const { return present_ == 0; }

  // Iterates the categories present, in name order, as (name, bytes) pairs by value.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Entry;
    const_iterator(const CategoryBytes* c, size_t i) : c_(c), i_(i) { skip(); }
    Entry operator*() const { return {kNames[i_], c_->bytes_[i_]}; }
    const_iterator& operator++() {
      ++i_;
      skip();
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    void skip() {
      while (i_ < kMax && !c_->has(i_)) ++i_;
    }
    const CategoryBytes* c_;
    size_t i_;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, kMax); }

 private:
  static size_t index_of(std::string_view name) {
    for (size_t i = 0; i < kMax; ++i)
      if (name == kNames[i]) return i;
    throw std::logic_error("CategoryBytes: no holder category '" + std::string(name) + "'");
  }
  bool has(size_t i) const { return (present_ >> i) & 1u; }
  int64_t bytes_[kMax] = {};
  uint8_t present_ = 0;  // bit i: kNames[i] is present
};

struct StatementMemory {
  int index = 0;
  int64_t live_after = 0;
  int64_t peak_inside = 0;
  int64_t temporary_bytes = 0;     // allocated and freed inside the statement
  CategoryBytes categories;        // bytes by category after the statement
};

struct GradRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<double> values;
  int64_t values_elided = 0;  // elements whose values --values-limit left out (then `values` is empty)
};

struct LeafRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;
  int64_t bytes = 0;
  std::vector<double> values;
  int64_t values_elided = 0;  // elements whose values --values-limit left out (then `values` is empty)
};

struct MemorySummary {
  int64_t peak_bytes = 0;
  int peak_statement = -1;
  int64_t saved_bytes = 0;
  int64_t saved_unique_bytes = 0;
  int64_t graph_only_bytes = 0;
  int graph_only_statement = -1;
  CategoryBytes categories_at_end;
  // The same bytes by dtype: category -> dtype name -> bytes of the storages alive at the end.
  std::map<std::string, std::map<std::string, int64_t>> categories_at_end_by_dtype;
  // Saved-tensor hooks: bytes the hooks keep for values saved under them (an fp16 copy is
  // half), of which on the host (save_on_cpu); saved bytes checkpoint blocks did not keep.
  int64_t hooks_saved_bytes = 0;
  int64_t hooks_packed_bytes = 0;
  int64_t host_bytes = 0;
  int64_t checkpoint_avoided_bytes = 0;
  // Autocast: the cast copies autocast made (storages, their bytes) and the bytes saved for
  // backward on them -- memory that exists only because of the autocast blocks.
  int64_t autocast_copies = 0;
  int64_t autocast_copy_bytes = 0;
  int64_t autocast_saved_bytes = 0;
};

// ---- Events, saved-tensor hooks and checkpointing (issue #4) -------------------------
// (The timeline's records: account/event_log.hpp.)
// An in-place edit of a saved tensor that no error reported, because the value was saved
// under hooks (PyTorch skips the version check then) or by a checkpoint block.
struct HookWarning {
  int statement = -1;        // where the value was unpacked
  std::string what;          // "SinBackward0._saved_self"
  std::string hooks;
  int64_t expected_version = 0, found_version = 0;
  int saved_at = -1;
  std::string message;
};

// One execution of a checkpoint block.
struct CheckpointRecord {
  int first_statement = -1, last_statement = -1;
  std::vector<std::string> inputs, outputs;
  int64_t packs = 0;             // saved values the body's ops handed to checkpoint's hooks
  int64_t packed_bytes = 0;      // their bytes: saved bytes the checkpoint did not keep
  int recomputations = 0;
  std::vector<int> recomputed_at;  // statements during which the body ran again
};

// A run's memory figures beside those of the same program run again without a feature.
struct WithWithout {
  bool present = false;
  int64_t saved_bytes_with = 0, saved_bytes_without = 0;
  int64_t peak_bytes_with = 0, peak_bytes_without = 0;
  int64_t graph_only_bytes_with = 0, graph_only_bytes_without = 0;
};

// The same program with every checkpoint block run as a plain function call.
struct CheckpointComparison : WithWithout {};

// The same program with every autocast block's body run as plain statements.
struct AutocastComparison : WithWithout {
  // Without autocast the program may raise where it ran (a float16 tensor meeting a
  // float32 weight): the first error outside try, its statement (-1 when none).
  int raised_at = -1;
  std::string raised_kind, raised_message;
};

struct RunResult {
  std::string file, scenario, description, device;
  std::vector<LeafRecord> leaves;
  std::vector<StatementResult> statements;
  std::vector<std::string> printed;
  std::vector<WalkRecord> walks;           // in order of capture; one per key
  IdMap<NodeSnapshot> nodes;               // every node a walk reaches, latest snapshot (by node id)
  std::vector<ErrorRecord> errors;
  std::vector<GradRecord> grads;
  std::vector<StorageLifetime> storages;
  std::vector<SavedLifetime> saved;
  // One record per statement run, in chunks: appended at every statement end, and as a
  // vector each doubling copied every record (issue #6).
  ChunkedVector<StatementMemory> memory_by_statement;
  MemorySummary memory;
  AccountExtras account;                   // allocator model, peak location, saved categories (issue #4)
  EventLog events;                         // timeline (issue #4), packed (issue #6)
  std::vector<HookWarning> hook_warnings;
  std::vector<CheckpointRecord> checkpoints;
  CheckpointComparison checkpoint_comparison;
  AutocastComparison autocast_comparison;
  // Storage ids of autocast's cached casts of float32 leaves requiring grad, ascending.
  std::vector<int64_t> autocast_leaf_casts;
  bool raised = false;                     // an error outside try ended the program
  nlohmann::json expect;
};

}  // namespace agtrace
