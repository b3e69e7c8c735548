// How host code names a tensor in device memory for the kernels of lib/cuda. No CUDA
// types: the launchers are plain C++ functions callable from any translation unit.
#pragma once
#include <cstdint>

#include "tensor/dtype.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::cuda {

// Element (i0, i1, ...) lives at ((T*)data)[offset + i0*strides[0] + i1*strides[1] + ...],
// T being dtype's element type; sizes, strides and offset count elements, as PyTorch's do.
// `data` is the start of the storage (a pointer from device_alloc).
struct DeviceTensorRef {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape sizes, strides;
  int64_t offset = 0;
  // (Inline, not shape_numel: agtrace_cuda uses lib/tensor's headers, not its code.)
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

}  // namespace agtrace::cuda
