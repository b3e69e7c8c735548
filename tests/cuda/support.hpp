// Shared by the CUDA tests: fresh non-zero inputs, device copies, and dtype-aware
// comparison of a device result with the CPU's.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/runtime.hpp"
#include "cuda/transfer.hpp"
#include "support/gradcheck.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::test {

// Values spread over [lo, hi] with no element closer to 0 than 0.05 (no accidental zero
// makes a gradient or a quotient vacuous); `phase` makes each input fresh.
inline Tensor fresh(const Shape& shape, DType dtype, double lo = -2.0, double hi = 2.0, double phase = 0.37) {
  std::vector<double> v = spread(shape_numel(shape), lo, hi, phase);
  for (double& x : v)
    if (std::fabs(x) < 0.05) x = x < 0 ? -0.05 - x : 0.05 + x;
  return tensor_from_values(shape, dtype, v);
}

// A non-contiguous view with `shape`: the transpose of the last two dims of a fresh
// tensor, inside a storage with leading padding (offset 3).
inline Tensor fresh_transposed(const Shape& shape, DType dtype, double lo = -2.0, double hi = 2.0,
                               double phase = 0.41) {
  REQUIRE(shape.size() >= 2);
  Shape t = shape;
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  Tensor base = fresh({shape_numel(shape) + 3}, dtype, lo, hi, phase);
  Shape strides = contiguous_strides(t);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return make_alias(base, shape, strides, 3);
}

// Absolute and relative tolerance for a dtype: a few ulps of the dtype after a handful of
// operations (the device's math library and the host's differ by an ulp or two).
inline double tolerance(DType d) {
  switch (d) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 2e-6;
    case DType::Float16: return 2e-3;
    case DType::BFloat16: return 1.6e-2;
    default: return 0.0;  // int64, bool: exact
  }
}

// got and want: same shape, and every element within tolerance (NaN only where NaN).
inline void check_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got->sizes == want->sizes);
  REQUIRE(got->dtype() == want->dtype());
  const std::vector<double> g = to_values(got), w = to_values(want);
  REQUIRE(g.size() == w.size());
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    std::fabs(g[i] - w[i]) <= tol * (1.0 + std::fabs(w[i]));
    if (!ok && bad++ < 5) FAIL_CHECK("element " << i << ": device " << g[i] << ", CPU " << w[i]);
  }
  CHECK(bad == 0);
}
inline void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  check_close(got, want, tolerance(want->dtype()), what);
}

inline std::vector<DType> float_dtypes() { return {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}; }

}  // namespace agtrace::test

namespace agtrace::test {

// Host reference helper for row-wise kernels: visits every element of `shape` (row-major)
// with (row, j, linear): row numbers the combination of the dims not in `inner` (row-major
// over them), j the combination of those in `inner`.
template <typename F>
void for_rows(const Shape& shape, const std::vector<bool>& inner, F&& f) {
  const int64_t n = shape_numel(shape);
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t rem = linear, row = 0, j = 0, row_scale = 1, j_scale = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t c = rem % shape[d];
      rem /= shape[d];
      if (inner[d]) {
        j += c * j_scale;
        j_scale *= shape[d];
      } else {
        row += c * row_scale;
        row_scale *= shape[d];
      }
    }
    f(row, j, linear);
  }
}

// The values of t grouped by row (see for_rows).
inline std::vector<std::vector<double>> rows_of(const Tensor& t, const std::vector<bool>& inner) {
  const std::vector<double> v = to_values(t);
  std::vector<std::vector<double>> rows;
  for_rows(t->sizes, inner, [&](int64_t row, int64_t j, int64_t linear) {
    if (static_cast<int64_t>(rows.size()) <= row) rows.resize(static_cast<size_t>(row) + 1);
    auto& r = rows[static_cast<size_t>(row)];
    if (static_cast<int64_t>(r.size()) <= j) r.resize(static_cast<size_t>(j) + 1);
    r[static_cast<size_t>(j)] = v[static_cast<size_t>(linear)];
  });
  return rows;
}

inline std::vector<bool> only_dim(size_t ndim, int64_t dim) {
  std::vector<bool> m(ndim, false);
  m[static_cast<size_t>(dim)] = true;
  return m;
}

}  // namespace agtrace::test
