// The kernels layer on the cuda device (issue #8): the same results as tensor/kernels.hpp's
// functions (new contiguous tensors, accounted storages, PyTorch's shapes and dtypes),
// computed by the run's DeviceBackend with lib/cuda's op codes. tensor/kernels.hpp and the
// ops route here when an operand is on cuda; an op with no route raises `unsupported`
// (Storage refuses host access), so nothing computes on the host behind the user's back.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "cuda/conv.cuh"
#include "cuda/device_tensor.hpp"
#include "cuda/pointwise_formulas.hpp"
#include "cuda/pooling.cuh"
#include "cuda/reduce.cuh"
#include "tensor/tensor.hpp"

namespace agtrace::kernels::device {

inline bool on_device(const Tensor& t) { return t && t->storage->on_device(); }
inline bool any_on_device(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (on_device(*t)) return true;
  return false;
}

// Operands may be cuda tensors or 0-d CPU tensors (a Python number wrapped, as PyTorch's
// TensorIterator accepts a CPU scalar with cuda tensors); results are made on cuda.
Tensor unary(cuda::pw::UnaryOp op, const Tensor& a, DType out, double s0 = 0, double s1 = 0);
// `operands`: the dtype CPU scalar operands are converted to (default `out`; a comparison
// gives bool from operands compared in their promoted dtype).
Tensor binary(cuda::pw::BinaryOp op, const Tensor& a, const Tensor& b, DType out, const std::string& name,
              double s0 = 1, std::optional<DType> operands = {});
Tensor ternary(cuda::pw::TernaryOp op, const Tensor& a, const Tensor& b, const Tensor& c, DType out,
               const std::string& name, double s0 = 0, double s1 = 0);
// In place: a = op(a, b) / a = op(a), b broadcast to a's shape.
void binary_inplace(cuda::pw::BinaryOp op, const Tensor& a, const Tensor& b, double s0 = 1);
void unary_inplace(cuda::pw::UnaryOp op, const Tensor& a, double s0 = 0, double s1 = 0);
// dst (any view) = src broadcast to it, cast to dst's dtype.
void copy_into(const Tensor& dst, const Tensor& src);
// Every element of a (any view) = v.
void fill(const Tensor& a, double v);
// A contiguous copy of a in dtype `out` (clone, casts).
Tensor copy(const Tensor& a, DType out);
// torch.sum(a, dims, keepdim) with the result's dtype `out`; dims already wrapped.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, DType out);
// (n, k) @ (k, m), any strides, in the promoted dtype.
Tensor mm(const Tensor& a, const Tensor& b, DType out);
// Products through the backend's matmul (cuda/matmul.cuh), operands in the result's dtype:
// (B, n, k) @ (B, k, m); (n, k) @ (k,); (n,) outer (m,); (k,) . (k,) (a 0-d result).
Tensor bmm(const Tensor& a, const Tensor& b, DType out);
Tensor mv(const Tensor& a, const Tensor& v, DType out);
Tensor outer(const Tensor& a, const Tensor& b, DType out);
Tensor dot(const Tensor& a, const Tensor& b, DType out);
// amax/amin/mean over dims (already wrapped; empty: all), in a's dtype.
Tensor reduce(cuda::ReduceOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
// torch.max(a, dim) / torch.min(a, dim): values (a's dtype) and int64 indices; dim wrapped.
std::pair<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim, bool is_min = false);
// softmax / log_softmax along dim (wrapped), in a's dtype; the backward from the output,
// in dtype `out`.
Tensor softmax(const Tensor& a, int64_t dim, bool log);
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, bool log, DType out);
// layer_norm over the last normalized_ndim dims: out (a's dtype), mean and rstd of shape
// `stats_shape` in `stats_dtype`; weight/bias may be null tensors.
struct LayerNormResult {
  Tensor out, mean, rstd;
};
LayerNormResult layer_norm(const Tensor& a, const Tensor& weight, const Tensor& bias, int64_t normalized_ndim,
                           double eps, const Shape& stats_shape, DType stats_dtype);
// Its backward: the gradients asked for (the others null), in the dtypes of a and weight.
struct LayerNormGrads {
  Tensor input, weight, bias;
};
LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& a, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, int64_t normalized_ndim, bool want_input,
                                   bool want_weight, bool want_bias);
// a.index_select(dim, index) (dim wrapped, index 1-D int64 on cuda).
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out.index_add_(dim, index, src) in place.
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// The gradient of torch.max(self, dim) (values_grad and indices as the forward gave them,
// dim wrapped): zeros of self's shape with the gradient scattered at the indices.
Tensor max_dim_backward(const Shape& self_sizes, DType dtype, const Tensor& grad, const Tensor& indices, int64_t dim,
                        bool keepdim);
// The gradient of amax over dims (wrapped; empty: all) and of max(): grad / count * mask,
// mask = (self == result), count = mask's sum over dims; one new storage, the count in a
// transient device buffer (no tensor).
Tensor amax_backward(const Tensor& self, const Tensor& result, const Tensor& grad, const std::vector<int64_t>& dims,
                     bool keepdim, DType out);
// cond ? t : other (t_where_true) or cond ? other : t, broadcast (where / masked_fill with
// a number).
Tensor select_or(const Tensor& cond, const Tensor& t, double other, bool t_where_true, DType out,
                 const std::string& name);
// var over dims (wrapped; empty: all) with `correction`, and its backward
// ((2 / dof) * grad * (self - mean)); intermediates in transient device buffers.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, int64_t correction);
Tensor var_backward(const Tensor& self, const Tensor& grad, const std::vector<int64_t>& dims, bool keepdim, double dof,
                    DType out);
// The 2-norm over dims and its backward (grad * self / norm, 0 where norm == 0).
Tensor norm2(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
Tensor norm2_backward(const Tensor& self, const Tensor& result, const Tensor& grad, const std::vector<int64_t>& dims,
                      bool keepdim, DType out);
// F.nll_loss on cuda: input (C) or (N, C), target () or (N,) int64, weight (C,) or null,
// reduction 0 none / 1 mean / 2 sum (at::Reduction). The loss, then (with_total_weight)
// the op-internal 0-d total_weight, allocated in that order as on the CPU. A target out of
// [0, C) (not ignore_index) is the gather kernel's error (targets are not read on the host).
struct NllLossResult {
  Tensor loss, total_weight;
};
NllLossResult nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                       int64_t ignore_index, bool with_total_weight);
// nll_loss_backward: zeros of the input's shape with -weight[t] * grad (/ total_weight for
// mean) scattered at each sample's target.
Tensor nll_loss_backward(const Tensor& grad, const Shape& input_sizes, DType dtype, const Tensor& target,
                         const Tensor& weight, const Tensor& total_weight, int64_t reduction, int64_t ignore_index);
// F.mse_loss on cuda (input and target of one shape), in dtype `out`; reduction 0 none,
// 1 mean, 2 sum. Its backward norm * (a - b) * grad (grad broadcast), one new storage.
Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction, DType out);
Tensor mse_loss_backward(const Tensor& grad, const Tensor& a, const Tensor& b, double norm, DType out);
// max_pool2d into out and indices (made by the caller, on cuda), and its backward: a new
// tensor of the input's shape with each output's gradient at its index.
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& in, const cuda::Pool2dGeometry& g);
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& in_sizes, DType dtype,
                           const cuda::Pool2dGeometry& g);
// a.gather(dim, index) (dim wrapped) in dtype `out`: index's shape.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index, DType out);
// self[idx] for an int64 index of any shape (rows of self along dim 0): idx's shape
// followed by self's other dims. An index outside [0, rows) is the kernel's error.
Tensor index_rows(const Tensor& self, const Tensor& idx);
// out[idx] += src (index_put_ with accumulate=True), src of shape idx.shape + out.shape[1:].
void index_add_rows(const Tensor& out, const Tensor& idx, const Tensor& src);

// ---- comparisons with a Python number
// (a <op> v) for a Python number v as a bool tensor on the device (op a comparison), the
// number a CPU scalar the kernel takes by value (as PyTorch's a == 0).
Tensor compare_scalar(cuda::pw::BinaryOp op, const Tensor& a, double v, const std::string& name);

// ---- batch_norm, conv2d, and the double backwards of the nn layers (ops/nn.cpp).
// batch_norm over dim 1 (cuda/batch_norm.cuh): out, then save_mean and save_invstd ([C] in
// training, [0] in eval), allocated in that order as on the CPU; running statistics (null
// or [C] on cuda) updated in place in training.
struct BatchNormResult {
  Tensor out, save_mean, save_invstd;
};
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps);
// Its backward: mean and var_or_invstd are save_mean / save_invstd (training) or the
// running statistics (eval). A gradient is made when its dtype is given (weight's and
// bias's of shape [C]), in the order input, weight, bias.
LayerNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& var_or_invstd, bool training, double eps, bool want_input,
                                   std::optional<DType> weight_grad, std::optional<DType> bias_grad);
// conv2d (cuda/conv.cuh) into a new [N, Cout, OH, OW] tensor (out_sizes), and its
// backward (input, weight, bias gradients as asked, in that order).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const cuda::Conv2dGeometry& g,
              const Shape& out_sizes);
LayerNormGrads conv2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                               const cuda::Conv2dGeometry& g, bool want_input, bool want_weight,
                               std::optional<DType> bias_grad);
// The gradients of a double-backward node: of its grad_out, input and weight edges (made
// when asked, in that order, in their dtypes and shapes); ggI, ggW, ggB are the incoming
// gradients of the backward's three outputs, null where undefined (read as zeros).
struct DoubleGrads {
  Tensor grad_out, input, weight;
};
struct DoubleWants {
  bool grad_out = false, input = false, weight = false;
};
// _convolution_double_backward (transposed=False): grad_output conv(ggI, W) + conv(I, ggW)
// + ggB; input convolution_backward's input gradient of (gO, ggW); weight its weight
// gradient of (gO, ggI).
DoubleGrads conv2d_double_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                                   const Tensor& ggI, const Tensor& ggW, const Tensor& ggB,
                                   const cuda::Conv2dGeometry& g, DoubleWants want);
// layer_norm's and batch_norm's double backward (ops/nn.cpp's formulas), composed of the
// backend's pointwise and reduce kernels; intermediates in transient device buffers.
// layer_norm: statistics over the last normalized_ndim dims (mean, rstd broadcast).
DoubleGrads layer_norm_double_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& weight, const Tensor& ggI,
                                       const Tensor& ggW, const Tensor& ggB, int64_t normalized_ndim,
                                       DoubleWants want);
// batch_norm: per channel (dim 1); training: mean/stat = save_mean/save_invstd; eval: the
// running mean and variance (invstd = 1 / sqrt(var + eps)).
DoubleGrads batch_norm_double_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                       const Tensor& mean, const Tensor& stat, const Tensor& ggI, const Tensor& ggW,
                                       const Tensor& ggB, bool training, double eps, DoubleWants want);
// max_pool_double_backward: grad (the input's shape) gathered at each window's index
// (indices [..., OH, OW], flat within each H x W plane), in a new tensor of indices' shape.
Tensor max_pool2d_double_backward(const Tensor& grad, const Tensor& indices, DType dtype);

// ---- indices read on the host, embedding's backward, p-norms (issue #8)
// self[idx] along dim 0 with idx's values already checked and wrapped into [0, rows) on the
// host (`rows`, row-major): a negative or non-contiguous idx goes to the kernel as a
// transient contiguous copy of the wrapped values (PyTorch's CUDA index kernel wraps on the
// device), otherwise idx itself. And the backward's out[rows] += src.
Tensor index_rows_wrapped(const Tensor& self, const Tensor& idx, const std::vector<int64_t>& rows);
void index_add_rows_wrapped(const Tensor& out, const Tensor& idx, const std::vector<int64_t>& rows, const Tensor& src);
// embedding_dense_backward with per-index scales computed on the host (`scales`, one per
// element of indices, row-major: 0 at padding_idx, 1 / count with scale_grad_by_freq):
// zeros of weight_sizes with grad's rows times their scale added at their indices (rows of
// scale 0 skipped).
Tensor embedding_backward_scaled(const Tensor& grad, const Tensor& indices, const std::vector<double>& scales,
                                 const Shape& weight_sizes, DType dtype);
// The p-norm over dims (wrapped; empty: all) for p = 0, 1, +-inf or any other p but 2
// (norm2 above), and its backward (norm_backward's formulas per p; p = 0 has none).
Tensor norm_p(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim);
Tensor norm_p_backward(const Tensor& self, const Tensor& result, const Tensor& grad, double p,
                       const std::vector<int64_t>& dims, bool keepdim, DType out);
// create_graph=True: the gradients of SoftmaxBackwardDataBackward0 /
// LogSoftmaxBackwardDataBackward0 (formulas in ops/activations.cpp) along dim (wrapped),
// from G (the incoming gradient), go (the saved grad_output) and o (the saved output): for
// grad_output (softmax: o * (G - sum(G * o)); log: G - sum(G * exp(o))) and for output
// (softmax: go * G - sum(o * go) * G - go * sum(o * G); log: -G * exp(o) * sum(go)).
// One new storage each, sums in transient buffers.
Tensor softmax_data_grad_output(const Tensor& G, const Tensor& o, int64_t dim, bool log, DType out);
Tensor softmax_data_grad_result(const Tensor& G, const Tensor& go, const Tensor& o, int64_t dim, bool log, DType out);
// MseLossBackwardBackward0's grad_output gradient of a reduced loss: the 0-d
// scale * sum((self - target) * g) (scale 2 / numel for mean, 2 for sum).
Tensor mse_bb_reduced(const Tensor& g, const Tensor& self, const Tensor& target, double scale, DType out);
// self[mask] for a bool mask over self's first k dims, given the mask's true positions
// (row-major over those dims, read on the host): self seen as (rows, rest...) with its first
// k dims merged (a transient contiguous copy when they do not merge), those rows gathered
// into [positions] + rest. And the backward's out (contiguous) += grad's rows there.
Tensor masked_rows(const Tensor& self, int64_t k, const std::vector<int64_t>& positions);
void masked_rows_add(const Tensor& out, int64_t k, const std::vector<int64_t>& positions, const Tensor& grad);

}  // namespace agtrace::kernels::device
