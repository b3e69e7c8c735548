#include "util/interned_string.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <ostream>
#include <unordered_map>

#include "util/spin_guard.hpp"

namespace agtrace {
namespace {

// The table lives as long as the process (records of finished runs may still point into
// it), so it is never destroyed: a function-local pointer, not a static object whose
// destructor could run before a static RunResult's.
struct Table {
  std::deque<std::string> texts;  // stable addresses
  std::unordered_map<std::string_view, const std::string*> index;
  std::atomic_flag lock = ATOMIC_FLAG_INIT;  // events come from one thread; this keeps two runs safe
};
Table& table() {
  static Table* t = new Table;
  return *t;
}

const std::string* intern(std::string_view text) {
  if (text.empty()) return nullptr;
  Table& t = table();
  SpinGuard guard(t.lock);
  auto it = t.index.find(text);
  if (it != t.index.end()) return it->second;
  const std::string* found = &t.texts.emplace_back(text);
  t.index.emplace(std::string_view(*found), found);
  return found;
}

}  // namespace

const std::string& InternedString::empty_text() {
  static const std::string* e = new std::string;  // never destroyed, like the table
  return *e;
}
InternedString::InternedString(std::string_view text) : text_(intern(text)) {}

namespace {
// Whether a[0, n) == b[0, n), eight bytes at a time: the texts looked up are short (op and
// node names), and a call to memcmp cost more than the comparison itself.
bool same_bytes(const char* a, const char* b, size_t n) {
  if (n < 8) {
    for (size_t i = 0; i < n; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  uint64_t x, y;
  for (size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  std::memcpy(&x, a + n - 8, 8);  // the last eight (overlapping the loop's last word)
  std::memcpy(&y, b + n - 8, 8);
  return x == y;
}
}  // namespace

InternedString InternedString::recent(std::string_view text) {
  // A direct-mapped cache of the texts this thread interned lately, indexed by a hash of the
  // length and three characters (issue #6): the 16-entry list this replaced was scanned in
  // order, and with the ~20 texts a chain of ops cycles through (op names, node names, saved
  // attributes, variable names) its round-robin replacement kept missing (184 instructions
  // per lookup in make_node). Two texts sharing a slot take turns, still correct.
  // An entry is the interned string itself (its text is in the table): trivially
  // constructible, so the thread-local array needs no initialisation guard per call.
  if (text.empty()) return InternedString();
  constexpr size_t kEntries = 64;
  thread_local InternedString entries[kEntries];
  const size_t n = text.size();
  const size_t hash = n * 29 + static_cast<unsigned char>(text[0]) * 7 + static_cast<unsigned char>(text[n / 2]) * 3 +
                      static_cast<unsigned char>(text[n - 1]);
  InternedString& e = entries[hash % kEntries];
  if (!e.empty() && e.str().size() == n && same_bytes(e.str().data(), text.data(), n)) return e;
  e = InternedString(text);
  return e;
}

size_t InternedString::table_size() {
  Table& t = table();
  SpinGuard guard(t.lock);
  return t.texts.size();
}

std::ostream& operator<<(std::ostream& os, const InternedString& s) { return os << s.str(); }

}  // namespace agtrace
