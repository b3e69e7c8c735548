#include "interp/holder_tracker.hpp"

#include <algorithm>
#include <cstddef>

#include "autograd/node.hpp"

namespace agtrace {

namespace {
constexpr int kNamePhase = 0, kGradPhase = 1, kGraphPhase = 2;
}  // namespace

void sort_unique_ids(std::vector<int64_t>& ids) {
  if (ids.size() < 2) return;
  if (ids.size() <= 32) {
    // A statement dirties a handful of storages: an insertion sort that drops repeats as
    // it goes costs less than std::sort's set-up (issue #6).
    size_t kept = 1;
    for (size_t i = 1; i < ids.size(); ++i) {
      const int64_t id = ids[i];
      size_t at = kept;
      while (at > 0 && ids[at - 1] > id) --at;
      if (at > 0 && ids[at - 1] == id) continue;  // a repeat
      for (size_t k = kept; k > at; --k) ids[k] = ids[k - 1];
      ids[at] = id;
      ++kept;
    }
    ids.resize(kept);
    return;
  }
  // A backward pass dirties the storages of every node it released (10,000 on a 10,000-op
  // chain), ids dense between the smallest and the largest: a bit per id in that range
  // orders and de-duplicates them in two linear passes, where std::sort took 0.6 % of the
  // chain's instructions (issue #6).
  const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  const int64_t first = *lo, span = *hi - *lo + 1;
  if (first < 0 || span / 16 > static_cast<int64_t>(ids.size())) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return;
  }
  std::vector<uint64_t> bits(static_cast<size_t>((span + 63) / 64), 0);
  for (int64_t id : ids) bits[static_cast<size_t>((id - first) >> 6)] |= uint64_t{1} << ((id - first) & 63);
  ids.clear();
  for (size_t w = 0; w < bits.size(); ++w)
    for (uint64_t m = bits[w]; m; m &= m - 1)
      ids.push_back(first + static_cast<int64_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(m))));
}

bool HolderTracker::Entry::operator<(const Entry& o) const {
  // Field by field; the labels, interned, are compared as text only when they differ.
  if (phase != o.phase) return phase < o.phase;
  if (order != o.order) return order < o.order;
  if (sub != o.sub) return sub < o.sub;
  if (label != o.label) return label.str() < o.label.str();
  return category < o.category;
}
bool HolderTracker::Entry::operator==(const Entry& o) const {
  return phase == o.phase && order == o.order && sub == o.sub && category == o.category && label == o.label;
}

HolderTracker::HolderTracker(std::function<std::string(int64_t)> label_of, Accountant* downstream)
    : label_of_(std::move(label_of)), downstream_(downstream) {}

void HolderTracker::attach() {
  if (attached_) return;
  previous_observer_ = object_observer();
  set_object_observer(this);
  attached_ = true;
  for (TensorImpl* t : live_tensors()) tensor_created(*t);
  for (autograd::Node* n : autograd::live_nodes()) node_created(*n);
}

void HolderTracker::detach() {
  if (!attached_) return;
  set_object_observer(previous_observer_);
  attached_ = false;
}

HolderTracker::~HolderTracker() { detach(); }

namespace {
template <typename T>
T& grow_to(ChunkedVector<T>& v, int64_t id) {
  v.grow_to(static_cast<size_t>(id) + 1);
  return v[static_cast<size_t>(id)];
}
template <typename T>
T* at_id(ChunkedVector<T>& v, int64_t id) {
  return id >= 0 && static_cast<size_t>(id) < v.size() ? &v[static_cast<size_t>(id)] : nullptr;
}
}  // namespace

namespace {
// Each tensor or node is queued once per commit (a flag, not a sort of the repeats).
template <typename State>
State& queue(ChunkedVector<State>& states, std::vector<int64_t>& dirty, int64_t id) {
  State& s = grow_to(states, id);
  if (!s.queued) {
    s.queued = true;
    dirty.push_back(id);
  }
  return s;
}
}  // namespace

HolderTracker::TensorState* HolderTracker::state_of(const TensorImpl& t) {
  const uint32_t slot = t.observer_slot;
  if (slot >= tensor_slots_.size()) return nullptr;
  TensorState& s = tensor_slots_[slot];
  return s.live == &t ? &s : nullptr;  // a slot another tracker gave: not this tracker's
}

void HolderTracker::queue_slot(uint32_t slot) {
  TensorState& s = tensor_slots_[slot];
  if (!s.queued) {
    s.queued = true;
    dirty_tensors_.push_back(slot);
  }
}

void HolderTracker::uncommit(TensorState& s) {
  if (!s.committed) return;
  if (s.storage_id >= 0) {
    StorageState* st = at_id(storages_, s.storage_id);
    if (st && st->present) --st->tensor_refs;
    dirty(s.storage_id);
  }
  if (s.grad_storage_id >= 0) remove_one(s.grad_storage_id, grad_entry(s.tensor_id, s.grad_label));
  s.grad_storage_id = -1;
  s.storage_id = -1;
  s.committed = false;
}
HolderTracker::NodeState& HolderTracker::queue_node(int64_t id) { return queue(nodes_, dirty_nodes_, id); }

void HolderTracker::tensor_created(TensorImpl& t) {
  uint32_t slot;
  if (!free_tensor_slots_.empty()) {  // a slot freed recently: still in the cache
    slot = free_tensor_slots_.back();
    free_tensor_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(tensor_slots_.size());
    tensor_slots_.emplace_back();
  }
  TensorState& s = tensor_slots_[slot];
  s = TensorState{};
  s.live = &t;
  s.tensor_id = t.id;
  t.observer_slot = slot;
  queue_slot(slot);
}

// What a dying tensor contributed is taken back now rather than at the commit (the counts
// end the same), so its slot can be reused as soon as no commit needs to look at it.
void HolderTracker::tensor_destroyed(TensorImpl& t) {
  TensorState* s = state_of(t);
  if (!s) return;
  const uint32_t slot = t.observer_slot;
  uncommit(*s);
  s->live = nullptr;
  t.observer_slot = UINT32_MAX;
  if (!s->queued) free_tensor_slots_.push_back(slot);
}
void HolderTracker::tensor_grad_changed(TensorImpl& t) {
  if (state_of(t)) queue_slot(t.observer_slot);
}
void HolderTracker::tensor_relabelled(const TensorImpl& t) {
  if (state_of(t)) queue_slot(t.observer_slot);
}
void HolderTracker::node_created(autograd::Node& n) { queue_node(n.id).live = &n; }
void HolderTracker::node_destroyed(autograd::Node& n) { queue_node(n.id).live = nullptr; }
void HolderTracker::node_changed(autograd::Node& n) { queue_node(n.id); }

void HolderTracker::on_event(const Event& e) {
  if (e.node_id >= 0) queue_node(e.node_id);
  if (downstream_) downstream_->on_event(e);
}

HolderTracker::StorageState& HolderTracker::storage(int64_t id) {
  StorageState& st = grow_to(storages_, id);
  st.present = true;
  return st;
}

HolderTracker::Entry HolderTracker::grad_entry(int64_t tensor_id, InternedString label) {
  return entry(kGradPhase, tensor_id, 0, label, kGrad);
}

void HolderTracker::add_one(int64_t storage_id, const Entry& entry) {
  auto& entries = storage(storage_id).entries;
  auto it = std::lower_bound(entries.begin(), entries.end(), entry,
                             [](const StorageState::Counted& a, const Entry& b) { return a.entry < b; });
  if (it != entries.end() && it->entry == entry)
    ++it->count;
  else
    entries.insert(it, {entry, 1});
  dirty(storage_id);
}

void HolderTracker::remove_one(int64_t storage_id, const Entry& entry) {
  StorageState* st = at_id(storages_, storage_id);
  if (!st || !st->present) return;
  auto& entries = st->entries;
  auto it = std::lower_bound(entries.begin(), entries.end(), entry,
                             [](const StorageState::Counted& a, const Entry& b) { return a.entry < b; });
  if (it != entries.end() && it->entry == entry && --it->count == 0) entries.erase(it);
  dirty(storage_id);
}

// A node holds the storages of its saved values that are still there (defined, not
// released; under hooks, what the hooks kept) and, for AccumulateGrad, its leaf's.
InternedString HolderTracker::saved_label(const autograd::Node& n, const autograd::SavedEntry& e) {
  const InternedString what = autograd::saved_name(n, e);
  for (const SavedLabel& l : saved_labels_)
    if (l.what == what) return l.label;
  const InternedString label = intern("saved " + what.str());
  if (saved_labels_.size() < 64) saved_labels_.push_back({what, label});  // a bound; programs use a handful
  return label;
}

void HolderTracker::node_contribution(const autograd::Node& n, InlineVector<Contributed, 1>& c) {
  c.clear();
  // A released node (Node::release_saved_values released every saved value) holds none:
  // its saved entries are not read again (issue #6: after a long chain's backward every
  // node is looked at here, and its entries were no longer in the cache).
  for (size_t i = 0; !n.released && i < n.saved.size(); ++i) {
    const autograd::SavedEntry& e = n.saved[i];
    if (!e.is_tensor || !e.var.defined || e.var.released) continue;
    if (Shared<Storage> st = e.var.held_storage())
      c.push_back({st->id, entry(kGraphPhase, n.id, i, saved_label(n, e), kGraphOnly)});
  }
  if (n.variable && n.variable->storage)
    c.push_back({n.variable->storage->id, entry(kGraphPhase, n.id, n.saved.size(), leaf_label_, kGraphOnly)});
}

// What the name at `position` (bound to `v`) holds: its tensor's storage, or those of the
// tensors inside a tuple or list.
void HolderTracker::name_contribution(Contribution& out, int64_t position, InternedString label, const Value& v) {
  if (v.kind == Value::Kind::Tensor) {
    const Tensor& t = v.t;
    if (!t->storage) return;
    out.push_back({t->storage->id, entry(kNamePhase, position, 0, label, name_category(*t))});
  } else if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) {
    for (const Value& item : v.items) name_contribution(out, position, label, item);
  }
}

void HolderTracker::commit(const std::map<std::string, Value>& names, std::vector<HolderChange>& changes,
                           uint64_t keys_version) {
  changes.clear();
  if (keys_version == 0 || keys_version != labels_keys_version_ || names.size() != labels_by_position_.size()) {
    labels_by_position_.clear();
    auto known = name_labels_.begin();
    for (const auto& entry : names) {
      while (known != name_labels_.end() && known->first < entry.first) ++known;
      if (known == name_labels_.end() || known->first != entry.first)
        known = name_labels_.emplace_hint(known, entry.first, intern("name " + entry.first));
      labels_by_position_.push_back(known->second);
    }
    labels_keys_version_ = keys_version;
  }
  // Names: a scope holds few, so they are looked at every time (a name's category also
  // follows its tensor's autograd state, which requires_grad_ or an in-place op can change).
  // Scratch vectors kept between statements (their capacity is reused; issue #6).
  Contribution& now = names_scratch_;
  now.clear();
  int64_t position = 0;
  for (const auto& entry : names) {
    name_contribution(now, position, labels_by_position_[static_cast<size_t>(position)], entry.second);
    ++position;
  }
  if (now != names_) {
    // Only what changed: a name still bound to the same tensor leaves its storage alone
    // (removing and re-adding it made every statement recompute that storage's holders).
    // Both lists are in name order, so position by position is enough; an entry that only
    // moved is removed and added again, which leaves its count as it was.
    Contribution& gone = gone_scratch_;
    Contribution& came = came_scratch_;
    gone.clear();
    came.clear();
    const size_t common = std::min(names_.size(), now.size());
    for (size_t i = 0; i < common; ++i)
      if (!(names_[i] == now[i])) {
        gone.push_back(names_[i]);
        came.push_back(now[i]);
      }
    gone.insert(gone.end(), names_.begin() + static_cast<std::ptrdiff_t>(common), names_.end());
    came.insert(came.end(), now.begin() + static_cast<std::ptrdiff_t>(common), now.end());
    remove(gone);
    add(came);
    names_.swap(now);
  }

  // (The order tensors and nodes are looked at does not matter: only counts change.)
  for (uint32_t slot : dirty_tensors_) {
    TensorState* ts = &tensor_slots_[slot];
    ts->queued = false;
    uncommit(*ts);
    if (!ts->live) {  // died since it was queued: its slot is free now
      free_tensor_slots_.push_back(slot);
      continue;
    }
    const TensorImpl& t = *ts->live;
    if (t.storage) {
      ts->storage_id = t.storage->id;
      ++storage(ts->storage_id).tensor_refs;
      dirty(ts->storage_id);
    }
    if (t.grad && t.grad->storage) {
      ts->grad_storage_id = t.grad->storage->id;
      ts->grad_label = intern("grad of " + label_of_(t.id));
      add_one(ts->grad_storage_id, grad_entry(ts->tensor_id, ts->grad_label));
    }
    ts->committed = true;
  }
  dirty_tensors_.clear();

  for (int64_t id : dirty_nodes_) {
    NodeState* ns = at_id(nodes_, id);
    if (!ns) continue;
    ns->queued = false;
    remove(ns->contribution);
    ns->contribution.clear();
    if (!ns->live) continue;
    node_contribution(*ns->live, ns->contribution);
    add(ns->contribution);
  }
  dirty_nodes_.clear();

  sort_unique_ids(dirty_storages_);
  changes.reserve(dirty_storages_.size());
  for (int64_t id : dirty_storages_) {
    StorageState* stp = at_id(storages_, id);
    if (!stp || !stp->present) continue;
    StorageState& st = *stp;
    std::vector<InternedString>& holders = holders_scratch_;  // reused: no allocation per storage
    holders.clear();
    int category = -1;
    for (const StorageState::Counted& held : st.entries) {
      const Entry& e = held.entry;
      if (std::find(holders.begin(), holders.end(), e.label) == holders.end()) holders.push_back(e.label);
      if (category < 0 || e.category < category) category = e.category;
    }
    // "Unnamed tensor" only for a storage nothing else holds (e.g. inside a tuple).
    if (holders.empty() && st.tensor_refs > 0) {
      holders.push_back(unnamed_label_);
      category = kOther;
    }
    const InternedList list(holders);  // equal lists are one pointer: no copy per change
    if (list != st.holders || category != st.category) {
      // Filled in place: built aside and copied, its two 8-byte halves written apart were read
      // back as one 16-byte load, which waited for both stores (perf: a fifth of this
      // function's samples on that copy; issue #6).
      HolderChange& c = changes.emplace_back();
      c.storage_id = id;
      c.holders = list;
      if (category >= 0) {
        c.category = kHolderCategories[category];
        c.category_index = category;
      }
      st.holders = list;
      st.category = category;
    }
    if (st.entries.empty() && st.tensor_refs <= 0) st = StorageState{};
  }
  dirty_storages_.clear();
}

HolderScan HolderTracker::state() const {
  HolderScan scan;
  for (size_t id = 0; id < storages_.size(); ++id) {
    const StorageState& st = storages_[id];
    if (!st.present || st.category < 0) continue;
    std::vector<std::string>& hs = scan.holders[static_cast<int64_t>(id)];
    for (const InternedString& h : st.holders) hs.push_back(h.str());
    scan.category[static_cast<int64_t>(id)] = kHolderCategories[st.category];
  }
  return scan;
}

}  // namespace agtrace
