#include <string>

#include "cuda/block_reduce.cuh"
#include "cuda/layer_norm.cuh"

namespace agtrace::cuda {

namespace {

// Rows and normalized part of a tensor of in's shape.
struct Split {
  Strided outer, inner;
};

Split split_last(const DeviceTensorRef& t, const Shape& shape, int64_t normalized_ndim, const std::string& op) {
  if (t.sizes != shape) throw CudaError("CUDA kernel " + op + ": operands must have the input's shape");
  std::vector<bool> mask(t.sizes.size(), false);
  for (size_t d = t.sizes.size() - static_cast<size_t>(normalized_ndim); d < t.sizes.size(); ++d) mask[d] = true;
  Split s;
  split_dims(t, mask, s.outer, s.inner, op);
  return s;
}

// A parameter (weight, bias or their gradients) over the normalized shape.
Strided param(const DeviceTensorRef* t, const Shape& normalized, const std::string& op) {
  if (t == nullptr) return Strided{};  // data == nullptr: absent
  if (t->sizes != normalized) throw CudaError("CUDA kernel " + op + ": weight and bias must have the normalized shape");
  return make_strided(*t, op);
}

// mean / rstd: M elements, read or written by linear index.
Strided stats(const DeviceTensorRef& t, int64_t rows, const std::string& op) {
  if (t.numel() != rows) throw CudaError("CUDA kernel " + op + ": mean and rstd must have one element per row");
  return make_strided(t, op);
}

template <typename T>
__global__ void layer_norm_kernel(Strided y, Strided yi, Strided x, Strided xi, Strided mean, Strided rstd, Strided w,
                                  Strided b, int64_t rows, int64_t n, T eps) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t xb = x.at(row), yb = y.at(row);
    T s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += load<T>(x.data, x.dtype, xb + xi.at(i));
    const T mu = block_sum(s, shared) / static_cast<T>(n);
    T q = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T d = load<T>(x.data, x.dtype, xb + xi.at(i)) - mu;
      q += d * d;
    }
    T var = block_sum(q, shared) / static_cast<T>(n);
    if (var < T(0)) var = T(0);
    const T r = ::rsqrt(var + eps);
    if (threadIdx.x == 0) {
      store<T>(mean.data, mean.dtype, mean.at(row), mu);
      store<T>(rstd.data, rstd.dtype, rstd.at(row), r);
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      T v = (load<T>(x.data, x.dtype, xb + xi.at(i)) - mu) * r;
      if (w.data != nullptr) v = v * load<T>(w.data, w.dtype, w.at(i));
      if (b.data != nullptr) v = v + load<T>(b.data, b.dtype, b.at(i));
      store<T>(y.data, y.dtype, yb + yi.at(i), v);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void layer_norm_grad_input_kernel(Strided dx, Strided dxi, Strided dy, Strided dyi, Strided x, Strided xi,
                                             Strided mean, Strided rstd, Strided w, int64_t rows, int64_t n) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t xb = x.at(row), gb = dy.at(row), ob = dx.at(row);
    const T mu = load<T>(mean.data, mean.dtype, mean.at(row)), r = load<T>(rstd.data, rstd.dtype, rstd.at(row));
    T s1 = 0, s2 = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      T g = load<T>(dy.data, dy.dtype, gb + dyi.at(i));
      if (w.data != nullptr) g = g * load<T>(w.data, w.dtype, w.at(i));
      const T xhat = (load<T>(x.data, x.dtype, xb + xi.at(i)) - mu) * r;
      s1 += g;
      s2 += g * xhat;
    }
    s1 = block_sum(s1, shared);
    s2 = block_sum(s2, shared);
    const T fn = static_cast<T>(n);
    const T term = (T(1) / fn) * r;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      T g = load<T>(dy.data, dy.dtype, gb + dyi.at(i));
      if (w.data != nullptr) g = g * load<T>(w.data, w.dtype, w.at(i));
      const T xhat = (load<T>(x.data, x.dtype, xb + xi.at(i)) - mu) * r;
      store<T>(dx.data, dx.dtype, ob + dxi.at(i), (fn * g - xhat * s2 - s1) * term);
    }
    __syncthreads();
  }
}

// One block per normalized element (column): sums over the rows.
template <typename T>
__global__ void layer_norm_grad_params_kernel(Strided dw, Strided db, Strided dy, Strided dyi, Strided x, Strided xi,
                                              Strided mean, Strided rstd, int64_t rows, int64_t n) {
  __shared__ T shared[kBlock];
  for (int64_t col = blockIdx.x; col < n; col += gridDim.x) {
    const int64_t gc = dyi.at(col), xc = xi.at(col);
    T sw = 0, sb = 0;
    for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) {
      const T g = load<T>(dy.data, dy.dtype, dy.at(row) + gc);
      const T xhat = (load<T>(x.data, x.dtype, x.at(row) + xc) - load<T>(mean.data, mean.dtype, mean.at(row))) *
                     load<T>(rstd.data, rstd.dtype, rstd.at(row));
      sw += g * xhat;
      sb += g;
    }
    sw = block_sum(sw, shared);
    sb = block_sum(sb, shared);
    if (threadIdx.x == 0) {
      if (dw.data != nullptr) store<T>(dw.data, dw.dtype, dw.at(col), sw);
      if (db.data != nullptr) store<T>(db.data, db.dtype, db.at(col), sb);
    }
  }
}

void check_floating(const std::string& op, DType d) {
  if (d == DType::Int64 || d == DType::Bool) unsupported_dtype(op, d);
}

Shape normalized_shape(const DeviceTensorRef& in, int64_t normalized_ndim, const std::string& op) {
  if (normalized_ndim < 1 || normalized_ndim > static_cast<int64_t>(in.sizes.size()))
    throw CudaError("CUDA kernel " + op + ": normalized_ndim must be in [1, input dims]");
  return Shape(in.sizes.end() - normalized_ndim, in.sizes.end());
}

}  // namespace

void layer_norm(const DeviceTensorRef& out, const DeviceTensorRef& mean, const DeviceTensorRef& rstd,
                const DeviceTensorRef& in, const DeviceTensorRef* weight, const DeviceTensorRef* bias,
                int64_t normalized_ndim, double eps) {
  const std::string op = "layer_norm";
  check_floating(op, in.dtype);
  const Shape norm = normalized_shape(in, normalized_ndim, op);
  const Split x = split_last(in, in.sizes, normalized_ndim, op), y = split_last(out, in.sizes, normalized_ndim, op);
  int64_t rows = 1, n = 1;
  for (int d = 0; d < x.outer.ndim; ++d) rows *= x.outer.sizes[d];
  for (int64_t s : norm) n *= s;
  const Strided m = stats(mean, rows, op), r = stats(rstd, rows, op);
  const Strided w = param(weight, norm, op), b = param(bias, norm, op);
  if (rows == 0) return;
  if (n == 0) throw CudaError("CUDA kernel " + op + ": the normalized shape has no elements");
  if (in.dtype == DType::Float64)
    layer_norm_kernel<double><<<row_grid(rows), kBlock>>>(y.outer, y.inner, x.outer, x.inner, m, r, w, b, rows, n, eps);
  else
    layer_norm_kernel<float><<<row_grid(rows), kBlock>>>(y.outer, y.inner, x.outer, x.inner, m, r, w, b, rows, n,
                                                        static_cast<float>(eps));
  check_launch(op);
}

void layer_norm_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                         const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                         const DeviceTensorRef& mean, const DeviceTensorRef& rstd, const DeviceTensorRef* weight,
                         int64_t normalized_ndim) {
  const std::string op = "layer_norm_backward";
  check_floating(op, in.dtype);
  const Shape norm = normalized_shape(in, normalized_ndim, op);
  const Split x = split_last(in, in.sizes, normalized_ndim, op), g = split_last(grad_out, in.sizes, normalized_ndim, op);
  int64_t rows = 1, n = 1;
  for (int d = 0; d < x.outer.ndim; ++d) rows *= x.outer.sizes[d];
  for (int64_t s : norm) n *= s;
  const Strided m = stats(mean, rows, op), r = stats(rstd, rows, op), w = param(weight, norm, op);
  const Strided dw = param(grad_weight, norm, op), db = param(grad_bias, norm, op);
  const bool dbl = in.dtype == DType::Float64;
  if (grad_in != nullptr && rows > 0 && n > 0) {
    const Split dx = split_last(*grad_in, in.sizes, normalized_ndim, op);
    if (dbl)
      layer_norm_grad_input_kernel<double><<<row_grid(rows), kBlock>>>(dx.outer, dx.inner, g.outer, g.inner, x.outer,
                                                                       x.inner, m, r, w, rows, n);
    else
      layer_norm_grad_input_kernel<float><<<row_grid(rows), kBlock>>>(dx.outer, dx.inner, g.outer, g.inner, x.outer,
                                                                      x.inner, m, r, w, rows, n);
    check_launch(op);
  }
  if ((grad_weight != nullptr || grad_bias != nullptr) && n > 0) {
    if (dbl)
      layer_norm_grad_params_kernel<double><<<row_grid(n), kBlock>>>(dw, db, g.outer, g.inner, x.outer, x.inner, m, r,
                                                                     rows, n);
    else
      layer_norm_grad_params_kernel<float><<<row_grid(n), kBlock>>>(dw, db, g.outer, g.inner, x.outer, x.inner, m, r,
                                                                    rows, n);
    check_launch(op);
  }
}

}  // namespace agtrace::cuda
