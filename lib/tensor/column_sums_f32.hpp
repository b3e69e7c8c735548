// Column sums of a row-major float32 matrix in torch 1.13's order: x.sum(0) of a contiguous
// [rows, cols] tensor, and every sum over leading dims (a bias gradient's sum_to of a
// [batch, tokens, features] gradient), which TensorIterator coalesces into that matrix.
//
// PyTorch's cascade_sum (aten/src/ATen/native/cpu/SumKernel.cpp) adds in float, the output's
// type, in one of two orders per column, chosen by the column's place:
//   - cascade: rows added in order into level 0; after every 2^p rows level 0 is added into
//     level 1 (and cleared), and level 1 into level 2 after every 2^(2p) rows, up to four
//     levels; leftover rows go into level 0; at the end level 0 += level 1, += level 2,
//     += level 3 (p = max(4, ceil(log2(rows)) / 4)). torch's multi_row_sum, used for each
//     whole group of 32 columns (four AVX2 vectors of eight) when cols >= 8, and each whole
//     group of 4 columns otherwise;
//   - row_sum: rows i, i + 4, i + 8, ... (i = 0..3) cascaded separately over rows / 4 rows,
//     the leftover rows (rows % 4) added to the first partial in order, then partial 0 +=
//     partial 1, += partial 2, += partial 3. Used for the columns after the last whole group.
// Eight floats per vector: torch 1.13's AVX2 kernels (what Debian's build runs on this AVX-512
// machine: "CPU capability usage: AVX2") and its default kernels both hold eight. torch's
// parallel reduction splits the columns at multiples of 32, so its thread count changes none
// of this.
// Measured against torch 1.13 (one and two threads): the same bits on the 16 shapes of
// tests/tools/sum_cpu_reference.py, where the exact sum rounded once differs in 2 to 331 of
// 3 to 384 columns (in none of two shapes whose sums have at most two terms).
#pragma once
#include <cstdint>

namespace agtrace::kernels {

// out[j - col_begin] = the sum of column j of x (rows x cols, row-major) for j in
// [col_begin, col_end), each column in its own order above, so that any split of the columns
// between threads gives the same bits. cols >= 2 (a single column is an inner reduction to
// torch, summed in another order).
void column_sums_f32(const float* x, int64_t rows, int64_t cols, int64_t col_begin, int64_t col_end, float* out);

}  // namespace agtrace::kernels
