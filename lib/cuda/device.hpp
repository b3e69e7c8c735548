// The one small interface through which the rest of agtrace sees a device. The CPU build
// never needs CUDA: with no CUDA support compiled in, `cuda` reports itself unavailable
// with the reason, and `run --device cuda` turns that into a clear error (exit 2).
#pragma once
#include <string>

namespace agtrace {
class DeviceBackend;
}

namespace agtrace::device {

struct Availability {
  bool available = false;
  std::string reason;  // why not, when unavailable
};

// "cpu" and "meta" are always available; "cuda" only in a CUDA build with a GPU present.
Availability check(const std::string& device);

// The cuda backend of this process: lib/cuda's plugin (libagtrace_cuda_backend.so, looked
// for in $AGTRACE_CUDA_BACKEND, next to the agtrace executable, then in the build tree),
// loaded once on first use. Null when there is none, with the reason in *reason.
DeviceBackend* cuda_backend(std::string* reason = nullptr);

}  // namespace agtrace::device
