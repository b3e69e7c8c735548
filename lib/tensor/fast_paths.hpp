// Direct float32 loops for the common case of contiguous float32 tensors (issue #6).
//
// The general kernels (tensor/elementwise.hpp) read every element as double, compute in
// double and round once to float32. A loop here computes in float instead, and is used only
// for formulas whose float result is provably the same bits: selections and comparisons
// (relu, threshold) are exact in either precision, and for +, -, *, / and sqrt of floats
// the double result rounded to float equals the float result (53 >= 2 * 24 + 2, the
// double-rounding theorem). Formulas that need more (exp, erf, sums) keep their double
// arithmetic and only skip the gather to a std::vector<double> and the scatter back.
//
// Every helper returns null when its fast path does not apply (another dtype, a strided or
// meta operand, fast paths switched off by a test): the caller then takes the general path.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/kernels.hpp"

namespace agtrace::kernels {

// PyTorch's at::internal::GRAIN_SIZE: elementwise loops shorter than this stay on one thread.
constexpr int64_t kGrain = 32768;

// out = block(a) for a contiguous float32 `a`: block(x, o, n) writes o[0..n) from x[0..n)
// (called on chunks, possibly on several threads) and must give the general path's bits.
template <typename Block>
Tensor unary_exact_f32(const Tensor& a, Block&& block) {
  const float* x = contiguous_f32(a);
  if (!x) return nullptr;
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* o = r->storage->f32();
  parallel_for(r->numel(), kGrain, [&](int64_t b, int64_t e) { block(x + b, o + b, e - b); });
  return r;
}

// out = block(a, b) for contiguous float32 operands of the same shape: block(x, y, o, n).
template <typename Block>
Tensor binary_exact_f32(const Tensor& a, const Tensor& b, Block&& block) {
  if (a->sizes != b->sizes) return nullptr;
  const float* x = contiguous_f32(a);
  const float* y = contiguous_f32(b);
  if (!x || !y) return nullptr;
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* o = r->storage->f32();
  parallel_for(r->numel(), kGrain, [&](int64_t lo, int64_t hi) { block(x + lo, y + lo, o + lo, hi - lo); });
  return r;
}

// kernels::unary / kernels::binary with the element loop split between threads when the
// result and the operands are float32 and contiguous (same shape for binary): each element
// is f of its own inputs, computed in double and rounded once, exactly as the general loop
// does, so the split changes no bit. f must be a pure function of its arguments (it runs
// on several threads at once). Used for costly formulas (gelu's erf and exp).
template <typename F>
Tensor unary_split(const Tensor& a, DType out, F&& f) {
  const float* x = out == DType::Float32 ? contiguous_f32(a) : nullptr;
  if (!x) return unary(a, out, f);
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* o = r->storage->f32();
  parallel_for(r->numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) o[i] = static_cast<float>(f(static_cast<double>(x[i])));
  });
  return r;
}
// Operands: same shape, or `b` a contiguous block repeated along a's leading dims (a bias),
// or `b` one element of any dtype (a Python number): read as double, as the general
// double path reads it.
template <typename F>
Tensor binary_split(const Tensor& a, const Tensor& b, DType out, F&& f, const std::string& op) {
  const float* x = out == DType::Float32 ? contiguous_f32(a) : nullptr;
  const int64_t n = a->numel(), inner = b->numel();
  const bool same = a->sizes == b->sizes;
  const bool scalar = !same && inner == 1 && b->dim() <= a->dim() && !b->is_meta();
  const bool bias = !same && !scalar && inner > 0 && b->dim() <= a->dim() && detail::is_trailing_shape(b->sizes, a->sizes);
  const float* y = x && (same || bias) ? contiguous_f32(b) : nullptr;
  if (!x || !(y || (scalar && fast_paths())) || n == 0) return binary(a, b, out, f, op);
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* o = r->storage->f32();
  if (scalar) {
    const double yv = b->storage->get(b->offset);
    parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = static_cast<float>(f(static_cast<double>(x[i]), yv));
    });
  } else if (same) {
    parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = static_cast<float>(f(static_cast<double>(x[i]), static_cast<double>(y[i])));
    });
  } else {
    parallel_for(n / inner, std::max<int64_t>(1, kGrain / inner), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const float* xr = x + row * inner;
        float* orow = o + row * inner;
        for (int64_t j = 0; j < inner; ++j)
          orow[j] = static_cast<float>(f(static_cast<double>(xr[j]), static_cast<double>(y[j])));
      }
    });
  }
  return r;
}

// relu: x < 0 ? +0 : x (NaN and -0 pass through, as relu_f's double formula).
void relu_f32(const float* x, float* o, int64_t n);
// threshold_backward(grad, result, 0): grad * (result <= 0 ? 0 : 1), product in float
// (grad * 0 keeps grad's sign and turns inf and NaN into NaN, as the double product does).
void relu_backward_f32(const float* g, const float* r, float* o, int64_t n);

// o[i] = take_fill[i] ? fill : x[i] for i < n, take_fill's elements all ones or zero: a
// selection, exact in float (SSE2 blend; GCC keeps a branch per element here otherwise).
void select_fill_f32(const float* x, const uint32_t* take_fill, float fill, float* o, int64_t n);

// masked_fill of a contiguous float32 `a` with a contiguous bool mask of a's shape, or a block
// repeated along a's leading dims (attention's causal mask, [1, 1, T, T] on [B, H, T, T]): a
// selection, exact in float (fill rounded once, as the general loop stores it).
inline Tensor masked_fill_exact_f32(const Tensor& a, const Tensor& mask, double fill) {
  const float* x = contiguous_f32(a);
  if (!x || mask->dtype() != DType::Bool || mask->is_meta() || mask->storage->on_device() || !mask->is_contiguous() ||
      mask->dim() > a->dim())
    return nullptr;
  const int64_t n = a->numel(), block = mask->numel();
  if (block == 0 || n % block != 0 || (mask->sizes != a->sizes && !detail::is_trailing_shape(mask->sizes, a->sizes)))
    return nullptr;
  const double* m = mask->storage->f64() + mask->offset;  // bool elements are held as doubles
  // The mask as 32-bit lanes, all ones where the fill goes, for select_fill_f32's blend
  // (the loop reading the double elements kept a branch per element: 5 ns per element on
  // nanoGPT's [8, 4, 64, 64] attention scores).
  std::vector<uint32_t> take_fill(static_cast<size_t>(block));
  for (int64_t j = 0; j < block; ++j) take_fill[static_cast<size_t>(j)] = m[j] != 0 ? ~0u : 0u;
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* o = r->storage->f32();
  const float f = static_cast<float>(fill);
  for (int64_t start = 0; start < n; start += block) select_fill_f32(x + start, take_fill.data(), f, o + start, block);
  return r;
}

}  // namespace agtrace::kernels
