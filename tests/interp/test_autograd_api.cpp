// The autograd API a program calls (lib/interp/autograd_api.cpp, lib/autograd/engine.cpp):
// backward(inputs=...), retain_grad, grad mode as a call and as a block, .data, allclose,
// tolist. Every expected fact was measured with torch 1.13 first.
#include <catch2/catch.hpp>

#include <string>

#include "errors.hpp"
#include "interp/run_helpers.hpp"
#include "scenario/scenario.hpp"

using namespace agtrace::test;

namespace {

std::string program(const std::string& statements) {
  return R"JSON({"name": "api", "tensors": {
    "x": {"shape": [3], "requires_grad": true, "init": {"values": [1, 2, 3]}},
    "w": {"shape": [3], "requires_grad": true, "init": {"values": [4, 5, 6]}}},
    "program": )JSON" + statements + "}";
}

}  // namespace

TEST_CASE("backward(inputs=...) fills only the inputs' grads", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["y = (x * w).sum()", "y.backward(inputs=[w])", "print(x.grad, w.grad.tolist())",
    "h = x * 2", "(h * w).sum().backward(inputs=h)", "print(h.grad.tolist(), h.retains_grad, w.grad.tolist())",
    "(w * 2).sum().backward(inputs=[x])", "print(x.grad)"])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "None [1.0, 2.0, 3.0]");
  // A non-leaf input retains its grad; w (not an input) is not accumulated again.
  CHECK(r.printed[1] == "[4.0, 5.0, 6.0] True [1.0, 2.0, 3.0]");
  CHECK(r.printed[2] == "None");  // an unused input: no error, no grad
}

TEST_CASE("backward(inputs=...) errors are raised during backward", "[autograd-api]") {
  auto r = run_text(program(R"JSON([{"try": ["(x * 2).sum().backward(inputs=[])"]},
    {"try": ["(x * 2).sum().backward(inputs=[torch.zeros(3)])"]}])JSON"));
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[0].phase == "backward");
  CHECK(r.errors[0].message == "'inputs' argument to backward() cannot be empty.");
  CHECK(r.errors[1].message == "can't retain_grad on Tensor that has requires_grad=False");
}

TEST_CASE("retain_grad accumulates, follows in-place edits, is a no-op on leaves", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["h = x * 3", "h.retain_grad()", "print(h.retains_grad, x.retains_grad, h.grad)",
    "out = (h * h).sum()", "out.backward(retain_graph=True)", "print(h.grad.tolist())",
    "out.backward()", "print(h.grad.tolist())",
    "a = x * 1", "a.retain_grad()", "a.mul_(2)", "a.sum().backward()", "print(a.grad.tolist())",
    "x.retain_grad()", "print(x.retains_grad)", "k = x * 1", "print(k.grad)"])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 6);
  CHECK(r.printed[0] == "True False None");
  CHECK(r.printed[1] == "[6.0, 12.0, 18.0]");
  CHECK(r.printed[2] == "[12.0, 24.0, 36.0]");
  CHECK(r.printed[3] == "[1.0, 1.0, 1.0]");  // the gradient of a's latest version
  CHECK(r.printed[4] == "False");
  CHECK(r.printed[5] == "None");  // a non-leaf's .grad without retain_grad
}

TEST_CASE("torch.autograd.backward takes a sequence of roots and grad_tensors", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["y1 = (x * w).sum()", "y2 = (x * x).sum()",
    "torch.autograd.backward([y1, y2], grad_tensors=[torch.tensor(1.), torch.tensor(2.)])",
    "print(x.grad.tolist(), w.grad.tolist())",
    {"try": ["torch.autograd.backward([(x * 2).sum(), x.sum()], grad_tensors=[torch.tensor(1.)])"]}])JSON"));
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "[8.0, 13.0, 18.0] [1.0, 2.0, 3.0]");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].message == "got 2 tensors and 1 gradients");
}

TEST_CASE("grad mode as a call and as a set_grad_enabled block", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["torch.set_grad_enabled(False)", "a = x * 2", "print(a.requires_grad, torch.is_grad_enabled())",
    {"set_grad_enabled": true, "body": ["b = x * 2", "print(b.requires_grad)"]},
    "print(torch.is_grad_enabled())", "torch.set_grad_enabled(True)",
    {"set_grad_enabled": false, "body": ["c = x * 2"]}, "print(c.requires_grad, torch.is_grad_enabled())"])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 4);
  CHECK(r.printed[0] == "False False");
  CHECK(r.printed[1] == "True");
  CHECK(r.printed[2] == "False");  // the block restored the mode the call had set
  CHECK(r.printed[3] == "False True");
}

TEST_CASE("a set_grad_enabled block needs a bool and a body", "[autograd-api][scenario]") {
  CHECK_THROWS_AS(agtrace::load_scenario_text(program(R"JSON([{"set_grad_enabled": 1, "body": []}])JSON"), "<t>"),
                  agtrace::InputError);
  CHECK_THROWS_AS(agtrace::load_scenario_text(program(R"JSON([{"set_grad_enabled": true}])JSON"), "<t>"),
                  agtrace::InputError);
  auto sc = agtrace::load_scenario_text(program(R"JSON([{"set_grad_enabled": false, "body": ["y = x * 2"]}])JSON"), "<t>");
  REQUIRE(sc->program.size() == 1);
  CHECK(sc->program[0].kind == agtrace::ProgramItem::Kind::SetGradEnabled);
  CHECK_FALSE(sc->program[0].grad_mode);
  CHECK(sc->statement_count == 1);
}

TEST_CASE(".data, allclose, tolist and item", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["h = x * 2", "d = h.data", "print(d.requires_grad, d.is_leaf, d._base, shares_storage(d, h))",
    "d.mul_(1)", "print(d._version, h._version)",
    "print(torch.allclose(x, x + 1e-9), x.allclose(x + 1, rtol=0, atol=0.5), x.allclose(x + 1, atol=1.5))",
    "print((x / 3).tolist(), x.long().tolist(), (x > 1).tolist(), x.sum().tolist(), (x / 3).half().tolist())"])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 4);
  CHECK(r.printed[0] == "False True None True");
  CHECK(r.printed[1] == "1 0");  // its own version counter: autograd does not see the edit
  CHECK(r.printed[2] == "True False True");
  CHECK(r.printed[3] ==
        "[0.3333333432674408, 0.6666666865348816, 1.0] [1, 2, 3] [False, True, True] 6.0 "
        "[0.333251953125, 0.66650390625, 1.0]");
}

TEST_CASE("assigning .data swaps the data and keeps the object, its history and version", "[autograd-api]") {
  auto r = run_text(program(R"JSON(["h = x * 1", "v = x[0:1]", "v.data = torch.zeros(5)",
    "h.data = torch.zeros(2, dtype=torch.float64)", "print(h.dtype, h.shape, h.grad_fn.name(), h._version)",
    "print(v._base is x, v.grad_fn.name(), v.shape)",
    {"try": ["x.data = 3"]}, {"try": ["x.data = torch.tensor([3])"]},
    "x.data = torch.ones(2, dtype=torch.float64)", "(x * 3).sum().backward()", "print(x.grad.dtype, x.grad.tolist())",
    "y = w.sin()", {"try": ["w.data = torch.zeros(3)"]}])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "torch.float64 torch.Size([2]) MulBackward0 0");
  CHECK(r.printed[1] == "True SliceBackward0 torch.Size([5])");
  // The leaf's AccumulateGrad is made again for its new dtype.
  CHECK(r.printed[2] == "torch.float64 [3.0, 3.0]");
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[0].message == "Variable data has to be a tensor, but got int");
  CHECK(r.errors[1].message == "data set to a tensor that requires gradients must be floating point or complex dtype");
  // A saved input would read the new data at backward: refused rather than misaccounted.
  CHECK(r.errors[2].kind == "unsupported");
}
