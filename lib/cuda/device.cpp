#include "cuda/device.hpp"

#ifdef AGTRACE_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
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

#ifdef AGTRACE_HAVE_CUDA
namespace {
std::string executable_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

struct LoadedBackend {
  DeviceBackend* backend = nullptr;
  std::string reason;
};

LoadedBackend load_backend() {
  LoadedBackend r;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("AGTRACE_CUDA_BACKEND")) candidates.push_back(env);
  const std::string dir = executable_dir();
  if (!dir.empty()) {
    candidates.push_back(dir + "/" + AGTRACE_CUDA_BACKEND_NAME);
    // Where `cmake --install` puts it: PREFIX/lib/agtrace next to PREFIX/bin/agtrace.
    candidates.push_back(dir + "/" + AGTRACE_CUDA_BACKEND_INSTALLED + "/" + AGTRACE_CUDA_BACKEND_NAME);
  }
  candidates.push_back(AGTRACE_CUDA_BACKEND_PATH);
  std::string tried;
  for (const std::string& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
      continue;
    }
    using CreateFn = DeviceBackend* (*)(std::string*);
    auto create = reinterpret_cast<CreateFn>(dlsym(lib, "agtrace_cuda_backend_create"));
    if (!create) {
      r.reason = path + " is not agtrace's CUDA backend (no agtrace_cuda_backend_create)";
      return r;
    }
    r.backend = create(&r.reason);
    if (!r.backend && r.reason.empty()) r.reason = "the CUDA backend found no usable device";
    return r;  // the library stays loaded for the life of the process
  }
  r.reason = "cannot load agtrace's CUDA backend plugin (" + tried + ")";
  return r;
}
}  // namespace
#endif

DeviceBackend* cuda_backend(std::string* reason) {
#ifdef AGTRACE_HAVE_CUDA
  static const LoadedBackend loaded = load_backend();
  if (!loaded.backend && reason) *reason = loaded.reason;
  return loaded.backend;
#else
  if (reason) *reason = "this build of agtrace has no CUDA support compiled in (the CPU build never needs CUDA)";
  return nullptr;
#endif
}

Availability check(const std::string& device) {
  if (device == "cpu" || device == "meta") return {true, ""};
  if (device == "cuda") {
#ifdef AGTRACE_HAVE_CUDA
    const CudaProbe st = probe_cuda();
    if (!st.usable) return {false, "no CUDA device: " + st.reason};
    std::string why;
    if (!cuda_backend(&why)) return {false, "CUDA device found (" + st.device_name + "), but " + why};
    return {true, ""};
#else
    return {false, "this build of agtrace has no CUDA support compiled in (the CPU build never needs CUDA)"};
#endif
  }
  return {false, "unknown device '" + device + "' (expected cpu, cuda or meta)"};
}

}  // namespace agtrace::device
