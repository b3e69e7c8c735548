// Indexing kernels: gather, scatter (assign or add), index_select, index_add and
// view_backward (the gradient of a view scattered into zeros of its base's shape). Host
// launchers with no CUDA types. Indices are int64 tensors; an index outside [0, size) is
// caught on the device and thrown as CudaError naming the operation (PyTorch's CUDA kernels
// stop on a device-side assert instead, which ruins the CUDA context; an error we can
// report is better). Checking costs one synchronisation per call.
//
// The kernels that add (scatter with add, index_add, view_backward) use atomicAdd and take
// float32 and float64 only ("unsupported dtype for CUDA kernel ..." otherwise); the order of
// the additions is not fixed, so sums of colliding elements agree with the CPU to rounding
// (as PyTorch's CUDA index_add_/scatter_add_, which are nondeterministic too).
#pragma once
#include <cstdint>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

// out[i][j][k] = in[index[i][j][k]][j][k] (dim 0; likewise for any dim). out and index have
// one shape; in's other dims are at least as large.
void gather(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, const DeviceTensorRef& index);
// out[index[i][j]][j] = src[i][j] (dim 0), or += with add. out keeps its other elements.
// With repeated indices and add=false, which write lands is unspecified (as in PyTorch).
void scatter(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index, const DeviceTensorRef& src,
             bool add);
// out = in.index_select(dim, index), index 1-D.
void index_select(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, const DeviceTensorRef& index);
// out.index_add_(dim, index, src): out[..., index[i], ...] += src[..., i, ...].
void index_add(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index, const DeviceTensorRef& src);
// out (contiguous, the base's shape) = zeros, then grad added at the view's sizes
// (grad's shape), strides and offset: as_strided_backward, which sums where a view's
// elements overlap (an expanded view).
void view_backward(const DeviceTensorRef& out, const DeviceTensorRef& grad, const Shape& view_strides,
                   int64_t view_offset);

}  // namespace agtrace::cuda
