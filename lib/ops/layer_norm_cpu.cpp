#include "ops/layer_norm_cpu.hpp"

#include <algorithm>
#include <cmath>

#include "util/cpu_features.hpp"
#include "util/gcc_pragma.hpp"

// No contraction of a * b + c beyond the std::fma calls written (the kernel fuses exactly
// those), so the build for any x86-64 (fmaf from libm) and the AVX2 build (FMA instructions)
// agree bit for bit. O3 vectorizes the lane loops.
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC optimize("fp-contract=off", "O3"))

namespace agtrace::ops::layer_norm_cpu {
namespace {

namespace baseline {
#include "ops/layer_norm_cpu_body.inc"
}  // namespace baseline

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx2,fma"))
namespace avx2 {
#include "ops/layer_norm_cpu_body.inc"
}  // namespace avx2
AGTRACE_GCC_PRAGMA(GCC pop_options)

template <typename T>
void forward_any(const T* x, const T* gamma, const T* beta, int64_t rows, int64_t cols, T eps, T* y, T* mean,
                 T* rstd) {
  if (cpu_has_avx2_fma()) avx2::forward_rows(x, gamma, beta, rows, cols, eps, y, mean, rstd);
  else baseline::forward_rows(x, gamma, beta, rows, cols, eps, y, mean, rstd);
}
template <typename T>
void backward_any(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, int64_t rows, int64_t cols,
                  T* dx, T* dgamma_sum, T* dbeta_sum) {
  if (cpu_has_avx2_fma()) avx2::backward_rows(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma_sum, dbeta_sum);
  else baseline::backward_rows(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma_sum, dbeta_sum);
}
}  // namespace

void rowwise_moments(const float* x, int64_t n, float& mean, float& var) {
  if (cpu_has_avx2_fma()) avx2::row_moments(x, n, mean, var);
  else baseline::row_moments(x, n, mean, var);
}
void rowwise_moments(const double* x, int64_t n, double& mean, double& var) {
  if (cpu_has_avx2_fma()) avx2::row_moments(x, n, mean, var);
  else baseline::row_moments(x, n, mean, var);
}

void forward_rows(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t cols, float eps,
                  float* y, float* mean, float* rstd) {
  forward_any(x, gamma, beta, rows, cols, eps, y, mean, rstd);
}
void forward_rows(const double* x, const double* gamma, const double* beta, int64_t rows, int64_t cols, double eps,
                  double* y, double* mean, double* rstd) {
  forward_any(x, gamma, beta, rows, cols, eps, y, mean, rstd);
}
void backward_rows(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                   int64_t rows, int64_t cols, float* dx, float* dgamma_sum, float* dbeta_sum) {
  backward_any(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma_sum, dbeta_sum);
}
void backward_rows(const double* dy, const double* x, const double* gamma, const double* mean, const double* rstd,
                   int64_t rows, int64_t cols, double* dx, double* dgamma_sum, double* dbeta_sum) {
  backward_any(dy, x, gamma, mean, rstd, rows, cols, dx, dgamma_sum, dbeta_sum);
}

std::vector<std::pair<int64_t, int64_t>> thread_row_ranges(int64_t rows, int threads) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (rows <= 0) return ranges;
  // ParallelOpenMP.h: a single range where one thread runs; else num_threads is capped by
  // ceil(rows / grain) with grain 1, and thread t takes [t * chunk, (t + 1) * chunk).
  const int64_t used = std::max<int64_t>(1, std::min<int64_t>(threads, rows));
  const int64_t chunk = (rows + used - 1) / used;
  for (int64_t begin = 0; begin < rows; begin += chunk) ranges.emplace_back(begin, std::min(rows, begin + chunk));
  return ranges;
}

}  // namespace agtrace::ops::layer_norm_cpu

AGTRACE_GCC_PRAGMA(GCC pop_options)
