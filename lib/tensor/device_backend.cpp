#include "tensor/device_backend.hpp"

#include "errors.hpp"
#include "tensor/events.hpp"

namespace agtrace {

namespace {
DeviceBackend*& backend_slot() {
  static DeviceBackend* backend = nullptr;
  return backend;
}
std::string& device_slot() {
  static std::string device = "cpu";
  return device;
}
}  // namespace

DeviceBackend* device_backend() { return backend_slot(); }
void set_device_backend(DeviceBackend* backend) { backend_slot() = backend; }

const std::string& allocation_device() { return device_slot(); }
DeviceScope::DeviceScope(const std::string& device) : previous_(device_slot()) { device_slot() = device; }
DeviceScope::~DeviceScope() { device_slot() = previous_; }

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
