#include "util/interned_string.hpp"

#include <atomic>
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

InternedString InternedString::recent(std::string_view text) {
  struct Entry {
    std::string text;
    InternedString value;
  };
  constexpr size_t kEntries = 16;
  thread_local Entry entries[kEntries];
  thread_local size_t next = 0;
  // The first character is compared before the rest (most texts asked for differ there).
  for (const Entry& e : entries)
    if (e.text.size() == text.size() && !e.value.empty() && (text.empty() || e.text[0] == text[0]) &&
        std::string_view(e.text) == text)
      return e.value;
  Entry& slot = entries[next];
  next = (next + 1) % kEntries;
  slot.text.assign(text.data(), text.size());
  slot.value = InternedString(text);
  return slot.value;
}

size_t InternedString::table_size() {
  Table& t = table();
  SpinGuard guard(t.lock);
  return t.texts.size();
}

std::ostream& operator<<(std::ostream& os, const InternedString& s) { return os << s.str(); }

}  // namespace agtrace
