// conv2d forward and backward by im2col and cuBLAS products (matmul.cuh). Host launchers with
// no CUDA types.
//
// PyTorch's CUDA conv2d calls cuDNN, whose algorithms sum in other orders; this is the
// im2col + GEMM formulation of PyTorch's own slow_conv2d (ATen/native/cuda/ConvolutionMM2d.cu),
// so results agree with PyTorch's to rounding, not bitwise. Columns, the weight, gradients and
// results pass through contiguous temporaries from device_alloc (counted). The gradient of
// the input folds the columns back (col2im) with one thread per input element, summing in a
// fixed order (deterministic). float32 (without TF32), float64, float16 and bfloat16.
#pragma once
#include <cstdint>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

struct Conv2dGeometry {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
};

// in [N, Cin, H, W], weight [Cout, Cin / groups, KH, KW], bias [Cout] or null, out
// [N, Cout, OH, OW] (the caller computes OH, OW); any strides.
void conv2d(const DeviceTensorRef& out, const DeviceTensorRef& in, const DeviceTensorRef& weight,
            const DeviceTensorRef* bias, const Conv2dGeometry& g);
// Any of the three gradients may be null.
void conv2d_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                     const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                     const DeviceTensorRef& weight, const Conv2dGeometry& g);

}  // namespace agtrace::cuda
