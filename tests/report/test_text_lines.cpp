// The text report's column appenders (lib/report/text_lines.hpp) against the padding and
// statement names the report printed before them (report.hpp statement_ref).
#include <catch2/catch.hpp>

#include <limits>
#include <string>

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
}

TEST_CASE("text lines: statements are named as statement_ref names them", "[report]") {
  for (int i : {-2, -1, -7, 0, 9, 10, 12345}) {
    std::string out = "at ";
    tl::statement_ref(out, i);
    CHECK(out == "at " + agtrace::statement_ref(i));
  }
  std::string out;
  tl::statement_ref(out, -2);
  tl::statement_ref(out, -1);
  tl::statement_ref(out, 3);
  CHECK(out == "endsetup[3]");
}
