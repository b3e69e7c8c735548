// Random in-place fills and torch.bernoulli (lib/ops/random_inplace.cpp), run through the
// interpreter (they draw from the run-wide generator):
//  - the values follow the documented rule (seed XOR fnv1a64("__program__"), one draw per
//    element in row-major order), so a run is replayable;
//  - fidelity with PyTorch 1.13 (measured with /usr/bin/python3): node names per overload,
//    edges, one version bump, zero gradients, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "interp/run_helpers.hpp"
#include "scenario/random.hpp"

using namespace agtrace;
using agtrace::test::run_text;

namespace {

std::string program(const std::string& statements, int seed = 5) {
  return R"({"name": "random_inplace", "seed": )" + std::to_string(seed) +
         R"(, "tensors": {"x": {"shape": [4], "dtype": "float64", "requires_grad": true, "init": {"values": [0.2, -0.5, 0.9, 1.5]}},
             "p": {"shape": [4], "dtype": "float64", "requires_grad": true, "init": {"values": [0.0, 1.0, 1.0, 0.0]}}},
             "program": )" + statements + "}";
}

const GradRecord* grad_of(const RunResult& r, const std::string& name) {
  for (const GradRecord& g : r.grads)
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace

// The numbers of a printed Python list of floats ("[0.5, -1.25]").
std::vector<double> numbers_in(const std::string& line) {
  std::vector<double> out;
  const char* c = line.c_str();
  while (*c) {
    if (*c == '-' || (*c >= '0' && *c <= '9')) {
      char* end = nullptr;
      out.push_back(std::strtod(c, &end));
      c = end;
    } else {
      ++c;
    }
  }
  return out;
}

TEST_CASE("uniform_ and normal_ draw from the run-wide generator, one draw per element in row-major order",
          "[act-inplace][random]") {
  auto r = run_text(program(R"P(["h = x * 1", "h.uniform_(-1, 3)", "print(h.tolist())", "g = x * 1",
      "g.normal_(0.5, 2)", "print(g.tolist())"])P"), true);
  REQUIRE(r.errors.empty());
  SplitMix64 gen(5 ^ fnv1a64("__program__"));
  const std::vector<double> uniform = numbers_in(r.printed[0]), normal = numbers_in(r.printed[1]);
  REQUIRE(uniform.size() == 4);
  REQUIRE(normal.size() == 4);
  for (double u : uniform) CHECK(u == Approx(-1 + gen.uniform01() * 4).epsilon(1e-15));
  for (double v : normal) {
    const double u1 = gen.uniform01_open_below(), u2 = gen.uniform01();
    CHECK(v == Approx(0.5 + 2 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * 3.141592653589793 * u2)).epsilon(1e-15));
  }
}

TEST_CASE("random fills record their own node, bump once, and pass zero gradients", "[act-inplace][random]") {
  auto r = run_text(program(R"P(["h = x * 1", "h.normal_(2, 0)", "print(h.tolist(), h.grad_fn.name())",
      "g = x * 1", "g.bernoulli_(p)", "print(g.tolist(), g.grad_fn.name(), g._version)",
      "k = x * 1", "k.random_(1, 5)", "print(k.grad_fn.name())", "m = x * 1", "m.random_(3)", "print(m.grad_fn.name())",
      "n = x * 1", "n.random_()", "print(n.grad_fn.name())",
      "b = torch.bernoulli(p)", "print(b.tolist(), b.grad_fn.name(), torch.bernoulli(x, 1.0).tolist())",
      "(h + g + k + m + n + b).sum().backward()"])P"), true);
  REQUIRE(r.errors.empty());
  CHECK(r.printed[0] == "[2.0, 2.0, 2.0, 2.0] NormalBackward0");
  CHECK(r.printed[1] == "[0.0, 1.0, 1.0, 0.0] BernoulliBackward1 1");
  CHECK(r.printed[2] == "RandomBackward0");
  CHECK(r.printed[3] == "RandomBackward1");
  CHECK(r.printed[4] == "RandomBackward2");
  CHECK(r.printed[5] == "[0.0, 1.0, 1.0, 0.0] BernoulliBackward0 [1.0, 1.0, 1.0, 1.0]");
  const GradRecord* gx = grad_of(r, "x");
  const GradRecord* gp = grad_of(r, "p");
  REQUIRE(gx != nullptr);
  REQUIRE(gp != nullptr);
  // derivatives.yaml: every input of these nodes gets zeros_like(grad).
  CHECK(gx->values == std::vector<double>(4, 0.0));
  CHECK(gp->values == std::vector<double>(4, 0.0));
}

TEST_CASE("random_ draws integers below to, random fills check their arguments", "[act-inplace][random]") {
  auto r = run_text(program(R"P(["i = torch.zeros(64, dtype=torch.int64)", "i.random_(2, 6)",
      "print(i.min().item() >= 2, i.max().item() <= 5)",
      {"try": ["x.uniform_()"]}, "h = x * 1", {"try": ["h.uniform_(2, 1)"]}, {"try": ["h.normal_(0, -1)"]},
      {"try": ["h.bernoulli_(1.5)"]}, {"try": ["h.random_(5, 2)"]}, {"try": ["i.uniform_()"]},
      {"try": ["torch.zeros(1, 3).expand(2, 3).bernoulli_(0.5)"]}, "print(h._version)"])P"));
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "True True");
  CHECK(r.printed[1] == "0");
  std::vector<std::string> kinds;
  for (const ErrorRecord& e : r.errors) kinds.push_back(e.kind);
  CHECK(kinds == std::vector<std::string>{"leaf_inplace", "type_error", "type_error", "type_error", "type_error",
                                          "dtype_mismatch", "unsupported"});
}
