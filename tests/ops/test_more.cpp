// min, argmax/argmin, cumsum, prod, logsumexp and the pointwise functions and activations
// of lib/ops/more.hpp:
//  - gradient checks by central differences in float64 for every differentiable op;
//  - ties and NaN as PyTorch 1.13 picks them, values at the awkward points (zeros of prod,
//    the thresholds), measured with /usr/bin/python3 and torch;
//  - fidelity: node names, saved attribute names (dir() order), saved numbers' types,
//    identity of saved tensors, errors, and shapes on meta.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/more.hpp"
#include "ops/ops.hpp"
#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;

using namespace agtrace::test;

namespace {

Tensor values(const Shape& shape, const std::vector<double>& v, DType d = DType::Float32, bool requires_grad = false) {
  Tensor t = agtrace::tensor_from_values(shape, d, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

Tensor meta_leaf(const Shape& shape) {
  Tensor t = agtrace::empty_tensor(shape, DType::Float32, true);
  t->requires_grad_flag = true;
  return t;
}

Value I(int64_t v) { return Value::integer(v); }
Value F(double v) { return Value::real(v); }

const double kNan = std::numeric_limits<double>::quiet_NaN();

void run_backward_of(const Tensor& root) {
  agtrace::autograd::BackwardRequest req;
  req.roots = {root};
  agtrace::autograd::run_backward(req);
}

std::string kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.kind;
  }
  return "no error";
}

}  // namespace

// ================================================================ gradient checks

TEST_CASE("more gradcheck: min, min(dim), cumsum, prod, logsumexp", "[more][gradcheck]") {
  check_gradients("min()", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::min_all(in[0]); });
  for (int64_t dim : {0, 1, -1})
    for (bool keep : {false, true})
      check_gradients("min(dim=" + std::to_string(dim) + ", keepdim=" + (keep ? "True" : "False") + ")",
                      {leaf64({3, 4}, -2, 2)}, [=](const Inputs& in) { return ops::min_dim(in[0], dim, keep).first; });
  for (int64_t dim : {0, 1, -1})
    check_gradients("cumsum " + std::to_string(dim), {leaf64({3, 4}, -2, 2)},
                    [dim](const Inputs& in) { return ops::cumsum(in[0], dim); });
  check_gradients("prod()", {leaf64({2, 3}, 0.5, 2)}, [](const Inputs& in) { return ops::prod(in[0], std::nullopt, false); });
  check_gradients("prod(1, keepdim)", {leaf64({2, 3}, -2, 2)},
                  [](const Inputs& in) { return ops::prod(in[0], 1, true); });
  check_gradients("prod(0)", {leaf64({3, 2}, -2, 2)}, [](const Inputs& in) { return ops::prod(in[0], 0, false); });
  // One zero: the zero's gradient is the product of the others (prod_safe_zeros_backward).
  check_gradients("prod() with one zero", {values({4}, {1.5, 0.0, -2.0, 0.7}, DType::Float64, true)},
                  [](const Inputs& in) { return ops::prod(in[0], std::nullopt, false); });
  check_gradients("prod(1) with a zero in one row", {values({2, 3}, {1.5, 0.0, -2.0, 0.7, 1.1, 3.0}, DType::Float64, true)},
                  [](const Inputs& in) { return ops::prod(in[0], 1, false); });
  check_gradients("logsumexp(1)", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::logsumexp(in[0], {1}, false); });
  check_gradients("logsumexp((0, 2), keepdim)", {leaf64({2, 3, 2}, -2, 2)},
                  [](const Inputs& in) { return ops::logsumexp(in[0], {0, 2}, true); });
}

TEST_CASE("more gradcheck: log1p expm1 softplus elu selu hardtanh relu6 threshold logsigmoid", "[more][gradcheck]") {
  // Values away from the kinks of hardtanh (-1, 1), relu6 (0, 6) and threshold (0.5).
  const std::vector<double> v{-1.3, -0.4, 0.2, 0.9, -2.1, 1.7, 0.45, 6.5};
  auto x = [&] { return values({2, 4}, v, DType::Float64, true); };
  check_gradients("log1p", {leaf64({2, 3}, -0.5, 3)}, [](const Inputs& in) { return ops::log1p(in[0]); });
  check_gradients("expm1", {x()}, [](const Inputs& in) { return ops::expm1(in[0]); });
  check_gradients("softplus", {x()}, [](const Inputs& in) { return ops::softplus(in[0], I(1), I(20)); });
  check_gradients("softplus beta 2 threshold 1", {x()}, [](const Inputs& in) { return ops::softplus(in[0], F(2), I(1)); });
  check_gradients("elu 0.5", {x()}, [](const Inputs& in) { return ops::elu(in[0], F(0.5), I(1), I(1)); });
  check_gradients("elu scaled", {x()}, [](const Inputs& in) { return ops::elu(in[0], F(1.6), F(1.05), F(2)); });
  check_gradients("hardtanh", {x()}, [](const Inputs& in) { return ops::hardtanh(in[0], F(-1), F(1)); });
  check_gradients("relu6", {x()}, [](const Inputs& in) { return ops::hardtanh(in[0], I(0), I(6)); });
  check_gradients("threshold", {x()}, [](const Inputs& in) { return ops::threshold(in[0], F(0.5), F(-3)); });
  check_gradients("logsigmoid", {x()}, [](const Inputs& in) { return ops::logsigmoid(in[0]); });
}

// ================================================================ values PyTorch computes

TEST_CASE("more values: ties and NaN pick the first, as PyTorch 1.13", "[more]") {
  // Measured: a = [[1, nan, 3, nan], [2, 2, 0, 0]]: argmax() 1, argmin() 1, argmax(1) [1, 0],
  // argmin(1) [1, 2], min(1) values [nan, 0] indices [1, 2], min() nan.
  Tensor a = values({2, 4}, {1, kNan, 3, kNan, 2, 2, 0, 0});
  CHECK(agtrace::item(ops::arg_extreme(a, std::nullopt, false, true)) == 1);
  CHECK(agtrace::item(ops::arg_extreme(a, std::nullopt, false, false)) == 1);
  CHECK(agtrace::to_values(ops::arg_extreme(a, 1, false, true)) == std::vector<double>{1, 0});
  CHECK(agtrace::to_values(ops::arg_extreme(a, 1, false, false)) == std::vector<double>{1, 2});
  auto [mv, mi] = ops::min_dim(a, 1, false);
  CHECK(std::isnan(agtrace::to_values(mv)[0]));
  CHECK(agtrace::to_values(mi) == std::vector<double>{1, 2});
  CHECK(std::isnan(agtrace::item(ops::min_all(a))));
  // Measured: x = [[1, 3, 3], [2, 0, 0]]: argmax() 1, argmin() 4, min(0) indices [0, 1, 1],
  // argmax(dim=None, keepdim=True) [[1]] of shape (1, 1).
  Tensor x = values({2, 3}, {1, 3, 3, 2, 0, 0});
  CHECK(agtrace::item(ops::arg_extreme(x, std::nullopt, false, true)) == 1);
  CHECK(agtrace::item(ops::arg_extreme(x, std::nullopt, false, false)) == 4);
  CHECK(agtrace::to_values(ops::min_dim(x, 0, false).second) == std::vector<double>{0, 1, 1});
  Tensor kept = ops::arg_extreme(x, std::nullopt, true, true);
  CHECK(kept->sizes == Shape{1, 1});
  CHECK(kept->dtype() == DType::Int64);
}

TEST_CASE("more values: prod's zeros, cumsum and prod of integers, hardtanh's crossed bounds", "[more]") {
  // Two zeros: every gradient of prod() is 0 (prod_backward: zero_idx.size(0) > 1).
  Tensor z = values({4}, {1.5, 0.0, -2.0, 0.0}, DType::Float64, true);
  Tensor p = ops::prod(z, std::nullopt, false);
  run_backward_of(p);
  CHECK(agtrace::to_values(z->grad) == std::vector<double>{0, 0, 0, 0});
  // Measured: [[1, 2], [3, 4]] (int64): cumsum(0) int64 [[1, 2], [4, 6]], prod() 24.
  Tensor i = values({2, 2}, {1, 2, 3, 4}, DType::Int64);
  Tensor c = ops::cumsum(i, 0);
  CHECK(c->dtype() == DType::Int64);
  CHECK(agtrace::to_values(c) == std::vector<double>{1, 2, 4, 6});
  CHECK(agtrace::item(ops::prod(i, std::nullopt, false)) == 24);
  CHECK(ops::cumsum(values({2}, {1, 0}, DType::Bool), 0)->dtype() == DType::Int64);
  // Measured: F.hardtanh(x, 2, 1) is 1 everywhere (clamp: max wins).
  CHECK(agtrace::to_values(ops::hardtanh(values({3}, {-5, 1.5, 5}), I(2), I(1))) == std::vector<double>{1, 1, 1});
  // Measured: F.threshold(int64 [[1, 2], [3, 4]], 1, 0) keeps int64: [[0, 2], [3, 4]].
  Tensor t = ops::threshold(i, I(1), I(0));
  CHECK(t->dtype() == DType::Int64);
  CHECK(agtrace::to_values(t) == std::vector<double>{0, 2, 3, 4});
  CHECK(ops::log1p(i)->dtype() == DType::Float32);
}

// ================================================================ fidelity

TEST_CASE("more fidelity: nodes, saved names, numbers and identity", "[more]") {
  Tensor x = linspace_leaf({2, 3});
  {
    Tensor m = ops::min_all(x);
    CHECK(fn(m).name == "MinBackward1");
    CHECK(saved_names(fn(m)) == Names{"result", "self"});
    CHECK(fn(m).unpack("self") == x);
    CHECK(fn(m).unpack("result") != m);
  }
  {
    auto [v, i] = ops::min_dim(x, -1, false);
    CHECK(fn(v).name == "MinBackward0");
    CHECK(saved_names(fn(v)) == Names{"dim", "indices", "keepdim", "self_sizes"});
    CHECK(attr(fn(v), "dim") == "18446744073709551615");
    CHECK(fn(v).unpack("indices") == i);  // measured: _saved_indices is r.indices
    CHECK(attr(fn(v), "self_sizes") == "(2, 3)");
  }
  {
    Tensor c = ops::cumsum(x, -1);
    CHECK(fn(c).name == "CumsumBackward0");
    CHECK(attr(fn(c), "dim") == "18446744073709551615");
  }
  CHECK(fn(ops::prod(x, std::nullopt, false)).name == "ProdBackward0");
  CHECK(saved_names(fn(ops::prod(x, std::nullopt, false))) == Names{"result", "self"});
  CHECK(saved_names(fn(ops::prod(x, 1, true))) == Names{"dim", "keepdim", "result", "self"});
  {
    Tensor l = ops::logsumexp(x, {1}, false);
    CHECK(fn(l).name == "LogsumexpBackward0");
    CHECK(attr(fn(l), "dim") == "(1,)");
    CHECK(saved_names(fn(l)) == Names{"dim", "keepdim", "result", "self"});
  }
  CHECK(fn(ops::log1p(x)).name == "Log1PBackward0");
  CHECK(saved_names(fn(ops::expm1(x))) == Names{"result"});
  {
    Tensor s = ops::softplus(x, I(1), I(20));
    CHECK(saved_names(fn(s)) == Names{"beta", "self", "threshold"});
    CHECK(attr(fn(s), "beta") == "1");
    CHECK(attr(fn(s), "threshold") == "20");
  }
  {
    Tensor e = ops::elu(x, F(1.0), I(1), I(1));
    CHECK(fn(e).name == "EluBackward0");
    CHECK(saved_names(fn(e)) == Names{"alpha", "input_scale", "scale", "self"});
    CHECK(attr(fn(e), "alpha") == "1.0");
    CHECK(attr(fn(e), "scale") == "1");
  }
  {
    Tensor h = ops::hardtanh(x, I(0), I(6));
    CHECK(fn(h).name == "HardtanhBackward0");
    CHECK(saved_names(fn(h)) == Names{"max_val", "min_val", "self"});
    CHECK(attr(fn(h), "max_val") == "6");
  }
  CHECK(saved_names(fn(ops::threshold(x, F(1.5), F(-3)))) == Names{"self", "threshold"});
  {
    Tensor l = ops::logsigmoid(x);
    CHECK(fn(l).name == "LogSigmoidBackward0");
    CHECK(saved_names(fn(l)) == Names{"buffer", "self"});
    Tensor buffer = fn(l).unpack("buffer");
    CHECK(buffer->sizes == x->sizes);  // measured: the CPU buffer has the input's shape
    CHECK_FALSE(buffer->requires_grad());
  }
  CHECK(ops::arg_extreme(x, 1, false, true)->grad_fn == nullptr);
}

TEST_CASE("more fidelity: errors as PyTorch raises them", "[more]") {
  Tensor half = values({2}, {1, 2}, DType::Float16);
  Tensor longs = values({2}, {1, 2}, DType::Int64);
  // Measured: "log1p_vml_cpu" not implemented for 'Half', "softplus_cpu" ... for 'Long',
  // "Bool inputs not supported for hardtanh", logsumexp(()) of a 2-d tensor.
  CHECK(kind_of([&] { ops::log1p(half); }) == "dtype_mismatch");
  CHECK(kind_of([&] { ops::cumsum(half, 0); }) == "dtype_mismatch");
  CHECK(kind_of([&] { ops::softplus(longs, I(1), I(20)); }) == "dtype_mismatch");
  CHECK(kind_of([&] { ops::elu(longs, F(1), I(1), I(1)); }) == "dtype_mismatch");
  CHECK(kind_of([&] { ops::hardtanh(values({1}, {1}, DType::Bool), F(-1), F(1)); }) == "dtype_mismatch");
  CHECK(kind_of([&] { ops::logsumexp(linspace_leaf({2, 3}), {}, false); }) == "shape_mismatch");
  CHECK(kind_of([&] { ops::min_all(values({0}, {})); }) == "shape_mismatch");
  CHECK(kind_of([&] { ops::min_dim(linspace_leaf({2, 3}), 2, false); }) == "index_out_of_range");
}

TEST_CASE("more on meta: shapes and nodes without data", "[more]") {
  // Measured on meta: argmax(1) (2,), argmax() (), min(1).indices (2,), cumsum(1) (2, 3),
  // prod(1) (2,), logsigmoid's buffer (2, 3).
  Tensor m = meta_leaf({2, 3});
  CHECK(ops::arg_extreme(m, 1, false, true)->sizes == Shape{2});
  CHECK(ops::arg_extreme(m, std::nullopt, false, false)->sizes == Shape{});
  auto [v, i] = ops::min_dim(m, 1, false);
  CHECK(i->sizes == Shape{2});
  CHECK(i->is_meta());
  Tensor c = ops::cumsum(m, 1);
  CHECK(c->sizes == Shape{2, 3});
  CHECK(c->is_meta());
  Tensor l = ops::logsigmoid(m);
  CHECK(fn(l).unpack("buffer")->sizes == Shape{2, 3});
  Tensor loss = ops::sum(ops::add(ops::prod(m, 1, false), ops::logsumexp(m, {1}, false), Value::integer(1)),
                         std::nullopt, false);
  run_backward_of(loss);
  REQUIRE(m->grad != nullptr);
  CHECK(m->grad->is_meta());
  CHECK(m->grad->sizes == Shape{2, 3});
}

TEST_CASE("more: torch.return_types fields and printed form", "[more]") {
  Value r = Value::return_type("min", Value::integer(1), Value::integer(2));
  CHECK(agtrace::type_name(r) == "torch.return_types.min");
  REQUIRE(agtrace::return_type_field(r, "values") != nullptr);
  CHECK(agtrace::return_type_field(r, "indices")->i == 2);
  CHECK(agtrace::return_type_field(r, "other") == nullptr);
  CHECK(agtrace::return_type_field(Value::tuple({Value::integer(1), Value::integer(2)}), "values") == nullptr);
  // Measured: print(x.min(1)) writes each field on its own line.
  CHECK(agtrace::print_form(r) == "torch.return_types.min(\nvalues=1,\nindices=2)");
}

// ================================================================ copies and losses

TEST_CASE("more gradcheck: tril triu flip roll", "[more][gradcheck]") {
  for (int64_t k : {-1, 0, 2}) {
    check_gradients("tril " + std::to_string(k), {leaf64({2, 3, 4}, -2, 2)},
                    [k](const Inputs& in) { return ops::tril(in[0], k, true); });
    check_gradients("triu " + std::to_string(k), {leaf64({3, 4}, -2, 2)},
                    [k](const Inputs& in) { return ops::tril(in[0], k, false); });
  }
  check_gradients("flip (0, -1)", {leaf64({2, 3, 4}, -2, 2)}, [](const Inputs& in) { return ops::flip(in[0], {0, -1}); });
  check_gradients("roll 1 dim -1", {leaf64({3, 4}, -2, 2)}, [](const Inputs& in) { return ops::roll(in[0], {1}, {-1}); });
  check_gradients("roll (1, -2) dims (0, 2)", {leaf64({2, 3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::roll(in[0], {1, -2}, {0, 2}); });
  check_gradients("roll 5 flattened", {leaf64({3, 4}, -2, 2)}, [](const Inputs& in) { return ops::roll(in[0], {5}, {}); });
}

TEST_CASE("more gradcheck: l1 smooth_l1 binary_cross_entropy (with logits), both inputs", "[more][gradcheck]") {
  // |x - t| away from 0 and from beta, probabilities inside (0, 1).
  const std::vector<double> xv{-1.3, -0.4, 0.2, 0.9, -2.1, 1.7}, tv{0.5, 0.4, -0.9, 0.1, -1.0, 2.5};
  auto x = [&] { return values({2, 3}, xv, DType::Float64, true); };
  auto t = [&] { return values({2, 3}, tv, DType::Float64, true); };
  for (int64_t reduction : {0, 1, 2}) {
    const std::string r = std::to_string(reduction);
    check_gradients("l1_loss " + r, {x(), t()}, [=](const Inputs& in) { return ops::l1_loss(in[0], in[1], reduction); });
    check_gradients("smooth_l1_loss beta 0.5 " + r, {x(), t()},
                    [=](const Inputs& in) { return ops::smooth_l1_loss(in[0], in[1], reduction, 0.5); });
    check_gradients("bce with logits " + r, {x(), leaf64({2, 3}, 0.1, 0.9)},
                    [=](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1], reduction); });
    check_gradients("bce " + r, {leaf64({2, 3}, 0.1, 0.9), leaf64({2, 3}, 0.05, 0.95, true, 0.71)},
                    [=](const Inputs& in) { return ops::binary_cross_entropy(in[0], in[1], reduction); });
  }
}

TEST_CASE("more fidelity: copies, losses and one_hot", "[more]") {
  Tensor x = linspace_leaf({2, 3});
  CHECK(fn(ops::tril(x, -1, true)).name == "TrilBackward0");
  CHECK(attr(fn(ops::tril(x, -1, true)), "diagonal") == "18446744073709551615");
  CHECK(fn(ops::tril(x, 1, false)).name == "TriuBackward0");
  CHECK(attr(fn(ops::flip(x, {-1})), "dims") == "(18446744073709551615,)");
  {
    Tensor r = ops::roll(x, {1, -1}, {0, 1});
    CHECK(saved_names(fn(r)) == Names{"dims", "shifts"});
    CHECK(attr(fn(r), "shifts") == "(1, 18446744073709551615)");
    CHECK(attr(fn(ops::roll(x, {1}, {})), "dims") == "()");
  }
  // Measured: [[1, -3, 3], [2, 0.5, -4]] rolled by 1 along dim 1 is [[3, 1, -3], [-4, 2, 0.5]];
  // tril(-1) keeps [[0, 0, 0], [2, 0, 0]].
  Tensor v = values({2, 3}, {1, -3, 3, 2, 0.5, -4});
  CHECK(agtrace::to_values(ops::roll(v, {1}, {1})) == std::vector<double>{3, 1, -3, -4, 2, 0.5});
  CHECK(agtrace::to_values(ops::tril(v, -1, true)) == std::vector<double>{0, 0, 0, 2, 0, 0});
  CHECK(agtrace::to_values(ops::flip(v, {0, 1})) == std::vector<double>{-4, 0.5, 2, 3, -3, 1});
  CHECK(kind_of([&] { ops::tril(values({2}, {1, 2}), 0, true); }) == "index_out_of_range");
  CHECK(kind_of([&] { ops::flip(v, {0, 0}); }) == "type_error");
  CHECK(kind_of([&] { ops::roll(v, {1}, {0, 1}); }) == "type_error");

  Tensor t = values({2, 3}, {0.5, -1, 2, 1, 0, -2});
  {
    Tensor s = ops::smooth_l1_loss(x, t, 1, 1.0);
    CHECK(fn(s).name == "SmoothL1LossBackward0");
    CHECK(saved_names(fn(s)) == Names{"beta", "reduction", "self", "target"});
    CHECK(attr(fn(s), "beta") == "1.0");
    CHECK(next_names(fn(s)) == Names{"AccumulateGrad", "None"});
    CHECK(fn(s).unpack("target") == t);
  }
  {
    Tensor b = ops::binary_cross_entropy(ops::sigmoid(x), values({2, 3}, {0, 1, 1, 1, 0, 0.5}), 1);
    CHECK(saved_names(fn(b)) == Names{"reduction", "self", "target", "weight"});
    CHECK_FALSE(defined(fn(b), "weight"));
    // Measured: bce(0, 1) is 100 (each log clamped at -100).
    CHECK(agtrace::item(ops::binary_cross_entropy(values({1}, {0}), values({1}, {1}), 1)) == 100);
  }
  {
    Tensor b = ops::binary_cross_entropy_with_logits(x, t, 2);
    CHECK(fn(b).name == "BinaryCrossEntropyWithLogitsBackward0");
    CHECK(saved_names(fn(b)) == Names{"pos_weight", "reduction", "self", "target", "weight"});
    CHECK(attr(fn(b), "reduction") == "2");
  }
  {
    Tensor l = ops::l1_loss(x, t, 1);
    CHECK(fn(l).name == "MeanBackward0");
    CHECK(next_names(fn(l)) == Names{"AbsBackward0"});
    CHECK(fn(ops::l1_loss(x, t, 0)).name == "AbsBackward0");
  }
  // Measured: F.one_hot([0, 2, 1]) is int64 [[1, 0, 0], [0, 0, 1], [0, 1, 0]]; errors for a
  // class >= num_classes, a negative class and a float tensor.
  Tensor k = values({3}, {0, 2, 1}, DType::Int64);
  Tensor h = ops::one_hot(k, -1);
  CHECK(h->sizes == Shape{3, 3});
  CHECK(h->dtype() == DType::Int64);
  CHECK(agtrace::to_values(h) == std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0});
  CHECK(ops::one_hot(k, 5)->sizes == Shape{3, 5});
  CHECK(kind_of([&] { ops::one_hot(k, 2); }) == "index_out_of_range");
  CHECK(kind_of([&] { ops::one_hot(values({1}, {-1}, DType::Int64), -1); }) == "index_out_of_range");
  CHECK(kind_of([&] { ops::one_hot(values({1}, {1}), -1); }) == "type_error");
}

TEST_CASE("more on meta: copies and losses", "[more]") {
  Tensor m = meta_leaf({4, 5});
  Tensor loss = ops::add(ops::sum(ops::add(ops::tril(m, 0, true), ops::roll(ops::flip(m, {0}), {1}, {1}), Value::integer(1)),
                                  std::nullopt, false),
                         ops::smooth_l1_loss(m, meta_leaf({4, 5}), 1, 1.0), Value::integer(1));
  CHECK(loss->is_meta());
  run_backward_of(loss);
  REQUIRE(m->grad != nullptr);
  CHECK(m->grad->is_meta());
  CHECK(m->grad->sizes == Shape{4, 5});
}

// ================================================================ std, repeat, gather, masked_select, pad, outer, kl_div

TEST_CASE("more gradcheck: std repeat gather masked_select pad outer kl_div", "[more][gradcheck]") {
  check_gradients("std()", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::std_dev(in[0], std::nullopt, 1, false); });
  check_gradients("std(1, correction 0, keepdim)", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::std_dev(in[0], std::vector<int64_t>{1}, 0, true); });
  check_gradients("std((0, 2))", {leaf64({2, 3, 2}, -2, 2)},
                  [](const Inputs& in) { return ops::std_dev(in[0], std::vector<int64_t>{0, 2}, 1, false); });
  check_gradients("repeat (2, 1, 3)", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::repeat(in[0], {2, 1, 3}); });
  Tensor idx = values({2, 3}, {0, 2, 2, 1, 0, 1}, DType::Int64);
  check_gradients("gather dim 1 with repeats", {leaf64({2, 4}, -2, 2)},
                  [idx](const Inputs& in) { return ops::gather(in[0], 1, idx); });
  Tensor mask = values({3}, {1, 0, 1}, DType::Bool);
  check_gradients("masked_select, broadcast mask", {leaf64({2, 3}, -2, 2)},
                  [mask](const Inputs& in) { return ops::masked_select(in[0], mask); });
  check_gradients("pad (1, 2, -1, 1)", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::constant_pad(in[0], {1, 2, -1, 1}, 0.5); });
  check_gradients("outer", {leaf64({3}, -2, 2), leaf64({4}, -1, 1, true, 0.71)},
                  [](const Inputs& in) { return ops::outer(in[0], in[1]); });
  Tensor target = values({2, 3}, {0.1, 0.3, 0.6, 0.0, 0.5, 0.5}, DType::Float64);
  for (const char* r : {"batchmean", "mean", "sum", "none"})
    check_gradients(std::string("kl_div ") + r, {leaf64({2, 3}, -2, 0)},
                    [target, r](const Inputs& in) { return ops::kl_div(in[0], target, r); });
}

TEST_CASE("more fidelity: std repeat gather masked_select pad kl_div", "[more]") {
  Tensor x = linspace_leaf({2, 3});
  {
    Tensor s = ops::std_dev(x, std::nullopt, 1, false);
    CHECK(fn(s).name == "StdBackward0");
    CHECK(saved_names(fn(s)) == Names{"correction", "dim", "keepdim", "result", "self"});
    CHECK(attr(fn(s), "dim") == "None");
    CHECK(attr(fn(ops::std_dev(x, std::vector<int64_t>{1}, 0, true)), "dim") == "(1,)");
  }
  {
    Tensor r = ops::repeat(x, {2, 1});
    CHECK(r->sizes == Shape{4, 3});
    CHECK(saved_names(fn(r)) == Names{"repeats", "self_sym_sizes"});
    CHECK(kind_of([&] { ops::repeat(x, {2}); }) == "type_error");
  }
  {
    // Measured: x = [[1, -3, 3], [2, 0.5, -4]], x.gather(1, [[0, 2], [1, 1]]) = [[1, 3], [0.5, 0.5]].
    Tensor v = values({2, 3}, {1, -3, 3, 2, 0.5, -4}, DType::Float32, true);
    Tensor idx = values({2, 2}, {0, 2, 1, 1}, DType::Int64);
    Tensor g = ops::gather(v, 1, idx);
    CHECK(agtrace::to_values(g) == std::vector<double>{1, 3, 0.5, 0.5});
    CHECK(saved_names(fn(g)) == Names{"dim", "index", "self", "sparse_grad"});
    CHECK(fn(g).unpack("index") == idx);
    CHECK(kind_of([&] { ops::gather(v, 1, values({2, 1}, {0, 3}, DType::Int64)); }) == "index_out_of_range");
    Tensor ms = ops::masked_select(v, values({2, 3}, {1, 0, 1, 0, 1, 1}, DType::Bool));
    CHECK(agtrace::to_values(ms) == std::vector<double>{1, 3, 0.5, -4});
    CHECK(saved_names(fn(ms)) == Names{"mask", "self"});
  }
  {
    Tensor p = ops::constant_pad(x, {-1, 1}, 0);
    CHECK(fn(p).name == "ConstantPadNdBackward0");
    CHECK(attr(fn(p), "pad") == "(18446744073709551615, 1)");
    CHECK(ops::constant_pad(x, {1, 1, 0, 1}, 2)->sizes == Shape{3, 5});
    CHECK(kind_of([&] { ops::constant_pad(x, {1}, 0); }) == "type_error");
  }
  {
    // Measured: batchmean is DivBackward0 over SumBackward0 over SubBackward0 with edges
    // (None, MulBackward0): xlogy(target, target) has no node.
    Tensor t = values({2, 3}, {0.1, 0.3, 0.6, 0.0, 0.5, 0.5});
    Tensor k = ops::kl_div(x, t, "batchmean");
    CHECK(fn(k).name == "DivBackward0");
    CHECK(next_names(fn(k)) == Names{"SumBackward0", "None"});
    Tensor terms = ops::kl_div(x, t, "none");
    CHECK(fn(terms).name == "SubBackward0");
    CHECK(next_names(fn(terms)) == Names{"None", "MulBackward0"});
  }
  Tensor m = meta_leaf({3, 4});
  CHECK(ops::repeat(m, {2, 2})->sizes == Shape{6, 8});
  CHECK(ops::constant_pad(m, {1, 1}, 0)->sizes == Shape{3, 6});
  CHECK(ops::std_dev(m, std::vector<int64_t>{1}, 1, false)->sizes == Shape{3});
}

// ================================================================ in-place edits

TEST_CASE("more gradcheck: masked_fill_, clamp_, clamp_min, clamp_min_ on non-leaves", "[more][gradcheck]") {
  Tensor mask = values({2, 3}, {1, 0, 1, 0, 1, 1}, DType::Bool);
  // Values away from the bounds.
  const std::vector<double> v{-1.3, -0.4, 0.2, 0.9, -2.1, 1.7};
  auto x = [&] { return values({2, 3}, v, DType::Float64, true); };
  check_gradients("masked_fill_ number", {x()}, [mask](const Inputs& in) {
    Tensor h = ops::mul(in[0], in[0]);
    ops::masked_fill_(h, mask, Value::real(0.5));
    return h;
  });
  check_gradients("masked_fill_ 0-d tensor", {x(), values({}, {1.5}, DType::Float64, true)}, [mask](const Inputs& in) {
    Tensor h = ops::mul(in[0], in[0]);
    ops::masked_fill_(h, mask, Value::tensor(in[1]));
    return h;
  });
  check_gradients("clamp_(-1, 1)", {x()}, [](const Inputs& in) {
    Tensor h = ops::mul(in[0], ops::wrap_number(Value::real(1.5)));
    ops::clamp_(h, F(-1), F(1));
    return h;
  });
  check_gradients("clamp_min", {x()}, [](const Inputs& in) { return ops::clamp_min(in[0], F(0.1)); });
  check_gradients("clamp_min_", {x()}, [](const Inputs& in) {
    Tensor h = ops::mul(in[0], in[0]);
    ops::clamp_min_(h, F(0.5));
    return h;
  });
}

TEST_CASE("more fidelity: in-place edits bump once and save a copy of the original self", "[more]") {
  Tensor x = linspace_leaf({2, 3});
  Tensor h = ops::mul(x, x);
  const auto old_fn = h->grad_fn;
  const int64_t version = h->version->version;
  ops::clamp_(h, I(-1), I(1));
  CHECK(h->version->version == version + 1);
  CHECK(fn(h).name == "ClampBackward1");
  CHECK(fn(h).next[0].fn == old_fn);
  Tensor saved = fn(h).unpack("self");
  CHECK(saved != h);
  CHECK(saved->storage != h->storage);  // measured: not on h's storage
  CHECK(attr(fn(h), "min") == "-1");
  Tensor mask = values({2, 3}, {1, 0, 1, 0, 1, 1}, DType::Bool);
  ops::masked_fill_(h, mask, F(0.5));
  CHECK(fn(h).name == "MaskedFillBackward0");
  CHECK(fn(h).unpack("mask") == mask);
  CHECK(kind_of([&] { ops::masked_fill_(x, mask, F(0)); }) == "leaf_inplace");
  CHECK(kind_of([&] { ops::clamp_(values({2}, {1, 2}, DType::Int64), F(0.5), Value::none()); }) == "dtype_mismatch");
  CHECK(fn(ops::clamp_min(x, F(0))).name == "ClampMinBackward0");
}

TEST_CASE("more: F.normalize decomposes as 1.13 records it", "[more][gradcheck]") {
  check_gradients("normalize p 2 dim 1", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::normalize(in[0], F(2.0), 1, F(1e-12)); });
  check_gradients("normalize p 1 dim 0", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::normalize(in[0], F(1.0), 0, F(1e-3)); });
  Tensor y = ops::normalize(linspace_leaf({2, 3}), F(2.0), 1, F(1e-12));
  CHECK(fn(y).name == "DivBackward0");
  CHECK(next_names(fn(y)) == Names{"AccumulateGrad", "ExpandBackward0"});
  Node& clamp = *fn(y).next[1].fn->next[0].fn;
  CHECK(clamp.name == "ClampMinBackward0");
  CHECK(attr(clamp, "min") == "1e-12");
  CHECK(clamp.next[0].fn->name == "NormBackward1");
}
