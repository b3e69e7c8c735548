// Elementwise kernels: strided copy/cast, fill, and the pointwise operations of
// pointwise_formulas.hpp selected by op code, with broadcasting. Host launchers with no
// CUDA types (includable from .cpp files).
//
// Shapes: `out` has the result's shape; every input broadcasts to it (PyTorch's rules,
// aligned from the last dim). Any strides, offsets and overlap of an input with `out` at
// the same index (in-place) are fine. Operands should already have the result's dtype, as
// PyTorch's TensorIterator casts them to the common dtype first; the formula is evaluated in
// float when no operand is float64 or int64 (float16 and bfloat16 compute in float, as
// PyTorch's opmath does) and in double otherwise. Every launch is checked; errors throw
// CudaError naming the operation.
#pragma once
#include "cuda/device_tensor.hpp"
#include "cuda/pointwise_formulas.hpp"

namespace agtrace::cuda {

// dst = src (broadcast to dst's shape), cast to dst's dtype: floating results round to
// nearest even; float to int64 truncates toward zero; x != 0 gives bool true.
// Same dtype copies bytes exactly (int64 included).
void copy(const DeviceTensorRef& dst, const DeviceTensorRef& src);
// Every element of dst = value (rounded to dst's dtype).
void fill(const DeviceTensorRef& dst, double value);
void unary(pw::UnaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, double s0 = 0, double s1 = 0);
// s0 is alpha for Add and Sub (default 1), the exponent or slope for the backward ops.
void binary(pw::BinaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
            double s0 = 1);
void ternary(pw::TernaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
             const DeviceTensorRef& c, double s0 = 0, double s1 = 0);

}  // namespace agtrace::cuda
