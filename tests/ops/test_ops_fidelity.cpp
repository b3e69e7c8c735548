// What each op records, compared with PyTorch 1.13 (shared/oracle/SUMMARY.md sections
// 2-3, every fact re-measured with /usr/bin/python3 and torch): node names,
// next_functions (None edges), saved attribute names in dir() order, which saved
// tensors are defined for each requires_grad combination, the identity of unpacked
// saved tensors, and attribute values.
#include <catch2/catch.hpp>

#include "support/gradcheck.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::AttrValue;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;

namespace {

using Names = std::vector<std::string>;

// torch.linspace(lo, hi, numel).reshape(shape), float32 unless told otherwise.
Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true,
         DType dtype = DType::Float32) {
  return agtrace::test::linspace_leaf(shape, lo, hi, requires_grad, dtype);
}

Value I(int64_t v) { return Value::integer(v); }
Value F(double v) { return Value::real(v); }
Tensor num(double v) { return ops::wrap_number(F(v)); }
Tensor num(int64_t v) { return ops::wrap_number(I(v)); }
const std::optional<std::vector<int64_t>> kAll = std::nullopt;

// dir(node) filtered to _saved_*, prefix dropped: alphabetical, as Python lists them.
Names saved_names(const Node& n) {
  Names out;
  for (const auto& e : n.saved) out.push_back(e.name);
  return out;
}

// [type(f).__name__ or None for f, _ in node.next_functions]
Names next_names(const Node& n) {
  Names out;
  for (const auto& e : n.next) out.push_back(e.fn ? e.fn->name : "None");
  return out;
}

Node& fn(const Tensor& t) {
  REQUIRE(t->grad_fn != nullptr);
  return *t->grad_fn;
}

bool defined(Node& n, const std::string& attr) {
  const auto* e = n.find(attr);
  REQUIRE(e != nullptr);
  REQUIRE(e->is_tensor);
  return e->var.defined;
}

const AttrValue& attr(const Node& n, const std::string& name) {
  const auto* e = n.find(name);
  REQUIRE(e != nullptr);
  REQUIRE_FALSE(e->is_tensor);
  REQUIRE(e->attr != nullptr);
  return *e->attr;
}

// The leaf behind an AccumulateGrad edge.
Tensor edge_variable(const Node& n, size_t i) {
  REQUIRE(i < n.next.size());
  REQUIRE(n.next[i].fn != nullptr);
  REQUIRE(n.next[i].fn->name == "AccumulateGrad");
  return n.next[i].fn->variable;
}

constexpr const char* kAcc = "AccumulateGrad";

}  // namespace

// ---------------------------------------------------------------- add / sub / rsub / neg

TEST_CASE("fidelity: add and sub save only alpha", "[fidelity][arith]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.5, 2.0);
  SECTION("x + y") {
    Tensor z = ops::add(x, y, I(1));
    CHECK(fn(z).name == "AddBackward0");
    CHECK(next_names(fn(z)) == Names{kAcc, kAcc});
    CHECK(edge_variable(fn(z), 0) == x);
    CHECK(edge_variable(fn(z), 1) == y);
    CHECK(saved_names(fn(z)) == Names{"alpha"});
    CHECK(attr(fn(z), "alpha").kind == AttrValue::Kind::Int);
    CHECK(attr_repr(attr(fn(z), "alpha")) == "1");
    CHECK(fn(z).saved_bytes() == 0);
  }
  SECTION("torch.add(x, y, alpha=2.5): a float alpha reads back as a float") {
    Tensor z = ops::add(x, y, F(2.5));
    CHECK(attr(fn(z), "alpha").kind == AttrValue::Kind::Double);
    CHECK(attr_repr(attr(fn(z), "alpha")) == "2.5");
  }
  SECTION("x + 2.0: the scalar's edge is None") {
    Tensor z = ops::add(x, num(2.0), I(1));
    CHECK(next_names(fn(z)) == Names{kAcc, "None"});
    CHECK(z->dtype() == DType::Float32);
  }
  SECTION("x - y with alpha=2") {
    Tensor z = ops::sub(x, y, I(2));
    CHECK(fn(z).name == "SubBackward0");
    CHECK(next_names(fn(z)) == Names{kAcc, kAcc});
    CHECK(saved_names(fn(z)) == Names{"alpha"});
    CHECK(attr_repr(attr(fn(z), "alpha")) == "2");
  }
  SECTION("x - 1.5") {
    Tensor z = ops::sub(x, num(1.5), I(1));
    CHECK(next_names(fn(z)) == Names{kAcc, "None"});
  }
  SECTION("y + x where only x requires grad: the first edge is None") {
    Tensor c = A({2, 3}, 0.5, 2.0, false);
    Tensor z = ops::add(c, x, I(1));
    CHECK(next_names(fn(z)) == Names{"None", kAcc});
  }
  SECTION("1.5 - x is RsubBackward1 with one edge") {
    Tensor z = ops::rsub(x, F(1.5), I(1));
    CHECK(fn(z).name == "RsubBackward1");
    CHECK(next_names(fn(z)) == Names{kAcc});
    CHECK(saved_names(fn(z)) == Names{"alpha"});
    CHECK(attr_repr(attr(fn(z), "alpha")) == "1");
    CHECK(agtrace::to_values(z)[0] == Approx(2.5));
  }
  SECTION("-x is NegBackward0 and saves nothing") {
    Tensor z = ops::neg(x);
    CHECK(fn(z).name == "NegBackward0");
    CHECK(next_names(fn(z)) == Names{kAcc});
    CHECK(saved_names(fn(z)).empty());
  }
}

TEST_CASE("fidelity: no node when nothing requires grad or grad mode is off", "[fidelity]") {
  Tensor x = A({2, 3}), c = A({2, 3}, 0.0, 1.0, false);
  Tensor z = ops::mul(c, c);
  CHECK(z->grad_fn == nullptr);
  CHECK_FALSE(z->requires_grad());
  {
    agtrace::autograd::GradModeGuard no_grad(false);
    Tensor w = ops::exp(x);
    CHECK(w->grad_fn == nullptr);
    CHECK_FALSE(w->requires_grad());
    CHECK(w->is_leaf());
  }
  CHECK(ops::exp(x)->grad_fn != nullptr);
}

// ---------------------------------------------------------------- mul / div

TEST_CASE("fidelity: mul saves each operand only for the other's gradient", "[fidelity][arith]") {
  SECTION("{x, y}: other is y, self is x (same objects)") {
    Tensor x = A({2, 3}), y = A({2, 3}, 0.5, 2.0);
    Tensor z = ops::mul(x, y);
    Node& n = fn(z);
    CHECK(n.name == "MulBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc});
    CHECK(saved_names(n) == Names{"other", "self"});
    CHECK(n.unpack("other") == y);
    CHECK(n.unpack("self") == x);
    CHECK(n.saved_bytes() == 48);
  }
  SECTION("{x}: other saved, self None") {
    Tensor x = A({2, 3}), y = A({2, 3}, 0.5, 2.0, false);
    Tensor n_out = ops::mul(x, y);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{kAcc, "None"});
    CHECK(defined(n, "other"));
    CHECK_FALSE(defined(n, "self"));
    CHECK(n.unpack("self") == nullptr);
    CHECK(n.unpack("other") == y);
  }
  SECTION("{y}: self saved, other None") {
    Tensor x = A({2, 3}, -1, 1, false), y = A({2, 3}, 0.5, 2.0);
    Tensor n_out = ops::mul(x, y);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{"None", kAcc});
    CHECK_FALSE(defined(n, "other"));
    CHECK(n.unpack("self") == x);
  }
  SECTION("x * x saves x twice (48 B, one storage)") {
    Tensor x = A({2, 3});
    Tensor n_out = ops::mul(x, x);
    Node& n = fn(n_out);
    CHECK(n.unpack("self") == x);
    CHECK(n.unpack("other") == x);
    CHECK(n.saved_bytes() == 48);
    CHECK(n.find("self")->var.storage_id == n.find("other")->var.storage_id);
  }
  SECTION("x * r with r [3]") {
    Tensor x = A({2, 3}), r = A({3}, 0.5, 2.0);
    Tensor n_out = ops::mul(x, r);
    Node& n = fn(n_out);
    CHECK(n.unpack("other") == r);
    CHECK(n.saved_bytes() == 12 + 24);
  }
  SECTION("x * 3.0 saves 3.0 as a 0-d float64 tensor of 8 bytes; self is None") {
    Tensor x = A({2, 3});
    Tensor z = ops::mul(x, num(3.0));
    Node& n = fn(z);
    CHECK(z->dtype() == DType::Float32);
    CHECK(next_names(n) == Names{kAcc, "None"});
    REQUIRE(defined(n, "other"));
    CHECK_FALSE(defined(n, "self"));
    Tensor other = n.unpack("other");
    CHECK(other->dtype() == DType::Float64);
    CHECK(other->dim() == 0);
    CHECK(other->nbytes() == 8);
    CHECK(agtrace::item(other) == 3.0);
    CHECK(n.saved_bytes() == 8);
  }
  SECTION("x * 1 saves an int64 0-d tensor") {
    Tensor x = A({2, 3});
    Tensor n_out = ops::mul(x, num(int64_t{1}));
    Node& n = fn(n_out);
    Tensor other = n.unpack("other");
    CHECK(other->dtype() == DType::Int64);
    CHECK(other->dim() == 0);
    CHECK(other->nbytes() == 8);
  }
}

TEST_CASE("fidelity: div always saves other, and self only if other requires grad", "[fidelity][arith]") {
  SECTION("{x, yp}") {
    Tensor x = A({2, 3}), yp = A({2, 3}, 0.5, 2.0);
    Tensor n_out = ops::div(x, yp);
    Node& n = fn(n_out);
    CHECK(n.name == "DivBackward0");
    CHECK(saved_names(n) == Names{"other", "self"});
    CHECK(n.unpack("other") == yp);
    CHECK(n.unpack("self") == x);
  }
  SECTION("{x}: self None") {
    Tensor x = A({2, 3}), yp = A({2, 3}, 0.5, 2.0, false);
    Tensor n_out = ops::div(x, yp);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{kAcc, "None"});
    CHECK(n.unpack("other") == yp);
    CHECK_FALSE(defined(n, "self"));
    CHECK(n.saved_bytes() == 24);
  }
  SECTION("{yp}: both saved") {
    Tensor x = A({2, 3}, -1, 1, false), yp = A({2, 3}, 0.5, 2.0);
    Tensor n_out = ops::div(x, yp);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{"None", kAcc});
    CHECK(n.unpack("other") == yp);
    CHECK(n.unpack("self") == x);
    CHECK(n.saved_bytes() == 48);
  }
  SECTION("x / 4.0 saves a float64 0-d other") {
    Tensor x = A({2, 3});
    Tensor n_out = ops::div(x, num(4.0));
    Node& n = fn(n_out);
    Tensor other = n.unpack("other");
    CHECK(other->dtype() == DType::Float64);
    CHECK(other->nbytes() == 8);
    CHECK_FALSE(defined(n, "self"));
  }
}

// ---------------------------------------------------------------- pow / reciprocal

TEST_CASE("fidelity: pow with a scalar exponent is PowBackward0 (exponent, self)", "[fidelity][arith]") {
  Tensor x = A({2, 3});
  SECTION("x ** 2: an int exponent") {
    Tensor n_out = ops::pow_scalar(x, I(2));
    Node& n = fn(n_out);
    CHECK(n.name == "PowBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"exponent", "self"});
    CHECK(attr_repr(attr(n, "exponent")) == "2");
    CHECK(n.unpack("self") == x);
  }
  SECTION("x.pow(2.0) keeps the float") { CHECK(attr_repr(attr(fn(ops::pow_scalar(x, F(2.0))), "exponent")) == "2.0"); }
  SECTION("x ** -2") { CHECK(attr_repr(attr(fn(ops::pow_scalar(x, I(-2))), "exponent")) == "-2"); }
  SECTION("x ** 0.5") { CHECK(attr_repr(attr(fn(ops::pow_scalar(x, F(0.5))), "exponent")) == "0.5"); }
}

TEST_CASE("fidelity: pow with a tensor exponent saves exponent, result and self whatever requires grad",
          "[fidelity][arith]") {
  for (int combo = 0; combo < 3; ++combo) {
    const bool base_rg = combo != 1, exp_rg = combo != 0;
    INFO("base requires grad " << base_rg << ", exponent requires grad " << exp_rg);
    Tensor xp = A({2, 3}, 0.6, 2.1, base_rg), e = A({2, 3}, 0.5, 2.0, exp_rg);
    Tensor z = ops::pow_tensor(xp, e);
    Node& n = fn(z);
    CHECK(n.name == "PowBackward1");
    CHECK(next_names(n) == Names{base_rg ? kAcc : "None", exp_rg ? kAcc : "None"});
    CHECK(saved_names(n) == Names{"exponent", "result", "self"});
    CHECK(n.unpack("exponent") == e);
    CHECK(n.unpack("self") == xp);
    Tensor r = n.unpack("result");
    REQUIRE(r != nullptr);
    CHECK(r != z);
    CHECK(r->storage == z->storage);
    CHECK(n.saved_bytes() == 72);
  }
}

TEST_CASE("fidelity: 2.0 ** x wraps the base as a 0-d tensor of the result dtype", "[fidelity][arith]") {
  Tensor x = A({2, 3});
  Tensor n_out = ops::rpow(F(2.0), x);
  Node& n = fn(n_out);
  CHECK(n.name == "PowBackward1");
  CHECK(next_names(n) == Names{"None", kAcc});
  CHECK(saved_names(n) == Names{"exponent", "result", "self"});
  Tensor self = n.unpack("self");
  CHECK(self->dtype() == DType::Float32);
  CHECK(self->dim() == 0);
  CHECK(self->nbytes() == 4);
  CHECK(n.unpack("exponent") == x);
  CHECK(n.saved_bytes() == 52);
}

// ---------------------------------------------------------------- pointwise

TEST_CASE("fidelity: pointwise ops save the result, except log which saves self", "[fidelity][unary]") {
  Tensor x = A({2, 3}), xp = A({2, 3}, 0.5, 2.0);
  struct Case {
    const char* node;
    Tensor out;
  };
  std::vector<Case> result_savers = {{"ExpBackward0", ops::exp(x)},         {"SqrtBackward0", ops::sqrt(xp)},
                                     {"TanhBackward0", ops::tanh(x)},       {"SigmoidBackward0", ops::sigmoid(x)},
                                     {"ReluBackward0", ops::relu(x)},       {"ReciprocalBackward0", ops::reciprocal(xp)}};
  for (auto& c : result_savers) {
    INFO(c.node);
    Node& n = fn(c.out);
    CHECK(n.name == c.node);
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"result"});
    CHECK(n.saved_bytes() == 24);
  }
  Tensor ln_out = ops::log(xp);
  Node& ln = fn(ln_out);
  CHECK(ln.name == "LogBackward0");
  CHECK(saved_names(ln) == Names{"self"});
  CHECK(ln.unpack("self") == xp);
}

TEST_CASE("fidelity: a saved output unpacks as a new tensor on the same storage", "[fidelity][identity]") {
  Tensor x = A({2, 3});
  Tensor e = ops::exp(x);
  Node& n = fn(e);
  Tensor r1 = n.unpack("result");
  Tensor r2 = n.unpack("result");
  // e.grad_fn._saved_result is e -> False; two reads are not the same object.
  CHECK(r1 != e);
  CHECK(r1 != r2);
  CHECK(r1->id != e->id);
  // Same storage, data and view geometry; grad_fn is the saving node; requires grad.
  CHECK(r1->storage == e->storage);
  CHECK(r1->sizes == e->sizes);
  CHECK(r1->strides == e->strides);
  CHECK(r1->offset == e->offset);
  CHECK(agtrace::to_values(r1) == agtrace::to_values(e));
  CHECK(r1->grad_fn.get() == &n);
  CHECK(r1->requires_grad());
  CHECK_FALSE(r1->is_leaf());
  // It shares the version counter: an edit through it bumps e's version.
  CHECK(r1->version == e->version);
  // The node keeps no reference to the output object itself (no cycle).
  CHECK(n.find("result")->var.original == nullptr);
}

TEST_CASE("fidelity: a saved input unpacks as the same object, leaf or not", "[fidelity][identity]") {
  Tensor x = A({2, 3});
  CHECK(fn(ops::pow_scalar(x, I(2))).unpack("self") == x);
  Tensor h = ops::mul(x, num(2.0));
  Tensor s = ops::log(h);
  CHECK(fn(s).unpack("self") == h);
  // relu's output used by a later op: saved as ReluBackward0.result (new object) and as
  // the later op's self (the object itself), one storage.
  Tensor r = ops::relu(x);
  Tensor q = ops::log(r);
  CHECK(fn(q).unpack("self") == r);
  CHECK(fn(r).unpack("result") != r);
  CHECK(fn(q).unpack("self")->storage == fn(r).unpack("result")->storage);
}

// ---------------------------------------------------------------- reductions

TEST_CASE("fidelity: sum and mean", "[fidelity][reduce]") {
  Tensor x = A({2, 3});
  SECTION("x.sum() is SumBackward0 (self_sym_sizes)") {
    Tensor s = ops::sum(x, kAll, false);
    CHECK(fn(s).name == "SumBackward0");
    CHECK(next_names(fn(s)) == Names{kAcc});
    CHECK(saved_names(fn(s)) == Names{"self_sym_sizes"});
    CHECK(attr_repr(attr(fn(s), "self_sym_sizes")) == "(2, 3)");
    CHECK(s->dim() == 0);
  }
  SECTION("x.sum(dim=1) is SumBackward1 (dim, keepdim, self_sym_sizes)") {
    Tensor s = ops::sum(x, std::vector<int64_t>{1}, false);
    CHECK(fn(s).name == "SumBackward1");
    CHECK(saved_names(fn(s)) == Names{"dim", "keepdim", "self_sym_sizes"});
    CHECK(attr_repr(attr(fn(s), "dim")) == "(1,)");
    CHECK(attr_repr(attr(fn(s), "keepdim")) == "False");
    CHECK(s->sizes == Shape{2});
  }
  SECTION("x.sum(dim=-1) reads dim back as 2**64 - 1") {
    Tensor s = ops::sum(x, std::vector<int64_t>{-1}, false);
    const AttrValue& d = attr(fn(s), "dim");
    CHECK(d.as_uint64);
    CHECK(d.list == std::vector<int64_t>{-1});
    CHECK(attr_repr(d) == "(18446744073709551615,)");
  }
  SECTION("x.sum(dim=(0, -1))") {
    Tensor s = ops::sum(x, std::vector<int64_t>{0, -1}, false);
    CHECK(attr_repr(attr(fn(s), "dim")) == "(0, 18446744073709551615)");
  }
  SECTION("x.sum(dim=1, keepdim=True)") {
    Tensor s = ops::sum(x, std::vector<int64_t>{1}, true);
    CHECK(attr_repr(attr(fn(s), "keepdim")) == "True");
    CHECK(s->sizes == (Shape{2, 1}));
  }
  SECTION("x.mean() is MeanBackward0 (self_numel, self_sizes), no tensor") {
    Tensor m = ops::mean(x, kAll, false);
    CHECK(fn(m).name == "MeanBackward0");
    CHECK(saved_names(fn(m)) == Names{"self_numel", "self_sizes"});
    CHECK(attr_repr(attr(fn(m), "self_numel")) == "6");
    CHECK(attr_repr(attr(fn(m), "self_sizes")) == "(2, 3)");
    CHECK(fn(m).saved_bytes() == 0);
  }
  SECTION("x.mean(dim=0) is MeanBackward1 and saves the whole input") {
    Tensor m = ops::mean(x, std::vector<int64_t>{0}, false);
    CHECK(fn(m).name == "MeanBackward1");
    CHECK(saved_names(fn(m)) == Names{"dim", "keepdim", "self", "self_sym_sizes"});
    CHECK(fn(m).unpack("self") == x);
    CHECK(fn(m).saved_bytes() == 24);
    CHECK(attr_repr(attr(fn(m), "dim")) == "(0,)");
  }
  SECTION("x.mean(dim=-1)") {
    Tensor m = ops::mean(x, std::vector<int64_t>{-1}, false);
    CHECK(attr_repr(attr(fn(m), "dim")) == "(18446744073709551615,)");
  }
}

// ---------------------------------------------------------------- mm / matmul

TEST_CASE("fidelity: mm saves each operand only for the other's gradient", "[fidelity][linalg]") {
  const Names mm_names{"mat2", "mat2_sym_sizes", "mat2_sym_strides", "self", "self_sym_sizes", "self_sym_strides"};
  SECTION("{x, W}") {
    Tensor x = A({2, 3}), W = A({3, 4}, -0.5, 0.9);
    Tensor n_out = ops::mm(x, W);
    Node& n = fn(n_out);
    CHECK(n.name == "MmBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc});
    CHECK(saved_names(n) == mm_names);
    CHECK(n.unpack("mat2") == W);
    CHECK(n.unpack("self") == x);
    CHECK(attr_repr(attr(n, "mat2_sym_sizes")) == "(3, 4)");
    CHECK(attr_repr(attr(n, "mat2_sym_strides")) == "(4, 1)");
    CHECK(attr_repr(attr(n, "self_sym_sizes")) == "(2, 3)");
    CHECK(attr_repr(attr(n, "self_sym_strides")) == "(3, 1)");
    CHECK(n.saved_bytes() == 72);
  }
  SECTION("{x}: self None, mat2_sym_strides empty") {
    Tensor x = A({2, 3}), W = A({3, 4}, -0.5, 0.9, false);
    Tensor n_out = ops::mm(x, W);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{kAcc, "None"});
    CHECK(n.unpack("mat2") == W);
    CHECK_FALSE(defined(n, "self"));
    CHECK(attr(n, "mat2_sym_strides").list.empty());
    CHECK(attr_repr(attr(n, "mat2_sym_strides")) == "()");
    CHECK(attr_repr(attr(n, "self_sym_strides")) == "(3, 1)");
    CHECK(n.saved_bytes() == 48);
  }
  SECTION("{W}: mat2 None, self_sym_strides empty") {
    Tensor x = A({2, 3}, -1, 1, false), W = A({3, 4}, -0.5, 0.9);
    Tensor n_out = ops::mm(x, W);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{"None", kAcc});
    CHECK_FALSE(defined(n, "mat2"));
    CHECK(n.unpack("self") == x);
    CHECK(attr_repr(attr(n, "self_sym_strides")) == "()");
    CHECK(attr_repr(attr(n, "mat2_sym_strides")) == "(4, 1)");
    CHECK(n.saved_bytes() == 24);
  }
  SECTION("x @ V.t(): the transposed operand's strides and its TBackward0 edge") {
    Tensor x = A({2, 3}), V = A({4, 3}, -0.5, 0.9);
    Tensor Vt = ops::t(V);
    Tensor n_out = ops::matmul(x, Vt);
    Node& n = fn(n_out);
    CHECK(n.name == "MmBackward0");
    CHECK(next_names(n) == Names{kAcc, "TBackward0"});
    CHECK(n.unpack("mat2") == Vt);
    CHECK(attr_repr(attr(n, "mat2_sym_strides")) == "(1, 3)");
  }
  SECTION("x @ W + b is AddBackward0 over MmBackward0, not addmm") {
    Tensor x = A({2, 3}), W = A({3, 4}, -0.5, 0.9), b = A({4}, -0.2, 0.3);
    Tensor z = ops::add(ops::matmul(x, W), b, I(1));
    CHECK(fn(z).name == "AddBackward0");
    CHECK(next_names(fn(z)) == Names{"MmBackward0", kAcc});
  }
}

// ---------------------------------------------------------------- views

TEST_CASE("fidelity: view, reshape, t, transpose", "[fidelity][views]") {
  Tensor x = A({2, 3});
  SECTION("x.view(3, 2) is ViewBackward0 and shares storage and version counter") {
    Tensor v = ops::view(x, {3, 2});
    CHECK(fn(v).name == "ViewBackward0");
    CHECK(next_names(fn(v)) == Names{kAcc});
    CHECK(saved_names(fn(v)) == Names{"self_sym_sizes"});
    CHECK(attr_repr(attr(fn(v), "self_sym_sizes")) == "(2, 3)");
    CHECK(v->storage == x->storage);
    CHECK(v->version == x->version);
    CHECK(v->base == x);
  }
  SECTION("x.view(-1) infers the size") {
    Tensor v = ops::view(x, {-1});
    CHECK(v->sizes == Shape{6});
    CHECK(fn(v).name == "ViewBackward0");
  }
  SECTION("x.reshape(6) of a contiguous tensor is ReshapeAliasBackward0, a view") {
    Tensor v = ops::reshape(x, {6});
    CHECK(fn(v).name == "ReshapeAliasBackward0");
    CHECK(saved_names(fn(v)) == Names{"self_sym_sizes"});
    CHECK(v->storage == x->storage);
  }
  SECTION("x.t().reshape(6) is UnsafeViewBackward0 over CloneBackward0 over TBackward0") {
    Tensor v = ops::reshape(ops::t(x), {6});
    CHECK(fn(v).name == "UnsafeViewBackward0");
    CHECK(next_names(fn(v)) == Names{"CloneBackward0"});
    CHECK(attr_repr(attr(fn(v), "self_sym_sizes")) == "(3, 2)");
    Node& clone = *fn(v).next[0].fn;
    CHECK(next_names(clone) == Names{"TBackward0"});
    CHECK(v->storage != x->storage);
  }
  SECTION("x.t().reshape(3, 2) needs no copy: ReshapeAliasBackward0") {
    Tensor v = ops::reshape(ops::t(x), {3, 2});
    CHECK(fn(v).name == "ReshapeAliasBackward0");
    CHECK(v->storage == x->storage);
  }
  SECTION("x.t() is TBackward0 and saves nothing") {
    Tensor v = ops::t(x);
    CHECK(fn(v).name == "TBackward0");
    CHECK(saved_names(fn(v)).empty());
    CHECK(v->strides == (Shape{1, 3}));
    CHECK(fn(ops::t(v)).name == "TBackward0");
    CHECK(next_names(fn(ops::t(v))) == Names{"TBackward0"});
  }
  SECTION("x.transpose(0, 1) saves dim0 and dim1") {
    Tensor v = ops::transpose(x, 0, 1);
    CHECK(fn(v).name == "TransposeBackward0");
    CHECK(saved_names(fn(v)) == Names{"dim0", "dim1"});
    CHECK(attr_repr(attr(fn(v), "dim0")) == "0");
    CHECK(attr_repr(attr(fn(v), "dim1")) == "1");
  }
  SECTION("x.transpose(-1, 0): dims as passed, -1 as uint64") {
    Tensor v = ops::transpose(x, -1, 0);
    CHECK(attr_repr(attr(fn(v), "dim0")) == "18446744073709551615");
    CHECK(attr_repr(attr(fn(v), "dim1")) == "0");
  }
}

TEST_CASE("fidelity: select and slice", "[fidelity][views]") {
  Tensor x = A({2, 3});
  SECTION("x[0] / x.select(1, 2)") {
    Tensor v = ops::select(x, 0, 0);
    CHECK(fn(v).name == "SelectBackward0");
    CHECK(next_names(fn(v)) == Names{kAcc});
    CHECK(saved_names(fn(v)) == Names{"dim", "index", "self_sizes"});
    CHECK(attr_repr(attr(fn(v), "dim")) == "0");
    CHECK(attr_repr(attr(fn(v), "index")) == "0");
    CHECK(attr_repr(attr(fn(v), "self_sizes")) == "(2, 3)");
    Tensor w = ops::select(x, 1, 2);
    CHECK(attr_repr(attr(fn(w), "dim")) == "1");
    CHECK(attr_repr(attr(fn(w), "index")) == "2");
    const std::vector<double> col = agtrace::to_values(w);  // x[:, 2] = [-0.2, 1.0]
    REQUIRE(col.size() == 2);
    CHECK(col[0] == Approx(-0.2));
    CHECK(col[1] == Approx(1.0));
  }
  SECTION("x.select(-1, -1): dim and index as passed, read as uint64") {
    Tensor v = ops::select(x, -1, -1);
    CHECK(attr_repr(attr(fn(v), "dim")) == "18446744073709551615");
    CHECK(attr_repr(attr(fn(v), "index")) == "18446744073709551615");
    CHECK(v->sizes == Shape{2});
    CHECK(v->offset == 2);
  }
  SECTION("x[:, 1:3]") {
    Tensor v = ops::slice(x, 1, 1, 3, 1);
    CHECK(fn(v).name == "SliceBackward0");
    CHECK(saved_names(fn(v)) == Names{"dim", "end", "self_sym_sizes", "start", "step"});
    CHECK(attr_repr(attr(fn(v), "dim")) == "1");
    CHECK(attr_repr(attr(fn(v), "start")) == "1");
    CHECK(attr_repr(attr(fn(v), "end")) == "3");
    CHECK(attr_repr(attr(fn(v), "step")) == "1");
    CHECK(attr_repr(attr(fn(v), "self_sym_sizes")) == "(2, 3)");
  }
  SECTION("x[:, 1:]: an open end is INT64_MAX, an open start is 0") {
    Tensor v = ops::slice(x, 1, 1, std::nullopt, 1);
    CHECK(attr(fn(v), "end").i == std::numeric_limits<int64_t>::max());
    CHECK(attr_repr(attr(fn(v), "end")) == "9223372036854775807");
    Tensor w = ops::slice(x, 1, std::nullopt, 2, 1);
    CHECK(attr_repr(attr(fn(w), "start")) == "0");
    CHECK(attr_repr(attr(fn(w), "end")) == "2");
  }
  SECTION("x[:, -2:] and x[:, :-1]: negative bounds read as uint64") {
    Tensor v = ops::slice(x, 1, -2, std::nullopt, 1);
    CHECK(attr_repr(attr(fn(v), "start")) == "18446744073709551614");
    CHECK(v->sizes == (Shape{2, 2}));
    Tensor w = ops::slice(x, 1, std::nullopt, -1, 1);
    CHECK(attr_repr(attr(fn(w), "end")) == "18446744073709551615");
    CHECK(w->sizes == (Shape{2, 2}));
  }
  SECTION("x[:, 0:3:2]") {
    Tensor v = ops::slice(x, 1, 0, 3, 2);
    CHECK(attr_repr(attr(fn(v), "step")) == "2");
    CHECK(v->sizes == (Shape{2, 2}));
    CHECK(v->strides == (Shape{3, 2}));
  }
  SECTION("x.narrow(-1, 0, 2)-style slice with a negative dim keeps it as passed") {
    Tensor v = ops::slice(x, -1, 0, 2, 1);
    CHECK(attr_repr(attr(fn(v), "dim")) == "18446744073709551615");
    CHECK(v->sizes == (Shape{2, 2}));
  }
  SECTION("x[:, 1:3] as PyTorch indexes it: two SliceBackward0 nodes") {
    Tensor v = ops::slice(ops::slice(x, 0, std::nullopt, std::nullopt, 1), 1, 1, 3, 1);
    CHECK(next_names(fn(v)) == Names{"SliceBackward0"});
    CHECK(next_names(*fn(v).next[0].fn) == Names{kAcc});
  }
}

TEST_CASE("fidelity: clone, contiguous, detach", "[fidelity][views]") {
  Tensor x = A({2, 3});
  SECTION("clone is CloneBackward0 with its own storage") {
    Tensor c = ops::clone(x);
    CHECK(fn(c).name == "CloneBackward0");
    CHECK(next_names(fn(c)) == Names{kAcc});
    CHECK(saved_names(fn(c)).empty());
    CHECK(c->storage != x->storage);
    CHECK(c->version != x->version);
  }
  SECTION("contiguous of a contiguous tensor is the same object; of x.t() a CloneBackward0") {
    CHECK(ops::contiguous(x) == x);
    Tensor c = ops::contiguous(ops::t(x));
    CHECK(fn(c).name == "CloneBackward0");
    CHECK(next_names(fn(c)) == Names{"TBackward0"});
    CHECK(c->is_contiguous());
  }
  SECTION("detach: no node, no grad, same storage and version counter, not a view") {
    Tensor d = ops::detach(x);
    CHECK(d != x);
    CHECK(d->grad_fn == nullptr);
    CHECK_FALSE(d->requires_grad());
    CHECK(d->is_leaf());
    CHECK(d->storage == x->storage);
    CHECK(d->version == x->version);
    CHECK_FALSE(d->is_view());
    Tensor h = ops::mul(x, num(2.0));
    Tensor hd = ops::detach(h);
    CHECK(hd->grad_fn == nullptr);
    CHECK(hd->version == h->version);
  }
}

// ---------------------------------------------------------------- in-place

TEST_CASE("fidelity: in-place binary ops rebase the history of the edited tensor", "[fidelity][inplace]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.5, 2.0);
  SECTION("h.add_(y): AddBackward0 over the old grad_fn, version 1, same object") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    auto old = h->grad_fn;
    ops::add_(h, y, I(1));
    CHECK(h->version->version == 1);
    CHECK(fn(h).name == "AddBackward0");
    CHECK(fn(h).next[0].fn == old);
    CHECK(next_names(fn(h)) == Names{"MulBackward0", kAcc});
    CHECK(saved_names(fn(h)) == Names{"alpha"});
  }
  SECTION("h.add_(1.0)") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::add_(h, num(1.0), I(1));
    CHECK(next_names(fn(h)) == Names{"MulBackward0", "None"});
  }
  SECTION("h.sub_(y, alpha=2)") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::sub_(h, y, I(2));
    CHECK(fn(h).name == "SubBackward0");
    CHECK(attr_repr(attr(fn(h), "alpha")) == "2");
  }
  SECTION("h.mul_(y) with both requiring grad saves a clone of the old self") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    const std::vector<double> before = agtrace::to_values(h);
    ops::mul_(h, y);
    Node& n = fn(h);
    CHECK(n.name == "MulBackward0");
    CHECK(next_names(n) == Names{"MulBackward0", kAcc});
    CHECK(saved_names(n) == Names{"other", "self"});
    CHECK(n.unpack("other") == y);
    Tensor self = n.unpack("self");
    REQUIRE(self != nullptr);
    CHECK(self != h);
    CHECK(self->storage != h->storage);
    REQUIRE(self->grad_fn != nullptr);
    CHECK(self->grad_fn->name == "CloneBackward0");
    CHECK(agtrace::to_values(self) == before);
    CHECK(n.saved_bytes() == 48);
  }
  SECTION("h.mul_(y) with only h requiring grad: self None") {
    Tensor yc = A({2, 3}, 0.5, 2.0, false);
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::mul_(h, yc);
    CHECK(next_names(fn(h)) == Names{"MulBackward0", "None"});
    CHECK(fn(h).unpack("other") == yc);
    CHECK_FALSE(defined(fn(h), "self"));
  }
  SECTION("h.mul_(y) with only y requiring grad: other None, self a clone without grad_fn") {
    Tensor xc = A({2, 3}, -1, 1, false);
    Tensor h = ops::mul(xc, num(int64_t{1}));
    ops::mul_(h, y);
    CHECK(next_names(fn(h)) == Names{"None", kAcc});
    CHECK_FALSE(defined(fn(h), "other"));
    Tensor self = fn(h).unpack("self");
    REQUIRE(self != nullptr);
    CHECK(self->storage != h->storage);
    CHECK(self->grad_fn == nullptr);
  }
  SECTION("h.mul_(2.0) saves the float64 scalar") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::mul_(h, num(2.0));
    CHECK(next_names(fn(h)) == Names{"MulBackward0", "None"});
    CHECK(fn(h).unpack("other")->dtype() == DType::Float64);
    CHECK_FALSE(defined(fn(h), "self"));
  }
  SECTION("h.div_(y) saves other and a clone of the old self") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::div_(h, y);
    Node& n = fn(h);
    CHECK(n.name == "DivBackward0");
    CHECK(n.unpack("other") == y);
    Tensor self = n.unpack("self");
    REQUIRE(self != nullptr);
    CHECK(self->storage != h->storage);
    REQUIRE(self->grad_fn != nullptr);
    CHECK(self->grad_fn->name == "CloneBackward0");
  }
  SECTION("h.div_(y) with y not requiring grad: self None") {
    Tensor h = ops::mul(x, num(int64_t{1}));
    ops::div_(h, A({2, 3}, 0.5, 2.0, false));
    CHECK_FALSE(defined(fn(h), "self"));
    CHECK(defined(fn(h), "other"));
  }
}

TEST_CASE("fidelity: in-place activations save the edited tensor as result at version 1", "[fidelity][inplace]") {
  Tensor x = A({2, 3});
  struct Case {
    const char* node;
    void (*op)(const Tensor&);
  };
  const Case cases[] = {{"ReluBackward0", ops::relu_},
                        {"ExpBackward0", ops::exp_},
                        {"SigmoidBackward0", ops::sigmoid_},
                        {"TanhBackward0", ops::tanh_}};
  for (const Case& c : cases) {
    INFO(c.node);
    Tensor h = ops::mul(x, num(int64_t{1}));
    c.op(h);
    Node& n = fn(h);
    CHECK(n.name == c.node);
    CHECK(next_names(n) == Names{"MulBackward0"});
    CHECK(saved_names(n) == Names{"result"});
    CHECK(h->version->version == 1);
    Tensor r = n.unpack("result");
    CHECK(r != h);
    CHECK(r->storage == h->storage);
    CHECK(r->version->version == 1);
    CHECK(r->grad_fn.get() == &n);
  }
}

TEST_CASE("fidelity: zero_ is ZeroBackward0 and saves nothing", "[fidelity][inplace]") {
  Tensor x = A({2, 3});
  Tensor h = ops::mul(x, num(int64_t{1}));
  ops::zero_(h);
  CHECK(fn(h).name == "ZeroBackward0");
  CHECK(next_names(fn(h)) == Names{"MulBackward0"});
  CHECK(saved_names(fn(h)).empty());
  CHECK(h->version->version == 1);
  CHECK(agtrace::to_values(h) == std::vector<double>(6, 0.0));
}

TEST_CASE("fidelity: in-place on a leaf that requires grad raises at the edit", "[fidelity][inplace]") {
  Tensor x = A({2, 3});
  try {
    ops::add_(x, num(1.0), I(1));
    FAIL("add_ on a leaf requiring grad did not raise");
  } catch (const agtrace::ScenarioError& e) {
    CHECK(e.kind == "leaf_inplace");
  }
  CHECK(x->version->version == 0);  // not bumped
  try {
    ops::relu_(x);
    FAIL("relu_ on a leaf requiring grad did not raise");
  } catch (const agtrace::ScenarioError& e) {
    CHECK(e.kind == "leaf_inplace");
  }
  try {
    ops::mul_(ops::select(x, 0, 0), num(2.0));
    FAIL("mul_ on a view of a leaf requiring grad did not raise");
  } catch (const agtrace::ScenarioError& e) {
    CHECK(e.kind == "view_of_leaf_inplace");
  }
  {
    agtrace::autograd::GradModeGuard no_grad(false);
    ops::add_(x, num(1.0), I(1));  // allowed under no_grad, and bumps the version
  }
  CHECK(x->version->version == 1);
  CHECK(x->is_leaf());
}

// ---------------------------------------------------------------- result dtypes

TEST_CASE("fidelity: result dtypes of ops on int64 tensors", "[fidelity][dtype]") {
  // Measured: i*1.5 f32, i**2 i64, i**0.5 f32, i.exp() f32, i.relu() i64, i/2 f32,
  // i+True i64, 2.0**i f32, i.reciprocal() f32.
  Tensor i = agtrace::tensor_from_values({2, 3}, DType::Int64, {1, 2, 3, 4, 5, 6});
  CHECK(ops::mul(i, num(1.5))->dtype() == DType::Float32);
  CHECK(ops::pow_scalar(i, I(2))->dtype() == DType::Int64);
  CHECK(ops::pow_scalar(i, F(0.5))->dtype() == DType::Float32);
  CHECK(ops::exp(i)->dtype() == DType::Float32);
  CHECK(ops::relu(i)->dtype() == DType::Int64);
  CHECK(ops::div(i, num(int64_t{2}))->dtype() == DType::Float32);
  CHECK(ops::add(i, ops::wrap_number(Value::boolean(true)), I(1))->dtype() == DType::Int64);
  CHECK(ops::rpow(F(2.0), i)->dtype() == DType::Float32);
  CHECK(ops::reciprocal(i)->dtype() == DType::Float32);
  CHECK(agtrace::to_values(ops::div(i, num(int64_t{2})))[0] == 0.5);
}
