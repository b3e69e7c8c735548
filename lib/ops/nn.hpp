// Neural-network layers (nn.cpp): layer_norm, batch_norm, dropout, embedding, conv2d and
// max_pool2d. Each records the node PyTorch 1.13 records for the F.* call, with the same
// edges and saved values (shared/oracle/SUMMARY.md, re-measured with real torch); the
// forward and backward formulas sit side by side in nn.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenario/random.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::autograd {
struct Node;
}

namespace agtrace::ops {

// max_pool_double_backward's node (MaxPool2DWithIndicesBackwardBackward0 and
// AdaptiveMaxPool2DBackwardBackward0, both saving `indices`): the gradient gathered at each
// window's argmax for grad_output, zeros for self.
std::vector<Tensor> max_pool_bb_backward(autograd::Node& n, const std::vector<Tensor>& g);


// F.layer_norm -> NativeLayerNormBackward0 (edges input, weight|None, bias|None).
// `weight` and `bias` may be null.
Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps);

// F.batch_norm -> NativeBatchNormBackward0 (edges input, weight|None, bias|None). In
// training the running buffers (may be null) are updated in place with the unbiased
// variance and without a version bump, as PyTorch's kernel writes them.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps);

// F.dropout. Eval mode, p == 0 or an empty input return `input` itself. Otherwise the
// mask is drawn from `gen` (one uniform01() per element in row-major order; an element
// is kept when u >= p) and the result is input * mask (MulBackward0), or input.mul_(mask)
// for inplace=True (then `input` is returned, edited).
Tensor dropout(const Tensor& input, double p, bool training, bool inplace, SplitMix64& gen);
// The message PyTorch's F.dropout raises for p outside [0, 1] ("... but got 1.5"), with
// p as Python prints it.
void check_dropout_probability(double p, const std::string& p_repr);

// F.embedding -> EmbeddingBackward0 (one edge: weight). padding_idx as the user wrote it
// (nullopt for None); negative values count from the end, as F.embedding normalises them.
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx,
                 bool scale_grad_by_freq, bool sparse);

// Arguments of F.conv2d after Python's argument parsing: an int becomes [v, v], a tuple
// stays as written (so padding=(1,) is saved as (1,)), and the node keeps them so.
struct Conv2dArgs {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0};
  std::vector<int64_t> dilation{1, 1};
  std::vector<int64_t> output_padding{0, 0};
  int64_t groups = 1;
};
// F.conv2d -> ConvolutionBackward0 (edges input, weight, bias|None). `bias` may be null.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args);
// F.conv1d -> ConvolutionBackward0, the same node and saved values as conv2d with the
// lists of one entry; a (C, L) input is unsqueezed and the result squeezed (Unsqueeze- and
// SqueezeBackward nodes around it). `padding_mode` 'valid' / 'same' replaces args.padding;
// empty when the padding was given as numbers.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args,
              const std::string& padding_mode = "");
// padding='valid' / 'same' (at::_convolution_mode): the padding lists PyTorch passes on.
Conv2dArgs conv2d_padding_mode(const std::string& mode, const Tensor& input, const Tensor& weight,
                               const Conv2dArgs& args);

// F.max_pool2d -> MaxPool2DWithIndicesBackward0 (edge: input). `stride` empty means
// "not given" (saved as ()). Returns the output and the int64 indices (flat index within
// each H*W plane), which the node saves as result1.
struct MaxPool2dResult {
  Tensor output, indices;
};
MaxPool2dResult max_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode);

// One spatial dim of a pooling's output (pooling_output_shape with its checks: zero stride,
// negative padding, padding over half the kernel), for the poolings of other files.
int64_t checked_pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                                    bool ceil_mode);

}  // namespace agtrace::ops
