// report/json_text.hpp against nlohmann's own dump: the report's long arrays are written as
// text, and must be the bytes nlohmann::ordered_json::dump(2) writes for the same values.
#include <catch2/catch.hpp>

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "report/json_text.hpp"
#include "report/report.hpp"
#include "util/decimal.hpp"

using agtrace::EventRecord;
using agtrace::InternedString;
namespace json_text = agtrace::json_text;
using ojson = nlohmann::ordered_json;

namespace {
std::string written_string(const std::string& s) {
  std::string out;
  json_text::Writer w(out);
  w.string(s);
  w.flush();
  return out;
}
// `value` dumped as an element of an array whose elements sit at `indent`: what
// dump_report_json writes for it (its first line is placed by the caller).
std::string as_element(const ojson& value, const std::string& indent) {
  std::string out;
  for (char c : value.dump(2)) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out;
}
}  // namespace

TEST_CASE("json_text strings are escaped as nlohmann escapes them", "[report][json_text]") {
  std::vector<std::string> texts = {"", "plain", "quote\"back\\slash", "tab\tnew\nline\rcr\bbs\fff", "del\x7f",
                                    std::string("nul\0mid", 7), "\x01\x1f\x10 controls", "é ünïcode ✓",
                                    "MulBackward0._saved_other"};
  for (int c = 0; c < 0x80; ++c) texts.push_back(std::string("c") + static_cast<char>(c) + "c");
  for (const std::string& t : texts) {
    INFO(ojson(t).dump());
    CHECK(written_string(t) == ojson(t).dump());
  }
  // Invalid UTF-8 raises as the whole document's dump does.
  CHECK_THROWS_AS(written_string("bad \xff byte"), nlohmann::json::type_error);
  CHECK_THROWS_AS(ojson(std::string("bad \xff byte")).dump(), nlohmann::json::type_error);
}

TEST_CASE("json_text escapes a character wherever it falls in a long or short text", "[report][json_text]") {
  // The writer scans 16 bytes at a time with a zero-padded tail: each escaped character, and
  // a UTF-8 character, at every position of texts from 1 to 40 bytes, on both sides of each
  // 16-byte boundary and in the tail.
  const std::vector<std::string> specials = {"\"", "\\", "\n", "\t", std::string(1, '\0'), "\x1f", "\x7f", " ",
                                             "\xc3\xa9"};
  size_t checked = 0;
  for (size_t length = 1; length <= 40; ++length)
    for (size_t at = 0; at < length; ++at)
      for (const std::string& special : specials) {
        std::string text(length, 'a');
        for (size_t i = 0; i < length; ++i) text[i] = static_cast<char>('a' + i % 26);
        text.replace(at, 1, special);
        INFO(ojson(text).dump());
        CHECK(written_string(text) == ojson(text).dump());
        ++checked;
      }
  CHECK(checked == 820 * specials.size());
  // Text that ends right before a byte the scan must not count: a view into a longer string.
  const std::string longer = "plain text\"quoted";
  std::string out;
  {
    json_text::Writer w(out);
    w.string(std::string_view(longer).substr(0, 10));
  }
  CHECK(out == "\"plain text\"");
}

TEST_CASE("write_decimal gives std::to_chars's digits", "[report][json_text]") {
  std::vector<int64_t> values = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, 0};
  for (int64_t v = -20000; v <= 120000; ++v) values.push_back(v);
  // Below 100,000,000 the number is written as two groups of four digits: the low group's
  // leading zeros and each length of the high group, then random values on both sides.
  for (int64_t high : {1, 9, 10, 99, 100, 999, 1000, 9999})
    for (int64_t low : {0, 1, 9, 10, 99, 100, 999, 1000, 9999}) values.push_back(high * 10000 + low);
  std::mt19937_64 random(20261207);
  for (int i = 0; i < 200000; ++i) values.push_back(static_cast<int64_t>(random() % 200000000));
  for (int64_t p = 1; p < int64_t{1} << 62; p *= 10) {
    values.push_back(p - 1);
    values.push_back(p);
    values.push_back(-p);
  }
  size_t differ = 0;
  for (const int64_t v : values) {
    char mine[24], theirs[24];
    const std::string_view a(mine, static_cast<size_t>(agtrace::write_decimal(mine, v) - mine));
    const std::string_view b(theirs, static_cast<size_t>(std::to_chars(theirs, theirs + sizeof theirs, v).ptr - theirs));
    if (a != b) ++differ;
  }
  CHECK(differ == 0);
}

TEST_CASE("json_text integers are nlohmann's", "[report][json_text]") {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{7}, int64_t{1} << 40, INT64_MIN, INT64_MAX}) {
    std::string out;
    {
      json_text::Writer w(out);
      w.integer(v);
    }
    CHECK(out == ojson(v).dump());
  }
}

TEST_CASE("json_text objects have nlohmann's pretty layout at any depth", "[report][json_text]") {
  for (const std::string indent : {"", "  ", "      "}) {
    const json_text::Layout layout(indent);
    const json_text::Layout inner(indent + "    ");
    std::string out;
    {
      json_text::Writer w(out);
      json_text::Object o(w, layout);
      o.field("n", int64_t{-3}).field("i", 4).field("t", true).field("f", false).field("s", "a\"b");
      o.null_field("z").field_or_null("maybe", false, 9).field_or_null("sure", true, 9);
      o.string_array("none", std::vector<std::string>{}).string_array("some", std::vector<std::string>{"x", "y\n"});
      o.int_array("shape", std::vector<int64_t>{}).int_array("dims", std::vector<int64_t>{2, 3});
      o.int_object("empty", std::vector<std::pair<const char*, int64_t>>{});
      o.int_object("bytes", std::vector<std::pair<const char*, int64_t>>{{"graph_only", 64}, {"named", 8}});
      o.open_array("edges");
      o.item(true);
      w.put("null");
      o.item(false);
      {
        json_text::Object e(w, inner);
        e.field("node", int64_t{1}).field("input_nr", 0);
        e.close();
      }
      o.close_array(2).open_array("nothing").close_array(0);
      o.open_array("empty_objects");
      o.item(true);
      json_text::Object(w, inner).close();
      o.close_array(1);
      o.close();
    }
    ojson expected;
    expected["n"] = -3;
    expected["i"] = 4;
    expected["t"] = true;
    expected["f"] = false;
    expected["s"] = "a\"b";
    expected["z"] = nullptr;
    expected["maybe"] = nullptr;
    expected["sure"] = 9;
    expected["none"] = ojson::array();
    expected["some"] = {"x", "y\n"};
    expected["shape"] = ojson::array();
    expected["dims"] = {2, 3};
    expected["empty"] = ojson::object();
    expected["bytes"] = {{"graph_only", 64}, {"named", 8}};
    expected["edges"] = {nullptr, {{"node", 1}, {"input_nr", 0}}};
    expected["nothing"] = ojson::array();
    expected["empty_objects"] = ojson::array({ojson::object()});  // {x} alone is a copy of x with clang
    INFO("indent " << indent.size());
    CHECK(out == as_element(expected, indent));
    std::string empty;
    {
      json_text::Writer w(empty);
      json_text::Object(w, layout).close();
    }
    CHECK(empty == "{}");
  }
}

TEST_CASE("an event written as text is event_json's dump, for every kind of record", "[report][json_text]") {
  std::vector<EventRecord> events;
  EventRecord e;
  e.kind = InternedString("alloc");
  e.statement = 3;
  e.op = InternedString("mul");
  e.storage_id = 12;
  e.bytes = 64;
  events.push_back(e);
  e.kind = InternedString("save");
  e.in_backward = true;
  e.saved_id = 4;
  e.node_id = 9;
  e.what = InternedString("MulBackward0._saved_other");
  events.push_back(e);
  e.hooks = InternedString("fp16");  // save under hooks: packed bytes and storage (or null)
  e.packed_bytes = 32;
  events.push_back(e);
  e.packed_storage_id = 13;
  e.kind = InternedString("pack");
  events.push_back(e);
  e.kind = InternedString("unpack");
  e.version = 2;
  e.expected_version = 1;
  events.push_back(e);
  e.kind = InternedString("version_bump");
  e.hooks = InternedString();
  e.recompute_statement = 5;
  events.push_back(e);
  e = EventRecord();
  e.kind = InternedString("free");  // nothing optional
  events.push_back(e);
  for (const std::string indent : {"", "    "}) {
    const json_text::Layout layout(indent);
    for (const EventRecord& ev : events) {
      std::string out;
      {
        json_text::Writer w(out);
        agtrace::write_event_json(w, layout, ev);
      }
      INFO(ev.kind.str());
      CHECK(out == as_element(agtrace::event_json(ev), indent));
    }
  }
}

TEST_CASE("json_text::Writer keeps the order of pieces across its buffer, long ones too", "[report][json_text]") {
  std::string expected, out;
  {
    json_text::Writer w(out);
    for (int i = 0; i < 3000; ++i) {  // ~40 KB in small pieces: many flushes
      const std::string piece = "piece " + std::to_string(i) + (i % 7 == 0 ? " \"quoted\"\n" : "");
      w.string(piece);
      w.put(',');
      expected += ojson(piece).dump() + ",";
      if (i % 1000 == 0) {  // longer than the buffer: appended past it, in order
        const std::string big(10000, i % 2000 == 0 ? 'x' : '\t');
        w.string(big);
        w.integer(-i);
        expected += ojson(big).dump() + std::to_string(-i);
      }
    }
  }
  CHECK(out.size() == expected.size());
  CHECK(out == expected);
}

TEST_CASE("the minifier gives nlohmann's compact text however the pretty text is cut", "[report][json_text]") {
  const ojson document = ojson::parse(R"JSON({"a b": [1, 2.5, {"c": "x \"quoted\" y\\", "d": []}],
                                             "e": "line\nbreak and  spaces", "f": {}, "g": [true, null, "\\\"]"]})JSON");
  const std::string pretty = document.dump(2);
  for (size_t piece : {size_t(1), size_t(2), size_t(7), pretty.size()}) {
    INFO(piece);
    agtrace::json_text::Minifier minifier;
    std::string out;
    for (size_t at = 0; at < pretty.size(); at += piece)
      minifier.feed(std::string_view(pretty).substr(at, piece), out);
    CHECK(out == document.dump());
  }
}
