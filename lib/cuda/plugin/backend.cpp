// The cuda DeviceBackend (tensor/device_backend.hpp) over lib/cuda's allocator and
// kernels, built as a plugin (libagtrace_cuda_backend.so) that agtrace loads with dlopen
// for a cuda run (lib/cuda/device.cpp). Not linked into agtrace itself: the static CUDA
// runtime's start-up cost every run about 0.5 MiB (issue #6's cold-start budget), and
// agtrace must start on machines without the CUDA libraries.
//
// Nothing of agtrace_lib is called from here (headers only), and errors leave the plugin
// as std::runtime_error (CudaError) with the operation's name, which the caller turns into
// a scenario error.
#include <vector>

#include "cuda/allocator.hpp"
#include "cuda/batch_norm.cuh"
#include "cuda/conv.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/indexing.cuh"
#include "cuda/layer_norm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/pooling.cuh"
#include "cuda/reduce.cuh"
#include "cuda/runtime.hpp"
#include "cuda/softmax.cuh"
#include "tensor/device_backend.hpp"

namespace agtrace::cuda {
namespace {

DeviceTensorRef flat(void* data, DType dtype, int64_t n) { return DeviceTensorRef{data, dtype, {n}, {1}, 0}; }

class CudaBackend : public DeviceBackend {
 public:
  explicit CudaBackend(std::string name) : name_(std::move(name)) {}
  std::string description() const override { return name_; }
  void* allocate(int64_t bytes, const char* op) override { return device_alloc(bytes, op); }
  void release(void* p) noexcept override {
    try {
      device_free(p);
    } catch (...) {  // only a pointer the allocator never handed out throws: nothing to free
    }
  }
  void zero(void* p, int64_t bytes, const char*) override {
    if (bytes > 0) cuda::fill(flat(p, DType::Bool, bytes), 0.0);  // bytes as one-byte elements
  }
  // The host side holds doubles (already representable in dtype): float32 and float64 go
  // over as their own bytes; the other dtypes go over as float64 into a staging buffer and
  // the cast kernel writes the dtype's elements (exact: the values are representable).
  void upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) override {
    if (n <= 0) return;
    if (dtype == DType::Float64) {
      copy_to_device(dst, src, n * 8, op);
      return;
    }
    if (dtype == DType::Float32) {
      std::vector<float> f(src, src + n);
      copy_to_device(dst, f.data(), n * 4, op);
      return;
    }
    void* staging = device_alloc(n * 8, op);
    try {
      copy_to_device(staging, src, n * 8, op);
      cuda::copy(flat(dst, dtype, n), flat(staging, DType::Float64, n));
    } catch (...) {
      device_free(staging);
      throw;
    }
    device_free(staging);
  }
  void download(double* dst, const void* src, DType dtype, int64_t n, const char* op) override {
    if (n <= 0) return;
    if (dtype == DType::Float64) {
      copy_to_host(dst, src, n * 8, op);
      return;
    }
    if (dtype == DType::Float32) {
      std::vector<float> f(static_cast<size_t>(n));
      copy_to_host(f.data(), src, n * 4, op);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(f[static_cast<size_t>(i)]);
      return;
    }
    void* staging = device_alloc(n * 8, op);
    try {
      cuda::copy(flat(staging, DType::Float64, n), flat(const_cast<void*>(src), dtype, n));
      copy_to_host(dst, staging, n * 8, op);
    } catch (...) {
      device_free(staging);
      throw;
    }
    device_free(staging);
  }
  DeviceMemoryStats stats() const override {
    const AllocatorStats a = allocator_stats();
    DeviceMemoryStats s;
    s.requested_live = a.requested_live;
    s.requested_peak = a.requested_peak;
    s.block_live = a.block_live;
    s.block_peak = a.block_peak;
    s.reserved_live = a.reserved_live;
    s.reserved_peak = a.reserved_peak;
    s.driver_calls = a.driver_calls;
    return s;
  }

  // The launchers of lib/cuda, unchanged: every launch checked, errors naming the op.
  void copy(const DeviceTensorRef& dst, const DeviceTensorRef& src) override { cuda::copy(dst, src); }
  void fill(const DeviceTensorRef& dst, double value) override { cuda::fill(dst, value); }
  void unary(pw::UnaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, double s0, double s1) override {
    cuda::unary(op, out, in, s0, s1);
  }
  void binary(pw::BinaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
              double s0) override {
    cuda::binary(op, out, a, b, s0);
  }
  void ternary(pw::TernaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
               const DeviceTensorRef& c, double s0, double s1) override {
    cuda::ternary(op, out, a, b, c, s0, s1);
  }
  void reduce(ReduceOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, const std::vector<int64_t>& dims,
              bool keepdim) override {
    cuda::reduce(op, out, in, dims, keepdim);
  }
  void matmul(const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b) override {
    cuda::matmul(out, a, b);
  }
  void max_dim(const DeviceTensorRef& values, const DeviceTensorRef& indices, const DeviceTensorRef& in, int64_t dim,
               bool keepdim, bool is_min) override {
    cuda::max_dim(values, indices, in, dim, keepdim, is_min);
  }
  void softmax(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, bool log) override {
    cuda::softmax(out, in, dim, log);
  }
  void softmax_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out, const DeviceTensorRef& output,
                        int64_t dim, bool log) override {
    cuda::softmax_backward(grad_in, grad_out, output, dim, log);
  }
  void layer_norm(const DeviceTensorRef& out, const DeviceTensorRef& mean, const DeviceTensorRef& rstd,
                  const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                  int64_t normalized_ndim, double eps) override {
    cuda::layer_norm(out, mean, rstd, in, weight, bias, normalized_ndim, eps);
  }
  void layer_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                           const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                           const DeviceTensorRef& mean, const DeviceTensorRef& rstd, const DeviceTensorRef* weight,
                           int64_t normalized_ndim) override {
    cuda::layer_norm_backward(grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight, normalized_ndim);
  }
  void index_select(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim,
                    const DeviceTensorRef& index) override {
    cuda::index_select(out, in, dim, index);
  }
  void index_add(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index,
                 const DeviceTensorRef& src) override {
    cuda::index_add(out, dim, index, src);
  }
  void max_pool2d(const DeviceTensorRef& out, const DeviceTensorRef& indices, const DeviceTensorRef& in,
                  const Pool2dGeometry& g) override {
    cuda::max_pool2d(out, indices, in, g);
  }
  void max_pool2d_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out,
                           const DeviceTensorRef& indices, const Pool2dGeometry& g) override {
    cuda::max_pool2d_backward(grad_in, grad_out, indices, g);
  }
  void gather(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, const DeviceTensorRef& index) override {
    cuda::gather(out, in, dim, index);
  }
  void scatter(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index, const DeviceTensorRef& src,
               bool add) override {
    cuda::scatter(out, dim, index, src, add);
  }
  // ---- batch_norm.cuh and conv.cuh.
  void batch_norm(const DeviceTensorRef& out, const DeviceTensorRef* save_mean, const DeviceTensorRef* save_invstd,
                  const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                  const DeviceTensorRef* running_mean, const DeviceTensorRef* running_var, bool training,
                  double momentum, double eps) override {
    cuda::batch_norm(out, save_mean, save_invstd, in, weight, bias, running_mean, running_var, training, momentum, eps);
  }
  void batch_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                           const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                           const DeviceTensorRef* weight, const DeviceTensorRef& mean,
                           const DeviceTensorRef& var_or_invstd, bool training, double eps) override {
    cuda::batch_norm_backward(grad_in, grad_weight, grad_bias, grad_out, in, weight, mean, var_or_invstd, training, eps);
  }
  void conv2d(const DeviceTensorRef& out, const DeviceTensorRef& in, const DeviceTensorRef& weight,
              const DeviceTensorRef* bias, const Conv2dGeometry& g) override {
    cuda::conv2d(out, in, weight, bias, g);
  }
  void conv2d_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                       const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                       const DeviceTensorRef& weight, const Conv2dGeometry& g) override {
    cuda::conv2d_backward(grad_in, grad_weight, grad_bias, grad_out, in, weight, g);
  }

 private:
  std::string name_;
};

}  // namespace
}  // namespace agtrace::cuda

// The plugin's one entry point: a backend for device 0, or null with the reason in *error
// (no device, a driver too old for this runtime). The backend lives until the process ends.
extern "C" __attribute__((visibility("default"))) agtrace::DeviceBackend* agtrace_cuda_backend_create(
    std::string* error) {
  try {
    const agtrace::cuda::RuntimeStatus st = agtrace::cuda::runtime_status();
    if (!st.usable) {
      if (error) *error = st.reason;
      return nullptr;
    }
    static agtrace::cuda::CudaBackend backend(st.device_name);
    return &backend;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}
