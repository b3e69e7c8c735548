#include "ops/batch_norm_cpu.hpp"

#include <cmath>

#include "util/cpu_features.hpp"
#include "util/gcc_pragma.hpp"

// No contraction beyond the std::fma calls written, so the build for any x86-64 (fmaf from
// libm) and the AVX2 build (FMA instructions) agree bit for bit; O3 vectorizes the plane loop.
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC optimize("fp-contract=off", "O3"))

namespace agtrace::ops::batch_norm_cpu {
namespace {

void affine_any(const float* x, float* out, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(x[i], alpha, beta);
}

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx2,fma"))
void affine_avx2(const float* x, float* out, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(x[i], alpha, beta);
}
AGTRACE_GCC_PRAGMA(GCC pop_options)

}  // namespace

ChannelStats channel_moments(const float* x, int64_t batch, int64_t channels, int64_t inner, int64_t c) {
  double sum = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* plane = x + (b * channels + c) * inner;
    for (int64_t i = 0; i < inner; ++i) sum += plane[i];
  }
  ChannelStats s;
  s.mean = static_cast<float>(sum / static_cast<double>(batch * inner));
  double var_sum = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* plane = x + (b * channels + c) * inner;
    for (int64_t i = 0; i < inner; ++i) {
      const float d = plane[i] - s.mean;
      var_sum += d * d;  // the square in float, then widened
    }
  }
  s.var_sum = static_cast<float>(var_sum);
  return s;
}

float training_invstd(const ChannelStats& s, int64_t count, double eps) {
  const float var = s.var_sum / static_cast<float>(count);
  // InvStd: 0 for a zero variance with a zero eps.
  if (var == 0.0f && eps == 0.0) return 0.0f;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(var) + eps));
}

void update_running(const ChannelStats& s, int64_t count, double momentum, float* running_mean, float* running_var) {
  const float step = static_cast<float>(momentum), keep = 1.0f - step;
  if (running_mean) *running_mean = step * s.mean + keep * *running_mean;
  if (running_var) {
    const double unbiased = s.var_sum / static_cast<float>(count - 1);
    *running_var = static_cast<float>(step * unbiased + keep * *running_var);
  }
}

float eval_invstd(float running_var, double eps) {
  return 1.0f / std::sqrt(running_var + static_cast<float>(eps));
}

void normalize_channel(const float* x, float* out, int64_t batch, int64_t channels, int64_t inner, int64_t c,
                       float mean, float invstd, float weight, float bias) {
  const float alpha = invstd * weight;
  const float beta = std::fma(-mean, alpha, bias);
  const bool avx2 = cpu_has_avx2_fma();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t at = (b * channels + c) * inner;
    if (avx2) affine_avx2(x + at, out + at, inner, alpha, beta);
    else affine_any(x + at, out + at, inner, alpha, beta);
  }
}

}  // namespace agtrace::ops::batch_norm_cpu

AGTRACE_GCC_PRAGMA(GCC pop_options)
