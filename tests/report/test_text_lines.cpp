// The text report's column appenders and line buffer (lib/report/text_lines.hpp), human byte
// units against printf's, and storage names.
#include <catch2/catch.hpp>

#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "report/report.hpp"
#include "report/text_lines.hpp"

namespace tl = agtrace::text_lines;

TEST_CASE("text lines: columns pad on the right or the left, never cut, and append", "[report]") {
  std::string out = ">";
  tl::padded(out, "ab", 5);
  CHECK(out == ">ab   ");
  tl::right_aligned(out, "cd", 4);
  CHECK(out == ">ab     cd");
  tl::padded(out, "toolong", 3);  // wider than the column: as it is
  tl::right_aligned(out, "wide", 2);
  CHECK(out == ">ab     cdtoolongwide");
  out.clear();
  tl::right_aligned_integer(out, -42, 6);
  tl::integer(out, std::numeric_limits<int64_t>::min());
  CHECK(out == "   -42-9223372036854775808");
  out = "abc";
  const size_t start = out.size();
  out += "de";
  tl::pad_from(out, start, 5);
  CHECK(out == "abcde   ");
  CHECK(tl::padded_text("x", 3) == "x  ");
  CHECK(tl::right_aligned_text("x", 3) == "  x");
}

TEST_CASE("text lines: statements are named [i], setup before the program and end after it", "[report]") {
  const std::vector<std::pair<int, std::string>> names = {{-2, "end"},  {-1, "setup"}, {-7, "setup"},   {0, "[0]"},
                                                          {9, "[9]"},   {10, "[10]"},  {12345, "[12345]"}};
  for (const auto& [i, name] : names) {
    std::string text = "at ";
    tl::statement_ref(text, i);
    CHECK(text == "at " + name);
    CHECK(agtrace::statement_ref(i) == name);
    std::ostringstream stream;
    {
      tl::Lines lines(stream);
      lines += "at ";
      tl::statement_ref(lines, i);
    }
    CHECK(stream.str() == "at " + name);
  }
}

TEST_CASE("text lines: the line buffer writes the same text as a string, whole lines at a time", "[report]") {
  std::ostringstream stream;
  std::string expected;
  {
    tl::Lines lines(stream);
    for (int i = 0; i < 20000; ++i) {  // several flushes
      const size_t start = lines.size();
      tl::integer(lines, i * 37 - 5000);
      tl::pad_from(lines, start, 8);
      tl::right_aligned_integer(lines, i, 7);
      lines.append(static_cast<size_t>(i % 5), ' ');
      lines += std::string_view("x");
      lines += 'y';
      tl::padded(lines, "col", 6);
      tl::right_aligned(lines, "r", 3);
      lines.end_line();
      // The stream gets whole lines only.
      CHECK((stream.str().empty() || stream.str().back() == '\n'));
      std::string line;
      tl::integer(line, i * 37 - 5000);
      line.append(line.size() < 8 ? 8 - line.size() : 0, ' ');
      tl::right_aligned_integer(line, i, 7);
      line.append(static_cast<size_t>(i % 5), ' ');
      line += "xycol     r\n";
      expected += line;
    }
    // One line longer than the buffer's first size grows it.
    const std::string wide(200000, 'w');
    lines += wide;
    lines.end_line();
    expected += wide + "\n";
    lines += "unterminated";  // written when the buffer goes
    expected += "unterminated";
  }
  CHECK(stream.str().size() == expected.size());
  CHECK(stream.str() == expected);
}

TEST_CASE("human byte units are printf's %.1f of the scaled value", "[report]") {
  // The definition the report used before (snprintf "%.1f %s" after dividing by 1024 while
  // at least 1024, up to TiB), on boundaries, rounding ties and random sizes.
  const auto by_printf = [](int64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
      v /= 1024.0;
      ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return std::string(buf);
  };
  std::vector<int64_t> values = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -5, 0, 1023,
                                 1024, 1075, 1076, 1126, 1127, 1536, 1048575, 1048576, int64_t{1} << 40,
                                 (int64_t{1} << 50) * 7};
  for (int64_t unit = 1; unit <= int64_t{1} << 40; unit *= 1024)
    for (int64_t k = 1; k < 4096; ++k) values.push_back(unit * k / 20 + k % 7);  // every tenth and its neighbours
  uint64_t x = 88172645463325252ull;  // xorshift64
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(static_cast<int64_t>(x >> (x % 50)));
  }
  size_t differ = 0;
  for (const int64_t v : values)
    if (std::string(tl::HumanBytes(v).view()) != by_printf(v)) ++differ;
  CHECK(differ == 0);
  CHECK(agtrace::human_bytes(1536) == "1.5 KiB");
}

TEST_CASE("storage names: a leaf by its name, others by op and statement, repeats numbered", "[report]") {
  agtrace::RunResult r;
  const auto add = [&r](int64_t id, const char* by, int at) {
    agtrace::StorageLifetime s;
    s.id = id;
    s.allocated_by = agtrace::InternedString(by);
    s.allocated_at = at;
    r.storages.push_back(s);
  };
  add(0, "leaf x", -1);
  add(1, "mul", 3);
  add(2, "mul", 3);            // the same statement again (a loop): numbered
  add(3, "mul", 4);
  add(4, "MulBackward0", -2);  // after the program
  add(5, "add", -1);
  add(6, "add", -3);           // every negative statement but -2 prints as setup: the same name
  add(7, "leaf x", -1);        // the same leaf name again
  add(9, "leaf ", -1);         // no name: reads as unrecorded
  add(-1, "mul", 3);           // no id: not named, not counted
  add(10, "mul", 3);
  const agtrace::StorageNames names(r);
  CHECK(names(0) == "x");
  CHECK(names(1) == "mul@[3]");
  CHECK(names(2) == "mul@[3] (2)");
  CHECK(names(3) == "mul@[4]");
  CHECK(names(4) == "MulBackward0@end");
  CHECK(names(5) == "add@setup");
  CHECK(names(6) == "add@setup (2)");
  CHECK(names(7) == "x (2)");
  CHECK(names(8) == "an unrecorded storage");
  CHECK(names(9) == "an unrecorded storage");
  CHECK(names(10) == "mul@[3] (3)");
  CHECK(names(11) == "an unrecorded storage");
  CHECK(names(-1) == "an unrecorded storage");
  std::ostringstream stream;
  {
    tl::Lines lines(stream);
    names.append_to(lines, 2);
    lines += '|';
    names.append_to(lines, 8);
  }
  CHECK(stream.str() == "mul@[3] (2)|an unrecorded storage");

  // A leaf whose name reads like an op's storage shares its count with it (names are counted
  // by their text then).
  add(11, "leaf mul@[3]", -1);
  const agtrace::StorageNames by_text(r);
  CHECK(by_text(1) == "mul@[3]");
  CHECK(by_text(10) == "mul@[3] (3)");
  CHECK(by_text(11) == "mul@[3] (4)");
  CHECK(by_text(6) == "add@setup (2)");
}
