// ChunkedVector (lib/util/chunked_vector.hpp), InternedString (lib/util/interned_string.hpp)
// and CategoryBytes (lib/interp/result.hpp):
// the compact containers of the accountant's records (issue #6).
#include <catch2/catch.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "interp/result.hpp"
#include "util/chunked_vector.hpp"
#include "util/large_blocks.hpp"
#include "util/interned_string.hpp"

using namespace agtrace;

TEST_CASE("chunked vector: appends across chunks keep order, addresses and values", "[chunked_vector]") {
  ChunkedVector<std::string, 4> v;
  CHECK(v.empty());
  std::vector<const std::string*> addresses;
  for (int i = 0; i < 11; ++i) {
    v.emplace_back() = "s" + std::to_string(i);
    addresses.push_back(&v.back());
  }
  REQUIRE(v.size() == 11);
  for (size_t i = 0; i < v.size(); ++i) {
    CHECK(v[i] == "s" + std::to_string(i));
    CHECK(&v[i] == addresses[i]);  // appending never moved an element
  }
  int k = 0;
  for (const std::string& s : v) CHECK(s == "s" + std::to_string(k++));
  CHECK(k == 11);

  ChunkedVector<std::string, 4> copy = v;  // deep copy
  copy[0] = "changed";
  CHECK(v[0] == "s0");
  CHECK(copy.size() == 11);
  ChunkedVector<std::string, 4> moved = std::move(copy);
  CHECK(moved[0] == "changed");
  CHECK(moved[10] == "s10");
  v.clear();
  CHECK(v.empty());
  CHECK(v.begin() == v.end());
  v.push_back("again");  // a fresh chunk holds default elements again
  CHECK(v.size() == 1);
  CHECK(v[0] == "again");
}

TEST_CASE("interned strings: equal texts share one entry, compare and print as strings", "[chunked_vector]") {
  const size_t before = InternedString::table_size();
  InternedString a(std::string("MulBackward0._saved_") + "other");
  InternedString b("MulBackward0._saved_other");
  InternedString c("TanhBackward0._saved_result");
  CHECK(a == b);
  CHECK(&a.str() == &b.str());  // one copy of the text
  CHECK(a != c);
  CHECK(a == "MulBackward0._saved_other");
  CHECK(a == std::string("MulBackward0._saved_other"));
  CHECK(c != "MulBackward0._saved_other");
  CHECK(InternedString::table_size() <= before + 2);
  InternedString empty;
  CHECK(empty.empty());
  CHECK(empty == InternedString(""));
  CHECK(a.size() == 25);
  CHECK(a.find("._saved_") == 12);
  CHECK(a.substr(20) == "other");
  CHECK(a.rfind("Mul", 0) == 0);
  CHECK("x " + a == "x MulBackward0._saved_other");
  empty = "now set";
  CHECK(empty == "now set");
}

TEST_CASE("category bytes list categories in name order, as the reports print them", "[chunked_vector]") {
  CategoryBytes c;
  CHECK(c.empty());
  c.add("named", 16);
  c.add("grad", 4);
  c.add("leaf_param", 8);
  c.add("graph_only", 2);
  REQUIRE(c.size() == 4);
  std::vector<std::string> order;
  for (const auto& [name, bytes] : c) order.push_back(std::string(name) + "=" + std::to_string(bytes));
  CHECK(order == std::vector<std::string>{"grad=4", "graph_only=2", "leaf_param=8", "named=16"});
  CHECK(c.at("leaf_param") == 8);
  CHECK(c.count("other") == 0);
  CHECK_THROWS_AS(c.at("other"), std::out_of_range);
}

TEST_CASE("interned strings from the recent cache are the table's", "[chunked_vector]") {
  // More distinct texts than the cache holds, looked up twice: each lookup gives the one
  // interned text, whether the cache still has it or not.
  std::vector<InternedString> first;
  for (int i = 0; i < 200; ++i) first.push_back(InternedString::recent("name v" + std::to_string(i)));
  for (int i = 199; i >= 0; --i) {
    const InternedString again = InternedString::recent("name v" + std::to_string(i));
    CHECK(again == first[static_cast<size_t>(i)]);
    CHECK(again == InternedString("name v" + std::to_string(i)));
    CHECK(again.str() == "name v" + std::to_string(i));
  }
  CHECK(InternedString::recent("").empty());
  // Texts of one length with the same first, middle and last characters share a cache slot:
  // asked for in turn, each still gives its own text.
  for (int round = 0; round < 3; ++round)
    for (const char* text : {"a1cb", "a2cb", "a3cb"}) {
      const InternedString got = InternedString::recent(text);
      CHECK(got.str() == text);
      CHECK(got == InternedString(text));
    }
  // Longer texts sharing a slot, compared eight bytes at a time: they differ in the second
  // character (the first word) or the next to last (the overlapping last word only).
  for (size_t length : {8, 9, 12, 15, 16, 17, 24, 33}) {
    std::vector<std::string> texts;
    for (size_t at : {size_t{1}, length - 2})
      for (char c : {'c', 'd', 'e'}) {
        std::string t(length, 'a');
        t[0] = 'b';
        t[length / 2] = 'm';
        t[length - 1] = 'z';
        t[at] = c;
        texts.push_back(t);
      }
    for (int round = 0; round < 2; ++round)
      for (const std::string& text : texts) {
        INFO(text);
        const InternedString got = InternedString::recent(text);
        CHECK(got.str() == text);
        CHECK(got == InternedString(text));
      }
  }
}

TEST_CASE("grow_to appends default elements up to a size, never shrinks, never moves them", "[chunked_vector]") {
  ChunkedVector<std::string, 4> v;
  v.grow_to(3);
  REQUIRE(v.size() == 3);
  v[2] = "kept";
  const std::string* at2 = &v[2];
  v.grow_to(11);  // three more chunks
  REQUIRE(v.size() == 11);
  CHECK(&v[2] == at2);
  CHECK(v[2] == "kept");
  for (size_t i = 3; i < 11; ++i) CHECK(v[i].empty());
  v.grow_to(5);
  CHECK(v.size() == 11);
}

// Elements are constructed when appended and destroyed by clear, the destructor or a move
// away (chunks are raw memory: a chunk made is not a chunk of constructed elements).
TEST_CASE("chunked vector elements live from their append to clear or destruction", "[chunked_vector]") {
  static int alive = 0;
  struct Counted {
    Counted() { ++alive; }
    Counted(const Counted&) { ++alive; }
    Counted& operator=(const Counted&) = default;
    ~Counted() { --alive; }
  };
  alive = 0;
  {
    ChunkedVector<Counted, 4> v;
    v.grow_to(5);  // two chunks made, five elements
    CHECK(alive == 5);
    ChunkedVector<Counted, 4> copy(v);
    CHECK(alive == 10);
    ChunkedVector<Counted, 4> moved(std::move(copy));
    CHECK(alive == 10);
    CHECK(copy.size() == 0);
    copy.emplace_back();  // the moved-from vector is usable
    CHECK(alive == 11);
    v.clear();
    CHECK(alive == 6);
    moved = std::move(copy);  // moved's five go, copy's one moves over
    CHECK(alive == 1);
    CHECK(moved.size() == 1);
  }
  CHECK(alive == 0);
}

TEST_CASE("interned strings print as their text", "[chunked_vector]") {
  std::ostringstream out;
  out << InternedString("saved MulBackward0._saved_other") << '|' << InternedString();
  CHECK(out.str() == "saved MulBackward0._saved_other|");
}

// A default chunk is big enough for the large-block arena (its huge pages, not malloc's heap),
// and the least power of two of elements that is.
TEST_CASE("default chunks hold at least 64 KiB, the least power of two of elements that do", "[chunked_vector]") {
  auto check = [](size_t elements, size_t element_bytes) {
    CHECK((elements & (elements - 1)) == 0);
    CHECK(elements * element_bytes >= large_blocks::kMinBytes);
    if (elements > 1) CHECK(elements / 2 * element_bytes < large_blocks::kMinBytes);
  };
  struct Bytes24 {
    char b[24];
  };
  struct Bytes280 {
    char b[280];
  };
  struct Bytes100000 {
    char b[100000];
  };
  check(default_chunk_elements<char>(), 1);
  check(default_chunk_elements<Bytes24>(), 24);
  check(default_chunk_elements<Bytes280>(), 280);
  check(default_chunk_elements<Bytes100000>(), 100000);
  CHECK(default_chunk_elements<Bytes280>() == 256);
  CHECK(default_chunk_elements<Bytes100000>() == 1);
}
