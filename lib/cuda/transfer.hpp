// Tensors between host and device memory, for the CUDA tests today and for x.cuda() /
// x.cpu() later. Plain C++ (no CUDA types); defined only in a CUDA build (transfer.cpp is
// empty otherwise).
#pragma once
#include <memory>

#include "cuda/device_tensor.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::cuda {

// A device storage (freed through device_free when the last owner goes) and a view of it.
struct DeviceTensor {
  std::shared_ptr<void> storage;
  DeviceTensorRef ref;
};

// A new contiguous device tensor (uninitialised), its bytes from device_alloc(op).
DeviceTensor device_empty(const Shape& sizes, DType dtype, const char* op);
// Copies t's whole storage to the device and keeps t's sizes, strides and offset, so a
// non-contiguous CPU tensor stays non-contiguous on the device. Not for meta tensors.
DeviceTensor upload(const Tensor& t, const char* op = "upload");
// A new contiguous CPU tensor with t's elements (any strides).
Tensor download(const DeviceTensorRef& t, const char* op = "download");

}  // namespace agtrace::cuda
