#include "cuda/device.hpp"

#ifdef AGTRACE_HAVE_CUDA
#include "cuda/runtime.hpp"
#endif

namespace agtrace::device {

Availability check(const std::string& device) {
  if (device == "cpu" || device == "meta") return {true, ""};
  if (device == "cuda") {
#ifdef AGTRACE_HAVE_CUDA
    const cuda::RuntimeStatus st = cuda::runtime_status();
    if (!st.usable) return {false, "no CUDA device: " + st.reason};
    // A GPU is there and lib/cuda has kernels, but no scenario operation dispatches to
    // them yet: running the program on the CPU and calling it "cuda" would report bytes
    // and values that were never measured on the device. A wrong answer is worse than
    // unsupported, so `--device cuda` stays a clear error until the dispatch exists.
    return {false, "CUDA device found (" + st.device_name +
                       "), but agtrace's operations have no CUDA dispatch yet (the lib/cuda kernels are "
                       "not wired to scenario operations)"};
#else
    return {false, "this build of agtrace has no CUDA support compiled in (the CPU build never needs CUDA)"};
#endif
  }
  return {false, "unknown device '" + device + "' (expected cpu, cuda or meta)"};
}

}  // namespace agtrace::device
