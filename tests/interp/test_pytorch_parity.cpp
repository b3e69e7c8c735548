// Programs where agtrace disagreed with PyTorch 1.13 (each fact measured with
// /usr/bin/python3 and torch 1.13; the same programs are differential scenarios in
// tests/differential/corpus/).
#include <catch2/catch.hpp>

#include <string>

#include "interp/run_helpers.hpp"

using agtrace::test::run_text;

namespace {
std::string scenario(const std::string& tensors, const std::string& program) {
  return std::string(R"JSON({"name": "t", "tensors": {)JSON") + tensors + R"JSON(}, "program": )JSON" + program + "}";
}
const char* kScalarLeaf = R"JSON("x": {"shape": [], "requires_grad": true, "init": {"values": [2.0]}})JSON";
}  // namespace

TEST_CASE("sum / mean over dim 0 or -1 of a 0-d tensor reduce nothing and backward to ones", "[pytorch-parity]") {
  // PyTorch wraps dim 0 / -1 of a 0-d tensor against max(ndim, 1); SumBackward1 and
  // MeanBackward1 then expand the gradient back to () without unsqueezing.
  for (const char* device : {"cpu", "meta"}) {
    auto r = run_text(scenario(kScalarLeaf, R"JSON([
      "a = x.sum(0)", "b = x.mean(0, True)", "c = x.sum(-1)", "d = x.sum([0])", "e = x.mean(dim=-1)",
      "print(a.shape, a.grad_fn.name(), b.shape, b.grad_fn.name())",
      "(a + b + c + d + e).backward()",
      "print(x.grad.shape)"
    ])JSON"), false, device);
    INFO(device);
    REQUIRE(r.errors.empty());
    REQUIRE(r.printed.size() == 2);
    CHECK(r.printed[0] == "torch.Size([]) SumBackward1 torch.Size([]) MeanBackward1");
    CHECK(r.printed[1] == "torch.Size([])");
  }
  auto r = run_text(scenario(kScalarLeaf, R"JSON(["x.mean(0).backward()", "x.sum(-1, True).backward()", "print(x.grad.item())"])JSON"));
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "2.0");
}

TEST_CASE("AccumulateGrad leaves .grad alone for a leaf that no longer requires grad", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [3], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "y = (x * x).sum()", "z = (x * 3).sum()", "x.requires_grad_(False)", "y.backward()", "print(x.grad is None)",
    "x.requires_grad_()", "z.backward()", "print(x.grad.sum().item())"
  ])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "True");
  CHECK(r.printed[1] == "9.0");
}

TEST_CASE("x.grad = t checks the tensor itself, then its type, then its size", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [2], "init": "zeros"})JSON", R"JSON([
    {"try": ["x.grad = x"]}, {"try": ["x.grad = torch.ones(3, dtype=torch.int64)"]},
    {"try": ["x.grad = torch.ones(2, dtype=torch.float64)"]}, {"try": ["x.grad = torch.ones(3)"]},
    "print(x.grad is None)", "x.grad = x.detach()", "print(x.grad is None)"
  ])JSON"));
  REQUIRE(r.errors.size() == 4);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[0].message == "can't assign Variable as its own grad");
  CHECK(r.errors[1].kind == "dtype_mismatch");
  CHECK(r.errors[1].message == "assigned grad has data of a different type");
  CHECK(r.errors[2].kind == "dtype_mismatch");
  CHECK(r.errors[3].kind == "shape_mismatch");
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "True");
  CHECK(r.printed[1] == "False");
}

TEST_CASE("torch.autograd.grad: empty inputs, and grad_outputs entries as _make_grads reads them", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [2], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "y = (x * x).sum()", "v = x * 3",
    {"try": ["torch.autograd.grad(y, [])"]},
    "g, = torch.autograd.grad([y, v], [x], grad_outputs=[None, torch.ones(2)], retain_graph=True)",
    "print(g.sum().item())",
    {"try": ["torch.autograd.grad([y, v], [x], grad_outputs=torch.ones(()))"]},
    {"try": ["torch.autograd.grad([v], [x], grad_outputs=[None])"]},
    "g, = torch.autograd.grad([y], [x], grad_outputs=[None, 1.0])",
    "print(g.sum().item())"
  ])JSON"));
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[0].message == "grad requires non-empty inputs.");
  CHECK(r.errors[1].kind == "type_error");
  CHECK(r.errors[1].message == "got 2 tensors and 1 gradients");
  CHECK(r.errors[1].phase == "backward");
  CHECK(r.errors[2].kind == "grad_not_scalar");
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "10.0");
  CHECK(r.printed[1] == "4.0");
}

TEST_CASE("keywords as PyTorch's argument parser reads them", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [2, 3], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "print(x.sum(axis=0).shape, x.sum(axis=1, keepdims=True).shape, torch.sum(input=x).shape, torch.sum(a=x, dim=0).shape)",
    "print(x.permute(dims=(1, 0)).shape, x.reshape(shape=(6,)).shape, x.expand(size=[2, 2, 3]).shape, x.view(size=(6,)).shape)",
    "print(torch.mm(x1=x, mat2=x.t()).shape, torch.mul(x, x2=x).shape, len(x.split(split_size=1)), len(torch.split(x, split_size_or_sections=2, dim=1)))",
    {"try": ["x.permute(dims=1)"]}, {"try": ["x.sum(input=x)"]}, {"try": ["x.split(1, axis=1)"]},
    {"try": ["torch.split(x, split_size=1)"]}, {"try": ["x.view(shape=(6,))"]}
  ])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "torch.Size([3]) torch.Size([2, 1]) torch.Size([]) torch.Size([3])");
  CHECK(r.printed[1] == "torch.Size([3, 2]) torch.Size([6]) torch.Size([2, 2, 3]) torch.Size([6])");
  CHECK(r.printed[2] == "torch.Size([2, 2]) torch.Size([2, 3]) 2 2");
  REQUIRE(r.errors.size() == 5);
  for (const auto& e : r.errors) CHECK(e.kind == "type_error");
}

TEST_CASE("sum / mean with dtype= reduce in that dtype and send the gradient back in the input's", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}})JSON", R"JSON([
    "y = x.sum(dtype=torch.float64)", "z = x.mean(0, dtype=torch.float64)",
    "print(y.dtype, y.grad_fn.name(), z.dtype, z.grad_fn.name())",
    {"try": ["x.mean(dtype=torch.int64)"]}, {"try": ["x.sum(dtype=torch.float16)"]},
    "(y + z.sum()).backward()", "print(x.grad.dtype, x.grad[0, 0].item())"
  ])JSON"));
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "torch.float64 SumBackward0 torch.float64 MeanBackward1");
  CHECK(r.printed[1] == "torch.float32 1.5");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "dtype_mismatch");
  CHECK(r.errors[1].kind == "unsupported");
}

TEST_CASE("torch.pow(number, tensor) is PowBackward2, and torch.mul(number, tensor) wraps the number as self", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("a": {"shape": [3], "requires_grad": true, "init": {"arange": [1, 1]}})JSON", R"JSON([
    "y = torch.pow(2, a)", "print(y.grad_fn.name(), y.grad_fn._saved_self, y.grad_fn._saved_exponent is a)",
    "m = torch.mul(2, a)", "print(m.grad_fn.name(), m.grad_fn.next_functions[0][0] is None, m.grad_fn._saved_self.dtype)",
    {"try": ["torch.mul(2, 3)"]},
    "y.sum().backward()", "print(a.grad[0].item())"
  ])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "PowBackward2 2 True");
  CHECK(r.printed[1] == "MulBackward0 True torch.int64");
  CHECK(r.printed[2].rfind("1.38629", 0) == 0);  // 2 ** 1 * log(2)
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "unsupported");
}

TEST_CASE("calling a node is unsupported, naming the node", "[pytorch-parity]") {
  // PyTorch's nodes are callable (y.grad_fn(g) runs the formula); agtrace does not model it.
  auto r = run_text(scenario(R"JSON("x": {"shape": [1], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "y = x ** 2", {"try": ["g = y.grad_fn(torch.ones(1))"]}, {"try": ["(1)(2)"]}
  ])JSON"));
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "unsupported");
  CHECK(r.errors[0].message.find("PowBackward0") != std::string::npos);
  CHECK(r.errors[1].kind == "type_error");
}

TEST_CASE("an in-place edit of an expanded view checks autograd before memory overlap", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x": {"shape": [1, 3], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "e = x.expand(2, 3)", {"try": ["e.mul_(2)"]}, {"try": ["e.exp_()"]}, {"try": ["e.copy_(torch.ones(2, 3))"]},
    "f = (x * 1).expand(2, 3)", {"try": ["f.mul_(2)"]}
  ])JSON"));
  REQUIRE(r.errors.size() == 4);
  for (size_t i = 0; i < 3; ++i) CHECK(r.errors[i].kind == "view_of_leaf_inplace");
  CHECK(r.errors[3].kind == "unsupported");
}

TEST_CASE("a view of a split / unbind output is refused in-place edits as the output is", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("a0": {"shape": [3], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "a = a0.clone()", "c = a.unbind(0)[0].view(1)", {"try": ["c.mul_(2)"]},
    "d = a.split(1)[1][0:1].view(1)", {"try": ["d.add_(1)"]}, "print(c._version, d._version)"
  ])JSON"));
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "view_inplace");
  CHECK(r.errors[0].message.rfind("Output 0 of ViewBackward0 is a view", 0) == 0);
  CHECK(r.errors[1].kind == "view_inplace");
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "0 0");
}

TEST_CASE("the grad_fn of a multi-output view whose base was edited cannot be read", "[pytorch-parity]") {
  auto r = run_text(scenario(R"JSON("x0": {"shape": [2, 3], "requires_grad": true, "init": "ones"})JSON", R"JSON([
    "x = x0.clone()", "a, b = x.unbind(0)", "x.mul_(2)",
    {"try": ["print(a.grad_fn)"]}, {"try": ["print(a.is_leaf)"]}, {"try": ["c = a * 2"]},
    "print(a.shape, a._version, a.requires_grad)"
  ])JSON"));
  REQUIRE(r.errors.size() == 3);
  for (const auto& e : r.errors) CHECK(e.kind == "view_inplace");
  CHECK(r.errors[0].message.rfind("Output 0 of UnbindBackward0 is a view and its base", 0) == 0);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch.Size([3]) 1 True");
  // a and b are still bound at the end: no walk for them (the runner records none either).
  for (const auto& w : r.walks) {
    CHECK(w.key != "a");
    CHECK(w.key != "b");
  }
}

TEST_CASE("a transposed leaf's gradient keeps the leaf's strides", "[pytorch-parity]") {
  // AccumulateGrad's clone_obey_contract for a non-overlapping, dense leaf.
  auto r = run_text(scenario(R"JSON("w": {"shape": [3, 2], "init": "ones"})JSON", R"JSON([
    "a = w.t().requires_grad_()", "a.sum().backward()",
    "print(a.grad.is_contiguous(), a.grad.t().is_contiguous(), a.grad.sum().item())",
    "b = torch.ones(2, 3, requires_grad=True)", "b.sum().backward()", "print(b.grad.is_contiguous())"
  ])JSON"));
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "False True 6.0");
  CHECK(r.printed[1] == "True");
}
