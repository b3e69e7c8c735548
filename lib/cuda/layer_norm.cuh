// layer_norm forward and backward over the last `normalized_ndim` dims (M rows of N
// elements). Host launchers with no CUDA types. One thread block per row; any strides;
// float32/float16/bfloat16 compute in float, float64 in double (PyTorch's T_ACC).
//
// Forward (PyTorch 1.13 layer_norm_kernel.cu): mean and rstd = rsqrt(max(var, 0) + eps)
// with the biased variance, then y = (x - mean) * rstd * weight + bias. PyTorch computes the
// moments with Welford's update; here mean first, then the mean of squared deviations (the
// same values to rounding). mean and rstd hold M elements (any shape with M elements: torch
// gives them shape [*leading dims, 1, ..., 1]); their dtype is float for float16/bfloat16
// input, as torch's.
// Backward (layer_norm_grad_input_kernel): with g = dy * weight and xhat = (x - mean) * rstd,
// dx = rstd / N * (N g - sum(g) - xhat * sum(g xhat)); dweight = sum over rows of dy xhat;
// dbias = sum over rows of dy.
#pragma once
#include <cstdint>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

// weight and bias may be null (elementwise_affine=False), else of the normalized shape.
void layer_norm(const DeviceTensorRef& out, const DeviceTensorRef& mean, const DeviceTensorRef& rstd,
                const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                int64_t normalized_ndim, double eps);
// Any of grad_in, grad_weight, grad_bias may be null (not needed).
void layer_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                         const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                         const DeviceTensorRef& mean, const DeviceTensorRef& rstd, const DeviceTensorRef* weight,
                         int64_t normalized_ndim);

}  // namespace agtrace::cuda
