// Further reductions, pointwise functions and activations (reduce_more.cpp,
// pointwise_more.cpp), listed by table_more.cpp.
//
// Each function records the node PyTorch 1.13 records, with the same name, next_functions
// and saved values (measured with /usr/bin/python3 and torch 1.13: type(node).__name__,
// dir(node), `_saved_self is x`), and computes the result; the backward formula
// (tools/autograd/derivatives.yaml) sits beside the forward.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// ---- reductions (reduce_more.cpp)
Tensor min_all(const Tensor& a);  // MinBackward1: result, self
// x.min(dim): (values, indices). MinBackward0: dim, indices (the returned object), keepdim, self_sizes.
std::pair<Tensor, Tensor> min_dim(const Tensor& a, int64_t dim, bool keepdim);
// argmax / argmin (no node: an int64 result). dim nullopt: the index into the flattened
// tensor (keepdim gives every dim size 1). Ties and NaN: the first one (measured).
Tensor arg_extreme(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max);
// cumsum(dim): CumsumBackward0 saves dim (as written). Integer and bool inputs give int64.
Tensor cumsum(const Tensor& a, int64_t dim);
// prod() (ProdBackward0: result, self) and prod(dim, keepdim) (ProdBackward1: dim,
// keepdim, result, self). Integer and bool inputs give int64.
Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim);
// logsumexp(dim, keepdim): LogsumexpBackward0 saves dim (a tuple), keepdim, result, self.
// Integer inputs give float32.
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);

// std as var: dims nullopt = all (saved dim None); correction 1 = unbiased.
// StdBackward0: correction, dim, keepdim, result, self.
Tensor std_dev(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, int64_t correction, bool keepdim);

// ---- pointwise (pointwise_more.cpp). Numbers are Python numbers as written: their type
// shows in the saved attribute (F.softplus's beta=1 reads 1, F.elu's alpha=1.0 reads 1.0).
Tensor log1p(const Tensor& a);  // Log1PBackward0: self
Tensor expm1(const Tensor& a);  // Expm1Backward0: result
// softplus: SoftplusBackward0 saves beta, self, threshold.
Tensor softplus(const Tensor& a, const Value& beta, const Value& threshold);
// elu as at::elu(self, alpha, scale, input_scale) (F.selu is elu with SELU's constants):
// EluBackward0 saves alpha, input_scale, scale, self.
Tensor elu(const Tensor& a, const Value& alpha, const Value& scale, const Value& input_scale);
// hardtanh (F.relu6 is hardtanh(0, 6) with int bounds): HardtanhBackward0 saves max_val, min_val, self.
Tensor hardtanh(const Tensor& a, const Value& min_val, const Value& max_val);
// threshold(x, threshold, value): ThresholdBackward0 saves self, threshold.
Tensor threshold(const Tensor& a, const Value& threshold, const Value& value);
// F.logsigmoid = log_sigmoid_forward: LogSigmoidBackward0 saves buffer (a new tensor of the
// input's shape, exp(-|x|), on the CPU and meta), self.
Tensor logsigmoid(const Tensor& a);

// ---- copies that move elements (shapes_more.cpp)
// tril (lower) / triu: TrilBackward0 / TriuBackward0 save diagonal.
Tensor tril(const Tensor& a, int64_t diagonal, bool lower);
Tensor flip(const Tensor& a, const std::vector<int64_t>& dims);  // FlipBackward0: dims
// roll: RollBackward0 saves dims, shifts; no dims rolls the flattened tensor.
Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims);

// repeat: RepeatBackward0 saves repeats, self_sym_sizes.
Tensor repeat(const Tensor& a, const std::vector<int64_t>& repeats);
// gather(dim, index): GatherBackward0 saves dim, index, self (same objects), sparse_grad (False).
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// masked_select(mask), mask broadcast to self's shape: MaskedSelectBackward0 saves mask, self.
Tensor masked_select(const Tensor& a, const Tensor& mask);
// F.pad(mode='constant') = constant_pad_nd: ConstantPadNdBackward0 saves pad (as written).
Tensor constant_pad(const Tensor& a, const std::vector<int64_t>& pad, double value);
// torch.outer(a, b) = a.reshape(n, 1) * b (ReshapeAliasBackward0 under MulBackward0).
Tensor outer(const Tensor& a, const Tensor& b);

// ---- sorting (sorting.cpp). Ties keep their input order where PyTorch's CPU kernel does;
// elsewhere (long slices without stable=True, topk) a tie is `unsupported`.
// sort: SortBackward0 saves dim, indices (the returned object), self_sizes.
std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable);
// argsort = sort(...).indices: SortBackward0 on the dropped values when a requires grad.
Tensor argsort(const Tensor& a, int64_t dim, bool descending);
// topk (sorted): TopkBackward0 saves dim, indices, self_sizes.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest);

// ---- in-place edits (inplace_more.cpp): the out-of-place node over the edited tensor, one
// version bump, CopySlices on a view.
void masked_fill_(const Tensor& self, const Tensor& mask, const Value& value);  // MaskedFillBackward0 / 1
void clamp_(const Tensor& self, const Value& min, const Value& max);  // ClampBackward1, saves a copy of self
// clamp_min: ClampMinBackward0 saves min, self (clamp_min_: a copy of the original self).
Tensor clamp_min(const Tensor& a, const Value& min);
void clamp_min_(const Tensor& self, const Value& min);

// F.normalize = input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input):
// DivBackward0 over ExpandBackward0 over ClampMinBackward0 over NormBackward1 (measured).
Tensor normalize(const Tensor& a, const Value& p, int64_t dim, const Value& eps);

// ---- losses (losses_more.cpp). reduction: 0 none, 1 mean, 2 sum (at::Reduction).
// l1_loss is composite: (input - target).abs() then mean() / sum().
Tensor l1_loss(const Tensor& input, const Tensor& target, int64_t reduction);
// SmoothL1LossBackward0: beta, reduction, self, target.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, int64_t reduction, double beta);
// BinaryCrossEntropyBackward0: reduction, self, target, weight (None). No weight argument.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, int64_t reduction);
// BinaryCrossEntropyWithLogitsBackward0: pos_weight (None), reduction, self, target, weight (None).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, int64_t reduction);
// F.kl_div (log_target False) = xlogy(target, target) - target * input, reduced; batchmean
// is the sum divided by input.size(0) (DivBackward0 over SumBackward0).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction);
// F.one_hot: int64, no node; num_classes -1 is max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes);

}  // namespace agtrace::ops
