// Where the elements of a "cuda" storage live, seen from lib/tensor (issue #8).
//
// A Storage on the cuda device holds no host array: its elements are in a buffer of the
// run's DeviceBackend, and host code reaches them only through this interface. The backend
// of a real run is lib/cuda's (the plugin agtrace loads for --device cuda, which counts
// every byte it takes from the driver); tests use a host-memory stand-in (tests/support)
// so that placement, transfers and accounting are checked on machines without a GPU.
//
// PyTorch has no host view of a CUDA tensor either: reading its elements is a copy
// (`.cpu()`, `.item()`, printing), and an operation with no CUDA kernel raises
// NotImplementedError. agtrace mirrors that: an op that reads elements on the host
// (Storage::f32/f64/get/set, to_values, write_values) from a cuda storage raises
// `unsupported` naming the op, so nothing silently computes on the host.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "cuda/conv.cuh"
#include "cuda/device_tensor.hpp"
#include "cuda/pointwise_formulas.hpp"
#include "cuda/pooling.cuh"
#include "cuda/reduce.cuh"
#include "tensor/device_stats.hpp"
#include "tensor/dtype.hpp"

namespace agtrace {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // What runs the device: the GPU's name, or "host simulation".
  virtual std::string description() const = 0;
  // A buffer for `bytes` bytes (nullptr for 0). `op` names the operation in errors.
  virtual void* allocate(int64_t bytes, const char* op) = 0;
  virtual void release(void* p) noexcept = 0;
  // Sets `bytes` bytes from p to zero (a zero-filled tensor).
  virtual void zero(void* p, int64_t bytes, const char* op) = 0;
  // n elements of `dtype` at the start of the buffer, from / to host doubles (values
  // already representable in dtype). The device holds each dtype in its own element
  // format (float32 as float, float16 as half, int64 as int64_t, bool as bool).
  virtual void upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) = 0;
  virtual void download(double* dst, const void* src, DType dtype, int64_t n, const char* op) = 0;
  virtual DeviceMemoryStats stats() const = 0;

  // Kernels, with the contracts of lib/cuda's launchers (cuda/elementwise.cuh, reduce.cuh,
  // matmul.cuh): `out` is written, inputs broadcast to it, any strides; float32 computes in
  // float as PyTorch's CUDA kernels do (opmath), so results agree with the CPU's to
  // rounding, not bitwise.
  virtual void copy(const cuda::DeviceTensorRef& dst, const cuda::DeviceTensorRef& src) = 0;
  virtual void fill(const cuda::DeviceTensorRef& dst, double value) = 0;
  virtual void unary(cuda::pw::UnaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                     double s0, double s1) = 0;
  virtual void binary(cuda::pw::BinaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                      const cuda::DeviceTensorRef& b, double s0) = 0;
  virtual void ternary(cuda::pw::TernaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                       const cuda::DeviceTensorRef& b, const cuda::DeviceTensorRef& c, double s0, double s1) = 0;
  virtual void reduce(cuda::ReduceOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                      const std::vector<int64_t>& dims, bool keepdim) = 0;
  virtual void matmul(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                      const cuda::DeviceTensorRef& b) = 0;
  // cuda/reduce.cuh's max_dim: values (in's dtype) and int64 indices along `dim`.
  virtual void max_dim(const cuda::DeviceTensorRef& values, const cuda::DeviceTensorRef& indices,
                       const cuda::DeviceTensorRef& in, int64_t dim, bool keepdim, bool is_min) = 0;
  // cuda/softmax.cuh: softmax / log_softmax along `dim` (float accumulation for float32),
  // and the backward from the forward's output.
  virtual void softmax(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim, bool log) = 0;
  virtual void softmax_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                                const cuda::DeviceTensorRef& output, int64_t dim, bool log) = 0;
  // cuda/layer_norm.cuh: over the last `normalized_ndim` dims; weight/bias and each
  // gradient may be null.
  virtual void layer_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& mean,
                          const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef& in,
                          const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias,
                          int64_t normalized_ndim, double eps) = 0;
  virtual void layer_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                                   const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                                   const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& mean,
                                   const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef* weight,
                                   int64_t normalized_ndim) = 0;
  // cuda/indexing.cuh: out = in.index_select(dim, index); out.index_add_(dim, index, src).
  virtual void index_select(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
                            const cuda::DeviceTensorRef& index) = 0;
  virtual void index_add(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
                         const cuda::DeviceTensorRef& src) = 0;
  // cuda/pooling.cuh: max_pool2d values and int64 indices (flat within each H x W plane),
  // and the backward from the indices.
  virtual void max_pool2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& indices,
                          const cuda::DeviceTensorRef& in, const cuda::Pool2dGeometry& g) = 0;
  virtual void max_pool2d_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                                   const cuda::DeviceTensorRef& indices, const cuda::Pool2dGeometry& g) = 0;
  // out[i][j] = in[index[i][j]][j] along dim (out and index of one shape).
  virtual void gather(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
                      const cuda::DeviceTensorRef& index) = 0;
  // out[index[i][j]][j] = src[i][j] along dim (or += with add); out keeps its other elements.
  virtual void scatter(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
                       const cuda::DeviceTensorRef& src, bool add) = 0;
  // ---- cuda/batch_norm.cuh and cuda/conv.cuh, with those launchers' contracts.
  // batch_norm over the channel dim 1: save_mean / save_invstd written in training (null in
  // eval), running statistics updated in training when given; its backward from the saved
  // statistics (training) or the running ones (eval). Null pointers: absent.
  virtual void batch_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef* save_mean,
                          const cuda::DeviceTensorRef* save_invstd, const cuda::DeviceTensorRef& in,
                          const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias,
                          const cuda::DeviceTensorRef* running_mean, const cuda::DeviceTensorRef* running_var,
                          bool training, double momentum, double eps) = 0;
  virtual void batch_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                                   const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                                   const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef* weight,
                                   const cuda::DeviceTensorRef& mean, const cuda::DeviceTensorRef& var_or_invstd,
                                   bool training, double eps) = 0;
  // conv2d of [N, Cin, H, W] with [Cout, Cin / groups, KH, KW] (bias [Cout] or null), and
  // its backward (any of the three gradients null).
  virtual void conv2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                      const cuda::DeviceTensorRef& weight, const cuda::DeviceTensorRef* bias,
                      const cuda::Conv2dGeometry& g) = 0;
  virtual void conv2d_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                               const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                               const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& weight,
                               const cuda::Conv2dGeometry& g) = 0;
};

// The backend that "cuda" storages of the run in progress use; null: none (a cuda storage
// then cannot be made, and says why).
DeviceBackend* device_backend();
void set_device_backend(DeviceBackend* backend);

// The device new storages are made on while it is in scope: "cpu" (default) or "cuda".
// Ops take their result's device from their inputs (PyTorch: a result lives where its
// operands do); leaves of a cuda scenario and transfers name it explicitly.
// Inline, as is DeviceScope: every op, wrapped number and backward node opens a scope, and
// every storage asks where it is made (issue #6: out of line, 1 % of a long chain's
// instructions).
namespace detail {
extern const std::string g_cpu_device, g_cuda_device;
extern const std::string* g_allocation_device;  // one of the names kept once (device_name)
const std::string* device_name(const std::string& device);  // the kept copy of `device`
}  // namespace detail
inline const std::string& allocation_device() { return *detail::g_allocation_device; }
// allocation_device() == "cpu", without comparing text
inline bool allocating_on_cpu() { return detail::g_allocation_device == &detail::g_cpu_device; }
// "cpu" and "cuda", the very strings DeviceScope recognises without comparing text.
inline const std::string& cpu_device_name() { return detail::g_cpu_device; }
inline const std::string& cuda_device_name() { return detail::g_cuda_device; }
class DeviceScope {
 public:
  explicit DeviceScope(const std::string& device) : previous_(detail::g_allocation_device) {
    detail::g_allocation_device = &device == &detail::g_cpu_device ? &detail::g_cpu_device : detail::device_name(device);
  }
  ~DeviceScope() { detail::g_allocation_device = previous_; }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const std::string* previous_;
};

// The run's backend calls, for lib/tensor: a failure of the device (out of memory, a CUDA
// error) becomes a ScenarioError on the statement (PyTorch raises RuntimeError "CUDA out
// of memory" there): kind `limit` for out of memory, `unsupported` otherwise.
void* device_allocate(int64_t bytes);
void device_zero(void* p, int64_t bytes);
void device_upload(void* dst, DType dtype, const double* src, int64_t n);
void device_download(double* dst, const void* src, DType dtype, int64_t n);
// Runs kernels on the run's backend, with the same error translation.
void device_launch(const std::function<void(DeviceBackend&)>& kernels);

// A failure of the backend (any exception but a ScenarioError) as that scenario error.
[[noreturn]] void throw_device_failure(const std::exception& e);

// The error for host code reaching the elements of a cuda storage (see above).
[[noreturn]] void throw_no_device_kernel(const std::string& device);

}  // namespace agtrace
