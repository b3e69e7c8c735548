// F.conv1d (lib/ops/nn.cpp): the node, saved values and values PyTorch 1.13 gives
// (measured with /usr/bin/python3; linspace_leaf(...) = torch.linspace(lo, hi, numel).reshape(...)),
// gradients by central differences in float64, and the errors.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;
using namespace agtrace::test;

namespace {

using Vals = std::vector<double>;
constexpr const char* kAcc = "AccumulateGrad";

ops::Conv2dArgs args1d(std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                       std::vector<int64_t> dilation = {1}, int64_t groups = 1) {
  ops::Conv2dArgs a;
  a.stride = stride, a.padding = padding, a.dilation = dilation, a.output_padding = {0}, a.groups = groups;
  return a;
}

void check_prefix(const Tensor& t, const Vals& expected, double eps = 1e-5) {
  const Vals got = agtrace::to_values(t);
  REQUIRE(got.size() >= expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(eps).margin(1e-6));
  }
}

// Sums y and runs backward on the sum.
void backward_of_sum(const Tensor& y) {
  autograd::BackwardRequest req;
  req.roots = {ops::sum(y, std::nullopt, false)};
  autograd::run_backward(req);
}

std::string message_of(const std::function<void()>& f) { return raised_error(f).what(); }
std::string kind_of(const std::function<void()>& f) { return raised_error(f).kind; }

}  // namespace

TEST_CASE("conv1d: node, saved values, values and gradients", "[conv1d][fidelity]") {
  Tensor x = linspace_leaf({2, 4, 7}), w = linspace_leaf({6, 2, 3}, -0.5, 0.5), b = linspace_leaf({6}, -0.1, 0.2);
  Tensor y = ops::conv1d(x, w, b, args1d({2}, {1}, {2}, 2));
  Node& n = fn(y);
  CHECK(n.name == "ConvolutionBackward0");
  CHECK(next_names(n) == Names{kAcc, kAcc, kAcc});
  CHECK(saved_names(n) == Names{"bias_sym_sizes_opt", "dilation", "groups", "input", "output_padding", "padding",
                                "stride", "transposed", "weight"});
  CHECK(n.unpack("input") == x);
  CHECK(n.unpack("weight") == w);
  CHECK(attr(n, "bias_sym_sizes_opt") == "(6,)");
  CHECK(attr(n, "dilation") == "(2,)");
  CHECK(attr(n, "groups") == "2");
  CHECK(attr(n, "output_padding") == "(0,)");
  CHECK(attr(n, "padding") == "(1,)");
  CHECK(attr(n, "stride") == "(2,)");
  CHECK(attr(n, "transposed") == "False");
  CHECK(y->sizes == Shape{2, 6, 3});
  check_prefix(y, {1.2496104, 1.9046754, 1.2122078, 0.761039, 1.1792208, 0.7735065, 0.2724676, 0.4537663});
  backward_of_sum(y);
  check_prefix(x->grad, {0.0, -1.8857142925262451, 0.0, -2.700000047683716, 0.0, -1.7142858505249023});
  check_prefix(w->grad, {-1.6727272272109985, -2.2909090518951416, -1.3818182945251465, -0.6545455455780029,
                         -0.7636364698410034, -0.3636363744735718});
  check_prefix(b->grad, {6, 6, 6, 6, 6, 6});
}

TEST_CASE("conv1d: an unbatched input runs between unsqueeze(0) and squeeze(0)", "[conv1d][fidelity]") {
  Tensor x = linspace_leaf({4, 7}), w = linspace_leaf({6, 2, 3}, -0.5, 0.5);
  Tensor y = ops::conv1d(x, w, nullptr, args1d({1}, {0}, {1}, 2), "same");
  CHECK(y->sizes == Shape{6, 7});
  Node& sq = fn(y);
  CHECK(sq.name == "SqueezeBackward1");
  CHECK(attr(sq, "dim") == "0");
  CHECK(next_names(sq) == Names{"ConvolutionBackward0"});
  Node& conv = *sq.next[0].fn;
  CHECK(attr(conv, "padding") == "(1,)");
  CHECK(next_names(conv) == Names{"UnsqueezeBackward0", kAcc, "None"});
  CHECK(conv.unpack("input")->sizes == Shape{1, 4, 7});
  check_prefix(y, {1.2126985, 1.789418, 1.5989417, 1.4084656, 1.2179893});
  backward_of_sum(y);
  check_prefix(x->grad, {-1.8857142925262451, -2.700000047683716, -2.700000047683716, -2.700000047683716,
                         -2.700000047683716, -2.700000047683716, -1.7142858505249023});
}

TEST_CASE("gradcheck: conv1d", "[conv1d][gradcheck]") {
  check_gradients("bias, stride 2, padding 1, dilation 2, groups 2",
                  {leaf64({2, 4, 9}, -1, 1), leaf64({6, 2, 3}, -0.5, 0.5, true, 0.2), leaf64({6}, -0.1, 0.2, true, 0.7)},
                  [](const Inputs& in) { return ops::conv1d(in[0], in[1], in[2], args1d({2}, {1}, {2}, 2)); });
  check_gradients("unbatched, no bias, kernel 1",
                  {leaf64({3, 5}, -1, 1), leaf64({2, 3, 1}, -0.5, 0.5, true, 0.2)},
                  [](const Inputs& in) { return ops::conv1d(in[0], in[1], nullptr, args1d()); });
}

TEST_CASE("conv1d errors (messages measured)", "[conv1d][errors]") {
  Tensor x = linspace_leaf({2, 4, 10}), w = linspace_leaf({6, 2, 3});
  CHECK(message_of([&] { ops::conv1d(linspace_leaf({2, 4, 10, 3}), w, nullptr, args1d()); }) ==
        "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [2, 4, 10, 3]");
  CHECK(message_of([&] { ops::conv1d(x, w, nullptr, args1d({1, 1})); }) ==
        "expected stride to be a single integer value or a list of 1 values to match the convolution dimensions, but "
        "got stride=[1, 1]");
  CHECK(message_of([&] { ops::conv1d(x, linspace_leaf({6, 2, 3, 3}), nullptr, args1d()); }) ==
        "Expected 4-dimensional input for 4-dimensional weight [6, 2, 3, 3], but got 3-dimensional input of size "
        "[2, 4, 10] instead");
  CHECK(message_of([&] { ops::conv1d(x, w, nullptr, args1d({1}, {0}, {1}, 3)); }) ==
        "Given groups=3, weight of size [6, 2, 3], expected input[2, 4, 10] to have 6 channels, but got 4 channels "
        "instead");
  CHECK(message_of([&] { ops::conv1d(x, w, nullptr, args1d({2}, {0}, {1}, 2), "same"); }) ==
        "padding='same' is not supported for strided convolutions");
  CHECK(message_of([&] { ops::conv1d(x, linspace_leaf({6, 2, 30}), nullptr, args1d({1}, {0}, {1}, 2)); }) ==
        "Calculated padded input size per channel: (10). Kernel size: (30). Kernel size can't be greater than actual "
        "input size");
  CHECK(message_of([&] { ops::conv1d(x, w, nullptr, args1d({1}, {0}, {1, 1}, 2), "same"); }) ==
        "dilation cannot broadcast to 1 dimensions");
  CHECK(message_of([&] { ops::conv1d(x, w, nullptr, args1d({1}, {0}, {1}, 2), "foo"); }) ==
        "Invalid padding string: 'foo'");
  const Tensor xh = linspace_leaf({2, 4, 10}, -1, 1, false, DType::Float16);
  const Tensor wh = linspace_leaf({6, 4, 3}, -1, 1, false, DType::Float16);
  CHECK(message_of([&] { ops::conv1d(xh, wh, nullptr, args1d()); }) == "\"slow_conv2d_cpu\" not implemented for 'Half'");
  // PyTorch's messages for these depend on the backend it picks for the shape: refused.
  const Tensor w64 = linspace_leaf({6, 4, 3}, -1, 1, true, DType::Float64);
  CHECK(kind_of([&] { ops::conv1d(x, w64, nullptr, args1d()); }) == "unsupported");
  CHECK(kind_of([&] { ops::conv1d(x, linspace_leaf({6, 4, 3}), nullptr, args1d({1}, {0}, {0})); }) == "unsupported");
}
