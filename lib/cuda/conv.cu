#include <string>

#include "cuda/allocator.hpp"
#include "cuda/common.cuh"
#include "cuda/conv.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/matmul.cuh"
#include "cuda/reduce.cuh"

namespace agtrace::cuda {

namespace {

// A contiguous temporary of `shape`, freed at the end of the call.
struct Temp {
  void* p = nullptr;
  DeviceTensorRef ref;
  Temp(const Shape& shape, DType dtype, const char* op) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const int64_t es = dtype == DType::Float64 ? 8 : dtype == DType::Float32 ? 4 : 2;
    p = device_alloc(n * es, op);
    Shape strides(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    ref = DeviceTensorRef{p, dtype, shape, strides, 0};
  }
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() {
    try {
      device_free(p);
    } catch (...) {
    }
  }
};

// The shapes of one convolution.
struct Dims {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, groups;
  __host__ __device__ int64_t cin_g() const { return cin / groups; }
  __host__ __device__ int64_t cout_g() const { return cout / groups; }
  __host__ __device__ int64_t k() const { return cin * kh * kw; }      // rows of the columns (all groups)
  __host__ __device__ int64_t k_g() const { return cin_g() * kh * kw; }  // rows per group
  __host__ __device__ int64_t l() const { return oh * ow; }
};

Dims dims_of(const DeviceTensorRef& in, const DeviceTensorRef& weight, const Shape& out, const Conv2dGeometry& g,
             const std::string& op) {
  if (in.sizes.size() != 4 || weight.sizes.size() != 4 || out.size() != 4)
    throw CudaError("CUDA kernel " + op + ": input, weight and output must have 4 dims");
  if (in.dtype != weight.dtype) throw CudaError("CUDA kernel " + op + ": input and weight must have one dtype");
  if (in.dtype != DType::Float32 && in.dtype != DType::Float64 && in.dtype != DType::Float16 &&
      in.dtype != DType::BFloat16)
    unsupported_dtype(op, in.dtype);
  if (g.groups < 1 || g.stride_h < 1 || g.stride_w < 1 || g.dilation_h < 1 || g.dilation_w < 1 || g.pad_h < 0 ||
      g.pad_w < 0)
    throw CudaError("CUDA kernel " + op + ": stride, dilation and groups must be positive, padding non-negative");
  Dims d{in.sizes[0], in.sizes[1], in.sizes[2], in.sizes[3], weight.sizes[0], weight.sizes[2], weight.sizes[3],
         out[2], out[3], g.groups};
  if (d.cin % d.groups != 0 || d.cout % d.groups != 0 || weight.sizes[1] != d.cin_g() || out[0] != d.n ||
      out[1] != d.cout)
    throw CudaError("CUDA kernel " + op + ": input, weight, groups and output shapes do not match");
  return d;
}

struct Geo {
  int64_t sh, sw, ph, pw, dh, dw;
};

// columns[n][c * kh * kw + i * kw + j][oh * ow + x] = in[n][c][oh * sh - ph + i * dh][x * sw - pw + j * dw]
// (0 in the padding). One thread per column element.
template <typename T>
__global__ void im2col_kernel(Strided in, void* cols, Dims d, Geo g, int64_t total) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t l = i % d.l(), row = (i / d.l()) % d.k(), n = i / (d.l() * d.k());
    const int64_t c = row / (d.kh * d.kw), ki = (row / d.kw) % d.kh, kj = row % d.kw;
    const int64_t y = (l / d.ow) * g.sh - g.ph + ki * g.dh, x = (l % d.ow) * g.sw - g.pw + kj * g.dw;
    T v = 0;
    if (y >= 0 && y < d.h && x >= 0 && x < d.w)
      v = load<T>(in.data, in.dtype, in.offset + n * in.strides[0] + c * in.strides[1] + y * in.strides[2] +
                                         x * in.strides[3]);
    store<T>(cols, in.dtype, i, v);
  }
}

// The transpose of im2col: each input element sums the column entries that read it.
template <typename T>
__global__ void col2im_kernel(const void* cols, int cols_dtype, Strided out, Dims d, Geo g, int64_t total) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t x = i % d.w, y = (i / d.w) % d.h, c = (i / (d.w * d.h)) % d.cin, n = i / (d.w * d.h * d.cin);
    T acc = 0;
    for (int64_t ki = 0; ki < d.kh; ++ki) {
      const int64_t ty = y + g.ph - ki * g.dh;
      if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= d.oh) continue;
      for (int64_t kj = 0; kj < d.kw; ++kj) {
        const int64_t tx = x + g.pw - kj * g.dw;
        if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= d.ow) continue;
        const int64_t row = (c * d.kh + ki) * d.kw + kj, l = (ty / g.sh) * d.ow + tx / g.sw;
        acc += load<T>(cols, cols_dtype, (n * d.k() + row) * d.l() + l);
      }
    }
    store<T>(out.data, out.dtype, out.at(i), acc);
  }
}

void im2col(const DeviceTensorRef& in, const Temp& cols, const Dims& d, const Geo& g) {
  const int64_t total = d.n * d.k() * d.l();
  if (total == 0) return;
  const Strided s = make_strided(in, "conv2d");
  if (in.dtype == DType::Float64)
    im2col_kernel<double><<<grid_for(total), kBlock>>>(s, cols.p, d, g, total);
  else
    im2col_kernel<float><<<grid_for(total), kBlock>>>(s, cols.p, d, g, total);
  check_launch("conv2d (im2col)");
}

Geo geo_of(const Conv2dGeometry& g) { return {g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w}; }

// A view into a contiguous temporary: `sizes` with `strides` at `offset`.
DeviceTensorRef view(const Temp& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  return DeviceTensorRef{t.p, t.ref.dtype, sizes, strides, offset};
}

}  // namespace

void conv2d(const DeviceTensorRef& out, const DeviceTensorRef& in, const DeviceTensorRef& weight,
            const DeviceTensorRef* bias, const Conv2dGeometry& geometry) {
  const std::string op = "conv2d";
  const Dims d = dims_of(in, weight, out.sizes, geometry, op);
  if (bias != nullptr && (bias->sizes.size() != 1 || bias->sizes[0] != d.cout))
    throw CudaError("CUDA kernel conv2d: bias must have one element per output channel");
  if (d.n * d.cout * d.l() == 0) return;
  const DType dt = in.dtype;
  Temp cols({d.n, d.k(), d.l()}, dt, "conv2d"), w({d.cout, d.k_g()}, dt, "conv2d"), res({d.n, d.cout, d.l()}, dt, "conv2d");
  im2col(in, cols, d, geo_of(geometry));
  copy(view(w, weight.sizes, {d.k_g(), d.kh * d.kw, d.kw, 1}, 0), weight);
  for (int64_t grp = 0; grp < d.groups; ++grp) {
    // res[:, group rows, :] = W_g [cout_g, k_g] @ cols[:, group rows, :] for every n.
    matmul(view(res, {d.n, d.cout_g(), d.l()}, {d.cout * d.l(), d.l(), 1}, grp * d.cout_g() * d.l()),
           view(w, {d.n, d.cout_g(), d.k_g()}, {0, d.k_g(), 1}, grp * d.cout_g() * d.k_g()),
           view(cols, {d.n, d.k_g(), d.l()}, {d.k() * d.l(), d.l(), 1}, grp * d.k_g() * d.l()));
  }
  if (bias != nullptr) {
    DeviceTensorRef b = *bias;  // [cout] as [cout, 1], broadcast over [n, cout, l]
    b.sizes = {d.cout, 1};
    b.strides = {bias->strides[0], 0};
    binary(pw::BinaryOp::Add, res.ref, res.ref, b, 1.0);
  }
  copy(out, view(res, out.sizes, {d.cout * d.l(), d.l(), d.ow, 1}, 0));
}

void conv2d_backward(const DeviceTensorRef* grad_in, const DeviceTensorRef* grad_weight,
                     const DeviceTensorRef* grad_bias, const DeviceTensorRef& grad_out, const DeviceTensorRef& in,
                     const DeviceTensorRef& weight, const Conv2dGeometry& geometry) {
  const std::string op = "conv2d_backward";
  const Dims d = dims_of(in, weight, grad_out.sizes, geometry, op);
  const DType dt = in.dtype;
  if (grad_bias != nullptr) reduce(ReduceOp::Sum, *grad_bias, grad_out, {0, 2, 3}, false);
  if (grad_in == nullptr && grad_weight == nullptr) return;
  Temp go({d.n, d.cout, d.l()}, dt, "conv2d_backward"), w({d.cout, d.k_g()}, dt, "conv2d_backward");
  Temp cols({d.n, d.k(), d.l()}, dt, "conv2d_backward");
  copy(view(go, grad_out.sizes, {d.cout * d.l(), d.l(), d.ow, 1}, 0), grad_out);
  copy(view(w, weight.sizes, {d.k_g(), d.kh * d.kw, d.kw, 1}, 0), weight);
  if (grad_in != nullptr) {
    // cols[:, group rows, :] = W_g^T [k_g, cout_g] @ grad_out[:, group channels, :], then folded.
    for (int64_t grp = 0; grp < d.groups; ++grp)
      matmul(view(cols, {d.n, d.k_g(), d.l()}, {d.k() * d.l(), d.l(), 1}, grp * d.k_g() * d.l()),
             view(w, {d.n, d.k_g(), d.cout_g()}, {0, 1, d.k_g()}, grp * d.cout_g() * d.k_g()),
             view(go, {d.n, d.cout_g(), d.l()}, {d.cout * d.l(), d.l(), 1}, grp * d.cout_g() * d.l()));
    if (grad_in->sizes != in.sizes) throw CudaError("CUDA kernel conv2d_backward: grad_in must have the input's shape");
    const int64_t total = d.n * d.cin * d.h * d.w;
    if (total > 0) {
      const Strided gi = make_strided(*grad_in, op);
      if (dt == DType::Float64)
        col2im_kernel<double><<<grid_for(total), kBlock>>>(cols.p, dtype_code(dt), gi, d, geo_of(geometry), total);
      else
        col2im_kernel<float><<<grid_for(total), kBlock>>>(cols.p, dtype_code(dt), gi, d, geo_of(geometry), total);
      check_launch("conv2d_backward (col2im)");
    }
  }
  if (grad_weight != nullptr) {
    if (grad_weight->sizes != weight.sizes)
      throw CudaError("CUDA kernel conv2d_backward: grad_weight must have the weight's shape");
    im2col(in, cols, d, geo_of(geometry));
    // Per sample: gw_n[cout_g, k_g] = grad_out_n[cout_g, l] @ cols_n^T[l, k_g]; then summed over n.
    Temp per_n({d.n, d.cout, d.k_g()}, dt, "conv2d_backward"), gw({d.cout, d.k_g()}, dt, "conv2d_backward");
    for (int64_t grp = 0; grp < d.groups; ++grp)
      matmul(view(per_n, {d.n, d.cout_g(), d.k_g()}, {d.cout * d.k_g(), d.k_g(), 1}, grp * d.cout_g() * d.k_g()),
             view(go, {d.n, d.cout_g(), d.l()}, {d.cout * d.l(), d.l(), 1}, grp * d.cout_g() * d.l()),
             view(cols, {d.n, d.l(), d.k_g()}, {d.k() * d.l(), 1, d.l()}, grp * d.k_g() * d.l()));
    reduce(ReduceOp::Sum, gw.ref, per_n.ref, {0}, false);
    copy(*grad_weight, view(gw, weight.sizes, {d.k_g(), d.kh * d.kw, d.kw, 1}, 0));
  }
}

}  // namespace agtrace::cuda
