#include "ops/gelu_f32.hpp"

#include <cmath>
#include <cstring>

#include "util/cpu_features.hpp"
#include "util/gcc_pragma.hpp"

// No contraction of a * b + c into an fma beyond the ones written: PyTorch's Vectorized
// operators multiply and add separately, and both builds below must agree bit for bit
// (fma is exact by definition, so the one with FMA instructions and the one calling fmaf
// give the same results). O3: GCC 12's -O2 vectorizes only loops that need no epilogue; the
// file is compiled with -fno-trapping-math (CMakeLists.txt), without which the selects of
// exp_neg stay branches and the loops do not vectorize.
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC optimize("fp-contract=off", "O3"))

namespace agtrace::ops::gelu_f32 {

namespace {
namespace baseline {
#include "ops/gelu_f32_body.inc"
}  // namespace baseline

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx2,fma"))
namespace avx2 {
#include "ops/gelu_f32_body.inc"
}  // namespace avx2
AGTRACE_GCC_PRAGMA(GCC pop_options)
}  // namespace

float forward(float x) { return baseline::forward_inline(x); }
float backward(float dy, float x) { return baseline::backward_inline(dy, x); }

void forward_block(const float* x, float* o, int64_t n) {
  if (cpu_has_avx2_fma()) avx2::forward_loop(x, o, n);
  else baseline::forward_loop(x, o, n);
}

void backward_block(const float* dy, const float* x, float* o, int64_t n) {
  if (cpu_has_avx2_fma()) avx2::backward_loop(dy, x, o, n);
  else baseline::backward_loop(dy, x, o, n);
}

}  // namespace agtrace::ops::gelu_f32

AGTRACE_GCC_PRAGMA(GCC pop_options)
