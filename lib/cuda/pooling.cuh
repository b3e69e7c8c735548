// max_pool2d forward (values and indices) and backward. Host launchers with no CUDA types.
//
// As PyTorch's CUDA kernels (ATen/native/cuda/DilatedMaxPool2d.cu, max_pool_forward_nchw and
// max_pool_backward_nchw), which agree with its CPU kernel and agtrace's: each window starts
// clipped to the input, its first valid position is the initial index, the maximum starts at
// -inf and a value replaces it when `val > max || isnan(val)` (ties keep the first, the last
// NaN wins); indices are flat within each H x W plane. The backward gathers, for each input
// element, the gradients of the windows whose index names it (no atomics: deterministic,
// every dtype). Compute in float for float32/float16/bfloat16, double for float64.
#pragma once
#include <cstdint>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

struct Pool2dGeometry {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1,
          dilation_w = 1;
};

// in: [..., H, W]; out and indices (int64): [..., OH, OW] with the same leading dims (the
// caller computes OH, OW as pooling_output_shape does).
void max_pool2d(const DeviceTensorRef& out, const DeviceTensorRef& indices, const DeviceTensorRef& in,
                const Pool2dGeometry& g);
// grad_in: the input's shape; grad_out and indices: the output's.
void max_pool2d_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out,
                         const DeviceTensorRef& indices, const Pool2dGeometry& g);

}  // namespace agtrace::cuda
