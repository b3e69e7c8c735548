// im2col / col2im convolution around BLAS products (see kernels_conv.hpp). The layout is
// slow_conv2d's: for one sample and one group, the column matrix has a row per
// (input channel, kernel row, kernel column) and a column per output position, so the
// forward is W_g (C_out/g, K) @ col (K, out_h*out_w), written straight into the output.
// Several samples' column matrices are put side by side, (K, samples*out_h*out_w), and
// multiplied at once (see samples_per_chunk).
#include "tensor/kernels_conv.hpp"

#include <algorithm>
#include <memory>
#include <type_traits>

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
// input_row, valid range) for each output row, input_row -1 where the tap reads padding.
// Row r of the column matrix starts at r * ld (ld = out_h * out_w for one sample alone, a
// multiple of it when several samples' columns sit side by side).
template <typename F>
void for_each_col_row(const ConvShape& s, int64_t ld, F&& f) {
  for (int64_t c = 0; c < s.group_in; ++c)
    for (int64_t kh = 0; kh < s.kernel_h; ++kh)
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const int64_t row = (c * s.kernel_h + kh) * s.kernel_w + kw;
        const int64_t w_off = kw * s.dilation_w - s.pad_w;
        int64_t begin = 0, end = 0;
        valid_columns(w_off, s.stride_w, s.width, s.out_w, begin, end);
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          const int64_t col_at = row * ld + oh * s.out_w;
          const bool inside = ih >= 0 && ih < s.height;
          f(col_at, inside ? (c * s.height + ih) * s.width : int64_t{-1}, w_off, begin, end);
        }
      }
}

// One row of the column matrix with unit stride: `begin` zeros (left padding), the input
// run [begin, end) and zeros to out_w. The rows are short (32 elements and less in conv_block,
// 2 to 64 in resnet18), and as std::fill and std::copy each part was a call into memset or
// memmove: 13 million instructions of conv_block's 142 (callgrind).
// A short row or run: plain loops, kept from being turned back into those calls.
#if defined(__GNUC__) && !defined(__clang__)
#define AGTRACE_PLAIN_LOOPS __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#else
#define AGTRACE_PLAIN_LOOPS __attribute__((noinline))
#endif
template <typename T>
AGTRACE_PLAIN_LOOPS void short_unit_stride_row(
    T* __restrict dst, const T* __restrict src, int64_t begin, int64_t end, int64_t out_w) {
  for (int64_t o = 0; o < begin; ++o) dst[o] = T(0);
  for (int64_t o = begin; o < end; ++o) dst[o] = src[o - begin];
  for (int64_t o = end; o < out_w; ++o) dst[o] = T(0);
}

// A row of at least a block (32 bytes) whose run is a block or more and whose padding on
// either side is a block or less: zero blocks at both ends first, then the run over them in
// blocks, the last overlapping the one before it, all fixed-size moves.
template <typename T>
inline void unit_stride_row(T* __restrict dst, const T* __restrict src, int64_t begin, int64_t end, int64_t out_w) {
  constexpr int64_t kBlock = 32 / sizeof(T);
  const int64_t n = end - begin;
  if (out_w < kBlock || n < kBlock || begin > kBlock || out_w - end > kBlock)
    return short_unit_stride_row(dst, src, begin, end, out_w);
  if (begin > 0) __builtin_memset(dst, 0, sizeof(T) * kBlock);
  if (end < out_w) __builtin_memset(dst + out_w - kBlock, 0, sizeof(T) * kBlock);
  T* run = dst + begin;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) __builtin_memcpy(run + i, src + i, sizeof(T) * kBlock);
  if (i < n) __builtin_memcpy(run + n - kBlock, src + n - kBlock, sizeof(T) * kBlock);
}

template <typename T>
void im2col(const ConvShape& s, const T* x, T* col, int64_t ld) {
  for_each_col_row(s, ld, [&](int64_t col_at, int64_t in_at, int64_t w_off, int64_t begin, int64_t end) {
    T* dst = col + col_at;
    if (in_at < 0) {
      std::fill(dst, dst + s.out_w, T(0));
      return;
    }
    // Input element of output column o: in_at + w_off + o * stride_w (in the row for o in
    // [begin, end)).
    const int64_t first = in_at + w_off + begin * s.stride_w;
    if (s.stride_w == 1) return unit_stride_row(dst, x + first, begin, end, s.out_w);
    std::fill(dst, dst + begin, T(0));
    for (int64_t o = begin; o < end; ++o) dst[o] = x[first + (o - begin) * s.stride_w];
    std::fill(dst + end, dst + s.out_w, T(0));
  });
}

// The adjoint of im2col: every column entry added back onto the input element it came from.
template <typename T>
void col2im_add(const ConvShape& s, const T* col, int64_t ld, T* x) {
  for_each_col_row(s, ld, [&](int64_t col_at, int64_t in_at, int64_t w_off, int64_t begin, int64_t end) {
    if (in_at < 0) return;
    const T* __restrict src = col + col_at;
    const int64_t first = in_at + w_off + begin * s.stride_w;
    // The gradient rows and the input gradient are separate buffers: with unit stride the
    // add is a plain vector loop (it was 40 % of conv_backward's samples on conv_block).
    if (s.stride_w == 1) {
      T* __restrict dst = x + first - begin;
      // Blocks of eight as fixed-size loops, which GCC vectorizes at -O2 too.
      int64_t o = begin;
      for (; o + 8 <= end; o += 8)
        for (int l = 0; l < 8; ++l) dst[o + l] += src[o + l];
      for (; o < end; ++o) dst[o] += src[o];
      return;
    }
    for (int64_t o = begin; o < end; ++o) x[first + (o - begin) * s.stride_w] += src[o];
  });
}

// A 1x1 kernel with unit stride and no padding reads the input planes as they are: the
// column matrix is the input itself (slow_conv2d skips im2col the same way).
bool columns_are_input(const ConvShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

// `rows` rows of `len` elements from src (rows src_stride apart) to dst (dst_stride apart):
// a sample's planes or output rows moved between its own layout and a chunk's side-by-side one.
template <typename T>
void copy_rows(const T* src, int64_t src_stride, T* dst, int64_t dst_stride, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; ++r) std::copy(src + r * src_stride, src + r * src_stride + len, dst + r * dst_stride);
}

// One sample's column matrix (its group's planes xg) into col, whose rows are ld apart.
template <typename T>
void sample_columns(const ConvShape& s, const T* xg, T* col, int64_t ld) {
  if (columns_are_input(s)) copy_rows(xg, s.height * s.width, col, ld, s.group_in, s.height * s.width);
  else im2col(s, xg, col, ld);
}

// Scratch whose every element is written before it is read: left uninitialised, since
// zero-filling it first would be a pass over memory the kernel clears on first touch anyway.
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t n) : data_(n > 0 ? new T[static_cast<size_t>(n)] : nullptr), size_(n > 0 ? n : 0) {}
  T* data() { return data_.get(); }
  bool empty() const { return size_ == 0; }

 private:
  std::unique_ptr<T[]> data_;
  int64_t size_;
};

// Samples are taken in chunks whose columns sit side by side, so that each product is one
// matrix of about kTargetColumns columns instead of one narrow matrix per sample: resnet18's
// later stages at 64x64 inputs have 8x8 to 2x2 outputs, and a product per sample there packs
// and reads all its weights (512 x 4608 in the last stage) for every 64 to 4 columns. On
// bench/scenarios/resnet18_b8.json OpenBLAS's samples went from 3,269 to 1,602 (perf record
// at 5 kHz, 3 runs each) and the whole run from 292-336 to 194-223 ms of CPU time (perf
// stat -r 8 to 10, alternated series).
// Wider chunks gained nothing more there and cost fresh pages: the whole batch side by side
// took conv_block's peak from 22 to 30 MiB, and its run from 20-25 to 23-26 ms. PyTorch
// 1.13 gives batched float32 convolutions to oneDNN, whose sums are ordered by neither
// layout, so the chunk changes no fidelity; a batch of one keeps slow_conv2d's
// single-sample product. A chunk's column matrices also stay under kChunkColumnElements
// (8 MiB in float32).
constexpr int64_t kTargetColumns = 512;
constexpr int64_t kChunkColumnElements = int64_t{1} << 21;
int64_t chunk_column_elements = kChunkColumnElements;

int64_t samples_per_chunk(const ConvShape& s, int64_t k, int64_t ohw) {
  const int64_t wanted = (kTargetColumns + ohw - 1) / std::max<int64_t>(1, ohw);
  const int64_t fit = chunk_column_elements / std::max<int64_t>(1, k * ohw);
  return std::clamp<int64_t>(std::min(wanted, fit), 1, std::max<int64_t>(1, s.batch));
}

}  // namespace

void set_conv_chunk_column_elements(int64_t elements) {
  chunk_column_elements = elements > 0 ? elements : kChunkColumnElements;
}

template <typename T>
void conv_forward(const ConvShape& s, const T* x, const T* w, const T* bias, T* out) {
  const int64_t k = s.group_in * s.kernel_h * s.kernel_w, ohw = s.out_h * s.out_w;
  const int64_t per_group = s.out_channels / s.groups, plane = s.height * s.width;
  const bool direct = columns_are_input(s);
  const int64_t chunk = samples_per_chunk(s, k, ohw);
  // One sample: its columns (or its input planes) times the weights, straight into the
  // output. Several: their columns side by side (K, nb * ohw), the product into `wide`
  // (C_out/g, nb * ohw), whose rows are then the samples' output rows.
  Scratch<T> col(direct && chunk == 1 ? 0 : k * ohw * chunk);
  Scratch<T> wide(chunk == 1 ? 0 : per_group * ohw * chunk);
  for (int64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const int64_t nb = std::min(chunk, s.batch - n0), ld = nb * ohw;
    for (int64_t g = 0; g < s.groups; ++g) {
      if (!direct || nb > 1)
        for (int64_t j = 0; j < nb; ++j)
          sample_columns(s, x + ((n0 + j) * s.in_channels + g * s.group_in) * plane, col.data() + j * ohw, ld);
      const T* b_matrix = direct && nb == 1 ? x + (n0 * s.in_channels + g * s.group_in) * plane : col.data();
      T* c_matrix = nb == 1 ? out + (n0 * s.out_channels + g * per_group) * ohw : wide.data();
      // The bias fills the output first and the product is added to it (beta 1), as
      // slow_conv2d's addmm_ does.
      if (bias)
        for (int64_t oc = 0; oc < per_group; ++oc) std::fill(c_matrix + oc * ld, c_matrix + (oc + 1) * ld, bias[g * per_group + oc]);
      gemm_rm<T>(false, false, per_group, ld, k, w + g * per_group * k, k, b_matrix, ld, bias ? T(1) : T(0), c_matrix, ld);
      if (nb > 1)
        for (int64_t j = 0; j < nb; ++j)
          copy_rows(wide.data() + j * ohw, ld, out + ((n0 + j) * s.out_channels + g * per_group) * ohw, ohw, per_group,
                    ohw);
    }
  }
}

template <typename T>
void conv_backward(const ConvShape& s, const T* grad, const T* x, const T* w, T* grad_input, T* grad_weight,
                   T* grad_bias) {
  const int64_t k = s.group_in * s.kernel_h * s.kernel_w, ohw = s.out_h * s.out_w;
  const int64_t per_group = s.out_channels / s.groups, plane = s.height * s.width;
  const bool direct = columns_are_input(s);
  const int64_t chunk = samples_per_chunk(s, k, ohw);
  if (grad_weight) std::fill(grad_weight, grad_weight + s.out_channels * k, T(0));
  if (grad_input && !direct) std::fill(grad_input, grad_input + s.batch * s.in_channels * plane, T(0));
  // As in the forward: one sample reads its gradient rows and input planes in place; several
  // have theirs gathered side by side (`wide_grad`, C_out/g x nb * ohw; `col`, K x nb * ohw).
  Scratch<T> col(grad_weight && (!direct || chunk > 1) ? k * ohw * chunk : 0);
  Scratch<T> dcol(grad_input && (!direct || chunk > 1) ? k * ohw * chunk : 0);
  Scratch<T> wide_grad(chunk == 1 ? 0 : per_group * ohw * chunk);
  for (int64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const int64_t nb = std::min(chunk, s.batch - n0), ld = nb * ohw;
    for (int64_t g = 0; g < s.groups; ++g) {
      const T* gg = grad + (n0 * s.out_channels + g * per_group) * ohw;
      if (nb > 1) {
        for (int64_t j = 0; j < nb; ++j)
          copy_rows(grad + ((n0 + j) * s.out_channels + g * per_group) * ohw, ohw, wide_grad.data() + j * ohw, ld,
                    per_group, ohw);
        gg = wide_grad.data();
      }
      const T* wg = w + g * per_group * k;
      if (grad_weight) {
        // grad_weight_g += grad_g (C_out/g, nb * ohw) @ col^T (nb * ohw, K), summed over the batch.
        for (int64_t j = 0; j < nb && !col.empty(); ++j)
          sample_columns(s, x + ((n0 + j) * s.in_channels + g * s.group_in) * plane, col.data() + j * ohw, ld);
        const T* cols = col.empty() ? x + (n0 * s.in_channels + g * s.group_in) * plane : col.data();
        gemm_rm<T>(false, true, per_group, k, ld, gg, ld, cols, ld, T(1), grad_weight + g * per_group * k, k);
      }
      if (grad_input) {
        // d col (K, nb * ohw) = W_g^T (K, C_out/g) @ grad_g, then folded back onto the inputs.
        T* in_g = grad_input + (n0 * s.in_channels + g * s.group_in) * plane;
        gemm_rm<T>(true, false, k, ld, per_group, wg, k, gg, ld, T(0), dcol.empty() ? in_g : dcol.data(), ld);
        for (int64_t j = 0; j < nb && !dcol.empty(); ++j) {
          T* in_j = grad_input + ((n0 + j) * s.in_channels + g * s.group_in) * plane;
          if (direct) copy_rows(dcol.data() + j * ohw, ld, in_j, plane, s.group_in, plane);
          else col2im_add(s, dcol.data() + j * ohw, ld, in_j);
        }
      }
    }
  }
  if (grad_bias)
    for (int64_t oc = 0; oc < s.out_channels; ++oc) {
      // A row sum per channel, accumulated in double and rounded once (PyTorch's sum over a
      // float32 row accumulates in pairwise float lanes, oneDNN's in its own order: within
      // rounding of this). Eight partial sums, not one: a single double accumulator waits
      // for each add, and was 43 % of conv_backward's samples on conv_block.
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t n = 0; n < s.batch; ++n) {
        const T* row = grad + (n * s.out_channels + oc) * ohw;
        int64_t i = 0;
        for (; i + 8 <= ohw; i += 8)
          for (int l = 0; l < 8; ++l) acc[l] += static_cast<double>(row[i + l]);
        for (; i < ohw; ++i) acc[i % 8] += static_cast<double>(row[i]);
      }
      grad_bias[oc] = static_cast<T>(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
    }
}

template void conv_forward<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_forward<double>(const ConvShape&, const double*, const double*, const double*, double*);
template void conv_backward<float>(const ConvShape&, const float*, const float*, const float*, float*, float*, float*);
template void conv_backward<double>(const ConvShape&, const double*, const double*, const double*, double*, double*,
                                    double*);

}  // namespace agtrace::kernels
