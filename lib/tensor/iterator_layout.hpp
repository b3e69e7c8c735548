// The strides PyTorch 1.13 gives a pointwise op's new result: TensorIterator allocates its
// output in the memory order of its inputs (TensorIteratorBase::fast_set_up,
// compute_strides, reorder_dimensions, allocate_or_resize_outputs), so `x.t() * 2` is
// transposed like x.t(), `b.view(-1)` of it raises, and `reshape` of it copies
// (CloneBackward0 + UnsafeViewBackward0, measured). Kernels here compute row-major values;
// adopt_iterator_layout lays a fresh result out in those strides afterwards.
#pragma once
#include <initializer_list>
#include <vector>

#include "tensor/tensor.hpp"

namespace agtrace::kernels {

// An input as TensorIterator sees it (element_size in bytes: strides are compared in bytes).
struct OperandLayout {
  const Shape* sizes;
  const Shape* strides;
  int64_t element_size;
};

// The output strides for a result of `shape` from `inputs` (null entries ignored).
Shape iterator_output_strides(const Shape& shape, std::initializer_list<const Tensor*> inputs);
Shape iterator_output_strides(const Shape& shape, const std::vector<OperandLayout>& inputs);
// Restrides `r` (a result just computed in row-major order, referenced nowhere else) to
// iterator_output_strides, moving its elements; no-op when those are contiguous. Meta:
// strides only.
void adopt_iterator_layout(const Tensor& r, std::initializer_list<const Tensor*> inputs);
void adopt_iterator_layout(const Tensor& r, const std::vector<OperandLayout>& inputs);
// Gives a fresh dense result (referenced nowhere else) the dense `strides`, moving its
// elements within its own storage.
void relayout_in_place(const Tensor& r, const Shape& strides);
// ChannelsLast per c10's is_channels_last_strides_2d (what suggest_memory_format reads).
bool strides_like_channels_last(const Shape& sizes, const Shape& strides);

}  // namespace agtrace::kernels
