// JSON text laid out exactly as nlohmann::ordered_json's dump(2) lays it out, written
// straight into a string (issue #6). The report's long arrays (the event timeline, storage
// and saved-value lifetimes, bytes per statement) have one record per event or object: a
// 10,000-op chain's report built a json value per record, dumped it and destroyed it, which
// took about nine times as long as the run itself. Records written with this are checked
// against nlohmann's dump of the same record (tests/report/test_json_text.cpp) and whole
// reports against the document dumped at once (tests/report/test_report.cpp).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/copy_bytes.hpp"

namespace agtrace::json_text {

// Text collected in a buffer and appended to `out` a few kilobytes at a time (and when the
// writer is destroyed or flushed): one std::string append per piece of a record was most of
// the cost of writing it.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { flush(); }
  // Inlined at each call: most pieces are literals or keys, whose length the compiler then
  // knows, so the copy is a few moves.
  [[gnu::always_inline]] void put(std::string_view s) {
    if (s.size() > kSize - used_) {
      flush();
      if (s.size() > kSize) {
        out_.append(s);
        return;
      }
    }
    copy_bytes(buf_ + used_, s.data(), s.size());
    used_ += s.size();
  }
  // Three pieces with one check of the room left (an object's field: separator, key, `": `).
  [[gnu::always_inline]] void put(std::string_view a, std::string_view b, std::string_view c) {
    const size_t n = a.size() + b.size() + c.size();
    if (n > kSize - used_) {
      put(a);
      put(b);
      put(c);
      return;
    }
    char* d = buf_ + used_;
    copy_bytes(d, a.data(), a.size());
    copy_bytes(d + a.size(), b.data(), b.size());
    copy_bytes(d + a.size() + b.size(), c.data(), c.size());
    used_ += n;
  }
  // A text between two characters (a quoted string), with one check of the room left.
  [[gnu::always_inline]] void put(char before, std::string_view s, char after) {
    if (s.size() + 2 > kSize - used_) {
      put(before);
      put(s);
      put(after);
      return;
    }
    char* d = buf_ + used_;
    d[0] = before;
    copy_bytes(d + 1, s.data(), s.size());
    d[s.size() + 1] = after;
    used_ += s.size() + 2;
  }
  [[gnu::always_inline]] void put(char c) {
    if (used_ == kSize) flush();
    buf_[used_++] = c;
  }
  // `s` as a JSON string, escaped as nlohmann's dump escapes it with ensure_ascii off: `"`
  // and `\`, \b \f \n \r \t, other control characters as \u00xx; other ASCII as it is. Text
  // with a byte above 0x7F is handed to nlohmann itself, which checks the UTF-8 (and raises
  // on invalid bytes, as the whole report's dump does).
  void string(std::string_view s);
  void integer(int64_t v);  // as nlohmann writes it
  void flush() {
    out_.append(buf_, used_);
    used_ = 0;
  }

 private:
  static constexpr size_t kSize = 4096;
  std::string& out_;
  size_t used_ = 0;
  char buf_[kSize];
};

// The separators of objects whose first line sits at one indentation, made once for all the
// records of an array (each field then costs a few appends, not one per piece).
struct Layout {
  explicit Layout(std::string_view indent);
  std::string first_field;  // {\n<indent>  "
  std::string next_field;   // ,\n<indent>  "
  std::string close;        // \n<indent>}
  std::string first_item;   // [\n<indent>    (an array inside a field)
  std::string first_entry;  // {\n<indent>    (an object inside a field)
  std::string next_item;    // ,\n<indent>    (either's next element)
  std::string close_array;  // \n<indent>  ]
  std::string close_object; // \n<indent>  }
};

// An object written field by field, with nlohmann's pretty layout: "{", each field on its own
// line two spaces deeper than the line the object starts on, "}" on a line of its own; "{}"
// when it has no field. Keys are written as they are: the callers' keys are plain ASCII
// literals, which need no escape.
class Object {
 public:
  Object(Writer& out, const Layout& layout) : out_(out), layout_(layout) {}
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  Object& field(std::string_view key, int64_t v) {
    start(key);
    out_.integer(v);
    return *this;
  }
  Object& field(std::string_view key, int v) { return field(key, static_cast<int64_t>(v)); }
  Object& field(std::string_view key, bool v) {
    start(key);
    out_.put(v ? "true" : "false");
    return *this;
  }
  Object& field(std::string_view key, std::string_view text) {
    start(key);
    out_.string(text);
    return *this;
  }
  Object& field(std::string_view key, const char* text) { return field(key, std::string_view(text)); }
  Object& field(std::string_view key, const std::string& text) { return field(key, std::string_view(text)); }
  Object& null_field(std::string_view key) {
    start(key);
    out_.put("null");
    return *this;
  }
  // `v`, or null when `present` is false.
  Object& field_or_null(std::string_view key, bool present, int64_t v) {
    return present ? field(key, v) : null_field(key);
  }
  // An array of strings ("[]" when empty), each on its own line.
  template <typename Strings>
  Object& string_array(std::string_view key, const Strings& items) {
    start(key);
    bool first = true;
    for (const auto& s : items) {
      out_.put(first ? layout_.first_item : layout_.next_item);
      first = false;
      out_.string(static_cast<const std::string&>(s));  // std::string or InternedString
    }
    out_.put(first ? std::string_view("[]") : std::string_view(layout_.close_array));
    return *this;
  }
  // An array of integers ("[]" when empty), each on its own line.
  template <typename Ints>
  Object& int_array(std::string_view key, const Ints& items) {
    start(key);
    bool first = true;
    for (const auto v : items) {
      out_.put(first ? layout_.first_item : layout_.next_item);
      first = false;
      out_.integer(static_cast<int64_t>(v));
    }
    out_.put(first ? std::string_view("[]") : std::string_view(layout_.close_array));
    return *this;
  }
  // An array written by the caller: open_array, then item() before each element (which the
  // caller writes: a literal, or an Object on the layout two levels deeper), then
  // close_array with the number of elements.
  Object& open_array(std::string_view key) {
    start(key);
    return *this;
  }
  void item(bool first) { out_.put(first ? layout_.first_item : layout_.next_item); }
  Object& close_array(size_t count) {
    out_.put(count == 0 ? std::string_view("[]") : std::string_view(layout_.close_array));
    return *this;
  }
  // An object of integers, in the order given ("{}" when empty).
  template <typename Pairs>
  Object& int_object(std::string_view key, const Pairs& pairs) {
    start(key);
    bool first = true;
    for (const auto& [k, v] : pairs) {
      out_.put(first ? layout_.first_entry : layout_.next_item);
      first = false;
      out_.string(std::string_view(k));
      out_.put(": ");
      out_.integer(static_cast<int64_t>(v));
    }
    out_.put(first ? std::string_view("{}") : std::string_view(layout_.close_object));
    return *this;
  }
  // Writes the closing brace (or "{}"); call once, after the last field.
  void close() { out_.put(fields_ == 0 ? std::string_view("{}") : std::string_view(layout_.close)); }

 private:
  [[gnu::always_inline]] void start(std::string_view key) {
    out_.put(fields_++ == 0 ? layout_.first_field : layout_.next_field, key, "\": ");
  }
  Writer& out_;
  const Layout& layout_;
  size_t fields_ = 0;
};

// `agtrace run --format json --compact`: the pretty text with the layout's spaces and line
// breaks dropped (those outside strings; nlohmann's pretty printer adds no others), fed in
// pieces of any size, so a streamed report is made compact as it goes. The result is the
// text nlohmann's dump() (no indent) writes for the same document.
class Minifier {
 public:
  // Appends `pretty`'s text without the layout to `out`.
  void feed(std::string_view pretty, std::string& out);

 private:
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace agtrace::json_text
