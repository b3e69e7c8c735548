#include "account/accountant.hpp"

#include <algorithm>
#include <stdexcept>

namespace agtrace {

namespace {
int category_index(const std::string& name) {
  for (int i = 0; i < kCategoryCount; ++i)
    if (name == kHolderCategories[i]) return i;
  throw std::logic_error("unknown holder category '" + name + "'");
}
}  // namespace

namespace {
// The record of id `id` in an id-indexed table, grown on demand.
template <typename T>
T& slot(ChunkedVector<T>& v, int64_t id) {
  v.grow_to(static_cast<size_t>(id) + 1);
  return v[static_cast<size_t>(id)];
}
// The record of id `id` if `present` says it holds one, else null.
template <typename T, typename Present>
T* find_slot(ChunkedVector<T>& v, int64_t id, Present present) {
  if (id < 0 || static_cast<size_t>(id) >= v.size() || !present(v[static_cast<size_t>(id)])) return nullptr;
  return &v[static_cast<size_t>(id)];
}
}  // namespace

Accountant::Storage& Accountant::storage_slot(int64_t id) { return slot(storages_, id); }
Accountant::Storage* Accountant::find_storage(int64_t id) {
  return find_slot(storages_, id, [](const Storage& s) { return s.allocated; });
}
const Accountant::Storage* Accountant::find_storage(int64_t id) const {
  return const_cast<Accountant*>(this)->find_storage(id);
}
Accountant::Saved& Accountant::saved_slot(int64_t id) { return slot(saved_, id); }
Accountant::Saved* Accountant::find_saved(int64_t id) {
  return find_slot(saved_, id, [](const Saved& s) { return s.known; });
}
const Accountant::Saved* Accountant::find_saved(int64_t id) const {
  return const_cast<Accountant*>(this)->find_saved(id);
}

void Accountant::begin_statement(int index) {
  current_ = index;
  statement_peak_ = live_;
  statement_temp_ = 0;
  ++statement_serial_;  // storages allocated from now on are this statement's
}

void Accountant::end_statement_with(int index, bool raised, std::vector<HolderChange>& changes) {
  if (raised) raised_statements_.insert(index);
  apply_holder_changes(changes);
  changes.clear();
  StatementMemory& m = by_statement_.emplace_back();  // filled in place
  m.index = index;
  m.live_after = live_;
  m.peak_inside = statement_peak_;
  m.temporary_bytes = statement_temp_;
  for (size_t i = 0; i < CategoryBytes::kMax; ++i) {
    const CategoryTotal& t = category_totals_[kCategoriesByName[i]];
    if (t.storages > 0) m.categories.set_at(i, t.bytes);
  }
  const CategoryTotal& go = category_totals_[kGraphOnly];
  const int64_t graph_only = go.storages > 0 ? go.bytes : 0;
  if (graph_only > graph_only_peak_) {
    graph_only_peak_ = graph_only;
    graph_only_statement_ = index;
  }
  model_graph_only_peak_ = std::max(model_graph_only_peak_, go.block_bytes);
}

namespace {
// A holder category's position in CategoryBytes (name order).
size_t category_slot(int category) {
  for (size_t i = 0; i < CategoryBytes::kMax; ++i)
    if (kCategoriesByName[i] == category) return i;
  throw std::logic_error("unknown holder category");
}
}  // namespace

void Accountant::finish(RunResult& out, const std::map<int64_t, DType>& storage_dtypes) {
  // The bytes by category at the end: of the storages still alive, by the category their
  // holders gave them at the last statement end. A block's exit after that statement can
  // still free some (autocast's cast cache at the outermost exit), so these are counted
  // here, not taken from that statement's record.
  std::array<int64_t, CategoryBytes::kMax> at_end{};
  std::array<bool, CategoryBytes::kMax> present{};
  for (Storage& st : storages_) {
    if (!st.allocated || st.life.freed || st.category_now < 0) continue;
    const size_t slot = category_slot(st.category_now);
    at_end[slot] += st.life.bytes;
    present[slot] = true;
    auto d = storage_dtypes.find(st.life.id);
    if (d != storage_dtypes.end())
      out.memory.categories_at_end_by_dtype[kHolderCategories[st.category_now]][dtype_name(d->second)] +=
          st.life.bytes;
  }
  for (size_t i = 0; i < CategoryBytes::kMax; ++i)
    if (present[i]) out.memory.categories_at_end.set_at(i, at_end[i]);
  // Moved out: finish_extras below still reads each lifetime's bytes and freed flag, and
  // each saved value's storage and statement.
  out.storages.reserve(storages_.size());
  for (Storage& st : storages_)
    if (st.allocated) out.storages.push_back(std::move(st.life));
  std::vector<bool> unique_storages(storages_.size(), false);
  int64_t saved_bytes = 0, unique_bytes = 0;
  for (Saved& rec : saved_) {
    if (!rec.known) continue;
    const int64_t id = rec.life.id;
    if (recompute_saves_.count(id)) continue;  // a checkpoint recomputation's temporary graph
    const SavedLifetime& s = rec.life;
    if (excluded_from_saved_bytes(id) || in_raised_statement(s)) {
      out.saved.push_back(std::move(rec.life));
      continue;
    }
    saved_bytes += s.bytes;
    if (const Storage* st = find_storage(s.storage_id)) {
      if (!unique_storages[static_cast<size_t>(s.storage_id)]) {
        unique_storages[static_cast<size_t>(s.storage_id)] = true;
        unique_bytes += st->life.bytes;
      }
    }
    out.saved.push_back(std::move(rec.life));
  }
  out.memory_by_statement = std::move(by_statement_);
  out.memory.peak_bytes = peak_;
  out.memory.peak_statement = peak_statement_;
  out.memory.saved_bytes = saved_bytes;
  out.memory.saved_unique_bytes = unique_bytes;
  out.memory.graph_only_bytes = graph_only_peak_;
  out.memory.graph_only_statement = graph_only_statement_;
  finish_events(out);
  finish_extras(out);
}

// ---- Events timeline, saved-tensor hooks, checkpoint packs (issue #4) ---------------

namespace {
const char* event_kind_name(Event::Kind k) {
  switch (k) {
    case Event::Kind::Alloc: return "alloc";
    case Event::Kind::Free: return "free";
    case Event::Kind::Save: return "save";
    case Event::Kind::Release: return "release";
    case Event::Kind::VersionBump: return "version_bump";
    case Event::Kind::Pack: return "pack";
    case Event::Kind::Unpack: return "unpack";
    case Event::Kind::Recompute: return "recompute";
  }
  return "?";
}
const InternedString& interned_kind_name(Event::Kind k) {
  static const InternedString names[] = {
      InternedString(event_kind_name(Event::Kind::Alloc)),       InternedString(event_kind_name(Event::Kind::Free)),
      InternedString(event_kind_name(Event::Kind::Save)),        InternedString(event_kind_name(Event::Kind::Release)),
      InternedString(event_kind_name(Event::Kind::VersionBump)), InternedString(event_kind_name(Event::Kind::Pack)),
      InternedString(event_kind_name(Event::Kind::Unpack)),      InternedString(event_kind_name(Event::Kind::Recompute))};
  return names[static_cast<int>(k)];
}

std::string hidden_edit_message(const Event& e, int saved_at) {
  std::string what = e.what + " was modified in place after it was saved";
  if (saved_at >= 0) what += " (statement " + std::to_string(saved_at) + ")";
  what += ": version " + std::to_string(e.expected_version) + " at save, " + std::to_string(e.version) +
          " at unpack. Under saved-tensor hooks PyTorch does not check versions, so no error was raised; ";
  if (e.hooks == "fp16" || e.hooks == "bf16")
    what += "backward used the copy packed at save time";
  else if (e.hooks == "checkpoint")
    what += "the checkpoint recomputation used the edited inputs";
  else
    what += "backward used the edited values";
  return what;
}
}  // namespace

static_assert(static_cast<size_t>(Event::Kind::Recompute) + 1 == 8, "kind_slots_ has a slot per event kind");

// Inline in on_event, below: every event passes here first (issue #6); events with hooks
// or versions go on to record_event_in_full.
inline void Accountant::record_event(const Event& e) {
  const RunPosition& pos = run_position();
  // Save/release/pack/unpack: the node holding the value; other events in backward: the
  // node running.
  const int64_t node_id = e.node_id >= 0 ? e.node_id : (pos.in_backward ? pos.backward_node : -1);
  const int64_t expected_version = e.kind == Event::Kind::Unpack ? e.expected_version : 0;
  if (e.hooks.empty() && e.version == 0 && expected_version == 0 && e.packed_bytes == 0 &&
      e.packed_storage_id == -1) {
    // The common case (no hooks, no versions): packed directly, the kind's index looked up
    // once per kind.
    uint8_t& kind = kind_slots_[static_cast<size_t>(e.kind)];
    if (kind == kNoKindSlot) kind = events_.kind_index(interned_kind_name(e.kind));
    events_.push_plain(kind, current_op_interned(), e.what, e.storage_id, e.bytes, e.saved_id, node_id,
                       pos.statement, pos.recompute_statement, pos.in_backward);
    return;
  }
  record_event_in_full(e, node_id, expected_version);
}

void Accountant::record_event_in_full(const Event& e, int64_t node_id, int64_t expected_version) {
  const RunPosition& pos = run_position();
  EventRecord r;
  r.kind = interned_kind_name(e.kind);
  r.statement = pos.statement;
  r.recompute_statement = pos.recompute_statement;
  r.in_backward = pos.in_backward;
  r.op = current_op_interned();
  r.storage_id = e.storage_id;
  r.bytes = e.bytes;
  r.saved_id = e.saved_id;
  r.node_id = node_id;
  r.what = e.what;
  if (!e.hooks.empty()) r.hooks = e.hooks;
  r.version = e.version;
  r.expected_version = expected_version;
  r.packed_bytes = e.packed_bytes;
  r.packed_storage_id = e.packed_storage_id;
  events_.push_back(r);

  if (e.kind == Event::Kind::Save && !e.hooks.empty()) {
    if (e.hooks == "checkpoint") checkpoint_saves_.insert(e.saved_id);
    if (e.hooks == "checkpoint_recompute") {
      checkpoint_saves_.insert(e.saved_id);
      recompute_saves_.insert(e.saved_id);
    }
    HookedSave& h = hooked_saves_[e.saved_id];
    h.hooks = e.hooks;
    h.bytes = e.bytes;
    h.packed_bytes = e.packed_bytes;
    h.host = e.hooks == "save_on_cpu";
  }
  if (e.kind == Event::Kind::Unpack && e.version != e.expected_version && warned_saves_.insert(e.saved_id).second) {
    HookWarning w;
    w.statement = pos.statement;
    w.what = e.what;
    w.hooks = e.hooks;
    w.expected_version = e.expected_version;
    w.found_version = e.version;
    const Saved* saved = find_saved(e.saved_id);
    w.saved_at = saved ? saved->life.saved_at : -1;
    w.message = hidden_edit_message(e, w.saved_at);
    hook_warnings_.push_back(std::move(w));
  }
}

void Accountant::on_event(const Event& e) {
  record_event(e);
  const RunPosition& pos = run_position();
  switch (e.kind) {
    case Event::Kind::Alloc: {
      if (e.storage_id < 0) break;
      Storage& s = storage_slot(e.storage_id);
      s.allocated = true;
      s.life.id = e.storage_id;
      s.life.bytes = e.bytes;
      s.life.allocated_at = pos.statement;
      s.life.allocated_by = e.what;
      s.life.in_backward = pos.in_backward;
      live_ += e.bytes;
      s.alloc_serial = statement_serial_;
      if (live_ > statement_peak_) statement_peak_ = live_;
      if (live_ > peak_) {
        peak_ = live_;
        peak_statement_ = pos.statement;
        peak_at_.statement = pos.statement;
        peak_at_.in_backward = pos.in_backward;
        peak_op_ = events_.last_op();  // interned by record_event (a string copy per new peak was 3%)
      }
      s.modelled = !model_device_only_ || e.on_device;
      if (s.modelled) model_alloc(e.bytes);
      break;
    }
    case Event::Kind::Free: {
      Storage* s = find_storage(e.storage_id);
      if (!s) break;
      if (!s->life.freed) model_free(*s);  // before `freed` is set: the model counts it once
      s->life.freed = true;
      s->life.freed_at = pos.statement;
      live_ -= e.bytes;
      if (s->alloc_serial == statement_serial_) statement_temp_ += e.bytes;
      break;
    }
    case Event::Kind::Save: {
      if (e.saved_id < 0) break;
      Saved& rec = saved_slot(e.saved_id);
      rec.known = true;
      SavedLifetime& s = rec.life;
      s.id = e.saved_id;
      s.node_id = e.node_id;
      s.what = e.what;
      s.bytes = e.bytes;
      s.storage_id = e.storage_id;
      s.saved_at = pos.statement;
      saved_in_statement_.push_back(e.saved_id);
      break;
    }
    case Event::Kind::Release: {
      Saved* s = find_saved(e.saved_id);
      if (s && s->life.released_at < 0) s->life.released_at = pos.statement;
      break;
    }
    case Event::Kind::VersionBump:
    case Event::Kind::Pack:  // timeline and hooks figures only: record_event above
    case Event::Kind::Unpack:
    case Event::Kind::Recompute:
      break;
  }
}

void Accountant::finish_events(RunResult& out) {
  out.events = std::move(events_);
  events_ = EventLog();
  kind_slots_.fill(kNoKindSlot);  // the kinds went with the log
  out.hook_warnings = std::move(hook_warnings_);
  for (const auto& [id, h] : hooked_saves_) {
    const Saved* saved = find_saved(id);
    if (saved && in_raised_statement(saved->life)) continue;
    if (h.hooks == "checkpoint") {
      out.memory.checkpoint_avoided_bytes += h.bytes;
    } else if (h.hooks != "checkpoint_recompute") {
      out.memory.hooks_saved_bytes += h.bytes;
      out.memory.hooks_packed_bytes += h.packed_bytes;
      if (h.host) out.memory.host_bytes += h.packed_bytes;
    }
  }
}

// ---- Allocator model, peak location, saved categories (issue #4, accountant) ---------

void Accountant::model_alloc(int64_t bytes) {
  model_live_ += allocator_block_bytes(bytes);
  if (model_live_ > model_.peak_bytes) {
    model_.peak_bytes = model_live_;
    model_.peak_statement = run_position().statement;
  }
}

void Accountant::model_free(const Storage& s) {
  if (s.modelled) model_live_ -= allocator_block_bytes(s.life.bytes);
}

// A saved value's storage is categorised at every statement end while the value is held,
// so the last category seen says what kept those bytes alive besides the graph: a saved
// value whose storage was last seen as graph_only (or other) is "new" to its node. Only
// storages whose category changed, and values saved during the statement, need a look.
void Accountant::apply_holder_changes(std::vector<HolderChange>& changes) {
  auto note_saved = [&](int64_t saved_id, int category) {
    Saved* s = find_saved(saved_id);
    if (!s || s->life.released_at >= 0 || recompute_saves_.count(saved_id)) return false;
    s->category = category;
    return true;
  };
  for (HolderChange& c : changes) {
    if (c.storage_id < 0) continue;  // the tracker names real storages only
    Storage& st = storage_slot(c.storage_id);
    Storage* known = st.allocated ? &st : nullptr;
    if (known) st.life.holders = st.life.holders.merged(c.holders);
    const int64_t bytes = known ? st.life.bytes : 0;
    if (st.category_now >= 0) {
      CategoryTotal& t = category_totals_[st.category_now];
      if (known) {
        --t.storages;
        t.bytes -= bytes;
      }
      t.block_bytes -= st.modelled ? allocator_block_bytes(bytes) : 0;
      st.category_now = -1;
    }
    if (!c.category || !*c.category) {
      st.holders_now = InternedList();
      continue;
    }
    const int category = c.category_index >= 0 ? c.category_index : category_index(c.category);
    st.holders_now = c.holders;
    st.category_now = category;
    CategoryTotal& t = category_totals_[category];
    if (known) {
      ++t.storages;
      t.bytes += bytes;
    }
    t.block_bytes += st.modelled ? allocator_block_bytes(bytes) : 0;
    InlineVector<int64_t, 1>& ids = st.unreleased;
    if (ids.empty()) continue;
    int64_t* kept = std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return !note_saved(id, category); });
    ids.truncate(static_cast<size_t>(kept - ids.begin()));
  }
  for (int64_t saved_id : saved_in_statement_) {
    Saved* s = find_saved(saved_id);
    if (!s) continue;
    const int64_t storage_id = s->life.storage_id;
    const bool categorised = storage_id >= 0 && static_cast<size_t>(storage_id) < storages_.size() &&
                             storages_[static_cast<size_t>(storage_id)].category_now >= 0;
    if (categorised && !note_saved(saved_id, storages_[static_cast<size_t>(storage_id)].category_now)) continue;
    // (A value whose hooks keep nothing, storage -1, is never looked up again.)
    if (s->life.released_at < 0 && !recompute_saves_.count(saved_id) && storage_id >= 0)
      storage_slot(storage_id).unreleased.push_back(saved_id);
  }
  saved_in_statement_.clear();
}

void Accountant::finish_extras(RunResult& out) const {
  AccountExtras& x = out.account;
  x.model = model_;
  x.model.live_at_end = model_live_;
  x.model.graph_only_bytes = model_graph_only_peak_;
  std::vector<bool> seen(storages_.size(), false);
  for (const Saved& rec : saved_) {
    if (!rec.known) continue;
    const SavedLifetime& s = rec.life;
    if (recompute_saves_.count(s.id) || excluded_from_saved_bytes(s.id) || s.storage_id < 0) continue;
    if (in_raised_statement(s)) continue;
    const Storage* st = find_storage(s.storage_id);
    if (st && st->modelled && !seen[static_cast<size_t>(s.storage_id)]) {
      seen[static_cast<size_t>(s.storage_id)] = true;
      x.model.saved_unique_bytes += allocator_block_bytes(st->life.bytes);
    }
  }
  x.peak = peak_at_;
  x.peak.op = peak_op_.str();
  for (const Saved& rec : saved_)
    if (rec.known && rec.category >= 0)
      x.saved_category.append(rec.life.id, kHolderCategories[rec.category]);
  for (size_t id = 0; id < storages_.size(); ++id) {
    const Storage& st = storages_[id];
    if (st.category_now >= 0 && st.allocated && !st.life.freed)
      x.holders_at_end.emplace_hint(x.holders_at_end.end(), static_cast<int64_t>(id), st.holders_now);
  }
}

}  // namespace agtrace
