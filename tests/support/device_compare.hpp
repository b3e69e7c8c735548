// One program on the CPU and on the host-simulated cuda device (sim_device.hpp), compared
// as issue #8 asks: "the same graph, saved values, errors and (within float tolerance)
// gradients". Shared by the cuda route tests (tests/interp/test_device_*.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "interp/result.hpp"

namespace agtrace::testing {

struct DeviceComparison {
  RunResult cpu, gpu;
  int64_t launches = 0;  // kernels the simulated device ran
};

struct CompareOptions {
  // Float32 results are computed in float on the device and in double (rounded) on the CPU.
  double rtol = 1e-5, atol = 1e-6;
  // Errors must then match in kind, statement and phase; otherwise there must be none.
  bool allow_errors = false;
  // Every gradient must have a non-zero element (zeros compare equal whatever the route did).
  bool require_nonzero_grads = true;
};

// A device value against the CPU's: NaN matches NaN, an infinity only itself, anything else
// within atol + rtol * |cpu|.
bool values_close(double gpu, double cpu, double rtol, double atol);

// Runs `scenario_json` on both devices and CHECKs nodes (names, saved values: attribute,
// shape, bytes, identity, version), walks, printed lines, saved bytes, errors, gradients,
// and that the device gave back every byte.
DeviceComparison compare_devices(const std::string& scenario_json, const CompareOptions& options = {});

}  // namespace agtrace::testing
