// The cuda routes of issue #8's remaining ops (dropout, index errors, negative and scaled
// indexing, p-norms, create_graph through softmax and the losses): each program runs on the
// CPU and on the host-simulated device (tests/support/sim_device.hpp), which must give the
// same printed values, nodes, saved values and bytes, errors (kind and message) and, within
// float32 rounding, gradients, with every device byte given back. The one difference
// PyTorch itself makes, dropout's NativeDropoutBackward0 on cuda, is checked as such.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "interp/run_helpers.hpp"
#include "support/device_compare.hpp"
#include "support/sim_device.hpp"

using namespace agtrace;

namespace {

RunResult run_misc(const std::string& program, const std::string& device, DeviceBackend* backend) {
  const std::string json = R"JSON({"name": "routes_misc",
      "tensors": {"x": {"shape": [3, 4], "requires_grad": true, "init": {"linspace": [-1.3, 2.1]}},
                  "z": {"shape": [3, 4], "requires_grad": true, "init": {"values": [0.0, 1.5, -2.0, 0.0, 3.0, -3.0, 0.25, 1.0, -0.5, 0.0, 2.0, -2.0]}},
                  "v": {"shape": [4], "requires_grad": true, "init": {"values": [0.5, -1.0, 2.0, 0.25]}},
                  "E": {"shape": [5, 3], "requires_grad": true, "init": {"linspace": [-0.9, 1.7]}},
                  "i": {"shape": [4], "dtype": "int64", "init": {"values": [2, 0, 2, 4]}},
                  "n": {"shape": [3], "dtype": "int64", "init": {"values": [-1, 0, -3]}},
                  "bad": {"shape": [3], "dtype": "int64", "init": {"values": [0, 5, 1]}},
                  "neg": {"shape": [2], "dtype": "int64", "init": {"values": [1, -4]}},
                  "t": {"shape": [3], "dtype": "int64", "init": {"values": [1, 3, 0]}},
                  "tbad": {"shape": [3], "dtype": "int64", "init": {"values": [1, 4, 0]}}},
      "program": )JSON" + program + "}";
  return test::run_text_on(json, device, backend);
}

// A printed cuda tensor less its `, device='cuda:0'` (PyTorch's repr names the device).
std::string without_device(std::string s) {
  const std::string tag = ", device='cuda:0'";
  for (size_t at; (at = s.find(tag)) != std::string::npos;) s.erase(at, tag.size());
  return s;
}

struct Pair {
  RunResult cpu, gpu;
};

// Runs the program on both devices and checks everything but the nodes that `renamed`
// maps (CPU name -> cuda name), whose saved values the caller checks.
// check_versions false: saved versions may differ (create_graph through dropout: the CPU's
// MulBackward0 saves the mask itself, at version 2; the cuda one saves the new scaled mask of
// infinitely_differentiable_native_dropout_backward, at version 0).
// `errors`: how many errors the program raises on each device (inside try blocks).
Pair compare(const std::string& program, const std::map<std::string, std::string>& renamed = {},
             bool check_versions = true, size_t errors_expected = 0) {
  testing::SimulatedDevice dev;
  Pair p{run_misc(program, "cpu", nullptr), run_misc(program, "cuda", &dev)};
  const RunResult &cpu = p.cpu, &gpu = p.gpu;
  INFO(program);
  std::string errors;
  for (const ErrorRecord& e : gpu.errors) errors += "\n  " + e.kind + ": " + e.message;
  INFO("errors on cuda:" << errors);
  REQUIRE(cpu.errors.size() == errors_expected);
  REQUIRE(gpu.errors.size() == cpu.errors.size());
  for (size_t i = 0; i < cpu.errors.size(); ++i) {
    CHECK(gpu.errors[i].kind == cpu.errors[i].kind);
    CHECK(gpu.errors[i].message == cpu.errors[i].message);
    CHECK(gpu.errors[i].statement == cpu.errors[i].statement);
  }
  REQUIRE(gpu.printed.size() == cpu.printed.size());
  for (size_t i = 0; i < cpu.printed.size(); ++i) {
    std::string printed = without_device(gpu.printed[i]);
    for (const auto& [from, to] : renamed)  // grad_fn=<NativeDropoutBackward0> where the CPU's is <MulBackward0>
      for (size_t at; (at = printed.find("<" + to + ">")) != std::string::npos;)
        printed.replace(at, to.size() + 2, "<" + from + ">");
    CHECK(printed == cpu.printed[i]);
  }
  REQUIRE(gpu.nodes.size() == cpu.nodes.size());
  for (const auto& [id, n] : cpu.nodes) {
    const NodeSnapshot& g = gpu.nodes.at(id);
    auto it = renamed.find(n.name);
    if (it != renamed.end() && g.name == it->second) continue;
    CHECK(g.name == n.name);
    REQUIRE(g.saved.size() == n.saved.size());
    for (size_t k = 0; k < n.saved.size(); ++k) {
      CHECK(g.saved[k].attr == n.saved[k].attr);
      CHECK(g.saved[k].value == n.saved[k].value);
      CHECK(g.saved[k].bytes == n.saved[k].bytes);
      CHECK(g.saved[k].same_object_as == n.saved[k].same_object_as);
      if (check_versions) CHECK(g.saved[k].saved_version == n.saved[k].saved_version);
    }
  }
  REQUIRE(gpu.grads.size() == cpu.grads.size());
  for (size_t g = 0; g < cpu.grads.size(); ++g) {
    INFO(cpu.grads[g].name);
    CHECK(gpu.grads[g].name == cpu.grads[g].name);
    REQUIRE(gpu.grads[g].values.size() == cpu.grads[g].values.size());
    for (size_t k = 0; k < cpu.grads[g].values.size(); ++k) {
      const double a = gpu.grads[g].values[k], e = cpu.grads[g].values[k];
      CHECK(testing::values_close(a, e, 1e-5, 1e-6));
    }
  }
  CHECK(dev.stats().requested_live == 0);
  CHECK(dev.launches > 0);
  return p;
}

const NodeSnapshot& node_named(const RunResult& r, const std::string& name) {
  for (const auto& [id, n] : r.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  throw;
}

}  // namespace

TEST_CASE("dropout in training on cuda is native_dropout: NativeDropoutBackward0 with a bool mask, the CPU's values",
          "[device][routes_misc]") {
  const Pair p = compare(R"P(["d = F.dropout(x * 2.0, 0.3)", "print(d)", "w = d * v", "w.sum().backward()"])P",
                         {{"MulBackward0", "NativeDropoutBackward0"}});
  REQUIRE(p.cpu.grads.size() == 2);
  // Values: the mask drawn from agtrace's generator in the same order on both devices, so
  // the printed result and the gradients (compared above) are the CPU's.
  const NodeSnapshot& nd = node_named(p.gpu, "NativeDropoutBackward0");
  REQUIRE(nd.saved.size() == 2);
  CHECK(nd.saved[0].attr == "p");
  CHECK(nd.saved[0].value == "0.3");
  CHECK(nd.saved[1].attr == "result1");
  CHECK(nd.saved[1].dtype == DType::Bool);
  CHECK(nd.saved[1].shape == Shape{3, 4});
  CHECK(nd.saved[1].bytes == 12);
  CHECK(nd.saved[1].saved_version == 0);
  CHECK_FALSE(nd.saved[1].is_output);
  // The CPU's node for the same op: MulBackward0 with the float mask (48 bytes, version 2).
  int64_t cpu_mask_bytes = 0;
  for (const auto& [id, n] : p.cpu.nodes)
    if (p.gpu.nodes.at(id).name == "NativeDropoutBackward0") {
      CHECK(n.name == "MulBackward0");
      REQUIRE(n.saved.size() == 2);
      CHECK(n.saved[0].attr == "other");
      CHECK(n.saved[0].saved_version == 2);
      cpu_mask_bytes = n.saved[0].bytes;
    }
  CHECK(cpu_mask_bytes == 48);
  CHECK(p.gpu.memory.saved_bytes == p.cpu.memory.saved_bytes - 48 + 12);
}

TEST_CASE("dropout's other forms on cuda (in place, p = 1, p = 0, eval) are the CPU's", "[device][routes_misc]") {
  compare(R"P(["h = x * 1.5", "F.dropout(h, 0.4, inplace=True)", "print(h)",
               "a = F.dropout(x, 1.0)", "print(F.dropout(x, 0.0) is x, F.dropout(x, 0.5, training=False) is x)",
               "(h * v).sum().backward()", "(a * x).sum().backward()", {"try": ["F.dropout(x, 1.5)"]}])P",
          {}, true, 1);
}

TEST_CASE("create_graph through dropout on cuda gives the CPU's gradients", "[device][routes_misc]") {
  compare(R"P(["g, = torch.autograd.grad((F.dropout(x, 0.5) * x * v).sum(), [x], create_graph=True)",
               "(g * g).sum().backward()"])P",
          {{"MulBackward0", "NativeDropoutBackward0"}}, false);
}

TEST_CASE("out-of-range indices on cuda raise the CPU's index_out_of_range errors", "[device][routes_misc]") {
  const Pair p = compare(R"P([{"try": ["x.index_select(1, bad)"]}, {"try": ["x[bad]"]}, {"try": ["E[tbad * 2]"]},
               {"try": ["F.embedding(bad, E)"]}, {"try": ["F.nll_loss(F.log_softmax(x, 1), tbad)"]},
               {"try": ["F.cross_entropy(x, tbad)"]}, {"try": ["x[neg]"]},
               "print(F.nll_loss(x, tbad, ignore_index=4))"])P",
                         {}, true, 7);
  REQUIRE(p.gpu.errors.size() == 7);
  for (const ErrorRecord& e : p.gpu.errors) CHECK(e.kind == "index_out_of_range");
}

TEST_CASE("negative indices, embedding's padding_idx and scale_grad_by_freq on cuda match the CPU",
          "[device][routes_misc]") {
  compare(R"P(["a = x[n] * 2.0", "print(a)", "b = (x.t()[neg] ** 2).sum()",
               "e = F.embedding(i, E, padding_idx=2) * 3.0 + F.embedding(i.view(2, 2), E, scale_grad_by_freq=True).view(4, 3)",
               "f = F.embedding(i, E, padding_idx=-1, scale_grad_by_freq=True)",
               "print(e)", "((a * a).sum() + b + (e * e).sum() + (f * x[:, :3].sum()).sum()).backward()",
               "k = F.embedding(i, E, padding_idx=4) * 1e999",
               "k.sum().backward()"])P");
}

TEST_CASE("p-norms other than 2 on cuda match the CPU, forward and backward", "[device][routes_misc]") {
  compare(R"P(["s = z.norm(1) + z.norm(1e999) + z.norm(-1e999, dim=1).sum() + z.norm(0)",
               "r = (z.norm(3, dim=0) * v).sum() + z.norm(0.5, dim=1, keepdim=True).sum() + z.norm(1.5) + x.norm(2.5, dim=1).sum()",
               "q = (x.norm(1e999, dim=0) * v).sum() + torch.norm(x, p=1, dim=1).sum()",
               "print(s, r, q)", "(s + r + q).backward()"])P");
}

TEST_CASE("create_graph through softmax, log_softmax and the losses on cuda matches the CPU", "[device][routes_misc]") {
  compare(R"P(["s = (x.softmax(1) * x).sum() + (x.log_softmax(0) * x * x).sum() + (x.softmax(0) ** 2).sum()",
               "l = F.mse_loss(x, x * v) + F.mse_loss(x * 2.0, z, reduction='sum') + (F.mse_loss(x, z, reduction='none') * x).sum()",
               "c = F.cross_entropy(x, t) + F.nll_loss(F.log_softmax(x * x, 1), t, reduction='sum')",
               "g, = torch.autograd.grad(s + l + c, [x], create_graph=True)",
               "(g * g * v).sum().backward()"])P");
}

TEST_CASE("mask indexing x[mask] on cuda matches the CPU, which follows PyTorch's IndexBackward0",
          "[device][routes_misc]") {
  const Pair p = compare(R"P(["m = z.detach() > 0.2", "y = z[m]", "print(y)", "r = x.t()[v.detach() > 0.0]",
               "e = x[x.detach().sum(1) > 100.0]", "print(r, e)",
               {"try": ["x[m.t()]"]}, {"try": ["x[m.view(3, 4, 1)]"]},
               "((y * y).sum() + (r ** 3).sum() + e.sum()).backward()"])P",
                         {}, true, 2);
  // Measured (1.13): IndexBackward0 saving indices = (m,), the very bool object (12 bytes for
  // [3, 4]), and self_sizes; the masks' errors.
  const NodeSnapshot& n = node_named(p.cpu, "IndexBackward0");
  REQUIRE(n.saved.size() == 2);
  CHECK(n.saved[0].attr == "indices");
  CHECK(n.saved[0].same_object_as == "m");
  CHECK(n.saved[0].dtype == DType::Bool);
  CHECK(n.saved[0].bytes == 12);
  CHECK(n.saved[1].value == "(3, 4)");
  REQUIRE(p.cpu.errors.size() == 2);
  CHECK(p.cpu.errors[0].kind == "shape_mismatch");
  CHECK(p.cpu.errors[0].message ==
        "The shape of the mask [4, 3] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0");
  CHECK(p.cpu.errors[1].message == "too many indices for tensor of dimension 2");
  // The gradient of (z[z > 0.2] ** 2).sum(): 2 z where the mask holds, 0 elsewhere.
  const std::vector<double> zv{0.0, 1.5, -2.0, 0.0, 3.0, -3.0, 0.25, 1.0, -0.5, 0.0, 2.0, -2.0};
  bool found = false;
  for (const GradRecord& g : p.cpu.grads)
    if (g.name == "z") {
      found = true;
      REQUIRE(g.values.size() == zv.size());
      for (size_t i = 0; i < zv.size(); ++i) CHECK(g.values[i] == (zv[i] > 0.2 ? 2.0 * zv[i] : 0.0));
    }
  CHECK(found);
}

TEST_CASE("create_graph through embedding with padding_idx and through the 2-norm on cuda matches the CPU",
          "[device][routes_misc]") {
  compare(R"P(["e = F.embedding(i, E, padding_idx=2)", "g, = torch.autograd.grad((e * e * 3.0).sum(), [E], create_graph=True)",
               "h, = torch.autograd.grad((z.norm(dim=1) * v[:3]).sum() + (z * x).norm(), [z], create_graph=True)",
               "(g * g).sum().backward()", "(h * h * x).sum().backward()"])P");
}

TEST_CASE("create_graph through x[idx] with negative indices and through x[mask] on cuda matches the CPU",
          "[device][routes_misc]") {
  compare(R"P(["g, = torch.autograd.grad((x[n] ** 3).sum() + (x.index_select(0, t[:2] - 1) ** 2).sum(), [x], create_graph=True)",
               "(g * g).sum().backward()",
               "h, = torch.autograd.grad((z[z.detach() > 0.2] ** 3).sum(), [z], create_graph=True)",
               "(h * h * x).sum().backward()"])P");
}

TEST_CASE("create_graph through clamp and gelu (both forms) on cuda matches the CPU", "[device][routes_misc]") {
  compare(R"P(["g1, = torch.autograd.grad((x.clamp(-1.0, 1.0) ** 2).sum() + (x.clamp(min=0.3) ** 3).sum() + (x.clamp(max=0.5) * x).sum(), [x], create_graph=True)",
               "g2, = torch.autograd.grad((F.gelu(x) ** 2).sum() + (F.gelu(x * 0.7, approximate='tanh') * x).sum(), [x], create_graph=True)",
               "((g1 * g1).sum() + (g2 * g2 * v).sum()).backward()"])P");
}
