#include "tensor/cascade_sum_f32.hpp"

#include <algorithm>
#include <vector>

namespace agtrace::kernels {

namespace {

constexpr int64_t kMaxWidth = 32;
constexpr int kLevels = 4;

// ceil(log2(n)), as torch's CeilLog2 for n > 2; smaller counts only meet max(4, p / 4).
int ceil_log2(int64_t n) {
  int p = 0;
  while ((int64_t{1} << p) < n) ++p;
  return p;
}

// kFixedWidth > 0 makes the width a constant (a whole group of 32 columns, the common case:
// a bias of 384 features is twelve), so that the column loops compile to vector
// instructions; 0 takes `width` at run time.
// torch's multi_row_sum: up to kMaxWidth side-by-side columns (x points at the first, rows
// `row_stride` floats apart), `size` rows, each column's cascade independent of the others
// (the inner loops over columns are what the vector lanes take).
template <int64_t kFixedWidth>
void cascade(const float* x, int64_t row_stride, int64_t size, int64_t runtime_width, float* out) {
  const int64_t width = kFixedWidth > 0 ? kFixedWidth : runtime_width;
  const int level_power = std::max(4, ceil_log2(size) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  float acc[kLevels][kMaxWidth] = {};
  int64_t i = 0;
  while (i + level_step <= size) {
    for (int64_t r = 0; r < level_step; ++r, ++i) {
      const float* row = x + i * row_stride;
      for (int64_t c = 0; c < width; ++c) acc[0][c] += row[c];
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int64_t c = 0; c < width; ++c) {
        acc[j][c] += acc[j - 1][c];
        acc[j - 1][c] = 0.0f;
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i) {
    const float* row = x + i * row_stride;
    for (int64_t c = 0; c < width; ++c) acc[0][c] += row[c];
  }
  for (int j = 1; j < kLevels; ++j)
    for (int64_t c = 0; c < width; ++c) acc[0][c] += acc[j][c];
  std::copy(acc[0], acc[0] + width, out);
}

// torch's row_sum over `width` side-by-side columns (each its own sum): four interleaved
// partial cascades, then the leftover rows. kFixedWidth as for cascade().
template <int64_t kFixedWidth>
void row_sum(const float* x, int64_t row_stride, int64_t rows, int64_t runtime_width, float* out) {
  constexpr int64_t kIlp = 4;
  const int64_t width = kFixedWidth > 0 ? kFixedWidth : runtime_width;
  const int64_t size = rows / kIlp;
  float partial[kIlp][kMaxWidth];
  for (int64_t k = 0; k < kIlp; ++k)
    cascade<kFixedWidth>(x + k * row_stride, kIlp * row_stride, size, width, partial[k]);
  for (int64_t i = size * kIlp; i < rows; ++i)
    for (int64_t c = 0; c < width; ++c) partial[0][c] += x[i * row_stride + c];
  for (int64_t k = 1; k < kIlp; ++k)
    for (int64_t c = 0; c < width; ++c) partial[0][c] += partial[k][c];
  std::copy(partial[0], partial[0] + width, out);
}

constexpr int64_t kVector = 8;  // floats per Vectorized<float> in torch 1.13's x86-64 kernels

}  // namespace

void column_sums_f32(const float* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, float* out) {
  // Columns before cascade_end are in torch's whole groups (32 wide from eight columns on,
  // 4 wide below); the rest take row_sum.
  const int64_t group = cols >= 8 ? kMaxWidth : 4;
  const int64_t cascade_end = cols / group * group;
  int64_t j = col_begin;
  while (j < std::min(col_end, cascade_end)) {
    const int64_t width = std::min({kMaxWidth, cascade_end - j, col_end - j});
    if (width == kMaxWidth)
      cascade<kMaxWidth>(x + j, cols, rows, width, out + (j - col_begin));
    else
      cascade<0>(x + j, cols, rows, width, out + (j - col_begin));
    j += width;
  }
  while (j < col_end) {
    const int64_t width = std::min(kMaxWidth, col_end - j);
    row_sum<0>(x + j, cols, rows, width, out + (j - col_begin));
    j += width;
  }
}

float row_sum_f32(const float* x, int64_t n) {
  float sum = 0.0f;
  if (n >= kVector) {
    // vectorized_inner_sum: row_sum over the whole vectors, lane by lane; then the elements
    // after them, then the lanes, into one float.
    const int64_t vectors = n / kVector;
    float lanes[kVector];
    row_sum<kVector>(x, kVector, vectors, kVector, lanes);
    for (int64_t i = vectors * kVector; i < n; ++i) sum += x[i];
    for (float lane : lanes) sum += lane;
  } else {
    row_sum<0>(x, 1, n, 1, &sum);
  }
  return 0.0f + sum;  // CastStoreAccumulate into the zero-filled output
}

float full_sum_f32(const float* x, int64_t n, int threads) {
  constexpr int64_t kGrain = 32768;  // at::internal::GRAIN_SIZE
  if (threads <= 1 || n < kGrain) return row_sum_f32(x, n);
  // two_pass_reduction: at::parallel_for's chunks (ParallelOpenMP.h), each thread's sum into
  // its slot of a zero-filled buffer of one float per thread, then the buffer's sum.
  const int64_t used = std::min<int64_t>(threads, (n + kGrain - 1) / kGrain);
  const int64_t chunk = (n + used - 1) / used;
  std::vector<float> buffer(static_cast<size_t>(threads), 0.0f);
  for (int64_t t = 0; t * chunk < n; ++t)
    buffer[static_cast<size_t>(t)] = 0.0f + row_sum_f32(x + t * chunk, std::min(chunk, n - t * chunk));
  return row_sum_f32(buffer.data(), threads);
}

}  // namespace agtrace::kernels
