// im2col / col2im convolution around BLAS products (see kernels_conv.hpp). The layout is
// slow_conv2d's: for one sample and one group, the column matrix has a row per
// (input channel, kernel row, kernel column) and a column per output position, so the
// forward is W_g (C_out/g, K) @ col (K, out_h*out_w), written straight into the output.
#include "tensor/kernels_conv.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

#ifdef AGTRACE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace agtrace::kernels {

namespace {

// C (m, n) = op(A) (m, k) @ op(B) (k, n) + beta * C, row-major.
template <typename T>
void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
             T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef AGTRACE_HAVE_OPENBLAS
  const auto ca = ta ? CblasTrans : CblasNoTrans, cb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ca, cb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ca, cb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
#else
  // Builds without BLAS: the same product, accumulated in T.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = (beta == T(0) ? T(0) : beta * c[i * ldc + j]) + acc;
    }
#endif
}

// The output columns [begin, end) whose input column o * stride + offset lies in [0, width).
void valid_columns(int64_t offset, int64_t stride, int64_t width, int64_t out_w, int64_t& begin, int64_t& end) {
  begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  end = width - 1 - offset < 0 ? 0 : (width - 1 - offset) / stride + 1;
  begin = std::min(begin, out_w);
  end = std::max(begin, std::min(end, out_w));
}

// Visits every row of the column matrix of one (sample, group) plane stack: f(col_row,
// input_row, valid range) for each output row, input_row null where the tap reads padding.
template <typename F>
void for_each_col_row(const ConvShape& s, F&& f) {
  const int64_t ohw = s.out_h * s.out_w;
  for (int64_t c = 0; c < s.group_in; ++c)
    for (int64_t kh = 0; kh < s.kernel_h; ++kh)
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const int64_t row = (c * s.kernel_h + kh) * s.kernel_w + kw;
        const int64_t w_off = kw * s.dilation_w - s.pad_w;
        int64_t begin = 0, end = 0;
        valid_columns(w_off, s.stride_w, s.width, s.out_w, begin, end);
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          const int64_t col_at = row * ohw + oh * s.out_w;
          const bool inside = ih >= 0 && ih < s.height;
          f(col_at, inside ? (c * s.height + ih) * s.width : int64_t{-1}, w_off, begin, end);
        }
      }
}

template <typename T>
void im2col(const ConvShape& s, const T* x, T* col) {
  for_each_col_row(s, [&](int64_t col_at, int64_t in_at, int64_t w_off, int64_t begin, int64_t end) {
    T* dst = col + col_at;
    if (in_at < 0) {
      std::fill(dst, dst + s.out_w, T(0));
      return;
    }
    std::fill(dst, dst + begin, T(0));
    // Input element of output column o: in_at + w_off + o * stride_w (in the row for o in
    // [begin, end)).
    const int64_t first = in_at + w_off + begin * s.stride_w;
    if (s.stride_w == 1)
      std::copy(x + first, x + first + (end - begin), dst + begin);
    else
      for (int64_t o = begin; o < end; ++o) dst[o] = x[first + (o - begin) * s.stride_w];
    std::fill(dst + end, dst + s.out_w, T(0));
  });
}

// The adjoint of im2col: every column entry added back onto the input element it came from.
template <typename T>
void col2im_add(const ConvShape& s, const T* col, T* x) {
  for_each_col_row(s, [&](int64_t col_at, int64_t in_at, int64_t w_off, int64_t begin, int64_t end) {
    if (in_at < 0) return;
    const T* src = col + col_at;
    const int64_t first = in_at + w_off + begin * s.stride_w;
    for (int64_t o = begin; o < end; ++o) x[first + (o - begin) * s.stride_w] += src[o];
  });
}

// A 1x1 kernel with unit stride and no padding reads the input planes as they are: the
// column matrix is the input itself (slow_conv2d skips im2col the same way).
bool columns_are_input(const ConvShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

}  // namespace

template <typename T>
void conv_forward(const ConvShape& s, const T* x, const T* w, const T* bias, T* out) {
  const int64_t k = s.group_in * s.kernel_h * s.kernel_w, ohw = s.out_h * s.out_w;
  const int64_t per_group = s.out_channels / s.groups, plane = s.height * s.width;
  const bool direct = columns_are_input(s);
  std::vector<T> col(direct ? 0 : static_cast<size_t>(k * ohw));
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      const T* xg = x + (n * s.in_channels + g * s.group_in) * plane;
      T* og = out + (n * s.out_channels + g * per_group) * ohw;
      if (!direct) im2col(s, xg, col.data());
      // The bias fills the output first and the product is added to it (beta 1), as
      // slow_conv2d's addmm_ does.
      if (bias)
        for (int64_t oc = 0; oc < per_group; ++oc) std::fill(og + oc * ohw, og + (oc + 1) * ohw, bias[g * per_group + oc]);
      gemm_rm<T>(false, false, per_group, ohw, k, w + g * per_group * k, k, direct ? xg : col.data(), ohw,
                 bias ? T(1) : T(0), og, ohw);
    }
}

template <typename T>
void conv_backward(const ConvShape& s, const T* grad, const T* x, const T* w, T* grad_input, T* grad_weight,
                   T* grad_bias) {
  const int64_t k = s.group_in * s.kernel_h * s.kernel_w, ohw = s.out_h * s.out_w;
  const int64_t per_group = s.out_channels / s.groups, plane = s.height * s.width;
  const bool direct = columns_are_input(s);
  if (grad_weight) std::fill(grad_weight, grad_weight + s.out_channels * k, T(0));
  if (grad_input && !direct) std::fill(grad_input, grad_input + s.batch * s.in_channels * plane, T(0));
  std::vector<T> col(!direct && grad_weight ? static_cast<size_t>(k * ohw) : 0);
  std::vector<T> dcol(!direct && grad_input ? static_cast<size_t>(k * ohw) : 0);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      const T* gg = grad + (n * s.out_channels + g * per_group) * ohw;
      const int64_t in_at = (n * s.in_channels + g * s.group_in) * plane;
      const T* wg = w + g * per_group * k;
      if (grad_weight) {
        // grad_weight_g += grad_g (C_out/g, ohw) @ col^T (ohw, K), summed over the batch.
        if (!direct) im2col(s, x + in_at, col.data());
        gemm_rm<T>(false, true, per_group, k, ohw, gg, ohw, direct ? x + in_at : col.data(), ohw, T(1),
                   grad_weight + g * per_group * k, k);
      }
      if (grad_input) {
        // d col (K, ohw) = W_g^T (K, C_out/g) @ grad_g, then folded back onto the input.
        gemm_rm<T>(true, false, k, ohw, per_group, wg, k, gg, ohw, T(0), direct ? grad_input + in_at : dcol.data(), ohw);
        if (!direct) col2im_add(s, dcol.data(), grad_input + in_at);
      }
    }
  if (grad_bias)
    for (int64_t oc = 0; oc < s.out_channels; ++oc) {
      // A row sum per channel; accumulated in double and rounded once (PyTorch's sum
      // over a float32 row accumulates in pairwise float lanes: within rounding of this).
      double acc = 0;
      for (int64_t n = 0; n < s.batch; ++n) {
        const T* row = grad + (n * s.out_channels + oc) * ohw;
        for (int64_t i = 0; i < ohw; ++i) acc += static_cast<double>(row[i]);
      }
      grad_bias[oc] = static_cast<T>(acc);
    }
}

template void conv_forward<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_forward<double>(const ConvShape&, const double*, const double*, const double*, double*);
template void conv_backward<float>(const ConvShape&, const float*, const float*, const float*, float*, float*, float*);
template void conv_backward<double>(const ConvShape&, const double*, const double*, const double*, double*, double*,
                                    double*);

}  // namespace agtrace::kernels
