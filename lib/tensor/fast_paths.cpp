#include "tensor/fast_paths.hpp"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace agtrace::kernels {

// Written with SSE2 intrinsics: GCC keeps a branch per element for these selections under
// its default -ftrapping-math (not vectorised; the mispredicted branch on relu's half-zero
// masks made relu's backward 7.5 % of bench/scenarios/mlp_step.json). The scalar tails and
// the non-SSE2 build compute the same expressions.
void relu_f32(const float* x, float* o, int64_t n) {
  int64_t i = 0;
#ifdef __SSE2__
  const __m128 zero = _mm_setzero_ps();
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    _mm_storeu_ps(o + i, _mm_andnot_ps(_mm_cmplt_ps(v, zero), v));  // v < 0 (ordered) -> +0
  }
#endif
  for (; i < n; ++i) o[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void relu_backward_f32(const float* g, const float* r, float* o, int64_t n) {
  int64_t i = 0;
#ifdef __SSE2__
  const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f);
  for (; i + 4 <= n; i += 4) {
    const __m128 mask = _mm_andnot_ps(_mm_cmple_ps(_mm_loadu_ps(r + i), zero), one);  // r <= 0 -> 0, else 1
    _mm_storeu_ps(o + i, _mm_mul_ps(_mm_loadu_ps(g + i), mask));
  }
#endif
  for (; i < n; ++i) o[i] = g[i] * (r[i] <= 0.0f ? 0.0f : 1.0f);
}

void select_fill_f32(const float* x, const uint32_t* take_fill, float fill, float* o, int64_t n) {
  int64_t i = 0;
#ifdef __SSE2__
  const __m128 f = _mm_set1_ps(fill);
  for (; i + 4 <= n; i += 4) {
    const __m128 take = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(take_fill + i)));
    _mm_storeu_ps(o + i, _mm_or_ps(_mm_and_ps(take, f), _mm_andnot_ps(take, _mm_loadu_ps(x + i))));
  }
#endif
  for (; i < n; ++i) o[i] = take_fill[i] != 0 ? fill : x[i];
}

}  // namespace agtrace::kernels
