// The packed event timeline (lib/account/event_log.hpp) gives back every record as it was
// appended: all fields, the side table's (hooks, versions, packed bytes and storage) only
// on the records that have them, kinds beyond the accountant's eight.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "account/event_log.hpp"

using agtrace::EventLog;
using agtrace::EventRecord;
using agtrace::InternedString;

namespace {
void check_same(const EventRecord& got, const EventRecord& want) {
  CHECK(got.kind == want.kind);
  CHECK(got.statement == want.statement);
  CHECK(got.recompute_statement == want.recompute_statement);
  CHECK(got.in_backward == want.in_backward);
  CHECK(got.op == want.op);
  CHECK(got.storage_id == want.storage_id);
  CHECK(got.bytes == want.bytes);
  CHECK(got.saved_id == want.saved_id);
  CHECK(got.node_id == want.node_id);
  CHECK(got.what == want.what);
  CHECK(got.hooks == want.hooks);
  CHECK(got.version == want.version);
  CHECK(got.expected_version == want.expected_version);
  CHECK(got.packed_bytes == want.packed_bytes);
  CHECK(got.packed_storage_id == want.packed_storage_id);
}
}  // namespace

TEST_CASE("an event log gives back every field of every record, in order", "[account][event_log]") {
  std::vector<EventRecord> want;
  const char* kinds[] = {"alloc", "free", "save", "release", "version_bump", "pack", "unpack", "recompute"};
  for (int i = 0; i < 2000; ++i) {  // several chunks
    EventRecord e;
    e.kind = InternedString(kinds[(i * 7) % 8]);
    e.statement = i % 5 - 2;
    e.recompute_statement = i % 11 == 0 ? i : -1;
    e.in_backward = i % 3 == 0;
    e.op = InternedString(i % 2 ? "mul" : "TanhBackward0");
    e.storage_id = i % 4 == 0 ? -1 : int64_t{1} << 40 | i;  // beyond 32 bits
    e.bytes = int64_t{i} * 1000003;
    e.saved_id = i % 6 == 0 ? i : -1;
    e.node_id = i % 9 == 0 ? -1 : 3 * int64_t{i};
    if (i % 5 == 0) e.what = InternedString("MulBackward0._saved_other");
    // Each side-table field alone, all together, and none.
    switch (i % 7) {
      case 0: e.hooks = InternedString("fp16"); break;
      case 1: e.version = i; break;
      case 2: e.expected_version = -i; break;
      case 3: e.packed_bytes = 32; break;
      case 4: e.packed_storage_id = 0; break;  // 0 differs from the default -1
      case 5:
        e.hooks = InternedString("checkpoint");
        e.version = 2;
        e.expected_version = 1;
        e.packed_bytes = 8;
        e.packed_storage_id = 13;
        break;
      default: break;
    }
    want.push_back(e);
  }
  EventLog log;
  CHECK(log.empty());
  for (const EventRecord& e : want) log.push_back(e);
  REQUIRE(log.size() == want.size());
  CHECK(log.last_op() == want.back().op);
  size_t i = 0;
  for (const EventRecord& got : log) check_same(got, want[i++]);
  CHECK(i == want.size());
  check_same(log[1234], want[1234]);

  // Copies and moves keep the records (RunResult takes the accountant's log by move).
  const EventLog copy = log;
  check_same(copy[1999], want[1999]);
  const EventLog moved = std::move(log);
  REQUIRE(moved.size() == want.size());
  check_same(moved[7], want[7]);
}

TEST_CASE("an event log says whether any record names hooks", "[account][event_log]") {
  EventLog log;
  EventRecord plain;
  plain.kind = InternedString("save");
  plain.version = 3;  // a detail record without hooks
  log.push_back(plain);
  log.push_plain(log.kind_index(InternedString("alloc")), InternedString("mul"), InternedString(), 1, 64, -1, -1, 0, -1,
                 false);
  CHECK_FALSE(log.has_hooks());
  EventRecord hooked = plain;
  hooked.hooks = InternedString("checkpoint");
  log.push_back(hooked);
  CHECK(log.has_hooks());
  log.push_back(plain);
  CHECK(log.has_hooks());
  CHECK(EventLog(log).has_hooks());  // copies keep it (RunResult takes the accountant's log)
}

TEST_CASE("an event log keeps any kind of record, not only the accountant's", "[account][event_log]") {
  EventLog log;
  for (int i = 0; i < 300; ++i) {  // more distinct kinds than one byte can index
    EventRecord e;
    e.kind = InternedString("kind " + std::to_string(i % 256));
    e.bytes = i;
    log.push_back(e);  // from 256 on, kinds seen before: their index again
    CHECK(log[log.size() - 1].kind == e.kind);
  }
  CHECK(log.size() == 300);
  EventRecord extra;
  extra.kind = InternedString("kind 256");
  CHECK_THROWS_AS(log.push_back(extra), std::logic_error);
  CHECK(log.size() == 300);  // nothing appended by the failed push
  CHECK(log[299].bytes == 299);
}

TEST_CASE("records pushed in packed form read back as the full records pushed whole would", "[account][event_log]") {
  // push_plain (the accountant's path for records without detail fields) and push_back
  // interleaved: each reads back with its own fields, the plain ones with every detail field
  // at its default, and a kind looked up once serves both.
  EventLog log;
  std::vector<EventRecord> want;
  const InternedString alloc("alloc"), save("save");
  for (int i = 0; i < 600; ++i) {
    EventRecord e;
    e.kind = i % 3 == 0 ? save : alloc;
    e.statement = i;
    e.recompute_statement = i % 5 == 0 ? i / 5 : -1;
    e.in_backward = i % 2 == 1;
    e.op = InternedString(i % 4 == 0 ? "mul" : "TanhBackward0");
    // Ids beyond 32 bits (kept in the side table) on some plain records too.
    e.storage_id = i % 13 == 0 ? (int64_t{1} << 33) + i : 10 * i;
    e.bytes = 4 * i + 1;
    e.saved_id = i % 3 == 0 ? i : i % 17 == 0 ? int64_t{INT32_MAX} + 1 : -1;
    e.node_id = i % 19 == 0 ? int64_t{INT32_MIN} - 1 : i % 7;
    e.what = InternedString(i % 3 == 0 ? "MulBackward0._saved_other" : "");
    if (i % 10 == 0) {
      e.version = i;  // a detail field: pushed whole
      log.push_back(e);
    } else {
      log.push_plain(log.kind_index(e.kind), e.op, e.what, e.storage_id, e.bytes, e.saved_id, e.node_id, e.statement,
                     e.recompute_statement, e.in_backward);
    }
    want.push_back(e);
  }
  REQUIRE(log.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("record " << i);
    check_same(log[i], want[i]);
  }
}
