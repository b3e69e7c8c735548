// maximum minimum fmax fmin atan2 hypot remainder fmod lerp addcmul addcdiv dist rsub addmv
// addr addbmm baddbmm (lib/ops/binary_more.cpp): each gradient in float64 against central
// differences of agtrace's own forward, and the nodes, saved values, ties, dtypes and errors
// measured in PyTorch 1.13.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "account/save_rules.hpp"
#include "interp/run_helpers.hpp"

using agtrace::RunResult;
using agtrace::test::run_text;

namespace {

struct Leaf {
  std::string name;
  std::string shape;  // JSON: "[2, 3]"
  std::vector<double> values;
};

std::string tensors_json(const std::vector<Leaf>& leaves, bool requires_grad) {
  std::string out = "{";
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::string vals;
    for (size_t j = 0; j < leaves[i].values.size(); ++j) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", leaves[i].values[j]);
      vals += (j ? ", " : "") + std::string(buf);
    }
    out += (i ? ", \"" : "\"") + leaves[i].name + "\": {\"shape\": " + leaves[i].shape +
           ", \"dtype\": \"float64\", \"requires_grad\": " + (requires_grad ? "true" : "false") +
           ", \"init\": {\"values\": [" + vals + "]}}";
  }
  return out + "}";
}

double value_of(const std::vector<Leaf>& leaves, const std::string& expr) {
  const RunResult r = run_text("{\"name\": \"t\", \"tensors\": " + tensors_json(leaves, false) +
                               ", \"program\": [\"s = " + expr + "\", \"print(s.item())\"]}");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 1);
  return std::stod(r.printed[0]);
}

// Every leaf's gradient of the scalar `expr` against (f(x + h) - f(x - h)) / 2h.
void check_gradients(const std::vector<Leaf>& leaves, const std::string& expr) {
  INFO(expr);
  const RunResult r = run_text("{\"name\": \"t\", \"tensors\": " + tensors_json(leaves, true) +
                                   ", \"program\": [\"s = " + expr + "\", \"s.backward()\"]}",
                               true);
  REQUIRE(r.errors.empty());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const agtrace::GradRecord* g = nullptr;
    for (const auto& rec : r.grads)
      if (rec.name == leaves[i].name) g = &rec;
    INFO("grad of " << leaves[i].name);
    REQUIRE(g != nullptr);
    REQUIRE(g->values.size() == leaves[i].values.size());
    for (size_t j = 0; j < leaves[i].values.size(); ++j) {
      const double h = 1e-6;
      std::vector<Leaf> plus = leaves, minus = leaves;
      plus[i].values[j] += h;
      minus[i].values[j] -= h;
      const double numeric = (value_of(plus, expr) - value_of(minus, expr)) / (2 * h);
      INFO("element " << j);
      CHECK(g->values[j] == Approx(numeric).epsilon(1e-5).margin(1e-6));
    }
  }
}

const Leaf kA{"a", "[2, 3]", {0.3, -1.2, 0.8, 1.7, -0.4, 2.1}};
const Leaf kB{"b", "[2, 3]", {-0.5, 0.9, 1.1, -1.3, 0.6, 0.7}};
const Leaf kC{"c", "[2, 3]", {0.9, 1.4, 0.6, 1.2, 0.75, 1.6}};  // positive: divisors, weights
const Leaf kRow{"r", "[3]", {0.1, -0.2, 1.5}};

RunResult run_program(const std::string& tensors, const std::string& program, const std::string& device = "") {
  return run_text("{\"name\": \"t\", \"tensors\": " + tensors + ", \"program\": " + program + "}", true, device);
}

const char* kLeaves = R"P({"a": {"shape": [3], "requires_grad": true, "init": {"values": [1.0, 2.0, 3.0]}},
    "b": {"shape": [3], "requires_grad": true, "init": {"values": [1.0, 5.0, 0.0]}}})P";

}  // namespace

TEST_CASE("elementwise pairs: gradients by central differences", "[binary_more]") {
  check_gradients({kA, kB, kC}, "(torch.maximum(a, b) * c).sum()");
  check_gradients({kA, kB, kC}, "(torch.min(a, b) * c).sum()");
  check_gradients({kA, kRow, kC}, "(a.max(r) * c).sum()");  // broadcast other
  check_gradients({kA, kB, kC}, "(torch.fmax(a, b) * c + b.fmin(a)).sum()");
  check_gradients({kA, kB, kC}, "(torch.atan2(a, b) * c).sum()");
  check_gradients({kA, kB, kC}, "(torch.hypot(a, b) * c).sum()");
  check_gradients({kA, kC}, "(torch.remainder(a, c) * a).sum()");
  check_gradients({kA, kC}, "(a.fmod(c) * a + a.remainder(1.5) + torch.fmod(a, -0.65)).sum()");
  check_gradients({kA, kB}, "(torch.rsub(a, b, alpha=3) * a).sum()");
}

TEST_CASE("lerp, addcmul, addcdiv, dist: gradients by central differences", "[binary_more]") {
  check_gradients({kA, kB, kC}, "(torch.lerp(a, b, 0.3) * c + a.lerp(b, 0.8)).sum()");
  check_gradients({kA, kB, kC}, "(torch.lerp(a, b, c) * a).sum()");
  check_gradients({kA, kRow, kC}, "(torch.lerp(r, a, c) * c).sum()");  // broadcast self
  check_gradients({kA, kB, kC}, "(torch.addcmul(a, b, c, value=-1.5) * b).sum()");
  check_gradients({kA, kB, kC}, "(a.addcdiv(b, c, value=2) * b).sum()");
  check_gradients({kA, kB}, "torch.dist(a, b)");
  check_gradients({kA, kB}, "a.dist(b, p=3) + a.dist(b, 1) + a.dist(b, 1.5) + a.dist(b, 0.5)");
  check_gradients({kA, kB}, "torch.dist(a, b, float('inf'))");
  check_gradients({kA, kRow}, "torch.dist(a, r)");  // broadcast
}

TEST_CASE("addmv, addr, addbmm, baddbmm: gradients by central differences", "[binary_more]") {
  const Leaf v2{"v", "[2]", {0.4, -0.9}};
  const Leaf m23{"m", "[2, 3]", {0.3, -1.2, 0.8, 1.7, -0.4, 2.1}};
  const Leaf v3{"w", "[3]", {0.5, 1.1, -0.6}};
  check_gradients({v2, m23, v3}, "(torch.addmv(v, m, w, beta=0.5, alpha=2) * v).sum()");
  check_gradients({m23, v3}, "(m[:, 0].addmv(m, w) ** 2).sum()");
  check_gradients({m23, v2, v3}, "(torch.addr(m, v, w, beta=2, alpha=-1) * m).sum()");
  const Leaf b1{"p", "[2, 2, 3]", {0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, -0.8, 0.9, 1.0, 1.1, -1.2}};
  const Leaf b2{"q", "[2, 3, 2]", {0.3, -0.1, 0.2, 0.6, -0.5, 0.4, 0.9, -0.7, 0.8, 0.2, -0.3, 0.1}};
  const Leaf s22{"s0", "[2, 2]", {0.5, -0.5, 1.5, 0.25}};
  check_gradients({s22, b1, b2}, "(torch.addbmm(s0, p, q, beta=0.5, alpha=3) * s0).sum()");
  const Leaf s222{"t0", "[2, 2, 2]", {0.5, -0.5, 1.5, 0.25, -1.0, 0.75, 0.3, 0.2}};
  check_gradients({s222, b1, b2}, "(torch.baddbmm(t0, p, q, alpha=0.5) * t0).sum()");
  check_gradients({s22, b1, b2}, "(p.baddbmm(p, q[:, :, :1].expand(2, 3, 3)) ** 2).sum() + s0.sum()");
}

TEST_CASE("maximum and minimum split ties, fmax and fmin give them to self (measured)", "[binary_more]") {
  auto grads = [](const std::string& op) {
    const RunResult r = run_program(kLeaves, "[\"torch." + op + "(a, b).sum().backward()\"]");
    REQUIRE(r.errors.empty());
    REQUIRE(r.grads.size() == 2);
    return std::make_pair(r.grads[0].values, r.grads[1].values);
  };
  using V = std::vector<double>;
  CHECK(grads("maximum") == std::make_pair(V{0.5, 0.0, 1.0}, V{0.5, 1.0, 0.0}));
  CHECK(grads("minimum") == std::make_pair(V{0.5, 1.0, 0.0}, V{0.5, 0.0, 1.0}));
  CHECK(grads("fmax") == std::make_pair(V{1.0, 0.0, 1.0}, V{0.0, 1.0, 0.0}));
  CHECK(grads("fmin") == std::make_pair(V{1.0, 1.0, 0.0}, V{0.0, 0.0, 1.0}));
}

TEST_CASE("saved values are None exactly where PyTorch leaves them undefined", "[binary_more]") {
  // Measured in torch 1.13 with one of the three inputs requiring grad at a time.
  const RunResult r = run_program(
      R"P({"x": {"shape": [2], "requires_grad": true}, "y": {"shape": [2]}, "z": {"shape": [2]},
          "m": {"shape": [2, 2]}})P",
      R"P(["f = torch.addcmul(x, y, z).grad_fn", "print(f._saved_tensor1 is None, f._saved_tensor2 is None, f._saved_value)",
          "f = torch.addcdiv(x, y, z).grad_fn", "print(f._saved_tensor1 is None, f._saved_tensor2 is z)",
          "f = torch.addcmul(y, x, z).grad_fn", "print(f._saved_tensor1 is None, f._saved_tensor2 is z)",
          "f = torch.lerp(x, y, z).grad_fn", "print(f._saved_self is None, f._saved_end is None, f._saved_weight is z)",
          "f = torch.lerp(y, z, x).grad_fn", "print(f._saved_self is y, f._saved_end is z)",
          "f = torch.fmod(x, y).grad_fn", "print(f.name(), f._saved_self is None, f._saved_other is None)",
          "f = torch.remainder(y, x).grad_fn", "print(f.name(), f._saved_self is y, f._saved_other is x)",
          "f = x.remainder(1.5).grad_fn", "print(f.name(), len(f.next_functions))",
          "f = torch.addmv(x, m, y, beta=2, alpha=0.5).grad_fn", "print(f._saved_mat is None, f._saved_vec is None, f._saved_beta, f._saved_alpha)",
          "f = torch.addmv(y, m, x).grad_fn", "print(f._saved_mat is m, f._saved_vec is None)",
          "f = torch.dist(x, y).grad_fn", "print(f._saved_self is x, f._saved_other is y, f._saved_p, f._saved_result.shape)",
          "f = torch.rsub(x, y).grad_fn", "print(f.name(), f._saved_alpha, len(f.next_functions))"])P");
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{
                         "True True 1", "True True", "True True", "True True True", "True True",
                         "FmodBackward1 True True", "RemainderBackward1 True True", "RemainderBackward0 1",
                         "True True 2 0.5", "True True", "True True 2 torch.Size([])", "RsubBackward0 1 2"});
}

TEST_CASE("beta=0 ignores self, NaN included (measured for all four matrix ops)", "[binary_more]") {
  const RunResult r = run_program(
      R"P({"z": {"shape": [1], "init": {"values": [0.0]}}})P",
      R"P(["n1 = z / 0", "nan = n1.reshape(1, 1, 1)",
          "print(torch.baddbmm(nan, torch.ones(1, 1, 2), torch.ones(1, 2, 1), beta=0).tolist())",
          "print(torch.addbmm(nan[0], torch.ones(1, 1, 2), torch.ones(1, 2, 1), beta=0).tolist())",
          "print(torch.addmv(n1, torch.ones(1, 2), torch.ones(2), beta=0).tolist())",
          "print(torch.addr(nan[0], torch.ones(1), torch.ones(1), beta=0).tolist())"])P");
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{"[[[2.0]]]", "[[2.0]]", "[2.0]", "[[1.0]]"});
}

TEST_CASE("dtypes, values and errors as PyTorch 1.13", "[binary_more]") {
  const RunResult r = run_program(
      R"P({"i": {"shape": [3], "dtype": "int64", "init": {"values": [1, 5, 3]}},
          "j": {"shape": [3], "dtype": "int64", "init": {"values": [2, 2, 2]}},
          "n": {"shape": [2], "dtype": "int64", "init": {"values": [-3, 3]}}})P",
      R"P(["print(torch.maximum(i, j).tolist(), torch.fmin(i, j).dtype, torch.atan2(i, j).dtype)",
          "print(torch.remainder(n, -2).tolist(), torch.fmod(n, -2).tolist(), torch.remainder(i, 1.5).tolist())",
          "print(torch.remainder(n.double(), 2).tolist(), torch.fmod(n.double(), 2).tolist())",
          "print(torch.addcmul(i, i, j).tolist(), torch.addr(i[:2].reshape(2, 1), i[:2], j).tolist())",
          "print(torch.true_divide(i, j).tolist(), torch.dist(i.float(), j.float(), 0).item())",
          {"try": ["torch.hypot(i, j)"]}, {"try": ["torch.maximum(torch.ones(2, 3), torch.ones(4))"]},
          {"try": ["torch.lerp(torch.ones(2), torch.ones(2).double(), 0.5)"]},
          {"try": ["torch.dist(i, j)"]}, {"try": ["torch.addmv(torch.ones(2), torch.ones(2, 3), torch.ones(4))"]},
          {"try": ["torch.addr(torch.ones(2, 3), torch.ones(2, 1), torch.ones(3))"]},
          {"try": ["torch.addbmm(torch.ones(2, 3), torch.ones(4, 2, 5), torch.ones(3, 5, 3))"]},
          {"try": ["torch.baddbmm(torch.ones(4, 2, 3), torch.ones(4, 2, 5), torch.ones(4, 4, 3))"]},
          {"try": ["torch.remainder(i, 0)"]}, {"try": ["torch.maximum(i, 2.0)"]}])P");
  CHECK(r.printed == std::vector<std::string>{"[2, 5, 3] torch.int64 torch.float32", "[-1, -1] [-1, 1] [1.0, 0.5, 0.0]",
                                              "[1.0, 1.0] [-1.0, 1.0]", "[3, 15, 9] [[3, 3, 3], [15, 15, 15]]",
                                              "[0.5, 2.5, 1.5] 3.0"});
  REQUIRE(r.errors.size() == 10);
  const std::vector<std::string> kinds{"dtype_mismatch", "shape_mismatch", "dtype_mismatch", "dtype_mismatch",
                                       "shape_mismatch", "shape_mismatch", "shape_mismatch", "shape_mismatch",
                                       "unsupported",    "type_error"};
  for (size_t k = 0; k < kinds.size(); ++k) CHECK(r.errors[k].kind == kinds[k]);
  CHECK(r.errors[2].message == "expected dtype float for `end` but got dtype double");
  CHECK(r.errors[4].message == "size mismatch, got 2, 2x3,4");
  CHECK(r.errors[5].message == "addr: Expected 1-D argument vec1, but got 2-D");
}

TEST_CASE("the family runs on meta: shapes and nodes, no element access", "[binary_more]") {
  const RunResult r = run_program(
      R"P({"a": {"shape": [2, 3], "requires_grad": true}, "b": {"shape": [3], "requires_grad": true},
          "p": {"shape": [4, 2, 5], "requires_grad": true}, "q": {"shape": [4, 5, 3], "requires_grad": true}})P",
      R"P(["y = torch.maximum(a, b) + torch.atan2(a, b) + a.remainder(b) + torch.lerp(a, b, 0.5) + a.addcdiv(a, b)",
          "z = torch.addbmm(a, p, q) + torch.baddbmm(a, p, q).sum(0) + torch.addr(a, a[:, 0], b) + a.hypot(b)",
          "d = torch.dist(a, b) + torch.addmv(a[:, 0], a, b).sum()",
          "print(y.shape, z.shape, d.shape, z.grad_fn.name())", "(y.sum() + z.sum() + d).backward()",
          "print(a.grad.shape, b.grad.shape, p.grad.shape, q.grad.shape)"])P",
      "meta");
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{"torch.Size([2, 3]) torch.Size([2, 3]) torch.Size([]) AddBackward0",
                                              "torch.Size([2, 3]) torch.Size([3]) torch.Size([4, 2, 5]) "
                                              "torch.Size([4, 5, 3])"});
}

TEST_CASE("in-place forms: gradients by central differences through the edited tensor", "[binary_more]") {
  check_gradients({kA, kB, kC}, "((a * 1).atan2_(b) * c).sum()");
  check_gradients({kA, kB, kC}, "((a * 1).hypot_(b) * c).sum()");
  check_gradients({kA, kC}, "((a * 1).remainder_(c) * c + (a * 1).fmod_(c)).sum()");
  check_gradients({kA, kB, kC}, "((a * 1).lerp_(b, c) * c + (a * 1).lerp_(b, 0.7)).sum()");
  check_gradients({kA, kRow, kC}, "((a * 1).addcmul_(r, c, value=3) * c + (a * 1).addcdiv_(r, c)).sum()");
  const Leaf v2{"v", "[2]", {0.4, -0.9}};
  const Leaf v3{"w", "[3]", {0.5, 1.1, -0.6}};
  check_gradients({kA, v2, v3}, "((v * 1).addmv_(a, w, alpha=2) ** 2).sum() + ((a * 1).addr_(v, w, beta=3) ** 2).sum()");
}

TEST_CASE("in-place forms save a clone of the old self and bump the version once", "[binary_more]") {
  const RunResult r = run_program(
      R"P({"a": {"shape": [3], "requires_grad": true}, "b": {"shape": [3], "requires_grad": true}})P",
      R"P(["h = a * 1", "h.atan2_(b)", "f = h.grad_fn",
          "print(h._version, f._saved_self.grad_fn.name(), f._saved_self._version, shares_storage(f._saved_self, h))",
          "g = a * 1", "g.hypot_(b)", "print(g._version, g.grad_fn._saved_result._version, shares_storage(g.grad_fn._saved_result, g))",
          {"try": ["a.lerp_(b, 0.5)"]}, {"try": ["h.addcmul_(torch.ones(2, 3), b)"]}])P");
  CHECK(r.printed == std::vector<std::string>{"1 CloneBackward0 0 False", "1 1 True"});
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "leaf_inplace");
  CHECK(r.errors[1].kind == "shape_mismatch");
  CHECK(r.errors[1].message == "output with shape [3] doesn't match the broadcast shape [2, 3]");
}

TEST_CASE("floor_divide rounds toward minus infinity, with grad it is unsupported", "[binary_more]") {
  const RunResult r = run_program(
      R"P({"a": {"shape": [3], "requires_grad": true, "init": {"values": [-3.0, 3.0, -7.5]}},
          "n": {"shape": [3], "dtype": "int64", "init": {"values": [-3, 3, 7]}}})P",
      R"P(["print(torch.floor_divide(a.detach(), 2).tolist(), n.floor_divide(-2).tolist())",
          {"try": ["torch.floor_divide(a, 2)"]}, {"try": ["n.floor_divide(0)"]}])P");
  CHECK(r.printed == std::vector<std::string>{"[-2.0, 1.0, -4.0] [1, -2, -4]"});
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "unsupported");
  CHECK(r.errors[1].kind == "unsupported");
}

TEST_CASE("create_graph through rsub, lerp, addcmul and maximum follows derivatives.yaml", "[binary_more]") {
  // d/dz of sum(dout/dy) for out = addcmul(x, y, z, value=3): 3 per element; d/dy of
  // sum(dlerp/dx * y) = 1 - 0.25 per element; rsub's x gradient of a sum reads no saved
  // tensor, so it does not require grad (measured: grad_fn None).
  const RunResult r = run_program(
      R"P({"x": {"shape": [2], "dtype": "float64", "requires_grad": true, "init": {"values": [0.5, -1.0]}},
          "y": {"shape": [2], "dtype": "float64", "requires_grad": true, "init": {"values": [2.0, 0.25]}},
          "z": {"shape": [2], "dtype": "float64", "requires_grad": true, "init": {"values": [1.5, -0.5]}}})P",
      R"P(["gx, gy, gz = torch.autograd.grad(torch.addcmul(x, y, z, value=3).sum(), [x, y, z], create_graph=True)",
          "dz, = torch.autograd.grad(gy.sum(), [z])", "print(dz.tolist())",
          "lx, = torch.autograd.grad(torch.lerp(x, y, 0.25).sum(), [x], create_graph=True)",
          "dy, = torch.autograd.grad((lx * y).sum(), [y])", "print(dy.tolist())",
          "rx, = torch.autograd.grad(torch.rsub(x, y, alpha=2).sum(), [x], create_graph=True)", "print(rx.grad_fn is None, rx.requires_grad)",
          "w = torch.ones(2, dtype=torch.float64, requires_grad=True)",
          "mx, = torch.autograd.grad(torch.maximum(x, y * 0 + 0.5), [x], w, create_graph=True)",
          "print(mx.grad_fn.name(), mx.tolist())"])P");
  // maximum's x gradient: 1 where x > 0.5, 1/2 on the tie x == 0.5, 0 below.
  CHECK(r.printed == std::vector<std::string>{"[3.0, 3.0]", "[0.75, 0.75]", "True False", "MaskedFillBackward0 [0.5, 0.0]"});
  CHECK(r.errors.empty());
}

TEST_CASE("the table's save rules of the family are what the ops save", "[binary_more]") {
  // The accountant's what-if analysis reads "X if Y requires grad" from the op table.
  const auto& rules = agtrace::conditional_save_rules();
  CHECK(rules.at("AddcmulBackward0").at("tensor1") == "tensor2");
  CHECK(rules.at("AddcmulBackward0").at("tensor2") == "tensor1");
  CHECK(rules.at("AddcdivBackward0").at("tensor1") == "tensor2");
  CHECK(rules.at("AddcdivBackward0").count("tensor2") == 0);
  CHECK(rules.at("AddmvBackward0").at("mat") == "vec");
  CHECK(rules.at("AddmvBackward0").at("vec") == "mat");
  CHECK(rules.at("AddrBackward0").at("vec1") == "vec2");
  CHECK(rules.at("AddbmmBackward0").at("batch2") == "batch1");
  CHECK(rules.at("BaddbmmBackward0").at("batch1") == "batch2");
  CHECK(rules.count("MaximumBackward0") == 0);  // both always saved
}
