// How the kernels walk a tensor: sizes and strides by value, and the host helpers that build
// them from a DeviceTensorRef (broadcasting, splitting dims into rows and reduced parts). No
// CUDA types: the host-side logic is tested without a GPU (tests/cuda/cpu).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_tensor.hpp"
#include "cuda/hd.hpp"

namespace agtrace::cuda {

// The dtype codes the kernels switch on (DType's order, as an int the device can read).
enum DTypeCode : int { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3, kI64 = 4, kBool = 5 };
inline int dtype_code(DType d) { return static_cast<int>(d); }

// Up to 8 dims per tensor (PyTorch's CUDA OffsetCalculator allows 25; agtrace's scenarios
// use at most 4). Passed to kernels by value.
constexpr int kMaxDims = 8;
struct Strided {
  void* data = nullptr;
  int dtype = kF32;
  int ndim = 0;
  int64_t offset = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  // Storage index of the element with row-major linear index `linear` in this tensor's
  // own shape.
  AGTRACE_HD int64_t at(int64_t linear) const {
    int64_t off = offset;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t s = sizes[d];
      off += (linear % s) * strides[d];
      linear /= s;
    }
    return off;
  }
};

// A tensor's Strided form. `shape`, when given, broadcasts it to that shape (stride 0 on
// added or size-1 dims); throws naming `op` if it cannot or has too many dims.
Strided make_strided(const DeviceTensorRef& t, const std::string& op);
Strided make_broadcast(const DeviceTensorRef& t, const Shape& shape, const std::string& op);

// Splits t's dims in two, keeping their order: `outer` (is_inner false; it carries t's data,
// dtype and offset) and `inner` (is_inner true; offset 0). Element (o, i) of the split is at
// outer.at(o) + inner.at(i). A reduction's outputs are the outer index, its inputs the inner.
void split_dims(const DeviceTensorRef& t, const std::vector<bool>& is_inner, Strided& outer, Strided& inner,
                const std::string& op);
// dims (negative counts from the end; empty = all) as a mask over ndim dims.
std::vector<bool> dims_mask(size_t ndim, const std::vector<int64_t>& dims, const std::string& op);

}  // namespace agtrace::cuda
