// Immutable lists of interned strings, themselves interned (issue #6): equal lists are one
// pointer. A storage's holders ("name h", "saved TanhBackward0._saved_result") were copied
// into a new vector at every statement end that changed them, once for the holder index and
// once for the accountant (three allocations per statement of a chain); programs have few
// distinct holder lists, so each is now made once and handed around as a pointer. The table
// only grows and lives as long as the process, like InternedString's.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "util/interned_string.hpp"

namespace agtrace {

class InternedList {
 public:
  InternedList() = default;  // the empty list (no table lookup)
  explicit InternedList(const std::vector<InternedString>& items);
  InternedList(std::initializer_list<InternedString> items) : InternedList(std::vector<InternedString>(items)) {}

  const std::vector<InternedString>& items() const { return list_ ? *list_ : empty_items(); }
  operator const std::vector<InternedString>&() const { return items(); }
  size_t size() const { return items().size(); }
  bool empty() const { return !list_; }
  const InternedString& operator[](size_t i) const { return items()[i]; }
  std::vector<InternedString>::const_iterator begin() const { return items().begin(); }
  std::vector<InternedString>::const_iterator end() const { return items().end(); }

  friend bool operator==(const InternedList& a, const InternedList& b) { return a.list_ == b.list_; }
  friend bool operator!=(const InternedList& a, const InternedList& b) { return a.list_ != b.list_; }
  friend bool operator==(const InternedList& a, const std::vector<InternedString>& b) { return a.items() == b; }
  friend bool operator!=(const InternedList& a, const std::vector<InternedString>& b) { return a.items() != b; }

  // This list with the items of `more` it lacks appended, in their order (first-seen order
  // kept); itself when nothing is new. Equal lists compare as pointers, so a list merged
  // with itself or with an empty one costs no lookup.
  InternedList merged(const InternedList& more) const;
  InternedList merged(const InternedString& item) const;

  // Distinct non-empty lists in the table (for tests).
  static size_t table_size();

 private:
  static const std::vector<InternedString>& empty_items();
  const std::vector<InternedString>* list_ = nullptr;  // null: the empty list; never points at an empty one
};

}  // namespace agtrace
