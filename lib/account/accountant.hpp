// The memory accountant: an observer of storage and saved-value events. It turns them
// into lifetimes, live bytes per statement, peaks and totals; it never looks at tensors.
// What holds each storage at a statement end is told to it by the interpreter (which
// knows the names), as a HolderScan.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "interp/result.hpp"
#include "tensor/events.hpp"
#include "util/chunked_vector.hpp"
#include "util/inline_vector.hpp"
#include "util/interned_list.hpp"

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
inline constexpr int kCategoryCount = 6;
// The categories in their names' alphabetical order (the order CategoryBytes keeps).
inline constexpr HolderCategory kCategoriesByName[] = {kGrad, kGraphOnly, kLeafInput, kLeafParam, kNamed, kOther};
static_assert([] {
  for (size_t i = 0; i < CategoryBytes::kMax; ++i)
    if (std::string_view(kHolderCategories[kCategoriesByName[i]]) != CategoryBytes::kNames[i]) return false;
  return sizeof(kCategoriesByName) / sizeof(kCategoriesByName[0]) == CategoryBytes::kMax;
}(), "CategoryBytes::kNames lists the holder categories in kCategoriesByName's order");
// A storage whose holders or category changed since the previous statement end
// (HolderTracker::commit, lib/interp/holder_tracker.hpp).
struct HolderChange {
  int64_t storage_id = -1;
  InternedList holders;  // in the full scan's order; empty: nothing holds it now
  // Null or empty when nothing holds it; else one of kHolderCategories (the tracker's), or
  // the same text (a test's). A pointer: copying the name into every change cost ~150
  // instructions per operation on a long chain (issue #6).
  const char* category = nullptr;
  int category_index = -1;           // the same as a HolderCategory when the tracker knows it (-1: read `category`)
};

class Accountant final : public EventSink {
 public:
  void on_event(const Event& e) override;
  void begin_statement(int index);
  // raised: the statement raised, so its saves do not count in saved_bytes (spec).
  // changes: the storages whose holders or category changed during the statement.
  void end_statement(int index, bool raised, std::vector<HolderChange> changes) {
    end_statement_with(index, raised, changes);
  }
  // The same, leaving `changes` empty with its capacity, for the caller to fill again (the
  // interpreter's statements: one vector, not one allocation per statement; issue #6).
  void end_statement_with(int index, bool raised, std::vector<HolderChange>& changes);
  // Hands the figures to `out`, moving the large records (timeline, lifetimes) rather
  // than copying them: call once, at the end of the run.
  // storage_dtypes: the dtype of each storage alive at the end (for the bytes by dtype).
  void finish(RunResult& out, const std::map<int64_t, DType>& storage_dtypes = {});
  int64_t live_bytes() const { return live_; }
  // A cuda run: the allocator model counts cuda storages only. The CPU tensors of such a run
  // (a Python number wrapped, an index made without device=, a save_on_cpu pack) take no
  // block of PyTorch's CUDA caching allocator, so torch.cuda.memory_allocated never sees
  // them. On a CPU run the model counts every storage (what the program would take on a GPU).
  void set_model_device_only(bool device_only) { model_device_only_ = device_only; }

 private:
  // Storage and saved-value ids are dense creation-order counters (events.hpp), so the
  // records live in vectors indexed by id rather than in ordered maps (issue #6: a map
  // node per storage and per saved value, and their lookups, were a large part of a long
  // chain's per-op cost). Iterating a vector in index order is the ordered map's order.
  // A record per storage ever allocated, written when the storage is made: 96 bytes, the
  // fields ordered without padding (issue #6: 136 before, and on a long chain writing each
  // new record was a cache miss of its own).
  struct Storage {
    StorageLifetime life;       // life.holders: every holder seen, first-seen order
    uint64_t alloc_serial = 0;  // statement serial of the Alloc (temporaries: freed in the same one)
    InternedList holders_now;  // holders at the last statement end (with category_now)
    // Saved values not yet released that hold it: usually none or one, kept inside (a heap
    // block per saved storage otherwise; issue #6).
    InlineVector<int64_t, 1> unreleased;
    int category_now = -1;      // category at the last statement end (a HolderCategory); -1: none
    bool allocated = false;     // an Alloc was seen (the map this replaced held only those)
    // Counted by the allocator model (set_model_device_only): its rounded block is live from
    // the Alloc until life.freed.
    bool modelled = false;
  };
  struct Saved {
    SavedLifetime life;
    bool known = false;         // a Save was seen
    int category = -1;          // category of its storage at the last statement end while held
  };
  bool model_device_only_ = false;
  Storage& storage_slot(int64_t id);
  Storage* find_storage(int64_t id);
  const Storage* find_storage(int64_t id) const;
  Saved& saved_slot(int64_t id);
  Saved* find_saved(int64_t id);
  const Saved* find_saved(int64_t id) const;
  // By storage id and saved-value id (dense creation-order ids), in chunks (issue #6).
  ChunkedVector<Storage> storages_;
  ChunkedVector<Saved> saved_;
  std::set<int> raised_statements_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int peak_statement_ = -1;
  int current_ = -1;
  int64_t statement_peak_ = 0;
  int64_t statement_temp_ = 0;
  uint64_t statement_serial_ = 0;  // begin_statement calls so far
  ChunkedVector<StatementMemory> by_statement_;
  int64_t graph_only_peak_ = 0;
  int graph_only_statement_ = -1;

  // ---- Allocator model, peak location, saved categories (issue #4, accountant) -------
  void model_alloc(int64_t bytes);
  void model_free(const Storage& s);
  void apply_holder_changes(std::vector<HolderChange>& changes);
  void finish_extras(RunResult& out) const;
  int64_t model_live_ = 0;
  AllocatorModel model_;
  int64_t model_graph_only_peak_ = 0;
  PeakLocation peak_at_;     // its op is peak_op_
  InternedString peak_op_;
  // Per-category totals kept from the holder changes alone (issue #6), by HolderCategory.
  struct CategoryTotal {
    int64_t storages = 0, bytes = 0, block_bytes = 0;
  };
  CategoryTotal category_totals_[kCategoryCount];
  // Values saved during the statement in progress: with the storages whose category
  // changed, the only ones whose category can change at a statement end.
  std::vector<int64_t> saved_in_statement_;

  // ---- Events timeline, saved-tensor hooks, checkpoint packs (issue #4) -------------
  // Kept apart from the figures above: record_event() sees every event first.
  void record_event(const Event& e);
  void record_event_in_full(const Event& e, int64_t node_id, int64_t expected_version);
  // Saves the saved_bytes total leaves out: values handed to a checkpoint block's hooks
  // (PyTorch's outer hooks see 0 packs) and those of its recomputation.
  bool excluded_from_saved_bytes(int64_t saved_id) const { return checkpoint_saves_.count(saved_id) > 0; }
  bool in_raised_statement(const SavedLifetime& s) const { return raised_statements_.count(s.saved_at) > 0; }
  void finish_events(RunResult& out);
  EventLog events_;
  // Each event kind's index in events_, once looked up (record_event's common case).
  static constexpr uint8_t kNoKindSlot = 0xff;
  std::array<uint8_t, 8> kind_slots_ = {kNoKindSlot, kNoKindSlot, kNoKindSlot, kNoKindSlot,
                                        kNoKindSlot, kNoKindSlot, kNoKindSlot, kNoKindSlot};
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
