// An append-only sequence kept in fixed-size chunks (issue #6): the event timeline grows by
// about 6 records per operation, and as a std::vector every doubling copied it whole and
// held the old and the new copies at once (half of the peak heap of a 3,000-op chain,
// measured with valgrind's massif). Chunks never move, so appending never copies.
//
// A chunk holds at least 64 KiB (large_blocks::kMinBytes) by default, so that the
// executables' operator new takes it from the large-block arena, on transparent huge pages
// past its first 2 MiB, instead of from malloc's heap on 4 KiB pages: with 256-element chunks
// the chain of bench/scenarios/tiny_chain.json (10,000 ops) took 12.4 MB of chunks from
// malloc (heaptrack), a page fault per 4 KiB, and its `-q` run spent about 40 % of its time
// in the kernel (perf). Only what is appended is written, so a small table's chunk makes only
// the pages it uses resident.
#pragma once
#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "util/large_blocks.hpp"

namespace agtrace {

// Elements per chunk: the least power of two (an index splits with a shift and a mask) whose
// chunk holds at least 64 KiB.
template <typename T>
constexpr size_t default_chunk_elements() {
  size_t n = 1;
  while (n * sizeof(T) < large_blocks::kMinBytes) n *= 2;
  return n;
}

template <typename T, size_t kChunk = default_chunk_elements<T>()>
class ChunkedVector {
 public:
  ChunkedVector() = default;
  ChunkedVector(ChunkedVector&& other) noexcept : chunks_(std::move(other.chunks_)), size_(other.size_) {
    other.chunks_.clear();
    other.size_ = 0;
  }
  ChunkedVector& operator=(ChunkedVector&& other) noexcept {
    if (this == &other) return *this;
    clear();
    chunks_ = std::move(other.chunks_);
    size_ = other.size_;
    other.chunks_.clear();
    other.size_ = 0;
    return *this;
  }
  ChunkedVector(const ChunkedVector& other) { *this = other; }
  ChunkedVector& operator=(const ChunkedVector& other) {
    if (this == &other) return *this;
    clear();
    for (const T& x : other) push_back(x);
    return *this;
  }
  ~ChunkedVector() { clear(); }

  // A default-constructed element at the end. Chunks are raw memory and each element is
  // constructed when appended: the event timeline's records were written twice (the whole
  // chunk when made, then each record), and the first write was cold again by the second.
  T& emplace_back() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::unique_ptr<Chunk>(new Chunk));
    T* p = ::new (static_cast<void*>(slot(size_))) T();
    ++size_;
    return *p;
  }
  // Default elements appended up to `n` (never shrinks): an id-indexed table grown as ids
  // come, without moving what it holds (a vector's doublings moved every record).
  void grow_to(size_t n) {
    while (size_ < n) emplace_back();
  }
  void push_back(const T& x) { emplace_back() = x; }
  void push_back(T&& x) { emplace_back() = std::move(x); }
  void clear() {
    for (size_t i = 0; i < size_; ++i) (*this)[i].~T();
    chunks_.clear();
    size_ = 0;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return *std::launder(reinterpret_cast<T*>(slot(i))); }
  const T& operator[](size_t i) const { return *std::launder(reinterpret_cast<const T*>(slot(i))); }
  // Like std::vector::at: std::out_of_range past the end.
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("ChunkedVector::at");
    return (*this)[i];
  }
  const T& at(size_t i) const { return const_cast<ChunkedVector*>(this)->at(i); }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  template <typename Owner, typename Value>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = Value*;
    using reference = Value&;
    Iterator(Owner* owner, size_t i) : owner_(owner), i_(i) {}
    reference operator*() const { return (*owner_)[i_]; }
    pointer operator->() const { return &(*owner_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_ && owner_ == o.owner_; }
    bool operator!=(const Iterator& o) const { return !(*this == o); }

   private:
    Owner* owner_;
    size_t i_;
  };
  using iterator = Iterator<ChunkedVector, T>;
  using const_iterator = Iterator<const ChunkedVector, const T>;
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  struct Chunk {
    alignas(T) unsigned char bytes[sizeof(T) * kChunk];  // left uninitialized by `new Chunk`
  };
  unsigned char* slot(size_t i) { return chunks_[i / kChunk]->bytes + (i % kChunk) * sizeof(T); }
  const unsigned char* slot(size_t i) const { return chunks_[i / kChunk]->bytes + (i % kChunk) * sizeof(T); }
  std::vector<std::unique_ptr<Chunk>> chunks_;
  size_t size_ = 0;
};

}  // namespace agtrace
