// Shape ops, indexing, cat/stack and to(dtype) (lib/ops/shapes.cpp): gradient checks by
// central differences in float64, and fidelity to PyTorch 1.13: node names,
// next_functions, saved attribute names (dir() order), values, identity and errors. Every
// expected fact below was measured with /usr/bin/python3 and torch 1.13 first.
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
#include "interp/run_helpers.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::AttrValue;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

using namespace agtrace::test;

namespace {


// torch.linspace(lo, hi, numel).reshape(shape).
Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true,
         DType dtype = DType::Float32) {
  return linspace_leaf(shape, lo, hi, requires_grad, dtype);
}

Tensor idx(const Shape& shape, const std::vector<double>& v) {
  return agtrace::tensor_from_values(shape, DType::Int64, v);
}

// A float64 leaf with distinct, non-linear values (golden-ratio sequence in [lo, hi)).
Tensor leaf(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true, double phase = 0.37) {
  return leaf64(shape, lo, hi, requires_grad, phase);
}









std::vector<double> grad_of(const Tensor& root, const Tensor& x) {
  autograd::BackwardRequest req;
  req.roots = {root};
  autograd::run_backward(req);
  REQUIRE(x->grad != nullptr);
  return agtrace::to_values(x->grad);
}

Tensor weighted_sum(const Tensor& out, const std::vector<double>& w) {
  Tensor wt = agtrace::tensor_from_values(out->sizes, out->dtype(), w);
  return ops::sum(ops::mul(out, wt), std::nullopt, false);
}

// Runs f and returns the ScenarioError it throws (fails the test if it does not).
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
const char* kU64m1 = "18446744073709551615";  // -1 read back as uint64

}  // namespace

// ================================================================ gradient checks

TEST_CASE("gradcheck: permute, expand, (un)squeeze, flatten", "[shapes][gradcheck]") {
  check_gradients("permute(2, 0, 1)", {leaf({2, 3, 4})}, [](const Inputs& in) { return ops::permute(in[0], {2, 0, 1}); });
  check_gradients("permute(-1, 0, 1)", {leaf({2, 3, 4})},
                  [](const Inputs& in) { return ops::permute(in[0], {-1, 0, 1}); });
  check_gradients("expand(2, 3) of [3]", {leaf({3})}, [](const Inputs& in) { return ops::expand(in[0], {2, 3}); });
  check_gradients("expand(4, -1, 3) of [2, 1]", {leaf({2, 1})},
                  [](const Inputs& in) { return ops::expand(in[0], {4, -1, 3}); });
  check_gradients("expand to the same size", {leaf({2, 3})}, [](const Inputs& in) { return ops::expand(in[0], {2, 3}); });
  check_gradients("unsqueeze(1)", {leaf({2, 3})}, [](const Inputs& in) { return ops::unsqueeze(in[0], 1); });
  check_gradients("unsqueeze(-1)", {leaf({2, 3})}, [](const Inputs& in) { return ops::unsqueeze(in[0], -1); });
  check_gradients("squeeze()", {leaf({2, 1, 3, 1})}, [](const Inputs& in) { return ops::squeeze(in[0]); });
  check_gradients("squeeze(1)", {leaf({2, 1, 3})}, [](const Inputs& in) { return ops::squeeze(in[0], 1); });
  check_gradients("squeeze(0) of a non-1 dim", {leaf({2, 3})}, [](const Inputs& in) { return ops::squeeze(in[0], 0); });
  check_gradients("flatten()", {leaf({2, 2, 3})}, [](const Inputs& in) { return ops::flatten(in[0], 0, -1); });
  check_gradients("flatten(1)", {leaf({2, 2, 3})}, [](const Inputs& in) { return ops::flatten(in[0], 1, -1); });
  check_gradients("transpose(0, 2).flatten() (copies)", {leaf({2, 2, 3})},
                  [](const Inputs& in) { return ops::flatten(ops::transpose(in[0], 0, 2), 0, -1); });
  check_gradients("a chain of views", {leaf({2, 3})}, [](const Inputs& in) {
    return ops::squeeze(ops::permute(ops::unsqueeze(ops::expand(in[0], {4, 2, 3}), 0), {0, 2, 3, 1}), 0);
  });
}

TEST_CASE("gradcheck: split, chunk, unbind", "[shapes][gradcheck]") {
  check_gradients_multi("split(1, dim=0)", {leaf({2, 3})}, [](const Inputs& in) { return ops::split(in[0], 1, 0); });
  check_gradients_multi("split(2, dim=-1)", {leaf({2, 3})}, [](const Inputs& in) { return ops::split(in[0], 2, -1); });
  check_gradients_multi("split([1, 2], dim=1)", {leaf({2, 3})},
                        [](const Inputs& in) { return ops::split_with_sizes(in[0], {1, 2}, 1); });
  check_gradients_multi("split: only the second piece used", {leaf({2, 3})},
                        [](const Inputs& in) { return std::vector<Tensor>{ops::split_with_sizes(in[0], {1, 2}, 1)[1]}; });
  check_gradients_multi("chunk(2, dim=1)", {leaf({2, 3})}, [](const Inputs& in) { return ops::chunk(in[0], 2, 1); });
  check_gradients_multi("unbind(0)", {leaf({2, 3})}, [](const Inputs& in) { return ops::unbind(in[0], 0); });
  check_gradients_multi("unbind(-1), middle output unused", {leaf({2, 3})}, [](const Inputs& in) {
    auto parts = ops::unbind(in[0], -1);
    return std::vector<Tensor>{parts[0], parts[2]};
  });
}

TEST_CASE("gradcheck: index_select, x[idx], cat, stack, to", "[shapes][gradcheck]") {
  check_gradients("index_select(1, [2, 2, 0])", {leaf({2, 3})},
                  [](const Inputs& in) { return ops::index_select(in[0], 1, idx({3}, {2, 2, 0})); });
  check_gradients("index_select(0, 0-d)", {leaf({3, 2})},
                  [](const Inputs& in) { return ops::index_select(in[0], 0, idx({}, {1})); });
  check_gradients("x[[2, 0, 2]]", {leaf({3, 2})},
                  [](const Inputs& in) { return ops::index_with_tensor(in[0], idx({3}, {2, 0, 2})); });
  check_gradients("x[[[0, -1], [1, 1]]]", {leaf({3, 2})},
                  [](const Inputs& in) { return ops::index_with_tensor(in[0], idx({2, 2}, {0, -1, 1, 1})); });
  check_gradients("x[tensor(1)]", {leaf({3, 2})},
                  [](const Inputs& in) { return ops::index_with_tensor(in[0], idx({}, {1})); });
  check_gradients("cat dim 0", {leaf({2, 3}), leaf({1, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::cat({in[0], in[1]}, 0); });
  check_gradients("cat dim -1, the same tensor twice", {leaf({2, 3})},
                  [](const Inputs& in) { return ops::cat({in[0], in[0]}, -1); });
  check_gradients("cat, only the second requires grad", {leaf({2, 3}, -1, 1, false), leaf({2, 2})},
                  [](const Inputs& in) { return ops::cat({in[0], in[1]}, 1); });
  check_gradients("stack dim 0", {leaf({2, 3}), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::stack({in[0], in[1]}, 0); });
  check_gradients("stack dim -1", {leaf({2, 3}), leaf({2, 3}, -2, 2, true, 0.7)},
                  [](const Inputs& in) { return ops::stack({in[0], in[1]}, -1); });
  check_gradients("to(float64, copy=True)", {leaf({2, 3})},
                  [](const Inputs& in) { return ops::to_dtype(in[0], DType::Float64, true); });
}

// ================================================================ fidelity: views

TEST_CASE("shapes: permute", "[shapes]") {
  Tensor a = A({2, 2, 3});
  Tensor p = ops::permute(a, {2, 0, 1});
  CHECK(p->sizes == Shape{3, 2, 2});
  CHECK(fn(p).name == "PermuteBackward0");
  CHECK(next_names(fn(p)) == Names{kAcc});
  CHECK(fn(p).next[0].fn->variable == a);
  CHECK(saved_names(fn(p)) == Names{"dims"});
  CHECK(attr(fn(p), "dims") == "(2, 0, 1)");
  CHECK(p->storage == a->storage);
  CHECK(p->base == a);
  CHECK(p->version == a->version);
  CHECK(fn(p).saved_bytes() == 0);
  // a.permute(-1, 0, 1): dims as passed, -1 read back as uint64 (measured).
  CHECK(attr(fn(ops::permute(a, {-1, 0, 1})), "dims") == std::string("(") + kU64m1 + ", 0, 1)");
  // Errors (measured messages).
  auto e = error_of([&] { ops::permute(a, {0, 1}); });
  CHECK(e.kind == "shape_mismatch");
  CHECK(std::string(e.what()).find("input.dim() = 3 is not equal to len(dims) = 2") != std::string::npos);
  CHECK(error_of([&] { ops::permute(a, {0, 0, 1}); }).what() == std::string("permute(): duplicate dims are not allowed."));
  e = error_of([&] { ops::permute(a, {0, 1, 3}); });
  CHECK(e.kind == "index_out_of_range");
  CHECK(e.what() == std::string("Dimension out of range (expected to be in range of [-3, 2], but got 3)"));
  // A view of a non-leaf: _base is that tensor.
  Tensor h = ops::mul(a, ops::wrap_number(Value::integer(2)));
  CHECK(ops::permute(h, {1, 0, 2})->base == h);
}

TEST_CASE("shapes: expand", "[shapes]") {
  Tensor r = A({3});
  Tensor e = ops::expand(r, {2, 3});
  CHECK(e->sizes == Shape{2, 3});
  CHECK(e->strides == Shape{0, 1});
  CHECK(fn(e).name == "ExpandBackward0");
  CHECK(next_names(fn(e)) == Names{kAcc});
  CHECK(saved_names(fn(e)) == Names{"self_sym_sizes"});
  CHECK(attr(fn(e), "self_sym_sizes") == "(3,)");
  CHECK(e->base == r);
  // -1 keeps a size; the same size still records a node and gives a new object (measured).
  Tensor c = A({3, 1});
  CHECK(ops::expand(c, {-1, 4})->sizes == Shape{3, 4});
  CHECK(attr(fn(ops::expand(c, {-1, 4})), "self_sym_sizes") == "(3, 1)");
  Tensor same = ops::expand(r, {3});
  CHECK(same != r);
  CHECK(fn(same).name == "ExpandBackward0");
  Tensor x = A({2, 3});
  CHECK(ops::expand(x, {4, -1, -1})->sizes == Shape{4, 2, 3});
  CHECK(attr(fn(ops::expand(x, {4, -1, -1})), "self_sym_sizes") == "(2, 3)");
  // Gradient sums the broadcast dims (measured: r.grad = [3, 5, 7] for weights arange(6)).
  Tensor r2 = A({3});
  CHECK(grad_of(weighted_sum(ops::expand(r2, {2, 3}), {0, 1, 2, 3, 4, 5}), r2) == std::vector<double>{3, 5, 7});
  // Errors (measured messages).
  auto err = error_of([&] { ops::expand(x, {2, 4}); });
  CHECK(err.kind == "shape_mismatch");
  CHECK(err.what() == std::string("The expanded size of the tensor (4) must match the existing size (3) at non-singleton "
                                  "dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]"));
  CHECK(error_of([&] { ops::expand(x, {3}); }).what() ==
        std::string("expand(torch.FloatTensor{[2, 3]}, size=[3]): the number of sizes provided (1) must be greater or "
                    "equal to the number of dimensions in the tensor (2)"));
  CHECK(error_of([&] { ops::expand(r, {-1, 3}); }).what() ==
        std::string("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"));
}

TEST_CASE("shapes: unsqueeze and squeeze", "[shapes]") {
  Tensor x = A({2, 3});
  Tensor u = ops::unsqueeze(x, 0);
  CHECK(u->sizes == Shape{1, 2, 3});
  CHECK(fn(u).name == "UnsqueezeBackward0");
  CHECK(saved_names(fn(u)) == Names{"dim"});
  CHECK(attr(fn(u), "dim") == "0");
  CHECK(attr(fn(ops::unsqueeze(x, -1)), "dim") == kU64m1);
  CHECK(ops::unsqueeze(x, -1)->sizes == Shape{2, 3, 1});
  CHECK(ops::unsqueeze(x, -3)->sizes == Shape{1, 2, 3});
  CHECK(error_of([&] { ops::unsqueeze(x, 3); }).what() ==
        std::string("Dimension out of range (expected to be in range of [-3, 2], but got 3)"));

  Tensor s = A({2, 1, 3});
  Tensor s1 = ops::squeeze(s, 1);
  CHECK(s1->sizes == Shape{2, 3});
  CHECK(fn(s1).name == "SqueezeBackward1");
  CHECK(saved_names(fn(s1)) == Names{"dim", "self_sizes"});
  CHECK(attr(fn(s1), "dim") == "1");
  CHECK(attr(fn(s1), "self_sizes") == "(2, 1, 3)");
  CHECK(attr(fn(ops::squeeze(s, -2)), "dim") == "18446744073709551614");
  // squeeze of a dim that is not 1: same shape, still a SqueezeBackward1 node (measured).
  Tensor s0 = ops::squeeze(s, 0);
  CHECK(s0->sizes == Shape{2, 1, 3});
  CHECK(fn(s0).name == "SqueezeBackward1");
  Tensor sa = ops::squeeze(s);
  CHECK(sa->sizes == Shape{2, 3});
  CHECK(fn(sa).name == "SqueezeBackward0");
  CHECK(saved_names(fn(sa)) == Names{"self_sizes"});
  CHECK(fn(ops::squeeze(x)).name == "SqueezeBackward0");
  CHECK(sa->base == s);
  CHECK(error_of([&] { ops::squeeze(x, 2); }).kind == "index_out_of_range");
  // 0-d: squeeze() and squeeze(0) are nodes, unsqueeze(-1) gives [1] (measured).
  Tensor t0 = A({}, 2.0, 2.0);
  CHECK(fn(ops::squeeze(t0)).name == "SqueezeBackward0");
  CHECK(fn(ops::squeeze(t0, 0)).name == "SqueezeBackward1");
  CHECK(ops::unsqueeze(t0, -1)->sizes == Shape{1});
}

TEST_CASE("shapes: flatten is reshape", "[shapes]") {
  Tensor a = A({2, 2, 3});
  Tensor f = ops::flatten(a, 0, -1);
  CHECK(f->sizes == Shape{12});
  CHECK(fn(f).name == "ReshapeAliasBackward0");
  CHECK(saved_names(fn(f)) == Names{"self_sym_sizes"});
  CHECK(attr(fn(f), "self_sym_sizes") == "(2, 2, 3)");
  CHECK(f->storage == a->storage);
  CHECK(ops::flatten(a, 1, -1)->sizes == Shape{2, 6});
  CHECK(ops::flatten(a, 0, 1)->sizes == Shape{4, 3});
  // Non-contiguous input: UnsafeViewBackward0 over CloneBackward0 (measured).
  Tensor nc = ops::flatten(ops::transpose(a, 0, 2), 0, -1);
  CHECK(fn(nc).name == "UnsafeViewBackward0");
  CHECK(next_names(fn(nc)) == Names{"CloneBackward0"});
  CHECK(attr(fn(nc), "self_sym_sizes") == "(3, 2, 2)");
  CHECK(nc->storage != a->storage);
  // 1-D input or start == end: the very object (measured: r.flatten() is r).
  Tensor r = A({3});
  CHECK(ops::flatten(r, 0, -1) == r);
  CHECK(ops::flatten(a, 2, 2) == a);
  CHECK(ops::flatten(a, 1, 1) == a);
  // 0-d: ReshapeAliasBackward0 to [1].
  Tensor t0 = A({}, 2.0, 2.0);
  Tensor f0 = ops::flatten(t0, 0, -1);
  CHECK(f0->sizes == Shape{1});
  CHECK(fn(f0).name == "ReshapeAliasBackward0");
  CHECK(attr(fn(f0), "self_sym_sizes") == "()");
  CHECK(error_of([&] { ops::flatten(a, 2, 1); }).what() ==
        std::string("flatten() has invalid args: start_dim cannot come after end_dim"));
  CHECK(error_of([&] { ops::flatten(a, 0, 3); }).kind == "index_out_of_range");
}

TEST_CASE("shapes: split, chunk and unbind share one node", "[shapes]") {
  Tensor x = A({2, 3});
  SECTION("split(1, dim=0)") {
    auto p = ops::split(x, 1, 0);
    REQUIRE(p.size() == 2);
    CHECK(p[0]->grad_fn == p[1]->grad_fn);
    CHECK(fn(p[0]).name == "SplitBackward0");
    CHECK(next_names(fn(p[0])) == Names{kAcc});
    CHECK(saved_names(fn(p[0])) == Names{"dim", "self_sizes", "split_size"});
    CHECK(attr(fn(p[0]), "dim") == "0");
    CHECK(attr(fn(p[0]), "self_sizes") == "(2, 3)");
    CHECK(attr(fn(p[0]), "split_size") == "1");
    CHECK(p[0]->output_nr == 0);
    CHECK(p[1]->output_nr == 1);
    CHECK(p[0]->base == x);
    CHECK(p[1]->base == x);
    CHECK(p[1]->offset == 3);
  }
  SECTION("split(2, dim=-1): dim as passed, last piece shorter") {
    auto p = ops::split(x, 2, -1);
    REQUIRE(p.size() == 2);
    CHECK(p[0]->sizes == Shape{2, 2});
    CHECK(p[1]->sizes == Shape{2, 1});
    CHECK(attr(fn(p[0]), "dim") == kU64m1);
    CHECK(attr(fn(p[0]), "split_size") == "2");
  }
  SECTION("split(5, dim=1): one piece") {
    CHECK(ops::split(x, 5, 1).size() == 1);
  }
  SECTION("split([1, 2], dim=1)") {
    auto p = ops::split_with_sizes(x, {1, 2}, 1);
    REQUIRE(p.size() == 2);
    CHECK(fn(p[1]).name == "SplitWithSizesBackward0");
    CHECK(saved_names(fn(p[1])) == Names{"dim", "self_sizes", "split_sizes"});
    CHECK(attr(fn(p[1]), "split_sizes") == "(1, 2)");
    CHECK(p[1]->sizes == Shape{2, 2});
    auto e = error_of([&] { ops::split_with_sizes(x, {1, 1}, 1); });
    CHECK(e.kind == "shape_mismatch");
    CHECK(e.what() == std::string("split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's size at "
                                  "dimension 1), but got split_sizes=[1, 1]"));
  }
  SECTION("chunk is split(ceil(size / chunks))") {
    auto c3 = ops::chunk(x, 3, 1);
    REQUIRE(c3.size() == 3);
    CHECK(fn(c3[0]).name == "SplitBackward0");
    CHECK(attr(fn(c3[0]), "split_size") == "1");
    CHECK(attr(fn(c3[0]), "dim") == "1");
    auto c2 = ops::chunk(x, 2, 1);
    REQUIRE(c2.size() == 2);
    CHECK(attr(fn(c2[0]), "split_size") == "2");
    CHECK(c2[1]->sizes == Shape{2, 1});
    CHECK(ops::chunk(x, 5, 1).size() == 3);
    CHECK(error_of([&] { ops::chunk(x, 0, 0); }).what() ==
          std::string("chunk expects `chunks` to be greater than 0, got: 0"));
  }
  SECTION("unbind") {
    auto u = ops::unbind(x, 0);
    REQUIRE(u.size() == 2);
    CHECK(fn(u[0]).name == "UnbindBackward0");
    CHECK(saved_names(fn(u[0])) == Names{"dim"});
    CHECK(u[1]->output_nr == 1);
    CHECK(u[1]->sizes == Shape{3});
    CHECK(u[1]->base == x);
    auto v = ops::unbind(x, -1);
    CHECK(v.size() == 3);
    CHECK(attr(fn(v[0]), "dim") == kU64m1);
    Tensor t0 = A({}, 1.0, 1.0);
    auto e = error_of([&] { ops::unbind(t0, 0); });
    CHECK(e.kind == "index_out_of_range");
    CHECK(e.what() == std::string("Dimension specified as 0 but tensor has no dimensions"));
  }
  SECTION("an unused piece gets a zero gradient (measured: x.grad [[0, 3, 3], [0, 3, 3]])") {
    auto p = ops::split_with_sizes(x, {1, 2}, 1);
    Tensor loss = ops::sum(ops::mul(p[1], ops::wrap_number(Value::real(3.0))), std::nullopt, false);
    CHECK(grad_of(loss, x) == std::vector<double>{0, 3, 3, 0, 3, 3});
  }
  SECTION("views share the version counter") {
    Tensor h = ops::mul(x, ops::wrap_number(Value::integer(1)));
    auto p = ops::split(h, 1, 0);
    ops::add_(h, ops::wrap_number(Value::integer(1)), Value::integer(1));
    CHECK(p[0]->version->version == 1);
  }
}

// ================================================================ fidelity: copies

TEST_CASE("shapes: index_select", "[shapes]") {
  Tensor x = A({2, 3});
  Tensor i = idx({2}, {2, 0});
  Tensor y = ops::index_select(x, 1, i);
  CHECK(y->sizes == Shape{2, 2});
  CHECK(agtrace::to_values(y) == agtrace::to_values(agtrace::tensor_from_values({2, 2}, DType::Float32, {-0.2, -1.0, 1.0, 0.2})));
  CHECK(fn(y).name == "IndexSelectBackward0");
  CHECK(next_names(fn(y)) == Names{kAcc});
  CHECK(saved_names(fn(y)) == Names{"dim", "index", "self_sizes"});
  CHECK(attr(fn(y), "dim") == "1");
  CHECK(attr(fn(y), "self_sizes") == "(2, 3)");
  CHECK(fn(y).unpack("index") == i);  // the very object (measured: _saved_index is idx)
  CHECK(fn(y).saved_bytes() == 16);
  CHECK(y->storage != x->storage);
  CHECK(attr(fn(ops::index_select(x, -1, i)), "dim") == kU64m1);
  // A 0-d index keeps the dim with size 1 (measured: [2, 1]).
  CHECK(ops::index_select(x, 1, idx({}, {1}))->sizes == Shape{2, 1});
  // Gradient (measured: x3.grad [[2, 0, 1], [5, 0, 7]] for index [2, 2, 0], weights arange(6)).
  Tensor x3 = A({2, 3});
  CHECK(grad_of(weighted_sum(ops::index_select(x3, 1, idx({3}, {2, 2, 0})), {0, 1, 2, 3, 4, 5}), x3) ==
        std::vector<double>{2, 0, 1, 5, 0, 7});
  // Not requiring grad: no node.
  CHECK(ops::index_select(A({2, 3}, -1, 1, false), 1, i)->grad_fn == nullptr);
  // Errors (measured messages; the CPU kernel rejects negative indices).
  auto e = error_of([&] { ops::index_select(x, 1, idx({1}, {3})); });
  CHECK(e.kind == "index_out_of_range");
  CHECK(e.what() == std::string("INDICES element is out of DATA bounds, id=3 axis_dim=3"));
  CHECK(error_of([&] { ops::index_select(x, 1, idx({1}, {-1})); }).what() ==
        std::string("INDICES element is out of DATA bounds, id=-1 axis_dim=3"));
  CHECK(error_of([&] { ops::index_select(x, 1, idx({1, 1}, {1})); }).what() ==
        std::string("index_select(): Index is supposed to be a vector"));
  CHECK(error_of([&] { ops::index_select(x, 1, A({1}, 1.0, 1.0, false)); }).kind == "dtype_mismatch");
  CHECK(error_of([&] { ops::index_select(x, 2, i); }).kind == "index_out_of_range");
}

TEST_CASE("shapes: x[idx] with an int64 tensor", "[shapes]") {
  Tensor x = A({2, 3});
  Tensor i = idx({3}, {1, 0, 1});
  Tensor y = ops::index_with_tensor(x, i);
  CHECK(y->sizes == Shape{3, 3});
  CHECK(fn(y).name == "IndexBackward0");
  CHECK(next_names(fn(y)) == Names{kAcc});
  CHECK(saved_names(fn(y)) == Names{"indices", "self_sizes"});
  CHECK(fn(y).unpack("indices") == i);  // measured: _saved_indices[0] is idx
  CHECK(fn(y).saved_bytes() == 24);     // SUMMARY index_tensor: 24 B
  CHECK(attr(fn(y), "self_sizes") == "(2, 3)");
  CHECK(y->storage != x->storage);
  CHECK(y->base == nullptr);
  // 2-D index: idx's shape then the remaining dims; negative indices wrap.
  Tensor y2 = ops::index_with_tensor(x, idx({2, 2}, {0, 1, 1, -1}));
  CHECK(y2->sizes == Shape{2, 2, 3});
  CHECK(agtrace::to_values(ops::index_with_tensor(x, idx({2}, {-1, -2}))) ==
        agtrace::to_values(ops::index_with_tensor(x, idx({2}, {1, 0}))));
  // A 0-d index is an int: SelectBackward0 (measured: x[torch.tensor(1)]).
  Tensor s = ops::index_with_tensor(x, idx({}, {1}));
  CHECK(fn(s).name == "SelectBackward0");
  CHECK(attr(fn(s), "index") == "1");
  CHECK(attr(fn(ops::index_with_tensor(x, idx({}, {-1}))), "index") == kU64m1);
  // Empty index: [0, 3].
  CHECK(ops::index_with_tensor(x, idx({0}, {}))->sizes == Shape{0, 3});
  // Gradient accumulates repeated rows (measured: [[3, 4], [0, 0], [6, 8]]).
  Tensor x2 = A({3, 2});
  CHECK(grad_of(weighted_sum(ops::index_with_tensor(x2, idx({3}, {2, 0, 2})), {1, 2, 3, 4, 5, 6}), x2) ==
        std::vector<double>{3, 4, 0, 0, 6, 8});
  // Errors (measured: IndexError messages).
  auto e = error_of([&] { ops::index_with_tensor(x, idx({1}, {2})); });
  CHECK(e.kind == "index_out_of_range");
  CHECK(e.what() == std::string("index 2 is out of bounds for dimension 0 with size 2"));
  CHECK(error_of([&] { ops::index_with_tensor(x, idx({1}, {-3})); }).what() ==
        std::string("index -3 is out of bounds for dimension 0 with size 2"));
  CHECK(error_of([&] { ops::index_with_tensor(x, A({1}, 1.0, 1.0, false)); }).what() ==
        std::string("tensors used as indices must be long, byte or bool tensors"));
  CHECK(error_of([&] { ops::index_with_tensor(A({}, 1.0, 1.0), idx({1}, {0})); }).what() ==
        std::string("too many indices for tensor of dimension 0"));
  // A bool mask selects rows (measured: IndexBackward0 saving the mask itself, 1 byte each);
  // a 0-d mask (x[True]) is not mirrored: unsupported, not a wrong answer.
  Tensor mask = agtrace::tensor_from_values({2}, DType::Bool, {0, 1});
  Tensor row = ops::index_with_tensor(x, mask);
  CHECK(row->sizes == Shape{1, 3});
  CHECK(to_values(row) == to_values(ops::select(x, 0, 1)));
  CHECK(fn(row).unpack("indices") == mask);
  CHECK(fn(row).saved_bytes() == 2);
  Tensor mask0 = agtrace::tensor_from_values({}, DType::Bool, {1});
  CHECK(error_of([&] { ops::index_with_tensor(x, mask0); }).kind == "unsupported");
}

TEST_CASE("shapes: cat and stack", "[shapes]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.0, 1.0, false);
  Tensor c = ops::cat({x, y}, 0);
  CHECK(c->sizes == Shape{4, 3});
  CHECK(fn(c).name == "CatBackward0");
  CHECK(next_names(fn(c)) == Names{kAcc, "None"});
  CHECK(saved_names(fn(c)) == Names{"dim"});
  CHECK(attr(fn(c), "dim") == "0");
  CHECK(next_names(fn(ops::cat({y, x}, 1))) == Names{"None", kAcc});
  CHECK(ops::cat({x, y}, 1)->sizes == Shape{2, 6});
  CHECK(attr(fn(ops::cat({x, x}, -1)), "dim") == kU64m1);
  CHECK(ops::cat({y, y}, 0)->grad_fn == nullptr);
  CHECK(fn(ops::cat({x}, 0)).name == "CatBackward0");
  // dtype promotion (measured: float32 + float64 -> float64; float32 + int64 -> float32).
  CHECK(ops::cat({x, A({2, 3}, 0, 1, false, DType::Float64)}, 0)->dtype() == DType::Float64);
  CHECK(ops::cat({x, idx({2, 3}, {1, 1, 1, 1, 1, 1})}, 0)->dtype() == DType::Float32);
  // Values.
  CHECK(agtrace::to_values(ops::cat({A({1, 2}, 1, 2, false), A({1, 1}, 3, 3, false)}, 1)) == std::vector<double>{1, 2, 3});
  // Errors (measured messages).
  auto e = error_of([&] { ops::cat({x, A({2, 2})}, 0); });
  CHECK(e.kind == "shape_mismatch");
  CHECK(e.what() == std::string("Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for "
                                "tensor number 1 in the list."));
  CHECK(error_of([&] { ops::cat({x, A({3})}, 0); }).what() ==
        std::string("Tensors must have same number of dimensions: got 2 and 1"));
  CHECK(error_of([&] { ops::cat({}, 0); }).what() == std::string("torch.cat(): expected a non-empty list of Tensors"));
  CHECK(error_of([&] { ops::cat({A({}, 1, 1), A({}, 2, 2)}, 0); }).what() ==
        std::string("zero-dimensional tensor (at position 0) cannot be concatenated"));
  CHECK(error_of([&] { ops::cat({x, x}, 2); }).kind == "index_out_of_range");

  Tensor s = ops::stack({y, x}, 0);
  CHECK(s->sizes == Shape{2, 2, 3});
  CHECK(fn(s).name == "StackBackward0");
  CHECK(next_names(fn(s)) == Names{"None", kAcc});
  CHECK(saved_names(fn(s)) == Names{"dim"});
  CHECK(ops::stack({x, x}, 2)->sizes == Shape{2, 3, 2});
  CHECK(attr(fn(ops::stack({x, x}, -1)), "dim") == kU64m1);
  CHECK(error_of([&] { ops::stack({x, A({3, 2})}, 0); }).what() ==
        std::string("stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 2] at entry 1"));
  CHECK(error_of([&] { ops::stack({x, x}, 3); }).kind == "index_out_of_range");
  CHECK(error_of([&] { ops::stack({}, 0); }).what() == std::string("stack expects a non-empty TensorList"));
}

TEST_CASE("shapes: to(dtype), float(), double()", "[shapes]") {
  Tensor x = A({2, 3});
  // Same dtype: the very object, no node (measured: x.to(torch.float32) is x, x.float() is x).
  CHECK(ops::to_dtype(x, DType::Float32) == x);
  Tensor d = ops::to_dtype(x, DType::Float64);
  CHECK(d->dtype() == DType::Float64);
  CHECK(fn(d).name == "ToCopyBackward0");
  CHECK(next_names(fn(d)) == Names{kAcc});
  CHECK(saved_names(fn(d)).empty());
  CHECK(d->storage != x->storage);
  CHECK(d->base == nullptr);
  // x.double().float(): ToCopyBackward0 over ToCopyBackward0 (measured).
  Tensor back = ops::to_dtype(d, DType::Float32);
  CHECK(next_names(fn(back)) == Names{"ToCopyBackward0"});
  // copy=True of the same dtype copies and records the node (measured).
  CHECK(fn(ops::to_dtype(x, DType::Float32, true)).name == "ToCopyBackward0");
  // An integer result is not differentiable (measured: x.to(torch.int64).grad_fn is None).
  Tensor l = ops::to_dtype(x, DType::Int64);
  CHECK(l->grad_fn == nullptr);
  CHECK_FALSE(l->requires_grad());
  // The gradient comes back in the input's dtype.
  Tensor x2 = A({2, 3});
  Tensor loss = ops::sum(ops::to_dtype(x2, DType::Float64), std::nullopt, false);
  grad_of(loss, x2);
  CHECK(x2->grad->dtype() == DType::Float32);
  // The layout is preserved (MemoryFormat::Preserve): x.t().double() keeps strides (1, 3).
  Tensor tt = ops::to_dtype(ops::t(x), DType::Float64);
  CHECK(tt->strides == Shape{1, 3});
  CHECK(agtrace::to_values(tt) == agtrace::to_values(ops::t(x)));
}

// ================================================================ the table's spellings

// Every spelling of this family's table entries, run through the interpreter; the printed
// lines are what the same program printed in torch 1.13 (checked with
// tests/differential/compare_with_torch.py on this very scenario).
TEST_CASE("shapes: table spellings through the interpreter", "[shapes][interp]") {
  auto r = agtrace::test::run_text(R"JSON({"format": 1, "name": "spell",
 "tensors": {
  "x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
  "a": {"shape": [2, 2, 3], "requires_grad": true, "init": {"linspace": [-0.5, 0.6]}},
  "c": {"shape": [2, 3, 2], "requires_grad": true, "init": {"linspace": [1, -1]}},
  "u": {"shape": [3], "requires_grad": true, "init": {"values": [0.5, 1.5, -2.0]}},
  "i": {"shape": [2], "dtype": "int64", "init": {"values": [1, 1]}}
 },
 "program": [
  "print(torch.permute(a, (1, 2, 0)).shape, u.expand_as(x).grad_fn.name(), torch.unsqueeze(u, 0).shape)",
  "print(torch.squeeze(x.unsqueeze(0), 0).grad_fn.name(), torch.flatten(a, 0, 1).shape, torch.flatten(a, start_dim=1).shape)",
  "print(len(torch.split(x, 2, 1)), len(torch.chunk(a, 2)), len(torch.unbind(a, 2)), len(x.split((2, 1), 1)))",
  "print(x.index_select(0, i).shape, torch.concat((x, x)).shape, torch.stack([u, u], 1).shape)",
  "print(torch.dot(u, u).grad_fn.name(), torch.mv(x, u).grad_fn.name(), a.bmm(c).shape, u.dot(u).shape, x.mv(u).shape)",
  "print(u[:2].addmm(x, c[0], beta=2).grad_fn._saved_beta, torch.addmm(u[:2], x, c[0], alpha=0.5).grad_fn._saved_alpha)",
  "print(x.half().dtype, x.bfloat16().grad_fn.name(), x.long().dtype, x.long().requires_grad)",
  "print(x.to(u.double()).dtype, x.to('cpu') is x, x.to(dtype=torch.float64).grad_fn.name(), x.to(torch.float32, copy=True) is x)",
  "print(torch.matmul(a, c).shape, a.matmul(c[0]).shape, (u @ a.transpose(1, 2)).shape)",
  "print(F.linear(a, x, u[:2]).shape, F.linear(u, x).grad_fn.name())",
  "s = x.index_select(0, i).sum() + torch.dot(u, u) + a.bmm(c).sum() + u[:2].addmm(x, c[0], beta=2).sum() + x.half().float().sum() + F.linear(a, x, u[:2]).sum()",
  "s.backward()",
  "print(x.grad.shape)"
 ]})JSON");
  CHECK(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{
                         "torch.Size([2, 3, 2]) ExpandBackward0 torch.Size([1, 3])",
                         "SqueezeBackward1 torch.Size([4, 3]) torch.Size([2, 6])",
                         "2 2 3 2",
                         "torch.Size([2, 3]) torch.Size([4, 3]) torch.Size([3, 2])",
                         "DotBackward0 MvBackward0 torch.Size([2, 2, 2]) torch.Size([]) torch.Size([2])",
                         "2 0.5",
                         "torch.float16 ToCopyBackward0 torch.int64 False",
                         "torch.float64 True ToCopyBackward0 False",
                         "torch.Size([2, 2, 2]) torch.Size([2, 2, 2]) torch.Size([2, 2])",
                         "torch.Size([2, 2, 2]) SqueezeBackward3",
                         "torch.Size([2, 3])",
                     });
}
