// A map from dense creation-order ids (0, 1, 2, ...) to values, with std::map's interface as
// RunResult::nodes uses it (find, at, try_emplace, count, size, iteration in id order with
// `[id, value]` bindings), kept as a table indexed by id (issue #6). Every backward node
// added its snapshot to a std::map: an insertion walked and rebalanced the tree and the
// lookups at the end of the program walked it again (~2% of a 10,000-op chain). Values live
// in fixed chunks, so references stay valid as the table grows, as std::map's do; a value
// is made in its slot (a heap block per value was an allocation per backward node's
// snapshot, issue #6).
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "util/chunked_vector.hpp"

namespace agtrace {

template <typename T>
class IdMap {
 public:
  using key_type = int64_t;
  using mapped_type = T;
  using value_type = std::pair<const int64_t, T>;
  using Table = ChunkedVector<std::optional<value_type>>;

  template <bool Const>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = IdMap::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<Const, const value_type*, value_type*>;
    using reference = std::conditional_t<Const, const value_type&, value_type&>;
    using Slots = std::conditional_t<Const, const Table, Table>;

    Iter() = default;
    Iter(Slots* slots, size_t at) : slots_(slots), at_(at) { skip_empty(); }
    template <bool C = Const, typename = std::enable_if_t<C>>
    Iter(const Iter<false>& o) : slots_(o.slots_), at_(o.at_) {}  // iterator -> const_iterator
    reference operator*() const { return *(*slots_)[at_]; }
    pointer operator->() const { return &*(*slots_)[at_]; }
    Iter& operator++() {
      ++at_;
      skip_empty();
      return *this;
    }
    Iter operator++(int) {
      Iter old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.at_ == b.at_; }
    friend bool operator!=(const Iter& a, const Iter& b) { return a.at_ != b.at_; }

   private:
    template <bool>
    friend class Iter;
    void skip_empty() {
      while (slots_ && at_ < slots_->size() && !(*slots_)[at_].has_value()) ++at_;
    }
    Slots* slots_ = nullptr;
    size_t at_ = 0;
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  iterator begin() { return iterator(&slots_, 0); }
  iterator end() { return iterator(&slots_, slots_.size()); }
  const_iterator begin() const { return const_iterator(&slots_, 0); }
  const_iterator end() const { return const_iterator(&slots_, slots_.size()); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t count(int64_t id) const { return present(id) ? 1 : 0; }
  iterator find(int64_t id) { return present(id) ? iterator(&slots_, static_cast<size_t>(id)) : end(); }
  const_iterator find(int64_t id) const { return present(id) ? const_iterator(&slots_, static_cast<size_t>(id)) : end(); }
  T& at(int64_t id) {
    if (!present(id)) throw std::out_of_range("IdMap::at: no id " + std::to_string(id));
    return slots_[static_cast<size_t>(id)]->second;
  }
  const T& at(int64_t id) const {
    if (!present(id)) throw std::out_of_range("IdMap::at: no id " + std::to_string(id));
    return slots_[static_cast<size_t>(id)]->second;
  }
  // Ids are never negative (creation-order counters); a negative one is a caller's bug.
  std::pair<iterator, bool> try_emplace(int64_t id) {
    if (id < 0) throw std::out_of_range("IdMap: negative id " + std::to_string(id));
    const size_t at = static_cast<size_t>(id);
    slots_.grow_to(at + 1);
    const bool inserted = !slots_[at].has_value();
    if (inserted) {
      slots_[at].emplace(std::piecewise_construct, std::forward_as_tuple(id), std::forward_as_tuple());
      ++size_;
    }
    return {iterator(&slots_, at), inserted};
  }
  T& operator[](int64_t id) { return try_emplace(id).first->second; }
  void clear() {
    slots_.clear();
    size_ = 0;
  }

 private:
  bool present(int64_t id) const {
    return id >= 0 && static_cast<size_t>(id) < slots_.size() && slots_[static_cast<size_t>(id)].has_value();
  }
  Table slots_;
  size_t size_ = 0;
};

}  // namespace agtrace
