// batch_norm forward (training and eval) and backward over the channel dim 1 of an
// [N, C, ...] input. Host launchers with no CUDA types. One thread block per channel;
// float32/float16/bfloat16 compute in float, float64 in double (PyTorch's acc type).
//
// As PyTorch 1.13 (aten/src/ATen/native/cuda/Normalization.cuh) and agtrace's CPU op:
// training: mean and save_invstd = 1 / sqrt(biased var + eps) per channel (PyTorch uses
// Welford's update; here the mean, then the mean of squared deviations), running_mean =
// (1 - momentum) running_mean + momentum mean and running_var likewise with the unbiased
// variance; eval: the running statistics, invstd = 1 / sqrt(running_var + eps).
// y = (x - mean) * invstd * weight + bias.
// Backward (batch_norm_backward_reduce / _elemt): dot = sum(dy (x - mean)), grad_weight =
// dot * invstd, grad_bias = sum(dy); training: dx = (dy - (x - mean) * dot * invstd^2 / M -
// sum(dy) / M) * invstd * w; eval: dx = dy * invstd * w.
#pragma once
#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

// weight, bias, running_mean, running_var: [C] or null. save_mean and save_invstd: [C], written
// in training (null in eval). Running statistics are updated in training when given.
void batch_norm(const DeviceTensorRef& out, const DeviceTensorRef* save_mean, const DeviceTensorRef* save_invstd,
                const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                const DeviceTensorRef* running_mean, const DeviceTensorRef* running_var, bool training,
                double momentum, double eps);
// training: mean and invstd are save_mean and save_invstd; eval: running_mean and
// running_var (invstd computed with eps). Any of the three gradients may be null.
void batch_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                         const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                         const DeviceTensorRef* weight, const DeviceTensorRef& mean, const DeviceTensorRef& var_or_invstd,
                         bool training, double eps);

}  // namespace agtrace::cuda
