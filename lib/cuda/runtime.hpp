// What the CUDA runtime says about this machine, and the error type of lib/cuda. No CUDA
// types here: the rest of agtrace (compiled by the host compiler) includes this header.
// Only a CUDA build (AGTRACE_HAVE_CUDA) has these functions.
#pragma once
#include <stdexcept>
#include <string>

namespace agtrace::cuda {

// A failure of the CUDA runtime, cuBLAS or one of our kernels. The message names the
// operation and quotes the library's own error string, e.g.
// "CUDA error in softmax (launch): invalid configuration argument".
struct CudaError : std::runtime_error {
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

struct RuntimeStatus {
  bool usable = false;     // at least one device, and the driver accepts this runtime
  int device_count = 0;
  std::string reason;      // when not usable: the runtime's error string
  std::string device_name; // device 0's name when usable
};

// Asks the runtime (cudaGetDeviceCount, then device 0's properties). Never throws.
RuntimeStatus runtime_status();

// Waits for every kernel launched so far; throws CudaError naming `op` if one failed
// (an asynchronous fault, e.g. an illegal address, surfaces here).
void synchronize(const char* op);

}  // namespace agtrace::cuda
