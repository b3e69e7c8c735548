// The float32 windows of max_pool2d: 1.13's rule (max_pool_window.hpp) with the choice made by
// masks instead of branches. On random data whether the next element is larger is a coin toss,
// and the mispredicted branches were most of max_pool2d's time (7 % of
// bench/scenarios/conv_block.json, `perf record`); GCC keeps the branches of the plain loop
// even with -fno-trapping-math. [fast_paths] compares this with the double loop bit for bit,
// ties, signed zeros, infinities and NaNs included.
#include <emmintrin.h>
#include <immintrin.h>

#include "ops/max_pool_window.hpp"
#include "util/cpu_features.hpp"

namespace agtrace::ops {
namespace {

// One window, its elements in the rule's order (rows, then columns within a row).
inline void one_window(const float* x, int64_t width, int64_t dh, int64_t dw, int64_t plane_start, int64_t h0,
                       int64_t h1, int64_t w0, int64_t w1, float* out, double* indices, int64_t o) {
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
}

// max_pool2d(2) as models write it (kernel 2, stride 2, no padding or dilation, every window
// whole): eight windows at a time. A window's four elements a, b (its first row) and c, d
// (its second) go through the rule in that order; a replaces the initial -inf unless it is
// -inf itself, which leaves the same value and the same index, so it starts as the max.
// The scalar windows took 150 instructions each (callgrind, conv_block).
// Target attributes on each function (a lambda would not inherit one; clang, which the fuzz
// build uses, ignores GCC's target pragma).
// Even and odd columns of 16 consecutive elements.
__attribute__((target("avx2"))) inline void split_pairs(const float* at, __m256& even, __m256& odd) {
  const __m256 lo = _mm256_loadu_ps(at), hi = _mm256_loadu_ps(at + 8);
  even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
  odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
}

// The rule's step for the next element v of eight windows, at offset `off` in the window.
__attribute__((target("avx2"))) inline void take_if_larger(__m256 v, int32_t off, __m256& best, __m256i& offset) {
  const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  best = _mm256_blendv_ps(best, v, take);
  offset = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(offset), _mm256_castsi256_ps(_mm256_set1_epi32(off)), take));
}

__attribute__((target("avx2"))) void pairs_avx2(const PoolGeometry& p, const float* x, float* out, double* indices) {
  const int64_t width = p.width, out_w = p.out_w, vec_w = out_w - out_w % 8;
  const __m256i lane_pairs = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const int64_t plane_start = plane * p.height * width;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const int64_t h0 = 2 * oh;
      const float* r0 = x + plane_start + h0 * width;
      const float* r1 = r0 + width;
      const int64_t o_row = (plane * p.out_h + oh) * out_w;
      for (int64_t ow = 0; ow < vec_w; ow += 8) {
        __m256 a, b, c, d;
        split_pairs(r0 + 2 * ow, a, b);
        split_pairs(r1 + 2 * ow, c, d);
        __m256 best = a;
        __m256i offset = _mm256_setzero_si256();
        take_if_larger(b, 1, best, offset);
        take_if_larger(c, static_cast<int32_t>(width), best, offset);
        take_if_larger(d, static_cast<int32_t>(width + 1), best, offset);
        _mm256_storeu_ps(out + o_row + ow, best);
        // Plane-relative index: h0 * width + 2 * (ow + lane) + offset (the plane is checked to
        // fit in 32 bits).
        const __m256i first = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(h0 * width + 2 * ow)), lane_pairs);
        const __m256i index = _mm256_add_epi32(first, offset);
        _mm256_storeu_pd(indices + o_row + ow, _mm256_cvtepi32_pd(_mm256_castsi256_si128(index)));
        _mm256_storeu_pd(indices + o_row + ow + 4, _mm256_cvtepi32_pd(_mm256_extracti128_si256(index, 1)));
      }
      for (int64_t ow = vec_w; ow < out_w; ++ow)
        one_window(x, width, 1, 1, plane_start, h0, h0 + 2, 2 * ow, 2 * ow + 2, out, indices, o_row + ow);
    }
  }
}

bool whole_pairs(const PoolGeometry& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0 && p.dh == 1 && p.dw == 1 &&
         2 * p.out_h <= p.height && 2 * p.out_w <= p.width && p.height * p.width < (int64_t{1} << 31);
}

}  // namespace

void max_pool_windows_f32(const PoolGeometry& p, const float* x, float* out, double* indices) {
  if (whole_pairs(p) && cpu_has_avx2_fma()) return pairs_avx2(p, x, out, indices);
  // Copies the loops keep in registers (read through `p`, they were reloaded every element).
  const int64_t width = p.width, dh = p.dh, dw = p.dw;
  for_each_pool_window(p, [=](int64_t plane_start, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t o) {
    one_window(x, width, dh, dw, plane_start, h0, h1, w0, w1, out, indices, o);
  });
}

}  // namespace agtrace::ops
