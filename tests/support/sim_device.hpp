// A host-memory stand-in for the cuda device, for tests on machines without a GPU: cuda
// storages get buffers here (elements kept as double, whatever the dtype), and the byte
// counts follow lib/cuda's allocator (requested bytes, 512-byte blocks; no cache, so
// reserved equals blocks). Its kernels follow the launchers' contracts with the same
// formulas (cuda/pointwise_formulas.hpp, evaluated in float for float32 as the GPU does),
// one element at a time: what it checks is agtrace's routing, placement, transfers and
// accounting on cuda; the GPU's own arithmetic is agtrace_cuda_tests' job, on a GPU.
#pragma once
#include <cstdint>
#include <map>
#include <initializer_list>
#include <memory>
#include <vector>

#include "tensor/device_backend.hpp"

namespace agtrace::testing {

class SimulatedDevice : public DeviceBackend {
 public:
  ~SimulatedDevice() override;
  std::string description() const override { return "host simulation"; }
  void* allocate(int64_t bytes, const char* op) override;
  void release(void* p) noexcept override;
  void zero(void* p, int64_t bytes, const char* op) override;
  void upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) override;
  void download(double* dst, const void* src, DType dtype, int64_t n, const char* op) override;
  DeviceMemoryStats stats() const override { return stats_; }
  void copy(const cuda::DeviceTensorRef& dst, const cuda::DeviceTensorRef& src) override;
  void fill(const cuda::DeviceTensorRef& dst, double value) override;
  void unary(cuda::pw::UnaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, double s0,
             double s1) override;
  void binary(cuda::pw::BinaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
              const cuda::DeviceTensorRef& b, double s0) override;
  void ternary(cuda::pw::TernaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
               const cuda::DeviceTensorRef& b, const cuda::DeviceTensorRef& c, double s0, double s1) override;
  void reduce(cuda::ReduceOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
              const std::vector<int64_t>& dims, bool keepdim) override;
  void matmul(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
              const cuda::DeviceTensorRef& b) override;
  void max_dim(const cuda::DeviceTensorRef& values, const cuda::DeviceTensorRef& indices,
               const cuda::DeviceTensorRef& in, int64_t dim, bool keepdim, bool is_min) override;
  void softmax(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim, bool log) override;
  void softmax_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                        const cuda::DeviceTensorRef& output, int64_t dim, bool log) override;
  void layer_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& mean,
                  const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef& in,
                  const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias, int64_t normalized_ndim,
                  double eps) override;
  void layer_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                           const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                           const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& mean,
                           const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef* weight,
                           int64_t normalized_ndim) override;
  void index_select(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
                    const cuda::DeviceTensorRef& index) override;
  void index_add(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
                 const cuda::DeviceTensorRef& src) override;
  void max_pool2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& indices,
                  const cuda::DeviceTensorRef& in, const cuda::Pool2dGeometry& g) override;
  void max_pool2d_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                           const cuda::DeviceTensorRef& indices, const cuda::Pool2dGeometry& g) override;
  void gather(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
              const cuda::DeviceTensorRef& index) override;
  void scatter(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
               const cuda::DeviceTensorRef& src, bool add) override;
  // ---- batch_norm.cuh and conv.cuh.
  void batch_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef* save_mean,
                  const cuda::DeviceTensorRef* save_invstd, const cuda::DeviceTensorRef& in,
                  const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias,
                  const cuda::DeviceTensorRef* running_mean, const cuda::DeviceTensorRef* running_var, bool training,
                  double momentum, double eps) override;
  void batch_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                           const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                           const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef* weight,
                           const cuda::DeviceTensorRef& mean, const cuda::DeviceTensorRef& var_or_invstd, bool training,
                           double eps) override;
  void conv2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& weight,
              const cuda::DeviceTensorRef* bias, const cuda::Conv2dGeometry& g) override;
  void conv2d_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                       const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                       const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& weight,
                       const cuda::Conv2dGeometry& g) override;

  int64_t live_buffers() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t uploads = 0, downloads = 0;  // element copies in each direction
  int64_t launches = 0;                 // kernels run

 private:
  struct Block {
    int64_t bytes = 0;
    std::vector<double> elements;  // at most `bytes` elements (bool: one byte each)
  };
  Block& block(const void* p, const char* op);
  // Element `linear` (row-major over `shape`, t broadcast to it) of t, and a store into
  // `out` rounded to its dtype as the GPU's store<T> does.
  double load(const cuda::DeviceTensorRef& t, const Shape& shape, int64_t linear);
  void store(const cuda::DeviceTensorRef& out, int64_t linear, double v);
  // Element at a multi-index of t's own shape (load/store at storage offsets).
  double load_at(const cuda::DeviceTensorRef& t, const std::vector<int64_t>& idx);
  void store_at(const cuda::DeviceTensorRef& t, const std::vector<int64_t>& idx, double v);
  template <typename F>
  void pointwise(const cuda::DeviceTensorRef& out, std::initializer_list<const cuda::DeviceTensorRef*> in, F&& f);
  std::map<const void*, std::unique_ptr<Block>> blocks_;
  DeviceMemoryStats stats_;
};

}  // namespace agtrace::testing
