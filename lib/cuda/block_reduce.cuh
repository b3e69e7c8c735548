// Device helpers for the kernels that give one thread block to each output row
// (reductions, softmax, layer_norm): a block-wide sum and max over kBlock threads, by a
// tree in shared memory. Every thread of the block must call them (they synchronise).
#pragma once
#include "cuda/common.cuh"

namespace agtrace::cuda {

// Blocks for `rows` rows, one each, at most 2^30 (a grid-stride loop covers the rest).
inline unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > (1 << 30) ? (1 << 30) : rows));
}

template <typename T>
__device__ inline T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();  // shared[] may be reused right after
  return r;
}

// The maximum, NaN if any is NaN (max_propagate_nan).
template <typename T>
__device__ inline T block_max(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      const T a = shared[threadIdx.x], b = shared[threadIdx.x + s];
      shared[threadIdx.x] = (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
    }
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

}  // namespace agtrace::cuda
