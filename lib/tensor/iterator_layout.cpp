#include "tensor/iterator_layout.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

namespace agtrace::kernels {
namespace {

using Layouts = std::vector<OperandLayout>;

Layouts layouts_of(std::initializer_list<const Tensor*> inputs) {
  Layouts v;
  for (const Tensor* t : inputs)
    if (t && *t) v.push_back({&(*t)->sizes.vec(), &(*t)->strides.vec(), dtype_size((*t)->dtype())});
  return v;
}

bool all_same_sizes(const Shape& shape, const Layouts& inputs) {
  for (const OperandLayout& t : inputs)
    if (*t.sizes != shape) return false;
  return true;
}

// c10's compute_non_overlapping_and_dense.
bool non_overlapping_and_dense(const Shape& sizes, const Shape& strides) {
  const size_t nd = sizes.size();
  if (nd == 1) return sizes[0] < 2 || strides[0] == 1;
  std::vector<size_t> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t d : perm) {
    if (sizes[d] < 2) return true;  // sorted: every remaining dim has size 0 or 1
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// c10's is_channels_last_contiguous for 4-d sizes (compute_channels_last_contiguous_2d).
bool channels_last_contiguous(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (size_t d : {1, 3, 2, 0}) {
    if (sizes[d] != 1) {
      if (strides[d] != expected) return false;
      expected *= sizes[d];
    }
  }
  return true;
}

Shape channels_last_strides(const Shape& sizes) {
  Shape s(4);
  s[1] = 1;
  s[3] = sizes[1];
  s[2] = s[3] * sizes[3];
  s[0] = s[2] * sizes[2];
  return s;
}

bool numel_zero(const Shape& sizes) {
  return std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s == 0; });
}

bool contiguous(const OperandLayout& t) { return numel_zero(*t.sizes) || is_contiguous_layout(*t.sizes, *t.strides); }
bool all_contiguous(const Layouts& inputs) {
  return std::all_of(inputs.begin(), inputs.end(), [](const OperandLayout& t) { return contiguous(t); });
}

// Moves the elements of a dense tensor laid out in `from` into the layout `to`, in place in
// its storage (both dense over the same span).
template <typename T>
void move_elements(T* data, const Shape& sizes, const Shape& from, const Shape& to) {
  std::vector<T> rows(static_cast<size_t>(shape_numel(sizes)));
  for_each_offset(sizes, from, 0, [&](int64_t i, int64_t off) { rows[static_cast<size_t>(i)] = data[off]; });
  for_each_offset(sizes, to, 0, [&](int64_t i, int64_t off) { data[off] = rows[static_cast<size_t>(i)]; });
}

// compute_strides + reorder_dimensions + allocate_or_resize_outputs' strides.
Shape general_output_strides(const Shape& shape, const Layouts& inputs) {
  const size_t nd = shape.size();
  std::vector<Shape> stride_bytes;
  for (const OperandLayout& t : inputs) {
    const Shape& sizes = *t.sizes;
    const Shape& strides = *t.strides;
    const int64_t element = t.element_size;
    const size_t offset = nd - sizes.size();
    Shape b(nd, 0);
    for (size_t i = 0; i < sizes.size(); ++i)
      b[offset + i] = sizes[i] == 1 && shape[offset + i] != 1 ? 0 : strides[i] * element;
    stride_bytes.push_back(std::move(b));
  }
  std::vector<size_t> perm(nd);
  for (size_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  // 1: dim0 goes after dim1; -1: before; 0: ambiguous (reorder_dimensions' should_swap).
  auto should_swap = [&](size_t dim0, size_t dim1) {
    for (const Shape& b : stride_bytes) {
      const int64_t s0 = b[dim0], s1 = b[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;
    }
    return 0;
  };
  if (nd > 1) {
    for (size_t i = 1; i < nd; ++i) {
      size_t dim1 = i;
      for (size_t k = i; k-- > 0;) {
        const int c = should_swap(perm[k], perm[dim1]);
        if (c > 0) {
          std::swap(perm[k], perm[dim1]);
          dim1 = k;
        } else if (c < 0) {
          break;
        }
      }
    }
  }
  Shape out(nd);
  int64_t next = 1;
  for (size_t i = 0; i < nd; ++i) {
    out[perm[i]] = next;
    next *= shape[perm[i]];
  }
  // An inverted permutation is allocated contiguous (its size-0/1 dims' strides as
  // contiguous tensors have them).
  bool inverted = true;
  for (size_t i = 0; i < nd; ++i) inverted = inverted && perm[i] == nd - 1 - i;
  return inverted ? contiguous_strides(shape) : out;
}

}  // namespace

bool strides_like_channels_last(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4 || strides[1] == 0) return false;
  int64_t min = 0;
  for (size_t d : {1, 3, 2, 0}) {
    if (sizes[d] == 0) return false;
    if (strides[d] < min) return false;
    // N111 with equal strides, or N11W sliced on W: ambiguous, NCHW by default.
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

Shape iterator_output_strides(const Shape& shape, const Layouts& inputs) {
  // Contiguous inputs always give a contiguous result, broadcast or not: every strict
  // comparison of reorder_dimensions agrees with the reversed order.
  if (all_contiguous(inputs)) return contiguous_strides(shape);
  if (all_same_sizes(shape, inputs)) {  // fast_set_up
    bool channels_last = true, dense = true;
    const Shape* first = nullptr;
    bool same_strides = true;
    for (const OperandLayout& t : inputs) {
      channels_last = channels_last && channels_last_contiguous(*t.sizes, *t.strides);
      dense = dense && non_overlapping_and_dense(*t.sizes, *t.strides);
      if (!first) first = t.strides;
      else same_strides = same_strides && *first == *t.strides;
    }
    if (channels_last) return channels_last_strides(shape);
    if (dense && same_strides && first) return *first;
  }
  return general_output_strides(shape, inputs);
}

Shape iterator_output_strides(const Shape& shape, std::initializer_list<const Tensor*> inputs) {
  return iterator_output_strides(shape, layouts_of(inputs));
}

void adopt_iterator_layout(const Tensor& r, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t && *t && !contiguous(OperandLayout{&(*t)->sizes.vec(), &(*t)->strides.vec(), 0})) {
      adopt_iterator_layout(r, layouts_of(inputs));
      return;
    }
}

void adopt_iterator_layout(const Tensor& r, const std::vector<OperandLayout>& inputs) {
  if (all_contiguous(inputs) || numel_zero(r->sizes)) return;
  const Shape strides = iterator_output_strides(r->sizes, inputs);
  if (is_contiguous_layout(r->sizes, strides)) {
    if (strides != r->strides.vec()) r->strides = strides;
    return;
  }
  relayout_in_place(r, strides);
}

void relayout_in_place(const Tensor& r, const Shape& strides) {
  if (r->strides.vec() == strides || numel_zero(r->sizes)) return;
  if (!r->is_meta()) {
    Storage& s = *r->storage;
    if (s.holds_float()) move_elements(s.f32() + r->offset, r->sizes, r->strides, strides);
    else move_elements(s.f64() + r->offset, r->sizes, r->strides, strides);
  }
  r->strides = strides;
}

}  // namespace agtrace::kernels
