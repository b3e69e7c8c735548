// Elementwise kernels, as templates so the scalar formula of each op is inlined into its
// loop (a std::function call per element cost about a quarter of the elementwise time of
// bench/scenarios/mlp_step.json; issue #6). Included by tensor/kernels.hpp.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace agtrace::kernels {

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op);

namespace detail {
// Strides of `t` seen through a broadcast to `out` (stride 0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& out);
// `inner` equals the last dims of `shape` (leading size-1 dims of `inner` dropped).
bool is_trailing_shape(const Shape& inner, const Shape& shape);
bool any_meta(std::initializer_list<const Tensor*> ts);
// Throws shape_mismatch for an in-place op whose result would not have `a`'s shape.
[[noreturn]] void inplace_shape_mismatch(const Shape& a, const Shape& b, const Shape& shape, const std::string& op);

// dst[i] = value(i) rounded to dtype, for i < n; the dtype switch is outside the loop.
template <typename F>
void store_rounded(double* dst, int64_t n, DType dtype, F&& value) {
  switch (dtype) {
    case DType::Float32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(static_cast<float>(value(i)));
      return;
    case DType::Float64:
      for (int64_t i = 0; i < n; ++i) dst[i] = value(i);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = round_to_dtype(value(i), dtype);
  }
}

}  // namespace detail

template <typename F>
Tensor unary(const Tensor& a, DType out, F&& f) {
  Tensor r = empty_tensor(a->sizes, out, a->is_meta());
  if (r->is_meta()) return r;
  const double* src = a->storage->data.data();
  double* dst = r->storage->data.data();
  if (a->is_contiguous()) {
    const double* p = src + a->offset;
    detail::store_rounded(dst, r->numel(), out, [&](int64_t i) { return f(p[i]); });
    return r;
  }
  for_each_offset(a->sizes, a->strides, a->offset,
                  [&](int64_t i, int64_t off) { dst[i] = round_to_dtype(f(src[off]), out); });
  return r;
}

template <typename F>
Tensor binary(const Tensor& a, const Tensor& b, DType out, F&& f, const std::string& op) {
  const bool same = a->sizes == b->sizes;
  Shape shape = same ? a->sizes : broadcast_shapes(a->sizes, b->sizes, op);
  Tensor r = empty_tensor(shape, out, detail::any_meta({&a, &b}));
  if (r->is_meta()) return r;
  const double* pa = a->storage->data.data();
  const double* pb = b->storage->data.data();
  double* dst = r->storage->data.data();
  const int64_t n = r->numel();
  // Fast paths (most elementwise work in a model): same-shape contiguous operands, a
  // one-element operand, and a contiguous operand broadcast along leading dims (a bias).
  const bool ca = a->is_contiguous() && a->sizes == shape, cb = b->is_contiguous() && b->sizes == shape;
  if (ca && cb) {
    const double *x = pa + a->offset, *y = pb + b->offset;
    detail::store_rounded(dst, n, out, [&](int64_t i) { return f(x[i], y[i]); });
    return r;
  }
  if (ca && b->numel() == 1) {
    const double *x = pa + a->offset, y = pb[b->offset];
    detail::store_rounded(dst, n, out, [&](int64_t i) { return f(x[i], y); });
    return r;
  }
  if (cb && a->numel() == 1) {
    const double x = pa[a->offset], *y = pb + b->offset;
    detail::store_rounded(dst, n, out, [&](int64_t i) { return f(x, y[i]); });
    return r;
  }
  if (ca && b->is_contiguous() && detail::is_trailing_shape(b->sizes, shape) && b->numel() > 0) {
    const double *x = pa + a->offset, *y = pb + b->offset;
    const int64_t inner = b->numel();
    for (int64_t o = 0; o < n; o += inner)
      detail::store_rounded(dst + o, inner, out, [&](int64_t j) { return f(x[o + j], y[j]); });
    return r;
  }
  if (cb && a->is_contiguous() && detail::is_trailing_shape(a->sizes, shape) && a->numel() > 0) {
    const double *x = pa + a->offset, *y = pb + b->offset;
    const int64_t inner = a->numel();
    for (int64_t o = 0; o < n; o += inner)
      detail::store_rounded(dst + o, inner, out, [&](int64_t j) { return f(x[j], y[o + j]); });
    return r;
  }
  Shape sa = detail::broadcast_strides(a, shape), sb = detail::broadcast_strides(b, shape);
  std::vector<double> av(static_cast<size_t>(n)), bv(av.size());
  for_each_offset(shape, sa, a->offset, [&](int64_t i, int64_t off) { av[i] = pa[off]; });
  for_each_offset(shape, sb, b->offset, [&](int64_t i, int64_t off) { bv[i] = pb[off]; });
  for (size_t i = 0; i < av.size(); ++i) dst[i] = round_to_dtype(f(av[i], bv[i]), out);
  return r;
}

template <typename F>
Tensor ternary(const Tensor& a, const Tensor& b, const Tensor& c, DType out, F&& f, const std::string& op) {
  Shape shape = broadcast_shapes(broadcast_shapes(a->sizes, b->sizes, op), c->sizes, op);
  Tensor r = empty_tensor(shape, out, detail::any_meta({&a, &b, &c}));
  if (r->is_meta()) return r;
  std::vector<double> v[3];
  const Tensor* ts[3] = {&a, &b, &c};
  for (int k = 0; k < 3; ++k) {
    v[k].resize(static_cast<size_t>(r->numel()));
    const double* p = (*ts[k])->storage->data.data();
    for_each_offset(shape, detail::broadcast_strides(*ts[k], shape), (*ts[k])->offset,
                    [&](int64_t i, int64_t off) { v[k][i] = p[off]; });
  }
  double* dst = r->storage->data.data();
  for (size_t i = 0; i < v[0].size(); ++i) dst[i] = round_to_dtype(f(v[0][i], v[1][i], v[2][i]), out);
  return r;
}

template <typename F>
void binary_inplace(const Tensor& a, const Tensor& b, F&& f, const std::string& op) {
  Shape shape = broadcast_shapes(a->sizes, b->sizes, op);
  if (shape != a->sizes) {
    detail::inplace_shape_mismatch(a->sizes, b->sizes, shape, op);
  }
  if (a->is_meta() || b->is_meta()) return;
  std::vector<double> bv(static_cast<size_t>(a->numel()));
  const double* pb = b->storage->data.data();
  for_each_offset(shape, detail::broadcast_strides(b, shape), b->offset,
                  [&](int64_t i, int64_t off) { bv[i] = pb[off]; });
  std::vector<double> av = to_values(a);
  for (size_t i = 0; i < av.size(); ++i) av[i] = f(av[i], bv[i]);
  write_values(a, av);
}

template <typename F>
void unary_inplace(const Tensor& a, F&& f) {
  if (a->is_meta()) return;
  std::vector<double> av = to_values(a);
  for (double& v : av) v = f(v);
  write_values(a, av);
}


}  // namespace agtrace::kernels
