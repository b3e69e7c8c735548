#include "ops/batch_norm_cpu.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/layer_norm_cpu.hpp"

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

// at::vec's AVX2 horizontal fold (VecReduceAllSIMD<float>): halves, then pairs, then
// neighbours.
float fold8(const float* v) {
  float a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = v[i] + v[i ^ 4];
  for (int i = 0; i < 8; ++i) b[i] = a[i] + a[i ^ 2];
  return b[0] + b[1];
}

// reduce_all(+) over one plane of dy and map2_reduce_all((x - mean) * dy, +) over the same,
// in at::vec's eight AVX2 lanes.
constexpr int kLanes = 8;
void plane_sums(const float* x, const float* dy, int64_t n, float mean, float& sum, float& dot) {
  if (n < kLanes) {
    // Fewer elements than lanes: lane 0 takes the others in order.
    sum = dy[0];
    dot = (x[0] - mean) * dy[0];
    for (int64_t i = 1; i < n; ++i) {
      sum = sum + dy[i];
      dot = dot + (x[i] - mean) * dy[i];
    }
    return;
  }
  float s[kLanes], d[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    s[l] = dy[l];
    d[l] = (x[l] - mean) * dy[l];
  }
  int64_t at = kLanes;
  const int64_t full = n - n % kLanes;
  for (; at < full; at += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      s[l] = s[l] + dy[at + l];
      d[l] = std::fma(x[at + l] - mean, dy[at + l], d[l]);
    }
  for (int l = 0; at + l < n; ++l) {
    s[l] = s[l] + dy[at + l];
    d[l] = std::fma(x[at + l] - mean, dy[at + l], d[l]);
  }
  sum = fold8(s);
  dot = fold8(d);
}

void input_grad_training(const float* x, const float* dy, float* dx, int64_t n, float mean, float k, float grad_mean,
                         float invstd, float weight) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::fma(-(x[i] - mean), k, dy[i] - grad_mean) * invstd * weight;
}
void input_grad_eval(const float* dy, float* dx, int64_t n, float invstd, float weight) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * invstd * weight;
}

AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx2,fma"))
// plane_sums in AVX2 registers (the function above, compiled for any x86-64, calls libm's
// fmaf per element).
// The target attribute as well as the pragma: clang, which ignores GCC's pragma (the fuzz
// build), needs it for the intrinsics.
__attribute__((target("avx2,fma"))) void plane_sums_avx2(const float* x, const float* dy, int64_t n, float mean,
                                                         float& sum, float& dot) {
  if (n < kLanes) return plane_sums(x, dy, n, mean, sum, dot);
  const __m256 m = _mm256_set1_ps(mean);
  __m256 s = _mm256_loadu_ps(dy);
  __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x), m), s);
  int64_t at = 8;
  const int64_t full = n - n % 8;
  for (; at < full; at += 8) {
    const __m256 g = _mm256_loadu_ps(dy + at);
    s = _mm256_add_ps(s, g);
    d = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + at), m), g, d);
  }
  float sl[8], dl[8];
  _mm256_storeu_ps(sl, s);
  _mm256_storeu_ps(dl, d);
  for (int l = 0; at + l < n; ++l) {
    sl[l] = sl[l] + dy[at + l];
    dl[l] = std::fma(x[at + l] - mean, dy[at + l], dl[l]);
  }
  sum = fold8(sl);
  dot = fold8(dl);
}
void input_grad_training_avx2(const float* x, const float* dy, float* dx, int64_t n, float mean, float k,
                              float grad_mean, float invstd, float weight) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::fma(-(x[i] - mean), k, dy[i] - grad_mean) * invstd * weight;
}
AGTRACE_GCC_PRAGMA(GCC pop_options)

}  // namespace

ChannelGrads backward_channel(const float* x, const float* dy, float* dx, int64_t batch, int64_t channels,
                              int64_t inner, int64_t c, float mean, float invstd, float weight, bool training) {
  const bool avx2 = cpu_has_avx2_fma();
  double sum = 0.0, dot = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t at = (b * channels + c) * inner;
    float plane_sum, plane_dot;
    if (avx2) plane_sums_avx2(x + at, dy + at, inner, mean, plane_sum, plane_dot);
    else plane_sums(x + at, dy + at, inner, mean, plane_sum, plane_dot);
    sum += plane_sum;
    dot += plane_dot;
  }
  if (dx) {
    const int64_t count = batch * inner;
    const float k = static_cast<float>(dot) * invstd * invstd / static_cast<float>(count);
    const float grad_mean = static_cast<float>(sum / static_cast<double>(count));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t at = (b * channels + c) * inner;
      if (!training) input_grad_eval(dy + at, dx + at, inner, invstd, weight);
      else if (avx2) input_grad_training_avx2(x + at, dy + at, dx + at, inner, mean, k, grad_mean, invstd, weight);
      else input_grad_training(x + at, dy + at, dx + at, inner, mean, k, grad_mean, invstd, weight);
    }
  }
  ChannelGrads g;
  g.weight = static_cast<float>(dot * static_cast<double>(invstd));
  g.bias = static_cast<float>(sum);
  return g;
}

float eval_backward_invstd(float running_var, double eps) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var) + eps));
}

namespace {
// Channels c to c + kChannels - 1: each channel's double sums in torch's order, the
// channels' chains side by side.
template <int kChannels>
void moments_of(const float* x, int64_t batch, int64_t channels, int64_t inner, int64_t c, ChannelStats* out) {
  const double count = static_cast<double>(batch * inner);
  double sum[kChannels] = {};
  for (int64_t b = 0; b < batch; ++b) {
    const float* p = x + (b * channels + c) * inner;
    for (int64_t i = 0; i < inner; ++i)
      for (int j = 0; j < kChannels; ++j) sum[j] += p[j * inner + i];
  }
  float mean[kChannels];
  for (int j = 0; j < kChannels; ++j) mean[j] = static_cast<float>(sum[j] / count);
  double var_sum[kChannels] = {};
  for (int64_t b = 0; b < batch; ++b) {
    const float* p = x + (b * channels + c) * inner;
    for (int64_t i = 0; i < inner; ++i)
      for (int j = 0; j < kChannels; ++j) {
        const float d = p[j * inner + i] - mean[j];
        var_sum[j] += d * d;  // the square in float, then widened
      }
  }
  for (int j = 0; j < kChannels; ++j) out[j] = {mean[j], static_cast<float>(var_sum[j])};
}
}  // namespace

std::vector<ChannelStats> moments(const float* x, int64_t batch, int64_t channels, int64_t inner) {
  std::vector<ChannelStats> out(static_cast<size_t>(channels));
  int64_t c = 0;
  for (; c + 4 <= channels; c += 4) moments_of<4>(x, batch, channels, inner, c, out.data() + c);
  for (; c < channels; ++c) moments_of<1>(x, batch, channels, inner, c, out.data() + c);
  return out;
}

namespace {
// The channels-last kernels' second pass: per channel, the `threads` rows of a float buffer
// (unused ones zero) added in double, in thread order.
std::vector<double> thread_rows_sum(const std::vector<float>& buffer, int threads, size_t width) {
  std::vector<double> sums(width, 0.0);
  for (int t = 0; t < threads; ++t)
    for (size_t c = 0; c < width; ++c) sums[c] += buffer[t * width + c];
  return sums;
}
}  // namespace

std::vector<ChannelStats> moments_channels_last(const float* x, int64_t rows, int64_t channels, int threads) {
  // Rows no more than threads: one double sum per channel, the contiguous rule's loops.
  if (rows <= threads) return moments(x, rows, channels, 1);
  const size_t width = static_cast<size_t>(channels);
  const auto ranges = layer_norm_cpu::thread_row_ranges(rows, threads);
  std::vector<float> buffer(static_cast<size_t>(threads) * width, 0.0f);
  // Each thread's rows added into its row of the buffer in float, then thread_rows_sum.
  for (size_t t = 0; t < ranges.size(); ++t)
    for (int64_t i = ranges[t].first; i < ranges[t].second; ++i) {
      const float* xi = x + i * channels;
      float* b = buffer.data() + t * width;
      for (size_t c = 0; c < width; ++c) b[c] += xi[c];
    }
  std::vector<double> sums = thread_rows_sum(buffer, threads, width);
  std::vector<ChannelStats> out(width);
  for (size_t c = 0; c < width; ++c) out[c].mean = static_cast<float>(sums[c] / static_cast<double>(rows));
  std::fill(buffer.begin(), buffer.end(), 0.0f);
  for (size_t t = 0; t < ranges.size(); ++t)
    for (int64_t i = ranges[t].first; i < ranges[t].second; ++i) {
      const float* xi = x + i * channels;
      float* b = buffer.data() + t * width;
      for (size_t c = 0; c < width; ++c) {
        const float d = xi[c] - out[c].mean;
        b[c] = std::fma(d, d, b[c]);
      }
    }
  sums = thread_rows_sum(buffer, threads, width);
  for (size_t c = 0; c < width; ++c) out[c].var_sum = static_cast<float>(sums[c]);
  return out;
}

void backward_channels_last(const float* x, const float* dy, float* dx, int64_t rows, int64_t channels,
                            const float* mean, const float* invstd, const float* weight, bool training, int threads,
                            float* grad_weight, float* grad_bias) {
  const size_t width = static_cast<size_t>(channels);
  const auto ranges = layer_norm_cpu::thread_row_ranges(rows, threads);
  std::vector<float> sum_buffer(static_cast<size_t>(threads) * width, 0.0f), dot_buffer(sum_buffer.size(), 0.0f);
  for (size_t t = 0; t < ranges.size(); ++t)
    for (int64_t i = ranges[t].first; i < ranges[t].second; ++i) {
      const float* xi = x + i * channels;
      const float* gi = dy + i * channels;
      float* s = sum_buffer.data() + t * width;
      float* d = dot_buffer.data() + t * width;
      for (size_t c = 0; c < width; ++c) {
        s[c] += gi[c];
        d[c] = std::fma(xi[c] - mean[c], gi[c], d[c]);
      }
    }
  // The threads' rows added in double, kept as floats (torch stores them back into the buffer).
  const std::vector<double> sum_d = thread_rows_sum(sum_buffer, threads, width);
  const std::vector<double> dot_d = thread_rows_sum(dot_buffer, threads, width);
  const std::vector<float> sum(sum_d.begin(), sum_d.end()), dot(dot_d.begin(), dot_d.end());
  if (dx) {
    const float count = static_cast<float>(rows);
    for (int64_t i = 0; i < rows; ++i) {
      const float* xi = x + i * channels;
      const float* gi = dy + i * channels;
      float* o = dx + i * channels;
      for (size_t c = 0; c < width; ++c) {
        const float w = weight ? weight[c] : 1.0f;
        if (training) {
          const float k = dot[c] * invstd[c] * invstd[c] / count;
          const float grad_mean = sum[c] / count;
          o[c] = std::fma(-(xi[c] - mean[c]), k, gi[c] - grad_mean) * invstd[c] * w;
        } else {
          o[c] = gi[c] * invstd[c] * w;
        }
      }
    }
  }
  for (size_t c = 0; c < width; ++c) {
    if (grad_weight) grad_weight[c] = dot[c] * invstd[c];
    if (grad_bias) grad_bias[c] = sum[c];
  }
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
