// The cuda device without a GPU (issue #8): cuda storages on a host stand-in
// (tests/support/sim_device.hpp) check placement, transfers as PyTorch's ops, the errors
// PyTorch raises (device mismatch, an op with no CUDA kernel) and the device accounting.
#include <catch2/catch.hpp>

#include <algorithm>

#include "interp/interpreter.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"
#include "errors.hpp"
#include "support/sim_device.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/events.hpp"
#include "tensor/tensor.hpp"

using namespace agtrace;

namespace {
RunResult run_on(const std::string& json, DeviceBackend* backend, const std::string& device = "") {
  auto sc = load_scenario_text(json, "<test>");
  RunOptions o;
  o.keep_values = true;
  o.device = device;
  o.device_backend = backend;
  o.verify_holders = true;
  return run_scenario(*sc, o);
}

std::vector<std::string> walk_names(const RunResult& r, const std::string& key) {
  for (const WalkRecord& w : r.walks)
    if (w.key == key) {
      std::vector<std::string> names;
      for (int64_t id : w.nodes) names.push_back(r.nodes.at(id).name);
      return names;
    }
  return {};
}

const GradRecord* grad_of(const RunResult& r, const std::string& name) {
  for (const GradRecord& g : r.grads)
    if (g.name == name) return &g;
  return nullptr;
}
}  // namespace

TEST_CASE("x.cuda() and x.cpu() are ToCopyBackward0 nodes and the gradient comes back to the CPU",
          "[device][interp]") {
  testing::SimulatedDevice dev;
  RunResult r = run_on(R"JSON({"name": "t",
      "tensors": {"x": {"shape": [2, 3], "requires_grad": true, "init": {"arange": [1, 1]}}},
      "program": ["y = x.cuda()", "print(y.device, x.device)", "same = y.cuda() is y",
                  "z = y.cpu()", "print(same, z.device, y.requires_grad)", "s = z.sum()", "s.backward()",
                  "w = x.to('cuda:0', torch.float64)", "print(w.dtype, w.device, w.grad_fn.name())",
                  "print(y)"]})JSON",
                       &dev);
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 4);
  CHECK(r.printed[0] == "cuda:0 cpu");
  CHECK(r.printed[1] == "True cpu True");
  CHECK(r.printed[2] == "torch.float64 cuda:0 ToCopyBackward0");
  // Printing a cuda tensor copies it over; PyTorch writes the device before grad_fn.
  CHECK(r.printed[3] == "tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device='cuda:0', grad_fn=<ToCopyBackward0>)");
  CHECK(walk_names(r, "s") == std::vector<std::string>{"SumBackward0", "ToCopyBackward0", "ToCopyBackward0",
                                                      "AccumulateGrad"});
  const GradRecord* g = grad_of(r, "x");
  REQUIRE(g);
  CHECK(g->values == std::vector<double>(6, 1.0));
  // Device bytes: y (24 B) and w (48 B) are alive at the end; the gradient's device copy
  // (z.cpu()'s ToCopyBackward0 moves the ones to cuda, 24 B) was freed with the pass.
  const DeviceMemoryStats st = dev.stats();
  CHECK(st.requested_live == 0);  // everything freed when the run ended
  CHECK(st.requested_peak == 24 + 48);
  CHECK(st.block_peak == 2 * 512);  // PyTorch's 512-byte blocks
  CHECK(dev.uploads == 6 + 6 + 6);  // y, the gradient, w
  CHECK(dev.live_buffers() == 0);
}

TEST_CASE("a cuda scenario makes its leaves on the device and reports the same bytes as on the CPU",
          "[device][interp]") {
  const char* json = R"JSON({"name": "t",
      "tensors": {"a": {"shape": [4, 4], "requires_grad": true, "init": {"uniform": [-1, 1]}},
                  "i": {"shape": [3], "dtype": "int64", "init": {"values": [0, 2, 3]}}},
      "program": ["b = a.t()", "c = a.view(16)", "h = a.cpu()", "print(a.device, i.device, h.device)"]})JSON";
  testing::SimulatedDevice dev;
  RunResult on_cuda = run_on(json, &dev, "cuda");
  RunResult on_cpu = run_on(json, nullptr, "cpu");
  REQUIRE(on_cuda.errors.empty());
  CHECK(on_cuda.printed == std::vector<std::string>{"cuda:0 cuda:0 cpu"});
  CHECK(on_cpu.printed == std::vector<std::string>{"cpu cpu cpu"});
  // The same values (the leaves' initialisers do not depend on the device).
  CHECK(on_cuda.leaves.at(0).values == on_cpu.leaves.at(0).values);
  CHECK(on_cuda.leaves.at(1).values == std::vector<double>{0, 2, 3});
  // h is the one tensor moved to the host: a copy on the CPU (its own storage), a and i on cuda.
  CHECK(dev.stats().requested_peak == 64 + 24);
  CHECK(on_cuda.memory.peak_bytes == on_cpu.memory.peak_bytes + 64);  // a.cpu() is a copy only on cuda
}

TEST_CASE("host code reaching a cuda tensor raises unsupported naming the op, and mixing devices is PyTorch's error",
          "[device][interp]") {
  testing::SimulatedDevice dev;
  {
    // Every op of the table has a cuda route today (test_device_sweep.cpp); the guard stays
    // for code that would read a cuda storage on the host: it names the running op (as
    // PyTorch's NotImplementedError names aten::X) instead of computing on the host.
    set_device_backend(&dev);
    Tensor t;
    {
      DeviceScope on_cuda("cuda");
      t = empty_tensor({3}, DType::Float32, false);
    }
    run_position().op = "sin";
    try {
      (void)to_values(t);
      FAIL("host access to a cuda storage went through");
    } catch (const ScenarioError& e) {
      CHECK(e.kind == "unsupported");
      CHECK(std::string(e.what()).rfind("sin has no cuda kernel in agtrace yet", 0) == 0);
    }
    run_position().op.clear();
    t.reset();
    set_device_backend(nullptr);
  }
  RunResult r = run_on(R"JSON({"name": "t",
      "tensors": {"x": {"shape": [3], "requires_grad": true}, "m": {"shape": [3]}},
      "program": [{"try": ["z = x + m.cpu()"]}]})JSON",
                       &dev, "cuda");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "device_mismatch");
  CHECK(r.errors[0].message ==
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
  CHECK(dev.live_buffers() == 0);
}

TEST_CASE("without a device, x.cuda() says so, and meta tensors do not move", "[device][interp]") {
  RunResult r = run_on(R"JSON({"name": "t", "tensors": {"x": {"shape": [3]}},
      "program": [{"try": ["y = x.cuda()"]}, {"try": ["y = x.to('cuda:1')"]}, {"try": ["y = x.to('gpu')"]}]})JSON",
                       nullptr);
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].kind == "unsupported");
  CHECK(r.errors[0].message.find("no cuda device in this run") != std::string::npos);
  CHECK(r.errors[1].message.find("one GPU") != std::string::npos);
  CHECK(r.errors[2].kind == "type_error");
  RunResult m = run_on(R"JSON({"name": "t", "tensors": {"x": {"shape": [3]}}, "program": ["y = x.cuda()"]})JSON",
                       nullptr, "meta");
  REQUIRE(m.errors.size() == 1);
  CHECK(m.errors[0].message.find("meta device") != std::string::npos);
}

TEST_CASE("save_on_cpu moves saved values to the host on cuda, and the report measures the device bytes",
          "[device][interp]") {
  // exp saves its result: a temporary only the graph holds. Kept on the device it is 16 KiB
  // there; under save_on_cpu the graph keeps a host copy and the device copy is freed.
  auto run = [](bool hooks, DeviceBackend* backend, const std::string& device) {
    const std::string forward = R"J("h = x.exp().tanh()")J";
    const std::string program =
        hooks ? R"J({"saved_tensor_hooks": "save_on_cpu", "body": [)J" + forward + "]}" : forward;
    return run_on(R"J({"name": "t", "tensors": {"x": {"shape": [64, 64], "requires_grad": true}},
                      "program": [)J" + program + "]}",
                  backend, device);
  };
  testing::SimulatedDevice plain_dev, hooked_dev;
  RunResult plain = run(false, &plain_dev, "cuda");
  RunResult hooked = run(true, &hooked_dev, "cuda");
  REQUIRE(plain.errors.empty());
  REQUIRE(hooked.errors.empty());
  const int64_t t = 64 * 64 * 4;
  REQUIRE(plain.account.device.present);
  CHECK(plain.account.device.stats.block_live == 3 * t);   // x, exp's result (saved), h
  CHECK(hooked.account.device.stats.block_live == 2 * t);  // x, h: exp's result lives on the host
  CHECK(hooked.memory.host_bytes == 2 * t);            // the host copies of exp's and tanh's results
  // The two packs copied the values over (and --values showed the leaf: one more).
  CHECK(hooked_dev.downloads == 3 * 64 * 64);
  CHECK(plain_dev.downloads == 64 * 64);
  CHECK(plain.memory.host_bytes == 0);
  // The report carries the measured figures beside the model, in JSON and text.
  const auto j = report_json(hooked, false);
  CHECK(j["accountant"]["device_memory"]["block_at_end"] == 2 * t);
  CHECK(j["accountant"]["device_memory"]["device"] == "host simulation");
  CHECK(report_text(hooked, TextOptions{}).find("measured     peak") != std::string::npos);
  // A CPU run reports no device figures.
  RunResult on_cpu = run(true, nullptr, "cpu");
  CHECK_FALSE(on_cpu.account.device.present);
  CHECK_FALSE(report_json(on_cpu, false)["accountant"].contains("device_memory"));
}

TEST_CASE("gradients through save_on_cpu come back to the device and match the CPU's", "[device][interp]") {
  const char* json = R"JSON({"name": "t",
      "tensors": {"x": {"shape": [3, 4], "requires_grad": true, "init": {"uniform": [-1, 1]}}},
      "program": [{"saved_tensor_hooks": "save_on_cpu", "body": ["h = (x * x).sigmoid()"]},
                  "s = h.sum()", "s.backward()"]})JSON";
  testing::SimulatedDevice dev;
  RunResult gpu = run_on(json, &dev, "cuda");
  RunResult cpu = run_on(json, nullptr, "cpu");
  REQUIRE(gpu.errors.empty());
  REQUIRE(gpu.grads.size() == 1);
  REQUIRE(gpu.grads[0].values.size() == 12);
  for (size_t i = 0; i < 12; ++i) CHECK(gpu.grads[0].values[i] == Approx(cpu.grads[0].values[i]).epsilon(1e-6));
  CHECK(dev.uploads > 12);  // the leaf, then the unpacked saved values in backward
  CHECK(dev.live_buffers() == 0);
}

TEST_CASE("creation functions take device= as PyTorch's do: x.device keeps a program device-agnostic",
          "[device][interp]") {
  const std::string program = R"JSON({"name": "t",
      "tensors": {"x": {"shape": [2, 3], "requires_grad": true, "init": {"arange": [1, 1]}}},
      "program": ["i = torch.tensor([1, 0], device=x.device)", "z = torch.zeros(2, 3, device=x.device)",
                  "c = torch.ones(3, device='cpu')", "l = torch.zeros_like(x)", "k = torch.ones_like(x, device='cpu')",
                  "print(i.device, z.device, c.device, l.device, k.device)",
                  "s = (x[i] + z[i]).sum() + (x * l).sum()", "s.backward()", "print(x.grad.device)",
                  {"try": ["torch.zeros(2, device='gpu')"]}, {"try": ["torch.zeros(2, device='cuda:1')"]},
                  {"try": ["torch.tensor([1.0], device=2.5)"]}, {"try": ["x + c"]}]})JSON";
  testing::SimulatedDevice dev;
  RunResult gpu = run_on(program, &dev, "cuda");
  RunResult cpu = run_on(program, nullptr, "cpu");
  REQUIRE(gpu.printed.size() == 2);
  CHECK(gpu.printed[0] == "cuda:0 cuda:0 cpu cuda:0 cpu");
  CHECK(gpu.printed[1] == "cuda:0");
  CHECK(cpu.printed[0] == "cpu cpu cpu cpu cpu");
  // The same lines walk the same graph and give the same gradient on both devices.
  CHECK(walk_names(gpu, "s") == walk_names(cpu, "s"));
  REQUIRE(grad_of(gpu, "x"));
  CHECK(grad_of(gpu, "x")->values == grad_of(cpu, "x")->values);
  REQUIRE(gpu.errors.size() == 4);
  CHECK(gpu.errors[0].kind == "type_error");  // PyTorch 1.13's RuntimeError from the device parser
  CHECK(gpu.errors[0].message.rfind("Expected one of cpu, cuda, ipu, xpu, mkldnn", 0) == 0);
  CHECK(gpu.errors[0].message.find("device string: gpu") != std::string::npos);
  CHECK(gpu.errors[1].kind == "unsupported");  // one GPU
  CHECK(gpu.errors[2].kind == "type_error");
  // PyTorch 1.13's words for torch.tensor (measured; torch.zeros, an overloaded function,
  // lists its overloads instead, which agtrace does not reproduce).
  CHECK(gpu.errors[2].message == "tensor(): argument 'device' must be torch.device, not float");
  CHECK(gpu.errors[3].kind == "device_mismatch");  // a CPU tensor made with device='cpu' meets x on cuda
  REQUIRE(cpu.errors.size() == 3);                 // on the CPU, x + c is fine
  // Without a device, device='cuda' says there is none in the run.
  CHECK(run_on(R"JSON({"name": "t", "tensors": {}, "program": ["z = torch.zeros(2, device='cuda')"]})JSON", nullptr,
               "cpu")
            .errors.at(0)
            .message.find("no cuda device in this run") != std::string::npos);
}

TEST_CASE("on cuda the allocator model counts device storages only, as torch.cuda.memory_allocated does",
          "[device][interp]") {
  // A CPU index tensor (made without device=), a Python number wrapped by torch.tensor and a
  // save_on_cpu pack live on the host: the model of the cuda run leaves them out, and agrees
  // with what the simulated caching allocator measured; the CPU run's model counts them.
  const char* json = R"JSON({"name": "t",
      "tensors": {"x": {"shape": [8, 8], "requires_grad": true}},
      "program": ["i = torch.tensor([1, 0, 1])", "c = torch.tensor(2.0)",
                  {"saved_tensor_hooks": "save_on_cpu", "body": ["h = (x * c).exp()"]},
                  "s = h.sum()"]})JSON";
  testing::SimulatedDevice dev;
  RunResult gpu = run_on(json, &dev, "cuda");
  RunResult cpu = run_on(json, nullptr, "cpu");
  REQUIRE(gpu.errors.empty());
  REQUIRE(gpu.account.device.present);
  CHECK(gpu.account.model.peak_bytes == gpu.account.device.stats.block_peak);
  CHECK(gpu.account.model.live_at_end == gpu.account.device.stats.block_live);
  // x, x * c and h (the mul's result is freed when its pack is made) and s on the device:
  // 512-byte blocks each; the CPU model adds i, c and the packs' host copies.
  CHECK(gpu.account.model.live_at_end == 3 * 512);
  CHECK(cpu.account.model.live_at_end > gpu.account.model.live_at_end);
}
