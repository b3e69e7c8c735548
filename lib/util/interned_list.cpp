#include "util/interned_list.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

#include "util/spin_guard.hpp"

namespace agtrace {
namespace {

// Keyed by the items' text addresses (an interned text has one address for the process).
struct Key {
  std::vector<const char*> texts;
  bool operator==(const Key& o) const { return texts == o.texts; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ k.texts.size();
    for (const char* p : k.texts) {
      h ^= reinterpret_cast<uintptr_t>(p);
      h *= 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    return static_cast<size_t>(h);
  }
};
struct Table {
  std::deque<std::vector<InternedString>> lists;  // stable addresses
  std::unordered_map<Key, const std::vector<InternedString>*, KeyHash> index;
  std::atomic_flag lock = ATOMIC_FLAG_INIT;  // one run per thread; this keeps two runs safe
  Key scratch;                               // the key being looked up (under the lock)
};
Table& table() {
  static Table* t = new Table;  // never destroyed: records of finished runs may point into it
  return *t;
}

}  // namespace

const std::vector<InternedString>& InternedList::empty_items() {
  static const std::vector<InternedString>* e = new std::vector<InternedString>;
  return *e;
}

namespace {
// The lists this thread interned most recently, looked at before the shared table (issue
// #6): a statement end interns the holder list of every storage it changed, a long program
// uses a handful of distinct lists, and comparing a few pointers costs less than the lock,
// the hash and the table probe (this constructor: 1.4 % of a long elementwise chain's
// instructions before, 1.1 % with the cache).
// Lists are never removed from the table, so a pointer kept here stays valid.
struct RecentLists {
  static constexpr size_t kSize = 8;
  const std::vector<InternedString>* lists[kSize] = {};
  size_t next = 0;  // the slot replaced next (round robin)
};
thread_local RecentLists t_recent;
}  // namespace

InternedList::InternedList(const std::vector<InternedString>& items) {
  if (items.empty()) return;
  RecentLists& recent = t_recent;
  for (size_t k = 0; k < RecentLists::kSize; ++k) {
    const std::vector<InternedString>* l = recent.lists[k];
    if (l && *l == items) {  // InternedString compares by pointer
      list_ = l;
      // A hit moves one place up: the lists a long program keeps using end up looked at first.
      if (k > 0) std::swap(recent.lists[k], recent.lists[k - 1]);
      return;
    }
  }
  Table& t = table();
  SpinGuard guard(t.lock);
  t.scratch.texts.clear();
  for (const InternedString& s : items) t.scratch.texts.push_back(s.c_str());
  auto it = t.index.find(t.scratch);
  if (it != t.index.end()) {
    list_ = it->second;
  } else {
    list_ = &t.lists.emplace_back(items);
    t.index.emplace(t.scratch, list_);
  }
  recent.lists[recent.next] = list_;
  recent.next = (recent.next + 1) % RecentLists::kSize;
}

size_t InternedList::table_size() {
  Table& t = table();
  SpinGuard guard(t.lock);
  return t.lists.size();
}

namespace {
thread_local std::vector<InternedString> t_merged;  // merged()'s, reused: no allocation per merge
}  // namespace

InternedList InternedList::merged(const InternedList& more) const {
  if (more.empty() || more == *this) return *this;
  if (empty()) return more;
  std::vector<InternedString>& out = t_merged;
  out.assign(begin(), end());
  for (const InternedString& item : more)
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  return out.size() == size() ? *this : InternedList(out);
}

InternedList InternedList::merged(const InternedString& item) const {
  if (std::find(begin(), end(), item) != end()) return *this;
  std::vector<InternedString>& out = t_merged;
  out.assign(begin(), end());
  out.push_back(item);
  return InternedList(out);
}

}  // namespace agtrace
