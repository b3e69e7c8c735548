// The fast path of float32 normal leaves (lib/scenario/init.cpp has the definition and the
// reasoning). Compiled with -O3 -fno-math-errno -fno-trapping-math (CMakeLists.txt): sqrt of
// -2 ln u (never negative) may then be the plain instruction and both of cos's polynomials
// may be computed and one chosen, which lets the element loop vectorize; neither changes a
// value, and every kept value is checked against the margin below anyway.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "scenario/normal_math.hpp"
#include "scenario/random.hpp"
#include "util/cpu_features.hpp"

namespace agtrace::normal_math {
namespace {

constexpr double kTwoPi = 2.0 * 3.141592653589793;

// x (< 2^54) as a double, exactly, with 32-bit halves put in the mantissa of 2^52: AVX2 has
// no 64-bit integer to double conversion, and without this the loop stays scalar.
inline double exact_double(uint64_t x) {
  const uint64_t hi_bits = 0x4330000000000000ULL | (x >> 32), lo_bits = 0x4330000000000000ULL | (x & 0xffffffffULL);
  double hi, lo;
  std::memcpy(&hi, &hi_bits, sizeof hi);
  std::memcpy(&lo, &lo_bits, sizeof lo);
  return (hi - 0x1.0p52) * 0x1.0p32 + (lo - 0x1.0p52);
}

// Element i takes draws 2i (u1, in (0, 1]) and 2i + 1 (u2, in [0, 1)), as the definition does.
// A value is kept when both ends of [v - margin, v + margin] round to the same float32: the
// definition's value lies inside (the polynomials are within 1e-15 of libm; the margin allows
// 1e-13 relative on each part), and rounding is monotonic. Otherwise the definition decides.
#define AGTRACE_NORMAL_F32_LOOP                                                                      \
  constexpr int64_t kBlock = 256;                                                                    \
  double value[kBlock], margin[kBlock];                                                              \
  for (int64_t start = begin; start < end; start += kBlock) {                                        \
    const int64_t count = std::min(kBlock, end - start);                                             \
    for (int64_t j = 0; j < count; ++j) {                                                            \
      const uint64_t k = static_cast<uint64_t>(2 * (start + j));                                     \
      const double u1 = exact_double((SplitMix64::draw(state0, k) >> 11) + 1) * 0x1.0p-53;              \
      const double u2 = exact_double(SplitMix64::draw(state0, k + 1) >> 11) * 0x1.0p-53;                \
      const double root = std::sqrt(-2.0 * log_unit_interval(u1));                                   \
      const double v = mean + stddev * (root * cos_zero_to_two_pi(kTwoPi * u2));                     \
      value[j] = v;                                                                                  \
      margin[j] = std::fabs(stddev) * (4 * kFastNormalBound) * (root + 1e-30) +                      \
                  std::fabs(v) * kFastNormalBound;                                                   \
    }                                                                                                \
    int undecided = 0;                                                                               \
    for (int64_t j = 0; j < count; ++j) {                                                            \
      const float below = static_cast<float>(value[j] - margin[j]);                                  \
      const float above = static_cast<float>(value[j] + margin[j]);                                  \
      dst[start + j] = below;                                                                        \
      undecided |= below != above;                                                                   \
    }                                                                                                \
    if (undecided)                                                                                   \
      for (int64_t j = 0; j < count; ++j)                                                            \
        if (static_cast<float>(value[j] + margin[j]) != dst[start + j])                              \
          dst[start + j] = normal_element_by_definition(state0, start + j, mean, stddev);            \
  }

void block_baseline(uint64_t state0, double mean, double stddev, float* dst, int64_t begin, int64_t end) {
  AGTRACE_NORMAL_F32_LOOP
}
__attribute__((target("avx2,fma"))) void block_avx2(uint64_t state0, double mean, double stddev, float* dst,
                                                     int64_t begin, int64_t end) {
  AGTRACE_NORMAL_F32_LOOP
}
// AVX-512DQ multiplies 64-bit lanes (SplitMix64's two multiplies per draw, which AVX2 builds
// from three 32-bit multiplies each) and holds 8 doubles per vector.
__attribute__((target("avx512f,avx512dq,avx512vl,fma,prefer-vector-width=512"))) void block_avx512(
    uint64_t state0, double mean, double stddev, float* dst, int64_t begin, int64_t end) {
  AGTRACE_NORMAL_F32_LOOP
}
#undef AGTRACE_NORMAL_F32_LOOP

}  // namespace

bool normal_build_available(NormalBuild build) {
  switch (build) {
    case NormalBuild::Baseline:
      return true;
    case NormalBuild::Avx2:
      return cpu_has_avx2_fma();
    case NormalBuild::Avx512:
      return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

void fill_normal_f32_block_with(NormalBuild build, uint64_t state0, double mean, double stddev, float* dst,
                                int64_t begin, int64_t end) {
  switch (build) {
    case NormalBuild::Avx512:
      block_avx512(state0, mean, stddev, dst, begin, end);
      return;
    case NormalBuild::Avx2:
      block_avx2(state0, mean, stddev, dst, begin, end);
      return;
    case NormalBuild::Baseline:
      block_baseline(state0, mean, stddev, dst, begin, end);
      return;
  }
}

void fill_normal_f32_block(uint64_t state0, double mean, double stddev, float* dst, int64_t begin, int64_t end) {
  static const NormalBuild best = normal_build_available(NormalBuild::Avx512) ? NormalBuild::Avx512
                                  : normal_build_available(NormalBuild::Avx2) ? NormalBuild::Avx2
                                                                              : NormalBuild::Baseline;
  fill_normal_f32_block_with(best, state0, mean, stddev, dst, begin, end);
}

}  // namespace agtrace::normal_math
