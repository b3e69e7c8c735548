// batch_norm's arithmetic on the CPU for a contiguous float32 input with more than one element
// per channel and sample (NCHW, as after a convolution), as torch 1.13's Debian build computes
// it (measured bit for bit: tests/ops/test_batch_norm_cpu.cpp, references from
// tests/tools/batch_norm_cpu_reference.py):
// - batch_norm_cpu_collect_stats_contiguous_impl: the sum and the sum of squared differences
//   accumulated in double in storage order, the mean rounded to float before the differences,
//   which are taken and squared in float;
// - batch_norm_cpu_update_stats_template: the variance the float sum over the count as a float,
//   invstd 1 / sqrt(var + eps) in double; the momentum as a float (param_t), the running mean's
//   step in float, the running variance's in double from the unbiased float quotient;
// - batch_norm_cpu_contiguous_impl: alpha = invstd * weight, beta = bias - mean * alpha and
//   out = x * alpha + beta, each a*b+c fused (GCC contracts them in the AVX2 build; the
//   unfused forms differ in 30 % of the outputs of a 32x16x32x32 input).
// One element per plane takes the channels-last kernels below; another layout or dtype takes
// nn.cpp's general rule.
#pragma once
#include <cstdint>
#include <vector>

namespace agtrace::ops::batch_norm_cpu {

struct ChannelStats {
  float mean = 0.0f;
  float var_sum = 0.0f;
};

// Every channel's mean and sum of squared differences over the batch and the plane. Each
// channel's adds stay in its own order, one after the other as torch's loop takes them, but
// four channels' chains run side by side (a serial double sum waits for each add: a channel
// at a time was 8 % of conv_block's run).
std::vector<ChannelStats> moments(const float* x, int64_t batch, int64_t channels, int64_t inner);

// One element per channel and sample ([N, C], or [N, C, 1, 1]): torch 1.13 takes its
// channels-last kernels (batch_norm_cpu_collect_stats_channels_last_impl and
// batch_norm_cpu_backward_channels_last_impl), whose sums follow at::parallel_for's split of
// the N rows between the threads (layer_norm_cpu::thread_row_ranges): each thread adds its
// rows into its own row of a float buffer of `threads` rows, and the buffer's rows are added
// per channel in double. The squares and the products with dy are fused into those float
// sums (a*b+c, contracted in torch's AVX2 build). In the forward, N <= threads takes one
// double sum per channel instead (moments() with one element per plane). The backward's
// channel sums are kept as floats: k = dot * invstd * invstd / N and the mean of dy, sum / N,
// in float; dx = fma(-(x - mean), k, dy - sum / N) * invstd * weight in training, dy * invstd
// * weight in evaluation; the weight's gradient dot * invstd and the bias's the sum, in float.
// Measured against torch 1.13 on one to four threads (tests/tools/batch_norm_cpu_reference.py).
std::vector<ChannelStats> moments_channels_last(const float* x, int64_t rows, int64_t channels, int threads);
// weight null: ones; grad_weight, grad_bias, dx null: not wanted; invstd is evaluation's
// eval_backward_invstd when not training.
void backward_channels_last(const float* x, const float* dy, float* dx, int64_t rows, int64_t channels,
                            const float* mean, const float* invstd, const float* weight, bool training, int threads,
                            float* grad_weight, float* grad_bias);

// Training: invstd from the sum of squares; the running buffers (null: not kept) take their
// momentum step in place.
float training_invstd(const ChannelStats& s, int64_t count, double eps);
void update_running(const ChannelStats& s, int64_t count, double momentum, float* running_mean, float* running_var);
// Evaluation: invstd from the running variance, all in float.
float eval_invstd(float running_var, double eps);

// out = x * alpha + beta over channel c of every sample, with alpha and beta from the mean,
// invstd, weight and bias (1 and 0 when absent).
void normalize_channel(const float* x, float* out, int64_t batch, int64_t channels, int64_t inner, int64_t c,
                       float mean, float invstd, float weight, float bias);

// The backward of channel c (batch_norm_cpu_backward_contiguous_impl): per sample, the
// plane's sum of dy and sum of (x - mean) * dy as at::vec's AVX2 reduce_all and
// map2_reduce_all take them (eight float lanes, the products accumulated with FMA, the lanes
// folded 4-2-1; a plane of fewer than eight elements summed in order), added up in double;
// then, in training, k = dot * invstd * invstd / count and
// dx = fma(-(x - mean), k, dy - sum / count) * invstd * weight in float, in evaluation
// dx = dy * invstd * weight. dx may be null (no input gradient wanted).
struct ChannelGrads {
  float weight = 0.0f;  // dot * invstd
  float bias = 0.0f;    // the sum of dy
};
ChannelGrads backward_channel(const float* x, const float* dy, float* dx, int64_t batch, int64_t channels,
                              int64_t inner, int64_t c, float mean, float invstd, float weight, bool training);
// Evaluation's invstd in the backward: 1 / sqrt(running_var + eps) in double, as a float.
float eval_backward_invstd(float running_var, double eps);

}  // namespace agtrace::ops::batch_norm_cpu
