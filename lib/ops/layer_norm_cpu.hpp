// layer_norm on the CPU for float32 and float64 as PyTorch 1.13's kernels compute it
// (aten/src/ATen/native/cpu/layer_norm_kernel.cpp with moments_utils.h's RowwiseMoments, the
// AVX2 build: 8 float or 4 double lanes), operation for operation in the tensor's dtype.
// Measured against torch 1.13 on 999 random float32 rows of 1 to 1,199 elements with weight
// and bias, weight only and neither: every mean, rstd and output element, every input,
// weight and bias gradient (578,219 elements each) is PyTorch's, where two-pass double
// arithmetic rounded once gives other bits in 68 % of the outputs and 67 % of the input
// gradients, and another mean in 554 rows. tests/ops/test_layer_norm_cpu.cpp pins fixed
// cases (tests/tools/layer_norm_cpu_reference.py makes their references).
//
// What fixes the bits: Welford moments per lane over chunks of 16 vectors, merged in
// RowwiseMoments' cascade, a scalar tail, then the lanes merged in order; no fused
// multiply-add in the moments; y = fma(fma(x, rstd, -rstd * mean), gamma, beta); in the
// backward the row sums fuse each product into its lane and reduce the lanes by AVX2
// shuffles, and the weight and bias gradients are running sums over the rows that one
// thread of at::parallel_for takes (layer_norm_cpu.cpp: thread_row_ranges), added up after.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace agtrace::ops::layer_norm_cpu {

// `rows` consecutive rows of `cols` elements: y, and mean[r] and rstd[r] per row.
void forward_rows(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t cols, float eps,
                  float* y, float* mean, float* rstd);
void forward_rows(const double* x, const double* gamma, const double* beta, int64_t rows, int64_t cols, double eps,
                  double* y, double* mean, double* rstd);

// `rows` consecutive rows: dx (null: not wanted) and, added onto dgamma_sum and dbeta_sum
// (null: not wanted), the rows' terms of the weight and bias gradients. gamma null: none.
void backward_rows(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                   int64_t rows, int64_t cols, float* dx, float* dgamma_sum, float* dbeta_sum);
void backward_rows(const double* dy, const double* x, const double* gamma, const double* mean, const double* rstd,
                   int64_t rows, int64_t cols, double* dx, double* dgamma_sum, double* dbeta_sum);

// RowwiseMoments(x, n): the mean and the biased variance of n elements as above (1.13's
// group_norm kernel takes each group's from it as well).
void rowwise_moments(const float* x, int64_t n, float& mean, float& var);
void rowwise_moments(const double* x, int64_t n, double& mean, double& var);

// The rows each thread of 1.13's at::parallel_for(0, rows, 1, ...) takes with `threads`
// OpenMP threads: min(threads, rows) ranges of ceil(rows / that) rows, the last one shorter.
// The backward's weight and bias gradients are one running sum per range, added up in
// range order, so they depend on the thread count as PyTorch's do.
std::vector<std::pair<int64_t, int64_t>> thread_row_ranges(int64_t rows, int threads);

}  // namespace agtrace::ops::layer_norm_cpu
