// The float32 windows of max_pool2d: 1.13's rule (max_pool_window.hpp) with the choice made by
// masks instead of branches. On random data whether the next element is larger is a coin toss,
// and the mispredicted branches were most of max_pool2d's time (7 % of
// bench/scenarios/conv_block.json, `perf record`); GCC keeps the branches of the plain loop
// even with -fno-trapping-math. [fast_paths] compares this with the double loop bit for bit,
// ties, signed zeros, infinities and NaNs included.
#include <emmintrin.h>

#include "ops/max_pool_window.hpp"

namespace agtrace::ops {

void max_pool_windows_f32(const PoolGeometry& p, const float* x, float* out, double* indices) {
  // Copies the loops keep in registers (read through `p`, they were reloaded every element).
  const int64_t width = p.width, dh = p.dh, dw = p.dw;
  for_each_pool_window(p, [=](int64_t plane_start, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t o) {
    int64_t best = h0 * width + w0;
    __m128 best_v = _mm_set_ss(-std::numeric_limits<float>::infinity());
    for (int64_t h = h0; h < h1; h += dh) {
      const float* row = x + plane_start + h * width;
      for (int64_t w = w0; w < w1; w += dw) {
        const __m128 v = _mm_load_ss(row + w);
        // val > maxval || isnan(val): all ones where the element replaces the max.
        const __m128 take = _mm_or_ps(_mm_cmpgt_ss(v, best_v), _mm_cmpunord_ss(v, v));
        best_v = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, best_v));
        const int64_t mask = _mm_cvtsi128_si32(_mm_castps_si128(take));  // 0 or -1, sign-extended
        best = (best & ~mask) | ((h * width + w) & mask);
      }
    }
    out[o] = _mm_cvtss_f32(best_v);
    indices[o] = static_cast<double>(best);
  });
}

}  // namespace agtrace::ops
