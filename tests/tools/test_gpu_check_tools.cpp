// The Python tools scripts/gpu-check runs on a GPU machine, exercised here without a GPU:
// tools/cpu_gpu_parity.py must pass identical runs, catch planted differences (a gradient
// beyond tolerance, a renamed node, saved bytes, an error kind) and list a device agtrace
// refuses as unsupported, never as passed; tools/gpu_memory_compare.py must print its table
// with the program's statement count even where PyTorch has no CUDA device.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "support/command.hpp"

using namespace agtrace::test;
using nlohmann::json;

namespace {

std::string tool(const std::string& name) { return "python3 '" + source_dir() + "/tools/" + name + "'"; }
std::string scenario(const std::string& name) { return "'" + source_dir() + "/scenarios/" + name + ".json'"; }

json report_of(const std::string& name) {
  CommandResult r = run_agtrace("run " + scenario(name) + " --format json --values");
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

CommandResult compare(const json& a, const json& b) {
  std::string dir = temp_dir();
  spit(dir + "/a.json", a.dump());
  spit(dir + "/b.json", b.dump());
  CommandResult r = run_shell(tool("cpu_gpu_parity.py") + " --reports " + dir + "/a.json " + dir + "/b.json");
  run_shell("rm -rf '" + dir + "'");
  return r;
}

}  // namespace

TEST_CASE("parity tool: its self-test catches every planted difference", "[parity]") {
  CommandResult r = run_shell(tool("cpu_gpu_parity.py") + " --agtrace '" AGTRACE_BINARY "' --self-test");
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find(" 0 failed") != std::string::npos);
}

TEST_CASE("parity tool: two reports of one run agree but a changed gradient or walk does not", "[parity]") {
  json a = report_of("seed_walk");
  REQUIRE(a["grads"].contains("W"));
  SECTION("identical") {
    CommandResult r = compare(a, a);
    INFO(r.out << r.err);
    CHECK(r.status == 0);
  }
  SECTION("a gradient element off by 1 %") {
    json b = a;
    b["grads"]["W"]["values"][0] = b["grads"]["W"]["values"][0].get<double>() * 1.01 + 0.01;
    CommandResult r = compare(a, b);
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    CHECK(r.out.find("grads.W.values") != std::string::npos);
  }
  SECTION("a gradient element off by float32 rounding") {
    json b = a;
    b["grads"]["W"]["values"][0] = b["grads"]["W"]["values"][0].get<double>() * (1 + 1e-7);
    CommandResult r = compare(a, b);
    INFO(r.out << r.err);
    CHECK(r.status == 0);
  }
  SECTION("another scenario's report") {
    CommandResult r = compare(a, report_of("seed_exp_saves_output"));
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    CHECK(r.out.find("walks.y") != std::string::npos);
  }
}

TEST_CASE("parity tool: cpu against cpu passes and a device agtrace refuses is unsupported", "[parity]") {
  const std::string scenarios = scenario("seed_walk") + " " + scenario("seed_saved_nonleaf_inplace") + " " +
                                scenario("gpt3_layer_meta");
  CommandResult same = run_shell(tool("cpu_gpu_parity.py") + " --agtrace '" AGTRACE_BINARY "' --device cpu " +
                                 scenarios);
  INFO(same.out << same.err);
  CHECK(same.status == 0);
  CHECK(same.out.find("parity: 3 passed, 0 failed, 0 unsupported") != std::string::npos);

  // Only meaningful where agtrace refuses cuda (no CUDA compiled in, or no GPU).
  if (run_agtrace("run " + scenario("seed_walk") + " --device cuda").status == 2) {
    CommandResult cuda = run_shell(tool("cpu_gpu_parity.py") + " --agtrace '" AGTRACE_BINARY "' " + scenarios);
    INFO(cuda.out << cuda.err);
    CHECK(cuda.status == 0);
    CHECK(cuda.out.find("parity: 0 passed, 0 failed, 3 unsupported on cuda") != std::string::npos);
    CHECK(cuda.out.find("UNSUPPORTED on cuda (3): gpt3_layer_meta, seed_saved_nonleaf_inplace, seed_walk") !=
          std::string::npos);
  }
}

TEST_CASE("memory comparison: the table names each scenario with its statement count", "[parity]") {
  // PyTorch's side needs torch; here it runs on the CPU (no memory figures), which still
  // checks the export, the per-statement hook and the table.
  const std::string python = "/usr/bin/python3";
  if (run_shell(python + " -c 'import torch'").status != 0) {
    WARN("no PyTorch at " << python << ": the memory comparison is not exercised");
    return;
  }
  json a = report_of("seed_walk");
  CommandResult r = run_shell(python + " '" + source_dir() + "/tools/gpu_memory_compare.py' --agtrace '" AGTRACE_BINARY
                              "' --device cpu " + scenario("seed_walk"));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const std::string n = std::to_string(a["statements"].size());
  CHECK(r.out.find("| seed_walk | " + n + " (" + n + ")") != std::string::npos);
  CHECK(r.out.find("memory: 1 scenarios, 0 failed") != std::string::npos);
}
