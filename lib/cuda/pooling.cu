#include <string>

#include "cuda/common.cuh"
#include "cuda/pooling.cuh"

namespace agtrace::cuda {

namespace {

// Planes (leading dims) and the H x W plane of a tensor.
struct Planes {
  Strided outer;     // over the leading dims, with data/dtype/offset
  int64_t h = 0, w = 0, sh = 0, sw = 0;  // sizes and strides of the last two dims
};

Planes planes_of(const DeviceTensorRef& t, const std::string& op) {
  if (t.sizes.size() < 2) throw CudaError("CUDA kernel " + op + ": tensors need at least 2 dims (H, W)");
  std::vector<bool> mask(t.sizes.size(), false);
  mask[mask.size() - 1] = mask[mask.size() - 2] = true;
  Planes p;
  Strided inner;
  split_dims(t, mask, p.outer, inner, op);
  p.h = inner.sizes[0];
  p.w = inner.sizes[1];
  p.sh = inner.strides[0];
  p.sw = inner.strides[1];
  return p;
}

int64_t plane_count(const Planes& p) {
  int64_t n = 1;
  for (int d = 0; d < p.outer.ndim; ++d) n *= p.outer.sizes[d];
  return n;
}

template <typename T>
__global__ void max_pool_kernel(Planes out, Planes idx, Planes in, Pool2dGeometry g, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % out.w, oh = (i / out.w) % out.h, plane = i / (out.w * out.h);
    int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    const int64_t h1 = min(h0 + (g.kernel_h - 1) * g.dilation_h + 1, in.h);
    const int64_t w1 = min(w0 + (g.kernel_w - 1) * g.dilation_w + 1, in.w);
    while (h0 < 0) h0 += g.dilation_h;
    while (w0 < 0) w0 += g.dilation_w;
    const int64_t base = in.outer.at(plane);
    int64_t best = h0 * in.w + w0;
    T best_v = -infinity<T>();
    for (int64_t h = h0; h < h1; h += g.dilation_h)
      for (int64_t w = w0; w < w1; w += g.dilation_w) {
        const T v = load<T>(in.outer.data, in.outer.dtype, base + h * in.sh + w * in.sw);
        if (v > best_v || v != v) {
          best_v = v;
          best = h * in.w + w;
        }
      }
    store<T>(out.outer.data, out.outer.dtype, out.outer.at(plane) + oh * out.sh + ow * out.sw, best_v);
    static_cast<int64_t*>(idx.outer.data)[idx.outer.at(plane) + oh * idx.sh + ow * idx.sw] = best;
  }
}

// One thread per input element: the sum of the gradients of the windows that chose it, in
// the order max_pool_backward_nchw visits them.
template <typename T>
__global__ void max_pool_backward_kernel(Planes gin, Planes gout, Planes idx, Pool2dGeometry g, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = i % gin.w, h = (i / gin.w) % gin.h, plane = i / (gin.w * gin.h);
    const int64_t span_h = (g.kernel_h - 1) * g.dilation_h + 1, span_w = (g.kernel_w - 1) * g.dilation_w + 1;
    const int64_t ph0 = (h + g.pad_h < span_h) ? 0 : (h + g.pad_h - span_h) / g.stride_h + 1;
    const int64_t ph1 = min((h + g.pad_h) / g.stride_h + 1, gout.h);
    const int64_t pw0 = (w + g.pad_w < span_w) ? 0 : (w + g.pad_w - span_w) / g.stride_w + 1;
    const int64_t pw1 = min((w + g.pad_w) / g.stride_w + 1, gout.w);
    const int64_t me = h * gin.w + w;
    const int64_t gb = gout.outer.at(plane), ib = idx.outer.at(plane);
    T acc = 0;
    for (int64_t oh = ph0; oh < ph1; ++oh)
      for (int64_t ow = pw0; ow < pw1; ++ow)
        if (static_cast<const int64_t*>(idx.outer.data)[ib + oh * idx.sh + ow * idx.sw] == me)
          acc += load<T>(gout.outer.data, gout.outer.dtype, gb + oh * gout.sh + ow * gout.sw);
    store<T>(gin.outer.data, gin.outer.dtype, gin.outer.at(plane) + h * gin.sh + w * gin.sw, acc);
  }
}

void check_args(const std::string& op, const Planes& a, const Planes& b, const Planes& c, const Pool2dGeometry& g) {
  if (plane_count(a) != plane_count(b) || plane_count(a) != plane_count(c) || b.h != c.h || b.w != c.w)
    throw CudaError("CUDA kernel " + op + ": the operands' leading dims or output sizes do not match");
  if (g.kernel_h < 1 || g.kernel_w < 1 || g.stride_h < 1 || g.stride_w < 1 || g.dilation_h < 1 ||
      g.dilation_w < 1 || g.pad_h < 0 || g.pad_w < 0)
    throw CudaError("CUDA kernel " + op + ": kernel, stride and dilation must be positive, padding non-negative");
}

}  // namespace

void max_pool2d(const DeviceTensorRef& out, const DeviceTensorRef& indices, const DeviceTensorRef& in,
                const Pool2dGeometry& g) {
  const std::string op = "max_pool2d";
  if (in.dtype == DType::Int64 || in.dtype == DType::Bool) unsupported_dtype(op, in.dtype);
  if (indices.dtype != DType::Int64) throw CudaError("CUDA kernel max_pool2d: indices must be int64");
  const Planes x = planes_of(in, op), o = planes_of(out, op), ix = planes_of(indices, op);
  check_args(op, x, o, ix, g);
  const int64_t n = plane_count(o) * o.h * o.w;
  if (n == 0) return;
  if (in.dtype == DType::Float64)
    max_pool_kernel<double><<<grid_for(n), kBlock>>>(o, ix, x, g, n);
  else
    max_pool_kernel<float><<<grid_for(n), kBlock>>>(o, ix, x, g, n);
  check_launch(op);
}

void max_pool2d_backward(const DeviceTensorRef& grad_in, const DeviceTensorRef& grad_out,
                         const DeviceTensorRef& indices, const Pool2dGeometry& g) {
  const std::string op = "max_pool2d_backward";
  if (grad_in.dtype == DType::Int64 || grad_in.dtype == DType::Bool) unsupported_dtype(op, grad_in.dtype);
  if (indices.dtype != DType::Int64) throw CudaError("CUDA kernel max_pool2d_backward: indices must be int64");
  const Planes gi = planes_of(grad_in, op), go = planes_of(grad_out, op), ix = planes_of(indices, op);
  check_args(op, gi, go, ix, g);
  const int64_t n = plane_count(gi) * gi.h * gi.w;
  if (n == 0) return;
  if (grad_in.dtype == DType::Float64)
    max_pool_backward_kernel<double><<<grid_for(n), kBlock>>>(gi, go, ix, g, n);
  else
    max_pool_backward_kernel<float><<<grid_for(n), kBlock>>>(gi, go, ix, g, n);
  check_launch(op);
}

}  // namespace agtrace::cuda
