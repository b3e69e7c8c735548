// Autograd-aware tensor operations: each records the backward node PyTorch 1.13 records,
// with the same name, next_functions and saved values (shared/oracle/SUMMARY.md), and
// computes the result. Backward formulas sit next to their forward in the same file.
#pragma once
#include <optional>
#include <vector>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// A Python number as PyTorch wraps it for a tensor op: a 0-d float64 (float), int64
// (int) or bool tensor marked as a wrapped number (lowest priority in type promotion).
Tensor wrap_number(const Value& v);

// Arithmetic (arith.cpp). `alpha` is a Python number as written (its type shows in _saved_alpha).
Tensor add(const Tensor& a, const Tensor& b, const Value& alpha);
Tensor sub(const Tensor& a, const Tensor& b, const Value& alpha);
Tensor rsub(const Tensor& a, const Value& scalar, const Value& alpha);  // scalar - alpha * a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor pow_scalar(const Tensor& a, const Value& exponent);
Tensor pow_tensor(const Tensor& a, const Tensor& exponent);
Tensor rpow(const Value& base, const Tensor& exponent);  // base ** tensor
Tensor pow_number_base(const Value& base, const Tensor& exponent);  // torch.pow(number, tensor)
// is_non_overlapping_and_dense: the elements fill their storage span exactly once, in
// some order of the dims.
bool non_overlapping_and_dense(const Tensor& a);
// MemoryFormat::Preserve (empty_like, clone, to): a's strides when non-overlapping and
// dense, else dense strides in the order of a's (at::infer_dense_strides).
Shape preserve_format_strides(const Tensor& a);
// A fresh tensor of a's sizes whose elements are all equal (or drawn in storage order, as a
// nullary TensorIterator fills a permuted result), given those strides in place.
Tensor with_preserved_format(Tensor fresh, const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor compare(const Tensor& a, const Tensor& b, const std::string& op);  // == != < <= > >=

// Pointwise functions (unary.cpp).
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);

// Reductions (reduce.cpp). dims empty with has_dim=false: all elements.
// dtype: the result's (the input is read as that type; the gradient comes back in the
// input's dtype, measured: x.sum(dtype=torch.float64) is SumBackward0 straight over x).
Tensor sum(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
            std::optional<DType> dtype = std::nullopt);

// Matrix products (linalg.cpp).
Tensor mm(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);

// Views and copies (views.cpp).
Tensor view(const Tensor& a, const std::vector<int64_t>& shape);
Tensor reshape(const Tensor& a, const std::vector<int64_t>& shape);
Tensor t(const Tensor& a);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor slice(const Tensor& a, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step);
Tensor clone(const Tensor& a);  // memory_format=Preserve
Tensor clone_contiguous(const Tensor& a);  // clone(at::MemoryFormat::Contiguous), CloneBackward0
Tensor detach(const Tensor& a);
Tensor contiguous(const Tensor& a);
// x.narrow(dim, start, length): slice(dim, start, start + length) with start wrapped.
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
// x.unfold(dimension, size, step): windows along a new last dim (UnfoldBackward0).
Tensor unfold(const Tensor& a, int64_t dimension, int64_t size, int64_t step);
// torch.movedim: the permute that moves `source` dims to `destination`.
Tensor movedim(const Tensor& a, const std::vector<int64_t>& source, const std::vector<int64_t>& destination);
// x.mT: transpose(-2, -1) of a matrix or batch of matrices.
Tensor matrix_transpose(const Tensor& a);
// x.T: permute of the reversed dims, on any rank (at::numpy_T).
Tensor reversed_dims(const Tensor& a);
// x.data: an alias with no history and a version counter of its own.
Tensor data_alias(const Tensor& a);
// `self.data = new_data` (VariableHooks::set_data, 1.13): self takes new_data's storage,
// sizes, strides and dtype and keeps its own autograd metadata and version counter.
void set_data(const Tensor& self, const Tensor& new_data);

// In-place (inplace.cpp): each bumps the version counter once and rebases the history.
void add_(const Tensor& self, const Tensor& other, const Value& alpha);
void sub_(const Tensor& self, const Tensor& other, const Value& alpha);
void mul_(const Tensor& self, const Tensor& other);
void div_(const Tensor& self, const Tensor& other);
void relu_(const Tensor& self);
void exp_(const Tensor& self);
void sigmoid_(const Tensor& self);
void tanh_(const Tensor& self);
void zero_(const Tensor& self);
// The in-place form of a unary op by its name ("sin" for x.sin_()): exp log sqrt tanh
// sigmoid relu abs sin cos rsqrt neg.
void unary_inplace_named(const Tensor& self, const std::string& name);
void pow_(const Tensor& self, const Value& exponent);  // a number or a tensor exponent

// In-place view ops (inplace_views.cpp): the tensor's own geometry or autograd state changes.
void t_(const Tensor& self);
void transpose_(const Tensor& self, int64_t dim0, int64_t dim1);
void unsqueeze_(const Tensor& self, int64_t dim);
// self.as_strided_(self.sizes(), strides) where the new strides address the same elements
// (they differ only on size-1 dims): AsStridedBackward1 saving size, stride and
// storage_offset None, one version bump (measured in 1.13 through adaptive_avg_pool2d).
void restride_in_place(const Tensor& self, const Shape& strides);
void squeeze_(const Tensor& self, std::optional<int64_t> dim);
void detach_(const Tensor& self);

}  // namespace agtrace::ops
