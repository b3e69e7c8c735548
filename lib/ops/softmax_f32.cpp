#include "ops/softmax_f32.hpp"

#include <cstring>
#include <limits>

#include "util/gcc_pragma.hpp"

// No contraction of a * b + c into an fma: the scalar build (the general path) and the
// vector builds must agree bit for bit. O3 vectorizes the row loops; the file is compiled
// with -fno-trapping-math (CMakeLists.txt) so that the selects become blends.
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC optimize("fp-contract=off", "O3"))

namespace agtrace::ops::softmax_f32 {

namespace {

__attribute__((always_inline)) inline double exp_body(double x) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000
  constexpr double kLn2Lo = 1.90821492927058770002e-10;  // ln2 - kLn2Hi
  constexpr double kRound = 6755399441055744.0;          // 1.5 * 2^52: adding it rounds to an integer
  constexpr uint64_t kRoundBits = 0x4338000000000000ull;  // its bits
  const double xc = x < -708.0 ? -708.0 : x;
  // n = round(x / ln2), read off the mantissa of x log2e + 1.5 * 2^52 (no double-to-int
  // conversion: a NaN stays defined in the integer lanes and propagates through r and p).
  const double shifted = xc * kLog2e + kRound;
  const double n = shifted - kRound;
  uint64_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  double r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  // Taylor coefficients 1/k!, k = 13 down to 2, each the double nearest to it.
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const uint64_t bits = (shifted_bits - kRoundBits + 1023u) << 52;  // 2^n: n + 1023 in the exponent
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -708.0 ? 0.0 : p * scale;
}

namespace baseline {
#include "ops/softmax_f32_body.inc"
}  // namespace baseline

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx2"))
namespace avx2 {
#include "ops/softmax_f32_body.inc"
}  // namespace avx2
AGTRACE_GCC_PRAGMA(GCC pop_options)

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx512f", "prefer-vector-width=512"))
namespace avx512 {
#include "ops/softmax_f32_body.inc"
}  // namespace avx512
AGTRACE_GCC_PRAGMA(GCC pop_options)

enum class Isa { Baseline, Avx2, Avx512 };
Isa isa() {
  static const Isa which = __builtin_cpu_supports("avx512f") ? Isa::Avx512
                           : __builtin_cpu_supports("avx2")  ? Isa::Avx2
                                                             : Isa::Baseline;
  return which;
}

}  // namespace

double exp_nonpositive(double x) { return exp_body(x); }

float row_max(const float* x, int64_t n) {
  switch (isa()) {
    case Isa::Avx512: return avx512::max_loop(x, n);
    case Isa::Avx2: return avx2::max_loop(x, n);
    default: return baseline::max_loop(x, n);
  }
}

double exp_row(const float* x, double max, double* e, int64_t n) {
  switch (isa()) {
    case Isa::Avx512: return avx512::exp_loop(x, max, e, n);
    case Isa::Avx2: return avx2::exp_loop(x, max, e, n);
    default: return baseline::exp_loop(x, max, e, n);
  }
}

}  // namespace agtrace::ops::softmax_f32

AGTRACE_GCC_PRAGMA(GCC pop_options)
