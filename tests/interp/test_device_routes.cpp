// The cuda routes of ops no bundled scenario runs through on cuda yet (issue #8): each
// program runs on the CPU and on the host-simulated device (tests/support/sim_device.hpp),
// which must give the same nodes, saved bytes and, within float32 rounding (rtol 1e-5),
// the same gradients, with every device byte given back.
#include <catch2/catch.hpp>

#include <cmath>

#include "interp/run_helpers.hpp"
#include "support/sim_device.hpp"

using namespace agtrace;

namespace {

RunResult run_program(const std::string& program, const std::string& device, DeviceBackend* backend) {
  const std::string json = R"JSON({"name": "routes",
      "tensors": {"x": {"shape": [3, 4], "requires_grad": true, "init": {"linspace": [-1.5, 2.0]}},
                  "w": {"shape": [4], "requires_grad": true, "init": {"linspace": [0.5, 1.5]}},
                  "b": {"shape": [4], "requires_grad": true, "init": {"linspace": [-0.2, 0.3]}},
                  "v": {"shape": [4], "requires_grad": true, "init": {"values": [0.5, -1.0, 2.0, 0.25]}},
                  "B": {"shape": [2, 3, 4], "requires_grad": true, "init": {"linspace": [-0.7, 0.9]}},
                  "i": {"shape": [3], "dtype": "int64", "init": {"values": [2, 0, 2]}}},
      "program": )JSON" + program + "}";
  return test::run_text_on(json, device, backend);
}

void same_report(const std::string& program) {
  testing::SimulatedDevice dev;
  const RunResult cpu = run_program(program, "cpu", nullptr);
  const RunResult gpu = run_program(program, "cuda", &dev);
  INFO(program);
  std::string errors;
  for (const ErrorRecord& e : gpu.errors) errors += "\n  " + e.kind + ": " + e.message;
  INFO("errors on cuda:" << errors);
  REQUIRE(cpu.errors.empty());
  REQUIRE(gpu.errors.empty());
  REQUIRE(gpu.nodes.size() == cpu.nodes.size());
  for (const auto& [id, n] : cpu.nodes) {
    CHECK(gpu.nodes.at(id).name == n.name);
    REQUIRE(gpu.nodes.at(id).saved.size() == n.saved.size());
    for (size_t k = 0; k < n.saved.size(); ++k) CHECK(gpu.nodes.at(id).saved[k].bytes == n.saved[k].bytes);
  }
  CHECK(gpu.memory.saved_bytes == cpu.memory.saved_bytes);
  REQUIRE(gpu.grads.size() == cpu.grads.size());
  REQUIRE(!cpu.grads.empty());
  for (size_t g = 0; g < cpu.grads.size(); ++g) {
    INFO(cpu.grads[g].name);
    REQUIRE(gpu.grads[g].values.size() == cpu.grads[g].values.size());
    for (size_t k = 0; k < cpu.grads[g].values.size(); ++k) {
      const double a = gpu.grads[g].values[k], e = cpu.grads[g].values[k];
      CHECK(std::fabs(a - e) <= 1e-6 + 1e-5 * std::fabs(e));
    }
  }
  CHECK(dev.stats().requested_live == 0);
  CHECK(dev.launches > 0);
}

}  // namespace

TEST_CASE("pointwise activations and their gradients on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["h = x.sin() + x.cos() + x.abs() + (x * x + 1.0).rsqrt() + x.clamp(-1.0, 1.0) + x.clamp(min=0.2)",
                  "a = F.gelu(x) + F.gelu(x, approximate='tanh') + F.silu(x) + F.leaky_relu(x, 0.2)",
                  "(h.sum() + (a * a).sum()).backward()"])P");
}

TEST_CASE("softmax, log_softmax, max, amax and mean on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["s = (x.softmax(-1) * v).sum() + (x.log_softmax(0) * x).sum()",
                  "values, indices = x.max(dim=1)",
                  "m = values.sum() + x.max() + x.amax(1).sum() + (x.mean(0) * v).sum() + x.mean()",
                  "(s + m).backward()"])P");
}

TEST_CASE("var, the 2-norm, where and masked_fill on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["s = x.var() + (x.var(1, keepdim=True) * 2.0).sum() + x.norm() + (x.norm(dim=0) * v).sum()",
                  "w2 = torch.where(x > 0.5, x, x * 2.0) + x.masked_fill(x < 0.0, 1.5)",
                  "(s + (w2 * w2).sum()).backward()"])P");
}

TEST_CASE("mse_loss, nll_loss and cross_entropy on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["l = F.nll_loss(F.log_softmax(x, 1), i) + F.nll_loss(x, i, reduction='sum') + F.mse_loss(x, x * x)",
                  "k = F.mse_loss(w, b, reduction='sum') + (F.mse_loss(v, w, reduction='none') * b).sum()",
                  "m = (F.nll_loss(x, i, reduction='none') * v[:3]).sum() + F.nll_loss(x, i, weight=w.detach(), ignore_index=0)",
                  "c = F.cross_entropy(x[0], i[0]) + F.cross_entropy(x, i, weight=b.detach() + 1.0)",
                  "(l + m + c + k).backward()"])P");
}

TEST_CASE("max_pool2d forward and backward on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["p = F.max_pool2d(B, 2) * 2.0 + F.max_pool2d(B, (2, 3), stride=1, padding=1).sum()",
                  "q = (F.max_pool2d(B.view(1, 2, 3, 4), 2, stride=1, dilation=(1, 2)) ** 2).sum()",
                  "(p.sum() + q).backward()"])P");
}

TEST_CASE("create_graph through max(dim) on cuda (ScatterBackward0) matches the CPU", "[device][routes]") {
  same_report(R"P(["g1, = torch.autograd.grad((x.max(1)[0] ** 2).sum() + (x.max(0, keepdim=True)[0] ** 3).sum(), [x], create_graph=True)",
                  "(g1 * x).sum().backward()"])P");
}

TEST_CASE("layer_norm forward and backward on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["y = F.layer_norm(x, [4], w, b)", "((y * y).sum() + (F.layer_norm(B, [3, 4]) * B).sum()).backward()"])P");
}

TEST_CASE("products, indexing and concatenation on cuda match the CPU", "[device][routes]") {
  same_report(R"P(["p = (x @ v).sum() + v @ w + (B @ x.t()).sum() + torch.bmm(B, B.transpose(1, 2)).sum()",
                  "q = (x.index_select(1, i) ** 2).sum() + (x[i] * 3.0).sum() + (torch.cat([x, x * 2], 1) ** 2).sum()",
                  "r = (torch.stack([w, b]) ** 2).sum() + (F.embedding(i, x) * F.embedding(i.view(3, 1), x)[:, 0]).sum()",
                  "(p + q + r).backward()"])P");
}
