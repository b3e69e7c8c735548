// Elementwise kernels, as templates so the scalar formula of each op is inlined into its
// loop (a std::function call per element cost about a quarter of the elementwise time of
// bench/scenarios/mlp_step.json; issue #6). Included by tensor/kernels.hpp.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "tensor/device_backend.hpp"
#include "tensor/iterator_layout.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::kernels {

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op);
bool fast_paths();  // tensor/kernels.hpp

namespace detail {
// Strides of `t` seen through a broadcast to `out` (stride 0 on broadcast dims).
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& out);
inline Shape broadcast_strides(const Tensor& t, const Shape& out) { return broadcast_strides(t->sizes, t->strides, out); }
// `inner` equals the last dims of `shape` (leading size-1 dims of `inner` dropped).
bool is_trailing_shape(const Shape& inner, const Shape& shape);
bool any_meta(std::initializer_list<const Tensor*> ts);
// Throws shape_mismatch for an in-place op whose result would not have `a`'s shape.
[[noreturn]] void inplace_shape_mismatch(const Shape& a, const Shape& b, const Shape& shape, const std::string& op);

// An operand's elements as an array of T with the tensor's layout. Each kernel below has
// two instantiations per call site: T = float when the result and every operand are
// float32 (read float, compute in double, store float: the storages themselves), and
// T = double for every other combination (a float32 operand is copied to double first).
template <typename T>
struct Operand {
  const T* data = nullptr;
  int64_t offset = 0;
  const Shape* sizes = nullptr;
  // Pointed to, not copied: an operand per elementwise kernel call copied a vector (an
  // allocation) that the contiguous loops never read (issue #6).
  const Shape* strides = nullptr;
  bool contiguous = false;
  int64_t numel = 0;
};
inline Operand<float> float_operand(const Tensor& t) {
  return {t->storage->f32(), t->offset, &t->sizes.vec(), &t->strides.vec(), t->is_contiguous(), t->numel()};
}
// In place when the storage holds double; else the tensor's values copied into `copy`
// (contiguous: their strides in `copy_strides`).
Operand<double> double_operand(const Tensor& t, std::vector<double>& copy, Shape& copy_strides);
inline bool all_float32(DType out, std::initializer_list<const Tensor*> ts) {
  if (out != DType::Float32) return false;
  for (auto* t : ts)
    if ((*t)->dtype() != DType::Float32) return false;
  return true;
}

// Where the double path writes a fresh contiguous result: the storage itself when it
// holds double, else a buffer copied into the float storage by finish() (the values are
// already rounded to float32 there, so the copy is exact).
class DoubleResult {
 public:
  explicit DoubleResult(Storage& s);
  double* data() { return dst_; }
  void finish();

 private:
  Storage& s_;
  std::vector<double> buf_;
  double* dst_ = nullptr;
};

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
// A float destination holds float32 only.
template <typename F>
void store_rounded(float* dst, int64_t n, DType, F&& value) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(value(i));
}

template <typename T, typename F>
void unary_loop(const Operand<T>& a, T* dst, DType out, F& f) {
  if (a.contiguous) {
    const T* p = a.data + a.offset;
    store_rounded(dst, a.numel, out, [&](int64_t i) { return f(static_cast<double>(p[i])); });
    return;
  }
  const T* src = a.data;
  for_each_offset(*a.sizes, *a.strides, a.offset, [&](int64_t i, int64_t off) {
    store_rounded(dst + i, 1, out, [&](int64_t) { return f(static_cast<double>(src[off])); });
  });
}

template <typename T, typename F>
void binary_loop(const Operand<T>& a, const Operand<T>& b, const Shape& shape, int64_t n, T* dst, DType out, F& f) {
  const T* pa = a.data;
  const T* pb = b.data;
  // Fast paths (most elementwise work in a model): same-shape contiguous operands, a
  // one-element operand, and a contiguous operand broadcast along leading dims (a bias).
  const bool ca = a.contiguous && *a.sizes == shape, cb = b.contiguous && *b.sizes == shape;
  if (ca && cb) {
    const T *x = pa + a.offset, *y = pb + b.offset;
    store_rounded(dst, n, out, [&](int64_t i) { return f(static_cast<double>(x[i]), static_cast<double>(y[i])); });
    return;
  }
  if (ca && b.numel == 1) {
    const T* x = pa + a.offset;
    const double y = static_cast<double>(pb[b.offset]);
    store_rounded(dst, n, out, [&](int64_t i) { return f(static_cast<double>(x[i]), y); });
    return;
  }
  if (cb && a.numel == 1) {
    const double x = static_cast<double>(pa[a.offset]);
    const T* y = pb + b.offset;
    store_rounded(dst, n, out, [&](int64_t i) { return f(x, static_cast<double>(y[i])); });
    return;
  }
  if (ca && b.contiguous && is_trailing_shape(*b.sizes, shape) && b.numel > 0) {
    const T *x = pa + a.offset, *y = pb + b.offset;
    const int64_t inner = b.numel;
    for (int64_t o = 0; o < n; o += inner)
      store_rounded(dst + o, inner, out,
                    [&](int64_t j) { return f(static_cast<double>(x[o + j]), static_cast<double>(y[j])); });
    return;
  }
  if (cb && a.contiguous && is_trailing_shape(*a.sizes, shape) && a.numel > 0) {
    const T *x = pa + a.offset, *y = pb + b.offset;
    const int64_t inner = a.numel;
    for (int64_t o = 0; o < n; o += inner)
      store_rounded(dst + o, inner, out,
                    [&](int64_t j) { return f(static_cast<double>(x[j]), static_cast<double>(y[o + j])); });
    return;
  }
  Shape sa = broadcast_strides(*a.sizes, *a.strides, shape), sb = broadcast_strides(*b.sizes, *b.strides, shape);
  std::vector<double> av(static_cast<size_t>(n)), bv(av.size());
  for_each_offset(shape, sa, a.offset, [&](int64_t i, int64_t off) { av[i] = static_cast<double>(pa[off]); });
  for_each_offset(shape, sb, b.offset, [&](int64_t i, int64_t off) { bv[i] = static_cast<double>(pb[off]); });
  store_rounded(dst, n, out, [&](int64_t i) { return f(av[static_cast<size_t>(i)], bv[static_cast<size_t>(i)]); });
}

// `t`'s values broadcast to `shape`, row-major, as double.
std::vector<double> broadcast_values(const Tensor& t, const Shape& shape);

}  // namespace detail

namespace detail {
// The result of a host kernel is a CPU tensor, whatever device the scope in force names: an
// op on CPU operands inside a cuda backward (log of the wrapped base of 2.0 ** x) gives a CPU
// tensor in PyTorch too. A cuda operand still fails when the loop reads it (no host access).
inline Tensor host_result(const InternedShape& sizes, DType out, bool meta) {
  if (allocating_on_cpu()) return uninitialized_tensor(sizes, out, meta);
  DeviceScope on_cpu("cpu");
  return uninitialized_tensor(sizes, out, meta);
}
}  // namespace detail

template <typename F>
Tensor unary(const Tensor& a, DType out, F&& f) {
  Tensor r = detail::host_result(a->sizes, out, a->is_meta());
  if (!r->is_meta()) {
    if (detail::all_float32(out, {&a})) {
      detail::unary_loop(detail::float_operand(a), r->storage->f32(), out, f);
    } else {
      std::vector<double> copy;
      Shape copy_strides;
      detail::DoubleResult res(*r->storage);
      detail::unary_loop(detail::double_operand(a, copy, copy_strides), res.data(), out, f);
      res.finish();
    }
  }
  adopt_iterator_layout(r, {&a});
  return r;
}

// binary(a, b, Float32, f) with `b` given by its storage and layout instead of a tensor
// object: a saved output read in place by a backward formula (Node::saved_output). Applies
// when a and b are float32 host operands of one shape (binary_in_place_f32_fits); the loop
// is binary's own, so the bits are the same.
inline bool binary_in_place_f32_fits(const Tensor& a, const Storage& b, const Shape& b_sizes) {
  return a && a->dtype() == DType::Float32 && !a->is_meta() && !a->storage->on_device() && b.holds_float() &&
         !b.meta && !b.on_device() && a->sizes == b_sizes;
}
template <typename F>
Tensor binary_in_place_f32(const Tensor& a, const Storage& b, const Shape& b_sizes, const Shape& b_strides,
                           int64_t b_offset, F&& f) {
  Tensor r = detail::host_result(a->sizes, DType::Float32, false);
  const detail::Operand<float> bo{b.f32(), b_offset, &b_sizes, &b_strides, is_contiguous_layout(b_sizes, b_strides),
                                  shape_numel(b_sizes)};
  detail::binary_loop(detail::float_operand(a), bo, a->sizes, r->numel(), r->storage->f32(), DType::Float32, f);
  if (!a->is_contiguous() || !bo.contiguous)
    adopt_iterator_layout(r, {{&a->sizes.vec(), &a->strides.vec(), 4}, {&b_sizes, &b_strides, 4}});
  return r;
}

namespace detail {
template <typename F>
void binary_values(const Tensor& a, const Tensor& b, const Shape& shape, const Tensor& r, DType out, F& f);
}  // namespace detail

template <typename F>
Tensor binary(const Tensor& a, const Tensor& b, DType out, F&& f, const std::string& op) {
  // The result's shape is an operand's when the shapes are equal or the other operand is 0-d
  // (a Python number, grad * saved scalar): read in place rather than built per call (issue
  // #6: a vector made and freed per op of a chain); otherwise broadcast.
  Shape broadcast;
  const Shape& shape = a->sizes == b->sizes || b->sizes.empty() ? a->sizes.vec()
                       : a->sizes.empty()                       ? b->sizes.vec()
                                                                : (broadcast = broadcast_shapes(a->sizes, b->sizes, op));
  Tensor r = detail::host_result(shape, out, detail::any_meta({&a, &b}));
  if (!r->is_meta()) detail::binary_values(a, b, shape, r, out, f);
  adopt_iterator_layout(r, {&a, &b});
  return r;
}

namespace detail {
// binary's row-major values into r.
template <typename F>
void binary_values(const Tensor& a, const Tensor& b, const Shape& shape, const Tensor& r, DType out, F& f) {
  const int64_t n = r->numel();
  // A contiguous float32 tensor with a one-element operand of another dtype (a Python
  // number: grad * 0.125 in a backward) into float32: read in place, the number as the
  // double the general path below reads, instead of copying the tensor to double first.
  if (out == DType::Float32 && fast_paths()) {
    const bool a_scalar = a->numel() == 1 && b->dtype() == DType::Float32 && b->sizes == shape && b->is_contiguous();
    const bool b_scalar = b->numel() == 1 && a->dtype() == DType::Float32 && a->sizes == shape && a->is_contiguous();
    if (a_scalar != b_scalar && (a_scalar ? a : b)->dtype() != DType::Float32) {
      const Tensor& t = a_scalar ? b : a;
      const float* x = t->storage->f32() + t->offset;
      const double y = (a_scalar ? a : b)->storage->get((a_scalar ? a : b)->offset);
      if (a_scalar)
        store_rounded(r->storage->f32(), n, out, [&](int64_t i) { return f(y, static_cast<double>(x[i])); });
      else
        store_rounded(r->storage->f32(), n, out, [&](int64_t i) { return f(static_cast<double>(x[i]), y); });
      return;
    }
  }
  if (all_float32(out, {&a, &b})) {
    binary_loop(float_operand(a), float_operand(b), shape, n, r->storage->f32(), out, f);
    return;
  }
  std::vector<double> ca, cb;
  Shape sa, sb;
  DoubleResult res(*r->storage);
  binary_loop(double_operand(a, ca, sa), double_operand(b, cb, sb), shape, n, res.data(), out, f);
  res.finish();
}
}  // namespace detail

template <typename F>
Tensor ternary(const Tensor& a, const Tensor& b, const Tensor& c, DType out, F&& f, const std::string& op) {
  Shape shape = broadcast_shapes(broadcast_shapes(a->sizes, b->sizes, op), c->sizes, op);
  Tensor r = detail::host_result(shape, out, detail::any_meta({&a, &b, &c}));
  if (!r->is_meta()) {
    std::vector<double> v[3] = {detail::broadcast_values(a, shape), detail::broadcast_values(b, shape),
                                detail::broadcast_values(c, shape)};
    detail::DoubleResult res(*r->storage);
    detail::store_rounded(res.data(), r->numel(), out,
                          [&](int64_t i) { return f(v[0][static_cast<size_t>(i)], v[1][static_cast<size_t>(i)],
                                                   v[2][static_cast<size_t>(i)]); });
    res.finish();
  }
  adopt_iterator_layout(r, {&a, &b, &c});
  return r;
}

template <typename F>
void binary_inplace(const Tensor& a, const Tensor& b, F&& f, const std::string& op) {
  Shape shape = broadcast_shapes(a->sizes, b->sizes, op);
  if (shape != a->sizes) {
    detail::inplace_shape_mismatch(a->sizes, b->sizes, shape, op);
  }
  if (a->is_meta() || b->is_meta()) return;
  std::vector<double> bv = detail::broadcast_values(b, shape);
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
