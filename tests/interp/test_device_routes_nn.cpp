// The cuda routes of the nn layers (issue #8): batch_norm (training and eval), conv2d and
// create_graph through conv2d, batch_norm, layer_norm and max_pool2d. Each program runs
// on the CPU and on the host-simulated device (tests/support/sim_device.hpp), which must
// give the same nodes, saved values and bytes, and within float32 rounding (rtol 1e-5)
// the same gradients, forward values and running statistics, with every device byte
// given back. Forward values and buffers are compared as the gradients of probe leaves:
// (y.detach() * probe).sum() gives probe.grad == y exactly.
#include <catch2/catch.hpp>

#include <cmath>

#include "interp/interpreter.hpp"
#include "interp/run_helpers.hpp"
#include "scenario/scenario.hpp"
#include "support/device_compare.hpp"
#include "support/sim_device.hpp"

using namespace agtrace;

namespace {

std::string scenario_json(const std::string& tensors, const std::string& program) {
  return R"({"name": "routes_nn", "seed": 7, "tensors": )" + tensors + R"(, "program": )" + program + "}";
}

RunResult run_nn(const std::string& tensors, const std::string& program, const std::string& device,
                 DeviceBackend* backend) {
  return test::run_text_on(scenario_json(tensors, program), device, backend);
}

// Runs on both devices and compares (support/device_compare.hpp: nodes, saved values,
// walks, printed lines, saved bytes, non-zero gradients within rtol 1e-5, every device byte
// given back); returns the cuda run's launch count.
int64_t same_report(const std::string& tensors, const std::string& program) {
  INFO(program);
  const testing::DeviceComparison c = testing::compare_devices(scenario_json(tensors, program));
  CHECK(!c.cpu.nodes.empty());
  CHECK(!c.cpu.grads.empty());
  CHECK(c.launches > 0);
  return c.launches;
}

const char* kBatchNormTensors = R"({
    "bx": {"shape": [2, 3, 2, 2], "requires_grad": true, "init": {"uniform": [-1.5, 2.0]}},
    "bl": {"shape": [3, 3, 4], "requires_grad": true, "init": {"uniform": [-1.0, 1.0]}},
    "bw": {"shape": [3], "requires_grad": true, "init": {"uniform": [0.5, 1.5]}},
    "bb": {"shape": [3], "requires_grad": true, "init": {"uniform": [-0.5, 0.5]}},
    "rm": {"shape": [3], "init": {"uniform": [-0.3, 0.3]}},
    "rv": {"shape": [3], "init": {"uniform": [0.5, 1.5]}},
    "t": {"shape": [2, 3, 2, 2], "init": {"uniform": [-1.0, 1.0]}},
    "py": {"shape": [2, 3, 2, 2], "requires_grad": true, "init": "ones"},
    "pe": {"shape": [2, 3, 2, 2], "requires_grad": true, "init": "ones"},
    "pm": {"shape": [3], "requires_grad": true, "init": "ones"},
    "pv": {"shape": [3], "requires_grad": true, "init": "ones"},
    "ps": {"shape": [3], "requires_grad": true, "init": "ones"},
    "pi": {"shape": [3], "requires_grad": true, "init": "ones"}})";

// The conv operands in `dtype`: float32 for first order; float64 for second order, whose
// float32 sums of sums (a convolution of gradients that are convolutions) differ from the
// CPU's double arithmetic by more than 1e-5 where they cancel (measured: up to 2e-5).
std::string conv_tensors(const std::string& dtype) {
  std::string t = R"({
    "img": {"shape": [2, 4, 5, 6], "requires_grad": true, "init": {"uniform": [-1.0, 1.0]}},
    "w1": {"shape": [3, 4, 3, 3], "requires_grad": true, "init": {"uniform": [-0.5, 0.5]}},
    "b1": {"shape": [3], "requires_grad": true, "init": {"uniform": [-0.2, 0.2]}},
    "w2": {"shape": [6, 2, 2, 3], "requires_grad": true, "init": {"uniform": [-0.5, 0.5]}},
    "b2": {"shape": [6], "requires_grad": true, "init": {"uniform": [-0.2, 0.2]}},
    "w3": {"shape": [4, 1, 3, 2], "requires_grad": true, "init": {"uniform": [-0.5, 0.5]}},
    "p1": {"shape": [2, 3, 5, 6], "requires_grad": true, "init": "ones"},
    "p2": {"shape": [2, 6, 3, 2], "requires_grad": true, "init": "ones"}})";
  const std::string key = "\"requires_grad\"";
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + 1))
    t.insert(at, "\"dtype\": \"" + dtype + "\", "), at += dtype.size() + 13;
  return t;
}

}  // namespace

TEST_CASE("batch_norm in training on cuda: values, running statistics and gradients match the CPU",
          "[device][routes][nn]") {
  same_report(kBatchNormTensors,
              R"P(["y = F.batch_norm(bx, rm, rv, bw, bb, training=True, momentum=0.3)",
                   "print(y.grad_fn.name(), y.grad_fn._saved_result1.shape, rm._version, rv._version)",
                   "sm = y.grad_fn._saved_result1",
                   "si = y.grad_fn._saved_result2",
                   "z = F.batch_norm(bl, None, None, training=True)",
                   "((y * t).sum() + (z * z * bl).sum()).backward()",
                   "((y.detach() * py).sum() + (rm * pm).sum() + (rv * pv).sum()).backward()",
                   "((sm * ps).sum() + (si * pi).sum()).backward()"])P");
}

TEST_CASE("batch_norm in eval on cuda: values and gradients match the CPU", "[device][routes][nn]") {
  same_report(kBatchNormTensors,
              R"P(["y = F.batch_norm(bx, rm, rv, bw, bb, training=False)",
                   "e = F.batch_norm(bx, rm, rv, None, bb, training=False)",
                   "print(y.grad_fn._saved_result1.shape, y.grad_fn._saved_training)",
                   "((y * t).sum() + (e * e * t).sum()).backward()",
                   "((y.detach() * py).sum() + (e.detach() * pe).sum() + (rm * pm).sum() + (rv * pv).sum()).backward()"])P");
}

TEST_CASE("conv2d on cuda with stride, padding, dilation, groups, with and without bias matches the CPU",
          "[device][routes][nn]") {
  same_report(conv_tensors("float32"),
              R"P(["c1 = F.conv2d(img, w1, b1, padding=1)",
                   "c2 = F.conv2d(img, w2, b2, stride=2, padding=(1, 0), groups=2)",
                   "c3 = F.conv2d(img[:, :, :, 1:], w3, None, stride=(1, 2), dilation=(2, 1), groups=4)",
                   "c4 = F.conv2d(img, w1.detach())",
                   "print(c1.shape, c2.shape, c3.shape, c4.grad_fn._saved_bias_sym_sizes_opt)",
                   "((c1 * c1).sum() + (c2 ** 3).sum() + (c3 * c3.sin()).sum() + (c4 * img[:, :3, 1:4, 1:5]).sum()).backward()",
                   "((c1.detach() * p1).sum() + (c2.detach() * p2).sum()).backward()"])P");
}

TEST_CASE("create_graph through conv2d on cuda (ConvolutionBackwardBackward0) matches the CPU",
          "[device][routes][nn]") {
  same_report(conv_tensors("float64"),
              R"P(["c = F.conv2d(img, w2, b2, stride=2, padding=1, groups=2)",
                   "gi, gw, gb = torch.autograd.grad((c ** 2).sum(), [img, w2, b2], create_graph=True)",
                   "print(gi.grad_fn.name(), gw.grad_fn is gb.grad_fn)",
                   "((gi * img).sum() + (gw ** 2).sum() + (gb * b2).sum()).backward()",
                   "g2, = torch.autograd.grad((F.conv2d(img, w1) ** 2).sum(), [w1], create_graph=True)",
                   "(g2 * g2.cos()).sum().backward()"])P");
}

TEST_CASE("create_graph through batch_norm on cuda (NativeBatchNormBackwardBackward0), training and eval, "
          "matches the CPU",
          "[device][routes][nn]") {
  same_report(kBatchNormTensors,
              R"P(["y = (F.batch_norm(bx, rm, rv, bw, bb, training=True) ** 3 * t).sum() + (F.batch_norm(bx, rm, rv, bw, None, training=False) ** 3).sum()",
                   "gx, gw = torch.autograd.grad(y, [bx, bw], create_graph=True)",
                   "print(gx.grad_fn.name(), gw.grad_fn.name())",
                   "((gx * bx).sum() + (gw ** 2).sum()).backward()",
                   "z = (F.batch_norm(bl, None, None, training=True) ** 2 * bl).sum()",
                   "gl, = torch.autograd.grad(z, [bl], create_graph=True)",
                   "(gl * gl).sum().backward()"])P");
}

TEST_CASE("create_graph through layer_norm and max_pool2d on cuda matches the CPU", "[device][routes][nn]") {
  same_report(R"({
      "x": {"shape": [3, 2, 4], "requires_grad": true, "init": {"uniform": [-1.5, 1.5]}},
      "w": {"shape": [2, 4], "requires_grad": true, "init": {"uniform": [0.5, 1.5]}},
      "b": {"shape": [2, 4], "requires_grad": true, "init": {"uniform": [-0.5, 0.5]}},
      "t": {"shape": [3, 2, 4], "init": {"uniform": [-1.0, 1.0]}},
      "img": {"shape": [2, 2, 5, 4], "requires_grad": true, "init": {"uniform": [-1.0, 1.0]}}})",
              R"P(["y = (F.layer_norm(x, (2, 4), w, b) * t).sum() + (F.layer_norm(x, (4,)) ** 3).sum()",
                   "gx, gw = torch.autograd.grad(y, [x, w], create_graph=True)",
                   "print(gx.grad_fn.name(), gw.grad_fn.name())",
                   "((gx * x).sum() + (gw ** 2).sum()).backward()",
                   "m = (F.max_pool2d(img, 2, stride=1, padding=1) ** 2).sum()",
                   "gi, = torch.autograd.grad(m, [img], create_graph=True)",
                   "print(gi.grad_fn.name())",
                   "(gi * img * img).sum().backward()"])P");
}

TEST_CASE("an int64 conv2d, which the CPU runs, is unsupported on cuda (conv.cuh has floating kernels only)",
          "[device][routes][nn]") {
  const std::string tensors = R"({"a": {"shape": [1, 1, 3, 3], "dtype": "int64", "init": {"arange": [1, 1]}},
                                  "k": {"shape": [1, 1, 2, 2], "dtype": "int64", "init": "ones"}})";
  const std::string program = R"P(["c = F.conv2d(a, k)", "print(c.shape)"])P";
  testing::SimulatedDevice dev;
  const RunResult cpu = run_nn(tensors, program, "cpu", nullptr);
  const RunResult gpu = run_nn(tensors, program, "cuda", &dev);
  CHECK(cpu.errors.empty());
  REQUIRE(gpu.errors.size() == 1);
  CHECK(gpu.errors[0].kind == "unsupported");
  CHECK(gpu.errors[0].message.find("conv2d") != std::string::npos);
  CHECK(dev.stats().requested_live == 0);
}
