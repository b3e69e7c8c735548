#include <string>

#include "cuda/block_reduce.cuh"
#include "cuda/softmax.cuh"

namespace agtrace::cuda {

namespace {

// x/out: the rows (outer) of input and output; xi/oi: the dim (inner).
template <typename T>
__global__ void softmax_kernel(Strided out, Strided oi, Strided x, Strided xi, int64_t rows, int64_t count, bool log) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t xb = x.at(row), ob = out.at(row);
    T m = -infinity<T>();
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T v = load<T>(x.data, x.dtype, xb + xi.at(i));
      m = (m != m) ? m : ((v != v) ? v : (v > m ? v : m));
    }
    m = block_max(m, shared);
    T s = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += ::exp(load<T>(x.data, x.dtype, xb + xi.at(i)) - m);
    s = block_sum(s, shared);
    const T log_s = ::log(s);
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T v = load<T>(x.data, x.dtype, xb + xi.at(i));
      store<T>(out.data, out.dtype, ob + oi.at(i), log ? v - m - log_s : ::exp(v - m) / s);
    }
    __syncthreads();  // in-place: every read of this row is done before the next row starts
  }
}

template <typename T>
__global__ void softmax_backward_kernel(Strided gi, Strided gii, Strided go, Strided goi, Strided y, Strided yi,
                                        int64_t rows, int64_t count, bool log) {
  __shared__ T shared[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t gb = go.at(row), yb = y.at(row), ib = gi.at(row);
    T s = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T g = load<T>(go.data, go.dtype, gb + goi.at(i));
      s += log ? g : g * load<T>(y.data, y.dtype, yb + yi.at(i));
    }
    s = block_sum(s, shared);
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T g = load<T>(go.data, go.dtype, gb + goi.at(i));
      const T out = load<T>(y.data, y.dtype, yb + yi.at(i));
      store<T>(gi.data, gi.dtype, ib + gii.at(i), log ? g - ::exp(out) * s : out * (g - s));
    }
    __syncthreads();
  }
}

struct Split {
  Strided outer, inner;
};

Split split_at(const DeviceTensorRef& t, const Shape& shape, int64_t dim, const std::string& op) {
  if (t.sizes != shape) throw CudaError("CUDA kernel " + op + ": operands must have the same shape");
  Split s;
  split_dims(t, dims_mask(t.sizes.size(), {dim}, op), s.outer, s.inner, op);
  return s;
}

void check_dtype(const std::string& op, DType d) {
  if (d == DType::Int64 || d == DType::Bool) unsupported_dtype(op, d);
}

}  // namespace

void softmax(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, bool log) {
  const std::string op = log ? "log_softmax" : "softmax";
  check_dtype(op, in.dtype);
  check_dtype(op, out.dtype);
  if (in.sizes.empty()) {  // a 0-d tensor: one row of one element
    DeviceTensorRef a = in, b = out;
    a.sizes = b.sizes = {1};
    a.strides = b.strides = {1};
    softmax(b, a, 0, log);
    return;
  }
  const Split x = split_at(in, in.sizes, dim, op), o = split_at(out, in.sizes, dim, op);
  int64_t rows = 1;
  for (int d = 0; d < x.outer.ndim; ++d) rows *= x.outer.sizes[d];
  const int64_t count = x.inner.sizes[0];
  if (rows == 0 || count == 0) return;
  if (in.dtype == DType::Float64)
    softmax_kernel<double><<<row_grid(rows), kBlock>>>(o.outer, o.inner, x.outer, x.inner, rows, count, log);
  else
    softmax_kernel<float><<<row_grid(rows), kBlock>>>(o.outer, o.inner, x.outer, x.inner, rows, count, log);
  check_launch(op);
}

void softmax_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out, const DeviceTensorRef& output,
                      int64_t dim, bool log) {
  const std::string op = log ? "log_softmax_backward" : "softmax_backward";
  for (const DeviceTensorRef* t : {&grad_in, &grad_out, &output}) check_dtype(op, t->dtype);
  if (output.sizes.empty()) {
    DeviceTensorRef a = grad_in, b = grad_out, c = output;
    a.sizes = b.sizes = c.sizes = {1};
    a.strides = b.strides = c.strides = {1};
    softmax_backward(a, b, c, 0, log);
    return;
  }
  const Split y = split_at(output, output.sizes, dim, op), g = split_at(grad_out, output.sizes, dim, op),
              gi = split_at(grad_in, output.sizes, dim, op);
  int64_t rows = 1;
  for (int d = 0; d < y.outer.ndim; ++d) rows *= y.outer.sizes[d];
  const int64_t count = y.inner.sizes[0];
  if (rows == 0 || count == 0) return;
  if (output.dtype == DType::Float64)
    softmax_backward_kernel<double><<<row_grid(rows), kBlock>>>(gi.outer, gi.inner, g.outer, g.inner, y.outer,
                                                                 y.inner, rows, count, log);
  else
    softmax_backward_kernel<float><<<row_grid(rows), kBlock>>>(gi.outer, gi.inner, g.outer, g.inner, y.outer,
                                                                y.inner, rows, count, log);
  check_launch(op);
}

}  // namespace agtrace::cuda
