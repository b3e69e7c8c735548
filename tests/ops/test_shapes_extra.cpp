// diagonal, hstack / vstack / dstack, broadcast_tensors, var_mean / std_mean, cumprod,
// isnan / isinf / isfinite, Tensor.type, torch.Size and the unsafe splits
// (lib/ops/shapes_extra.cpp): gradients by central differences in double, and the nodes,
// saved values and view rules measured in PyTorch 1.13.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "interp/run_helpers.hpp"
#include "ops/shapes_extra.hpp"
#include "support/gradcheck.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::RunResult;
using agtrace::Tensor;
using agtrace::test::Inputs;
using agtrace::test::check_gradients;
using agtrace::test::check_gradients_multi;
using agtrace::test::leaf64;
using agtrace::test::run_text;
namespace ops = agtrace::ops;

TEST_CASE("diagonal, stacking and cumprod gradients match central differences", "[shapes_extra]") {
  check_gradients("diagonal", {leaf64({3, 4, 5}, -1, 1)}, [](const Inputs& x) { return ops::diagonal(x[0], 0, 0, 1); });
  check_gradients("diagonal(-1, 2, 0)", {leaf64({3, 4, 5}, -1, 1)},
                  [](const Inputs& x) { return ops::diagonal(x[0], -1, 2, 0); });
  check_gradients("diagonal(2, -1, -2)", {leaf64({3, 4, 5}, -1, 1)},
                  [](const Inputs& x) { return ops::diagonal(x[0], 2, -1, -2); });
  check_gradients("hstack", {leaf64({2, 2}, -1, 1), leaf64({2, 3}, -1, 1, true, 0.5)},
                  [](const Inputs& x) { return ops::hstack(x); });
  check_gradients("vstack", {leaf64({3}, -1, 1), leaf64({2, 3}, -1, 1, true, 0.5)},
                  [](const Inputs& x) { return ops::vstack(x); });
  check_gradients("dstack", {leaf64({}, -1, 1), leaf64({}, -1, 1, true, 0.5)},
                  [](const Inputs& x) { return ops::dstack(x); });
  check_gradients("diag of a matrix", {leaf64({3, 4}, -1, 1)}, [](const Inputs& x) { return ops::diag(x[0], -1); });
  check_gradients("diag of a vector", {leaf64({3}, -1, 1)}, [](const Inputs& x) { return ops::diag(x[0], 2); });
  check_gradients("atleast_3d of a vector", {leaf64({3}, -1, 1)}, [](const Inputs& x) { return ops::atleast_nd(x[0], 3); });
  check_gradients("cumprod", {leaf64({3, 4}, -1.5, 1.5)}, [](const Inputs& x) { return ops::cumprod(x[0], 1); });
  check_gradients("cumprod(-2)", {leaf64({3, 4}, -1.5, 1.5)}, [](const Inputs& x) { return ops::cumprod(x[0], -2); });
  // A zero, and two zeros, in a line: the gradient is exact (no division by the input).
  Tensor z = agtrace::tensor_from_values({2, 4}, DType::Float64, {1.0, 2.0, 0.0, 3.0, 0.5, 0.0, 0.0, 2.0});
  z->requires_grad_flag = true;
  check_gradients("cumprod with zeros", {z}, [](const Inputs& x) { return ops::cumprod(x[0], 1); });
}

TEST_CASE("var_mean and std_mean gradients through both outputs", "[shapes_extra]") {
  for (bool std_dev : {false, true}) {
    check_gradients_multi(std_dev ? "std_mean" : "var_mean", {leaf64({2, 3, 4}, -1, 1)}, [&](const Inputs& x) {
      auto [spread, mean] = ops::var_mean(x[0], std::vector<int64_t>{0, 2}, 1, false, std_dev);
      return std::vector<Tensor>{spread, mean};
    });
    check_gradients_multi("all, biased", {leaf64({3, 2}, -1, 1)}, [&](const Inputs& x) {
      auto [spread, mean] = ops::var_mean(x[0], std::nullopt, 0, false, std_dev);
      return std::vector<Tensor>{spread, mean};
    });
  }
}

TEST_CASE("unsafe_split gradients and pieces that are not views", "[shapes_extra]") {
  check_gradients_multi("unsafe_split", {leaf64({5, 2}, -1, 1)},
                        [](const Inputs& x) { return ops::unsafe_split(x[0], 2, 0); });
  check_gradients_multi("unsafe_split_with_sizes", {leaf64({2, 5}, -1, 1)},
                        [](const Inputs& x) { return ops::unsafe_split_with_sizes(x[0], {1, 4}, 1); });
  // Measured: the pieces have no _base and their own version counters.
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"a": {"shape": [3, 3], "requires_grad": true}},
      "program": ["b = a * 2", "p, q, r = b.unsafe_split(1)", "p.mul_(q)",
                  "print(p._base, p._version, q._version, b._version, p.grad_fn.next_functions[0][0].name())",
                  "s = b.split_with_sizes([1, 2])", {"try": ["s[0].mul_(2)"]}]})JSON");
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "None 1 0 0 UnsafeSplitBackward0");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "view_inplace");
}

TEST_CASE("diagonal is a view saving its arguments as written", "[shapes_extra]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [3, 4], "requires_grad": true}},
      "program": ["d = x.diagonal(-1, -1, 0)",
                  "print(d.shape, d._base is x, d.grad_fn._saved_offset, d.grad_fn._saved_dim1, d.grad_fn._saved_self_sym_sizes)",
                  {"try": ["x.diagonal(0, 1, -1)"]},
                  "g, = torch.autograd.grad((d ** 2).sum(), x, create_graph=True)", "print(g.grad_fn.name())"]})JSON");
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "torch.Size([3]) True 18446744073709551615 18446744073709551615 (3, 4)");
  CHECK(r.printed[1] == "DiagonalBackwardBackward0");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "type_error");
}

TEST_CASE("isnan isinf isfinite, type and torch.Size", "[shapes_extra]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [4], "requires_grad": true,
      "init": {"values": [1.0, -1.0, 0.0, 2.0]}}, "k": {"shape": [2], "dtype": "int64"}},
      "program": ["y = x.log()", "print(y.isnan().tolist(), y.isinf().tolist(), y.isfinite().tolist(), y.isnan().grad_fn)",
                  "print(k.isfinite().tolist(), x.type(), k.type(), x.type(torch.float32) is x, x.type(torch.float64).grad_fn.name())",
                  "print(torch.Size([2, 2]), x.view(torch.Size([2, 2])).shape, x.size() == torch.Size([4]), x.dtype.is_floating_point, k.dtype.is_floating_point)"]})JSON");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "[False, True, False, False] [False, False, True, False] [True, False, False, True] None");
  CHECK(r.printed[1] == "[True, True] torch.FloatTensor torch.LongTensor True ToCopyBackward0");
  CHECK(r.printed[2] == "torch.Size([2, 2]) torch.Size([2, 2]) True True False");
}

TEST_CASE("broadcast_tensors returns a tensor of the shape itself", "[shapes_extra]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"a": {"shape": [3], "requires_grad": true},
      "c": {"shape": [2, 3], "requires_grad": true}}, "program": ["oa, oc = torch.broadcast_tensors(a, c)",
      "print(oa.grad_fn.name(), oa.grad_fn._saved_self_sym_sizes, oc is c)", {"try": ["torch.broadcast_tensors(a, c.t())"]}]})JSON");
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "ExpandBackward0 (3,) True");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "shape_mismatch");
}

TEST_CASE("diag past the matrix raises as at::diag does", "[shapes_extra]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"a": {"shape": [3, 4], "requires_grad": true}},
      "program": ["print(a.diag(4).shape, a.diag(-3).shape)", {"try": ["a.diag(5)"]}, {"try": ["a.diag(-4)"]},
                  {"try": ["torch.diag(a.unsqueeze(0))"]}]})JSON");
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch.Size([0]) torch.Size([0])");
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[1].kind == "type_error");
  CHECK(r.errors[2].kind == "shape_mismatch");
}
