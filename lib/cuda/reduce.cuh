// Reductions: sum, mean, amax and amin over a set of dims, and max/min along one dim with
// their indices. Host launchers with no CUDA types.
//
// `out` has in's shape with the reduced dims kept as size 1 (keepdim) or removed, any
// strides. One thread block reduces each output element (a strided loop, then a tree in
// shared memory). float32, float16 and bfloat16 accumulate in float, as PyTorch's CUDA sum
// does (at::acc_type<float, /*is_cuda=*/true> is float; the CPU's is double); float64 in
// double; int64 and bool in double (exact below 2^53; torch uses int64). The order of
// additions differs from PyTorch's (its reduction splits rows across threads and blocks
// differently), so float32 sums agree to rounding, not bitwise.
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

enum class ReduceOp : int { Sum, Mean, Amax, Amin };

// dims: negative counts from the end; empty reduces every dim. Amax/Amin of no elements
// throw (PyTorch raises); they propagate NaN.
void reduce(ReduceOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, const std::vector<int64_t>& dims,
            bool keepdim);

// torch.max(in, dim) / torch.min(in, dim): values (in's dtype) and indices (int64). As
// PyTorch's CUDA kernel (SharedReduceOps.h, GreaterOrNan/LessOrNan): NaN wins, and among
// equal values the lowest index.
void max_dim(const DeviceTensorRef& values, const DeviceTensorRef& indices, const DeviceTensorRef& in, int64_t dim,
             bool keepdim, bool is_min = false);

}  // namespace agtrace::cuda
