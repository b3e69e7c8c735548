// The memory accountant: an observer of storage and saved-value events. It turns them
// into lifetimes, live bytes per statement, peaks and totals; it never looks at tensors.
// What holds each storage at a statement end is told to it by the interpreter (which
// knows the names), as a HolderScan.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "interp/result.hpp"
#include "tensor/events.hpp"

namespace agtrace {

// Categories, in priority order: a storage counts once, in the first that applies.
//   grad          a leaf's .grad
//   leaf_param    a leaf tensor that requires grad, bound to a name
//   leaf_input    a leaf tensor that does not require grad, bound to a name
//   named         a non-leaf tensor bound to a name
//   graph_only    held only by saved values (or AccumulateGrad's leaf) of live nodes
//   other         alive through some other reference (e.g. inside a tuple)
struct HolderScan {
  std::map<int64_t, std::vector<std::string>> holders;  // storage id -> who holds it
  std::map<int64_t, std::string> category;             // storage id -> category
};
// The categories by priority (lower wins) and their names in reports.
enum HolderCategory : int { kGrad, kLeafParam, kLeafInput, kNamed, kGraphOnly, kOther };
inline constexpr const char* kHolderCategories[] = {"grad", "leaf_param", "leaf_input",
                                                    "named", "graph_only", "other"};
// A storage whose holders or category changed since the previous statement end
// (HolderTracker::commit, lib/interp/holder_tracker.hpp).
struct HolderChange {
  int64_t storage_id = -1;
  std::vector<std::string> holders;  // in the full scan's order; empty: nothing holds it now
  std::string category;              // empty when nothing holds it
};

class Accountant : public EventSink {
 public:
  void on_event(const Event& e) override;
  void begin_statement(int index);
  // raised: the statement raised, so its saves do not count in saved_bytes (spec).
  // changes: the storages whose holders or category changed during the statement.
  void end_statement(int index, bool raised, const std::vector<HolderChange>& changes);
  // Hands the figures to `out`, moving the large records (timeline, lifetimes) rather
  // than copying them: call once, at the end of the run.
  void finish(RunResult& out);
  int64_t live_bytes() const { return live_; }

 private:
  struct Storage {
    StorageLifetime life;
    std::set<std::string> holder_set;
  };
  std::map<int64_t, Storage> storages_;
  std::map<int64_t, SavedLifetime> saved_;
  std::map<int64_t, int> saved_statement_;  // saved id -> statement
  std::set<int> raised_statements_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int peak_statement_ = -1;
  int current_ = -1;
  int64_t statement_peak_ = 0;
  int64_t statement_temp_ = 0;
  std::set<int64_t> allocated_in_statement_;
  std::vector<StatementMemory> by_statement_;
  int64_t graph_only_peak_ = 0;
  int graph_only_statement_ = -1;
  std::map<std::string, int64_t> last_categories_;

  // ---- Allocator model, peak location, saved categories (issue #4, accountant) -------
  void model_alloc(int64_t storage_id, int64_t bytes);
  void model_free(int64_t storage_id);
  void apply_holder_changes(const std::vector<HolderChange>& changes);
  void finish_extras(RunResult& out) const;
  std::map<int64_t, int64_t> model_blocks_;  // live storage id -> rounded block bytes
  int64_t model_live_ = 0;
  AllocatorModel model_;
  int64_t model_graph_only_peak_ = 0;
  PeakLocation peak_at_;
  std::map<int64_t, std::string> saved_category_;
  // What holds each storage and its category as of the last statement end, kept from the
  // changes alone (issue #6): per-category totals instead of a sum over every storage.
  std::map<int64_t, std::vector<std::string>> holders_now_;
  std::map<int64_t, std::string> category_now_;
  struct CategoryTotal {
    int64_t storages = 0, bytes = 0, block_bytes = 0;
  };
  std::map<std::string, CategoryTotal> category_totals_;
  // Saved values not yet released, by the storage they hold, and those saved during the
  // statement in progress: the only ones whose category can change at a statement end.
  std::map<int64_t, std::vector<int64_t>> unreleased_by_storage_;
  std::vector<int64_t> saved_in_statement_;

  // ---- Events timeline, saved-tensor hooks, checkpoint packs (issue #4) -------------
  // Kept apart from the figures above: record_event() sees every event first.
  void record_event(const Event& e);
  // Saves the saved_bytes total leaves out: values handed to a checkpoint block's hooks
  // (PyTorch's outer hooks see 0 packs) and those of its recomputation.
  bool excluded_from_saved_bytes(int64_t saved_id) const { return checkpoint_saves_.count(saved_id) > 0; }
  void finish_events(RunResult& out);
  std::vector<EventRecord> events_;
  std::vector<HookWarning> hook_warnings_;
  std::set<int64_t> warned_saves_;
  std::set<int64_t> checkpoint_saves_, recompute_saves_;
  struct HookedSave {
    std::string hooks;
    int64_t bytes = 0, packed_bytes = 0;
    bool host = false;
  };
  std::map<int64_t, HookedSave> hooked_saves_;
};

}  // namespace agtrace
