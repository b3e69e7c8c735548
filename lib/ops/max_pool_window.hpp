// max_pool2d's windows on the CPU: the rule as a loop (the general path, doubles, nn.cpp) and
// the float32 path (max_pool_f32.cpp: the same rule without branches).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace agtrace::ops {

struct PoolGeometry {
  int64_t planes, height, width, out_h, out_w;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// Each window as 1.13's CPU kernel (cpu_max_pool) takes it: clipped to the input (rows h0 to
// h1, columns w0 to w1, stepping by the dilation), the first valid position as the initial
// index. f(plane_start, h0, h1, w0, w1, o): o is the output's row-major index.
template <typename F>
inline void for_each_pool_window(const PoolGeometry& p, F&& f) {
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const int64_t plane_start = plane * p.height * p.width;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      int64_t h0 = oh * p.sh - p.ph;
      const int64_t h1 = std::min(h0 + (p.kh - 1) * p.dh + 1, p.height);
      while (h0 < 0) h0 += p.dh;
      const int64_t o_row = (plane * p.out_h + oh) * p.out_w;
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        int64_t w0 = ow * p.sw - p.pw;
        const int64_t w1 = std::min(w0 + (p.kw - 1) * p.dw + 1, p.width);
        while (w0 < 0) w0 += p.dw;
        f(plane_start, h0, h1, w0, w1, o_row + ow);
      }
    }
  }
}

// maxval starts at -inf and a value replaces the max when `val > maxval || isnan(val)` (so
// the last NaN wins; ties keep the first). x: the input planes, row-major; out and indices
// (int64 held as doubles) row-major too.
template <typename T>
inline void max_pool_windows(const PoolGeometry& p, const T* x, T* out, double* indices) {
  for_each_pool_window(p, [&](int64_t plane_start, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t o) {
    int64_t best = h0 * p.width + w0;
    T best_v = -std::numeric_limits<T>::infinity();
    for (int64_t h = h0; h < h1; h += p.dh) {
      const T* row = x + plane_start + h * p.width;
      for (int64_t w = w0; w < w1; w += p.dw) {
        const T v = row[w];
        if (v > best_v || std::isnan(v)) {
          best_v = v;
          best = h * p.width + w;
        }
      }
    }
    out[o] = best_v;
    indices[o] = static_cast<double>(best);
  });
}

// The same for float32 storages, compared in float (a float converts to double exactly, so
// the order is the same; max_pool_f32.cpp).
void max_pool_windows_f32(const PoolGeometry& p, const float* x, float* out, double* indices);

}  // namespace agtrace::ops
