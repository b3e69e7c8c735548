// In-place activations (F.elu(inplace=True), F.leaky_relu_, F.hardtanh_, ...), the
// activations whose in-place form needs them (celu, hardsigmoid, hardswish, mish, rrelu in
// eval mode), softmax(dtype=) and cross_entropy(label_smoothing=): activations_inplace.cpp.
//
// What PyTorch 1.13 records for an in-place activation (measured with /usr/bin/python3,
// type(node).__name__ and dir(node)): either a node of its own that saves the edited tensor
// as `result` (EluBackward1, CeluBackward1, LeakyReluBackward1, RreluWithNoiseBackward1), or
// the out-of-place node saving a clone of the old self (HardtanhBackward0, ThresholdBackward1,
// SiluBackward0, HardsigmoidBackward0, HardswishBackward0, MishBackward0: `_saved_self` has
// grad_fn CloneBackward0 and its own storage). One version bump; on a view, CopySlices.
#pragma once
#include <optional>

#include "autograd/node.hpp"
#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// HardtanhBackward0's create_graph=True formula (HardtanhBackwardBackward0), shared by
// F.hardtanh, F.relu6 and their in-place forms.
std::vector<Tensor> hardtanh_dbackward(autograd::Node& n, const std::vector<Tensor>& g);

// ---- in-place forms; each returns nothing: the edited tensor is the result.
// elu_(alpha, scale, input_scale): EluBackward1 saves alpha, input_scale, result, scale;
// its backward raises for a negative alpha (F.selu_ is elu_ with SELU's constants; `op`
// names the spelling in errors and allocations).
void elu_(const Tensor& self, const Value& alpha, const Value& scale, const Value& input_scale,
          const char* op = "elu_");
void celu_(const Tensor& self, const Value& alpha);                  // CeluBackward1: alpha, result
void leaky_relu_(const Tensor& self, const Value& negative_slope);    // LeakyReluBackward1: negative_slope, result
void hardtanh_(const Tensor& self, const Value& min_val, const Value& max_val);  // HardtanhBackward0: a clone
void threshold_(const Tensor& self, const Value& threshold, const Value& value);  // ThresholdBackward1: a clone
void silu_(const Tensor& self);         // SiluBackward0: a clone of self
void hardsigmoid_(const Tensor& self);  // HardsigmoidBackward0: a clone of self
void hardswish_(const Tensor& self);    // HardswishBackward0: a clone of self
void mish_(const Tensor& self);         // MishBackward0: a clone of self
// rrelu_ with training=False: RreluWithNoiseBackward1 saves lower, noise (an empty tensor of
// self's shape), result, training, upper; training=True is unsupported (random slopes).
void rrelu_(const Tensor& self, const Value& lower, const Value& upper, bool training);

// ---- out-of-place forms new with this family
Tensor celu(const Tensor& a, const Value& alpha);  // CeluBackward0: alpha, self
Tensor hardsigmoid(const Tensor& a);               // HardsigmoidBackward0: self
Tensor hardswish(const Tensor& a);                 // HardswishBackward0: self
Tensor mish(const Tensor& a);                      // MishBackward0: self
// rrelu with training=False: RreluWithNoiseBackward0 saves lower, noise, self, training, upper.
Tensor rrelu(const Tensor& a, const Value& lower, const Value& upper, bool training);

// softmax / log_softmax's dtype=: the input cast first (ToCopyBackward0 under the softmax
// node, measured); the same object when dtype is absent or already the input's.
Tensor softmax_input(const Tensor& a, std::optional<DType> dtype);

// F.cross_entropy with label_smoothing > 0 (ATen cross_entropy_loss_label_smoothing, 1.13):
// (1 - ls) * nll_loss(log_softmax(x)) + smooth * (ls / C), smooth = -log_softmax(x).sum(class
// dim) with the ignored targets zeroed by index_put_, then masked_select(~ignored).mean(),
// sum() or itself by reduction. A weight is another decomposition: unsupported.
Tensor cross_entropy_label_smoothing(const Tensor& input, const Tensor& target, const Tensor& weight,
                                     int64_t reduction, int64_t ignore_index, double label_smoothing);

}  // namespace agtrace::ops
