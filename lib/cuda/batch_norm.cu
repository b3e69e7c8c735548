#include <string>

#include "cuda/batch_norm.cuh"
#include "cuda/block_reduce.cuh"

namespace agtrace::cuda {

namespace {

// The channel dim (outer) and the rest (inner) of an [N, C, ...] tensor.
struct Split {
  Strided outer, inner;
};

Split by_channel(const DeviceTensorRef& t, const Shape& shape, const std::string& op) {
  if (t.sizes != shape) throw CudaError("CUDA kernel " + op + ": operands must have the input's shape");
  std::vector<bool> mask(t.sizes.size(), true);
  mask[1] = false;
  Split s;
  split_dims(t, mask, s.outer, s.inner, op);
  return s;
}

// A [C] vector, absent (data == nullptr) when null.
Strided channel_vector(const DeviceTensorRef* t, int64_t channels, const std::string& op) {
  if (t == nullptr) return Strided{};
  if (t->sizes.size() != 1 || t->sizes[0] != channels)
    throw CudaError("CUDA kernel " + op + ": weight, bias and statistics must have one element per channel");
  return make_strided(*t, op);
}

template <typename T>
__device__ inline T get(const Strided& s, int64_t c, T absent) {
  return s.data == nullptr ? absent : load<T>(s.data, s.dtype, s.at(c));
}

template <typename T>
__global__ void batch_norm_kernel(Strided y, Strided yi, Strided x, Strided xi, Strided save_mean, Strided save_invstd,
                                  Strided w, Strided b, Strided rm, Strided rv, int64_t channels, int64_t count,
                                  bool training, T momentum, T eps) {
  __shared__ T shared[kBlock];
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const int64_t xb = x.at(c), yb = y.at(c);
    T mean, invstd;
    if (training) {
      T s = 0;
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += load<T>(x.data, x.dtype, xb + xi.at(i));
      mean = block_sum(s, shared) / static_cast<T>(count);
      T q = 0;
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        const T d = load<T>(x.data, x.dtype, xb + xi.at(i)) - mean;
        q += d * d;
      }
      const T var = block_sum(q, shared) / static_cast<T>(count);
      invstd = T(1) / ::sqrt(var + eps);
      if (threadIdx.x == 0) {
        if (save_mean.data != nullptr) store<T>(save_mean.data, save_mean.dtype, save_mean.at(c), mean);
        if (save_invstd.data != nullptr) store<T>(save_invstd.data, save_invstd.dtype, save_invstd.at(c), invstd);
        const T unbiased = count > 1 ? var * static_cast<T>(count) / static_cast<T>(count - 1) : var;
        if (rm.data != nullptr)
          store<T>(rm.data, rm.dtype, rm.at(c), momentum * mean + (T(1) - momentum) * load<T>(rm.data, rm.dtype, rm.at(c)));
        if (rv.data != nullptr)
          store<T>(rv.data, rv.dtype, rv.at(c),
                   momentum * unbiased + (T(1) - momentum) * load<T>(rv.data, rv.dtype, rv.at(c)));
      }
    } else {
      mean = load<T>(rm.data, rm.dtype, rm.at(c));
      invstd = T(1) / ::sqrt(load<T>(rv.data, rv.dtype, rv.at(c)) + eps);
    }
    const T wc = get<T>(w, c, T(1)), bc = get<T>(b, c, T(0));
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
      store<T>(y.data, y.dtype, yb + yi.at(i), (load<T>(x.data, x.dtype, xb + xi.at(i)) - mean) * invstd * wc + bc);
    __syncthreads();
  }
}

template <typename T>
__global__ void batch_norm_backward_kernel(Strided dx, Strided dxi, Strided dy, Strided dyi, Strided x, Strided xi,
                                           Strided w, Strided mean_s, Strided stat_s, Strided dw, Strided db,
                                           int64_t channels, int64_t count, bool training, T eps) {
  __shared__ T shared[kBlock];
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const int64_t xb = x.at(c), gb = dy.at(c);
    const T mean = load<T>(mean_s.data, mean_s.dtype, mean_s.at(c));
    const T stat = load<T>(stat_s.data, stat_s.dtype, stat_s.at(c));
    const T invstd = training ? stat : T(1) / ::sqrt(stat + eps);
    T sg = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T g = load<T>(dy.data, dy.dtype, gb + dyi.at(i));
      sg += g;
      dot += g * (load<T>(x.data, x.dtype, xb + xi.at(i)) - mean);
    }
    sg = block_sum(sg, shared);
    dot = block_sum(dot, shared);
    if (threadIdx.x == 0) {
      if (dw.data != nullptr) store<T>(dw.data, dw.dtype, dw.at(c), dot * invstd);
      if (db.data != nullptr) store<T>(db.data, db.dtype, db.at(c), sg);
    }
    if (dx.data != nullptr) {
      const T wc = get<T>(w, c, T(1));
      const T grad_scale = invstd * wc;
      const T proj_scale = dot / static_cast<T>(count) * invstd * invstd, grad_mean = sg / static_cast<T>(count);
      const int64_t ob = dx.at(c);
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        const T g = load<T>(dy.data, dy.dtype, gb + dyi.at(i));
        const T v = training ? (g - (load<T>(x.data, x.dtype, xb + xi.at(i)) - mean) * proj_scale - grad_mean) * grad_scale
                             : g * grad_scale;
        store<T>(dx.data, dx.dtype, ob + dxi.at(i), v);
      }
    }
    __syncthreads();
  }
}

void check_input(const DeviceTensorRef& in, const std::string& op) {
  if (in.sizes.size() < 2) throw CudaError("CUDA kernel " + op + ": the input needs at least 2 dims (N, C)");
  if (in.dtype == DType::Int64 || in.dtype == DType::Bool) unsupported_dtype(op, in.dtype);
}

}  // namespace

void batch_norm(const DeviceTensorRef& out, const DeviceTensorRef* save_mean, const DeviceTensorRef* save_invstd,
                const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                const DeviceTensorRef* running_mean, const DeviceTensorRef* running_var, bool training,
                double momentum, double eps) {
  const std::string op = "batch_norm";
  check_input(in, op);
  const int64_t channels = in.sizes[1], count = channels == 0 ? 0 : in.numel() / channels;
  if (!training && (running_mean == nullptr || running_var == nullptr))
    throw CudaError("CUDA kernel batch_norm: eval mode needs running_mean and running_var");
  const Split x = by_channel(in, in.sizes, op), y = by_channel(out, in.sizes, op);
  const Strided sm = channel_vector(save_mean, channels, op), si = channel_vector(save_invstd, channels, op),
                w = channel_vector(weight, channels, op), b = channel_vector(bias, channels, op),
                rm = channel_vector(running_mean, channels, op), rv = channel_vector(running_var, channels, op);
  if (channels == 0) return;
  if (training && count == 0) throw CudaError("CUDA kernel batch_norm: no elements per channel in training");
  if (count == 0) return;
  if (in.dtype == DType::Float64)
    batch_norm_kernel<double><<<row_grid(channels), kBlock>>>(y.outer, y.inner, x.outer, x.inner, sm, si, w, b, rm, rv,
                                                              channels, count, training, momentum, eps);
  else
    batch_norm_kernel<float><<<row_grid(channels), kBlock>>>(y.outer, y.inner, x.outer, x.inner, sm, si, w, b, rm, rv,
                                                             channels, count, training, static_cast<float>(momentum),
                                                             static_cast<float>(eps));
  check_launch(op);
}

void batch_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                         const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                         const DeviceTensorRef* weight, const DeviceTensorRef& mean, const DeviceTensorRef& var_or_invstd,
                         bool training, double eps) {
  const std::string op = "batch_norm_backward";
  check_input(in, op);
  const int64_t channels = in.sizes[1], count = channels == 0 ? 0 : in.numel() / channels;
  const Split x = by_channel(in, in.sizes, op), g = by_channel(grad_out, in.sizes, op);
  Split d;
  if (grad_in != nullptr) d = by_channel(*grad_in, in.sizes, op);
  const Strided w = channel_vector(weight, channels, op), m = channel_vector(&mean, channels, op),
                s = channel_vector(&var_or_invstd, channels, op), dw = channel_vector(grad_weight, channels, op),
                db = channel_vector(grad_bias, channels, op);
  if (channels == 0) return;
  if (in.dtype == DType::Float64)
    batch_norm_backward_kernel<double><<<row_grid(channels), kBlock>>>(d.outer, d.inner, g.outer, g.inner, x.outer,
                                                                       x.inner, w, m, s, dw, db, channels, count,
                                                                       training, eps);
  else
    batch_norm_backward_kernel<float><<<row_grid(channels), kBlock>>>(d.outer, d.inner, g.outer, g.inner, x.outer,
                                                                      x.inner, w, m, s, dw, db, channels, count,
                                                                      training, static_cast<float>(eps));
  check_launch(op);
}

}  // namespace agtrace::cuda
