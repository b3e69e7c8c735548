#include "tensor/device_backend.hpp"

#include <memory>
#include <vector>

#include "errors.hpp"
#include "tensor/events.hpp"

namespace agtrace {

namespace {
DeviceBackend*& backend_slot() {
  static DeviceBackend* backend = nullptr;
  return backend;
}
}  // namespace

namespace detail {
const std::string g_cpu_device = "cpu";
const std::string g_cuda_device = "cuda";
const std::string* g_allocation_device = &g_cpu_device;  // an address: set before any initializer runs
// The device names scopes name ("cpu", "cuda"), each kept once: a scope swaps pointers, not
// strings (issue #6: every op and every backward node opens one).
const std::string* device_name(const std::string& device) {
  if (&device == &g_cpu_device || device == g_cpu_device) return &g_cpu_device;
  if (&device == &g_cuda_device || device == g_cuda_device) return &g_cuda_device;
  static std::vector<std::unique_ptr<const std::string>> others;
  for (const auto& o : others)
    if (*o == device) return o.get();
  others.push_back(std::make_unique<const std::string>(device));
  return others.back().get();
}
}  // namespace detail

DeviceBackend* device_backend() { return backend_slot(); }
void set_device_backend(DeviceBackend* backend) { backend_slot() = backend; }


namespace {
DeviceBackend& backend_or_throw() {
  DeviceBackend* b = device_backend();
  if (!b) throw ScenarioError("unsupported", "no cuda device in this run");
  return *b;
}

template <typename F>
auto device_call(F&& f) -> decltype(f(backend_or_throw(), "")) {
  const std::string op = run_position().op;
  DeviceBackend& b = backend_or_throw();
  try {
    return f(b, op.c_str());
  } catch (const ScenarioError&) {
    throw;
  } catch (const std::exception& e) {
    throw_device_failure(e);
  }
}
}  // namespace

void* device_allocate(int64_t bytes) {
  return device_call([&](DeviceBackend& b, const char* op) { return b.allocate(bytes, op); });
}
void device_zero(void* p, int64_t bytes) {
  device_call([&](DeviceBackend& b, const char* op) { b.zero(p, bytes, op); });
}
void device_upload(void* dst, DType dtype, const double* src, int64_t n) {
  device_call([&](DeviceBackend& b, const char* op) { b.upload(dst, dtype, src, n, op); });
}
void device_download(double* dst, const void* src, DType dtype, int64_t n) {
  device_call([&](DeviceBackend& b, const char* op) { b.download(dst, src, dtype, n, op); });
}

void device_launch(const std::function<void(DeviceBackend&)>& kernels) {
  device_call([&](DeviceBackend& b, const char*) { kernels(b); });
}

void throw_device_failure(const std::exception& e) {
  const std::string what = e.what();
  ScenarioError err(what.find("out of memory") != std::string::npos ? "limit" : "unsupported", what);
  const DeviceBackend* b = device_backend();
  err.facts = {{"op", run_position().op.str()}, {"device", b ? b->description() : std::string("none")}};
  throw err;
}

void throw_no_device_kernel(const std::string& device) {
  const std::string& op = run_position().op;
  // PyTorch: "NotImplementedError: Could not run 'aten::X' with arguments from the 'CUDA'
  // backend" for an op without a CUDA kernel. agtrace has kernels for fewer ops on cuda
  // than on the CPU; saying so beats computing on the host behind the user's back.
  ScenarioError e("unsupported", (op.empty() ? std::string("this operation") : op) +
                                     " has no " + device + " kernel in agtrace yet (its input is a " + device +
                                     " tensor); run the scenario with --device cpu, or move the tensor with .cpu()");
  e.facts = {{"op", op}, {"device", device}};
  throw e;
}

}  // namespace agtrace
