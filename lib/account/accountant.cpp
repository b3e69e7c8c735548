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
      saved_in_statement_.push_back(e.saved_id);
      break;
    }
    case Event::Kind::Release: {
      auto it = saved_.find(e.saved_id);
      if (it != saved_.end() && it->second.released_at < 0) it->second.released_at = pos.statement;
      break;
    }
    case Event::Kind::VersionBump:
    case Event::Kind::Pack:  // timeline and hooks figures only: record_event above
    case Event::Kind::Unpack:
    case Event::Kind::Recompute:
      break;
  }
}

void Accountant::begin_statement(int index) {
  current_ = index;
  statement_peak_ = live_;
  statement_temp_ = 0;
  allocated_in_statement_.clear();
}

void Accountant::end_statement(int index, bool raised, const std::vector<HolderChange>& changes) {
  if (raised) raised_statements_.insert(index);
  apply_holder_changes(changes);
  StatementMemory m;
  m.index = index;
  m.live_after = live_;
  m.peak_inside = statement_peak_;
  m.temporary_bytes = statement_temp_;
  for (const auto& [cat, total] : category_totals_)
    if (total.storages > 0) m.categories[cat] = total.bytes;
  const int64_t graph_only = m.categories.count("graph_only") ? m.categories.at("graph_only") : 0;
  if (graph_only > graph_only_peak_) {
    graph_only_peak_ = graph_only;
    graph_only_statement_ = index;
  }
  auto go = category_totals_.find("graph_only");
  if (go != category_totals_.end()) model_graph_only_peak_ = std::max(model_graph_only_peak_, go->second.block_bytes);
  last_categories_ = m.categories;
  by_statement_.push_back(std::move(m));
}

void Accountant::finish(RunResult& out) {
  // Moved out: finish_extras below still reads each lifetime's bytes and freed flag.
  out.storages.reserve(storages_.size());
  for (auto& [id, st] : storages_) out.storages.push_back(std::move(st.life));
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
  out.memory_by_statement = std::move(by_statement_);
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

void Accountant::finish_events(RunResult& out) {
  out.events = std::move(events_);
  out.hook_warnings = std::move(hook_warnings_);
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
// value whose storage was last seen as graph_only (or other) is "new" to its node. Only
// storages whose category changed, and values saved during the statement, need a look.
void Accountant::apply_holder_changes(const std::vector<HolderChange>& changes) {
  auto note_saved = [&](int64_t saved_id, const std::string& category) {
    auto s = saved_.find(saved_id);
    if (s == saved_.end() || s->second.released_at >= 0 || recompute_saves_.count(saved_id)) return false;
    saved_category_[saved_id] = category;
    return true;
  };
  for (const HolderChange& c : changes) {
    auto known = storages_.find(c.storage_id);
    if (known != storages_.end())
      for (const std::string& h : c.holders)
        if (known->second.holder_set.insert(h).second) known->second.life.holders.push_back(h);
    const int64_t bytes = known != storages_.end() ? known->second.life.bytes : 0;
    auto before = category_now_.find(c.storage_id);
    if (before != category_now_.end()) {
      if (known != storages_.end()) {
        CategoryTotal& t = category_totals_[before->second];
        --t.storages;
        t.bytes -= bytes;
      }
      category_totals_[before->second].block_bytes -= allocator_block_bytes(bytes);
      category_now_.erase(before);
    }
    if (c.category.empty()) {
      holders_now_.erase(c.storage_id);
      continue;
    }
    holders_now_[c.storage_id] = c.holders;
    category_now_[c.storage_id] = c.category;
    if (known != storages_.end()) {
      CategoryTotal& t = category_totals_[c.category];
      ++t.storages;
      t.bytes += bytes;
    }
    category_totals_[c.category].block_bytes += allocator_block_bytes(bytes);
    auto waiting = unreleased_by_storage_.find(c.storage_id);
    if (waiting == unreleased_by_storage_.end()) continue;
    std::vector<int64_t>& ids = waiting->second;
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return !note_saved(id, c.category); }),
              ids.end());
    if (ids.empty()) unreleased_by_storage_.erase(waiting);
  }
  for (int64_t saved_id : saved_in_statement_) {
    auto s = saved_.find(saved_id);
    if (s == saved_.end()) continue;
    auto cat = category_now_.find(s->second.storage_id);
    if (cat != category_now_.end() && !note_saved(saved_id, cat->second)) continue;
    if (s->second.released_at < 0 && !recompute_saves_.count(saved_id))
      unreleased_by_storage_[s->second.storage_id].push_back(saved_id);
  }
  saved_in_statement_.clear();
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
