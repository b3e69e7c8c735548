// Appending the text report's columns: the long sections (the walks, bytes per statement,
// lifetimes, saved values, the accountant's rows, the timeline) write each line into one
// buffer (Lines) handed to the stream in large pieces, instead of a temporary string per padded
// column and an ostream insertion per piece. The appenders take that buffer or a std::string.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "util/copy_bytes.hpp"
#include "util/decimal.hpp"

namespace agtrace::text_lines {

// The report's text collected in one growing buffer and written to the stream once it holds
// 64 KiB, at the end of a line (so a line's columns can be measured from its start with
// size()), and by flush() at the end (or when destroyed). A std::string grown by += cost a
// library call per piece: about a third of a 2,000-op chain's text report under callgrind.
class Lines {
 public:
  explicit Lines(std::ostream& out) : out_(out) {}
  Lines(const Lines&) = delete;
  Lines& operator=(const Lines&) = delete;
  // A write error while flushing here is dropped: the report's end flushes explicitly (and a
  // write error there is thrown), so this flush only writes when another error is already on
  // its way out, and a destructor may not throw.
  ~Lines() {
    try {
      flush();
    } catch (...) {
    }
  }
  // Bytes written since the last flush: columns are differences of two sizes on one line.
  size_t size() const { return used_; }
  // Inlined at each call: most pieces are literals, whose length the compiler then knows.
  [[gnu::always_inline]] Lines& operator+=(std::string_view s) {
    reserve(s.size());
    copy_bytes(data_.get() + used_, s.data(), s.size());
    used_ += s.size();
    return *this;
  }
  [[gnu::always_inline]] Lines& operator+=(char c) {
    reserve(1);
    data_[used_++] = c;
    return *this;
  }
  void append(size_t n, char c) {
    reserve(n);
    std::memset(data_.get() + used_, c, n);
    used_ += n;
  }
  // `v` in decimal, written in place (no copy from a temporary).
  void integer(int64_t v) {
    reserve(24);
    used_ = static_cast<size_t>(write_decimal(data_.get() + used_, v) - data_.get());
  }
  // '\n', and the buffer handed to the stream once it is large.
  void end_line() {
    *this += '\n';
    if (used_ >= kFlushAt) flush();
  }
  void flush() {
    if (used_ > 0) out_.write(data_.get(), static_cast<std::streamsize>(used_));
    used_ = 0;
  }

 private:
  static constexpr size_t kFlushAt = 64 * 1024;
  [[gnu::always_inline]] void reserve(size_t n) {
    if (n > capacity_ - used_) grow(n);
  }
  [[gnu::noinline]] void grow(size_t n) {
    size_t capacity = capacity_ == 0 ? kFlushAt + 4096 : capacity_;
    while (capacity - used_ < n) capacity *= 2;
    std::unique_ptr<char[]> data(new char[capacity]);
    if (used_ > 0) std::memcpy(data.get(), data_.get(), used_);
    data_ = std::move(data);
    capacity_ = capacity;
  }
  std::ostream& out_;
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

// `s`, then spaces up to `width` columns.
template <typename Out>
void padded(Out& out, std::string_view s, size_t width) {
  out += s;
  if (s.size() < width) out.append(width - s.size(), ' ');
}
// Spaces up to `width` columns, then `s`.
template <typename Out>
void right_aligned(Out& out, std::string_view s, size_t width) {
  if (s.size() < width) out.append(width - s.size(), ' ');
  out += s;
}
// Spaces after what was written from `start` on, up to `width` columns from there.
template <typename Out>
void pad_from(Out& out, size_t start, size_t width) {
  const size_t written = out.size() - start;
  if (written < width) out.append(width - written, ' ');
}
template <typename Out>
void integer(Out& out, int64_t v) {
  char buf[24];
  out += std::string_view(buf, static_cast<size_t>(write_decimal(buf, v) - buf));
}
inline void integer(Lines& out, int64_t v) { out.integer(v); }
template <typename Out>
void right_aligned_integer(Out& out, int64_t v, size_t width) {
  char buf[24];
  const size_t n = static_cast<size_t>(write_decimal(buf, v) - buf);
  right_aligned(out, std::string_view(buf, n), width);
}
// statement_ref(i): "[i]", "setup" (before the program) or "end" (after it).
template <typename Out>
void statement_ref(Out& out, int i) {
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

// The one-off header and summary lines' columns, as strings.
inline std::string padded_text(std::string_view s, size_t width) {
  std::string out;
  padded(out, s, width);
  return out;
}
inline std::string right_aligned_text(std::string_view s, size_t width) {
  std::string out;
  right_aligned(out, s, width);
  return out;
}

// human_bytes(bytes) in a small buffer: "512 B" below 1 KiB, else one decimal and the unit
// ("1.5 KiB", up to TiB). std::to_chars with fixed precision writes what printf's "%.1f"
// writes (the standard defines it so), without a string per value.
class HumanBytes {
 public:
  explicit HumanBytes(int64_t bytes) {
    char* end = text_ + sizeof text_;
    char* p;
    if (bytes < 1024) {
      p = write_decimal(text_, bytes);
      p = append(p, " B");
    } else {
      static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
      double v = static_cast<double>(bytes);
      int u = 0;
      while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
      }
      p = std::to_chars(text_, end - 8, v, std::chars_format::fixed, 1).ptr;
      *p++ = ' ';
      p = append(p, kUnits[u]);
    }
    size_ = static_cast<size_t>(p - text_);
  }
  std::string_view view() const { return std::string_view(text_, size_); }

 private:
  static char* append(char* p, const char* s) {
    const size_t n = std::strlen(s);
    std::memcpy(p, s, n);
    return p + n;
  }
  char text_[48];  // 2^63 / 1024^4 is about 8.4 million: "8388608.0 TiB" and shorter
  size_t size_ = 0;
};

}  // namespace agtrace::text_lines
