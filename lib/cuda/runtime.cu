#include "cuda/common.cuh"

namespace agtrace::cuda {

RuntimeStatus runtime_status() {
  RuntimeStatus s;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // e.g. cudaErrorInsufficientDriver on a machine whose driver is older than this
    // runtime, or has none at all: "CUDA driver version is insufficient for CUDA runtime
    // version". Clear the sticky-free error so later calls start clean.
    s.reason = cudaGetErrorString(e);
    cudaGetLastError();
    return s;
  }
  s.device_count = count;
  if (count == 0) {
    s.reason = "the CUDA runtime reports no device";
    return s;
  }
  cudaDeviceProp prop{};
  const cudaError_t p = cudaGetDeviceProperties(&prop, 0);
  if (p != cudaSuccess) {
    s.reason = cudaGetErrorString(p);
    cudaGetLastError();
    return s;
  }
  s.device_name = prop.name;
  s.usable = true;
  return s;
}

void synchronize(const char* op) { check(cudaDeviceSynchronize(), op, "synchronize"); }

}  // namespace agtrace::cuda
