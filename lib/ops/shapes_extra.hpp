// Diagonals, stacking, broadcasting, var_mean / std_mean, cumprod, the unsafe splits and
// einsum (shapes_extra.cpp, einsum.cpp). Each records what PyTorch 1.13 records (node names,
// next_functions, saved values), measured with /usr/bin/python3 and torch 1.13.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"

namespace agtrace::ops {

// x.diagonal(offset, dim1, dim2): a view. DiagonalBackward0 saves dim1, dim2, offset (as
// written) and self_sym_sizes.
Tensor diagonal(const Tensor& a, int64_t offset, int64_t dim1, int64_t dim2);

// torch.diag(x, diagonal): a matrix's diagonal or a vector's diagonal matrix, a new tensor;
// DiagBackward0 saves diagonal (as written) and self_sym_sizes.
Tensor diag(const Tensor& a, int64_t offset);

// torch.atleast_1d / 2d / 3d of one tensor (`ndim` 1, 2, 3).
Tensor atleast_nd(const Tensor& t, int64_t ndim);

// torch.hstack / vstack / dstack: cat over atleast_1d / 2d / 3d of each tensor
// (ReshapeAliasBackward0 for a 0-d tensor, UnsqueezeBackward0 for a missing dim).
Tensor hstack(const std::vector<Tensor>& tensors);
Tensor vstack(const std::vector<Tensor>& tensors);
Tensor dstack(const std::vector<Tensor>& tensors);

// torch.broadcast_tensors: each tensor itself when it has the broadcast shape, else its
// expand (ExpandBackward0).
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors);

// torch.var_mean / torch.std_mean: (var or std, mean) of one node, VarMeanBackward0
// (correction, dim, keepdim, self) / StdMeanBackward0 (also result0, the std output).
std::pair<Tensor, Tensor> var_mean(const Tensor& a, const std::optional<std::vector<int64_t>>& dims,
                                   int64_t correction, bool keepdim, bool std_dev);

// cumprod(dim): CumprodBackward0 saves dim (as written), result and self. Integer and bool
// inputs give int64.
Tensor cumprod(const Tensor& a, int64_t dim);

// isnan / isinf / isfinite: bool results, no node.
Tensor float_class(const Tensor& a, const std::string& op);

// unsafe_split / unsafe_split_with_sizes: split's pieces as tensors that are not views
// (each its own version counter, no _base, in-place edits allowed), recorded by one
// UnsafeSplitBackward0 (dim, self_sizes, split_size) / UnsafeSplitWithSizesBackward0
// (dim, self_sizes, split_sizes).
std::vector<Tensor> unsafe_split(const Tensor& a, int64_t split_size, int64_t dim);
std::vector<Tensor> unsafe_split_with_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim);

// torch.einsum(equation, *operands) as at::einsum decomposes it (einsum.cpp).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace agtrace::ops
