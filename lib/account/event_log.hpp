// The event timeline, kept packed (issue #6).
//
// A run records about 6 events per operation and keeps every one until the report: on a
// 10,000-op chain the timeline was the largest thing the run wrote, 112 bytes a record.
// Written once and read only by the reports, those bytes still cost the run time (cache
// and memory traffic): a record grown by 224 bytes made tiny_chain 19 % slower, and not
// recording events at all 10 % faster (both measured on a 10,000-op chain, whose objects
// outgrow the last-level cache). So the log keeps each record in 48 bytes: the kind as an
// index into the log's few kind names, the ids as 32-bit numbers, and in a side table that
// most records never use the fields only saved-tensor hooks, version bumps and checkpoint
// recomputations fill (hooks, versions, packed bytes and storage, the recomputed
// statement), with the full 64-bit ids of a record whose ids do not fit. Reading gives back
// the full EventRecord. (64 -> 48 bytes: the timeline's memory a quarter less; the
// 10,000-op chain's time within noise, 0.996x, the range checks costing ~17 instructions
// per record what the smaller writes saved.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "util/chunked_vector.hpp"
#include "util/interned_string.hpp"

namespace agtrace {

// One entry of the event timeline, in the order the events happened.
struct EventRecord {
  // Names repeat across thousands of records: interned, 8 bytes each (issue #6).
  InternedString kind;           // alloc free save release version_bump pack unpack recompute
  int statement = -1;            // statement running (-1: setup, -2: after the program)
  int recompute_statement = -1;  // checkpoint recomputation: the body statement run again
  bool in_backward = false;
  InternedString op;             // op, or in backward the node running
  int64_t storage_id = -1;
  int64_t bytes = 0;
  int64_t saved_id = -1;
  int64_t node_id = -1;
  InternedString what;
  InternedString hooks;
  int64_t version = 0;           // version_bump: new version; unpack: version found
  int64_t expected_version = 0;  // unpack: version at save time
  int64_t packed_bytes = 0;
  int64_t packed_storage_id = -1;
};

class EventLog {
 public:
  // Inline: the accountant fills a record per event and the compiler keeps it in registers.
  void push_back(const EventRecord& r) {
    const bool has_detail = !r.hooks.empty() || r.version != 0 || r.expected_version != 0 ||
                            r.packed_bytes != 0 || r.packed_storage_id != -1;
    const uint8_t kind = kind_index(r.kind);  // before appending: it may throw
    push_plain(kind, r.op, r.what, r.storage_id, r.bytes, r.saved_id, r.node_id, r.statement, r.recompute_statement,
               r.in_backward);
    if (has_detail) {
      Packed& p = packed_.back();
      if (p.detail == kNoDetail) p.detail = add_detail(r.storage_id, r.saved_id, r.node_id, r.recompute_statement);
      Detail& d = details_[static_cast<size_t>(p.detail)];
      d.hooks = r.hooks;
      if (!r.hooks.empty()) has_hooks_ = true;
      d.version = r.version;
      d.expected_version = r.expected_version;
      d.packed_bytes = r.packed_bytes;
      d.packed_storage_id = r.packed_storage_id;
    }
  }
  // A record whose detail fields (hooks, versions, packed bytes and storage) are all at
  // their defaults, as most are, written straight into its packed form: the accountant's
  // path for those, which built a full EventRecord per event only to pack it here (issue
  // #6: 6 events per op). `kind` is an index from kind_index().
  void push_plain(uint8_t kind, InternedString op, InternedString what, int64_t storage_id, int64_t bytes,
                  int64_t saved_id, int64_t node_id, int32_t statement, int32_t recompute_statement,
                  bool in_backward) {
    Packed& p = packed_.emplace_back();
    p.op = op;
    p.what = what;
    p.bytes = bytes;
    p.statement = statement;
    p.kind = kind;
    p.in_backward = in_backward;
    if (fits(storage_id) && fits(saved_id) && fits(node_id) && recompute_statement == -1) {
      p.storage_id = static_cast<int32_t>(storage_id);
      p.saved_id = static_cast<int32_t>(saved_id);
      p.node_id = static_cast<int32_t>(node_id);
      p.detail = kNoDetail;
    } else {
      p.detail = add_detail(storage_id, saved_id, node_id, recompute_statement);
    }
  }
  // The index of `kind` among the log's kinds, added when new (it may throw past 256).
  uint8_t kind_index(InternedString kind);
  size_t size() const { return packed_.size(); }
  bool empty() const { return packed_.empty(); }
  EventRecord operator[](size_t i) const;
  // Whether any record names the hooks it ran under (a pack hook, a checkpoint): readers that
  // look only for those records skip the log when none does, as most runs have none.
  bool has_hooks() const { return has_hooks_; }
  // The op of the last record (the accountant's peak location), without unpacking it.
  InternedString last_op() const { return packed_.back().op; }

  // Iterates the records unpacked, by value: `for (const EventRecord& e : log)`.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = EventRecord;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = EventRecord;
    const_iterator(const EventLog* log, size_t i) : log_(log), i_(i) {}
    EventRecord operator*() const { return (*log_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_ && log_ == o.log_; }
    bool operator!=(const const_iterator& o) const { return !(*this == o); }

   private:
    const EventLog* log_;
    size_t i_;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size()); }

 private:
  static constexpr int32_t kNoDetail = -1;
  static bool fits(int64_t id) { return id >= INT32_MIN && id <= INT32_MAX; }
  struct Packed {
    InternedString op, what;
    int64_t bytes;
    int32_t storage_id, saved_id, node_id;  // with a detail: its ids are the record's
    int32_t statement;
    int32_t detail;     // index into details_, or kNoDetail (every detail field at its default)
    uint8_t kind;       // index into kinds_
    bool in_backward;
  };
  static_assert(sizeof(Packed) == 48, "a packed event record is 48 bytes");
  struct Detail {
    int64_t storage_id, saved_id, node_id;
    int32_t recompute_statement;
    InternedString hooks;
    int64_t version = 0, expected_version = 0, packed_bytes = 0, packed_storage_id = -1;
  };
  // A detail for a record with these ids, the other fields at their defaults (out of line:
  // most records have none).
  int32_t add_detail(int64_t storage_id, int64_t saved_id, int64_t node_id, int32_t recompute_statement);
  ChunkedVector<Packed> packed_;
  std::vector<Detail> details_;
  std::vector<InternedString> kinds_;  // distinct kinds, first-seen order (8 in a run)
  bool has_hooks_ = false;
};

}  // namespace agtrace
