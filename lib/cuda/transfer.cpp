// Compiled into agtrace_lib (it uses lib/tensor's code); only a CUDA build has a body.
#ifdef AGTRACE_HAVE_CUDA
#include "cuda/transfer.hpp"

#include <vector>

#include "cuda/allocator.hpp"
#include "cuda/elementwise.cuh"
#include "cuda/runtime.hpp"

namespace agtrace::cuda {

namespace {
std::shared_ptr<void> own(void* p) {
  return std::shared_ptr<void>(p, [](void* q) {
    try {
      device_free(q);
    } catch (...) {  // a deleter must not throw; device_free only throws for foreign pointers
    }
  });
}

DeviceTensorRef flat(void* data, DType dtype, int64_t n) { return DeviceTensorRef{data, dtype, {n}, {1}, 0}; }
}  // namespace

DeviceTensor device_empty(const Shape& sizes, DType dtype, const char* op) {
  DeviceTensor t;
  t.storage = own(device_alloc(shape_numel(sizes) * dtype_size(dtype), op));
  t.ref = DeviceTensorRef{t.storage.get(), dtype, sizes, contiguous_strides(sizes), 0};
  return t;
}

DeviceTensor upload(const Tensor& t, const char* op) {
  if (t->is_meta()) throw CudaError(std::string(op) + ": a meta tensor has no data to copy to the device");
  const int64_t n = t->storage->numel;
  DeviceTensor d;
  d.storage = own(device_alloc(n * dtype_size(t->dtype()), op));
  d.ref = DeviceTensorRef{d.storage.get(), t->dtype(), t->sizes, t->strides, t->offset};
  if (n == 0) return d;
  // A float32 storage holds float on the host: its bytes are the device's. Every other
  // dtype is held as double (already rounded to the dtype): copy it as float64 and let the
  // cast kernel write the dtype's bytes (exact, the values being representable).
  const Storage& host = *t->storage;
  if (host.holds_float()) {
    copy_to_device(d.storage.get(), host.f32(), n * 4, op);
    return d;
  }
  if (t->dtype() == DType::Float64) {
    copy_to_device(d.storage.get(), host.f64(), n * 8, op);
    return d;
  }
  std::shared_ptr<void> staging = own(device_alloc(n * 8, op));
  copy_to_device(staging.get(), host.f64(), n * 8, op);
  copy(flat(d.storage.get(), t->dtype(), n), flat(staging.get(), DType::Float64, n));
  return d;
}

Tensor download(const DeviceTensorRef& t, const char* op) {
  const int64_t n = t.numel();
  std::vector<double> values(static_cast<size_t>(n));
  if (n > 0) {
    std::shared_ptr<void> staging = own(device_alloc(n * 8, op));
    DeviceTensorRef dense{staging.get(), DType::Float64, t.sizes, contiguous_strides(t.sizes), 0};
    copy(dense, t);
    copy_to_host(values.data(), staging.get(), n * 8, op);
  }
  return tensor_from_values(t.sizes, t.dtype, values);
}

}  // namespace agtrace::cuda
#endif  // AGTRACE_HAVE_CUDA
