// The arithmetic behind softmax's float32 rows (ops/softmax_f32.hpp) and the lane order of
// row sums (tensor/lane_sum.hpp), issue #6. The fast paths against the general paths, bit
// for bit, are in tests/tensor/test_fast_paths.cpp; here: the exp against glibc's, its edge
// values, the vector loops against the scalar function, and the lane order itself.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/softmax_f32.hpp"
#include "tensor/lane_sum.hpp"

namespace softmax_f32 = agtrace::ops::softmax_f32;
using agtrace::LaneSum;

namespace {
int64_t ulps_apart(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return ia > ib ? ia - ib : ib - ia;
}
// Deterministic doubles in [lo, hi).
std::vector<double> spread(size_t n, double lo, double hi, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed;
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * (static_cast<double>(s >> 11) / 9007199254740992.0);
  }
  return v;
}
}  // namespace

TEST_CASE("softmax_f32: exp is within 1 ulp of glibc's and rounds to the same float32", "[softmax_f32]") {
  int64_t worst = 0, float_differences = 0;
  for (double range : {1.0, 20.0, 708.0}) {
    for (double x : spread(200000, -range, 0.0, static_cast<uint64_t>(range))) {
      const double mine = softmax_f32::exp_nonpositive(x), libm = std::exp(x);
      worst = std::max(worst, ulps_apart(mine, libm));
      if (static_cast<float>(mine) != static_cast<float>(libm)) ++float_differences;
    }
  }
  CHECK(worst <= 1);
  CHECK(float_differences == 0);
}

TEST_CASE("softmax_f32: exp at its edges", "[softmax_f32]") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(softmax_f32::exp_nonpositive(0.0) == 1.0);
  CHECK(softmax_f32::exp_nonpositive(-0.0) == 1.0);
  CHECK(softmax_f32::exp_nonpositive(-inf) == 0.0);
  CHECK(std::isnan(softmax_f32::exp_nonpositive(std::nan(""))));
  CHECK(softmax_f32::exp_nonpositive(-708.5) == 0.0);  // below the normal range of 2^n: 0
  const double at_edge = softmax_f32::exp_nonpositive(-708.0);
  CHECK(at_edge > 0.0);
  CHECK(ulps_apart(at_edge, std::exp(-708.0)) <= 1);
  CHECK(softmax_f32::exp_nonpositive(-std::log(2.0)) == 0.5);
}

TEST_CASE("softmax_f32: the row loops give the scalar function's bits and LaneSum's total", "[softmax_f32]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 127, 128, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    const std::vector<double> v = spread(static_cast<size_t>(n), -30.0, 30.0, static_cast<uint64_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(v[static_cast<size_t>(i)]);
    for (int variant = 0; variant < 3; ++variant) {
      if (variant == 1 && n > 3) x[3] = -inf;                   // a masked element
      if (variant == 2 && n > 5) x[static_cast<size_t>(n) - 2] = nan;  // NaN is skipped by the max
      INFO("n " << n << " variant " << variant);
      float want_max = -inf;
      for (float e : x) want_max = std::max(want_max, e);
      const float got_max = softmax_f32::row_max(x.data(), n);
      CHECK(std::memcmp(&got_max, &want_max, sizeof got_max) == 0);
      std::vector<double> e(static_cast<size_t>(n));
      const double total = softmax_f32::exp_row(x.data(), static_cast<double>(want_max), e.data(), n);
      LaneSum want_total;
      for (int64_t i = 0; i < n; ++i) {
        const double want = softmax_f32::exp_nonpositive(static_cast<double>(x[static_cast<size_t>(i)]) - want_max);
        want_total.add(i, want);
        const double got = e[static_cast<size_t>(i)];
        CHECK((std::memcmp(&got, &want, sizeof got) == 0 || (std::isnan(got) && std::isnan(want))));
      }
      const double want_sum = want_total.total();
      CHECK((std::memcmp(&total, &want_sum, sizeof total) == 0 || (std::isnan(total) && std::isnan(want_sum))));
    }
  }
}

TEST_CASE("lane sums: element k goes into lane k % 8, the lanes are added pairwise", "[softmax_f32]") {
  // 2^53 + 1 is not a double: the order of additions shows in the result.
  const double big = 9007199254740992.0;  // 2^53
  std::vector<float> x(16, 0.0f);
  x[0] = static_cast<float>(big);
  x[4] = 1.0f;  // lane 4
  x[5] = 1.0f;  // lane 5
  x[8] = 1.0f;  // lane 0, with x[0]: 2^53 + 1 rounds back to 2^53 (ties to even)
  // Lanes {2^53, 0, 0, 0, 1, 1, 0, 0}: ((2^53 + 0) + (0 + 0)) + ((1 + 1) + (0 + 0)) = 2^53 + 2.
  CHECK(agtrace::lane_sum(x.data(), 16) == big + 2.0);
  double in_order = 0.0;
  for (float f : x) in_order += static_cast<double>(f);
  CHECK(in_order == big);  // element order: each + 1 rounds away
  LaneSum s;
  for (int64_t k = 0; k < 16; ++k) s.add(k, static_cast<double>(x[static_cast<size_t>(k)]));
  CHECK(s.total() == agtrace::lane_sum(x.data(), 16));
  // A tail shorter than 8 lanes.
  CHECK(agtrace::lane_sum(x.data(), 3) == big);
}
