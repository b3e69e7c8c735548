#include "cuda/device.hpp"

#ifdef AGTRACE_HAVE_CUDA
#include <dlfcn.h>

#include <vector>
#endif

namespace agtrace::device {

#ifdef AGTRACE_HAVE_CUDA
namespace {
// The availability check loads the CUDA runtime when it is asked for, instead of linking it
// into agtrace: linked statically, its start-up code cost every run about 0.5 MiB of
// resident memory (cold start 10.1 MiB against issue #6's 10 MiB target; 9.6 MiB without),
// and agtrace should start on a machine without the CUDA libraries. The kernels in
// lib/cuda (agtrace_cuda) still link the runtime statically where they are used.
struct CudaProbe {
  bool usable = false;
  std::string reason, device_name;
};

CudaProbe probe_cuda() {
  CudaProbe p;
  void* rt = nullptr;
  std::string tried;
  const std::vector<std::string> names = {AGTRACE_CUDART_SONAME, AGTRACE_CUDART_PATH, "libcudart.so"};
  for (const std::string& name : names) {
    rt = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (rt) break;
    tried += (tried.empty() ? "" : ", ") + name;
  }
  if (!rt) {
    p.reason = "cannot load the CUDA runtime (tried " + tried + ")";
    return p;
  }
  using CountFn = int (*)(int*);
  using ErrorStringFn = const char* (*)(int);
  auto count_fn = reinterpret_cast<CountFn>(dlsym(rt, "cudaGetDeviceCount"));
  auto error_string = reinterpret_cast<ErrorStringFn>(dlsym(rt, "cudaGetErrorString"));
  if (!count_fn || !error_string) {
    p.reason = "the CUDA runtime library lacks cudaGetDeviceCount";
    return p;
  }
  int count = 0;
  const int rc = count_fn(&count);
  if (rc != 0) {
    // e.g. "CUDA driver version is insufficient for CUDA runtime version" where the driver
    // is older than this runtime or missing.
    p.reason = error_string(rc);
    return p;
  }
  if (count == 0) {
    p.reason = "the CUDA runtime reports no device";
    return p;
  }
  p.usable = true;
  p.device_name = std::to_string(count) + (count == 1 ? " device" : " devices");
  // The name of device 0 through the driver API (cuDeviceGetName has a plain signature).
  if (void* drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(drv, "cuInit"));
    auto get = reinterpret_cast<int (*)(int*, int)>(dlsym(drv, "cuDeviceGet"));
    auto name = reinterpret_cast<int (*)(char*, int, int)>(dlsym(drv, "cuDeviceGetName"));
    char buf[256] = {0};
    int dev = 0;
    if (init && get && name && init(0) == 0 && get(&dev, 0) == 0 && name(buf, sizeof buf - 1, dev) == 0)
      p.device_name = buf;
  }
  return p;
}
}  // namespace
#endif

Availability check(const std::string& device) {
  if (device == "cpu" || device == "meta") return {true, ""};
  if (device == "cuda") {
#ifdef AGTRACE_HAVE_CUDA
    const CudaProbe st = probe_cuda();
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
