// Neural-network layers (lib/ops/nn.cpp): gradient checks by central differences in
// float64, and fidelity to PyTorch 1.13 — node names, next_functions, saved attribute
// names (dir() order) and which are defined per requires_grad combination, identity of
// unpacked saved tensors, attribute values, forward values, errors. Every fact and
// reference value below was measured with /usr/bin/python3 and torch 1.13; inputs follow
// SUMMARY's A(...) = torch.linspace(lo, hi, numel).reshape(...).
#include <catch2/catch.hpp>

#include "support/node_checks.hpp"

#include "support/bf16_kernels.hpp"
#include "support/gradcheck.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/run_helpers.hpp"
#include "interp/value.hpp"
#include "ops/model_ops.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "scenario/random.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::SplitMix64;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::AttrValue;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

using namespace agtrace::test;

namespace {

using Vals = std::vector<double>;
constexpr const char* kAcc = "AccumulateGrad";

// ---------------------------------------------------------------- gradient check


// A float64 leaf with distinct, irregular values in [lo, hi] (no ties for max_pool2d).

// Fixed, non-trivial loss weights: magnitudes in [0.5, 1.5), alternating sign.


// loss = sum(op(inputs) * w); every input that requires grad gets .grad from the engine,
// compared with (loss(x + h) - loss(x - h)) / 2h per element, h = 1e-6.

// ---------------------------------------------------------------- fidelity helpers

// torch.linspace(lo, hi, numel).reshape(shape), float32 unless told otherwise.
Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true,
         DType dtype = DType::Float32) {
  return agtrace::test::linspace_leaf(shape, lo, hi, requires_grad, dtype);
}

Tensor idx(const Shape& shape, const Vals& v) { return agtrace::tensor_from_values(shape, DType::Int64, v); }






void check_values(const Tensor& t, const Vals& expected, double eps = 1e-5) {
  const Vals got = agtrace::to_values(t);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(eps).margin(1e-6));
  }
}

// Kind and message of the ScenarioError f throws ("none" when it does not throw).
std::pair<std::string, std::string> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return {e.kind, e.what()};
  }
  return {"none", ""};
}

void backward_of_sum(const Tensor& y) {
  autograd::BackwardRequest req;
  req.roots = {ops::sum(y, std::nullopt, false)};
  autograd::run_backward(req);
}

std::string scenario(const std::string& tensors, const std::string& program) {
  return R"JSON({"name": "t", "tensors": {)JSON" + tensors + R"JSON(}, "program": )JSON" + program + "}";
}

ops::Conv2dArgs conv_args(std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
                          std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1) {
  ops::Conv2dArgs a;
  a.stride = std::move(stride);
  a.padding = std::move(padding);
  a.dilation = std::move(dilation);
  a.groups = groups;
  return a;
}

}  // namespace

// ================================================================ gradient checks

TEST_CASE("gradcheck: layer_norm", "[nn][gradcheck]") {
  check_gradients("affine, (3,)", {leaf64({2, 3}, -1, 1), leaf64({3}, 0.5, 2, true, 0.1), leaf64({3}, -0.4, 0.6, true, 0.9)},
                  [](const Inputs& in) { return ops::layer_norm(in[0], {3}, in[1], in[2], 1e-5); });
  check_gradients("no affine, (3, 4) over a [2, 3, 4] input", {leaf64({2, 3, 4}, -2, 3)},
                  [](const Inputs& in) { return ops::layer_norm(in[0], {3, 4}, nullptr, nullptr, 1e-5); });
  check_gradients("weight only, large eps", {leaf64({4, 2}, -1, 1), leaf64({2}, 0.5, 2, true, 0.2)},
                  [](const Inputs& in) { return ops::layer_norm(in[0], {2}, in[1], nullptr, 0.1); });
  check_gradients("only weight and bias require grad",
                  {leaf64({3, 4}, -1, 1, false), leaf64({4}, 0.5, 2, true, 0.2), leaf64({4}, -1, 1, true, 0.6)},
                  [](const Inputs& in) { return ops::layer_norm(in[0], {4}, in[1], in[2], 1e-5); });
}

TEST_CASE("gradcheck: batch_norm in training and eval", "[nn][gradcheck]") {
  // Training normalises with the batch statistics; the running buffers change on every
  // call but do not enter the output.
  check_gradients("training, 4-D, affine",
                  {leaf64({2, 3, 2, 2}, -1, 1), leaf64({3}, 0.5, 2, true, 0.2), leaf64({3}, -0.4, 0.6, true, 0.8),
                   leaf64({3}, -0.1, 0.1, false), leaf64({3}, 0.5, 1.5, false)},
                  [](const Inputs& in) { return ops::batch_norm(in[0], in[3], in[4], in[1], in[2], true, 0.1, 1e-5); });
  check_gradients("training, 2-D, no affine, no running stats", {leaf64({4, 3}, -2, 2)},
                  [](const Inputs& in) { return ops::batch_norm(in[0], nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5); });
  check_gradients("eval, 3-D, affine",
                  {leaf64({2, 3, 4}, -1, 1), leaf64({3}, 0.5, 2, true, 0.2), leaf64({3}, -0.4, 0.6, true, 0.8),
                   leaf64({3}, -0.2, 0.2, false), leaf64({3}, 0.5, 1.5, false)},
                  [](const Inputs& in) { return ops::batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.1, 1e-5); });
  check_gradients("training, only the weight requires grad",
                  {leaf64({3, 2, 2}, -1, 1, false), leaf64({2}, 0.5, 2, true, 0.2)},
                  [](const Inputs& in) { return ops::batch_norm(in[0], nullptr, nullptr, in[1], nullptr, true, 0.1, 1e-5); });
}

TEST_CASE("gradcheck: dropout (fixed mask from a fixed seed)", "[nn][gradcheck]") {
  check_gradients("p=0.3", {leaf64({3, 4}, -1, 1)}, [](const Inputs& in) {
    SplitMix64 gen(42);
    return ops::dropout(in[0], 0.3, true, false, gen);
  });
  check_gradients("p=1 (x * 0)", {leaf64({2, 3}, -1, 1)}, [](const Inputs& in) {
    SplitMix64 gen(42);
    return ops::dropout(in[0], 1.0, true, false, gen);
  });
}

TEST_CASE("gradcheck: embedding", "[nn][gradcheck]") {
  const Tensor i = idx({2, 3}, {0, 2, 3, 0, 0, 1});
  check_gradients("repeated indices", {leaf64({4, 3}, -1, 1)},
                  [&](const Inputs& in) { return ops::embedding(i, in[0], std::nullopt, false, false); });
  // padding_idx and scale_grad_by_freq are not the derivative of the forward (the padding
  // row gets no gradient; counts rescale), so they are checked against PyTorch's values.
}

TEST_CASE("gradcheck: conv2d", "[nn][gradcheck]") {
  check_gradients("bias, stride 1", {leaf64({1, 2, 5, 5}, -1, 1), leaf64({3, 2, 3, 3}, -0.5, 0.5, true, 0.2), leaf64({3}, -0.1, 0.2, true, 0.7)},
                  [](const Inputs& in) { return ops::conv2d(in[0], in[1], in[2], conv_args()); });
  check_gradients("no bias, stride 2, padding 1, batch 2", {leaf64({2, 2, 5, 4}, -1, 1), leaf64({3, 2, 3, 2}, -0.5, 0.5, true, 0.2)},
                  [](const Inputs& in) { return ops::conv2d(in[0], in[1], nullptr, conv_args({2, 2}, {1, 1})); });
  check_gradients("dilation (1, 2), padding (1, 0), stride (2, 1)", {leaf64({1, 2, 5, 6}, -1, 1), leaf64({2, 2, 3, 2}, -0.5, 0.5, true, 0.2)},
                  [](const Inputs& in) { return ops::conv2d(in[0], in[1], nullptr, conv_args({2, 1}, {1, 0}, {1, 2})); });
  check_gradients("groups=2", {leaf64({1, 4, 4, 4}, -1, 1), leaf64({4, 2, 2, 2}, -0.5, 0.5, true, 0.2), leaf64({4}, -0.1, 0.2, true, 0.7)},
                  [](const Inputs& in) { return ops::conv2d(in[0], in[1], in[2], conv_args({1, 1}, {0, 0}, {1, 1}, 2)); });
  check_gradients("only the weight requires grad", {leaf64({1, 1, 4, 4}, -1, 1, false), leaf64({2, 1, 2, 2}, -0.5, 0.5, true, 0.2)},
                  [](const Inputs& in) { return ops::conv2d(in[0], in[1], nullptr, conv_args()); });
}

TEST_CASE("gradcheck: max_pool2d", "[nn][gradcheck]") {
  auto pool = [](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d, bool ceil) {
    return [=](const Inputs& in) { return ops::max_pool2d(in[0], k, s, p, d, ceil).output; };
  };
  check_gradients("2x2, stride = kernel", {leaf64({1, 2, 4, 4}, -1, 1)}, pool({2}, {}, {0}, {1}, false));
  check_gradients("3x3 stride 1 (overlapping windows accumulate)", {leaf64({2, 1, 4, 5}, -1, 1)}, pool({3, 3}, {1, 1}, {0, 0}, {1, 1}, false));
  check_gradients("3x3 stride 2 padding 1 ceil_mode", {leaf64({1, 2, 5, 5}, -1, 1)}, pool({3, 3}, {2, 2}, {1, 1}, {1, 1}, true));
  check_gradients("2x2 dilation 2, 3-D input", {leaf64({2, 5, 5}, -1, 1)}, pool({2, 2}, {1, 1}, {0, 0}, {2, 2}, false));
}

// ================================================================ layer_norm

TEST_CASE("nn fidelity: layer_norm node, edges and saved values", "[nn][fidelity]") {
  Tensor x = A({2, 3}), g = A({3}, 0.5, 2.0), b = A({3}, -0.4, 0.6);
  const Names all{"bias", "input", "normalized_shape", "result1", "result2", "weight"};
  SECTION("affine: every input saved by identity; mean and rstd are new [2, 1] tensors (64 B)") {
    Tensor y = ops::layer_norm(x, {3}, g, b, 1e-5);
    Node& n = fn(y);
    CHECK(n.name == "NativeLayerNormBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc, kAcc});
    CHECK(saved_names(n) == all);
    CHECK(n.unpack("input") == x);
    CHECK(n.unpack("weight") == g);
    CHECK(n.unpack("bias") == b);
    CHECK(attr(n, "normalized_shape") == "(3,)");
    Tensor m = n.unpack("result1"), r = n.unpack("result2");
    CHECK(m->sizes == Shape{2, 1});
    CHECK(r->sizes == Shape{2, 1});
    CHECK(m->dtype() == DType::Float32);
    // Non-differentiable outputs are leaves when saved: the same object on every read,
    // requires_grad False, no grad_fn (measured).
    CHECK(n.unpack("result1") == m);
    CHECK_FALSE(m->requires_grad());
    CHECK(m->grad_fn == nullptr);
    CHECK(m->storage != y->storage);
    CHECK(n.saved_bytes() == 64);
    check_values(y, {-1.0123436450958252, 0.09999999403953552, 3.049375057220459, -1.0123437643051147,
                     0.10000008344650269, 3.049375057220459});
    check_values(m, {-0.6, 0.6});
    check_values(r, {3.061718463897705, 3.061718702316284});
  }
  SECTION("no affine: edges (x, None, None), weight and bias None (40 B)") {
    Tensor y = ops::layer_norm(x, {3}, nullptr, nullptr, 1e-5);
    Node& n = fn(y);
    CHECK(next_names(n) == Names{kAcc, "None", "None"});
    CHECK(saved_names(n) == all);
    CHECK_FALSE(defined(n, "weight"));
    CHECK_FALSE(defined(n, "bias"));
    CHECK(defined(n, "input"));
    CHECK(n.saved_bytes() == 40);
  }
  SECTION("only the weight requires grad: edges (None, g, None), the input is still saved") {
    Tensor xc = A({2, 3}, -1, 1, false);
    Tensor y = ops::layer_norm(xc, {3}, g, nullptr, 1e-5);
    Node& n = fn(y);
    CHECK(next_names(n) == Names{"None", kAcc, "None"});
    CHECK(n.unpack("input") == xc);
    CHECK(defined(n, "result1"));
  }
  SECTION("a weight that does not require grad is still saved; its edge is None") {
    Tensor gc = A({3}, 0.5, 2.0, false);
    Tensor y = ops::layer_norm(x, {3}, gc, b, 1e-5);
    Node& n = fn(y);
    CHECK(next_names(n) == Names{kAcc, "None", kAcc});
    CHECK(n.unpack("weight") == gc);
  }
  SECTION("normalized over the last two dims of [2, 3, 4]: stats [2, 1, 1]; over the last: [2, 3, 1]") {
    Tensor x3 = A({2, 3, 4});
    Tensor y_n2 = ops::layer_norm(x3, {3, 4}, nullptr, nullptr, 1e-5);
    Node& n2 = fn(y_n2);
    CHECK(attr(n2, "normalized_shape") == "(3, 4)");
    CHECK(n2.unpack("result1")->sizes == Shape{2, 1, 1});
    Tensor y_n1 = ops::layer_norm(x3, {4}, nullptr, nullptr, 1e-5);
    Node& n1 = fn(y_n1);
    CHECK(n1.unpack("result2")->sizes == Shape{2, 3, 1});
  }
  SECTION("float64 stats are float64") {
    Tensor x64 = A({2, 3}, -1, 1, true, DType::Float64);
    CHECK(fn(ops::layer_norm(x64, {3}, nullptr, nullptr, 1e-5)).unpack("result1")->dtype() == DType::Float64);
  }
  SECTION("no node under no_grad or when nothing requires grad") {
    {
      autograd::GradModeGuard off(false);
      CHECK(ops::layer_norm(x, {3}, g, b, 1e-5)->grad_fn == nullptr);
    }
    CHECK(ops::layer_norm(A({2, 3}, -1, 1, false), {3}, nullptr, nullptr, 1e-5)->grad_fn == nullptr);
  }
}

TEST_CASE("nn values: layer_norm gradients match PyTorch", "[nn][fidelity]") {
  Tensor x = A({2, 3}), g = A({3}, 0.5, 2.0), b = A({3}, -0.4, 0.6);
  Tensor y = ops::layer_norm(x, {3}, g, b, 1e-5);
  autograd::BackwardRequest req;
  req.roots = {ops::sum(ops::mul(y, A({2, 3}, 0.3, 1.7, false)), std::nullopt, false)};
  autograd::run_backward(req);
  check_values(x->grad, {0.2140946388244629, -0.42864084243774414, 0.21454477310180664, 0.21391448378562927,
                         -0.4286399483680725, 0.214726984500885}, 1e-4);
  check_values(g->grad, {-1.763550043106079, 0.0, 3.135200023651123});
  check_values(b->grad, {1.44, 2.0, 2.56});
}

TEST_CASE("nn errors: layer_norm", "[nn][errors]") {
  Tensor x3 = A({2, 3, 4});
  auto e = error_of([&] { ops::layer_norm(x3, {3}, nullptr, nullptr, 1e-5); });
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[2, 3, 4]");
  e = error_of([&] { ops::layer_norm(x3, {4}, A({3}), nullptr, 1e-5); });
  CHECK(e.second == "Expected weight to be of same shape as normalized_shape, but got weight of shape [3] and "
                    "normalized_shape = [4]");
  e = error_of([&] { ops::layer_norm(A({2, 3}), {3}, A({3}), A({4}), 1e-5); });
  CHECK(e.second == "Expected bias to be of same shape as normalized_shape, but got bias of shape [4] and "
                    "normalized_shape = [3]");
  e = error_of([&] { ops::layer_norm(x3, {}, nullptr, nullptr, 1e-5); });
  CHECK(e.second == "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, "
                    "but got normalized_shape = []");
  e = error_of([&] { ops::layer_norm(idx({2, 3}, {0, 1, 2, 3, 4, 5}), {3}, nullptr, nullptr, 1e-5); });
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "\"LayerNormKernelImpl\" not implemented for 'Long'");
  e = error_of([&] { ops::layer_norm(A({2, 3}, -1, 1, true, DType::Float64), {3}, A({3}), nullptr, 1e-5); });
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "expected scalar type Double but found Float");
  e = error_of([&] { ops::layer_norm(A({2, 3}, -1, 1, true, DType::Float16), {3}, nullptr, nullptr, 1e-5); });
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "\"LayerNormKernelImpl\" not implemented for 'Half'");
}

TEST_CASE("nn: layer_norm of bfloat16 on the CPU rounds as 1.13's kernel does, forward and backward",
          "[nn][fidelity]") {
  // Inputs x_i = ((37 i) mod 101 - 50) / 16, w_j = 1 + ((7 j) mod 13 - 6) / 32,
  // b_j = ((5 j) mod 11 - 5) / 64, grad_i = ((7 i) mod 23 - 11) / 8, all exact in bfloat16;
  // references from torch.native_layer_norm(x, (cols,), w, b, 1e-5) and its backward in 1.13.
  // Rows of 8 (RowwiseMoments' scalar tail only; the backward's short-row sums), 20 (one
  // 16-lane vector and a tail) and 1100 (a cascade of chunks).
  struct Case {
    int64_t rows, cols;
    Vals mean, rstd, first8;
    double sum_affine, sum_plain;
    Vals dx_first4;
    double dx_sum, dw_sum, db_sum;
  };
  const std::vector<Case> cases = {
      {2, 8, {-0.55078125, -0.2021484375}, {0.5703125, 0.54296875},
       {-1.2734375, -0.1533203125, 1.0625, -1.1953125, 0.244140625, 1.640625, -0.63671875, 0.5859375},
       0.01708984375, -0.02587890625, {-0.65234375, -0.2490234375, 0.28515625, 0.7578125}, 0.001953125,
       0.969970703125, -0.375},
      {3, 20, {-0.09423828125, 0.076171875, -0.0732421875}, {0.52734375, 0.55859375, 0.5625},
       {-1.375, -0.390625, 0.7890625, -1.3671875, 0.01953125, 1.25, -0.8046875, 0.26953125}, 0.5428466796875,
       0.023193359375, {-0.4453125, -0.25390625, 0.059814453125, 0.8125}, -0.00030517578125, -0.6575927734375, 0.0},
      {2, 1100, {-0.0018768310546875, -0.000946044921875}, {0.55078125, 0.55078125},
       {-1.4765625, -0.4609375, 0.77734375, -1.4765625, -0.0269775390625, 1.25, -0.88671875, 0.2255859375},
       -0.86006546020507812, 0.31615066528320312, {-0.6171875, -0.283203125, 0.1748046875, 0.73046875},
       -0.06022834777832031, 2.9169665575027466, -0.625},
  };
  for (const Case& c : cases) {
    INFO("rows " << c.rows << ", cols " << c.cols);
    Vals xv, wv, bv;
    for (int64_t i = 0; i < c.rows * c.cols; ++i) xv.push_back(static_cast<double>((i * 37) % 101 - 50) / 16.0);
    for (int64_t j = 0; j < c.cols; ++j) {
      wv.push_back(1.0 + static_cast<double>((j * 7) % 13 - 6) / 32.0);
      bv.push_back(static_cast<double>((j * 5) % 11 - 5) / 64.0);
    }
    Tensor x = agtrace::tensor_from_values({c.rows, c.cols}, DType::BFloat16, xv);
    x->requires_grad_flag = true;
    Tensor w = agtrace::tensor_from_values({c.cols}, DType::BFloat16, wv);
    Tensor b = agtrace::tensor_from_values({c.cols}, DType::BFloat16, bv);
    w->requires_grad_flag = true;
    b->requires_grad_flag = true;
    Tensor y = ops::layer_norm(x, {c.cols}, w, b, 1e-5);
    Tensor plain = ops::layer_norm(x, {c.cols}, nullptr, nullptr, 1e-5);
    CHECK(y->dtype() == DType::BFloat16);
    Node& node = *y->grad_fn;
    Tensor mean = node.unpack("result1"), rstd = node.unpack("result2");
    CHECK(mean->dtype() == DType::BFloat16);  // measured: _saved_result1.dtype is torch.bfloat16
    CHECK(rstd->dtype() == DType::BFloat16);
    CHECK(agtrace::to_values(mean) == c.mean);
    CHECK(agtrace::to_values(rstd) == c.rstd);
    const Vals yv = agtrace::to_values(y), pv = agtrace::to_values(plain);
    CHECK(Vals(yv.begin(), yv.begin() + 8) == c.first8);
    double sum_affine = 0.0, sum_plain = 0.0;
    for (double v : yv) sum_affine += v;
    for (double v : pv) sum_plain += v;
    CHECK(sum_affine == c.sum_affine);
    CHECK(sum_plain == c.sum_plain);
    Vals gv;
    for (int64_t i = 0; i < c.rows * c.cols; ++i) gv.push_back(static_cast<double>((i * 7) % 23 - 11) / 8.0);
    autograd::BackwardRequest req;
    req.roots = {y};
    req.grad_roots = {agtrace::tensor_from_values({c.rows, c.cols}, DType::BFloat16, gv)};
    autograd::run_backward(req);
    auto sum_of = [](const Tensor& t) {
      double sum = 0.0;
      for (double v : agtrace::to_values(t)) sum += v;
      return sum;
    };
    const Vals dx = agtrace::to_values(x->grad);
    CHECK(Vals(dx.begin(), dx.begin() + 4) == c.dx_first4);
    CHECK(sum_of(x->grad) == c.dx_sum);
    CHECK(sum_of(w->grad) == c.dw_sum);
    CHECK(sum_of(b->grad) == c.db_sum);
  }
}

TEST_CASE("nn: batch_norm of bfloat16 on the CPU computes its statistics as 1.13's kernels do", "[nn][fidelity]") {
  // Inputs x_i = ((37 i) mod 101 - 50) / 16 (exact in bfloat16), w_c = 1 + ((7 c) mod 13 - 6) / 32,
  // b_c = ((5 c) mod 11 - 5) / 64, running_mean_c = ((3 c) mod 7) / 10, running_var_c =
  // 1 + c / 4; references from F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3) in
  // 1.13, with float32 parameters (the mixed kernel) and with bfloat16 ones. Inner sizes 5
  // (scalar remainder only), 20 (one 16-element block and a remainder) and 35 (two blocks
  // and a remainder); without the fused multiply-adds 4 of the float32 invstd values differ.
  struct Case {
    Shape shape;
    DType params;
    Vals mean, invstd, running_mean, running_var, first4;
    double sum;
  };
  const DType F32 = DType::Float32, BF = DType::BFloat16;
  const std::vector<Case> cases = {
      {{2, 3, 5}, F32, {-0.09375, 0.10625000298023224, -0.32499998807907104},
       {0.5264033675193787, 0.5661765933036804, 0.5679752230644226},
       {-0.02812500111758709, 0.24187500774860382, 0.3225000202655792},
       {1.9029297828674316, 1.9148569107055664, 2.0832812786102295},
       {-1.375, -0.384765625, 0.60546875, -1.109375}, -0.001953125},
      {{2, 3, 5}, BF, {-0.09375, 0.1064453125, -0.32421875},
       {0.52734375, 0.56640625, 0.5703125},
       {-0.0281982421875, 0.2421875, 0.322265625},
       {1.90625, 1.921875, 2.078125},
       {-1.375, -0.38671875, 0.60546875, -1.109375}, -0.008544921875},
      {{3, 8, 20}, F32, {-0.0062500000931322575, 0.0572916679084301, -0.08958332985639572, 0.07916666567325592, -0.0677083358168602, -0.004166666883975267, 0.05937499925494194, -0.08749999850988388},
       {0.5439872741699219, 0.5518185496330261, 0.5511842966079712, 0.5452263951301575, 0.5518185496330261, 0.549540102481842, 0.5458758473396301, 0.5510008931159973},
       {-0.001875000074505806, 0.22718751430511475, 0.3931250274181366, 0.16375000774860382, 0.3296875059604645, 0.06875000149011612, 0.29781249165534973, -0.026250001043081284},
       {1.7309598922729492, 1.8769052028656006, 2.0542120933532715, 2.25127911567688, 2.401905059814453, 2.5852303504943848, 2.773838520050049, 2.9298806190490723},
       {-1.453125, -0.43359375, 0.5859375, -1.1796875}, 0.949615478515625},
      {{3, 8, 20}, BF, {-0.006256103515625, 0.057373046875, -0.08935546875, 0.0791015625, -0.06787109375, -0.004180908203125, 0.059326171875, -0.08740234375},
       {0.54296875, 0.55078125, 0.55078125, 0.546875, 0.55078125, 0.55078125, 0.546875, 0.55078125},
       {-0.00188446044921875, 0.2275390625, 0.392578125, 0.1630859375, 0.330078125, 0.068359375, 0.296875, -0.0262451171875},
       {1.734375, 1.8828125, 2.046875, 2.25, 2.40625, 2.578125, 2.78125, 2.9375},
       {-1.453125, -0.43359375, 0.5859375, -1.1796875}, 0.9471588134765625},
      {{2, 8, 35}, F32, {-0.05535714328289032, 0.08214285969734192, -0.05089285597205162, -0.0035714285913854837, 0.04374999925494194, -0.0892857164144516, 0.04821428656578064, 0.0053571430034935474},
       {0.5429267883300781, 0.5521779656410217, 0.5486536622047424, 0.5494332313537598, 0.5491330027580261, 0.5505316257476807, 0.544427752494812, 0.5519883632659912},
       {-0.016607142984867096, 0.2346428632736206, 0.4047321677207947, 0.1389285773038864, 0.3631249964237213, 0.043214283883571625, 0.2944642901420593, 0.0016071429708972573},
       {1.7324912548065186, 1.8731842041015625, 2.061049461364746, 2.233182430267334, 2.409285068511963, 2.5791635513305664, 2.776806116104126, 2.923870086669922},
       {-1.4296875, -0.412109375, 0.609375, -1.15625}, 1.0931396484375},
      {{2, 8, 35}, BF, {-0.055419921875, 0.08203125, -0.05078125, -0.003570556640625, 0.043701171875, -0.08935546875, 0.048095703125, 0.00537109375},
       {0.54296875, 0.55078125, 0.546875, 0.55078125, 0.55078125, 0.55078125, 0.54296875, 0.55078125},
       {-0.0167236328125, 0.234375, 0.404296875, 0.138671875, 0.36328125, 0.04296875, 0.29296875, 0.001617431640625},
       {1.734375, 1.875, 2.0625, 2.234375, 2.40625, 2.578125, 2.78125, 2.921875},
       {-1.4296875, -0.412109375, 0.609375, -1.15625}, 1.0743408203125},
  };
  for (const Case& c : cases) {
    INFO("shape " << agtrace::shape_str(c.shape) << ", parameters " << agtrace::dtype_name(c.params));
    const int64_t channels = c.shape[1];
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    Vals xv, wv, bv, rmv, rvv;
    for (int64_t i = 0; i < n; ++i) xv.push_back(static_cast<double>((i * 37) % 101 - 50) / 16.0);
    for (int64_t ch = 0; ch < channels; ++ch) {
      wv.push_back(1.0 + static_cast<double>((ch * 7) % 13 - 6) / 32.0);
      bv.push_back(static_cast<double>((ch * 5) % 11 - 5) / 64.0);
      rmv.push_back(static_cast<double>((ch * 3) % 7) / 10.0);
      rvv.push_back(1.0 + static_cast<double>(ch) / 4.0);
    }
    Tensor x = agtrace::tensor_from_values(c.shape, BF, xv);
    Tensor w = agtrace::tensor_from_values({channels}, c.params, wv);
    w->requires_grad_flag = true;
    Tensor b = agtrace::tensor_from_values({channels}, c.params, bv);
    Tensor rm = agtrace::tensor_from_values({channels}, c.params, rmv);
    Tensor rv = agtrace::tensor_from_values({channels}, c.params, rvv);
    Tensor y = ops::batch_norm(x, rm, rv, w, b, true, 0.3, 1e-5);
    CHECK(y->dtype() == BF);
    Node& node = *y->grad_fn;
    Tensor mean = node.unpack("result1"), invstd = node.unpack("result2");
    CHECK(mean->dtype() == c.params);  // measured: the statistics take the parameters' dtype
    CHECK(agtrace::to_values(mean) == c.mean);
    CHECK(agtrace::to_values(invstd) == c.invstd);
    CHECK(agtrace::to_values(rm) == c.running_mean);
    CHECK(agtrace::to_values(rv) == c.running_var);
    const Vals yv = agtrace::to_values(y);
    CHECK(Vals(yv.begin(), yv.begin() + 4) == c.first4);
    double sum = 0.0;
    for (double v : yv) sum += v;
    CHECK(sum == c.sum);
  }
}

TEST_CASE("nn: layer_norm backward unpacks the bias, so editing it fails backward", "[nn][fidelity]") {
  // Measured: F.layer_norm(x, (3,), None, bc); bc.add_(1); backward -> version error,
  // although the gradient formula never reads the bias.
  Tensor x = A({2, 3}), bc = A({3}, -1, 1, false);
  Tensor y = ops::layer_norm(x, {3}, nullptr, bc, 1e-5);
  ops::add_(bc, ops::wrap_number(Value::integer(1)), Value::integer(1));
  auto e = error_of([&] { backward_of_sum(y); });
  CHECK(e.first == "saved_tensor_modified");
}

// ================================================================ batch_norm

TEST_CASE("nn fidelity: batch_norm in training", "[nn][fidelity]") {
  Tensor bx = A({2, 3, 2, 2}), rm = A({3}, 0, 0, false), rv = A({3}, 1, 1, false);
  Tensor bw = A({3}, 0.5, 2.0), bb = A({3}, -0.4, 0.6);
  const Names all{"eps", "input", "result1", "result2", "running_mean", "running_var", "training", "weight"};
  SECTION("saved values, identity, batch statistics") {
    Tensor y = ops::batch_norm(bx, rm, rv, bw, bb, true, 0.1, 1e-5);
    Node& n = fn(y);
    CHECK(n.name == "NativeBatchNormBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc, kAcc});
    CHECK(saved_names(n) == all);
    CHECK(n.unpack("input") == bx);
    CHECK(n.unpack("running_mean") == rm);
    CHECK(n.unpack("running_var") == rv);
    CHECK(n.unpack("weight") == bw);
    CHECK(attr(n, "eps") == "1e-05");
    CHECK(attr(n, "training") == "True");
    Tensor m = n.unpack("result1"), s = n.unpack("result2");
    CHECK(m->sizes == Shape{3});
    CHECK(n.unpack("result1") == m);
    CHECK_FALSE(m->requires_grad());
    CHECK(n.saved_bytes() == 156);
    check_values(m, {-0.3478260636329651, 0.0, 0.3478260934352875});
    check_values(s, {1.884199857711792, 1.8841999769210815, 1.884200096130371});
    check_values(y, {-1.0144129991531372, -0.9324913024902344, -0.8505695462226868, -0.7686478495597839,
                     -1.4360324144363403, -1.2312281131744385, -1.0264238119125366, -0.82161945104599,
                     -1.8576523065567017, -1.5299652814865112, -1.2022782564163208, -0.8745913505554199,
                     -0.0313522070646286, 0.05056953430175781, 0.13249124586582184, 0.21441301703453064,
                     1.0216195583343506, 1.2264238595962524, 1.4312281608581543, 1.6360324621200562,
                     2.0745913982391357, 2.402278184890747, 2.7299654483795166, 3.057652235031128});
  }
  SECTION("running buffers: momentum step with the unbiased variance, in place, version stays 0") {
    const auto rm_storage = rm->storage;
    ops::batch_norm(bx, rm, rv, bw, bb, true, 0.1, 1e-5);
    check_values(rm, {-0.03478260710835457, 0.0, 0.03478261083364487});
    check_values(rv, {0.9321901202201843, 0.9321901202201843, 0.9321900606155396});
    CHECK(rm->version->version == 0);
    CHECK(rv->version->version == 0);
    CHECK(rm->storage == rm_storage);
  }
  SECTION("the buffers are updated under no_grad and when nothing requires grad") {
    {
      autograd::GradModeGuard off(false);
      CHECK(ops::batch_norm(bx, rm, rv, bw, bb, true, 0.1, 1e-5)->grad_fn == nullptr);
    }
    check_values(rm, {-0.03478260710835457, 0.0, 0.03478261083364487});
    Tensor y = ops::batch_norm(A({2, 3, 2, 2}, -1, 1, false), rm, rv, nullptr, nullptr, true, 0.1, 1e-5);
    CHECK(y->grad_fn == nullptr);
    CHECK(agtrace::to_values(rm)[0] == Approx(-0.034782607 * 1.9).epsilon(1e-5));
  }
  SECTION("no weight or bias: edges (x, None, None), weight None") {
    Tensor y_n = ops::batch_norm(bx, rm, rv, nullptr, nullptr, true, 0.1, 1e-5);
    Node& n = fn(y_n);
    CHECK(next_names(n) == Names{kAcc, "None", "None"});
    CHECK_FALSE(defined(n, "weight"));
    CHECK(defined(n, "running_mean"));
  }
  SECTION("no running stats: running_mean / running_var None") {
    Tensor y_n = ops::batch_norm(bx, nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5);
    Node& n = fn(y_n);
    CHECK_FALSE(defined(n, "running_mean"));
    CHECK_FALSE(defined(n, "running_var"));
    CHECK(n.unpack("result1")->sizes == Shape{3});
  }
  SECTION("only the weight requires grad: edges (None, w, None), the input still saved") {
    Tensor xc = A({2, 3, 2, 2}, -1, 1, false);
    Tensor y_n = ops::batch_norm(xc, rm, rv, bw, nullptr, true, 0.1, 1e-5);
    Node& n = fn(y_n);
    CHECK(next_names(n) == Names{"None", kAcc, "None"});
    CHECK(n.unpack("input") == xc);
  }
}

TEST_CASE("nn fidelity: batch_norm in eval mode", "[nn][fidelity]") {
  Tensor bx = A({2, 3, 2, 2}), rm = A({3}, -0.2, 0.2, false), rv = A({3}, 0.5, 1.5, false);
  Tensor bw = A({3}, 0.5, 2.0), bb = A({3}, -0.4, 0.6);
  Tensor y = ops::batch_norm(bx, rm, rv, bw, bb, false, 0.1, 1e-5);
  Node& n = fn(y);
  CHECK(attr(n, "training") == "False");
  CHECK(n.unpack("result1")->sizes == Shape{0});
  CHECK(n.unpack("result2")->sizes == Shape{0});
  CHECK(n.saved_bytes() == 132);
  // eval leaves the buffers alone
  check_values(rm, {-0.2, 0.0, 0.2});
  check_values(y, {-0.9656797647476196, -0.9041928052902222, -0.8427058458328247, -0.781218945980072,
                   -0.7152132987976074, -0.6065182089805603, -0.4978231191635132, -0.3891279399394989,
                   -0.22359377145767212, -0.08159481734037399, 0.060404106974601746, 0.20240303874015808,
                   -0.22783657908439636, -0.1663496494293213, -0.10486273467540741, -0.04337577521800995,
                   0.5891280174255371, 0.697823166847229, 0.8065182566642761, 0.9152133464813232,
                   1.480393409729004, 1.6223922967910767, 1.764391303062439, 1.9063901901245117});
  autograd::BackwardRequest req;
  req.roots = {ops::sum(ops::mul(y, A({2, 3, 2, 2}, 0.3, 1.7, false)), std::nullopt, false)};
  autograd::run_backward(req);
  check_values(bw->grad, {0.9653984904289246, 1.577307939529419, 2.4885623455047607});
  check_values(bx->grad, {0.21212993562221527, 0.2551707923412323, 0.2982116639614105, 0.34125250577926636,
                          0.6793444752693176, 0.7554309964179993, 0.8315175771713257, 0.9076041579246521,
                          1.285090446472168, 1.38448965549469, 1.4838889837265015, 1.5832881927490234,
                          0.7286202311515808, 0.7716610431671143, 0.8147019147872925, 0.8577427864074707,
                          1.5923832654953003, 1.6684699058532715, 1.7445564270019531, 1.8206430673599243,
                          2.47788143157959, 2.5772807598114014, 2.676679849624634, 2.7760791778564453});
}

TEST_CASE("nn: batch_norm backward checks the running buffers' versions, also in training", "[nn][fidelity]") {
  // Measured: rm.add_(1) after F.batch_norm(..., training=True) makes backward raise
  // (expected version 0, found 1): the formula's inputs are unpacked whatever the mode.
  Tensor bx = A({2, 3}), rm = A({3}, 0, 0, false), rv = A({3}, 1, 1, false);
  Tensor y = ops::batch_norm(bx, rm, rv, nullptr, nullptr, true, 0.1, 1e-5);
  ops::add_(rm, ops::wrap_number(Value::integer(1)), Value::integer(1));
  auto e = error_of([&] { backward_of_sum(y); });
  CHECK(e.first == "saved_tensor_modified");
}

TEST_CASE("nn errors: batch_norm", "[nn][errors]") {
  auto bn = [](Tensor x, Tensor rm, Tensor rv, Tensor w, bool training) {
    return error_of([&] { ops::batch_norm(x, rm, rv, w, nullptr, training, 0.1, 1e-5); });
  };
  auto zeros = [](DType d = DType::Float32) { return A({3}, 0, 0, false, d); };
  auto e = bn(A({1, 3}), zeros(), zeros(), nullptr, true);
  CHECK(e.first == "type_error");
  CHECK(e.second == "Expected more than 1 value per channel when training, got input size torch.Size([1, 3])");
  e = bn(A({2, 4}), zeros(), zeros(), nullptr, true);
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "running_mean should contain 4 elements not 3");
  e = bn(A({2, 3}), nullptr, nullptr, nullptr, false);
  CHECK(e.second == "running_mean must be defined in evaluation mode");
  e = bn(A({2, 3}), zeros(), zeros(), A({4}), true);
  CHECK(e.second == "weight should contain 3 elements not 4");
  e = bn(idx({2, 3}, {0, 1, 2, 3, 4, 5}), zeros(), zeros(), nullptr, true);
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "\"batch_norm\" not implemented for 'Long'");
  // Mixed dtypes (measured grid): f32 input, f64 buffers -> parameter message; f64 input,
  // f32 parameters -> input message; f32 input, f32 weight, f64 buffers -> kernel message.
  e = bn(A({2, 3}), zeros(DType::Float64), zeros(DType::Float64), nullptr, true);
  CHECK(e.second == "mixed dtype (CPU): expect parameter to have scalar type of Float");
  e = bn(A({2, 3}, -1, 1, true, DType::Float64), zeros(), zeros(), nullptr, false);
  CHECK(e.second == "mixed dtype (CPU): expect input to have scalar type of BFloat16");
  e = bn(A({2, 3}), zeros(DType::Float64), zeros(DType::Float64), A({3}), true);
  CHECK(e.second == "expected scalar type Float but found Double");
  e = bn(A({2, 3}, -1, 1, true, DType::Float64), zeros(), zeros(), A({3}, -1, 1, true, DType::Float64), true);
  CHECK(e.second == "expected scalar type Double but found Float");
  e = bn(A({2, 3}), zeros(), zeros(DType::Float64), nullptr, true);
  CHECK(e.second == "expected scalar type Float but found Double");
}

// ================================================================ dropout

TEST_CASE("nn fidelity: dropout in training is MulBackward0 with the scaled mask", "[nn][fidelity]") {
  Tensor x = A({2, 3});
  SplitMix64 gen(7);
  Tensor d = ops::dropout(x, 0.5, true, false, gen);
  Node& n = fn(d);
  CHECK(n.name == "MulBackward0");
  CHECK(next_names(n) == Names{kAcc, "None"});
  CHECK(saved_names(n) == Names{"other", "self"});
  CHECK_FALSE(defined(n, "self"));
  Tensor mask = n.unpack("other");
  CHECK(n.unpack("other") == mask);
  CHECK(mask->sizes == Shape{2, 3});
  CHECK(mask->dtype() == DType::Float32);
  CHECK(mask->version->version == 2);  // bernoulli_ then div_ (measured _version 2)
  CHECK(mask->storage != x->storage);
  CHECK(n.saved_bytes() == 24);
  const Vals mv = agtrace::to_values(mask), xv = agtrace::to_values(x), dv = agtrace::to_values(d);
  for (size_t i = 0; i < mv.size(); ++i) {
    CHECK((mv[i] == 0.0 || mv[i] == 2.0));
    CHECK(dv[i] == Approx(xv[i] * mv[i]));
  }
}

TEST_CASE("nn: dropout's mask rule — one uniform01() per element, kept when u >= p", "[nn][fidelity]") {
  Tensor x = A({4, 5}, 1, 2, false);
  SplitMix64 gen(123), replay(123);
  Tensor d = ops::dropout(x, 0.25, true, false, gen);
  const Vals dv = agtrace::to_values(d), xv = agtrace::to_values(x);
  const double scale = static_cast<double>(1.0f / 0.75f);
  for (size_t i = 0; i < dv.size(); ++i) {
    const bool keep = replay.uniform01() >= 0.25;
    CHECK(dv[i] == Approx(keep ? static_cast<double>(static_cast<float>(xv[i] * scale)) : 0.0));
  }
  // The generator moved on by exactly numel draws.
  CHECK(gen.next() == replay.next());
}

TEST_CASE("nn: dropout masks are deterministic per seed, with the right statistics", "[nn][fidelity]") {
  Tensor x = A({100, 100}, 1, 1, false, DType::Float64);
  SplitMix64 g1(99), g2(99), g3(100);
  const Vals a = agtrace::to_values(ops::dropout(x, 0.3, true, false, g1));
  const Vals b = agtrace::to_values(ops::dropout(x, 0.3, true, false, g2));
  const Vals c = agtrace::to_values(ops::dropout(x, 0.3, true, false, g3));
  CHECK(a == b);
  CHECK(a != c);
  int dropped = 0;
  for (double v : a) {
    if (v == 0.0) ++dropped;
    else CHECK(v == Approx(1.0 / 0.7).epsilon(1e-15));
  }
  CHECK(dropped > 2800);
  CHECK(dropped < 3200);
  // A second mask from the same generator differs from the first.
  CHECK(agtrace::to_values(ops::dropout(x, 0.3, true, false, g1)) != a);
}

TEST_CASE("nn fidelity: dropout returns the input itself in eval, for p=0 and when empty", "[nn][fidelity]") {
  Tensor x = A({2, 3});
  SplitMix64 gen(1);
  CHECK(ops::dropout(x, 0.5, false, false, gen) == x);
  CHECK(ops::dropout(x, 0.0, true, false, gen) == x);
  Tensor empty = agtrace::empty_tensor({0}, DType::Float32, false);
  CHECK(ops::dropout(empty, 0.5, true, false, gen) == empty);
  SplitMix64 fresh(1);
  CHECK(gen.next() == fresh.next());  // none of these drew from the generator
}

TEST_CASE("nn fidelity: dropout with p=1 multiplies by a 0-d zero (version 1)", "[nn][fidelity]") {
  Tensor x = A({2, 3});
  SplitMix64 gen(1);
  Tensor d = ops::dropout(x, 1.0, true, false, gen);
  Node& n = fn(d);
  CHECK(n.name == "MulBackward0");
  Tensor z = n.unpack("other");
  CHECK(z->sizes == Shape{});
  CHECK(z->version->version == 1);
  for (double v : agtrace::to_values(d)) CHECK(v == 0.0);
}

TEST_CASE("nn fidelity: dropout inplace edits the input (mul_)", "[nn][fidelity]") {
  Tensor x = A({2, 3});
  Tensor h = ops::mul(x, ops::wrap_number(Value::integer(1)));
  SplitMix64 gen(3);
  Tensor r = ops::dropout(h, 0.5, true, true, gen);
  CHECK(r == h);
  CHECK(h->version->version == 1);
  Node& n = fn(h);
  CHECK(n.name == "MulBackward0");
  CHECK(next_names(n) == Names{"MulBackward0", "None"});
  CHECK_FALSE(defined(n, "self"));
  CHECK(n.unpack("other")->version->version == 2);
  auto e = error_of([&] { ops::dropout(x, 0.5, true, true, gen); });
  CHECK(e.first == "leaf_inplace");
}

TEST_CASE("nn errors: dropout", "[nn][errors]") {
  SplitMix64 gen(1);
  auto e = error_of([&] { ops::dropout(idx({3}, {1, 2, 3}), 0.5, true, false, gen); });
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "result type Float can't be cast to the desired output type Long");
  e = error_of([&] { ops::dropout(A({3}, -1, 1, false, DType::Float16), 0.5, true, false, gen); });
  CHECK(e.second == "\"bernoulli_scalar_cpu_\" not implemented for 'Half'");
  e = error_of([] { ops::check_dropout_probability(1.5, "1.5"); });
  CHECK(e.first == "type_error");
  CHECK(e.second == "dropout probability has to be between 0 and 1, but got 1.5");
}

// ================================================================ embedding

TEST_CASE("nn fidelity: embedding", "[nn][fidelity]") {
  Tensor E = A({4, 3});
  Tensor i = idx({2, 2}, {0, 2, 3, 0});
  Tensor e = ops::embedding(i, E, std::nullopt, false, false);
  Node& n = fn(e);
  CHECK(n.name == "EmbeddingBackward0");
  CHECK(next_names(n) == Names{kAcc});
  CHECK(saved_names(n) == Names{"indices", "padding_idx", "scale_grad_by_freq", "sparse", "weight"});
  CHECK(n.unpack("indices") == i);
  CHECK(n.unpack("weight") == E);
  CHECK(attr(n, "padding_idx") == "18446744073709551615");
  CHECK(attr(n, "scale_grad_by_freq") == "False");
  CHECK(attr(n, "sparse") == "False");
  CHECK(n.saved_bytes() == 80);
  CHECK(e->sizes == Shape{2, 2, 3});
  CHECK(e->is_contiguous());
  CHECK(e->base == nullptr);
  check_values(e, {-1.0, -0.8181818127632141, -0.6363636255264282, 0.09090906381607056, 0.27272725105285645,
                   0.45454543828964233, 0.6363636255264282, 0.8181818127632141, 1.0, -1.0, -0.8181818127632141,
                   -0.6363636255264282});
  backward_of_sum(e);
  check_values(E->grad, {2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("nn fidelity: embedding padding_idx and scale_grad_by_freq", "[nn][fidelity]") {
  Tensor E = A({4, 3});
  Tensor i = idx({3}, {1, 1, 3});
  SECTION("padding_idx=-1 is normalised to 3 and saved so") {
    CHECK(attr(fn(ops::embedding(i, E, -1, false, false)), "padding_idx") == "3");
  }
  SECTION("padding_idx=1: that row gets no gradient") {
    Tensor e = ops::embedding(i, E, 1, false, false);
    CHECK(attr(fn(e), "padding_idx") == "1");
    autograd::BackwardRequest req;
    req.roots = {ops::sum(ops::mul(e, agtrace::tensor_from_values({3, 1}, DType::Float32, {1, 2, 3})), std::nullopt, false)};
    autograd::run_backward(req);
    check_values(E->grad, {0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3});
  }
  SECTION("scale_grad_by_freq divides by each index's count") {
    Tensor e = ops::embedding(i, E, std::nullopt, true, false);
    CHECK(attr(fn(e), "scale_grad_by_freq") == "True");
    backward_of_sum(e);
    check_values(E->grad, {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1});
  }
  SECTION("no node when the weight does not require grad") {
    CHECK(ops::embedding(i, A({4, 3}, -1, 1, false), std::nullopt, false, false)->grad_fn == nullptr);
  }
  SECTION("a 0-d index gives one row") {
    CHECK(ops::embedding(idx({}, {2}), E, std::nullopt, false, false)->sizes == Shape{3});
  }
  SECTION("editing the indices after the forward fails backward (measured)") {
    Tensor j = idx({2}, {1, 2});
    Tensor e = ops::embedding(j, E, std::nullopt, false, false);
    ops::add_(j, ops::wrap_number(Value::integer(1)), Value::integer(1));
    CHECK(error_of([&] { backward_of_sum(e); }).first == "saved_tensor_modified");
  }
}

TEST_CASE("nn errors: embedding", "[nn][errors]") {
  Tensor E = A({4, 3});
  auto e = error_of([&] { ops::embedding(idx({1}, {4}), E, std::nullopt, false, false); });
  CHECK(e.first == "index_out_of_range");
  CHECK(e.second == "index out of range in self");
  e = error_of([&] { ops::embedding(idx({1}, {-1}), E, std::nullopt, false, false); });
  CHECK(e.first == "index_out_of_range");
  e = error_of([&] { ops::embedding(A({1}, 0.5, 0.5, false), E, std::nullopt, false, false); });
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
                    "but got torch.FloatTensor instead (while checking arguments for embedding)");
  e = error_of([&] { ops::embedding(idx({1}, {1}), A({4}), std::nullopt, false, false); });
  CHECK(e.second == "'weight' must be 2-D");
  e = error_of([&] { ops::embedding(idx({1}, {1}), E, 4, false, false); });
  CHECK(e.second == "Padding_idx must be within num_embeddings");
  e = error_of([&] { ops::embedding(idx({1}, {1}), E, -5, false, false); });
  CHECK(e.second == "Padding_idx must be within num_embeddings");
}

// ================================================================ conv2d

TEST_CASE("nn fidelity: conv2d", "[nn][fidelity]") {
  Tensor img = A({1, 2, 5, 5}), cw = A({3, 2, 3, 3}, -0.5, 0.5), cb = A({3}, -0.1, 0.2);
  const Names all{"bias_sym_sizes_opt", "dilation", "groups", "input", "output_padding",
                  "padding", "stride", "transposed", "weight"};
  SECTION("with bias: input and weight by identity, attributes") {
    Tensor y = ops::conv2d(img, cw, cb, conv_args());
    Node& n = fn(y);
    CHECK(n.name == "ConvolutionBackward0");
    CHECK(next_names(n) == Names{kAcc, kAcc, kAcc});
    CHECK(saved_names(n) == all);
    CHECK(n.unpack("input") == img);
    CHECK(n.unpack("weight") == cw);
    CHECK(attr(n, "bias_sym_sizes_opt") == "(3,)");
    CHECK(attr(n, "dilation") == "(1, 1)");
    CHECK(attr(n, "groups") == "1");
    CHECK(attr(n, "output_padding") == "(0, 0)");
    CHECK(attr(n, "padding") == "(0, 0)");
    CHECK(attr(n, "stride") == "(1, 1)");
    CHECK(attr(n, "transposed") == "False");
    CHECK(n.saved_bytes() == 416);
    CHECK(y->sizes == Shape{1, 3, 3, 3});
  }
  SECTION("no bias, padding 1, stride 2: bias_sym_sizes_opt (0,), edges (img, w, None)") {
    Tensor y_n = ops::conv2d(img, cw, nullptr, conv_args({2, 2}, {1, 1}));
    Node& n = fn(y_n);
    CHECK(next_names(n) == Names{kAcc, kAcc, "None"});
    CHECK(attr(n, "bias_sym_sizes_opt") == "(0,)");
    CHECK(attr(n, "padding") == "(1, 1)");
    CHECK(attr(n, "stride") == "(2, 2)");
  }
  SECTION("only the weight requires grad: the input is still saved") {
    Tensor ic = A({1, 2, 5, 5}, -1, 1, false);
    Tensor y_n = ops::conv2d(ic, cw, nullptr, conv_args());
    Node& n = fn(y_n);
    CHECK(next_names(n) == Names{"None", kAcc, "None"});
    CHECK(n.unpack("input") == ic);
  }
  SECTION("only the bias requires grad: both input and weight saved") {
    Tensor ic = A({1, 2, 5, 5}, -1, 1, false), wc = A({3, 2, 3, 3}, -0.5, 0.5, false);
    Tensor y_n = ops::conv2d(ic, wc, cb, conv_args());
    Node& n = fn(y_n);
    CHECK(next_names(n) == Names{"None", "None", kAcc});
    CHECK(n.unpack("weight") == wc);
  }
  SECTION("a one-element padding list is kept as written") {
    Tensor y_n = ops::conv2d(img, cw, nullptr, conv_args({1, 1}, {1}));
    Node& n = fn(y_n);
    CHECK(attr(n, "padding") == "(1,)");
  }
  SECTION("values: stride 2, padding 1, bias") {
    check_values(ops::conv2d(img, cw, cb, conv_args({2, 2}, {1, 1})),
                 {1.1583751440048218, 1.604274034500122, 0.8996148705482483, 0.7571428418159485, 0.8276090621948242,
                  0.25810569524765015, -0.43115124106407166, -0.8909125328063965, -0.8377743363380432,
                  0.3103002905845642, 0.5066807866096497, 0.3842317759990692, 0.6576241254806519, 0.9776087403297424,
                  0.6576241850852966, 0.3842318058013916, 0.5066807866096497, 0.310300350189209, -0.5377744436264038,
                  -0.5909126996994019, -0.13115142285823822, 0.55810546875, 1.1276087760925293, 1.0571428537368774,
                  1.1996148824691772, 1.9042742252349854, 1.4583749771118164},
                 1e-4);
  }
  SECTION("int64 convolution computes (no grad possible)") {
    Tensor xi = idx({1, 1, 2, 2}, {1, 2, 3, 4}), wi = idx({1, 1, 2, 2}, {1, 1, 1, 1});
    Tensor y = ops::conv2d(xi, wi, nullptr, conv_args());
    CHECK(y->dtype() == DType::Int64);
    CHECK(agtrace::to_values(y) == Vals{10});
  }
}

TEST_CASE("nn errors: conv2d", "[nn][errors]") {
  Tensor img = A({1, 2, 5, 5}), cw = A({3, 2, 3, 3});
  auto conv = [](Tensor x, Tensor w, Tensor b, ops::Conv2dArgs a) {
    return error_of([&] { ops::conv2d(x, w, b, a); });
  };
  auto e = conv(A({1, 4, 5, 5}), cw, nullptr, conv_args());
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "Given groups=1, weight of size [3, 2, 3, 3], expected input[1, 4, 5, 5] to have 2 channels, but "
                    "got 4 channels instead");
  e = conv(A({1, 2, 2, 2}), cw, nullptr, conv_args());
  CHECK(e.second == "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be "
                    "greater than actual input size");
  e = conv(img, cw, A({4}), conv_args());
  CHECK(e.second == "Given weight of size [3, 2, 3, 3], expected bias to be 1-dimensional with 3 elements, but got "
                    "bias of size [4] instead");
  e = conv(img, cw, nullptr, conv_args({0, 0}, {-1, -1}));
  CHECK(e.second == "negative padding is not supported");
  e = conv(img, cw, nullptr, conv_args({0, 0}, {0, 0}, {0, 0}));
  CHECK(e.second == "non-positive stride is not supported");
  e = conv(img, cw, nullptr, conv_args({1, 1}, {0, 0}, {-1, -1}));
  CHECK(e.second == "dilation should be greater than zero, but got [-1, -1]");
  e = conv(img, cw, nullptr, conv_args({1, 1, 1}));
  CHECK(e.second == "expected stride to be a single integer value or a list of 2 values to match the convolution "
                    "dimensions, but got stride=[1, 1, 1]");
  e = conv(img, A({3, 2, 3}), nullptr, conv_args());
  CHECK(e.second == "expected stride to be a single integer value or a list of 1 values to match the convolution "
                    "dimensions, but got stride=[1, 1]");
  e = conv(img, A({3, 3}), nullptr, conv_args());
  CHECK(e.second == "weight should have at least three dimensions");
  e = conv(img, cw, nullptr, conv_args({1, 1}, {0, 0}, {1, 1}, 2));
  CHECK(e.second == "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
                    "[[3, 2, 3, 3]] instead");
  e = conv(img, cw, nullptr, conv_args({1, 1}, {0, 0}, {1, 1}, 0));
  CHECK(e.second == "non-positive groups is not supported");
  e = conv(A({5, 5}), cw, nullptr, conv_args());
  CHECK(e.second == "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [5, 5]");
  e = conv(A({1, 2, 5, 5}, -1, 1, true, DType::Float64), cw, nullptr, conv_args());
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "expected scalar type Double but found Float");
  e = conv(img, A({3, 2, 3, 3}, -1, 1, true, DType::Float64), A({3}, -1, 1, true, DType::Float64), conv_args());
  CHECK(e.second == "Input type (float) and bias type (double) should be the same");
  e = conv(A({1, 2, 5, 5}, -1, 1, false, DType::Float16), A({3, 2, 3, 3}, -1, 1, false, DType::Float16), nullptr,
           conv_args());
  CHECK(e.second == "\"slow_conv2d_cpu\" not implemented for 'Half'");
  e = conv(A({2, 5, 5}), cw, nullptr, conv_args());
  CHECK(e.first == "unsupported");
}

TEST_CASE("nn: conv2d padding strings", "[nn][fidelity]") {
  Tensor img = A({1, 2, 5, 5}), cw = A({3, 2, 3, 3});
  ops::Conv2dArgs base = conv_args();
  SECTION("'valid' passes padding (0,) and output_padding (0,)") {
    Tensor y_n = ops::conv2d(img, cw, nullptr, ops::conv2d_padding_mode("valid", img, cw, base));
    Node& n = fn(y_n);
    CHECK(attr(n, "padding") == "(0,)");
    CHECK(attr(n, "output_padding") == "(0,)");
  }
  SECTION("'same' with dilation 2: padding (2, 2), output 5x5") {
    base.dilation = {2, 2};
    Tensor y = ops::conv2d(img, cw, nullptr, ops::conv2d_padding_mode("same", img, cw, base));
    CHECK(attr(fn(y), "padding") == "(2, 2)");
    CHECK(attr(fn(y), "output_padding") == "(0, 0)");
    CHECK(y->sizes == Shape{1, 3, 5, 5});
  }
  SECTION("errors") {
    CHECK(error_of([&] { ops::conv2d_padding_mode("foo", img, cw, base); }).second == "Invalid padding string: 'foo'");
    base.stride = {2, 2};
    CHECK(error_of([&] { ops::conv2d_padding_mode("same", img, cw, base); }).second ==
          "padding='same' is not supported for strided convolutions");
    CHECK(error_of([&] { ops::conv2d_padding_mode("same", img, A({3, 2, 2, 2}), conv_args()); }).first == "unsupported");
  }
}

// ================================================================ max_pool2d

TEST_CASE("nn fidelity: max_pool2d", "[nn][fidelity]") {
  Tensor img = A({1, 2, 4, 4});
  const Names all{"ceil_mode", "dilation", "kernel_size", "padding", "result1", "self", "stride"};
  SECTION("kernel 2, stride not given: stride (), indices int64 (flat per plane)") {
    auto r = ops::max_pool2d(img, {2, 2}, {}, {0, 0}, {1, 1}, false);
    Node& n = fn(r.output);
    CHECK(n.name == "MaxPool2DWithIndicesBackward0");
    CHECK(next_names(n) == Names{kAcc});
    CHECK(saved_names(n) == all);
    CHECK(n.unpack("self") == img);
    CHECK(n.unpack("result1") == r.indices);
    CHECK(attr(n, "stride") == "()");
    CHECK(attr(n, "kernel_size") == "(2, 2)");
    CHECK(attr(n, "ceil_mode") == "False");
    CHECK(r.indices->dtype() == DType::Int64);
    CHECK_FALSE(r.indices->requires_grad());
    CHECK(agtrace::to_values(r.indices) == Vals{5, 7, 13, 15, 5, 7, 13, 15});
    CHECK(n.saved_bytes() == 192);
  }
  SECTION("kernel 3, stride 2, padding 1, ceil_mode: values and indices") {
    auto r = ops::max_pool2d(img, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
    CHECK(r.output->sizes == Shape{1, 2, 3, 3});
    CHECK(agtrace::to_values(r.indices) == Vals{5, 7, 7, 13, 15, 15, 13, 15, 15, 5, 7, 7, 13, 15, 15, 13, 15, 15});
    check_values(r.output, {-0.6774193644523621, -0.5483871102333069, -0.5483871102333069, -0.16129034757614136,
                            -0.03225809335708618, -0.03225809335708618, -0.16129034757614136, -0.03225809335708618,
                            -0.03225809335708618, 0.3548387289047241, 0.4838709831237793, 0.4838709831237793,
                            0.8709677457809448, 1.0, 1.0, 0.8709677457809448, 1.0, 1.0});
  }
  SECTION("ties keep the first maximum; overlapping windows; -inf padding never wins") {
    Tensor t = agtrace::tensor_from_values({1, 1, 4, 4}, DType::Float32, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3});
    auto r = ops::max_pool2d(t, {2, 2}, {1, 1}, {0, 0}, {1, 1}, false);
    CHECK(agtrace::to_values(r.output) == Vals{9, 9, 6, 9, 9, 8, 9, 9, 9});
    CHECK(agtrace::to_values(r.indices) == Vals{5, 5, 7, 5, 5, 11, 12, 14, 14});
    Tensor ones = agtrace::tensor_from_values({1, 1, 2, 2}, DType::Float32, {-1, -1, -1, -1});
    auto p = ops::max_pool2d(ones, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false);
    CHECK(agtrace::to_values(p.indices) == Vals{0, 0, 1, 0, 0, 1, 2, 2, 3});
  }
  SECTION("NaN wins, the last NaN of a window") {
    const double nan = std::nan("");
    Tensor t = agtrace::tensor_from_values({1, 1, 2, 2}, DType::Float32, {1, nan, 2, nan});
    CHECK(agtrace::to_values(ops::max_pool2d(t, {2}, {}, {0}, {1}, false).indices) == Vals{3});
    Tensor u = agtrace::tensor_from_values({1, 1, 2, 2}, DType::Float32, {nan, 1, 2, 1});
    CHECK(agtrace::to_values(ops::max_pool2d(u, {2}, {}, {0}, {1}, false).indices) == Vals{0});
  }
  SECTION("a 3-D input pools each plane; lists kept as written") {
    auto r = ops::max_pool2d(A({2, 4, 4}), {2}, {1}, {1}, {2}, false);
    Node& n = fn(r.output);
    CHECK(attr(n, "kernel_size") == "(2,)");
    CHECK(attr(n, "stride") == "(1,)");
    CHECK(attr(n, "padding") == "(1,)");
    CHECK(attr(n, "dilation") == "(2,)");
    CHECK(r.output->sizes == Shape{2, 4, 4});
  }
  SECTION("editing the input after the forward fails backward") {
    Tensor h = ops::mul(img, ops::wrap_number(Value::integer(1)));
    auto r = ops::max_pool2d(h, {2, 2}, {}, {0, 0}, {1, 1}, false);
    ops::add_(h, ops::wrap_number(Value::integer(1)), Value::integer(1));
    CHECK(error_of([&] { backward_of_sum(r.output); }).first == "saved_tensor_modified");
  }
}

TEST_CASE("nn errors: max_pool2d", "[nn][errors]") {
  Tensor img = A({1, 2, 4, 4});
  auto mp = [](Tensor x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
               std::vector<int64_t> d) { return error_of([&] { ops::max_pool2d(x, k, s, p, d, false); }); };
  auto e = mp(img, {5, 5}, {}, {0, 0}, {1, 1});
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "Given input size: (2x4x4). Calculated output size: (2x0x0). Output size is too small");
  e = mp(img, {2, 2}, {}, {2, 2}, {1, 1});
  CHECK(e.second == "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
  e = mp(img, {2, 2}, {}, {-1, -1}, {1, 1});
  CHECK(e.second == "pad must be non-negative, but got pad: -1");
  e = mp(A({4, 4}), {2, 2}, {}, {0, 0}, {1, 1});
  CHECK(e.second == "non-empty 3D or 4D (batch mode) tensor expected for input");
  e = mp(img, {0, 0}, {}, {0, 0}, {1, 1});
  CHECK(e.second == "stride should not be zero");
  e = mp(img, {0, 0}, {1, 1}, {0, 0}, {1, 1});
  CHECK(e.second == "kernel size should be greater than zero, but got kH: 0 kW: 0");
  e = mp(img, {-1, -1}, {}, {0, 0}, {1, 1});
  CHECK(e.second == "kernel size should be greater than zero, but got kH: -1 kW: -1");
  e = mp(img, {2, 2}, {}, {0, 0}, {0, 0});
  CHECK(e.second == "dilation should be greater than zero, but got dilationH: 0 dilationW: 0");
  e = mp(img, {2, 2, 2}, {1, 1, 1}, {0, 0}, {1, 1});
  CHECK(e.second == "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  e = mp(img, {2, 2}, {1, 2, 3}, {0, 0}, {1, 1});
  CHECK(e.second == "max_pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  e = mp(img, {2, 2}, {}, {0, 0}, {1, 1, 1});
  CHECK(e.second == "max_pool2d: dilation must be either a single int, or a tuple of two ints");
  e = mp(A({1, 0, 4, 4}), {2, 2}, {}, {0, 0}, {1, 1});
  CHECK(e.second == "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:[1, 0, 4, 4]");
  e = mp(A({1, 1, 4, 4}, -1, 1, false, DType::Float16), {2, 2}, {}, {0, 0}, {1, 1});
  CHECK(e.first == "dtype_mismatch");
  CHECK(e.second == "\"max_pool2d\" not implemented for 'Half'");
  e = mp(A({1, 1, 2, 2}), {2, 2}, {}, {0, 0}, {2, 2});
  CHECK(e.second == "Given input size: (1x2x2). Calculated output size: (1x0x0). Output size is too small");
  // An empty batch is fine.
  CHECK(ops::max_pool2d(A({0, 1, 4, 4}), {2}, {}, {0}, {1}, false).output->sizes == Shape{0, 1, 2, 2});
}

TEST_CASE("nn errors: convolution and pooling geometry beyond int64 and int32", "[nn][errors]") {
  Tensor img = A({1, 1, 5, 5});
  Tensor w = A({1, 1, 3, 3});
  const int64_t two_62 = int64_t{1} << 62;
  auto conv = [&](std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d) {
    return error_of([&] { ops::conv2d(img, w, nullptr, conv_args(s, p, d)); });
  };
  // The kernel's extent 2**62 * 2 + 1 is reported exactly (1.13 wraps it in int64 and
  // returns a 5x5 output).
  auto e = conv({1, 1}, {0, 0}, {two_62, two_62});
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "Calculated padded input size per channel: (5 x 5). Kernel size: (9223372036854775809 x "
                    "9223372036854775809). Kernel size can't be greater than actual input size");
  e = conv({1, 1}, {0, 0}, {1, two_62});
  CHECK(e.second == "Calculated padded input size per channel: (5 x 5). Kernel size: (3 x 9223372036854775809). "
                    "Kernel size can't be greater than actual input size");
  e = conv({1, 1}, {two_62, two_62}, {1, 1});
  CHECK(e.first == "shape_mismatch");
  CHECK(e.second == "Calculated padded input size per channel: (9223372036854775813 x 9223372036854775813) does not "
                    "fit in int64");
  // A stride beyond the input is a 1x1 output, as in 1.13.
  CHECK(ops::conv2d(img, w, nullptr, conv_args({two_62, two_62}, {0, 0}, {1, 1}))->sizes == Shape{1, 1, 1, 1});

  // max_pool2d narrows its parameters with safe_downcast<int> (measured in 1.13).
  auto mp = [&](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d) {
    return error_of([&] { ops::max_pool2d(img, k, s, p, d, false); });
  };
  const int64_t two_31 = int64_t{1} << 31;
  for (const auto& bad : {mp({3, 3}, {two_31, two_31}, {0, 0}, {1, 1}), mp({3, 3}, {}, {0, 0}, {two_31, 1}),
                          mp({two_31, two_31}, {}, {two_31 / 2, 0}, {1, 1}), mp({3, 3}, {}, {1, 1}, {two_62, two_62})}) {
    CHECK(bad.first == "index_out_of_range");
    CHECK(bad.second == "integer out of range");
  }
  CHECK(ops::max_pool2d(img, {3, 3}, {two_31 - 1, two_31 - 1}, {0, 0}, {1, 1}, false).output->sizes ==
        Shape{1, 1, 1, 1});
  e = mp({3, 3}, {}, {0, 0}, {two_31 - 1, two_31 - 1});
  CHECK(e.second == "Given input size: (1x5x5). Calculated output size: (1x-1431655763x-1431655763). Output size is "
                    "too small");

  // avg_pool2d computes its output size in int64 and checks the parameters narrowed to int.
  auto ap = [&](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
    ops::AvgPool2dArgs a;
    a.kernel_size = std::move(k), a.stride = std::move(s), a.padding = std::move(p);
    return error_of([&] { ops::avg_pool2d(img, a); });
  };
  e = ap({3, 3}, {two_31, two_31}, {0, 0});
  CHECK(e.first == "type_error");
  CHECK(e.second == "stride should be greater than zero, but got dH: -2147483648 dW: -2147483648");
  e = ap({two_31, two_31}, {}, {two_31 / 2, two_31 / 2});
  CHECK(e.second == "kernel size should be greater than zero, but got kH: -2147483648 kW: -2147483648");
  // The sizes are computed without overflow: a kernel of 2**63 - 1 with padding 2**62 - 1
  // reaches the kernel check (measured in 1.13: "kH: -1").
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  e = ap({max64, max64}, {1, 1}, {two_62 - 1, two_62 - 1});
  CHECK(e.second == "kernel size should be greater than zero, but got kH: -1 kW: -1");
  e = ap({3, 3}, {max64, max64}, {0, 0});
  CHECK(e.second == "stride should be greater than zero, but got dH: -1 dW: -1");
  // Past those checks 1.13 mixes narrowed and int64 values: refused.
  e = ap({(int64_t{1} << 32) + 3, (int64_t{1} << 32) + 3}, {}, {1, 1});
  CHECK(e.first == "unsupported");
}

// ================================================================ through the interpreter

TEST_CASE("nn through the interpreter: Python-level facts", "[nn][interp]") {
  const std::string tensors = R"JSON(
    "x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
    "img": {"shape": [1, 2, 4, 4], "requires_grad": true, "init": {"linspace": [-1, 1]}},
    "cw": {"shape": [3, 2, 3, 3], "requires_grad": true, "init": {"linspace": [-0.5, 0.5]}},
    "E": {"shape": [4, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
    "idx": {"shape": [2, 2], "dtype": "int64", "init": {"values": [0, 2, 3, 0]}},
    "rm": {"shape": [3], "init": "zeros"},
    "rv": {"shape": [3], "init": "ones"})JSON";
  auto r = agtrace::test::run_text(scenario(tensors, R"JSON([
    "print(F.dropout(x, 0.5, training=False) is x, F.dropout(x, 0.0) is x)",
    "n = F.layer_norm(x, (3,)).grad_fn",
    "print(n._saved_result1 is n._saved_result1, n._saved_result1.requires_grad, n._saved_normalized_shape, n._saved_weight)",
    "b = F.batch_norm(x, rm, rv, training=True)",
    "print(rm._version, rv._version, b.grad_fn._saved_running_mean is rm, b.grad_fn._saved_eps, b.grad_fn._saved_training)",
    "c = F.conv2d(img, cw, padding=(1,), stride=2)",
    "print(c.grad_fn._saved_padding, c.grad_fn._saved_stride, c.grad_fn._saved_output_padding, c.grad_fn._saved_bias_sym_sizes_opt)",
    "v = F.conv2d(img, cw, padding='valid')",
    "print(v.grad_fn._saved_padding, v.grad_fn._saved_output_padding, v.shape)",
    "m, i = F.max_pool2d(img, 2, return_indices=True)",
    "print(m.grad_fn._saved_result1 is i, m.grad_fn._saved_stride, m.grad_fn._saved_padding, i.dtype)",
    "e = F.embedding(idx, E)",
    "print(e.grad_fn._saved_padding_idx, e.grad_fn._saved_indices is idx, len(e.grad_fn.next_functions))",
    {"try": ["F.dropout(x, 1.5)"]},
    {"try": ["F.layer_norm(x, 3)"]},
    {"try": ["F.embedding(idx, E, max_norm=1.0)"]},
    "d = F.dropout(x)",
    "print(d.grad_fn.name(), d.grad_fn._saved_other._version, d.grad_fn._saved_self)"
  ])JSON"));
  REQUIRE(r.printed.size() == 8);
  CHECK(r.printed[0] == "True True");
  CHECK(r.printed[1] == "True False (3,) None");
  CHECK(r.printed[2] == "0 0 True 1e-05 True");
  CHECK(r.printed[3] == "(1,) (2, 2) (0, 0) (0,)");
  CHECK(r.printed[4] == "(0,) (0,) torch.Size([1, 3, 2, 2])");
  CHECK(r.printed[5] == "True () (0, 0) torch.int64");
  CHECK(r.printed[6] == "18446744073709551615 True 1");
  CHECK(r.printed[7] == "MulBackward0 2 None");
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0].kind == "type_error");
  CHECK(r.errors[0].message == "dropout probability has to be between 0 and 1, but got 1.5");
  CHECK(r.errors[1].kind == "type_error");
  CHECK(r.errors[1].message == "layer_norm(): argument 'normalized_shape' must be tuple of ints, not int");
  CHECK(r.errors[2].kind == "unsupported");
}

// ================================================================ meta device

TEST_CASE("nn on the meta device: shapes, nodes and saved values without data", "[nn][meta]") {
  auto meta = [](const Shape& s, bool rg = true) {
    Tensor t = agtrace::kernels::full(s, 0.0, DType::Float32, true);
    t->requires_grad_flag = rg;
    return t;
  };
  Tensor x = meta({2, 3}), w = meta({3}), b = meta({3});
  Tensor ln = ops::layer_norm(x, {3}, w, b, 1e-5);
  CHECK(fn(ln).unpack("result1")->sizes == Shape{2, 1});
  Tensor bn = ops::batch_norm(meta({4, 3, 2}), meta({3}, false), meta({3}, false), w, b, true, 0.1, 1e-5);
  CHECK(bn->sizes == Shape{4, 3, 2});
  SplitMix64 gen(1), untouched(1);
  Tensor d = ops::dropout(x, 0.5, true, false, gen);
  CHECK(fn(d).unpack("other")->is_meta());
  CHECK(gen.next() == untouched.next());
  Tensor e = ops::embedding(agtrace::kernels::full({5}, 0.0, DType::Int64, true), meta({4, 3}), std::nullopt, false, false);
  CHECK(e->sizes == Shape{5, 3});
  Tensor c = ops::conv2d(meta({2, 2, 5, 5}), meta({3, 2, 3, 3}), meta({3}), conv_args({2, 2}, {1, 1}));
  CHECK(c->sizes == Shape{2, 3, 3, 3});
  auto p = ops::max_pool2d(c, {2}, {}, {0}, {1}, true);
  CHECK(p.output->sizes == Shape{2, 3, 2, 2});
  CHECK(p.indices->is_meta());
  for (const Tensor& y : {ln, bn, d, e, p.output}) {
    backward_of_sum(y);
  }
  CHECK(x->grad->is_meta());
  CHECK(x->grad->sizes == Shape{2, 3});
}

TEST_CASE("nn: bfloat16 conv2d on a CPU without AVX-512 rounds as 1.13's slow_conv2d", "[nn][fidelity]") {
  // Without avx512bw/vl/dq 1.13 skips oneDNN and runs slow_conv2d: columns times weight in
  // cpublas::gemm's bfloat16 loops, the input gradient folded back with one bfloat16 add per
  // tap, the bias gradient summed per sample. x_i = ((37 i) mod 101 - 50) / 16, w_i = ((29 i)
  // mod 97 - 48) / 32, b_i = ((13 i) mod 29 - 14) / 8, grad_i = ((7 i) mod 23 - 11) / 8, all
  // exact in bfloat16; stride (2, 1), padding 1. References: F.conv2d and backward in 1.13 on
  // an AMD EPYC with AVX2 only (the oneDNN rounding gives other sums).
  const Bf16KernelsOf avx2_machine(agtrace::kernels::Bf16CpuKernels::Cpublas);
  auto pattern = [](const Shape& shape, int64_t mul, int64_t mod, int64_t off, double den) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>((i * mul) % mod - off) / den);
    Tensor t = agtrace::tensor_from_values(shape, DType::BFloat16, v);
    return t;
  };
  Tensor x = pattern({2, 3, 7, 7}, 37, 101, 50, 16.0), w = pattern({4, 3, 3, 3}, 29, 97, 48, 32.0);
  Tensor b = pattern({4}, 13, 29, 14, 8.0);
  for (Tensor* t : {&x, &w, &b}) (*t)->requires_grad_flag = true;
  Tensor y = ops::conv2d(x, w, b, conv_args({2, 1}, {1, 1}));
  auto first4_and_sum = [](const Tensor& t) {
    const std::vector<double> v = agtrace::to_values(t);
    double sum = 0.0;
    for (double e : v) sum += e;
    return std::make_pair(std::vector<double>(v.begin(), v.begin() + 4), sum);
  };
  CHECK(y->sizes == Shape{2, 4, 4, 7});
  CHECK(first4_and_sum(y) == std::make_pair(std::vector<double>{1.984375, -7.5, -3.09375, -3.03125}, -19.576171875));
  autograd::BackwardRequest req;
  req.roots = {y};
  req.grad_roots = {pattern({2, 4, 4, 7}, 7, 23, 11, 8.0)};
  autograd::run_backward(req);
  CHECK(first4_and_sum(x->grad) ==
        std::make_pair(std::vector<double>{1.734375, -1.3515625, 0.578125, -2.25}, -2.86328125));
  CHECK(first4_and_sum(w->grad) == std::make_pair(std::vector<double>{17.0, -20.125, -0.1796875, -2.21875}, -12.3515625));
  CHECK(agtrace::to_values(b->grad) == std::vector<double>{-3.625, 2.75, -2.375, 4.0});
  // A float32 weight is slow_conv2d's type message; dilation (slow_conv_dilated2d) is refused.
  CHECK(error_of([&] { ops::conv2d(x, ops::to_dtype(pattern({4, 3, 3, 3}, 29, 97, 48, 32.0), DType::Float32), nullptr,
                                   conv_args()); }) ==
        std::make_pair(std::string("dtype_mismatch"), std::string("expected scalar type BFloat16 but found Float")));
  CHECK(error_of([&] { ops::conv2d(x, w, b, conv_args({1, 1}, {1, 1}, {2, 2})); }).first == "unsupported");
}
