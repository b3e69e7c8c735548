// Layers that real models (torchvision classifiers, segmentation and detection heads,
// diffusion UNets) call and the rest of lib/ops lacks: adaptive average and max pooling, average pooling,
// group_norm, interpolate (nearest, bilinear) and type_as (model_ops.cpp). Each records the
// node PyTorch 1.13 records for the F.* call, with its saved values, measured with
// /usr/bin/python3 and torch 1.13. Host and meta kernels only: a cuda operand raises
// unsupported naming the op.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "scenario/random.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// torch._C._nn.adaptive_avg_pool2d(input, output_size) after F.adaptive_avg_pool2d filled
// None entries: a 1x1 output is input.mean((-1, -2), keepdim=True) (MeanBackward1, as
// ATen's adaptive_avg_pool2d does), any other AdaptiveAvgPool2DBackward0 saving self.
Tensor adaptive_avg_pool2d(const Tensor& input, const std::vector<int64_t>& output_size);
// torch.adaptive_avg_pool1d: adaptive_avg_pool2d(input.unsqueeze(-2), (1, n)).squeeze(-2).
Tensor adaptive_avg_pool1d(const Tensor& input, const std::vector<int64_t>& output_size);

// F.adaptive_max_pool2d -> AdaptiveMaxPool2DBackward0 saving result1 (the returned int64
// indices, flat within each H*W plane) and self. Returns (output, indices).
std::pair<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, const std::vector<int64_t>& output_size);

// F.avg_pool2d -> AvgPool2DBackward0 (edge: input). `stride` empty: not given (saved as (),
// the kernel size is used).
struct AvgPool2dArgs {
  std::vector<int64_t> kernel_size, stride, padding{0};
  bool ceil_mode = false, count_include_pad = true;
  std::optional<int64_t> divisor_override;
};
Tensor avg_pool2d(const Tensor& input, const AvgPool2dArgs& args);
// F.avg_pool1d: avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p)).squeeze(-2).
Tensor avg_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad);

// torch.group_norm (after F.group_norm's Python checks) -> NativeGroupNormBackward0
// (edges input, weight|None, bias|None). `weight` and `bias` may be null.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps);

// torch._C._nn.upsample_nearest1d/2d and upsample_bilinear2d, the .vec overloads
// F.interpolate calls: exactly one of output_size and scale_factors is given (one entry
// per spatial dim). Nodes UpsampleNearest1DBackward1, UpsampleNearest2DBackward1,
// UpsampleBilinear2DBackward1.
Tensor upsample_nearest(const Tensor& input, const std::optional<std::vector<int64_t>>& output_size,
                        const std::optional<std::vector<double>>& scale_factors);
Tensor upsample_bilinear2d(const Tensor& input, const std::optional<std::vector<int64_t>>& output_size,
                           bool align_corners, const std::optional<std::vector<double>>& scale_factors);

// x.type_as(y): x.to(y.options()), the very object when dtype and device already agree.
Tensor type_as(const Tensor& self, const Tensor& other);

// F.multi_head_attention_forward's arguments (absent tensors null), in its order.
struct MhaArgs {
  Tensor query, key, value;
  int64_t embed_dim_to_check = 0, num_heads = 1;
  Tensor in_proj_weight, in_proj_bias, bias_k, bias_v;
  bool add_zero_attn = false;
  double dropout_p = 0.0;
  Tensor out_proj_weight, out_proj_bias;
  bool training = true;
  Tensor key_padding_mask;
  bool need_weights = true;
  Tensor attn_mask;
  bool use_separate_proj_weight = false;
  Tensor q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v;
  bool average_attn_weights = true;
};
// The attention output and the weights (null when need_weights is False), recorded as 1.13's
// Python body records them (attention.cpp); dropout masks from `gen`.
std::pair<Tensor, Tensor> multi_head_attention_forward(const MhaArgs& m, SplitMix64& gen);

}  // namespace agtrace::ops
