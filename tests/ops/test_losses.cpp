// Losses (lib/ops/losses.cpp): central-difference gradient checks in float64 (loss =
// sum(op(x) * w), h = 1e-6) and fidelity with PyTorch 1.13 (node names, next_functions,
// saved attributes and their definedness per requires_grad combination, identity,
// total_weight, bytes, errors), every fact measured with /usr/bin/python3 and torch first.
#include <catch2/catch.hpp>

#include "support/node_checks.hpp"

#include "support/gradcheck.hpp"

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/ops.hpp"
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


constexpr int64_t kNone = 0, kMean = 1, kSum = 2;



Tensor values(const Shape& shape, const std::vector<double>& v, DType d = DType::Float32, bool requires_grad = false) {
  Tensor t = agtrace::tensor_from_values(shape, d, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true) {
  return linspace_leaf(shape, lo, hi, requires_grad);
}

Tensor targets(const std::vector<double>& t) { return values({static_cast<int64_t>(t.size())}, t, DType::Int64); }



void backward_of(const Tensor& root) {
  autograd::BackwardRequest req;
  req.roots = {root};
  autograd::run_backward(req);
}







std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.kind + ": " + e.what();
  }
  return "";
}

constexpr const char* kAcc = "AccumulateGrad";

}  // namespace

// ================================================================ gradient checks

TEST_CASE("losses gradcheck: mse_loss", "[activations][losses][gradcheck]") {
  for (int64_t red : {kNone, kMean, kSum}) {
    check_gradients("mse_loss reduction " + std::to_string(red), {leaf64({2, 3}, -2, 2), leaf64({2, 3}, -1, 1, true, 0.7)},
              [red](const Inputs& in) { return ops::mse_loss(in[0], in[1], red); });
  }
  check_gradients("mse_loss, only the target requires grad", {leaf64({4}, -2, 2, false), leaf64({4}, -1, 1, true, 0.7)},
            [](const Inputs& in) { return ops::mse_loss(in[0], in[1], kMean); });
}

TEST_CASE("losses gradcheck: nll_loss", "[activations][losses][gradcheck]") {
  Tensor t = targets({0, 3, 1});
  Tensor w = values({4}, {1.0, 2.0, 0.5, 4.0}, DType::Float64);
  for (int64_t red : {kNone, kMean, kSum}) {
    check_gradients("nll_loss reduction " + std::to_string(red), {leaf64({3, 4}, -2, 2)},
              [&, red](const Inputs& in) { return ops::nll_loss(in[0], t, nullptr, red, -100); });
    check_gradients("nll_loss with weight, reduction " + std::to_string(red), {leaf64({3, 4}, -2, 2)},
              [&, red](const Inputs& in) { return ops::nll_loss(in[0], t, w, red, -100); });
    check_gradients("nll_loss ignore_index 3, reduction " + std::to_string(red), {leaf64({3, 4}, -2, 2)},
              [&, red](const Inputs& in) { return ops::nll_loss(in[0], t, nullptr, red, 3); });
  }
  Tensor t0 = values({}, {2}, DType::Int64);
  check_gradients("nll_loss on a (C) input with a 0-d target", {leaf64({4}, -2, 2)},
            [&](const Inputs& in) { return ops::nll_loss(in[0], t0, nullptr, kMean, -100); });
}

TEST_CASE("losses gradcheck: cross_entropy", "[activations][losses][gradcheck]") {
  Tensor t = targets({0, 3, 1});
  Tensor w = values({4}, {1.0, 2.0, 0.5, 4.0}, DType::Float64);
  for (int64_t red : {kNone, kMean, kSum})
    check_gradients("cross_entropy reduction " + std::to_string(red), {leaf64({3, 4}, -2, 2)},
              [&, red](const Inputs& in) { return ops::cross_entropy(in[0], t, nullptr, red, -100); });
  check_gradients("cross_entropy with weight and ignore_index", {leaf64({3, 4}, -2, 2)},
            [&](const Inputs& in) { return ops::cross_entropy(in[0], t, w, kMean, 1); });
  Tensor t0 = values({}, {2}, DType::Int64);
  check_gradients("cross_entropy on a (C) input", {leaf64({4}, -2, 2)},
            [&](const Inputs& in) { return ops::cross_entropy(in[0], t0, nullptr, kMean, -100); });
}

// ================================================================ values PyTorch computes

TEST_CASE("losses values match torch 1.13", "[activations][losses]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.3, -0.7), z = A({3, 4});
  Tensor t = targets({0, 3, 1});
  // torch: mse 1.09, sum 6.54; nll 0.030303; nll none [1.0, -0.272727, -0.636364];
  // cross_entropy 1.4371625; nll with weight [1, 2, 3, 4]: -0.19480518.
  CHECK(agtrace::item(ops::mse_loss(x, y, kMean)) == Approx(1.090000033378601));
  CHECK(agtrace::item(ops::mse_loss(x, y, kSum)) == Approx(6.5400004386901855));
  CHECK(agtrace::item(ops::nll_loss(z, t, nullptr, kMean, -100)) == Approx(0.030303040519356728));
  const std::vector<double> none = agtrace::to_values(ops::nll_loss(z, t, nullptr, kNone, -100));
  REQUIRE(none.size() == 3);
  CHECK(none[0] == Approx(1.0));
  CHECK(none[1] == Approx(-0.27272725105285645));
  CHECK(none[2] == Approx(-0.6363636255264282));
  CHECK(agtrace::item(ops::cross_entropy(z, t, nullptr, kMean, -100)) == Approx(1.4371625185012817));
  CHECK(agtrace::item(ops::nll_loss(z, t, values({4}, {1, 2, 3, 4}), kMean, -100)) == Approx(-0.19480517506599426));
  SECTION("every target ignored: the mean is NaN and the gradient zero") {
    Tensor zz = values({2, 3}, {0, 0, 0, 0, 0, 0}, DType::Float32, true);
    Tensor l = ops::nll_loss(zz, targets({1, 1}), nullptr, kMean, 1);
    CHECK(std::isnan(agtrace::item(l)));
    CHECK(agtrace::item(fn(l).unpack("total_weight")) == 0.0);
    backward_of(l);
    CHECK(agtrace::to_values(zz->grad) == std::vector<double>(6, 0.0));
  }
}

// ================================================================ fidelity

TEST_CASE("losses fidelity: mse_loss", "[activations][losses][fidelity]") {
  Tensor x = A({2, 3}), y = A({2, 3}, 0.3, -0.7);
  SECTION("{x, y}: both edges, saves reduction, self and target (same objects)") {
    Tensor l = ops::mse_loss(x, y, kMean);
    Node& n = fn(l);
    CHECK(n.name == "MseLossBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc});
    CHECK(saved_names(n) == Names{"reduction", "self", "target"});
    CHECK(attr(n, "reduction") == "1");
    CHECK(n.unpack("self") == x);
    CHECK(n.unpack("target") == y);
    CHECK(n.saved_bytes() == 48);
    CHECK(l->dim() == 0);
  }
  SECTION("{x} or {y} alone: the same saved set, a None edge") {
    Tensor yc = A({2, 3}, 0.3, -0.7, false), xc = A({2, 3}, -1, 1, false);
    Tensor l1 = ops::mse_loss(x, yc, kMean), l2 = ops::mse_loss(xc, y, kMean);
    CHECK(next_names(fn(l1)) == Names{kAcc, "None"});
    CHECK(next_names(fn(l2)) == Names{"None", kAcc});
    CHECK(defined(fn(l1), "target"));
    CHECK(defined(fn(l2), "self"));
    CHECK(fn(l1).saved_bytes() == 48);
  }
  SECTION("reduction enum, 'none' keeps the shape") {
    CHECK(ops::reduction_enum(Value::str("none")) == 0);
    CHECK(ops::reduction_enum(Value::none()) == 1);
    CHECK(ops::reduction_enum(Value::str("sum")) == 2);
    CHECK(error_message([] { ops::reduction_enum(Value::str("bad")); }) ==
          "type_error: bad is not a valid value for reduction");
    Tensor l = ops::mse_loss(x, y, kNone);
    CHECK(l->sizes == Shape({2, 3}));
    CHECK(attr(fn(l), "reduction") == "0");
  }
  SECTION("mixed dtypes: the forward promotes, the backward raises as in torch") {
    Tensor d = values({2, 3}, {1, 2, 3, 4, 5, 6}, DType::Float64, false);
    Tensor l = ops::mse_loss(x, d, kMean);
    CHECK(l->dtype() == DType::Float64);
    CHECK(error_message([&] { backward_of(l); }) == "dtype_mismatch: Found dtype Double but expected Float");
  }
  SECTION("errors: shapes, integer inputs, broadcasting") {
    // PyTorch names the trailing-most mismatching dim (measured in 1.13).
    CHECK(error_message([&] { ops::mse_loss(x, A({3, 2}), kMean); }) ==
          "shape_mismatch: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1");
    CHECK(error_message([&] { ops::mse_loss(x, A({3}), kMean); }).rfind("unsupported", 0) == 0);
    Tensor xi = values({2}, {1, 2}, DType::Int64);
    CHECK(error_message([&] { ops::mse_loss(xi, xi, kMean); }) == "dtype_mismatch: \"mse_cpu\" not implemented for 'Long'");
  }
}

TEST_CASE("losses fidelity: nll_loss", "[activations][losses][fidelity]") {
  Tensor z = A({3, 4});
  Tensor t = targets({0, 3, 1});
  SECTION("saved values: ignore_index as uint64, total_weight a new f32[] of 3.0, weight None") {
    Tensor l = ops::nll_loss(z, t, nullptr, kMean, -100);
    Node& n = fn(l);
    CHECK(n.name == "NllLossBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == Names{"ignore_index", "reduction", "self", "target", "total_weight", "weight"});
    CHECK(attr(n, "ignore_index") == "18446744073709551516");
    CHECK(attr(n, "reduction") == "1");
    CHECK(n.unpack("self") == z);
    CHECK(n.unpack("target") == t);
    Tensor tw = n.unpack("total_weight");
    CHECK(tw->dim() == 0);
    CHECK(tw->dtype() == DType::Float32);
    CHECK(agtrace::item(tw) == 3.0);
    CHECK(tw->storage != z->storage);
    CHECK_FALSE(defined(n, "weight"));
    CHECK(n.saved_bytes() == 76);
  }
  SECTION("total_weight: 3 for 'sum', 0 for 'none', 2 with one target ignored, 7 with weights") {
    Tensor l_sum = ops::nll_loss(z, t, nullptr, kSum, -100), l_none = ops::nll_loss(z, t, nullptr, kNone, -100);
    Tensor l_ign = ops::nll_loss(z, t, nullptr, kMean, 3);
    Tensor w = values({4}, {1, 2, 3, 4});
    Tensor l_w = ops::nll_loss(z, t, w, kMean, -100);
    CHECK(agtrace::item(fn(l_sum).unpack("total_weight")) == 3.0);
    CHECK(agtrace::item(fn(l_none).unpack("total_weight")) == 0.0);
    CHECK(agtrace::item(fn(l_ign).unpack("total_weight")) == 2.0);
    CHECK(attr(fn(l_ign), "ignore_index") == "3");
    CHECK(agtrace::item(fn(l_w).unpack("total_weight")) == 7.0);
    CHECK(fn(l_w).unpack("weight") == w);
    CHECK(l_none->sizes == Shape{3});
    CHECK(agtrace::to_values(ops::nll_loss(z, t, nullptr, kNone, 3))[1] == 0.0);
  }
  SECTION("a (C) input with a 0-d target: 0-d loss, total_weight 1 even for 'none'") {
    Tensor zr = A({4});
    Tensor l = ops::nll_loss(zr, values({}, {2}, DType::Int64), nullptr, kNone, -100);
    CHECK(l->dim() == 0);
    CHECK(agtrace::item(l) == Approx(-agtrace::to_values(zr)[2]));
    CHECK(agtrace::item(fn(l).unpack("total_weight")) == 1.0);
  }
  SECTION("errors, worded as torch") {
    CHECK(error_message([&] { ops::nll_loss(z, targets({0, 4, 1}), nullptr, kMean, -100); }) ==
          "index_out_of_range: Target 4 is out of bounds.");
    CHECK(error_message([&] { ops::nll_loss(z, targets({0, -1, 1}), nullptr, kMean, -100); }) ==
          "index_out_of_range: Target -1 is out of bounds.");
    CHECK(error_message([&] { ops::nll_loss(z, targets({0, 3}), nullptr, kMean, -100); }) ==
          "shape_mismatch: Expected input batch_size (3) to match target batch_size (2).");
    CHECK(error_message([&] { ops::nll_loss(z, values({3}, {0, 3, 1}), nullptr, kMean, -100); }) ==
          "dtype_mismatch: expected scalar type Long but found Float");
    CHECK(error_message([&] { ops::nll_loss(A({4}), targets({2}), nullptr, kMean, -100); }) ==
          "shape_mismatch: size mismatch (got input: [4], target: [1])");
    CHECK(error_message([&] { ops::nll_loss(z, targets({0, 1, 2}), values({3}, {1, 1, 1}), kMean, -100); }) ==
          "shape_mismatch: weight tensor should be defined either for all 4 classes or no classes but got weight "
          "tensor of shape: [3]");
    CHECK(error_message([&] { ops::nll_loss(z, targets({0, 1, 2}), A({4}), kMean, -100); }) ==
          "type_error: The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
          "This input cannot have requires_grad True.");
    CHECK(error_message([&] {
            ops::nll_loss(z, targets({0, 1, 2}), values({4}, {1, 1, 1, 1}, DType::Float64), kMean, -100);
          }) == "dtype_mismatch: expected scalar type Float but found Double");
    CHECK(error_message([&] { ops::nll_loss(values({}, {1}), values({}, {0}, DType::Int64), nullptr, kMean, -100); }) ==
          "type_error: Expected 1 or more dimensions (got 0)");
    CHECK(error_message([&] { ops::nll_loss(values({2, 2}, {1, 2, 3, 4}, DType::Int64), targets({0, 1}), nullptr, kMean, -100); }) ==
          "dtype_mismatch: \"nll_loss_out_frame\" not implemented for 'Long'");
  }
}

TEST_CASE("losses fidelity: cross_entropy is NllLossBackward0 over LogSoftmaxBackward0", "[activations][losses][fidelity]") {
  Tensor z = A({3, 4});
  Tensor t = targets({0, 3, 1});
  Tensor l = ops::cross_entropy(z, t, nullptr, kMean, -100);
  Node& n = fn(l);
  CHECK(n.name == "NllLossBackward0");
  CHECK(next_names(n) == Names{"LogSoftmaxBackward0"});
  Node& ls = *n.next[0].fn;
  CHECK(next_names(ls) == Names{kAcc});
  CHECK(saved_names(ls) == Names{"dim", "result"});
  CHECK(attr(ls, "dim") == "1");
  // The log_softmax output is saved twice: as LogSoftmax's result and as NllLoss's self.
  Tensor self = n.unpack("self");
  CHECK(self->grad_fn.get() == &ls);
  CHECK(self->storage == ls.unpack("result")->storage);
  CHECK(n.unpack("target") == t);
  CHECK(n.saved_bytes() + ls.saved_bytes() == 124);
  std::set<const agtrace::Storage*> storages;
  int64_t distinct = 0;
  for (Node* node : {&n, &ls})
    for (const auto& e : node->saved)
      if (e.is_tensor && e.var.defined && storages.insert(e.var.held_storage().get()).second)
        distinct += e.var.held_storage()->nbytes();
  CHECK(distinct == 76);
  SECTION("a (C) input: log_softmax over dim 0") {
    Tensor row = ops::select(z, 0, 0);  // z[0], as measured: F.cross_entropy(z[0], torch.tensor(2))
    Tensor l1 = ops::cross_entropy(row, values({}, {2}, DType::Int64), nullptr, kMean, -100);
    CHECK(attr(*fn(l1).next[0].fn, "dim") == "0");
    CHECK(agtrace::item(l1) == Approx(1.3159503936767578));
  }
  SECTION("with weights") {
    Tensor w = values({4}, {1, 2, 3, 4});
    Tensor lw = ops::cross_entropy(z, t, w, kMean, -100);
    CHECK(agtrace::item(lw) == Approx(1.3159503936767578));
    CHECK(agtrace::item(fn(lw).unpack("total_weight")) == 7.0);
  }
  SECTION("errors") {
    CHECK(error_message([&] { ops::cross_entropy(z, targets({0, 4, 1}), nullptr, kMean, -100); }) ==
          "index_out_of_range: Target 4 is out of bounds.");
    CHECK(error_message([&] { ops::cross_entropy(values({2, 2}, {1, 2, 3, 4}, DType::Int64), targets({0, 1}), nullptr, kMean, -100); }) ==
          "dtype_mismatch: \"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'");
    CHECK(error_message([&] { ops::cross_entropy(z, A({3, 4}, 0, 1, false), nullptr, kMean, -100); }).rfind("unsupported", 0) == 0);
  }
}
