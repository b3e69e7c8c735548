// Tensor.__setitem__, augmented assignment, copy_ / fill_ / index_put_ and the in-place
// forms of unary ops, each checked against what PyTorch 1.13 records (measured with
// /usr/bin/python3; the differential corpus in tests/differential/corpus runs the same
// programs against PyTorch itself).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "interp/run_helpers.hpp"

using agtrace::RunResult;
using agtrace::test::run_text;

namespace {
// x: 3x4 arange(0, 1), requiring grad; v: a 4-vector; idx: int64 [0, 2]; m: bool [T, F, T].
std::string scenario(const std::string& program) {
  return std::string(R"JSON({"name": "t", "tensors": {
    "x": {"shape": [3, 4], "requires_grad": true, "init": {"arange": [0, 1]}},
    "v": {"shape": [4], "requires_grad": true, "init": {"arange": [1, 1]}},
    "idx": {"shape": [2], "dtype": "int64", "init": {"values": [0, 2]}},
    "m": {"shape": [3], "dtype": "bool", "init": {"values": [true, false, true]}}},
    "program": )JSON") + program + "}";
}

const agtrace::GradRecord* grad_of(const RunResult& r, const std::string& name) {
  for (const auto& g : r.grads)
    if (g.name == name) return &g;
  return nullptr;
}

std::string error_kind(const RunResult& r, int statement) {
  for (const auto& e : r.errors)
    if (e.statement == statement) return e.kind;
  return "";
}
}  // namespace

TEST_CASE("x[i] = number on a non-leaf is CopySlices over the old history, the row's gradient zero", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 2", "y[0] = 1.0",
      "print(y.grad_fn.name(), y._version, y.grad_fn.next_functions[0][0].name(), y.grad_fn.next_functions[1][0])",
      "y.sum().backward()"])JSON"), true);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch::autograd::CopySlices 1 MulBackward0 None");
  const auto* g = grad_of(r, "x");
  REQUIRE(g);
  CHECK(g->values == std::vector<double>{0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2});
}

TEST_CASE("setitem drops a slice that keeps the whole dim, getitem only inside a tuple", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["a = x * 2", "a[0:3] = 1.0", "print(a.grad_fn.name())",
      "b = x * 2", "b[:] = 1.0", "print(b.grad_fn.name())",
      "c = x * 2", "c[0:3] = v", "print(c.grad_fn.name())",
      "print(x[0:3].grad_fn.name())"])JSON"));
  CHECK(r.printed == std::vector<std::string>{"FillBackward3", "torch::autograd::CopySlices", "torch::autograd::CopyBackwards",
                                              "SliceBackward0"});
  // A lone slice is always recorded in getitem; inside a tuple a whole-dim slice is skipped,
  // and an index whose every item is skipped is at::alias.
  auto t = run_text(scenario(R"JSON(["print(x[0:3].grad_fn.name(), x[0:3, :4].grad_fn.name(), x[0:3,].grad_fn.name())",
      "print(x[:, :4].grad_fn.next_functions[0][0].name(), x[:, 0:].grad_fn.next_functions[0][0].name())",
      "print(x[1, :4].grad_fn.next_functions[0][0].name())"])JSON"));
  CHECK(t.printed == std::vector<std::string>{"SliceBackward0 AliasBackward0 AliasBackward0",
                                              "torch::autograd::AccumulateGrad SliceBackward0",
                                              "torch::autograd::AccumulateGrad"});
}

TEST_CASE("x[idx] = v is IndexPutBackward0 saving the index list, v's gradient summed over the rows", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1", "y[idx] = v",
      "print(y.grad_fn.name(), y.grad_fn._saved_accumulate, y.grad_fn._saved_indices[0] is idx)",
      "z = x * 1", "z[:, idx] = 0.0", "print(z.grad_fn.name(), y._version)",
      "(y * 2).sum().backward()"])JSON"), true);
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "IndexPutBackward0 False True");
  CHECK(r.printed[1] == "torch::autograd::CopySlices 1");
  const auto* gv = grad_of(r, "v");
  REQUIRE(gv);
  CHECK(gv->values == std::vector<double>{4, 4, 4, 4});
  const auto* gx = grad_of(r, "x");
  REQUIRE(gx);
  CHECK(gx->values == std::vector<double>{0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0});
}

TEST_CASE("x[False] = v does nothing, x[True] = v writes through unsqueeze(0)", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1", "y[False] = 5.0", "print(y._version, y.grad_fn.name())",
      "y[True] = v", "print(y._version, y.grad_fn.name())"])JSON"));
  CHECK(r.printed == std::vector<std::string>{"0 MulBackward0", "1 torch::autograd::CopySlices"});
}

TEST_CASE("x[i] += v reads the item, edits it and writes it back: two bumps", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1", "y[0] += 1", "print(y._version, y.grad_fn.name())",
      "w = x * 1", "w += 1", "print(w._version, w.grad_fn.name())"])JSON"));
  CHECK(r.printed == std::vector<std::string>{"2 torch::autograd::CopySlices", "1 AddBackward0"});
}

TEST_CASE("setitem errors are PyTorch's, at the statement", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1",
      {"try": ["x[0] = 1.0"]}, {"try": ["x[idx] = 1.0"]}, {"try": ["y[5] = 1.0"]},
      {"try": ["y[0] = torch.ones(5)"]}, {"try": ["y[idx] = torch.ones(3)"]},
      {"try": ["y[idx] = torch.ones(2, 4, dtype=torch.float64)"]}, {"try": ["y[0] = 'a'"]},
      {"no_grad": ["x[0] = 5.0"]}, "print(x._version)"])JSON"));
  CHECK(error_kind(r, 1) == "view_of_leaf_inplace");
  CHECK(error_kind(r, 2) == "leaf_inplace");
  CHECK(error_kind(r, 3) == "index_out_of_range");
  CHECK(error_kind(r, 4) == "shape_mismatch");
  CHECK(error_kind(r, 5) == "shape_mismatch");
  CHECK(error_kind(r, 6) == "dtype_mismatch");
  CHECK(error_kind(r, 7) == "type_error");
  CHECK(r.printed == std::vector<std::string>{"1"});
}

TEST_CASE("a saved tensor edited through setitem fails at backward with its versions", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1", "z = y * y", "y[idx] = 0.0", {"try": ["z.sum().backward()"]}])JSON"));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "saved_tensor_modified");
  CHECK(r.errors[0].phase == "backward");
  CHECK(r.errors[0].facts["expected_version"] == 0);
  CHECK(r.errors[0].facts["found_version"] == 1);
}

TEST_CASE("copy_ records CopyBackwards: zeros to self's history, the source's gradient in its dtype", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = x * 1", "w = v.double()", "y.copy_(w)",
      "print(y.grad_fn.name(), y.dtype)", "y.sum().backward()"])JSON"), true);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch::autograd::CopyBackwards torch.float32");
  const auto* gx = grad_of(r, "x");
  REQUIRE(gx);  // zeros, not None: zeros_like(grad) flows to the old history
  CHECK(gx->values == std::vector<double>(12, 0.0));
  const auto* gv = grad_of(r, "v");
  REQUIRE(gv);
  CHECK(gv->values == std::vector<double>{3, 3, 3, 3});
}

TEST_CASE("fill_ of a number is FillBackward2, of a 0-d tensor FillBackward3 with grad.sum() for it", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["s = v.sum()", "y = x * 1", "y.fill_(2)", "print(y.grad_fn.name())",
      "z = x * 1", "z.fill_(s)", "print(z.grad_fn.name())", "z.sum().backward()",
      {"try": ["z.fill_(v)"]}])JSON"), true);
  CHECK(r.printed == std::vector<std::string>{"FillBackward2", "FillBackward3"});
  const auto* gv = grad_of(r, "v");
  REQUIRE(gv);
  CHECK(gv->values == std::vector<double>{12, 12, 12, 12});
  CHECK(error_kind(r, 8) == "shape_mismatch");
}

TEST_CASE("in-place unary forms save a clone of the old self or the edited result", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["y = v * 1", "y.sin_()",
      "print(y.grad_fn.name(), y.grad_fn._saved_self.grad_fn.name(), shares_storage(y.grad_fn._saved_self, y))",
      "q = v * 1", "q.sqrt_()", "print(q.grad_fn._saved_result._version, shares_storage(q.grad_fn._saved_result, q))",
      "n = v * 1", "n.neg_()", "print(n.grad_fn.name())",
      "p = v * 1", "p.pow_(2)", "print(p.grad_fn.name(), p.grad_fn._saved_exponent)",
      "t = torch.zeros(2, dtype=torch.int64)", {"try": ["t.sin_()"]},
      "(y + q + n + p).sum().backward()"])JSON"), true);
  CHECK(r.printed == std::vector<std::string>{"SinBackward0 CloneBackward0 False", "1 True", "NegBackward0", "PowBackward0 2"});
  CHECK(error_kind(r, 13) == "dtype_mismatch");
  const auto* gv = grad_of(r, "v");
  REQUIRE(gv);
  REQUIRE(gv->values.size() == 4);
  // d/dv [sin v + sqrt v - v + v^2] at v = 1
  CHECK(gv->values[0] == Approx(std::cos(1.0) + 0.5 - 1 + 2).epsilon(1e-6));
}

TEST_CASE("grads are keyed by the declared leaf name, never another name bound to it", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["h = x", "same = x.to(torch.float32)", "(h * 2).sum().backward()"])JSON"));
  REQUIRE(r.grads.size() == 1);
  CHECK(r.grads[0].name == "x");
}

TEST_CASE("a second backward fails at a node that saved a tensor its formula does not read", "[setitem]") {
  // MeanBackward1 saves self although its gradient needs only sizes (PyTorch's generated
  // apply() unpacks every saved variable first).
  auto r = run_text(scenario(R"JSON(["y = x.mean(dim=0)", "y.sum().backward()", {"try": ["y.sum().backward()"]}])JSON"));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "saved_tensors_freed");
}

TEST_CASE("in-place view ops give the tensor itself their node and new geometry, no CopySlices", "[setitem]") {
  auto r = run_text(scenario(R"JSON(["h = x * 2", "w = h[0:2]", "w.t_()",
      "print(w.grad_fn.name(), h.grad_fn.name(), w.shape, w._version)",
      "u = x * 1", "u.unsqueeze_(1)", "print(u.grad_fn.name(), u.shape)", "u.squeeze_(1)",
      "print(u.grad_fn.name(), u.grad_fn._saved_dim, u.shape)",
      "(w * w).sum().backward()", {"try": ["v.detach_()"]}, "d = x * 1", "d[0].detach_()"])JSON"), true);
  CHECK(r.printed == std::vector<std::string>{"TBackward1 MulBackward0 torch.Size([4, 2]) 1",
                                              "UnsqueezeBackward1 torch.Size([3, 1, 4])",
                                              "SqueezeBackward3 1 torch.Size([3, 4])"});
  const auto* gx = grad_of(r, "x");
  REQUIRE(gx);  // d/dx sum((2x)^2) over the first two rows: 8x there, 0 in the last row
  CHECK(gx->values == std::vector<double>{0, 8, 16, 24, 32, 40, 48, 56, 0, 0, 0, 0});
  REQUIRE(r.errors.size() == 1);  // v is a leaf: detach_ is allowed; d[0] is a view
  CHECK(r.errors[0].kind == "view_inplace");
  CHECK(r.errors[0].statement == 12);
}
