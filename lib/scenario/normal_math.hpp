// The polynomial log and cos behind the fast float32 normal initialiser (lib/scenario/normal_f32.cpp).
// They are not the definition of a normal value (libm's log and cos are, lib/scenario/init.cpp);
// the initialiser keeps their result only when a margin of 1e-13 around it cannot change the
// float32, and tests/scenario/test_scenario.cpp checks that they stay within 1e-15 of libm.
#pragma once
#include <cstdint>
#include <cstring>

namespace agtrace::normal_math {

// The margin the fast path allows each part (log, cos, the final multiply-add) relative to
// libm's: 100 times the polynomials' measured error against libm.
constexpr double kFastNormalBound = 1e-13;

// Element `index` of a float32 normal leaf by the definition (libm's log and cos;
// lib/scenario/init.cpp), for the values the fast path cannot decide.
float normal_element_by_definition(uint64_t state0, int64_t index, double mean, double stddev);

// Elements [begin, end) of a float32 normal leaf into dst, with the definition's bits, by
// the fastest build of the loop this CPU runs.
void fill_normal_f32_block(uint64_t state0, double mean, double stddev, float* dst, int64_t begin, int64_t end);

// The loop's builds, each giving the definition's bits (tests run every one the host has).
enum class NormalBuild { Baseline, Avx2, Avx512 };
bool normal_build_available(NormalBuild build);
void fill_normal_f32_block_with(NormalBuild build, uint64_t state0, double mean, double stddev, float* dst,
                                int64_t begin, int64_t end);


// ln(u) for u in [2^-53, 1]: u = 2^e * m with m in [sqrt(1/2), sqrt(2)),
// ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, summed to s^23 (next term < 1e-18).
inline double log_unit_interval(double u) {
  uint64_t bits;
  std::memcpy(&bits, &u, sizeof bits);
  // The exponent as a double through the mantissa of 2^52 (no 64-bit conversion in AVX2).
  const uint64_t ebits = 0x4330000000000000ULL | (bits >> 52);
  double e;
  std::memcpy(&e, &ebits, sizeof e);
  e -= 0x1.0p52 + 1023.0;
  uint64_t mbits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m;
  std::memcpy(&m, &mbits, sizeof m);
  const bool high = m > 1.4142135623730951;
  m = high ? m * 0.5 : m;
  e += high ? 1.0 : 0.0;
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double p = 1.0 / 23;
  p = p * s2 + 1.0 / 21; p = p * s2 + 1.0 / 19; p = p * s2 + 1.0 / 17; p = p * s2 + 1.0 / 15;
  p = p * s2 + 1.0 / 13; p = p * s2 + 1.0 / 11; p = p * s2 + 1.0 / 9;  p = p * s2 + 1.0 / 7;
  p = p * s2 + 1.0 / 5;  p = p * s2 + 1.0 / 3;  p = p * s2 + 1.0;
  return e * 0.6931471805599453 + 2.0 * s * p;
}

// cos(x) for x in [0, 2 pi]: x = k pi/2 + r, |r| <= pi/4 (+ rounding), then +-cos r or
// +-sin r by Taylor series to r^18 / r^17 (next terms < 1e-19).
inline double cos_zero_to_two_pi(double x) {
  constexpr double kHalfPiHi = 1.5707963267948966, kHalfPiLo = 6.123233995736766e-17;
  const double k = static_cast<double>(static_cast<int32_t>(x * 0.6366197723675814 + 0.5));  // 0 .. 4
  const double r = (x - k * kHalfPiHi) - k * kHalfPiLo, r2 = r * r;
  double c = -1.0 / 6402373705728000.0;  // -1/18!
  c = c * r2 + 1.0 / 20922789888000.0; c = c * r2 - 1.0 / 87178291200.0; c = c * r2 + 1.0 / 479001600.0;
  c = c * r2 - 1.0 / 3628800.0;        c = c * r2 + 1.0 / 40320.0;        c = c * r2 - 1.0 / 720.0;
  c = c * r2 + 1.0 / 24.0;             c = c * r2 - 0.5;                  c = c * r2 + 1.0;
  double sn = 1.0 / 355687428096000.0;  // 1/17!
  sn = sn * r2 - 1.0 / 1307674368000.0; sn = sn * r2 + 1.0 / 6227020800.0; sn = sn * r2 - 1.0 / 39916800.0;
  sn = sn * r2 + 1.0 / 362880.0;        sn = sn * r2 - 1.0 / 5040.0;        sn = sn * r2 + 1.0 / 120.0;
  sn = sn * r2 - 1.0 / 6.0;             sn = sn * r2 + 1.0;                 sn = sn * r;
  // Bitwise, not short-circuit, so that the selection stays branch-free and vectorizes.
  const double v = ((k == 1.0) | (k == 3.0)) ? sn : c;
  return ((k == 1.0) | (k == 2.0)) ? -v : v;
}

}  // namespace agtrace::normal_math
