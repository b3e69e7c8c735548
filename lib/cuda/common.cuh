// Shared by the .cu files of lib/cuda: error checks and the element loads/stores that let
// one kernel serve every dtype.
//
// Compile time: each kernel is instantiated for its compute type only (float or double),
// and reads/writes the tensor's element type through a runtime switch (load/store below).
// float16 and bfloat16 compute in float, as PyTorch's CUDA kernels do (opmath_type);
// int64 and bool compute in double, as agtrace's CPU kernels do (exact below 2^53).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_tensor.hpp"
#include "cuda/runtime.hpp"
#include "cuda/strided.hpp"

namespace agtrace::cuda {

[[noreturn]] inline void throw_error(const std::string& op, const char* stage, const char* what) {
  throw CudaError("CUDA error in " + op + " (" + stage + "): " + what);
}

// A runtime call's status; `stage` says which call ("cudaMemcpy", "launch", ...).
inline void check(cudaError_t e, const std::string& op, const char* stage) {
  if (e != cudaSuccess) throw_error(op, stage, cudaGetErrorString(e));
}

// Right after every <<<...>>>: a bad configuration or a missing kernel image shows here.
inline void check_launch(const std::string& op) { check(cudaGetLastError(), op, "launch"); }

// Elements per thread block for the elementwise kernels, and the grid for n elements.
constexpr int kBlock = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 30) ? (1 << 30) : blocks));
}

template <typename T>
__device__ inline T load(const void* base, int dtype, int64_t i) {
  switch (dtype) {
    case kF32: return static_cast<T>(static_cast<const float*>(base)[i]);
    case kF64: return static_cast<T>(static_cast<const double*>(base)[i]);
    case kF16: return static_cast<T>(__half2float(static_cast<const __half*>(base)[i]));
    case kBF16: return static_cast<T>(__bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]));
    case kI64: return static_cast<T>(static_cast<const int64_t*>(base)[i]);
    default: return static_cast<const bool*>(base)[i] ? T(1) : T(0);
  }
}

// Stores v as the element type: floating types round to nearest even; int64 truncates
// toward zero and bool is v != 0, as PyTorch's casts do.
template <typename T>
__device__ inline void store(void* base, int dtype, int64_t i, T v) {
  switch (dtype) {
    case kF32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case kF64: static_cast<double*>(base)[i] = static_cast<double>(v); break;
    case kF16: static_cast<__half*>(base)[i] = __float2half_rn(static_cast<float>(v)); break;
    case kBF16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
    case kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    default: static_cast<bool*>(base)[i] = v != T(0); break;
  }
}

template <typename T>
__device__ inline T infinity() {
  return static_cast<T>(CUDART_INF);
}

// "unsupported dtype for CUDA kernel <op>: <dtype>"
[[noreturn]] void unsupported_dtype(const std::string& op, DType d);
// Throws unless d is float32 or float64 (the kernels that need typed pointers: atomics,
// cuBLAS).
void require_float_or_double(const std::string& op, DType d);

}  // namespace agtrace::cuda
