// What holds each storage, kept up to date from changes (issue #6).
//
// The accountant needs, at every statement end, who holds each live storage (a name, a
// leaf's .grad, a node's saved value, an AccumulateGrad's leaf, or only some unnamed
// tensor object) and the storage's category. Walking every live tensor and node after every
// statement made that quadratic in the length of a program that keeps its graph. The
// tracker instead remembers what each object contributed at the last statement end and,
// at the next one, looks again only at the objects that changed: tensors created,
// destroyed, relabelled or given another .grad; nodes created or destroyed, or named by a
// save/release/pack/unpack event; and the names in scope (few, so looked at every time).
// Only the storages those objects touch are recomputed, and only the ones whose holders or
// category differ are handed to the accountant.
//
// The holders of a storage are listed in the order the full scan lists them (names in
// name order, then .grad holders in tensor creation order, then saved values and
// AccumulateGrad leaves in node creation order, "unnamed tensor" only when nothing else
// holds it): Interpreter::scan_holders is that full scan, kept as the reference the
// tracker is checked against (RunOptions::verify_holders, AGTRACE_VERIFY_HOLDERS=1).
#pragma once
#include <cstdint>
#include <functional>
#include <type_traits>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "account/accountant.hpp"
#include "interp/value.hpp"
#include "tensor/events.hpp"
#include "tensor/tensor.hpp"
#include "util/chunked_vector.hpp"
#include "util/inline_vector.hpp"

namespace agtrace {

// The category of a tensor bound to a name: a non-leaf is "named", a leaf "leaf_param" when
// it requires grad, else "leaf_input".
inline HolderCategory name_category(const TensorImpl& t) {
  return !t.is_leaf() ? kNamed : t.requires_grad() ? kLeafParam : kLeafInput;
}

// Sorts ids ascending and drops repeats (the commit's dirty storage ids; exposed for tests).
void sort_unique_ids(std::vector<int64_t>& ids);

class HolderTracker : public ObjectObserver, public EventSink {
 public:
  // label_of: the name reports use for a tensor object (its latest bound name).
  // downstream: the accountant, which every event is forwarded to (a direct call: the
  // accountant is final, and 6 events per op went through a second virtual call, issue #6).
  HolderTracker(std::function<std::string(int64_t)> label_of, Accountant* downstream);

  // Starts observing (and adopts the tensors and nodes alive now); detach() or the
  // destructor stops.
  void attach();
  void detach();
  ~HolderTracker() override;
  HolderTracker(const HolderTracker&) = delete;
  HolderTracker& operator=(const HolderTracker&) = delete;

  // ObjectObserver
  void tensor_created(TensorImpl& t) override;
  void node_changed(autograd::Node& n) override;
  void tensor_destroyed(TensorImpl& t) override;
  void tensor_grad_changed(TensorImpl& t) override;
  void node_created(autograd::Node& n) override;
  void node_destroyed(autograd::Node& n) override;
  // EventSink: events naming a node change what its saved values hold.
  void on_event(const Event& e) override;
  // A tensor was bound to a name (its label, used by "grad of <label>", may change).
  void tensor_relabelled(const TensorImpl& t);

  // Brings the index up to date with `names` (the names in scope) and the objects that
  // changed, and returns the storages whose holders or category differ from the last
  // call, in storage id order.
  std::vector<HolderChange> commit(const std::map<std::string, Value>& names) {
    std::vector<HolderChange> changes;
    commit(names, changes);
    return changes;
  }
  // The same, into `changes` (cleared first), whose capacity a caller reuses. `keys_version`
  // (not 0) is a number the caller changes whenever a name may have left `names` (the
  // scope's epoch): while it and the count of names stay the same, the names are the same,
  // in the same order, and their labels are not looked up again (issue #6).
  void commit(const std::map<std::string, Value>& names, std::vector<HolderChange>& changes,
              uint64_t keys_version = 0);
  // Every storage held now, as the full scan reports it.
  HolderScan state() const;
  // Tensor state slots in use or free (for tests: they are recycled, not one per tensor id).
  size_t tensor_slots() const { return tensor_slots_.size(); }

 private:
  // One holder of one storage. Ordered as the full scan lists holders.
  // 24 bytes (issue #6: 40 with int fields and their padding).
  struct Entry {
    int64_t order = 0;  // name: position in name order; .grad: tensor id; graph: node id
    InternedString label;  // equal labels, equal pointers
    int32_t sub = 0;    // graph: index of the saved value (the leaf comes after them)
    uint8_t phase = 0;  // 0 a name, 1 a .grad, 2 a saved value or AccumulateGrad's leaf
    uint8_t category = 0;  // a HolderCategory (lower wins)
    bool operator<(const Entry& o) const;
    bool operator==(const Entry& o) const;
  };
  static Entry entry(int phase, int64_t order, size_t sub, InternedString label, int category) {
    return Entry{order, label, static_cast<int32_t>(sub), static_cast<uint8_t>(phase), static_cast<uint8_t>(category)};
  }
  struct Contributed {  // a holder of a storage
    int64_t storage_id;
    Entry entry;
    bool operator==(const Contributed& o) const { return storage_id == o.storage_id && entry == o.entry; }
    bool operator!=(const Contributed& o) const { return !(*this == o); }
  };
  using Contribution = std::vector<Contributed>;
  struct StorageState {
    bool present = false;  // something contributes to it, or it had holders at the last commit
    // holder -> how many contributions name it, sorted as the full scan lists holders
    // (a storage has few holders, almost always one: a sorted vector with room for one
    // inside, not a map node or a heap block each).
    struct Counted {
      Entry entry;
      int count;
    };
    InlineVector<Counted, 1> entries;
    int64_t tensor_refs = 0;       // live tensor objects over this storage
    InternedList holders;              // as of the last commit
    int category = -1;                 // as of the last commit; -1: nothing held it
  };
  // A live tensor's state, in a slot recycled when the tensor dies (its index kept in
  // TensorImpl::observer_slot). Kept by tensor id instead, a state was written for every
  // tensor ever made, a new cache line each time, read back when the tensor died (issue
  // #6). A tensor holds at most one storage through its .grad, so that contribution is two
  // fields, not a Contribution.
  struct TensorState {
    TensorImpl* live = nullptr;    // the tensor in this slot (null: dead, slot free once not queued)
    int64_t tensor_id = -1;
    bool queued = false;           // in dirty_tensors_
    bool committed = false;        // what it contributed at the last commit is below
    int64_t storage_id = -1;
    int64_t grad_storage_id = -1;  // its .grad's storage at the last commit (-1: none)
    InternedString grad_label;     // "grad of <label>" then
  };
  static_assert(std::is_trivially_destructible_v<TensorState>);
  static Entry grad_entry(int64_t tensor_id, InternedString label);  // a .grad holder
  struct NodeState {
    autograd::Node* live = nullptr;
    bool queued = false;           // in dirty_nodes_
    // What it contributed at the last commit: a node saves one tensor or none, mostly, so
    // the first is kept inside (issue #6: a heap block per saving node otherwise).
    InlineVector<Contributed, 1> contribution;
  };

  template <typename Contributions>
  void add(const Contributions& c) {
    for (const auto& [storage_id, entry] : c) add_one(storage_id, entry);
  }
  template <typename Contributions>
  void remove(const Contributions& c) {
    for (const auto& [storage_id, entry] : c) remove_one(storage_id, entry);
  }
  void add_one(int64_t storage_id, const Entry& entry);
  void remove_one(int64_t storage_id, const Entry& entry);
  void dirty(int64_t storage_id) { dirty_storages_.push_back(storage_id); }
  void node_contribution(const autograd::Node& n, InlineVector<Contributed, 1>& out);  // replaces out's contents
  void name_contribution(Contribution& out, int64_t position, InternedString label, const Value& v);
  // Holder labels are interned (issue #6): entries, holder lists and the accountant's
  // records hold pointers, so they are compared and copied without touching the strings.
  static InternedString intern(const std::string& label) { return InternedString(label); }
  // "saved <node>._saved_<attr>", remembered for the few (node, attribute) pairs a program has.
  InternedString saved_label(const autograd::Node& n, const autograd::SavedEntry& e);
  struct SavedLabel {
    InternedString what;  // "<node>._saved_<attr>" (events.hpp's saved_value_name)
    InternedString label;
  };
  std::vector<SavedLabel> saved_labels_;
  // "name <name>" of every name ever in scope, in the scope's (sorted) order: when the scope's
  // keys change, a merge of the two sorted lists finds each name's label again (a linear
  // search per name made a recorded nanoGPT step's 188 statements cost 9 million
  // instructions in string compares).
  std::map<std::string, InternedString, std::less<>> name_labels_;
  std::vector<InternedString> labels_by_position_;  // "name <name>" of each name at the last commit
  uint64_t labels_keys_version_ = 0;
  const InternedString leaf_label_ = intern("leaf of AccumulateGrad");
  const InternedString unnamed_label_ = intern("unnamed tensor");
  StorageState& storage(int64_t id);
  // The slot of a tensor this tracker follows (null: none, e.g. made before attach()).
  TensorState* state_of(const TensorImpl& t);
  void queue_slot(uint32_t slot);
  // Takes back what the state contributed at the last commit (its storage's count, its
  // .grad's holder).
  void uncommit(TensorState& s);
  NodeState& queue_node(int64_t id);

  std::function<std::string(int64_t)> label_of_;
  Accountant* downstream_;
  bool attached_ = false;
  ObjectObserver* previous_observer_ = nullptr;

  // Indexed by id: tensor, node and storage ids are dense creation-order counters
  // (events.hpp), so id-indexed chunks replace hash maps (issue #6).
  ChunkedVector<TensorState> tensor_slots_;
  std::vector<uint32_t> free_tensor_slots_;  // slots of dead tensors, not queued
  ChunkedVector<NodeState> nodes_;
  Contribution names_;                                     // what the names contributed
  ChunkedVector<StorageState> storages_;
  std::vector<uint32_t> dirty_tensors_;  // tensor slots
  std::vector<int64_t> dirty_nodes_, dirty_storages_;
  std::vector<InternedString> holders_scratch_;
  Contribution names_scratch_, gone_scratch_, came_scratch_;  // commit's, reused
};

}  // namespace agtrace
