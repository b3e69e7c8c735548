// String escapes give characters, as Python's str literals do: '\xff' is U+00FF (two bytes
// in UTF-8, never a lone 0xFF byte that no JSON report can carry), '\u00e9' and
// '\U0001F600' name a code point, a surrogate is refused.
#include <catch2/catch.hpp>

#include "errors.hpp"
#include "syntax/ast.hpp"

using namespace agtrace::syntax;

namespace {
std::string text_of(const std::string& source) {
  Stmt st = parse_statement(source);
  REQUIRE(st.kind == StmtKind::ExprStmt);
  return st.value->text;
}
}  // namespace

TEST_CASE("string escapes name characters, written as UTF-8", "[syntax][robust]") {
  CHECK(text_of(R"('\xff')") == "\xc3\xbf");
  CHECK(text_of(R"('\x41\x7f')") == "A\x7f");
  CHECK(text_of(R"('\u00e9')") == "\xc3\xa9");
  CHECK(text_of(R"('\ufffe')") == "\xef\xbf\xbe");
  CHECK(text_of(R"('\U0001F600')") == "\xf0\x9f\x98\x80");
  CHECK_THROWS_WITH(parse_statement(R"(print('\ud800'))"), Catch::Matchers::Contains("surrogate"));
  CHECK_THROWS_WITH(parse_statement(R"(print('\u12'))"), Catch::Matchers::Contains("expected 4 hexadecimal digits"));
  CHECK_THROWS_WITH(parse_statement(R"(print('\U00110000'))"), Catch::Matchers::Contains("past U+10FFFF"));
}
