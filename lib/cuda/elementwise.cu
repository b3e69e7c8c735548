#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/elementwise.cuh"

namespace agtrace::cuda {

namespace {

__device__ inline int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t thread_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Same dtype: the element's bytes, as an unsigned integer of its size.
template <typename U>
__global__ void copy_bytes_kernel(Strided dst, Strided src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    static_cast<U*>(dst.data)[dst.at(i)] = static_cast<const U*>(src.data)[src.at(i)];
}

__global__ void cast_kernel(Strided dst, Strided src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    store<double>(dst.data, dst.dtype, dst.at(i), load<double>(src.data, src.dtype, src.at(i)));
}

__global__ void fill_kernel(Strided dst, int64_t n, double v) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) store<double>(dst.data, dst.dtype, dst.at(i), v);
}

template <typename T>
__global__ void unary_kernel(int op, Strided out, Strided in, int64_t n, T s0, T s1) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const T x = load<T>(in.data, in.dtype, in.at(i));
    store<T>(out.data, out.dtype, out.at(i), pw::unary_formula<T>(static_cast<pw::UnaryOp>(op), x, s0, s1));
  }
}

template <typename T>
__global__ void binary_kernel(int op, Strided out, Strided a, Strided b, int64_t n, T s0) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const T x = load<T>(a.data, a.dtype, a.at(i));
    const T y = load<T>(b.data, b.dtype, b.at(i));
    store<T>(out.data, out.dtype, out.at(i), pw::binary_formula<T>(static_cast<pw::BinaryOp>(op), x, y, s0));
  }
}

template <typename T>
__global__ void ternary_kernel(int op, Strided out, Strided a, Strided b, Strided c, int64_t n, T s0, T s1) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const T x = load<T>(a.data, a.dtype, a.at(i));
    const T y = load<T>(b.data, b.dtype, b.at(i));
    const T z = load<T>(c.data, c.dtype, c.at(i));
    store<T>(out.data, out.dtype, out.at(i),
             pw::ternary_formula<T>(static_cast<pw::TernaryOp>(op), x, y, z, s0, s1));
  }
}

bool needs_double(std::initializer_list<const DeviceTensorRef*> ts) {
  for (const DeviceTensorRef* t : ts)
    if (t->dtype == DType::Float64 || t->dtype == DType::Int64) return true;
  return false;
}

}  // namespace

void copy(const DeviceTensorRef& dst, const DeviceTensorRef& src) {
  const std::string op = "copy";
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Strided d = make_strided(dst, op), s = make_broadcast(src, dst.sizes, op);
  if (dst.dtype == src.dtype) {
    switch (dtype_size(dst.dtype)) {
      case 8: copy_bytes_kernel<uint64_t><<<grid_for(n), kBlock>>>(d, s, n); break;
      case 4: copy_bytes_kernel<uint32_t><<<grid_for(n), kBlock>>>(d, s, n); break;
      case 2: copy_bytes_kernel<uint16_t><<<grid_for(n), kBlock>>>(d, s, n); break;
      default: copy_bytes_kernel<uint8_t><<<grid_for(n), kBlock>>>(d, s, n); break;
    }
  } else {
    cast_kernel<<<grid_for(n), kBlock>>>(d, s, n);
  }
  check_launch(op);
}

void fill(const DeviceTensorRef& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  fill_kernel<<<grid_for(n), kBlock>>>(make_strided(dst, "fill"), n, value);
  check_launch("fill");
}

void unary(pw::UnaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, double s0, double s1) {
  const std::string name = pw::op_name(op);
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strided o = make_strided(out, name), x = make_broadcast(in, out.sizes, name);
  if (needs_double({&out, &in}))
    unary_kernel<double><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, n, s0, s1);
  else
    unary_kernel<float><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, n, static_cast<float>(s0),
                                                 static_cast<float>(s1));
  check_launch(name);
}

void binary(pw::BinaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
            double s0) {
  const std::string name = pw::op_name(op);
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strided o = make_strided(out, name), x = make_broadcast(a, out.sizes, name),
                y = make_broadcast(b, out.sizes, name);
  if (needs_double({&out, &a, &b}))
    binary_kernel<double><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, y, n, s0);
  else
    binary_kernel<float><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, y, n, static_cast<float>(s0));
  check_launch(name);
}

void ternary(pw::TernaryOp op, const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b,
             const DeviceTensorRef& c, double s0, double s1) {
  const std::string name = pw::op_name(op);
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strided o = make_strided(out, name), x = make_broadcast(a, out.sizes, name),
                y = make_broadcast(b, out.sizes, name), z = make_broadcast(c, out.sizes, name);
  // where's condition is usually bool; it does not force double.
  const bool dbl = op == pw::TernaryOp::Where ? needs_double({&out, &b, &c}) : needs_double({&out, &a, &b, &c});
  if (dbl)
    ternary_kernel<double><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, y, z, n, s0, s1);
  else
    ternary_kernel<float><<<grid_for(n), kBlock>>>(static_cast<int>(op), o, x, y, z, n, static_cast<float>(s0),
                                                   static_cast<float>(s1));
  check_launch(name);
}

}  // namespace agtrace::cuda
