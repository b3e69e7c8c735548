// Pointwise math, activations, reductions and losses (activations.cpp, losses.cpp).
//
// Each function records the backward node PyTorch 1.13 records, with the same name,
// next_functions and saved values (measured with /usr/bin/python3 and torch 1.13; see
// shared/oracle/SUMMARY.md sections 2-3), and computes the result. The forward, the node,
// what it saves and the backward formula sit side by side in the .cpp files.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// ---- pointwise math (activations.cpp)
Tensor abs(const Tensor& a);    // AbsBackward0: self
Tensor sin(const Tensor& a);    // SinBackward0: self
Tensor cos(const Tensor& a);    // CosBackward0: self
Tensor rsqrt(const Tensor& a);  // RsqrtBackward0: result
// clamp(min, max) with Python-number bounds (None when absent; at least one given).
// ClampBackward1: max, min (None when absent), self.
Tensor clamp(const Tensor& a, const Value& min, const Value& max);

// ---- activations (activations.cpp)
Tensor leaky_relu(const Tensor& a, const Value& negative_slope);  // LeakyReluBackward0: negative_slope, self
Tensor gelu(const Tensor& a, const std::string& approximate);     // GeluBackward0: approximate, self
Tensor silu(const Tensor& a);                                     // SiluBackward0: self
Tensor softmax(const Tensor& a, int64_t dim);                     // SoftmaxBackward0: dim, result
Tensor log_softmax(const Tensor& a, int64_t dim);                 // LogSoftmaxBackward0: dim, result
// F.softmax / F.log_softmax without dim: PyTorch's legacy implicit choice
// (0 for 0-, 1- and 3-d inputs, else 1).
int64_t implicit_softmax_dim(int64_t ndim);

// ---- reductions (activations.cpp)
Tensor max_all(const Tensor& a);  // MaxBackward1: result, self
// x.max(dim): (values, indices). MaxBackward0: dim, indices (the returned object), keepdim, self_sizes.
std::pair<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim);
// amax over dims (empty: all). AmaxBackward0: dim, keepdim, result, self.
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
// var: dims nullopt = all (saved dim None); correction 1 = unbiased. VarBackward0: correction, dim, keepdim, self.
Tensor var(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, int64_t correction, bool keepdim);
// Vector p-norm over dims as at::norm(self, p, dim, keepdim) records it (NormBackward1:
// dim, keepdim, p, result, self). `p` is a Python number (its type shows in _saved_p).
Tensor norm(const Tensor& a, const Value& p, const std::vector<int64_t>& dims, bool keepdim);
// torch.norm / Tensor.norm as torch/functional.py dispatches them: p None means 'fro';
// 'fro' over two dims decomposes into sqrt(sum(x * x, dims)) as at::frobenius_norm does.
Tensor norm_functional(const Tensor& a, const Value& p, const std::optional<std::vector<int64_t>>& dims, bool keepdim);

// ---- selection (activations.cpp)
// torch.where(condition, input, other); numbers arrive as wrapped 0-d tensors.
// WhereBackward0: condition (the same object).
Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other);
// masked_fill with a Python number (MaskedFillBackward0: mask) or a 0-d tensor value
// (MaskedFillBackward1: mask; edges self and value).
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Value& value);

// ---- losses (losses.cpp). reduction: 0 none, 1 mean, 2 sum (at::Reduction).
int64_t reduction_enum(const Value& reduction);  // 'none' / 'mean' (None too) / 'sum'
Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction);  // MseLossBackward0
// NllLossBackward0: ignore_index, reduction, self, target, total_weight (new f32[]), weight.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index);
// nll_loss(log_softmax(input, class dim), target): NllLossBackward0 over LogSoftmaxBackward0.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                     int64_t ignore_index);

// ---- helpers shared by activations.cpp and losses.cpp
namespace act_detail {

// PyTorch's scalar type name in kernel messages: Float, Double, Half, BFloat16, Long, Bool.
std::string scalar_name(DType d);
// Throws dtype_mismatch worded as AT_DISPATCH: "<kernel>" not implemented for '<T>'.
[[noreturn]] void not_implemented(const std::string& kernel, DType d);
// Floating dtypes only; Half also refused off the meta device unless half_on_cpu_ok
// (most CPU kernels of 1.13 lack Half: measured for sin, gelu, softmax, nll_loss, ...).
void require_kernel_dtype(const Tensor& t, const std::string& kernel, bool half_on_cpu_ok);
// A new contiguous tensor of `shape` holding `values` (row-major, rounded to dtype); on
// meta, no data.
Tensor make_out(const Shape& shape, DType dtype, bool meta, const std::vector<double>& values);
// Wraps negative dims; a repeated dim is an error ("dim 1 appears multiple times ...").
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim);

// How a reduction over `dims` (wrapped; empty = every dim) groups the elements: for each
// input element in row-major order, the row-major index of its output element (the same
// whether or not reduced dims are kept).
struct ReducePlan {
  Shape out_shape;              // result shape (reduced dims dropped unless keepdim)
  int64_t groups = 1;           // number of output elements
  int64_t count = 1;            // input elements per output element
  std::vector<int64_t> group;   // per input element: its output element
};
ReducePlan plan_reduce(const Shape& sizes, const std::vector<int64_t>& dims, bool keepdim);

// Records MaxBackward1 / MinBackward1 (`name`) for r = a.max() / a.min(): the same
// evenly_distribute_backward (derivatives.yaml), saving result and self.
void record_extreme_all(const char* name, const Tensor& r, const Tensor& a);
// Records MaxBackward0 / MinBackward0 for (values, indices) = a.max(dim) / a.min(dim): the
// same value_selecting_reduction_backward, saving dim (as written), indices (the returned
// object), keepdim, self_sizes.
// ClampBackward1's and MaskedFillBackward0/1's formulas (with their create_graph forms),
// which the in-place clamp_ and masked_fill_ (inplace_more.cpp) record too.
struct InplaceSharedFormulas {
  autograd::BackwardFn clamp, clamp_differentiable, masked_fill, masked_fill_differentiable;
  // SiluBackward0's, which silu_ records over a clone of the old self (activations_inplace.cpp).
  autograd::BackwardFn silu, silu_differentiable;
};
const InplaceSharedFormulas& inplace_shared_formulas();
// masked_fill's value: a 0-d tensor (returned) or a Python number (null); anything else is
// PyTorch's error, worded for `fn` ("masked_fill" or "masked_fill_").
Tensor masked_fill_value(const Value& value, const std::string& fn);
void record_extreme_dim(const char* name, const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim,
                        bool keepdim);

}  // namespace act_detail

}  // namespace agtrace::ops
