#include "account/accountant.hpp"

#include <algorithm>

namespace agtrace {

void Accountant::on_event(const Event& e) {
  record_event(e);
  const RunPosition& pos = run_position();
  switch (e.kind) {
    case Event::Kind::Alloc: {
      Storage& s = storages_[e.storage_id];
      s.life.id = e.storage_id;
      s.life.bytes = e.bytes;
      s.life.allocated_at = pos.statement;
      s.life.allocated_by = e.what;
      s.life.in_backward = pos.in_backward;
      live_ += e.bytes;
      allocated_in_statement_.insert(e.storage_id);
      if (live_ > statement_peak_) statement_peak_ = live_;
      if (live_ > peak_) {
        peak_ = live_;
        peak_statement_ = pos.statement;
        peak_at_ = {pos.statement, pos.in_backward, pos.op};
      }
      model_alloc(e.storage_id, e.bytes);
      break;
    }
    case Event::Kind::Free: {
      auto it = storages_.find(e.storage_id);
      if (it == storages_.end()) break;
      it->second.life.freed = true;
      it->second.life.freed_at = pos.statement;
      live_ -= e.bytes;
      if (allocated_in_statement_.count(e.storage_id)) statement_temp_ += e.bytes;
      model_free(e.storage_id);
      break;
    }
    case Event::Kind::Save: {
      SavedLifetime& s = saved_[e.saved_id];
      s.id = e.saved_id;
      s.node_id = e.node_id;
      s.what = e.what;
      s.bytes = e.bytes;
      s.storage_id = e.storage_id;
      s.saved_at = pos.statement;
      saved_statement_[e.saved_id] = pos.statement;
      break;
    }
    case Event::Kind::Release: {
      auto it = saved_.find(e.saved_id);
      if (it != saved_.end() && it->second.released_at < 0) it->second.released_at = pos.statement;
      break;
    }
    case Event::Kind::VersionBump:
      break;
  }
}

void Accountant::begin_statement(int index) {
  current_ = index;
  statement_peak_ = live_;
  statement_temp_ = 0;
  allocated_in_statement_.clear();
}

void Accountant::end_statement(int index, bool raised, const HolderScan& scan) {
  if (raised) raised_statements_.insert(index);
  StatementMemory m;
  m.index = index;
  m.live_after = live_;
  m.peak_inside = statement_peak_;
  m.temporary_bytes = statement_temp_;
  for (const auto& [id, holders] : scan.holders) {
    auto it = storages_.find(id);
    if (it == storages_.end()) continue;
    for (const std::string& h : holders)
      if (it->second.holder_set.insert(h).second) it->second.life.holders.push_back(h);
  }
  for (const auto& [id, cat] : scan.category) {
    auto it = storages_.find(id);
    if (it == storages_.end()) continue;
    m.categories[cat] += it->second.life.bytes;
  }
  const int64_t graph_only = m.categories.count("graph_only") ? m.categories.at("graph_only") : 0;
  if (graph_only > graph_only_peak_) {
    graph_only_peak_ = graph_only;
    graph_only_statement_ = index;
  }
  last_categories_ = m.categories;
  by_statement_.push_back(std::move(m));
  note_saved_categories(scan);
}

void Accountant::finish(RunResult& out) const {
  for (const auto& [id, st] : storages_) out.storages.push_back(st.life);
  std::set<int64_t> unique_storages;
  int64_t saved_bytes = 0, unique_bytes = 0;
  for (const auto& [id, s] : saved_) {
    if (recompute_saves_.count(id)) continue;  // a checkpoint recomputation's temporary graph
    out.saved.push_back(s);
    if (excluded_from_saved_bytes(id)) continue;
    auto st = saved_statement_.find(id);
    if (st != saved_statement_.end() && raised_statements_.count(st->second)) continue;
    saved_bytes += s.bytes;
    if (s.storage_id >= 0 && unique_storages.insert(s.storage_id).second) {
      auto it = storages_.find(s.storage_id);
      if (it != storages_.end()) unique_bytes += it->second.life.bytes;
    }
  }
  out.memory_by_statement = by_statement_;
  out.memory.peak_bytes = peak_;
  out.memory.peak_statement = peak_statement_;
  out.memory.saved_bytes = saved_bytes;
  out.memory.saved_unique_bytes = unique_bytes;
  out.memory.graph_only_bytes = graph_only_peak_;
  out.memory.graph_only_statement = graph_only_statement_;
  out.memory.categories_at_end = last_categories_;
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

void Accountant::record_event(const Event& e) {
  const RunPosition& pos = run_position();
  EventRecord r;
  r.kind = event_kind_name(e.kind);
  r.statement = pos.statement;
  r.recompute_statement = pos.recompute_statement;
  r.in_backward = pos.in_backward;
  r.op = pos.op;
  r.storage_id = e.storage_id;
  r.bytes = e.bytes;
  r.saved_id = e.saved_id;
  // Save/release/pack/unpack: the node holding the value; other events in backward: the
  // node running.
  r.node_id = e.node_id >= 0 ? e.node_id : (pos.in_backward ? pos.backward_node : -1);
  r.what = e.what;
  r.hooks = e.hooks;
  r.version = e.version;
  r.expected_version = e.kind == Event::Kind::Unpack ? e.expected_version : 0;
  r.packed_bytes = e.packed_bytes;
  r.packed_storage_id = e.packed_storage_id;
  events_.push_back(std::move(r));

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
    auto it = saved_.find(e.saved_id);
    w.saved_at = it != saved_.end() ? it->second.saved_at : -1;
    w.message = hidden_edit_message(e, w.saved_at);
    hook_warnings_.push_back(std::move(w));
  }
}

void Accountant::finish_events(RunResult& out) const {
  out.events = events_;
  out.hook_warnings = hook_warnings_;
  for (const auto& [id, h] : hooked_saves_) {
    auto st = saved_statement_.find(id);
    if (st != saved_statement_.end() && raised_statements_.count(st->second)) continue;
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

void Accountant::model_alloc(int64_t storage_id, int64_t bytes) {
  const int64_t block = allocator_block_bytes(bytes);
  model_blocks_[storage_id] = block;
  model_live_ += block;
  if (model_live_ > model_.peak_bytes) {
    model_.peak_bytes = model_live_;
    model_.peak_statement = run_position().statement;
  }
}

void Accountant::model_free(int64_t storage_id) {
  auto it = model_blocks_.find(storage_id);
  if (it == model_blocks_.end()) return;
  model_live_ -= it->second;
  model_blocks_.erase(it);
}

// A saved value's storage is categorised at every statement end while the value is held,
// so the last category seen says what kept those bytes alive besides the graph: a saved
// value whose storage was last seen as graph_only (or other) is "new" to its node.
void Accountant::note_saved_categories(const HolderScan& scan) {
  for (const auto& [id, s] : saved_) {
    if (s.released_at >= 0 || recompute_saves_.count(id)) continue;
    auto c = scan.category.find(s.storage_id);
    if (c != scan.category.end()) saved_category_[id] = c->second;
  }
  holders_now_ = scan.holders;
  int64_t graph_only = 0;
  for (const auto& [id, cat] : scan.category)
    if (cat == "graph_only") graph_only += allocator_block_bytes(storages_.count(id) ? storages_.at(id).life.bytes : 0);
  model_graph_only_peak_ = std::max(model_graph_only_peak_, graph_only);
}

void Accountant::finish_extras(RunResult& out) const {
  AccountExtras& x = out.account;
  x.model = model_;
  x.model.live_at_end = model_live_;
  x.model.graph_only_bytes = model_graph_only_peak_;
  std::set<int64_t> seen;
  for (const auto& [id, s] : saved_) {
    if (recompute_saves_.count(id) || excluded_from_saved_bytes(id) || s.storage_id < 0) continue;
    auto st = saved_statement_.find(id);
    if (st != saved_statement_.end() && raised_statements_.count(st->second)) continue;
    auto it = storages_.find(s.storage_id);
    if (it != storages_.end() && seen.insert(s.storage_id).second)
      x.model.saved_unique_bytes += allocator_block_bytes(it->second.life.bytes);
  }
  x.peak = peak_at_;
  x.saved_category = saved_category_;
  for (const auto& [id, hs] : holders_now_)
    if (storages_.count(id) && !storages_.at(id).life.freed) x.holders_at_end[id] = hs;
}

}  // namespace agtrace
