// Sums of contiguous float32 and float64 tensors in torch 1.13's order: every x.sum() and x.mean(), row
// sums over trailing dims, and column sums over leading dims (x.sum(0), a bias gradient's
// sum_to of a [batch, tokens, features] gradient), which TensorIterator coalesces into a
// [rows, cols] matrix reduced along one of its two dims.
//
// PyTorch's cascade_sum (aten/src/ATen/native/cpu/SumKernel.cpp) adds in the output's type
// (float or double), with two building blocks:
//   - multi_row_sum, a cascade over `size` rows: rows added in order into level 0; after
//     every 2^p rows level 0 is added into level 1 (and cleared), and level 1 into level 2
//     after every 2^(2p) rows, up to four levels; leftover rows go into level 0; at the end
//     level 0 += level 1, += level 2, += level 3 (p = max(4, ceil(log2(size)) / 4));
//   - row_sum: rows i, i + 4, i + 8, ... (i = 0..3) cascaded separately over size / 4 rows,
//     the leftover rows (size % 4) added to the first partial in order, then partial 0 +=
//     partial 1, += partial 2, += partial 3.
// A vector holds V elements: 8 floats or 4 doubles, in torch 1.13's AVX2 kernels (what
// Debian's build runs on this AVX-512 machine: "CPU capability usage: AVX2") and its default
// kernels alike.
// Column sums (an outer reduction): multi_row_sum for each whole group of 4·V columns (four
// vectors) when cols >= V, and each whole group of 4 columns otherwise; row_sum for the
// columns after the last whole group.
// A row's sum (an inner reduction): with V elements or more, row_sum over its vectors (lane by
// lane), then a value from 0 adds the elements after the last whole vector and then the V
// lanes in order; under V elements, row_sum over the elements. The output starts at 0 and the
// sum is added to it (so -0 comes out +0).
//
// Threads: torch splits column sums at multiples of 128 bytes of columns (32 floats, 16
// doubles) and row sums by whole rows, neither of which changes a sum. A single sum of 32,768
// elements or more on T > 1 threads is split instead (two_pass_reduction): min(T,
// ceil(n / 32768)) chunks of ceil(n / chunks) elements, each summed as a row into a buffer of
// T values (0 where no chunk), and the buffer summed as a row. Measured against torch 1.13 (tests/tools/sum_cpu_reference.py prints the
// test's references): the same bits on 16 column-sum shapes on one and two threads, where
// the exact sum rounded once differs in 2 to 331 of 3 to 384 columns (in none of two shapes
// whose sums have at most two terms), on 9 row-sum shapes on one and two threads, and on 15
// sums of every element (1 to 1,000,001 elements) on one to four threads.
#pragma once
#include <cstdint>

namespace agtrace::kernels {

// out[j - col_begin] = the sum of column j of x (rows x cols, row-major) for j in
// [col_begin, col_end), each column in its own order above, so that any split of the columns
// between threads gives the same bits. cols >= 2 (a single column is a row to torch).
void column_sums(const float* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, float* out);
void column_sums(const double* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, double* out);

// The sum of x[0..n) as torch sums one row (an inner reduction on one thread), n >= 1.
float row_sum(const float* x, int64_t n);
double row_sum(const double* x, int64_t n);

// torch.sum of all n elements of a contiguous tensor on `threads` threads (the split above
// for n >= 32,768; a row's sum otherwise), n >= 1.
float full_sum(const float* x, int64_t n, int threads);
double full_sum(const double* x, int64_t n, int threads);

}  // namespace agtrace::kernels
