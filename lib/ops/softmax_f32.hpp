// The row loops of softmax and log_softmax over the last dim of float32 tensors (issue #6),
// in double as before, arranged so that they vectorize. A softmax over 2048 rows of 128
// (transformer_block's attention) took 1.22 ms at 1 thread, in three chains that each waited
// on the previous element (the row max, std::exp, the row sum); it now takes 0.58 ms (0.31
// at 2 threads; PyTorch, computing in float, 0.09 ms at 2 threads).
//
// - The row max is taken in float over 8 lanes: the maximum is exact, so any order gives
//   the same value (NaN elements are skipped, as std::max(max, x) skips them).
// - exp_nonpositive is written so that a loop over it vectorizes and gives the same double
//   in the scalar and the vector builds: only IEEE additions, subtractions and
//   multiplications (no fma, no contraction), a select, and integer bits. x = n ln2 + r with
//   n = round(x / ln2) and |r| <= ln2 / 2 (fdlibm's two-part ln2, its high part with 21
//   trailing zero bits, so n ln2_hi is exact), exp(r) by its Taylor series to r^13 (the next
//   term is below 4e-18 relative), scaled by 2^n through the exponent bits. Measured on 5
//   million arguments in [-750, 0]: within 1 ulp of glibc's exp, and the same float32 after
//   rounding. Its argument in a softmax row is x - max <= 0; below -708 (where 2^n would
//   leave the normal range) it returns 0 (the true value is below 3.3e-308, which no float32
//   result of a row whose largest term is exp(0) = 1 can show); NaN gives NaN, -inf 0.
// - The row sum is a LaneSum (tensor/lane_sum.hpp): the general path, which visits a row's
//   elements in the same order, reproduces it bit for bit.
#pragma once
#include <cstdint>

#include "tensor/lane_sum.hpp"

namespace agtrace::ops::softmax_f32 {

// exp(x) for x <= 0 or NaN (a positive x is outside the contract: 2^n may overflow).
double exp_nonpositive(double x);

// The largest of x[0..n) as std::max(max, x[c]) from -inf finds it (NaN skipped).
float row_max(const float* x, int64_t n);
// e[c] = exp_nonpositive(double(x[c]) - max) for c in [0, n), and their LaneSum total: the
// loop the fast path runs, vectorized with AVX2 or AVX-512 where the CPU has it (the same
// bits as the scalar function and LaneSum).
double exp_row(const float* x, double max, double* e, int64_t n);

}  // namespace agtrace::ops::softmax_f32
