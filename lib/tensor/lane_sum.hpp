// A sum of doubles in a fixed order that vectorizes (issue #6): element k of a row goes into
// lane k % 8, and the lanes are combined pairwise at the end. One double accumulator made
// each addition wait for the previous one (~3 ns per element: a full float32 sum of
// transformer_block's [4, 128, 256] output took 0.38 ms, PyTorch's 0.005 ms); eight
// independent lanes do not (a float32 sum of 524,288 elements: 1.46 ms before, 0.06 ms
// with lanes). The order depends only on the positions, so a loop that
// visits a row's elements in order (the general paths) and the float32 fast paths give the
// same bits, whatever the split between threads (which is by rows). Used below float64 where
// torch's own float32 order (tensor/cascade_sum.hpp: contiguous float32 sums) is not:
// the sums are rounded to float32 (or narrower), where another order of double additions
// (a change of about 1e-16 relative) shows only when the double lies that close to a float32
// rounding boundary (no golden report changed); float64 sums outside torch's orders (of a
// non-contiguous tensor) keep their element order.
#pragma once
#include <cstdint>

namespace agtrace {

constexpr int kSumLanes = 8;

struct LaneSum {
  double lane[kSumLanes] = {};
  void add(int64_t position, double v) { lane[position % kSumLanes] += v; }
  double total() const {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
};

// The LaneSum of x[0..n) (as doubles), position by position.
inline double lane_sum(const float* x, int64_t n) {
  LaneSum s;
  int64_t c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) s.lane[j] += static_cast<double>(x[c + j]);
  for (; c < n; ++c) s.add(c, static_cast<double>(x[c]));
  return s.total();
}

}  // namespace agtrace
