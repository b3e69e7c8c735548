// A vector whose first N elements live inside it (issue #6). The holder index keeps, per
// storage, the holders that name it: almost always one (a name, or a saved value), and as
// a std::vector that one was a heap block made and freed per storage, 1.7 per op of a long
// chain. Elements are trivially copyable (moved with memmove). The operations its users
// need: size, iteration, insert at a position, erase, truncate, clear, reserve.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

namespace agtrace {

template <typename T, size_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "InlineVector moves its elements with memmove");
  static_assert(N > 0, "at least one element inline");

 public:
  InlineVector() = default;
  InlineVector(const InlineVector& o) { assign(o); }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      size_ = 0;
      assign(o);
    }
    return *this;
  }
  InlineVector(InlineVector&& o) noexcept { take(o); }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      heap_.reset();
      capacity_ = N;
      take(o);
    }
    return *this;
  }
  ~InlineVector() = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  void clear() { size_ = 0; }
  // Keeps the first n elements (n <= size()), as erase(begin() + n, end()) would.
  void truncate(size_t n) { size_ = static_cast<uint32_t>(n < size_ ? n : size_); }

  // Inserts `value` before `at` (a pointer into this vector, or end()); returns where it went.
  T* insert(T* at, const T& value) {
    const size_t index = static_cast<size_t>(at - data());
    if (size_ == capacity_) grow(2 * capacity_);
    T* d = data();
    move_elements(d + index + 1, d + index, size_ - index);
    d[index] = value;
    ++size_;
    return d + index;
  }
  void push_back(const T& value) { insert(end(), value); }
  // A new last element, value-initialized, to be filled in place.
  T& emplace_back() { return *insert(end(), T{}); }
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void erase(T* at) {
    T* d = data();
    const size_t index = static_cast<size_t>(at - d);
    move_elements(d + index, d + index + 1, size_ - index - 1);
    --size_;
  }

 private:
  // n elements from src to dst (the ranges may overlap). The usual counts, none or one (a
  // storage's one holder), without a libc call: memmove for every insert, erase and copy
  // was 1 % of a long chain's instructions (issue #6).
  static void move_elements(T* dst, const T* src, size_t n) {
    if (n == 1)
      *dst = *src;
    else if (n > 1)
      std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(T));
  }
  T* data() { return heap_ ? heap_.get() : reinterpret_cast<T*>(inline_); }
  const T* data() const { return heap_ ? heap_.get() : reinterpret_cast<const T*>(inline_); }
  void grow(size_t capacity) {
    auto bigger = std::make_unique<T[]>(capacity);
    move_elements(bigger.get(), data(), size_);
    heap_ = std::move(bigger);
    capacity_ = static_cast<uint32_t>(capacity);
  }
  void assign(const InlineVector& o) {
    if (o.size_ > capacity_) grow(o.size_);
    move_elements(data(), o.data(), o.size_);
    size_ = o.size_;
  }
  void take(InlineVector& o) {
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      capacity_ = o.capacity_;
    } else {
      move_elements(reinterpret_cast<T*>(inline_), reinterpret_cast<const T*>(o.inline_), o.size_);
    }
    size_ = o.size_;
    o.size_ = 0;
    o.capacity_ = N;
  }

  std::unique_ptr<T[]> heap_;  // null: the elements are inline_
  uint32_t size_ = 0, capacity_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace agtrace
