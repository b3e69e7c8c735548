#include "tensor/cascade_sum.hpp"

#include <algorithm>
#include <vector>

namespace agtrace::kernels {

namespace {

constexpr int64_t kMaxWidth = 32;
constexpr int kLevels = 4;

// Elements per Vectorized<T> in torch 1.13's x86-64 kernels (32-byte vectors): 8 floats, 4
// doubles.
template <typename T>
constexpr int64_t kVector = 32 / static_cast<int64_t>(sizeof(T));

// ceil(log2(n)), as torch's CeilLog2 for n > 2; smaller counts only meet max(4, p / 4).
int ceil_log2(int64_t n) {
  int p = 0;
  while ((int64_t{1} << p) < n) ++p;
  return p;
}

// torch's multi_row_sum: up to kMaxWidth side-by-side columns (x points at the first, rows
// `row_stride` elements apart), `size` rows, each column's cascade independent of the others
// (the inner loops over columns are what the vector lanes take). kFixedWidth > 0 makes the
// width a constant (a whole group of columns, the common case: a bias of 384 features is
// twelve groups of 32 floats), so that the column loops compile to vector instructions; 0
// takes `runtime_width`.
template <typename T, int64_t kFixedWidth>
void cascade(const T* x, int64_t row_stride, int64_t size, int64_t runtime_width, T* out) {
  const int64_t width = kFixedWidth > 0 ? kFixedWidth : runtime_width;
  const int level_power = std::max(4, ceil_log2(size) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  T acc[kLevels][kMaxWidth] = {};
  int64_t i = 0;
  while (i + level_step <= size) {
    for (int64_t r = 0; r < level_step; ++r, ++i) {
      const T* row = x + i * row_stride;
      for (int64_t c = 0; c < width; ++c) acc[0][c] += row[c];
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int64_t c = 0; c < width; ++c) {
        acc[j][c] += acc[j - 1][c];
        acc[j - 1][c] = T(0);
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i) {
    const T* row = x + i * row_stride;
    for (int64_t c = 0; c < width; ++c) acc[0][c] += row[c];
  }
  for (int j = 1; j < kLevels; ++j)
    for (int64_t c = 0; c < width; ++c) acc[0][c] += acc[j][c];
  std::copy(acc[0], acc[0] + width, out);
}

// torch's row_sum over `width` side-by-side columns (each its own sum): four interleaved
// partial cascades, then the leftover rows. kFixedWidth as for cascade().
template <typename T, int64_t kFixedWidth>
void row_sum(const T* x, int64_t row_stride, int64_t rows, int64_t runtime_width, T* out) {
  constexpr int64_t kIlp = 4;
  const int64_t width = kFixedWidth > 0 ? kFixedWidth : runtime_width;
  const int64_t size = rows / kIlp;
  T partial[kIlp][kMaxWidth];
  for (int64_t k = 0; k < kIlp; ++k)
    cascade<T, kFixedWidth>(x + k * row_stride, kIlp * row_stride, size, width, partial[k]);
  for (int64_t i = size * kIlp; i < rows; ++i)
    for (int64_t c = 0; c < width; ++c) partial[0][c] += x[i * row_stride + c];
  for (int64_t k = 1; k < kIlp; ++k)
    for (int64_t c = 0; c < width; ++c) partial[0][c] += partial[k][c];
  std::copy(partial[0], partial[0] + width, out);
}

template <typename T>
void column_sums_any(const T* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, T* out) {
  // Columns before cascade_end are in torch's whole groups (four vectors wide from one
  // vector's worth of columns on, 4 wide below); the rest take row_sum.
  constexpr int64_t kGroup = 4 * kVector<T>;
  const int64_t group = cols >= kVector<T> ? kGroup : 4;
  const int64_t cascade_end = cols / group * group;
  int64_t j = col_begin;
  while (j < std::min(col_end, cascade_end)) {
    const int64_t width = std::min({group, cascade_end - j, col_end - j});
    if (width == kGroup)
      cascade<T, kGroup>(x + j, cols, rows, width, out + (j - col_begin));
    else
      cascade<T, 0>(x + j, cols, rows, width, out + (j - col_begin));
    j += width;
  }
  while (j < col_end) {
    const int64_t width = std::min(kMaxWidth, col_end - j);
    row_sum<T, 0>(x + j, cols, rows, width, out + (j - col_begin));
    j += width;
  }
}

template <typename T>
T row_sum_any(const T* x, int64_t n) {
  constexpr int64_t kLanes = kVector<T>;
  T sum = T(0);
  if (n >= kLanes) {
    // vectorized_inner_sum: row_sum over the whole vectors, lane by lane; then the elements
    // after them, then the lanes, into one value.
    const int64_t vectors = n / kLanes;
    T lanes[kLanes];
    row_sum<T, kLanes>(x, kLanes, vectors, kLanes, lanes);
    for (int64_t i = vectors * kLanes; i < n; ++i) sum += x[i];
    for (T lane : lanes) sum += lane;
  } else {
    row_sum<T, 0>(x, 1, n, 1, &sum);
  }
  return T(0) + sum;  // CastStoreAccumulate into the zero-filled output
}

template <typename T>
T full_sum_any(const T* x, int64_t n, int threads) {
  constexpr int64_t kGrain = 32768;  // at::internal::GRAIN_SIZE
  if (threads <= 1 || n < kGrain) return row_sum_any(x, n);
  // two_pass_reduction: at::parallel_for's chunks (ParallelOpenMP.h), each thread's sum into
  // its slot of a zero-filled buffer of one value per thread, then the buffer's sum.
  const int64_t used = std::min<int64_t>(threads, (n + kGrain - 1) / kGrain);
  const int64_t chunk = (n + used - 1) / used;
  std::vector<T> buffer(static_cast<size_t>(threads), T(0));
  for (int64_t t = 0; t * chunk < n; ++t)
    buffer[static_cast<size_t>(t)] = T(0) + row_sum_any(x + t * chunk, std::min(chunk, n - t * chunk));
  return row_sum_any(buffer.data(), threads);
}

}  // namespace

void column_sums(const float* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, float* out) {
  column_sums_any(x, rows, cols, col_begin, col_end, out);
}
void column_sums(const double* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, double* out) {
  column_sums_any(x, rows, cols, col_begin, col_end, out);
}
float row_sum(const float* x, int64_t n) { return row_sum_any(x, n); }
double row_sum(const double* x, int64_t n) { return row_sum_any(x, n); }
float full_sum(const float* x, int64_t n, int threads) { return full_sum_any(x, n, threads); }
double full_sum(const double* x, int64_t n, int threads) { return full_sum_any(x, n, threads); }

}  // namespace agtrace::kernels
