// Creation inside programs (lib/ops/creation.cpp): dtype inference, shapes, the random
// creators' generator (documented in creation.cpp) and meta runs. Facts measured in torch 1.13.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "interp/run_helpers.hpp"

using namespace agtrace::test;

namespace {

std::string program(const std::string& statements, int seed = 3) {
  return R"JSON({"name": "creation", "seed": )JSON" + std::to_string(seed) + R"JSON(, "tensors": {
    "x": {"shape": [2, 3], "requires_grad": true}}, "program": )JSON" + statements + "}";
}

}  // namespace

TEST_CASE("arange: arities, dtype inference, errors", "[creation]") {
  auto r = run_text(program(R"JSON(["print(torch.arange(5).tolist(), torch.arange(5).dtype)",
    "print(torch.arange(1, 2, 0.5).tolist(), torch.arange(5, 1, -2).tolist(), torch.arange(0, 1, 0.3).dtype)",
    {"try": ["torch.arange(1, 5, 0)"]}, {"try": ["torch.arange(5, 1)"]}, {"try": ["torch.arange(3, requires_grad=True)"]}])JSON"));
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "[0, 1, 2, 3, 4] torch.int64");
  CHECK(r.printed[1] == "[1.0, 1.5] [5, 3] torch.float32");
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].message == "step must be nonzero");
  CHECK(r.errors[1].message == "upper bound and larger bound inconsistent with step sign");
  CHECK(r.errors[2].message == "Only Tensors of floating point and complex dtype can require gradients");
}

TEST_CASE("full, empty and new_*: dtypes follow PyTorch", "[creation]") {
  auto r = run_text(program(R"JSON(["print(torch.full((2,), 3).dtype, torch.full((2,), True).dtype, torch.full((2,), 1.5).dtype)",
    "print(torch.empty(2, 3).tolist(), x.new_tensor([1, 2]).dtype, x.long().new_full((2,), 2.5).tolist())",
    "print(x.new_ones(2, requires_grad=True).is_leaf, torch.full_like(x.long(), 2.7).tolist())",
    {"try": ["torch.full(2, 1.)"]}])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "torch.int64 torch.bool torch.float32");
  // torch.empty is zeros in agtrace (PyTorch leaves the elements undefined).
  CHECK(r.printed[1] == "[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]] torch.float32 [2, 2]");
  CHECK(r.printed[2] == "True [[2, 2, 2], [2, 2, 2]]");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "type_error");
}

TEST_CASE("random creators: seeded, in range, a permutation", "[creation]") {
  const std::string statements = R"JSON(["a = torch.rand(1000)", "print(torch.equal(a >= 0, a == a), torch.equal(a < 1, a == a))",
    "i = torch.randint(2, 5, (1000,))", "print(i.dtype, torch.equal(i >= 2, i == i), torch.equal(i < 5, i == i), torch.equal(i == 4, i != i))",
    "p = torch.randperm(6)", "print(p.tolist())", "n = torch.randn(3)", "print(n.tolist())",
    {"try": ["torch.randn(2, dtype=torch.int64)"]}])JSON";
  auto r1 = run_text(program(statements));
  auto r2 = run_text(program(statements));
  auto r3 = run_text(program(statements, 4));
  REQUIRE(r1.printed.size() == 4);
  CHECK(r1.printed[0] == "True True");
  CHECK(r1.printed[1] == "torch.int64 True True False");  // 4 is drawn
  std::string perm = r1.printed[2];
  for (char digit : std::string("012345")) CHECK(std::count(perm.begin(), perm.end(), digit) == 1);
  CHECK(r1.printed == r2.printed);  // the run-wide generator is seeded by the scenario seed
  CHECK(r1.printed[3] != r3.printed[3]);
  REQUIRE(r1.errors.size() == 1);
  CHECK(r1.errors[0].message == "\"normal_kernel_cpu\" not implemented for 'Long'");
}

TEST_CASE("creation on meta: shapes only, no draws", "[creation]") {
  auto r = run_text(program(R"JSON(["a = torch.randn(4, 5)", "b = torch.arange(0, 1, 0.25)", "c = x.new_full((3,), 2)",
    "p = torch.randperm(3)", "print(a.shape, b.shape, c.dtype, p.shape, a.device)"])JSON"),
                    false, "meta");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch.Size([4, 5]) torch.Size([4]) torch.float32 torch.Size([3]) meta");
}
