#include "account/event_log.hpp"

#include <stdexcept>

namespace agtrace {

uint8_t EventLog::kind_index(InternedString kind) {
  // Interned: equal kinds are equal pointers, and a run has 8 of them.
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (kinds_[i] == kind) return static_cast<uint8_t>(i);
  if (kinds_.size() > UINT8_MAX) throw std::logic_error("EventLog: more than 256 event kinds");
  kinds_.push_back(kind);
  return static_cast<uint8_t>(kinds_.size() - 1);
}

int32_t EventLog::add_detail(int64_t storage_id, int64_t saved_id, int64_t node_id, int32_t recompute_statement) {
  if (details_.size() >= static_cast<size_t>(INT32_MAX)) throw std::length_error("EventLog: too many detailed records");
  Detail& d = details_.emplace_back();
  d.storage_id = storage_id;
  d.saved_id = saved_id;
  d.node_id = node_id;
  d.recompute_statement = recompute_statement;
  return static_cast<int32_t>(details_.size() - 1);
}

EventRecord EventLog::operator[](size_t i) const {
  const Packed& p = packed_[i];
  EventRecord r;
  r.kind = kinds_[p.kind];
  r.statement = p.statement;
  r.in_backward = p.in_backward;
  r.op = p.op;
  r.bytes = p.bytes;
  r.what = p.what;
  if (p.detail == kNoDetail) {
    r.storage_id = p.storage_id;
    r.saved_id = p.saved_id;
    r.node_id = p.node_id;
    r.recompute_statement = -1;
  } else {
    const Detail& d = details_[static_cast<size_t>(p.detail)];
    r.storage_id = d.storage_id;
    r.saved_id = d.saved_id;
    r.node_id = d.node_id;
    r.recompute_statement = d.recompute_statement;
    r.hooks = d.hooks;
    r.version = d.version;
    r.expected_version = d.expected_version;
    r.packed_bytes = d.packed_bytes;
    r.packed_storage_id = d.packed_storage_id;
  }
  return r;
}

}  // namespace agtrace
