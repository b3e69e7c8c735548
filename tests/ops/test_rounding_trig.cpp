// floor ceil round trunc frac sign sinh cosh tan atan asin acos log2 log10 exp2
// (lib/ops/rounding_trig.cpp): each op's gradient in float64 against its derivative written
// out here, its node and dtype rules as measured in PyTorch 1.13.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "interp/run_helpers.hpp"

using agtrace::RunResult;
using agtrace::test::run_text;

namespace {

const std::vector<double> kX{-0.7, -0.2, 0.3, 0.55, 0.8};

RunResult run_op(const std::string& op) {
  return run_text(std::string(R"JSON({"name": "t", "tensors": {"x": {"shape": [5], "dtype": "float64",
      "requires_grad": true, "init": {"values": [-0.7, -0.2, 0.3, 0.55, 0.8]}}},
      "program": ["y = x.)JSON") + op + R"JSON(()", "print(y.grad_fn.name())", "y.sum().backward()"]})JSON", true);
}

void check_derivative(const std::string& op, const std::string& node, const std::function<double(double)>& d) {
  INFO(op);
  const RunResult r = run_op(op);
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == node);
  REQUIRE(r.grads.size() == 1);
  REQUIRE(r.grads[0].values.size() == kX.size());
  for (size_t i = 0; i < kX.size(); ++i) CHECK(r.grads[0].values[i] == Approx(d(kX[i])).epsilon(1e-12));
}

}  // namespace

TEST_CASE("rounding ops have zero gradients, frac the gradient itself", "[rounding_trig]") {
  for (const char* op : {"floor", "ceil", "round", "trunc", "sign"}) {
    std::string node = op;
    node[0] = static_cast<char>(std::toupper(node[0]));
    check_derivative(op, node + "Backward0", [](double) { return 0.0; });
  }
  check_derivative("frac", "FracBackward0", [](double) { return 1.0; });
}

TEST_CASE("trigonometric and logarithmic ops follow derivatives.yaml", "[rounding_trig]") {
  check_derivative("sinh", "SinhBackward0", [](double v) { return std::cosh(v); });
  check_derivative("cosh", "CoshBackward0", [](double v) { return std::sinh(v); });
  check_derivative("tan", "TanBackward0", [](double v) { return 1.0 + std::tan(v) * std::tan(v); });
  check_derivative("atan", "AtanBackward0", [](double v) { return 1.0 / (1.0 + v * v); });
  check_derivative("asin", "AsinBackward0", [](double v) { return 1.0 / std::sqrt(1.0 - v * v); });
  check_derivative("acos", "AcosBackward0", [](double v) { return -1.0 / std::sqrt(1.0 - v * v); });
  check_derivative("exp2", "Exp2Backward0", [](double v) { return std::exp2(v) * std::log(2.0); });
  // log2 and log10 of the absolute values (positive inputs).
  auto r = run_text(R"JSON({"name": "t", "tensors": {"p": {"shape": [3], "dtype": "float64", "requires_grad": true,
      "init": {"values": [0.5, 2.0, 8.0]}}}, "program": ["(p.log2() + 3 * p.log10()).sum().backward()"]})JSON", true);
  REQUIRE(r.grads.size() == 1);
  const std::vector<double> p{0.5, 2.0, 8.0};
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(r.grads[0].values[i] == Approx(1.0 / (p[i] * std::log(2.0)) + 3.0 / (p[i] * std::log(10.0))).epsilon(1e-12));
}

TEST_CASE("rounding and trig ops: values, dtypes and kernel errors as PyTorch 1.13", "[rounding_trig]") {
  auto r = run_text(R"JSON({"name": "t", "tensors": {"i": {"shape": [3], "dtype": "int64", "init": {"values": [-2, 0, 3]}}},
      "program": ["print(torch.tensor([2.5, -2.5, 0.5, 1.5]).round().tolist(), torch.tensor([-0.0, 3.0]).sign().tolist())",
                  "print(i.floor().dtype, i.sign().tolist(), i.sinh().dtype)",
                  {"try": ["i.frac()"]}, {"try": ["torch.ones(2).half().floor()"]}, "print(torch.ones(2).half().sign().dtype)"]})JSON");
  CHECK(r.printed == std::vector<std::string>{"[2.0, -2.0, 0.0, 2.0] [0.0, 1.0]", "torch.int64 [-1, 0, 1] torch.float32",
                                              "torch.float16"});
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "dtype_mismatch");
  CHECK(r.errors[1].kind == "dtype_mismatch");
}
