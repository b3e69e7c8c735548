// The matmul family (lib/ops/linalg.cpp): gradient checks by central differences in
// float64 for every rank combination, and fidelity to PyTorch 1.13: the node chain matmul
// decomposes into (for each layout and requires_grad combination), saved values per
// requires_grad combination, identity of saved tensors, and errors. Every expected fact
// below was measured with /usr/bin/python3 and torch 1.13 first (chains are written as
// the measurement script printed them: "Backward0" dropped, AccumulateGrad as "Acc").
#include <catch2/catch.hpp>

#include "support/bf16_kernels.hpp"
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
#include "tensor/kernels.hpp"
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

TEST_CASE("matmul family: bfloat16 mm and addmm on the CPU round as 1.13's oneDNN and cpublas kernels",
          "[shapes][matmul][fidelity]") {
  // a_i = ((37 i) mod 101 - 50) / 16, b_i = ((29 i) mod 97 - 48) / 32, bias_i = ((13 i) mod 29
  // - 14) / 8, all exact in bfloat16, filled row-major ("R") or into the transpose's storage
  // and viewed transposed ("C", column-major). References: torch.mm and torch.addmm in 1.13.
  // 4x8x8 and 5x6x1 take cpublas (n·k·m <= 4096): rounding after every add unless mat2 is
  // column-major and mat1 is not; 16x17x16 takes oneDNN (the exact value rounded once) on a
  // CPU with AVX-512.
  const Bf16KernelsOf avx512_machine(agtrace::kernels::Bf16CpuKernels::OneDnn);
  struct Case {
    int64_t n, k, m;
    std::string layouts;
    std::vector<double> mm_first4;
    double mm_sum;
    std::vector<double> addmm_first4;
    double addmm_sum;
  };
  const std::vector<Case> cases = {
      {4, 8, 8, "RR", {12.75, -3.5625, -7.03125, 4.6875}, -11.1484375, {11.0, -3.6875, -5.53125, 4.1875}, -11.4296875},
      {4, 8, 8, "RC", {0.53125, 8.5, -5.28125, 5.75}, 8.837890625, {-1.21875, 8.375, -3.78125, 5.25}, 8.46484375},
      {4, 8, 8, "CR", {4.8125, 4.65625, -1.96875, -4.78125}, 11.58203125, {3.0625, 4.53125, -0.46875, -5.28125}, 11.1640625},
      {4, 8, 8, "CC", {6.375, 3.046875, -0.9609375, 8.5}, 6.5703125, {4.5625, 2.921875, 0.515625, 7.96875}, 6.119140625},
      {5, 6, 1, "RR", {2.75, 0.921875, -2.875, 1.0078125}, 4.7265625, {1.015625, 0.796875, -1.375, 0.5078125}, 5.0078125},
      {5, 6, 1, "RC", {2.765625, 0.92578125, -2.875, 1.0}, 4.72265625, {1.015625, 0.80078125, -1.3828125, 0.5}, 4.96484375},
      {5, 6, 1, "CR", {4.71875, 3.09375, -2.28125, 3.8125}, 11.515625, {2.96875, 2.96875, -0.765625, 3.296875}, 11.765625},
      {16, 17, 16, "RR", {2.484375, 4.5625, -0.90625, -9.625}, -8.03515625, {0.734375, 4.4375, 0.59375, -10.125},
       -7.626953125},
  };
  auto make = [](int64_t rows, int64_t cols, int64_t mul, int64_t mod, int64_t off, double den, bool column_major) {
    std::vector<double> v;
    for (int64_t i = 0; i < rows * cols; ++i) v.push_back(static_cast<double>((i * mul) % mod - off) / den);
    if (!column_major) return agtrace::tensor_from_values({rows, cols}, DType::BFloat16, v);
    Tensor base = agtrace::tensor_from_values({cols, rows}, DType::BFloat16, v);
    return agtrace::make_alias(base, {rows, cols}, {1, rows}, 0);
  };
  auto first4_and_sum = [](const Tensor& t) {
    const std::vector<double> v = agtrace::to_values(t);
    double sum = 0.0;
    for (double x : v) sum += x;
    return std::make_pair(std::vector<double>(v.begin(), v.begin() + std::min<size_t>(4, v.size())), sum);
  };
  for (const Case& c : cases) {
    INFO(c.n << "x" << c.k << "x" << c.m << " " << c.layouts);
    Tensor a = make(c.n, c.k, 37, 101, 50, 16.0, c.layouts[0] == 'C');
    Tensor b = make(c.k, c.m, 29, 97, 48, 32.0, c.layouts[1] == 'C');
    Tensor bias = make(c.n, c.m, 13, 29, 14, 8.0, false);
    const auto mm = first4_and_sum(ops::mm(a, b));
    CHECK(mm.first == std::vector<double>(c.mm_first4.begin(), c.mm_first4.begin() + mm.first.size()));
    CHECK(mm.second == c.mm_sum);
    const auto addmm = first4_and_sum(ops::addmm(bias, a, b, Value::integer(1), Value::integer(1)));
    CHECK(addmm.first == std::vector<double>(c.addmm_first4.begin(), c.addmm_first4.begin() + addmm.first.size()));
    CHECK(addmm.second == c.addmm_sum);
  }
}

// A (batches, rows, cols) bfloat16 tensor of ((i * mul) mod `mod` - off) / den, all exact in
// bfloat16: row-major, or filled into the transpose's storage and viewed transposed.
static Tensor bf16_pattern(int64_t batches, int64_t rows, int64_t cols, int64_t mul, int64_t mod, int64_t off, double den,
                    bool column_major) {
  std::vector<double> v;
  for (int64_t i = 0; i < batches * rows * cols; ++i) v.push_back(static_cast<double>((i * mul) % mod - off) / den);
  if (!column_major) return agtrace::tensor_from_values({batches, rows, cols}, DType::BFloat16, v);
  Tensor base = agtrace::tensor_from_values({batches, cols, rows}, DType::BFloat16, v);
  return agtrace::make_alias(base, {batches, rows, cols}, {rows * cols, 1, rows}, 0);
}

TEST_CASE("matmul family: bfloat16 bmm on the CPU rounds as 1.13's naive and cpublas and oneDNN kernels",
          "[shapes][matmul][fidelity]") {
  // The inputs of the mm case above, per batch; references: torch.bmm in 1.13. 2x4x8x4
  // (k·n·m = 128 < 400) is the naive loop: rounding after every add even with a column-major
  // mat2 ("RC"); 1x8x8x8 and 4x8x16x8 (B·n·k·m <= 4096) are cpublas, where "RC" is a float dot
  // rounded once; 2x16x16x16 is oneDNN (on a CPU with AVX-512).
  const Bf16KernelsOf avx512_machine(agtrace::kernels::Bf16CpuKernels::OneDnn);
  struct Case {
    int64_t batches, n, k, m;
    std::string layouts;
    std::vector<double> first4;
    double sum;
  };
  const std::vector<Case> cases = {
      {2, 4, 8, 4, "RR", {8.8125, -1.0234375, 2.515625, 0.77734375}, -10.06640625},
      {2, 4, 8, 4, "RC", {0.515625, 8.5625, -5.28125, 5.75}, 8.40625},
      {1, 8, 8, 8, "RR", {12.75, -3.5625, -7.03125, 4.6875}, -30.578125},
      {1, 8, 8, 8, "RC", {0.53125, 8.5, -5.28125, 5.75}, 11.607421875},
      {4, 8, 16, 8, "RR", {10.25, -8.875, -2.984375, 7.8125}, -11.927734375},
      {4, 8, 16, 8, "RC", {6.34375, -5.40625, -4.4375, 8.625}, -8.462890625},
      {2, 16, 16, 16, "RR", {2.1875, 2.1875, 1.625, -9.1875}, -45.79296875},
      {2, 16, 16, 16, "RC", {6.34375, -5.40625, -4.4375, 8.625}, -45.537109375},
  };
  for (const Case& c : cases) {
    INFO(c.batches << "x" << c.n << "x" << c.k << "x" << c.m << " " << c.layouts);
    Tensor a = bf16_pattern(c.batches, c.n, c.k, 37, 101, 50, 16.0, c.layouts[0] == 'C');
    Tensor b = bf16_pattern(c.batches, c.k, c.m, 29, 97, 48, 32.0, c.layouts[1] == 'C');
    const std::vector<double> v = agtrace::to_values(ops::bmm(a, b));
    CHECK(std::vector<double>(v.begin(), v.begin() + 4) == c.first4);
    double sum = 0.0;
    for (double x : v) sum += x;
    CHECK(sum == c.sum);
  }
}

TEST_CASE("matmul family: bfloat16 products above 4096 multiply-adds take cpublas on a CPU without AVX-512",
          "[shapes][matmul][fidelity]") {
  // mkldnn_bf16_device_check() fails without avx512bw/vl/dq, so 1.13 sends every bfloat16
  // product to cpublas::gemm's loops. The inputs of the cases above; references: torch.mm,
  // torch.addmm and torch.bmm in 1.13 on an AMD EPYC with AVX2 only. Each fails with the
  // oneDNN rounding (the 16x17x16 "RR" mm sum is -8.03515625 there).
  const Bf16KernelsOf avx2_machine(agtrace::kernels::Bf16CpuKernels::Cpublas);
  auto first4_and_sum = [](const Tensor& t) {
    const std::vector<double> v = agtrace::to_values(t);
    double sum = 0.0;
    for (double x : v) sum += x;
    return std::make_pair(std::vector<double>(v.begin(), v.begin() + 4), sum);
  };
  struct MmCase {
    std::string layouts;
    std::vector<double> mm_first4;
    double mm_sum;
    std::vector<double> addmm_first4;
    double addmm_sum;
  };
  const std::vector<MmCase> mm_cases = {
      {"RR", {2.59375, 4.5625, -0.9140625, -9.6875}, -7.54296875, {0.7265625, 4.4375, 0.625, -10.1875}, -7.04296875},
      {"RC", {8.375, 4.21875, 5.75, 3.484375}, -12.248046875, {6.625, 4.09375, 7.25, 2.984375}, -11.76171875},
      {"CR", {1.6328125, 0.8828125, 1.75, -2.40625}, -5.189453125, {-0.1171875, 0.7578125, 3.265625, -2.90625}, -4.6875},
  };
  for (const MmCase& c : mm_cases) {
    INFO("16x17x16 " << c.layouts);
    Tensor a = ops::squeeze(bf16_pattern(1, 16, 17, 37, 101, 50, 16.0, c.layouts[0] == 'C'), 0);
    Tensor b = ops::squeeze(bf16_pattern(1, 17, 16, 29, 97, 48, 32.0, c.layouts[1] == 'C'), 0);
    Tensor bias = ops::squeeze(bf16_pattern(1, 16, 16, 13, 29, 14, 8.0, false), 0);
    const auto mm = first4_and_sum(ops::mm(a, b));
    CHECK(mm.first == c.mm_first4);
    CHECK(mm.second == c.mm_sum);
    const auto addmm = first4_and_sum(ops::addmm(bias, a, b, Value::integer(1), Value::integer(1)));
    CHECK(addmm.first == c.addmm_first4);
    CHECK(addmm.second == c.addmm_sum);
  }
  Tensor a = bf16_pattern(2, 16, 16, 37, 101, 50, 16.0, false);
  const auto rr = first4_and_sum(ops::bmm(a, bf16_pattern(2, 16, 16, 29, 97, 48, 32.0, false)));
  CHECK(rr.first == std::vector<double>{2.296875, 2.15625, 1.6171875, -9.25});
  CHECK(rr.second == -46.65234375);
  const auto rc = first4_and_sum(ops::bmm(a, bf16_pattern(2, 16, 16, 29, 97, 48, 32.0, true)));
  CHECK(rc.first == std::vector<double>{6.34375, -5.40625, -4.4375, 8.625});
  CHECK(rc.second == -45.537109375);
}
