// softmax and log_softmax along a dim, and their backward. Host launchers with no CUDA
// types. One thread block per row (every index but `dim`); any strides; float32, float16
// and bfloat16 accumulate in float and float64 in double (PyTorch's accscalar_t).
// The formulas are those of PyTorch's cunn_SoftMaxForward / cunn_SoftMaxBackward epilogues
// (ATen/native/cuda/SoftMax.cu): softmax exp(x - max) / sum, log_softmax
// x - max - log(sum); backward: softmax y * (g - sum(g * y)), log_softmax
// g - exp(y) * sum(g).
#pragma once
#include <cstdint>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

// out and in have the same shape (out may be in itself).
void softmax(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, bool log);
// grad_in from grad_out and the forward's output, all of one shape.
void softmax_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out, const DeviceTensorRef& output,
                      int64_t dim, bool log);

}  // namespace agtrace::cuda
