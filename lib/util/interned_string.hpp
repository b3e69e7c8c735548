// Interned strings for records kept by the thousand (issue #6): the event timeline keeps,
// for each of its 6 events per operation, the op, what, hooks and kind names, which repeat
// ("alloc", "mul", "MulBackward0._saved_other"). An InternedString is one pointer into a
// process-wide table that only grows, so a record costs 8 bytes per name instead of a
// 32-byte std::string and often a heap block, and equal names compare by pointer.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace agtrace {

class InternedString {
 public:
  constexpr InternedString() = default;  // the empty string (no table lookup: records are made by the chunk)
  explicit InternedString(std::string_view text);
  // Implicit from strings, so that lists of holder labels can be written as literals.
  InternedString(const char* text) : InternedString(std::string_view(text)) {}
  InternedString(const std::string& text) : InternedString(std::string_view(text)) {}

  const std::string& str() const { return text_ ? *text_ : empty_text(); }
  operator const std::string&() const { return str(); }
  const char* c_str() const { return str().c_str(); }
  bool empty() const { return !text_; }
  size_t size() const { return str().size(); }
  size_t find(std::string_view what, size_t from = 0) const { return str().find(what, from); }
  size_t rfind(std::string_view what, size_t from = std::string::npos) const { return str().rfind(what, from); }
  std::string substr(size_t from, size_t count = std::string::npos) const { return str().substr(from, count); }

  friend bool operator==(const InternedString& a, const InternedString& b) { return a.text_ == b.text_; }
  friend bool operator!=(const InternedString& a, const InternedString& b) { return a.text_ != b.text_; }
  friend bool operator==(const InternedString& a, const char* b) { return a.str() == b; }
  friend bool operator!=(const InternedString& a, const char* b) { return a.str() != b; }
  friend bool operator==(const InternedString& a, const std::string& b) { return a.str() == b; }
  friend bool operator!=(const InternedString& a, const std::string& b) { return a.str() != b; }
  friend std::string operator+(const std::string& a, const InternedString& b) { return a + b.str(); }
  friend std::string operator+(const InternedString& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const char* a, const InternedString& b) { return a + b.str(); }
  friend std::string operator+(const InternedString& a, const char* b) { return a.str() + b; }

  // The same as InternedString(text), looked up first in a small cache of the texts this
  // thread interned lately (a slot chosen from the length and three characters, then one
  // comparison): names and ops repeat from one statement to the next, and that costs less
  // than hashing the text into the shared table.
  static InternedString recent(std::string_view text);

  // Distinct strings in the table (for tests and the memory notes).
  static size_t table_size();

 private:
  static const std::string& empty_text();
  const std::string* text_ = nullptr;  // null: the empty string; never points at an empty text
};

// Prints as its text.
std::ostream& operator<<(std::ostream& os, const InternedString& s);

// nlohmann::json (any basic_json) writes an interned string as its text.
template <typename BasicJson>
void to_json(BasicJson& j, const InternedString& s) {
  j = s.str();
}

}  // namespace agtrace
