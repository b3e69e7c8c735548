#include "support/device_compare.hpp"

#include <catch2/catch.hpp>

#include <cmath>

#include "interp/run_helpers.hpp"
#include "support/sim_device.hpp"

namespace agtrace::testing {

namespace {
std::string error_lines(const RunResult& r, const char* prefix) {
  std::string s;
  for (const ErrorRecord& e : r.errors)
    s += "\n  " + std::string(prefix) + "statement " + std::to_string(e.statement) + " " + e.kind + ": " + e.message;
  return s;
}
}  // namespace

bool values_close(double gpu, double cpu, double rtol, double atol) {
  if (std::isnan(cpu) || std::isnan(gpu)) return std::isnan(cpu) && std::isnan(gpu);
  if (std::isinf(cpu) || std::isinf(gpu)) return cpu == gpu;
  return std::fabs(gpu - cpu) <= atol + rtol * std::fabs(cpu);
}

DeviceComparison compare_devices(const std::string& scenario_json, const CompareOptions& opt) {
  auto sc = load_scenario_text(scenario_json, "<test>");
  SimulatedDevice dev;
  DeviceComparison c;
  c.cpu = test::run_on_device(*sc, "cpu", nullptr);
  c.gpu = test::run_on_device(*sc, "cuda", &dev);
  c.launches = dev.launches;
  const RunResult &cpu = c.cpu, &gpu = c.gpu;
  INFO("errors:" << error_lines(gpu, "(cuda) ") << error_lines(cpu, "(cpu) "));
  if (opt.allow_errors) {
    REQUIRE(gpu.errors.size() == cpu.errors.size());
    for (size_t i = 0; i < cpu.errors.size(); ++i) {
      CHECK(gpu.errors[i].kind == cpu.errors[i].kind);
      CHECK(gpu.errors[i].statement == cpu.errors[i].statement);
      CHECK(gpu.errors[i].phase == cpu.errors[i].phase);
    }
  } else {
    REQUIRE(cpu.errors.empty());
    REQUIRE(gpu.errors.empty());
  }
  REQUIRE(gpu.walks.size() == cpu.walks.size());
  for (size_t i = 0; i < cpu.walks.size(); ++i) CHECK(gpu.walks[i].nodes == cpu.walks[i].nodes);
  REQUIRE(gpu.nodes.size() == cpu.nodes.size());
  for (const auto& [id, n] : cpu.nodes) {
    const NodeSnapshot& g = gpu.nodes.at(id);
    CHECK(g.name == n.name);
    REQUIRE(g.saved.size() == n.saved.size());
    for (size_t k = 0; k < n.saved.size(); ++k) {
      INFO(n.name << " " << n.saved[k].attr);
      CHECK(g.saved[k].attr == n.saved[k].attr);
      CHECK(g.saved[k].shape == n.saved[k].shape);
      CHECK(g.saved[k].bytes == n.saved[k].bytes);
      CHECK(g.saved[k].same_object_as == n.saved[k].same_object_as);
      CHECK(g.saved[k].saved_version == n.saved[k].saved_version);
    }
  }
  CHECK(gpu.memory.saved_bytes == cpu.memory.saved_bytes);
  CHECK(gpu.memory.saved_unique_bytes == cpu.memory.saved_unique_bytes);
  CHECK(gpu.printed == cpu.printed);
  REQUIRE(gpu.grads.size() == cpu.grads.size());
  for (size_t g = 0; g < cpu.grads.size(); ++g) {
    INFO(cpu.grads[g].name);
    CHECK(gpu.grads[g].name == cpu.grads[g].name);
    CHECK(gpu.grads[g].dtype == cpu.grads[g].dtype);
    REQUIRE(gpu.grads[g].values.size() == cpu.grads[g].values.size());
    bool nonzero = false;
    for (size_t k = 0; k < cpu.grads[g].values.size(); ++k) {
      const double a = gpu.grads[g].values[k], e = cpu.grads[g].values[k];
      INFO("element " << k);
      CHECK(values_close(a, e, opt.rtol, opt.atol));
      nonzero = nonzero || e != 0;
    }
    if (opt.require_nonzero_grads) CHECK(nonzero);
  }
  CHECK(dev.stats().requested_live == 0);  // every device byte given back at the end
  return c;
}

}  // namespace agtrace::testing
