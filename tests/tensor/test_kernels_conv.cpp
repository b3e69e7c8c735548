// The im2col + BLAS convolution kernels (lib/tensor/kernels_conv.cpp) against the
// definition of a grouped, strided, dilated, zero-padded convolution summed directly,
// forward and every backward output, over geometries that take each branch (padding on
// either side, strides wider than the kernel, the 1x1 path that skips im2col, groups).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "tensor/kernels_conv.hpp"

using agtrace::kernels::ConvShape;

namespace {

std::vector<double> pattern(int64_t n, double phase) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.7 * static_cast<double>(i) + phase);
  return v;
}

ConvShape shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t co, int64_t kh, int64_t kw, int64_t g, int64_t sh,
                int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  ConvShape s;
  s.batch = n, s.in_channels = c, s.height = h, s.width = w, s.out_channels = co, s.group_in = c / g;
  s.kernel_h = kh, s.kernel_w = kw, s.groups = g, s.stride_h = sh, s.stride_w = sw, s.pad_h = ph, s.pad_w = pw;
  s.dilation_h = dh, s.dilation_w = dw;
  s.out_h = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  s.out_w = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return s;
}

// Calls f(out_index, weight_index, input_index, out_channel) for every tap.
template <typename F>
void taps(const ConvShape& s, F&& f) {
  const int64_t per_group = s.out_channels / s.groups;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.out_channels; ++co)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow)
          for (int64_t ci = 0; ci < s.group_in; ++ci)
            for (int64_t kh = 0; kh < s.kernel_h; ++kh)
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
                const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                const int64_t cin = (co / per_group) * s.group_in + ci;
                f(((n * s.out_channels + co) * s.out_h + oh) * s.out_w + ow,
                  ((co * s.group_in + ci) * s.kernel_h + kh) * s.kernel_w + kw,
                  ((n * s.in_channels + cin) * s.height + ih) * s.width + iw, co);
              }
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-12));
  }
}

}  // namespace

// Restores the default chunk of samples when a test ends, failed or not.
struct ChunkBudget {
  explicit ChunkBudget(int64_t elements) { agtrace::kernels::set_conv_chunk_column_elements(elements); }
  ~ChunkBudget() { agtrace::kernels::set_conv_chunk_column_elements(0); }
};

TEST_CASE("conv kernels: im2col + gemm equals the direct sum, forward and backward", "[kernels][conv]") {
  // Each geometry runs with the samples' columns side by side in one product (the default
  // budget holds these small batches whole), one sample per product (a budget of one
  // element), and two samples per product, which leaves batches of 3 a last chunk of one.
  const int64_t budget_kind = GENERATE(0, 1, 2);
  const std::vector<ConvShape> shapes = {
      shape(3, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // three samples
      shape(3, 4, 5, 5, 6, 1, 1, 2, 1, 1, 0, 0, 1, 1),  // 1x1 with groups, three samples
      shape(2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // padding on both sides
      shape(1, 4, 7, 9, 6, 2, 3, 2, 2, 3, 1, 2, 2, 1),  // groups, strides, dilation
      shape(2, 2, 5, 5, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1),  // 1x1: no im2col
      shape(1, 2, 5, 6, 2, 1, 1, 2, 2, 2, 0, 0, 1, 1),  // 1x1 strided: im2col
      shape(3, 2, 1, 11, 4, 1, 3, 2, 1, 2, 0, 3, 1, 2),  // 1-D (height 1), padding wider than the kernel reach
      shape(1, 1, 3, 3, 1, 3, 3, 1, 4, 4, 2, 2, 1, 1),  // stride wider than the input
  };
  for (const ConvShape& s : shapes) {
    INFO("out " << s.out_h << "x" << s.out_w << ", batch " << s.batch << ", budget kind " << budget_kind);
    const int64_t per_sample = s.group_in * s.kernel_h * s.kernel_w * s.out_h * s.out_w;
    const ChunkBudget budget(budget_kind == 0 ? 0 : budget_kind == 1 ? 1 : 2 * per_sample);
    const int64_t nx = s.batch * s.in_channels * s.height * s.width;
    const int64_t nw = s.out_channels * s.group_in * s.kernel_h * s.kernel_w;
    const int64_t no = s.batch * s.out_channels * s.out_h * s.out_w;
    const std::vector<double> x = pattern(nx, 0.1), w = pattern(nw, 0.9), b = pattern(s.out_channels, 2.0),
                              g = pattern(no, 1.3);
    std::vector<double> out_ref(static_cast<size_t>(no)), gx_ref(static_cast<size_t>(nx)), gw_ref(static_cast<size_t>(nw)),
        gb_ref(static_cast<size_t>(s.out_channels));
    for (int64_t o = 0; o < no; ++o)
      out_ref[static_cast<size_t>(o)] = b[static_cast<size_t>((o / (s.out_h * s.out_w)) % s.out_channels)];
    taps(s, [&](int64_t o, int64_t wi, int64_t xi, int64_t) {
      out_ref[static_cast<size_t>(o)] += x[static_cast<size_t>(xi)] * w[static_cast<size_t>(wi)];
      gx_ref[static_cast<size_t>(xi)] += g[static_cast<size_t>(o)] * w[static_cast<size_t>(wi)];
      gw_ref[static_cast<size_t>(wi)] += g[static_cast<size_t>(o)] * x[static_cast<size_t>(xi)];
    });
    for (int64_t o = 0; o < no; ++o)
      gb_ref[static_cast<size_t>((o / (s.out_h * s.out_w)) % s.out_channels)] += g[static_cast<size_t>(o)];

    std::vector<double> out(static_cast<size_t>(no), 99.0), gx(static_cast<size_t>(nx), 99.0),
        gw(static_cast<size_t>(nw), 99.0), gb(static_cast<size_t>(s.out_channels), 99.0);
    agtrace::kernels::conv_forward<double>(s, x.data(), w.data(), b.data(), out.data());
    check_close(out, out_ref);
    agtrace::kernels::conv_backward<double>(s, g.data(), x.data(), w.data(), gx.data(), gw.data(), gb.data());
    check_close(gx, gx_ref);
    check_close(gw, gw_ref);
    check_close(gb, gb_ref);
    // Only the weight asked for (output_mask): the other outputs are not touched.
    std::vector<double> gw_only(static_cast<size_t>(nw), 99.0);
    agtrace::kernels::conv_backward<double>(s, g.data(), x.data(), w.data(), nullptr, gw_only.data(), nullptr);
    check_close(gw_only, gw_ref);
    // float32: the same within float rounding.
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), of(static_cast<size_t>(no));
    agtrace::kernels::conv_forward<float>(s, xf.data(), wf.data(), nullptr, of.data());
    for (int64_t o = 0; o < no; ++o) {
      const double bias = b[static_cast<size_t>((o / (s.out_h * s.out_w)) % s.out_channels)];
      CHECK(static_cast<double>(of[static_cast<size_t>(o)]) == Approx(out_ref[static_cast<size_t>(o)] - bias).margin(1e-5));
    }
  }
}
