// Interned shapes for tensor objects (issue #6).
//
// Every tensor object carries its sizes and strides. As two std::vector<int64_t> they were
// two heap blocks per tensor, made, copied and freed with it: on a long elementwise chain
// (2.3 tensors per op, each result shaped as its input) about 7 of the ~28 allocations per
// op, plus the strides computed again for every result. A program uses a handful of
// distinct shapes, so a tensor keeps each as one pointer to a process-wide immutable entry:
// a result shaped as its input copies the pointer, equal shapes compare as pointers, and
// the contiguous strides of a shape are computed once per shape and kept with its entry.
// (PyTorch keeps sizes and strides inline in the TensorImpl, c10::SmallVector<int64_t, 5>;
// an inline small vector was measured here twice and made tensors larger for no gain,
// bench/README.md.) Entries are never freed: records of finished runs may point at them.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace agtrace {

using Shape = std::vector<int64_t>;

class InternedShape {
 public:
  // [] (a 0-d tensor's sizes): the address of a static entry, inline. Every tensor object
  // default-constructs its sizes and strides, and an out-of-line constructor reaching the
  // table through its function-local static cost 1 % of a long chain's instructions (issue #6).
  InternedShape() : entry_(&kScalarEntry) {}
  // Implicit, so that a Shape computed by an op is assigned as before; `s` may itself be an
  // entry's vector (another InternedShape converted), which is recognised by address.
  InternedShape(const Shape& s) : entry_(intern(s)) {}
  InternedShape(std::initializer_list<int64_t> dims) : InternedShape(Shape(dims)) {}
  InternedShape& operator=(const Shape& s) {
    entry_ = intern(s);
    return *this;
  }

  const Shape& vec() const { return entry_->shape; }
  operator const Shape&() const { return entry_->shape; }
  size_t size() const { return entry_->shape.size(); }
  bool empty() const { return entry_->shape.empty(); }
  int64_t operator[](size_t i) const { return entry_->shape[i]; }
  int64_t at(size_t i) const { return entry_->shape.at(i); }
  int64_t front() const { return entry_->shape.front(); }
  int64_t back() const { return entry_->shape.back(); }
  const int64_t* data() const { return entry_->shape.data(); }
  Shape::const_iterator begin() const { return entry_->shape.begin(); }
  Shape::const_iterator end() const { return entry_->shape.end(); }
  Shape::const_reverse_iterator rbegin() const { return entry_->shape.rbegin(); }
  Shape::const_reverse_iterator rend() const { return entry_->shape.rend(); }

  // Strides of a contiguous tensor of this shape (size-1 and size-0 dims as
  // contiguous_strides gives them), computed once per shape.
  InternedShape contiguous_strides() const;

  friend bool operator==(const InternedShape& a, const InternedShape& b) { return a.entry_ == b.entry_; }
  friend bool operator!=(const InternedShape& a, const InternedShape& b) { return a.entry_ != b.entry_; }
  friend bool operator==(const InternedShape& a, const Shape& b) { return a.vec() == b; }
  friend bool operator!=(const InternedShape& a, const Shape& b) { return a.vec() != b; }
  friend bool operator==(const Shape& a, const InternedShape& b) { return a == b.vec(); }
  friend bool operator!=(const Shape& a, const InternedShape& b) { return a != b.vec(); }

  // Distinct shapes interned so far (for tests).
  static size_t table_size();

 private:
  struct Entry {
    Shape shape;
    mutable std::atomic<const Entry*> contiguous{nullptr};  // its contiguous strides' entry, once computed
  };
  struct Table;  // interned_shape.cpp
  // Static storage: zero-filled before any initializer runs, and all-zero is its value (an
  // empty vector, no strides entry yet), so taking its address is safe at any time; its own
  // initializer only writes those zeros again (a strides entry it forgets is found again).
  static Entry kScalarEntry;
  static Table& table();
  explicit InternedShape(const Entry* e) : entry_(e) {}
  static const Entry* intern(const Shape& s);
  const Entry* entry_;
};

}  // namespace agtrace
