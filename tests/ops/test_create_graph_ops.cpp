// create_graph=True through every op family (issue #3): for each op, the walk of the
// gradient's own graph is the one PyTorch 1.13 records (measured with /usr/bin/python3,
// walking g.grad_fn of `g, = torch.autograd.grad(y, [w], create_graph=True)` for the same
// expressions and values), and the second derivative through that graph matches central
// differences of the first-order gradient (float64).
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/double_backward.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "support/create_graph.hpp"
#include "tensor/tensor.hpp"

namespace {

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::test::cg_grad;
using agtrace::test::cg_leaf;
using agtrace::test::cg_total;
using agtrace::test::cg_walk;
using agtrace::test::check_second_order;
namespace ops = agtrace::ops;
using Names = std::vector<std::string>;

// The leaves, in this order (values as in the torch measurement).
enum { X, P, T, B, C, S, W, LB, B1, B2, V, C3, MP };
const std::vector<Shape> kShapes{{2, 3}, {2, 3}, {2, 3}, {3}, {2, 1}, {}, {3, 2}, {2}, {2, 2, 3}, {2, 3, 2}, {3}, {2, 1, 3, 1},
                                    {1, 1, 4, 4}};
std::vector<std::vector<double>> values() {
  std::vector<double> b1, b2;
  for (int i = 0; i < 12; ++i) {
    b1.push_back(0.1 * i - 0.5);
    b2.push_back(0.3 - 0.07 * i);
  }
  return {{0.5, 1.5, -2.0, 1.0, -0.3, 2.5}, {0.5, 1.5, 2.0, 1.0, 0.3, 2.5}, {0.3, -0.5, 0.8, -0.2, 0.6, 0.1},
          {0.7, -1.2, 0.4},                 {1.3, -0.6},                     {1.7},
          {0.2, -1.0, 0.7, 0.4, 1.1, -0.6}, {0.1, -0.3},                     b1,
          b2,                               {0.4, -0.9, 1.3},                {0.1, 0.2, 0.3, 0.4, 0.5, 0.6},
          {0.1, 0.9, -0.3, 0.4, 0.7, -0.2, 0.5, 1.2, -0.6, 0.8, 0.05, 0.3, 1.1, -0.9, 0.6, 0.2}};
}

Value I(int64_t v) { return Value::integer(v); }
Value R(double v) { return Value::real(v); }
Tensor sq(const Tensor& t) { return ops::pow_scalar(t, I(2)); }
Tensor longs(const Shape& shape, const std::vector<double>& v) { return agtrace::tensor_from_values(shape, DType::Int64, v); }
Tensor gt0(const Tensor& t) { return ops::compare(t, ops::wrap_number(I(0)), "gt"); }
const std::optional<std::vector<int64_t>> kAll = std::nullopt;

struct Case {
  const char* name;
  size_t wrt;
  agtrace::test::CgFn f;
  Names walk;
};

std::vector<Case> cases() {
  using L = const std::vector<Tensor>&;
  return {
      // Broadcast gradients: the engine's validate_outputs runs at::sum_to in grad mode.
      {"mul_bcast_row", B, [](L e) { return cg_total(ops::mul(e[X], e[B])); },
       {"ViewBackward0", "SumBackward1", "MulBackward0", "AccumulateGrad"}},
      {"mul_bcast_col", C, [](L e) { return cg_total(ops::mul(e[X], e[C])); },
       {"SumBackward1", "MulBackward0", "AccumulateGrad"}},
      {"mul_bcast_0d", S, [](L e) { return cg_total(ops::mul(e[X], e[S])); },
       {"SumBackward0", "MulBackward0", "AccumulateGrad"}},
      {"add_bcast", B, [](L e) { return cg_total(sq(ops::add(e[X], e[B], I(1)))); },
       {"ViewBackward0", "SumBackward1", "MulBackward0", "MulBackward1", "PowBackward0", "AddBackward0",
        "AccumulateGrad", "AccumulateGrad"}},
      {"sub_bcast", B, [](L e) { return cg_total(sq(ops::sub(e[X], e[B], I(1)))); },
       {"ViewBackward0", "SumBackward1", "NegBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "SubBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"div_bcast", B, [](L e) { return cg_total(ops::div(e[X], e[B])); },
       {"ViewBackward0", "SumBackward1", "MulBackward0", "DivBackward0", "DivBackward0", "AccumulateGrad",
        "AccumulateGrad"}},
      {"add_alpha_bcast", B, [](L e) { return cg_total(sq(ops::add(e[X], e[B], I(2)))); },
       {"ViewBackward0", "SumBackward1", "MulBackward1", "MulBackward0", "MulBackward1", "PowBackward0",
        "AddBackward0", "AccumulateGrad", "AccumulateGrad"}},
      // Views and shape ops.
      {"permute", X, [](L e) { return cg_total(sq(ops::permute(e[X], {1, 0}))); },
       {"PermuteBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "PermuteBackward0", "AccumulateGrad"}},
      {"expand", C, [](L e) { return cg_total(sq(ops::expand(e[C], {2, 3}))); },
       {"SumBackward1", "MulBackward0", "MulBackward1", "PowBackward0", "ExpandBackward0", "AccumulateGrad"}},
      {"expand_lead", X, [](L e) { return cg_total(sq(ops::expand(e[X], {4, 2, 3}))); },
       {"ViewBackward0", "SumBackward1", "MulBackward0", "MulBackward1", "PowBackward0", "ExpandBackward0",
        "AccumulateGrad"}},
      {"unsqueeze", X, [](L e) { return cg_total(sq(ops::unsqueeze(e[X], -1))); },
       {"SqueezeBackward1", "MulBackward0", "MulBackward1", "PowBackward0", "UnsqueezeBackward0", "AccumulateGrad"}},
      {"squeeze", C3, [](L e) { return cg_total(sq(ops::squeeze(e[C3]))); },
       {"UnsqueezeBackward0", "UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "SqueezeBackward0", "AccumulateGrad"}},
      {"squeeze_dim", C, [](L e) { return cg_total(sq(ops::squeeze(e[C], -1))); },
       {"UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "SqueezeBackward1", "AccumulateGrad"}},
      {"select", X, [](L e) { return cg_total(sq(ops::select(e[X], -1, -2))); },
       {"SelectBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "SelectBackward0",
        "AccumulateGrad"}},
      {"slice", X,
       [](L e) { return cg_total(ops::pow_scalar(ops::slice(ops::slice(e[X], 0, 0, std::nullopt, 1), 1, 1, std::nullopt, 1), I(3))); },
       {"SliceBackwardBackward0", "SliceBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "SliceBackward0", "SliceBackward0", "AccumulateGrad"}},
      {"cat", X, [](L e) { return cg_total(sq(ops::cat({e[X], e[P]}, -1))); },
       {"SliceBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "CatBackward0", "AccumulateGrad",
        "AccumulateGrad"}},
      {"stack", X, [](L e) { return cg_total(sq(ops::stack({e[X], e[P]}, -1))); },
       {"SelectBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "StackBackward0", "AccumulateGrad",
        "AccumulateGrad"}},
      {"split", X, [](L e) { return cg_total(sq(ops::split(e[X], 1, -1)[0])); },
       {"CatBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "SplitBackward0", "AccumulateGrad"}},
      {"unbind", X, [](L e) { return cg_total(sq(ops::unbind(e[X], -1)[1])); },
       {"StackBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "UnbindBackward0", "AccumulateGrad"}},
      {"index_select", X, [](L e) { return cg_total(sq(ops::index_select(e[X], 1, longs({3}, {2, 0, 2})))); },
       {"IndexAddBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "IndexSelectBackward0",
        "AccumulateGrad"}},
      {"index", X, [](L e) { return cg_total(sq(ops::index_with_tensor(e[X], longs({3}, {1, 0, 1})))); },
       {"IndexPutImplBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "IndexBackward0",
        "AccumulateGrad"}},
      {"embedding", X,
       [](L e) { return cg_total(sq(ops::embedding(longs({3}, {1, 0, 1}), e[X], std::nullopt, false, false))); },
       {"EmbeddingDenseBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "EmbeddingBackward0",
        "AccumulateGrad"}},
      {"embedding_padding", X,
       [](L e) { return cg_total(sq(ops::embedding(longs({2, 2}, {1, 0, 1, 1}), e[X], 0, false, false))); },
       {"EmbeddingDenseBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "EmbeddingBackward0",
        "AccumulateGrad"}},
      // Pointwise math and activations.
      {"pow_tensor_self", P, [](L e) { return cg_total(ops::pow_tensor(e[P], e[T])); },
       {"WhereBackward0", "MulBackward0", "MulBackward0", "AccumulateGrad", "PowBackward1", "AccumulateGrad",
        "SubBackward1"}},
      {"pow_tensor_exponent", T, [](L e) { return cg_total(ops::pow_tensor(e[P], e[T])); },
       {"MulBackward0", "WhereBackward0", "MulBackward0", "PowBackward1", "AccumulateGrad", "AccumulateGrad",
        "LogBackward0"}},
      {"rpow", X, [](L e) { return cg_total(ops::rpow(R(2.0), e[X])); },
       {"MulBackward0", "WhereBackward0", "MulBackward0", "PowBackward1", "AccumulateGrad"}},
      {"rsub", X, [](L e) { return cg_total(sq(ops::rsub(e[X], R(2.0), I(3)))); },
       {"MulBackward1", "NegBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "RsubBackward1",
        "AccumulateGrad"}},
      {"reciprocal", P, [](L e) { return cg_total(sq(ops::reciprocal(e[P]))); },
       {"MulBackward0", "NegBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "ReciprocalBackward0",
        "AccumulateGrad", "MulBackward0"}},
      {"abs", X, [](L e) { return cg_total(sq(ops::abs(e[X]))); },
       {"MulBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "AbsBackward0", "AccumulateGrad",
        "SgnBackward0"}},
      {"sin", X, [](L e) { return cg_total(ops::mul(ops::sin(e[X]), e[T])); },
       {"MulBackward0", "MulBackward0", "AccumulateGrad", "CosBackward0", "AccumulateGrad"}},
      {"cos", X, [](L e) { return cg_total(ops::mul(ops::cos(e[X]), e[T])); },
       {"MulBackward0", "MulBackward0", "AccumulateGrad", "NegBackward0", "SinBackward0", "AccumulateGrad"}},
      {"rsqrt", P, [](L e) { return cg_total(sq(ops::rsqrt(e[P]))); },
       {"MulBackward0", "MulBackward1", "MulBackward0", "MulBackward1", "PowBackward0", "RsqrtBackward0",
        "AccumulateGrad", "PowBackward0"}},
      {"clamp", X, [](L e) { return cg_total(sq(ops::clamp(e[X], R(-1.0), R(1.2)))); },
       {"WhereBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "ClampBackward1", "AccumulateGrad"}},
      {"leaky_relu", X, [](L e) { return cg_total(ops::mul(ops::leaky_relu(e[X], R(0.1)), e[T])); },
       {"LeakyReluBackwardBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"gelu", X, [](L e) { return cg_total(ops::mul(ops::gelu(e[X], "none"), e[T])); },
       {"GeluBackwardBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"gelu_tanh", X, [](L e) { return cg_total(ops::mul(ops::gelu(e[X], "tanh"), e[T])); },
       {"GeluBackwardBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"silu", X, [](L e) { return cg_total(ops::mul(ops::silu(e[X]), e[T])); },
       {"MulBackward0", "MulBackward0", "MulBackward0", "AccumulateGrad", "SigmoidBackward0", "AccumulateGrad",
        "AddBackward1", "MulBackward0", "SubBackward0"}},
      {"softmax", X, [](L e) { return cg_total(ops::mul(ops::softmax(e[X], -1), e[T])); },
       {"SoftmaxBackwardDataBackward0", "MulBackward0", "AccumulateGrad", "SoftmaxBackward0", "AccumulateGrad"}},
      {"log_softmax", X, [](L e) { return cg_total(ops::mul(ops::log_softmax(e[X], 0), e[T])); },
       {"LogSoftmaxBackwardDataBackward0", "MulBackward0", "AccumulateGrad", "LogSoftmaxBackward0",
        "AccumulateGrad"}},
      {"where", X, [](L e) { return cg_total(sq(ops::where(gt0(e[T]), e[X], e[P]))); },
       {"WhereBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "WhereBackward0", "AccumulateGrad",
        "AccumulateGrad"}},
      {"masked_fill", X, [](L e) { return cg_total(sq(ops::masked_fill(e[X], gt0(e[T]), R(0.5)))); },
       {"MaskedFillBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MaskedFillBackward0",
        "AccumulateGrad"}},
      {"max_all", X, [](L e) { return sq(ops::max_all(e[X])); },
       {"MaskedFillBackward1", "DivBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MaxBackward1",
        "AccumulateGrad"}},
      {"max_dim", X, [](L e) { return cg_total(sq(ops::max_dim(e[X], -1, false).first)); },
       {"ScatterBackward0", "UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MaxBackward0",
        "AccumulateGrad"}},
      {"max_dim_keepdim", X, [](L e) { return cg_total(sq(ops::max_dim(e[X], 0, true).first)); },
       {"ScatterBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MaxBackward0", "AccumulateGrad"}},
      {"amax", X, [](L e) { return cg_total(sq(ops::amax(e[X], {1}, false))); },
       {"MulBackward0", "DivBackward0", "ReshapeAliasBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "AmaxBackward0", "AccumulateGrad"}},
      {"amax_all", X, [](L e) { return sq(ops::amax(e[X], {}, false)); },
       {"MulBackward0", "DivBackward0", "ReshapeAliasBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "AmaxBackward0", "AccumulateGrad"}},
      {"norm", X, [](L e) { return sq(ops::norm(e[X], I(2), {}, false)); },
       {"MulBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "NormBackward1", "AccumulateGrad",
        "MaskedFillBackward0", "DivBackward0"}},
      {"norm_dim", X, [](L e) { return cg_total(sq(ops::norm(e[X], I(2), {1}, false))); },
       {"MulBackward0", "UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "NormBackward1",
        "AccumulateGrad", "MaskedFillBackward0", "DivBackward0", "UnsqueezeBackward0"}},
      {"norm_p1", X, [](L e) { return cg_total(sq(ops::norm(e[X], I(1), {0}, false))); },
       {"MulBackward0", "SgnBackward0", "AccumulateGrad", "UnsqueezeBackward0", "MulBackward0", "MulBackward1",
        "PowBackward0", "NormBackward1"}},
      {"var", X, [](L e) { return ops::var(e[X], kAll, 1, false); },
       {"MulBackward0", "SubBackward0", "AccumulateGrad", "MeanBackward0"}},
      {"var_dim", X, [](L e) { return cg_total(sq(ops::var(e[X], std::vector<int64_t>{1}, 1, false))); },
       {"MulBackward0", "MulBackward1", "UnsqueezeBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "VarBackward0", "AccumulateGrad", "SubBackward0", "MeanBackward1"}},
      // The matmul family.
      {"bmm", B1, [](L e) { return cg_total(sq(ops::bmm(e[B1], e[B2]))); },
       {"BmmBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "BmmBackward0", "AccumulateGrad",
        "AccumulateGrad", "TransposeBackward0"}},
      {"addmm_bias", LB, [](L e) { return cg_total(sq(ops::addmm(e[LB], e[X], e[W], I(2), R(0.5)))); },
       {"ViewBackward0", "SumBackward1", "MulBackward1", "MulBackward0", "MulBackward1", "PowBackward0",
        "AddmmBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"}},
      {"addmm_mat1", X, [](L e) { return cg_total(sq(ops::addmm(e[LB], e[X], e[W], I(2), R(0.5)))); },
       {"MulBackward1", "MmBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "AddmmBackward0",
        "AccumulateGrad", "AccumulateGrad", "AccumulateGrad", "TBackward0"}},
      {"linear_weight", T, [](L e) { return cg_total(sq(ops::linear(e[X], e[T], e[LB]))); },
       {"TBackward0", "TBackward0", "MmBackward0", "TBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "AddmmBackward0", "AccumulateGrad", "AccumulateGrad", "TBackward0", "AccumulateGrad"}},
      {"mv", X, [](L e) { return cg_total(sq(ops::matmul(e[X], e[V]))); },
       {"MulBackward0", "ReshapeAliasBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "MvBackward0",
        "AccumulateGrad", "AccumulateGrad"}},
      {"mv_vec", V, [](L e) { return cg_total(sq(ops::matmul(e[X], e[V]))); },
       {"MvBackward0", "TBackward0", "AccumulateGrad", "MulBackward0", "MulBackward1", "PowBackward0", "MvBackward0",
        "AccumulateGrad"}},
      {"dot", V, [](L e) { return sq(ops::matmul(e[V], e[B])); },
       {"MulBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "DotBackward0", "AccumulateGrad",
        "AccumulateGrad"}},
      {"matmul_3d", B1, [](L e) { return cg_total(sq(ops::matmul(e[B1], e[W]))); },
       {"ReshapeAliasBackward0", "MmBackward0", "ReshapeAliasBackward0", "MulBackward0", "MulBackward1",
        "PowBackward0", "UnsafeViewBackward0", "MmBackward0", "ReshapeAliasBackward0", "AccumulateGrad",
        "AccumulateGrad", "TBackward0"}},
      {"max_pool2d", MP, [](L e) { return cg_total(sq(ops::max_pool2d(e[MP], {2, 2}, {}, {0, 0}, {1, 1}, false).output)); },
       {"MaxPool2DWithIndicesBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
        "MaxPool2DWithIndicesBackward0", "AccumulateGrad"}},
      {"layer_norm_input", X, [](L e) { return cg_total(ops::mul(ops::layer_norm(e[X], {3}, e[B], e[V], 1e-5), e[T])); },
       {"NativeLayerNormBackwardBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad",
        "AccumulateGrad"}},
      {"layer_norm_weight", B,
       [](L e) { return cg_total(ops::mul(ops::layer_norm(e[X], {3}, e[B], nullptr, 1e-5), e[T])); },
       {"NativeLayerNormBackwardBackward0", "MulBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"}},
      // Losses.
      {"mse", X, [](L e) { return ops::mse_loss(e[X], e[T], 1); },
       {"MseLossBackwardBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"mse_target", T, [](L e) { return ops::mse_loss(e[X], e[T], 2); },
       {"MseLossBackwardBackward0", "AccumulateGrad", "AccumulateGrad"}},
      {"nll", X, [](L e) { return sq(ops::nll_loss(e[X], longs({2}, {2, 0}), nullptr, 1, -100)); },
       {"NllLossBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "NllLossBackward0",
        "AccumulateGrad"}},
      {"cross_entropy", X, [](L e) { return ops::cross_entropy(e[X], longs({2}, {1, 2}), nullptr, 1, -100); },
       {"LogSoftmaxBackwardDataBackward0", "NllLossBackwardBackward0", "LogSoftmaxBackward0", "AccumulateGrad"}},
  };
}

std::vector<Tensor> leaves() {
  std::vector<Tensor> out;
  const auto v = values();
  for (size_t i = 0; i < kShapes.size(); ++i) out.push_back(cg_leaf(kShapes[i], v[i]));
  return out;
}

}  // namespace

TEST_CASE("create_graph ops: the gradient's graph has PyTorch's node names", "[create_graph][create_graph_ops]") {
  for (const Case& c : cases()) {
    INFO("case " << c.name);
    std::vector<Tensor> e = leaves();
    Tensor g = cg_grad(c.f(e), {e[c.wrt]}, true)[0];
    REQUIRE(g);
    CHECK(cg_walk(g) == c.walk);
  }
}

TEST_CASE("create_graph ops: second derivatives match central differences", "[create_graph][create_graph_ops]") {
  for (const Case& c : cases()) {
    INFO("case " << c.name);
    check_second_order(c.f, kShapes, values(), c.wrt);
  }
}

TEST_CASE("create_graph ops: dtype casts record ToCopyBackward0", "[create_graph][create_graph_ops]") {
  // Measured: (f * x).sum() with f float32 and x float64 gives f's gradient
  // ToCopyBackward0 > MulBackward0; (f.double() ** 2).sum() gives ToCopyBackward0 >
  // MulBackward0 > MulBackward1 > PowBackward0 > ToCopyBackward0.
  Tensor f = cg_leaf({3}, {0.2, -0.4, 0.9}, DType::Float32);
  Tensor x = cg_leaf({3}, {0.5, 1.5, -2.0});
  Tensor g = cg_grad(cg_total(ops::mul(f, x)), {f}, true)[0];
  CHECK(g->dtype() == DType::Float32);
  CHECK(cg_walk(g) == Names{"ToCopyBackward0", "MulBackward0", "AccumulateGrad"});
  Tensor g2 = cg_grad(cg_total(sq(ops::to_dtype(f, DType::Float64))), {f}, true)[0];
  CHECK(cg_walk(g2) == Names{"ToCopyBackward0", "MulBackward0", "MulBackward1", "PowBackward0", "ToCopyBackward0",
                             "AccumulateGrad"});
  // d/df sum(2 f) = 2 through both casts.
  std::vector<Tensor> h = cg_grad(cg_total(g2), {f}, false);
  CHECK(agtrace::to_values(h[0]) == std::vector<double>{2.0, 2.0, 2.0});
}

TEST_CASE("create_graph ops: dedicated double-backward nodes save what PyTorch saves",
          "[create_graph][create_graph_ops]") {
  std::vector<Tensor> e = leaves();
  // Measured: SelectBackwardBackward0 _saved_dim 18446744073709551615, _saved_index
  // 18446744073709551614 for x.select(-1, -2).
  Tensor gs = cg_grad(cg_total(sq(ops::select(e[X], -1, -2))), {e[X]}, true)[0];
  CHECK(agtrace::autograd::attr_repr(gs->grad_fn->attr("dim")) == "18446744073709551615");
  CHECK(agtrace::autograd::attr_repr(gs->grad_fn->attr("index")) == "18446744073709551614");
  // SoftmaxBackwardDataBackward0: dim as written, grad_output, output; edges (grad, SoftmaxBackward0).
  Tensor gm = cg_grad(cg_total(ops::mul(ops::softmax(e[X], -1), e[T])), {e[X]}, true)[0];
  CHECK(agtrace::autograd::attr_repr(gm->grad_fn->attr("dim")) == "18446744073709551615");
  CHECK(gm->grad_fn->find("grad_output"));
  CHECK(gm->grad_fn->find("output"));
  CHECK(gm->grad_fn->next[1].fn->name == "SoftmaxBackward0");
  // GeluBackwardBackward0: approximate, grad_output, self.
  Tensor gg = cg_grad(cg_total(ops::mul(ops::gelu(e[X], "tanh"), e[T])), {e[X]}, true)[0];
  CHECK(agtrace::autograd::attr_repr(gg->grad_fn->attr("approximate")) == "'tanh'");
  // MseLossBackwardBackward0: edges (None for the implicit ones, self, target), reduction 1.
  Tensor gl = cg_grad(ops::mse_loss(e[X], e[T], 1), {e[X]}, true)[0];
  CHECK_FALSE(gl->grad_fn->next[0].fn);
  CHECK(agtrace::autograd::attr_repr(gl->grad_fn->attr("reduction")) == "1");
  // NllLossBackwardBackward0: ignore_index -100 read as uint64, reduction, target, weight.
  Tensor gn = cg_grad(ops::nll_loss(e[X], longs({2}, {2, 0}), nullptr, 1, -100), {e[X]}, true)[0];
  CHECK(agtrace::autograd::attr_repr(gn->grad_fn->attr("ignore_index")) == "18446744073709551516");
}

TEST_CASE("create_graph ops: second-order values measured with torch 1.13", "[create_graph][create_graph_ops]") {
  // torch (float64): g, = autograd.grad((op(x) * t).sum(), x, create_graph=True);
  // h, = autograd.grad((g * t).sum(), x), for x, t as in the cases above.
  auto second = [](const std::function<Tensor(const Tensor&)>& op) {
    std::vector<Tensor> e = leaves();
    Tensor t = agtrace::tensor_from_values({2, 3}, DType::Float64, values()[T]);
    Tensor g = cg_grad(cg_total(ops::mul(op(e[X]), t)), {e[X]}, true)[0];
    return agtrace::to_values(cg_grad(cg_total(ops::mul(g, t)), {e[X]}, false)[0]);
  };
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-9).margin(1e-11));
  };
  near(second([](const Tensor& x) { return ops::gelu(x, "none"); }),
       {0.055450288965, -0.008094849729, -0.069108437137, 0.009678828981, 0.262242261911, -0.000744952771});
  near(second([](const Tensor& x) { return ops::gelu(x, "tanh"); }),
       {0.05539562056, -0.007629549121, -0.069040051169, 0.009685927919, 0.262133441436, -0.000762453921});
  near(second([](const Tensor& x) { return ops::leaky_relu(x, R(0.1)); }), {0, 0, 0, 0, 0, 0});
  near(second([](const Tensor& x) { return ops::softmax(x, -1); }),
       {0.043996308879, -0.065133685472, 0.021137376593, 0.008179275007, 0.011963313706, -0.020142588714});
  near(second([](const Tensor& x) { return ops::log_softmax(x, 0); }),
       {-0.01175018561, 0.013390227432, -0.006845724725, 0.01175018561, -0.013390227432, 0.006845724725});
  near(second([](const Tensor& x) { return ops::silu(x); }),
       {0.039710612428, 0.039049396241, 0.032039787965, 0.012094644752, 0.17207919655, -8.4621565e-05});
  // cross_entropy(x, [1, 2]): h of (g * t).sum().
  std::vector<Tensor> e = leaves();
  Tensor t = agtrace::tensor_from_values({2, 3}, DType::Float64, values()[T]);
  Tensor g = cg_grad(ops::cross_entropy(e[X], longs({2}, {1, 2}), nullptr, 1, -100), {e[X]}, true)[0];
  near(agtrace::to_values(cg_grad(cg_total(ops::mul(g, t)), {e[X]}, false)[0]),
       {0.073863265197, -0.085326138813, 0.011462873617, -0.023595322257, 0.012514351246, 0.011080971011});
}

TEST_CASE("create_graph ops: third order through a node without a formula names it",
          "[create_graph][create_graph_ops]") {
  // GeluBackwardBackward0's own create_graph formula (gelu_double_backward's graph) is not
  // mirrored: a third-order gradient through it raises unsupported naming the node.
  std::vector<Tensor> e = leaves();
  Tensor g = cg_grad(cg_total(ops::gelu(e[X], "none")), {e[X]}, true)[0];
  try {
    cg_grad(cg_total(g), {e[X]}, true);
    FAIL("expected unsupported");
  } catch (const ScenarioError& err) {
    CHECK(err.kind == "unsupported");
    CHECK(std::string(err.what()).find("create_graph=True through GeluBackwardBackward0 is not supported yet") !=
          std::string::npos);
  }
  // Third order through nodes whose formulas are mirrored works (select's, leaky_relu's).
  Tensor gs = cg_grad(cg_total(ops::pow_scalar(ops::select(e[X], 0, 1), I(3))), {e[X]}, true)[0];
  Tensor hs = cg_grad(cg_total(gs), {e[X]}, true)[0];
  REQUIRE(hs->requires_grad());
  // d3/dx3 x^3 = 6 at the selected row (row 1) only.
  CHECK(agtrace::to_values(cg_grad(cg_total(hs), {e[X]}, false)[0]) == std::vector<double>{0, 0, 0, 6, 6, 6});
}

namespace {
// F.conv2d leaves: x [1, 2, 4, 4], w [3, 2, 2, 2], b [3] (ramps of distinct values).
const std::vector<Shape> kConvShapes{{1, 2, 4, 4}, {3, 2, 2, 2}, {3}};
std::vector<double> ramp(size_t n, double start, double step) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>((i * 7) % n);
  return v;
}
std::vector<std::vector<double>> conv_values() { return {ramp(32, -0.8, 0.05), ramp(24, -0.6, 0.05), {0.3, -0.2, 0.1}}; }

// A create_graph gradient of (g ** 2).sum() wrt x raises unsupported naming `node`.
void check_third_order_unsupported(const Tensor& g, const Tensor& x, const std::string& node) {
  try {
    cg_grad(cg_total(ops::pow_scalar(g, I(2))), {x}, true);
    FAIL("expected unsupported");
  } catch (const ScenarioError& err) {
    CHECK(err.kind == "unsupported");
    CHECK(std::string(err.what()).find(node) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("create_graph ops: conv2d records ConvolutionBackwardBackward0", "[create_graph][create_graph_ops]") {
  using L = const std::vector<Tensor>&;
  ops::Conv2dArgs plain;
  // Measured (torch 1.13): every gradient of (conv2d(x, w, b) ** 2).sum() has grad_fn
  // ConvolutionBackwardBackward0 with edges (MulBackward0, x, w), saving dilation,
  // grad_output, groups, input, output_padding, padding, stride, transposed, weight.
  const Names walk{"ConvolutionBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
                   "ConvolutionBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"};
  auto f = [plain](L e) { return cg_total(ops::pow_scalar(ops::conv2d(e[0], e[1], e[2], plain), I(2))); };
  for (size_t wrt = 0; wrt < 3; ++wrt) {
    INFO("wrt " << wrt);
    std::vector<Tensor> e;
    for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kConvShapes[i], conv_values()[i]));
    Tensor g = cg_grad(f(e), {e[wrt]}, true)[0];
    CHECK(cg_walk(g) == walk);
    CHECK(g->output_nr == static_cast<int>(wrt));
    check_second_order(f, kConvShapes, conv_values(), wrt);
  }
  std::vector<Tensor> e;
  for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kConvShapes[i], conv_values()[i]));
  Tensor g = cg_grad(f(e), {e[0]}, true)[0];
  CHECK(g->grad_fn->next.size() == 3);
  CHECK(g->grad_fn->next[1].fn->name == "AccumulateGrad");
  CHECK(g->grad_fn->find("grad_output"));
  CHECK(agtrace::autograd::attr_repr(g->grad_fn->attr("transposed")) == "False");
  // Strided, padded, dilated, grouped: x [1, 2, 5, 5], w [4, 1, 2, 2], groups 2; no bias.
  ops::Conv2dArgs odd;
  odd.stride = {2, 1};
  odd.padding = {1, 0};
  odd.dilation = {1, 2};
  odd.groups = 2;
  const std::vector<Shape> shapes{{1, 2, 5, 5}, {4, 1, 2, 2}};
  const std::vector<std::vector<double>> vals{ramp(50, -0.9, 0.04), ramp(16, -0.5, 0.07)};
  auto h = [odd](L e) {
    return cg_total(ops::mul(ops::pow_scalar(ops::conv2d(e[0], e[1], nullptr, odd), I(2)),
                             ops::conv2d(e[0], e[1], nullptr, odd)));
  };
  check_second_order(h, shapes, vals, 0);
  check_second_order(h, shapes, vals, 1);
}

TEST_CASE("create_graph ops: third order through ConvolutionBackwardBackward0 names it",
          "[create_graph][create_graph_ops]") {
  std::vector<Tensor> e;
  for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kConvShapes[i], conv_values()[i]));
  Tensor g = cg_grad(cg_total(ops::pow_scalar(ops::conv2d(e[0], e[1], e[2], ops::Conv2dArgs{}), I(2))), {e[0]}, true)[0];
  check_third_order_unsupported(g, e[0], "ConvolutionBackwardBackward0");
  // The second derivative itself is computed (without create_graph); a graph of it is not.
  CHECK(cg_grad(cg_total(ops::pow_scalar(g, I(2))), {e[0]}, false)[0]);
}

namespace {
// F.batch_norm leaves: x [3, 2, 2], w [2], b [2]; fresh running buffers per call.
const std::vector<Shape> kBnShapes{{3, 2, 2}, {2}, {2}};
std::vector<std::vector<double>> bn_values() { return {ramp(12, -0.8, 0.13), {0.7, -1.3}, {0.2, -0.4}}; }
agtrace::test::CgFn bn_cube(bool training) {
  return [training](const std::vector<Tensor>& e) {
    Tensor rm = agtrace::tensor_from_values({2}, DType::Float64, {0.1, -0.2});
    Tensor rv = agtrace::tensor_from_values({2}, DType::Float64, {0.8, 1.5});
    return cg_total(ops::pow_scalar(ops::batch_norm(e[0], rm, rv, e[1], e[2], training, 0.1, 1e-5), I(3)));
  };
}
}  // namespace

TEST_CASE("create_graph ops: batch_norm records NativeBatchNormBackwardBackward0", "[create_graph][create_graph_ops]") {
  // Measured (torch 1.13), training and eval alike: every gradient of
  // (F.batch_norm(x, rm, rv, w, b, training) ** 3).sum() has grad_fn
  // NativeBatchNormBackwardBackward0 with edges (MulBackward0, x, w, None, None).
  const Names walk{"NativeBatchNormBackwardBackward0", "MulBackward0", "MulBackward1", "PowBackward0",
                   "NativeBatchNormBackward0", "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"};
  for (bool training : {true, false})
    for (size_t wrt = 0; wrt < 3; ++wrt) {
      INFO("training " << training << " wrt " << wrt);
      std::vector<Tensor> e;
      for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kBnShapes[i], bn_values()[i]));
      Tensor g = cg_grad(bn_cube(training)(e), {e[wrt]}, true)[0];
      CHECK(cg_walk(g) == walk);
      REQUIRE(g->grad_fn->next.size() == 5);
      CHECK_FALSE(g->grad_fn->next[3].fn);
      CHECK_FALSE(g->grad_fn->next[4].fn);
      CHECK(agtrace::autograd::attr_repr(g->grad_fn->attr("train")) == (training ? "True" : "False"));
      CHECK(g->grad_fn->find("save_invstd"));
      check_second_order(bn_cube(training), kBnShapes, bn_values(), wrt);
    }
  // torch 1.13: h = autograd.grad(g.sum(), (x, w, b)) for g the gradient wrt w (training)
  // and wrt x (eval).
  auto h_of = [](bool training, size_t wrt) {
    std::vector<Tensor> e;
    for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kBnShapes[i], bn_values()[i]));
    Tensor g = cg_grad(bn_cube(training)(e), {e[wrt]}, true)[0];
    return cg_grad(cg_total(g), e, false);
  };
  auto near = [](const Tensor& got, const std::vector<double>& want) {
    const std::vector<double> v = agtrace::to_values(got);
    REQUIRE(v.size() == want.size());
    for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(want[i]).epsilon(1e-9).margin(1e-11));
  };
  std::vector<Tensor> ht = h_of(true, 1);
  near(ht[0], {12.665232386054, -7.794075530319, 4.323848303361, 4.325516416083, -7.794213016734, 12.665736502907,
               -34.597339726866, 30.271704159874, -4.871225598942, -4.871454742966, 30.273848876232,
               -34.597578028684});
  near(ht[1], {7.199670181171, -14.399219519246});
  near(ht[2], {25.1988456341, -46.797463437548});
  std::vector<Tensor> he = h_of(false, 0);
  near(he[0], {-1.853488845693, 0.763751697707, -0.264379905429, -6.793903087494, -0.357922820893, 2.259317722507,
               -3.995536009466, 0.66840912058, 1.137643203907, -0.731814327093, -7.726692113503, -3.062746983457});
  near(he[1], {7.811640792936, 15.043489287346});
  near(he[2], {1.555657075547, 19.949133950042});
  // Torch composes this node's gradient from ordinary ops (measured: a third-order grad
  // records AddBackward0); agtrace does not mirror that graph and names the node instead.
  std::vector<Tensor> e;
  for (size_t i = 0; i < 3; ++i) e.push_back(cg_leaf(kBnShapes[i], bn_values()[i]));
  Tensor g = cg_grad(bn_cube(true)(e), {e[0]}, true)[0];
  check_third_order_unsupported(g, e[0], "NativeBatchNormBackwardBackward0");
}

namespace {
// In-place edits of views: x [3, 2], w [3].
const std::vector<Shape> kViewShapes{{3, 2}, {3}};
std::vector<std::vector<double>> view_values() { return {{0.5, 1.5, -2.0, 1.0, -0.3, 2.5}, {0.7, -1.2, 0.4}}; }
// h = x * 2; h.select(1, 1).mul_(w); (h ** 2).sum()
Tensor slice_mul(const std::vector<Tensor>& e) {
  Tensor h = ops::mul(e[0], ops::wrap_number(I(2)));
  ops::mul_(ops::select(h, 1, 1), e[1]);
  return cg_total(ops::pow_scalar(h, I(2)));
}
// k = x.clone(); v = k.view(-1); v.mul_(w.sum()); (k * k).sum() or (v * v).sum()
agtrace::test::CgFn flat_mul(bool through_view) {
  return [through_view](const std::vector<Tensor>& e) {
    Tensor k = ops::clone(e[0]);
    Tensor v = ops::view(k, {-1});
    ops::mul_(v, cg_total(e[1]));
    return through_view ? cg_total(ops::mul(v, v)) : cg_total(ops::mul(k, k));
  };
}
}  // namespace

TEST_CASE("create_graph ops: in-place edits of views record CopySlices and AsStridedBackward0",
          "[create_graph][create_graph_ops]") {
  // Measured (torch 1.13, walking g.grad_fn of autograd.grad(loss, x, create_graph=True)).
  // CopySlices::apply clones the gradient into `result` (CopyBackwards), takes its slice
  // (AsStridedBackward0), runs the wrapped node on a clone of it (CloneBackward0) and copies
  // the answer back into the slice (CopyBackwards, rebased: CopySlices).
  std::vector<Tensor> e;
  for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  Tensor g = cg_grad(slice_mul(e), {e[0]}, true)[0];
  CHECK(cg_walk(g) == Names{"MulBackward0", "CopySlices", "CopyBackwards", "MulBackward0", "MulBackward1",
                            "PowBackward0", "CopySlices", "MulBackward0", "AccumulateGrad", "AccumulateGrad",
                            "MulBackward0", "CloneBackward0", "AsStridedBackward0"});
  REQUIRE(g->grad_fn->next[0].fn->wrapped());
  CHECK(g->grad_fn->next[0].fn->wrapped()->name == "CopyBackwards");
  // torch 1.13: CopySlices puts the wrapped node's edges into the graph task, so w's
  // AccumulateGrad runs under autograd.grad(loss, x) (measured: w.grad [12.6, -9.6, 20.0]).
  REQUIRE(e[1]->grad);
  const std::vector<double> wg = agtrace::to_values(e[1]->grad);
  REQUIRE(wg.size() == 3);
  CHECK(wg[0] == Approx(12.6));
  CHECK(wg[1] == Approx(-9.6));
  CHECK(wg[2] == Approx(20.0));
  // The same without create_graph (measured: w.grad [12.6, -9.6, 20.0], no grad_fn; x.grad None).
  std::vector<Tensor> p;
  for (size_t i = 0; i < 2; ++i) p.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  cg_grad(slice_mul(p), {p[0]}, false);
  CHECK_FALSE(p[0]->grad);
  REQUIRE(p[1]->grad);
  CHECK_FALSE(p[1]->grad->grad_fn);
  CHECK(agtrace::to_values(p[1]->grad)[2] == Approx(20.0));
  // A view of a base edited in place: AsStridedBackward0's gradient is zeros with the
  // gradient copied into the strided slot (CopySlices, edges (None, grad)), seen through
  // as_strided (AsStridedBackward0).
  std::vector<Tensor> f;
  for (size_t i = 0; i < 2; ++i) f.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  Tensor gb = cg_grad(flat_mul(false)(f), {f[0]}, true)[0];
  CHECK(cg_walk(gb) == Names{"CopySlices", "CopyBackwards", "AddBackward0", "MulBackward0", "CopySlices",
                             "CloneBackward0", "AccumulateGrad", "SumBackward0", "AccumulateGrad", "MulBackward0",
                             "MulBackward0", "CloneBackward0", "AsStridedBackward0"});
  Tensor gc = cg_grad(flat_mul(true)(f), {f[0]}, true)[0];
  CHECK(cg_walk(gc) == Names{"CopySlices", "CopyBackwards", "AsStridedBackward0", "CopySlices", "AddBackward0",
                             "MulBackward0", "AsStridedBackward0", "CopySlices", "CloneBackward0", "AccumulateGrad",
                             "SumBackward0", "AccumulateGrad", "MulBackward0", "MulBackward0", "CloneBackward0",
                             "AsStridedBackward0"});
  CHECK(gc->grad_fn->next[0].fn->next[1].fn->next[0].fn->next[0].fn == nullptr);
  // w.grad has a graph holding w: PyTorch's create_graph cycle, broken as its docs advise.
  for (const auto* leaves : {&e, &p, &f})
    for (const Tensor& t : *leaves) t->grad.reset();
}

TEST_CASE("create_graph ops: second derivatives through in-place edits of views", "[create_graph][create_graph_ops]") {
  for (size_t wrt = 0; wrt < 2; ++wrt) {
    INFO("wrt " << wrt);
    check_second_order(slice_mul, kViewShapes, view_values(), wrt);
    check_second_order(flat_mul(false), kViewShapes, view_values(), wrt);
    check_second_order(flat_mul(true), kViewShapes, view_values(), wrt);
  }
}

TEST_CASE("create_graph ops: third order through the gradient's CopySlices names it", "[create_graph][create_graph_ops]") {
  std::vector<Tensor> e;
  for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  Tensor g = cg_grad(slice_mul(e), {e[0]}, true)[0];
  check_third_order_unsupported(g, e[0], "CopySlices (wrapping CopyBackwards)");
  for (const Tensor& t : e) t->grad.reset();  // the create_graph cycle (see above)
}

TEST_CASE("create_graph ops: a leaf CopySlices makes needed too late raises, as torch 1.13 does",
          "[create_graph][create_graph_ops]") {
  // Measured (torch 1.13): h = x * 2; h[1:].add_(x[:2] * w[:2].sum(), alpha=2);
  // h[:, 0].sub_(w); autograd.grad((h ** 3).sum(), x) raises "RuntimeError: could not
  // compute gradients for some functions": the newer CopySlices makes w's AccumulateGrad
  // needed and feeds it, but its other input comes through w[:2].sum(), which was skipped.
  std::vector<Tensor> e;
  for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  Tensor h = ops::mul(e[0], ops::wrap_number(I(2)));
  ops::add_(ops::slice(h, 0, 1, std::nullopt, 1),
            ops::mul(ops::slice(e[0], 0, std::nullopt, 2, 1), cg_total(ops::slice(e[1], 0, std::nullopt, 2, 1))), I(2));
  ops::sub_(ops::select(h, 1, 0), e[1], I(1));
  try {
    cg_grad(cg_total(ops::pow_scalar(h, I(3))), {e[0]}, false);
    FAIL("expected an error");
  } catch (const ScenarioError& err) {
    CHECK(err.kind == "unsupported");
    CHECK(std::string(err.what()).find("could not compute gradients for some functions") != std::string::npos);
  }
  // Without the leaf shared by both edits, the pass completes.
  std::vector<Tensor> f;
  for (size_t i = 0; i < 2; ++i) f.push_back(cg_leaf(kViewShapes[i], view_values()[i]));
  Tensor k = ops::mul(f[0], ops::wrap_number(I(2)));
  ops::add_(ops::slice(k, 0, 1, std::nullopt, 1), ops::slice(f[0], 0, std::nullopt, 2, 1), I(1));
  ops::sub_(ops::select(k, 1, 0), f[1], I(1));
  CHECK(cg_grad(cg_total(ops::pow_scalar(k, I(3))), {f[0]}, false)[0]);
}

namespace {
// In-place pointwise ops: x, y [2, 3] (y > 0). h = x * 2; op on h, on a view of h kept
// alive (t = h.select(1, 1)) or on a temporary one; loss = (h * h).sum().
enum class Target { Plain, KeptView, TempView };
const std::vector<Shape> kPwShapes{{2, 3}, {2, 3}};
std::vector<std::vector<double>> pw_values() { return {{0.25, -0.75, 0.6, -0.5, 0.15, 0.9}, {1.5, 2.0, 1.2, 3.0, 1.7, 2.5}}; }
agtrace::test::CgFn pointwise_inplace_fn(const std::string& op, Target target) {
  // The kept view outlives the call, as a Python variable does until the gradient is taken.
  auto kept = std::make_shared<Tensor>();
  return [op, target, kept](const std::vector<Tensor>& e) {
    Tensor h = ops::mul(e[0], ops::wrap_number(I(2)));
    auto apply = [&](const Tensor& t, const Tensor& y) {
      if (op == "div") ops::div_(t, y);
      if (op == "relu") ops::relu_(t);
      if (op == "exp") ops::exp_(t);
      if (op == "sigmoid") ops::sigmoid_(t);
      if (op == "tanh") ops::tanh_(t);
      if (op == "zero") ops::zero_(t);
    };
    if (target == Target::Plain) apply(h, e[1]);
    if (target == Target::KeptView) {
      *kept = ops::select(h, 1, 1);
      apply(*kept, ops::select(e[1], 1, 1));
    }
    if (target == Target::TempView) apply(ops::select(h, 1, 1), ops::select(e[1], 1, 1));
    return cg_total(ops::mul(h, h));
  };
}
// torch 1.13 names the node of the out-of-place op (ReluBackward0 for relu_ ...) and its
// double backward (ThresholdBackwardBackward0 ...); walks measured in torch 1.13 with the
// programs above (autograd.grad(loss, x, create_graph=True), x and y requiring grad).
Names measured_plain(const std::string& op) {
  if (op == "div")
    return {"MulBackward0", "DivBackward0", "AddBackward0", "MulBackward0", "DivBackward0",
            "MulBackward0", "AccumulateGrad", "AccumulateGrad", "MulBackward0"};
  const std::string node = op == "relu" ? "ReluBackward0" : op == "exp" ? "ExpBackward0"
                           : op == "sigmoid" ? "SigmoidBackward0" : "TanhBackward0";
  const std::string dd = op == "relu" ? "ThresholdBackwardBackward0" : op == "exp" ? "MulBackward0"
                         : op == "sigmoid" ? "SigmoidBackwardBackward0" : "TanhBackwardBackward0";
  return {"MulBackward0", dd, "AddBackward0", "MulBackward0", node, "MulBackward0", "AccumulateGrad", "MulBackward0"};
}
}  // namespace

TEST_CASE("create_graph ops: in-place pointwise ops record the out-of-place nodes' double backward",
          "[create_graph][create_graph_ops]") {
  for (const std::string op : {"div", "relu", "exp", "sigmoid", "tanh"}) {
    INFO(op);
    std::vector<Tensor> e;
    for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kPwShapes[i], pw_values()[i]));
    Tensor g = cg_grad(pointwise_inplace_fn(op, Target::Plain)(e), {e[0]}, true)[0];
    CHECK(cg_walk(g) == measured_plain(op));
  }
  // On views (measured): the saved result of relu_/exp_/... unpacks to the kept view's
  // AsStridedBackward0, or, the view gone, to the saving node itself.
  std::vector<Tensor> e;
  for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kPwShapes[i], pw_values()[i]));
  Tensor gk = cg_grad(pointwise_inplace_fn("relu", Target::KeptView)(e), {e[0]}, true)[0];
  CHECK(cg_walk(gk) == Names{"MulBackward0", "CopySlices", "CopyBackwards", "AddBackward0", "MulBackward0",
                             "CopySlices", "MulBackward0", "AccumulateGrad", "MulBackward0",
                             "ThresholdBackwardBackward0", "CloneBackward0", "AsStridedBackward0",
                             "AsStridedBackward0"});
  Tensor gt = cg_grad(pointwise_inplace_fn("tanh", Target::TempView)(e), {e[0]}, true)[0];
  CHECK(cg_walk(gt) == Names{"MulBackward0", "CopySlices", "CopyBackwards", "AddBackward0", "MulBackward0",
                             "CopySlices", "MulBackward0", "AccumulateGrad", "MulBackward0",
                             "TanhBackwardBackward0", "CloneBackward0", "AsStridedBackward0", "TanhBackward0",
                             "SelectBackward0"});
  Tensor gd = cg_grad(pointwise_inplace_fn("div", Target::TempView)(e), {e[0]}, true)[0];
  CHECK(cg_walk(gd) == Names{"MulBackward0", "CopySlices", "CopyBackwards", "AddBackward0", "MulBackward0",
                             "CopySlices", "MulBackward0", "AccumulateGrad", "SelectBackward0", "AccumulateGrad",
                             "MulBackward0", "DivBackward0", "CloneBackward0", "AsStridedBackward0"});
}

TEST_CASE("create_graph ops: second derivatives through in-place pointwise ops", "[create_graph][create_graph_ops]") {
  for (const std::string op : {"div", "relu", "exp", "sigmoid", "tanh"})
    for (Target target : {Target::Plain, Target::KeptView, Target::TempView})
      for (size_t wrt = 0; wrt < (op == "div" ? 2u : 1u); ++wrt) {  // y is used by div_ only
        INFO(op << " target " << static_cast<int>(target) << " wrt " << wrt);
        check_second_order(pointwise_inplace_fn(op, target), kPwShapes, pw_values(), wrt);
      }
}

TEST_CASE("create_graph ops: zero_ gives zeros with no graph, on a tensor and on views", "[create_graph][create_graph_ops]") {
  // derivatives.yaml: self: zeros_like(grad). Measured in torch 1.13 with h = x * 2;
  // <h | h.select(1, 1) kept | temporary>.zero_(); autograd.grad((h * h).sum(), x, create_graph=True):
  // on the whole tensor the gradient does not require grad (zeros); through a view it does.
  std::vector<Tensor> e;
  for (size_t i = 0; i < 2; ++i) e.push_back(cg_leaf(kPwShapes[i], pw_values()[i]));
  Tensor gp = cg_grad(pointwise_inplace_fn("zero", Target::Plain)(e), {e[0]}, true)[0];
  CHECK_FALSE(gp->requires_grad());
  CHECK(to_values(gp) == std::vector<double>(6, 0.0));
  const Names through_view{"MulBackward0", "CopySlices", "CopyBackwards", "AddBackward0", "MulBackward0",
                           "CopySlices",   "MulBackward0", "AccumulateGrad", "MulBackward0"};
  for (Target target : {Target::KeptView, Target::TempView}) {
    INFO("target " << static_cast<int>(target));
    Tensor g = cg_grad(pointwise_inplace_fn("zero", target)(e), {e[0]}, true)[0];
    CHECK(cg_walk(g) == through_view);
    check_second_order(pointwise_inplace_fn("zero", target), kPwShapes, pw_values(), 0);
  }
}
