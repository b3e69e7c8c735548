// Shape operations, indexing with tensors, concatenation and the matmul family
// (shapes.cpp, linalg.cpp). Each records what PyTorch 1.13 records (node name,
// next_functions, saved values), measured with /usr/bin/python3 and torch 1.13; the
// facts are cited next to each op. ops::mm and ops::matmul are declared in ops/ops.hpp.
#pragma once
#include <cstdint>
#include <vector>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// ---- views (shapes.cpp): share storage and version counter, _base is the family root
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);       // PermuteBackward0
Tensor expand(const Tensor& a, const std::vector<int64_t>& sizes);       // ExpandBackward0 (-1 keeps a size)
Tensor unsqueeze(const Tensor& a, int64_t dim);                           // UnsqueezeBackward0
Tensor squeeze(const Tensor& a);                                          // SqueezeBackward0
Tensor squeeze(const Tensor& a, int64_t dim);                             // SqueezeBackward1
// x.squeeze_(dim) on a tensor that is not a view (SqueezeBackward3); matmul's 1-D @ 2-D uses it.
void squeeze_(const Tensor& a, int64_t dim);
// flatten is reshape: ReshapeAliasBackward0 when a view fits, else UnsafeViewBackward0 over
// CloneBackward0; start_dim == end_dim (or a 1-D input) returns `a` itself.
Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim);
// Several views of one node (SplitBackward0 / SplitWithSizesBackward0 / UnbindBackward0).
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim);
std::vector<Tensor> split_with_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim);
std::vector<Tensor> unbind(const Tensor& a, int64_t dim);

// ---- copies (shapes.cpp)
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);  // IndexSelectBackward0
// x[idx] with an int64 tensor idx (IndexBackward0; a 0-d idx is an int: SelectBackward0).
// The interpreter's subscript code calls it for a single tensor index.
Tensor index_with_tensor(const Tensor& self, const Tensor& idx);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);    // CatBackward0
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);  // StackBackward0
// x.to(dtype): the same object when the dtype is already `dtype` (unless copy), else
// ToCopyBackward0 (no node for an integer or bool result).
Tensor to_dtype(const Tensor& a, DType dtype, bool copy = false);
// Tensor.to(device, dtype): "cpu" or "cuda"; the same object when nothing changes.
Tensor to_device(const Tensor& a, DType dtype, const std::string& device, bool copy = false);

// ---- the matmul family (linalg.cpp)
Tensor dot(const Tensor& a, const Tensor& b);  // DotBackward0
Tensor mv(const Tensor& a, const Tensor& v);   // MvBackward0
Tensor bmm(const Tensor& a, const Tensor& b);  // BmmBackward0
// beta * bias + alpha * (m1 @ m2); alpha and beta are Python numbers as written.
Tensor addmm(const Tensor& bias, const Tensor& m1, const Tensor& m2, const Value& beta, const Value& alpha);
// F.linear: addmm(b, x, W.t()) for 2-D x with a bias, a view over addmm for contiguous
// 3-D x with a bias, else matmul(x, W.t()) (+ bias in place).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias);

}  // namespace agtrace::ops
