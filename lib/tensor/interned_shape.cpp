#include "tensor/interned_shape.hpp"

#include <atomic>
#include <deque>
#include <unordered_map>

#include "tensor/tensor.hpp"
#include "util/spin_guard.hpp"

namespace agtrace {

namespace {
struct ShapeHash {
  size_t operator()(const Shape& s) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    for (int64_t d : s) {
      h ^= static_cast<uint64_t>(d);
      h *= 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    return static_cast<size_t>(h);
  }
};
}  // namespace

struct InternedShape::Table {
  std::deque<Entry> entries;  // stable addresses
  std::unordered_map<Shape, const Entry*, ShapeHash> index;
  std::atomic_flag lock = ATOMIC_FLAG_INIT;  // one run per thread; this keeps two runs safe
  Table() { index.emplace(Shape{}, &kScalarEntry); }  // [] is kScalarEntry, not in `entries`
};

InternedShape::Entry InternedShape::kScalarEntry;

InternedShape::Table& InternedShape::table() {
  static Table* t = new Table;  // never destroyed: records of finished runs may point into it
  return *t;
}

namespace {
// The entries this thread used most recently, looked at before the shared table: an op's
// result is shaped as its input, whose entry is here (found by address when the Shape
// handed over is an entry's own vector, else by value).
struct RecentShapes {
  static constexpr size_t kSize = 8;
  const void* entries[kSize] = {};
  size_t next = 0;  // the slot replaced next (round robin)
};
thread_local RecentShapes t_recent;
}  // namespace

const InternedShape::Entry* InternedShape::intern(const Shape& s) {
  RecentShapes& recent = t_recent;
  for (const void* p : recent.entries) {
    const Entry* e = static_cast<const Entry*>(p);
    if (e && &e->shape == &s) return e;
  }
  for (const void* p : recent.entries) {
    const Entry* e = static_cast<const Entry*>(p);
    if (e && e->shape == s) return e;
  }
  Table& t = table();
  const Entry* found;
  {
    SpinGuard guard(t.lock);
    auto it = t.index.find(s);
    if (it != t.index.end()) {
      found = it->second;
    } else {
      Entry& e = t.entries.emplace_back();
      e.shape = s;
      found = &e;
      t.index.emplace(s, found);
    }
  }
  recent.entries[recent.next] = found;
  recent.next = (recent.next + 1) % RecentShapes::kSize;
  return found;
}

InternedShape InternedShape::contiguous_strides() const {
  // Published once computed; two threads computing it at once store the same entry.
  if (const Entry* c = entry_->contiguous.load(std::memory_order_acquire)) return InternedShape(c);
  const Entry* c = intern(agtrace::contiguous_strides(entry_->shape));  // tensor.hpp's
  entry_->contiguous.store(c, std::memory_order_release);
  return InternedShape(c);
}

size_t InternedShape::table_size() {
  Table& t = table();
  SpinGuard guard(t.lock);
  return t.entries.size() + 1;  // and [], kScalarEntry
}

}  // namespace agtrace
