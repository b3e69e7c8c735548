#include "cuda/device.hpp"

namespace agtrace::device {

Availability check(const std::string& device) {
  if (device == "cpu" || device == "meta") return {true, ""};
  if (device == "cuda")
    return {false, "this build of agtrace has no CUDA support compiled in (the CPU build never needs CUDA)"};
  return {false, "unknown device '" + device + "' (expected cpu, cuda or meta)"};
}

}  // namespace agtrace::device
