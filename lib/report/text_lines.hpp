// Appending the text report's columns to a line buffer: the long sections (the walks, bytes
// per statement, lifetimes, saved values, the accountant's rows) build each line in one reused
// string and write it once, instead of a temporary string per padded column and an ostream
// insertion per piece (on a 2,000-op chain those were 43 % of the text report's instructions,
// callgrind).
#pragma once
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace agtrace::text_lines {

// `s`, then spaces up to `width` columns.
inline void padded(std::string& out, std::string_view s, size_t width) {
  out += s;
  if (s.size() < width) out.append(width - s.size(), ' ');
}
// Spaces up to `width` columns, then `s`.
inline void right_aligned(std::string& out, std::string_view s, size_t width) {
  if (s.size() < width) out.append(width - s.size(), ' ');
  out += s;
}
inline void integer(std::string& out, int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
inline void right_aligned_integer(std::string& out, int64_t v, size_t width) {
  char buf[24];
  const size_t n = static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf);
  right_aligned(out, std::string_view(buf, n), width);
}
// statement_ref(i): "[i]", "setup" (before the program) or "end" (after it).
inline void statement_ref(std::string& out, int i) {
  if (i == -2) {
    out += "end";
  } else if (i < 0) {
    out += "setup";
  } else {
    out += '[';
    integer(out, i);
    out += ']';
  }
}

}  // namespace agtrace::text_lines
