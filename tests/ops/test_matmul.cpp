// The matmul family (lib/ops/linalg.cpp): gradient checks by central differences in
// float64 for every rank combination, and fidelity to PyTorch 1.13: the node chain matmul
// decomposes into (for each layout and requires_grad combination), saved values per
// requires_grad combination, identity of saved tensors, and errors. Every expected fact
// below was measured with /usr/bin/python3 and torch 1.13 first (chains are written as
// the measurement script printed them: "Backward0" dropped, AccumulateGrad as "Acc").
#include <catch2/catch.hpp>

#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

using namespace agtrace::test;

namespace {


Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true,
         DType dtype = DType::Float32) {
  return linspace_leaf(shape, lo, hi, requires_grad, dtype);
}

// Leaves with a given layout, as the measurement made them:
//  "T"  A(..., last, second_last).transpose(-1, -2), then requires_grad_() (a strided leaf)
//  "P0" A(s1, s0, ...).transpose(0, 1) (the batch dim is not outermost)
Tensor leaf_with_layout(const Shape& shape, const std::string& layout, bool requires_grad) {
  Tensor t;
  if (layout.empty()) {
    t = A(shape, -1, 1, false);
  } else {
    Shape phys = shape;
    const size_t i = layout == "T" ? shape.size() - 2 : 0, j = layout == "T" ? shape.size() - 1 : 1;
    std::swap(phys[i], phys[j]);
    Tensor base = A(phys, -1, 1, false);
    Shape st = base->strides;
    std::swap(st[i], st[j]);
    t = agtrace::make_alias(base, shape, st, 0);
  }
  t->requires_grad_flag = requires_grad;
  return t;
}

// Distinct, non-linear float64 values.
Tensor leaf(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true, double phase = 0.37) {
  return leaf64(shape, lo, hi, requires_grad, phase);
}









// The measured chain format: Name(child,child), AccumulateGrad as Acc, "Backward0" dropped.
std::string chain(const agtrace::Shared<Node>& n) {
  if (!n) return "None";
  if (n->name == "AccumulateGrad") return "Acc";
  std::string name = n->name;
  const auto pos = name.find("Backward0");
  if (pos != std::string::npos) name.erase(pos, 9);
  std::string kids;
  for (size_t i = 0; i < n->next.size(); ++i) kids += (i ? "," : "") + chain(n->next[i].fn);
  return name + "(" + kids + ")";
}

ScenarioError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("no error was raised");
  return ScenarioError("none", "");
}

constexpr const char* kAcc = "AccumulateGrad";

}  // namespace

// ================================================================ gradient checks

TEST_CASE("gradcheck: matmul in every rank combination", "[shapes][matmul][gradcheck]") {
  auto mm = [](const Inputs& in) { return ops::matmul(in[0], in[1]); };
  check_gradients("1-D @ 1-D (dot)", {leaf({3}), leaf({3}, -2, 2, true, 0.7)}, mm);
  check_gradients("2-D @ 1-D (mv)", {leaf({2, 3}), leaf({3}, -2, 2, true, 0.7)}, mm);
  check_gradients("1-D @ 2-D (unsqueeze, mm, squeeze_)", {leaf({3}), leaf({3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("2-D @ 2-D (mm)", {leaf({2, 3}), leaf({3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("3-D @ 3-D (bmm)", {leaf({2, 2, 3}), leaf({2, 3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("3-D @ 2-D (folded mm)", {leaf({2, 2, 3}), leaf({3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("3-D @ 1-D (folded mv)", {leaf({2, 2, 3}), leaf({3}, -2, 2, true, 0.7)}, mm);
  check_gradients("2-D @ 3-D (transposed fold)", {leaf({2, 3}), leaf({2, 3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("1-D @ 3-D (transposed fold, mv)", {leaf({3}), leaf({2, 3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("4-D @ 3-D (broadcast batch)", {leaf({2, 1, 2, 3}), leaf({3, 3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("2-D @ 4-D", {leaf({2, 3}), leaf({2, 2, 3, 4}, -2, 2, true, 0.7)}, mm);
  check_gradients("3-D with transposed last dims @ 2-D (bmm path)", {leaf({2, 3, 2}), leaf({3, 4}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::matmul(ops::transpose(in[0], 1, 2), in[1]); });
  check_gradients("2-D @ 3-D, only the 3-D requires grad", {leaf({2, 3}, -1, 1, false), leaf({2, 3, 4})}, mm);
  check_gradients("3-D @ 3-D, only self requires grad", {leaf({2, 2, 3}), leaf({2, 3, 4}, -2, 2, false)}, mm);
}

TEST_CASE("gradcheck: mm, dot, mv, bmm, addmm, linear", "[shapes][matmul][gradcheck]") {
  check_gradients("mm", {leaf({2, 3}), leaf({3, 4}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::mm(in[0], in[1]); });
  check_gradients("dot", {leaf({4}), leaf({4}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::dot(in[0], in[1]); });
  check_gradients("mv", {leaf({3, 2}), leaf({2}, -2, 2, true, 0.7)}, [](const Inputs& in) { return ops::mv(in[0], in[1]); });
  check_gradients("bmm", {leaf({2, 2, 3}), leaf({2, 3, 2}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::bmm(in[0], in[1]); });
  check_gradients("addmm, 1-D bias", {leaf({4}), leaf({2, 3}, -1, 1, true, 0.5), leaf({3, 4}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::addmm(in[0], in[1], in[2], Value::integer(1), Value::integer(1)); });
  check_gradients("addmm, beta=0.5 alpha=2, [2, 1] bias",
                  {leaf({2, 1}), leaf({2, 3}, -1, 1, true, 0.5), leaf({3, 4}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::addmm(in[0], in[1], in[2], Value::real(0.5), Value::integer(2)); });
  check_gradients("addmm, 0-d bias, only the bias", {leaf({}), leaf({2, 3}, -1, 1, false), leaf({3, 4}, -2, 2, false)},
                  [](const Inputs& in) { return ops::addmm(in[0], in[1], in[2], Value::real(1.5), Value::integer(1)); });
  check_gradients("F.linear(x, W, b)", {leaf({2, 3}), leaf({4, 3}, -2, 2, true, 0.7), leaf({4}, -1, 1, true, 0.2)},
                  [](const Inputs& in) { return ops::linear(in[0], in[1], in[2]); });
  check_gradients("F.linear(x, W)", {leaf({2, 3}), leaf({4, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::linear(in[0], in[1], nullptr); });
  check_gradients("F.linear 3-D with bias", {leaf({2, 2, 3}), leaf({4, 3}, -2, 2, true, 0.7), leaf({4}, -1, 1, true, 0.2)},
                  [](const Inputs& in) { return ops::linear(in[0], in[1], in[2]); });
  check_gradients("F.linear non-contiguous 3-D with bias (in-place add)",
                  {leaf({2, 2, 3}), leaf({4, 3}, -2, 2, true, 0.7), leaf({4}, -1, 1, true, 0.2)},
                  [](const Inputs& in) { return ops::linear(ops::transpose(in[0], 0, 1), in[1], in[2]); });
  check_gradients("F.linear 1-D with bias", {leaf({3}), leaf({4, 3}, -2, 2, true, 0.7), leaf({4}, -1, 1, true, 0.2)},
                  [](const Inputs& in) { return ops::linear(in[0], in[1], in[2]); });
}

// ================================================================ the decomposition of matmul

TEST_CASE("matmul: node chains for every rank pair, layout and requires_grad combination", "[shapes][matmul]") {
  struct Case {
    Shape s1;
    std::string l1;
    bool rg1;
    Shape s2;
    std::string l2;
    bool rg2;
    Shape out;
    const char* chain;
  };
  // Rows copied from the measurement (probe: a @ b for each case, then the chain of grad_fn).
  const std::vector<Case> cases = {
      {{3}, "", true, {2, 3, 4}, "", true, {2, 4}, "UnsafeView(Mv(UnsafeView(Clone(Transpose(Acc))),Acc))"},
      {{3}, "", true, {2, 3, 4}, "", false, {2, 4}, "UnsafeView(Mv(None,Acc))"},
      {{3}, "", true, {2, 3, 4}, "T", true, {2, 4}, "UnsafeView(Mv(ReshapeAlias(Transpose(Acc)),Acc))"},
      {{2, 3}, "", true, {2, 3, 4}, "", true, {2, 2, 4},
       "Clone(Transpose(UnsafeView(Mm(UnsafeView(Clone(Transpose(Acc))),T(Acc)))))"},
      {{2, 3}, "", false, {2, 3, 4}, "", true, {2, 2, 4},
       "Clone(Transpose(UnsafeView(Mm(UnsafeView(Clone(Transpose(Acc))),None))))"},
      {{2, 3}, "", true, {2, 3, 4}, "T", true, {2, 2, 4},
       "UnsafeView(Bmm(ReshapeAlias(Expand(Acc)),ReshapeAlias(Expand(Acc))))"},
      {{2, 3}, "T", false, {2, 3, 4}, "T", true, {2, 2, 4}, "UnsafeView(Bmm(None,ReshapeAlias(Expand(Acc))))"},
      {{2, 3}, "", true, {2, 3, 4}, "P0", true, {2, 2, 4},
       "Clone(Transpose(UnsafeView(Mm(ReshapeAlias(Transpose(Acc)),T(Acc)))))"},
      {{2, 2, 3}, "", true, {3}, "", true, {2, 2}, "UnsafeView(Mv(ReshapeAlias(Acc),Acc))"},
      {{2, 2, 3}, "T", true, {3}, "", true, {2, 2}, "UnsafeView(Mv(UnsafeView(Clone(Acc)),Acc))"},
      {{2, 2, 3}, "", true, {3, 4}, "", true, {2, 2, 4}, "UnsafeView(Mm(ReshapeAlias(Acc),Acc))"},
      {{2, 2, 3}, "", false, {3, 4}, "T", true, {2, 2, 4}, "UnsafeView(Mm(None,Acc))"},
      {{2, 2, 3}, "T", true, {3, 4}, "", true, {2, 2, 4},
       "UnsafeView(Bmm(ReshapeAlias(Expand(Acc)),ReshapeAlias(Expand(Acc))))"},
      {{2, 2, 3}, "T", true, {3, 4}, "", false, {2, 2, 4}, "UnsafeView(Bmm(ReshapeAlias(Expand(Acc)),None))"},
      {{2, 2, 3}, "P0", true, {3, 4}, "", true, {2, 2, 4}, "UnsafeView(Mm(UnsafeView(Clone(Acc)),Acc))"},
      {{2, 2, 3}, "", true, {2, 3, 4}, "", true, {2, 2, 4},
       "UnsafeView(Bmm(ReshapeAlias(Expand(Acc)),ReshapeAlias(Expand(Acc))))"},
      {{2, 2, 3}, "P0", false, {2, 3, 4}, "T", true, {2, 2, 4}, "UnsafeView(Bmm(None,ReshapeAlias(Expand(Acc))))"},
      {{3}, "", true, {3, 4}, "", true, {4}, "SqueezeBackward3(Mm(Unsqueeze(Acc),Acc))"},
      {{3}, "", false, {3, 4}, "", true, {4}, "SqueezeBackward3(Mm(None,Acc))"},
      {{2, 1, 2, 3}, "", true, {3, 3, 4}, "", true, {2, 3, 2, 4},
       "UnsafeView(Bmm(UnsafeView(Clone(Expand(Acc))),UnsafeView(Clone(Expand(Acc)))))"},
      {{2, 2, 3}, "", true, {1, 3, 4}, "", true, {2, 2, 4},
       "UnsafeView(Bmm(ReshapeAlias(Expand(Acc)),ReshapeAlias(Expand(Acc))))"},
      {{2, 3}, "", true, {2, 2, 3, 4}, "T", true, {2, 2, 2, 4},
       "Clone(Transpose(UnsafeView(Mm(ReshapeAlias(Transpose(Acc)),T(Acc)))))"},
      {{2, 2, 2, 3}, "T", true, {3, 4}, "", true, {2, 2, 2, 4}, "UnsafeView(Mm(UnsafeView(Clone(Acc)),Acc))"},
      {{2, 2, 2, 3}, "", true, {3}, "", false, {2, 2, 2}, "UnsafeView(Mv(ReshapeAlias(Acc),None))"},
      {{3}, "", true, {3}, "", true, {}, "Dot(Acc,Acc)"},
      {{2, 3}, "", true, {3}, "", false, {2}, "Mv(Acc,None)"},
      {{2, 3}, "", true, {3, 4}, "", true, {2, 4}, "Mm(Acc,Acc)"},
  };
  for (const Case& c : cases) {
    INFO(agtrace::shape_str(c.s1) << c.l1 << " rg=" << c.rg1 << " @ " << agtrace::shape_str(c.s2) << c.l2
                                  << " rg=" << c.rg2);
    Tensor a = leaf_with_layout(c.s1, c.l1, c.rg1), b = leaf_with_layout(c.s2, c.l2, c.rg2);
    Tensor y = ops::matmul(a, b);
    CHECK(y->sizes == c.out);
    CHECK(y->is_contiguous());
    CHECK(chain(y->grad_fn) == c.chain);
  }
}

TEST_CASE("matmul: saved values of the decomposition", "[shapes][matmul]") {
  SECTION("3-D @ 3-D: Bmm saves reshaped views sharing the inputs' storage") {
    Tensor a = A({2, 2, 3}), c = A({2, 3, 4});
    Tensor y = ops::matmul(a, c);
    Node& uv = fn(y);
    CHECK(uv.name == "UnsafeViewBackward0");
    CHECK(saved_names(uv) == Names{"self_sym_sizes"});
    CHECK(attr(uv, "self_sym_sizes") == "(2, 2, 4)");
    CHECK(y->base == nullptr);  // _unsafe_view is not a view
    Node& bmm = *uv.next[0].fn;
    CHECK(bmm.name == "BmmBackward0");
    CHECK(saved_names(bmm) == Names{"mat2", "self"});
    Tensor s = bmm.unpack("self"), m2 = bmm.unpack("mat2");
    CHECK(s != a);
    CHECK(s->storage == a->storage);
    CHECK(s->grad_fn->name == "ReshapeAliasBackward0");
    CHECK(m2->storage == c->storage);
    CHECK(bmm.saved_bytes() == 144);
    CHECK(attr(*s->grad_fn, "self_sym_sizes") == "(2, 2, 3)");
    CHECK(attr(*s->grad_fn->next[0].fn, "self_sym_sizes") == "(2, 2, 3)");  // ExpandBackward0
  }
  SECTION("3-D @ 3-D, only a requires grad: mat2 saved (96 B), self None") {
    Tensor a = A({2, 2, 3}), c = A({2, 3, 4}, -1, 1, false);
    Tensor y = ops::matmul(a, c);
    Node& bmm = *fn(y).next[0].fn;
    CHECK(defined(bmm, "mat2"));
    CHECK_FALSE(defined(bmm, "self"));
    CHECK(bmm.saved_bytes() == 96);
  }
  SECTION("3-D @ 2-D: UnsafeView(4, 4) over Mm with self a ReshapeAlias view, mat2 W itself") {
    Tensor a = A({2, 2, 3}), W = A({3, 4});
    Tensor y = ops::matmul(a, W);
    CHECK(attr(fn(y), "self_sym_sizes") == "(4, 4)");
    Node& mm = *fn(y).next[0].fn;
    CHECK(mm.name == "MmBackward0");
    CHECK(mm.unpack("mat2") == W);
    CHECK(mm.unpack("self")->storage == a->storage);
    CHECK(mm.unpack("self")->sizes == Shape{4, 3});
    CHECK(attr(mm, "self_sym_sizes") == "(4, 3)");
  }
  SECTION("1-D @ 2-D: SqueezeBackward3 (dim 0, self_sizes (1, 4)); the result is at version 1") {
    Tensor u = A({3}), W = A({3, 4});
    Tensor y = ops::matmul(u, W);
    CHECK(y->sizes == Shape{4});
    CHECK(y->version->version == 1);
    CHECK(y->base == nullptr);
    CHECK(fn(y).name == "SqueezeBackward3");
    CHECK(saved_names(fn(y)) == Names{"dim", "self_sizes"});
    CHECK(attr(fn(y), "dim") == "0");
    CHECK(attr(fn(y), "self_sizes") == "(1, 4)");
    Node& mm = *fn(y).next[0].fn;
    CHECK(mm.unpack("self")->grad_fn->name == "UnsqueezeBackward0");
    CHECK(mm.unpack("self")->storage == u->storage);
  }
  SECTION("2-D @ 3-D: the mT transposes save dims -2 and -1 as uint64") {
    Tensor x = A({2, 3}), c = A({2, 3, 4});
    Tensor y = ops::matmul(x, c);
    Node& tr = *fn(y).next[0].fn;
    CHECK(tr.name == "TransposeBackward0");
    CHECK(attr(tr, "dim0") == "18446744073709551614");
    CHECK(attr(tr, "dim1") == "18446744073709551615");
    CHECK(attr(*tr.next[0].fn, "self_sym_sizes") == "(8, 2)");
    Node& mm = *tr.next[0].fn->next[0].fn;
    CHECK(attr(mm, "mat2_sym_strides") == "(1, 3)");
    CHECK(mm.unpack("mat2")->storage == x->storage);
  }
}

TEST_CASE("matmul family: dot, mv, bmm save each operand only for the other", "[shapes][matmul]") {
  for (int combo = 0; combo < 3; ++combo) {
    const bool r1 = combo != 2, r2 = combo != 1;
    INFO("requires_grad " << r1 << ", " << r2);
    Tensor u = A({3}, -1, 1, r1), v = A({3}, 0.5, 2, r2);
    Tensor dot_out = ops::dot(u, v);
    Node& dot = fn(dot_out);
    CHECK(dot.name == "DotBackward0");
    CHECK(saved_names(dot) == Names{"self", "tensor"});
    CHECK(defined(dot, "self") == r2);
    CHECK(defined(dot, "tensor") == r1);
    if (r2) CHECK(dot.unpack("self") == u);
    if (r1) CHECK(dot.unpack("tensor") == v);
    CHECK(next_names(dot) == Names{r1 ? kAcc : "None", r2 ? kAcc : "None"});

    Tensor x = A({2, 3}, -1, 1, r1);
    Tensor mv_out = ops::mv(x, v);
    Node& mv = fn(mv_out);
    CHECK(mv.name == "MvBackward0");
    CHECK(saved_names(mv) == Names{"self", "vec"});
    CHECK(defined(mv, "self") == r2);
    CHECK(defined(mv, "vec") == r1);
    CHECK(mv.saved_bytes() == (r2 ? 24 : 0) + (r1 ? 12 : 0));

    Tensor a = A({2, 2, 3}, -1, 1, r1), c = A({2, 3, 4}, -1, 1, r2);
    Tensor bmm_out = ops::bmm(a, c);
    Node& bmm = fn(bmm_out);
    CHECK(bmm.name == "BmmBackward0");
    CHECK(saved_names(bmm) == Names{"mat2", "self"});
    CHECK(defined(bmm, "mat2") == r1);
    CHECK(defined(bmm, "self") == r2);
    if (r1) CHECK(bmm.unpack("mat2") == c);
    if (r2) CHECK(bmm.unpack("self") == a);
  }
}

TEST_CASE("matmul family: addmm and F.linear", "[shapes][matmul]") {
  const Names addmm_names{"alpha", "beta", "mat1", "mat1_sym_sizes", "mat1_sym_strides",
                          "mat2", "mat2_sym_sizes", "mat2_sym_strides"};
  const Value one = Value::integer(1);
  SECTION("torch.addmm(b, x, W), all requiring grad") {
    Tensor b = A({4}), x = A({2, 3}), W = A({3, 4});
    Tensor n_out = ops::addmm(b, x, W, one, one);
    Node& n = fn(n_out);
    CHECK(n.name == "AddmmBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc, kAcc});
    CHECK(saved_names(n) == addmm_names);
    CHECK(n.unpack("mat1") == x);
    CHECK(n.unpack("mat2") == W);
    CHECK(attr(n, "alpha") == "1");
    CHECK(attr(n, "beta") == "1");
    CHECK(attr(n, "mat1_sym_strides") == "(3, 1)");
    CHECK(attr(n, "mat2_sym_strides") == "(4, 1)");
    CHECK(n.saved_bytes() == 72);
  }
  SECTION("alpha=2, beta=0.5 read back as written") {
    Tensor n_out = ops::addmm(A({4}), A({2, 3}), A({3, 4}), Value::real(0.5), Value::integer(2));
    Node& n = fn(n_out);
    CHECK(attr(n, "alpha") == "2");
    CHECK(attr(n, "beta") == "0.5");
  }
  SECTION("requires_grad combinations (SUMMARY section 3)") {
    struct Combo {
      bool b, x, W;
      bool mat1, mat2;
      int bytes;
    };
    for (const Combo& c : std::vector<Combo>{{true, false, false, false, false, 0},
                                             {false, true, false, false, true, 48},
                                             {false, false, true, true, false, 24},
                                             {true, true, false, false, true, 48},
                                             {true, false, true, true, false, 24},
                                             {false, true, true, true, true, 72}}) {
      INFO("b " << c.b << " x " << c.x << " W " << c.W);
      Tensor b = A({4}, -1, 1, c.b), x = A({2, 3}, -1, 1, c.x), W = A({3, 4}, -1, 1, c.W);
      Tensor n_out = ops::addmm(b, x, W, one, one);
      Node& n = fn(n_out);
      CHECK(defined(n, "mat1") == c.mat1);
      CHECK(defined(n, "mat2") == c.mat2);
      CHECK(n.saved_bytes() == c.bytes);
    }
  }
  SECTION("F.linear(x, W, b): mat2 is W.t(), a TBackward0 view of W (strides (1, 3))") {
    Tensor x = A({2, 3}), W = A({4, 3}), b = A({4});
    Tensor y = ops::linear(x, W, b);
    Node& n = fn(y);
    CHECK(n.name == "AddmmBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc, "TBackward0"});
    Tensor m2 = n.unpack("mat2");
    CHECK(m2->storage == W->storage);
    CHECK(m2->grad_fn->name == "TBackward0");
    CHECK_FALSE(m2->is_leaf());
    CHECK(attr(n, "mat2_sym_strides") == "(1, 3)");
    CHECK(n.unpack("mat1") == x);
  }
  SECTION("F.linear requires_grad combinations (measured)") {
    // x only: mat2 saved (W.t() without a node), strides of mat1 only.
    Tensor x = A({2, 3}), W = A({4, 3}, -1, 1, false), b = A({4}, -1, 1, false);
    Tensor n_out = ops::linear(x, W, b);
    Node& n = fn(n_out);
    CHECK(next_names(n) == Names{"None", kAcc, "None"});
    CHECK_FALSE(defined(n, "mat1"));
    CHECK(n.unpack("mat2")->grad_fn == nullptr);
    CHECK(attr(n, "mat1_sym_strides") == "(3, 1)");
    CHECK(attr(n, "mat2_sym_strides") == "()");
    // W and b: mat1 is x itself.
    Tensor x2 = A({2, 3}, -1, 1, false), W2 = A({4, 3}), b2 = A({4});
    Tensor n2_out = ops::linear(x2, W2, b2);
    Node& n2 = fn(n2_out);
    CHECK(next_names(n2) == Names{kAcc, "None", "TBackward0"});
    CHECK(n2.unpack("mat1") == x2);
    CHECK(attr(n2, "mat1_sym_strides") == "()");
  }
  SECTION("F.linear without bias: MmBackward0 over TBackward0") {
    Tensor x = A({2, 3}), W = A({4, 3});
    Tensor n_out = ops::linear(x, W, nullptr);
    Node& n = fn(n_out);
    CHECK(n.name == "MmBackward0");
    CHECK(next_names(n) == Names{kAcc, "TBackward0"});
    CHECK(attr(n, "mat2_sym_strides") == "(1, 3)");
  }
  SECTION("F.linear on 3-D input") {
    Tensor a = A({2, 2, 3}), W = A({4, 3}), b = A({4});
    Tensor y = ops::linear(a, W, b);
    CHECK(chain(y->grad_fn) == "View(Addmm(Acc,View(Acc),T(Acc)))");
    CHECK(attr(fn(y), "self_sym_sizes") == "(4, 4)");
    CHECK(y->base != nullptr);  // a real view of the addmm result
    CHECK(y->version->version == 0);
    Node& addmm = *fn(y).next[0].fn;
    CHECK(addmm.unpack("mat1")->grad_fn->name == "ViewBackward0");
    CHECK(addmm.unpack("mat1")->storage == a->storage);
    // Without bias: matmul's fold.
    CHECK(chain(ops::linear(a, W, nullptr)->grad_fn) == "UnsafeView(Mm(ReshapeAlias(Acc),T(Acc)))");
    // Non-contiguous 3-D with bias: matmul then add_ in place (version 1).
    Tensor y2 = ops::linear(ops::transpose(a, 0, 1), W, b);
    CHECK(chain(y2->grad_fn) == "Add(UnsafeView(Mm(UnsafeView(Clone(Transpose(Acc))),T(Acc))),Acc)");
    CHECK(y2->version->version == 1);
    // 1-D input with bias: Add over SqueezeBackward3, version 2.
    Tensor y3 = ops::linear(A({3}), W, b);
    CHECK(chain(y3->grad_fn) == "Add(SqueezeBackward3(Mm(Unsqueeze(Acc),T(Acc))),Acc)");
    CHECK(y3->version->version == 2);
    // 4-D input with bias: Add over UnsafeView, version 1.
    Tensor y4 = ops::linear(A({2, 1, 2, 3}), W, b);
    CHECK(next_names(fn(y4)) == Names{"UnsafeViewBackward0", kAcc});
    CHECK(y4->version->version == 1);
  }
}

TEST_CASE("matmul family: values and errors", "[shapes][matmul]") {
  // Values against torch (A = linspace): u @ v, x @ u and a 3-D product.
  Tensor u = A({3}, -1, 1, false), v = A({3}, 0.5, 2, false);
  CHECK(agtrace::item(ops::matmul(u, v)) == Approx(1.5));  // -0.5 + 0 + 2.0
  Tensor x = A({2, 3}, -1, 1, false);
  CHECK(agtrace::to_values(ops::matmul(x, u)) == std::vector<double>{agtrace::item(ops::dot(A({3}, -1, -0.2, false), u)),
                                                                       agtrace::item(ops::dot(A({3}, 0.2, 1, false), u))});
  // Integer operands work without autograd (measured).
  Tensor i1 = agtrace::tensor_from_values({2, 3}, DType::Int64, {1, 1, 1, 1, 1, 1});
  Tensor i2 = agtrace::tensor_from_values({3}, DType::Int64, {1, 2, 3});
  CHECK(agtrace::to_values(ops::matmul(i1, i2)) == std::vector<double>{6, 6});
  CHECK(ops::matmul(i1, i2)->dtype() == DType::Int64);

  auto msg = [](const std::function<void()>& f, const std::string& kind) {
    ScenarioError e = error_of(f);
    CHECK(e.kind == kind);
    return std::string(e.what());
  };
  // Measured messages.
  CHECK(msg([&] { ops::matmul(A({}, 1, 1), u); }, "shape_mismatch") ==
        "both arguments to matmul need to be at least 1D, but they are 0D and 1D");
  CHECK(msg([&] { ops::matmul(u, A({3}, 1, 2, false, DType::Float64)); }, "dtype_mismatch") ==
        "dot : expected both vectors to have same dtype, but found Float and Double");
  CHECK(msg([&] { ops::matmul(u, A({4})); }, "shape_mismatch") ==
        "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements, but got 3 and 4 "
        "elements respectively");
  CHECK(msg([&] { ops::matmul(x, A({4})); }, "shape_mismatch") == "size mismatch, got 2, 2x3,4");
  CHECK(msg([&] { ops::matmul(x, A({3}, 0, 1, false, DType::Float64)); }, "dtype_mismatch") ==
        "expected scalar type Float but found Double");
  CHECK(msg([&] { ops::matmul(u, A({4, 2})); }, "shape_mismatch") == "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x2)");
  CHECK(msg([&] { ops::matmul(A({2, 2, 3}), A({2, 4, 2})); }, "shape_mismatch") ==
        "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4].");
  CHECK(msg([&] { ops::matmul(A({2, 2, 3}), A({3, 3, 2})); }, "shape_mismatch") ==
        "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
  CHECK(msg([&] { ops::matmul(A({2, 2, 3}), A({4, 2})); }, "shape_mismatch") ==
        "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x2)");
  CHECK(msg([&] { ops::matmul(A({2, 2, 3}), A({4})); }, "shape_mismatch") == "size mismatch, got 4, 4x3,4");
  CHECK(msg([&] { ops::matmul(x, A({2, 4, 2})); }, "shape_mismatch") ==
        "mat1 and mat2 shapes cannot be multiplied (4x4 and 3x2)");
  CHECK(msg([&] { ops::bmm(x, A({3, 4})); }, "shape_mismatch") == "batch1 must be a 3D tensor");
  CHECK(msg([&] { ops::bmm(A({2, 2, 3}), A({3, 3, 2})); }, "shape_mismatch") ==
        "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3].");
  CHECK(msg([&] { ops::bmm(A({2, 2, 3}), A({2, 3, 4}, 0, 1, false, DType::Float64)); }, "dtype_mismatch") ==
        "expected scalar type Float but found Double");
  const Value one = Value::integer(1);
  CHECK(msg([&] { ops::addmm(A({4}), x, A({4, 2}), one, one); }, "shape_mismatch") ==
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)");
  CHECK(msg([&] { ops::addmm(A({3}), x, A({3, 4}), one, one); }, "shape_mismatch") ==
        "The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 1.  Target "
        "sizes: [2, 4].  Tensor sizes: [3]");
  CHECK(msg([&] { ops::addmm(A({4}, 0, 1, false, DType::Float64), x, A({3, 4}), one, one); }, "dtype_mismatch") ==
        "self and mat2 must have the same dtype");
  CHECK(msg([&] { ops::addmm(A({4}), A({2, 3}, 0, 1, false, DType::Float64), A({3, 4}), one, one); },
            "dtype_mismatch") == "mat1 and mat2 must have the same dtype");
  CHECK(msg([&] { ops::addmm(A({4}), A({3}), A({3, 4}), one, one); }, "shape_mismatch") ==
        "mat1 must be a matrix, got 1-D tensor");
  CHECK(msg([&] { ops::linear(x, A({2, 4}), nullptr); }, "shape_mismatch") ==
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)");
  CHECK(msg([&] { ops::linear(x, A({1, 4, 3}), nullptr); }, "shape_mismatch") ==
        "t() expects a tensor with <= 2 dimensions, but self is 3D");
}
