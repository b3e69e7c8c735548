// The direct float32 loops (tensor/fast_paths.hpp and the ops' fast paths, issue #6)
// against the general path, bit for bit: every case runs once with fast paths on and once
// with them switched off (kernels::set_fast_paths), on pseudo-random values with the
// awkward ones mixed in (±0, ±inf, NaN, subnormals, ties), odd sizes, and strided inputs
// (which take the general path either way), forward and backward. Also: results do not
// depend on the thread count, and parallel_for covers every index once.
#include <catch2/catch.hpp>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "support/kernel_settings.hpp"

#include "autograd/engine.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/model_ops.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "tensor/fast_paths.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
namespace ops = agtrace::ops;
namespace kernels = agtrace::kernels;
namespace autograd = agtrace::autograd;

namespace {

using Bits = std::vector<std::vector<uint64_t>>;

// Deterministic values in [-scale, scale), with every `special`-th element one of the
// awkward values when `specials` is set.
std::vector<double> random_values(int64_t n, uint64_t seed, double scale, bool specials) {
  const double inf = std::numeric_limits<double>::infinity();
  const double odd[] = {0.0, -0.0, inf, -inf, std::nan(""), 1e-40, -1e-40, 1.0, -1.0, 0.5};
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0;  // [0, 1)
    v[static_cast<size_t>(i)] = (2.0 * u - 1.0) * scale;
    if (specials && (s >> 7) % 13 == 0) v[static_cast<size_t>(i)] = odd[(s >> 20) % 10];
  }
  return v;
}

Tensor leaf(const Shape& shape, uint64_t seed, double scale = 3.0, bool specials = true, bool grad = true) {
  Tensor t = agtrace::tensor_from_values(shape, DType::Float32, random_values(agtrace::shape_numel(shape), seed, scale, specials));
  t->requires_grad_flag = grad;
  return t;
}

// The same values seen through a transposed (non-contiguous) view of a [b, a] leaf.
Tensor strided_leaf(int64_t a, int64_t b, uint64_t seed) {
  Tensor base = leaf({b, a}, seed, 3.0, true, true);
  return ops::transpose(base, 0, 1);
}

// Element bits; every NaN as one value: which NaN (its sign bit) an addition of two NaN
// operands keeps depends on the operand order the compiler picks for a commutative
// operation, which neither IEEE 754 nor C++ fixes, and no report shows it (text "nan",
// JSON null).
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  if (!t) return out;
  for (double v : agtrace::to_values(t)) {
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  return out;
}

// y = f(x...), then backward with a random gradient of y's shape: y's bits and every
// input's gradient bits.
Bits forward_backward(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& xs,
                      uint64_t seed, bool awkward_grad = false) {
  for (const Tensor& x : xs) x->grad.reset();
  Tensor y = f(xs);
  Bits out{bits(y)};
  Tensor gy = leaf(y->sizes, seed, 2.0, awkward_grad, false);
  autograd::BackwardRequest req;
  req.roots = {y};
  req.grad_roots = {gy};
  req.inputs = xs;
  req.capture = true;
  req.allow_unused = true;
  for (const Tensor& g : autograd::run_backward(req)) out.push_back(bits(g));
  return out;
}

// make() builds fresh inputs each time (so both runs start from the same leaves).
// awkward_grad: the backward's incoming gradient has the awkward values too.
void same_both_ways(const std::function<std::vector<Tensor>()>& make,
                    const std::function<Tensor(const std::vector<Tensor>&)>& f, uint64_t seed,
                    bool awkward_grad = false) {
  Bits fast, slow;
  {
    agtrace::test::FastPathsFor on(true);
    fast = forward_backward(f, make(), seed, awkward_grad);
  }
  {
    agtrace::test::FastPathsFor off(false);
    slow = forward_backward(f, make(), seed, awkward_grad);
  }
  REQUIRE(fast.size() == slow.size());
  for (size_t k = 0; k < fast.size(); ++k) {
    INFO("result " << k << " (0: forward, then the inputs' gradients)");
    REQUIRE(fast[k].size() == slow[k].size());
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < fast[k].size(); ++i)
      if (fast[k][i] != slow[k][i] && differ++ == 0) first = i;
    INFO("first difference at " << first << ": fast " << std::hex << (differ ? fast[k][first] : 0) << ", general "
                                << (differ ? slow[k][first] : 0));
    CHECK(differ == 0);
  }
}

const std::vector<Shape> kShapes = {{1}, {7}, {3, 5}, {4, 33}, {2, 3, 17}, {128, 40}, {3, 1, 65}};

}  // namespace

TEST_CASE("fast paths: relu forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    INFO("shape " << agtrace::shape_str(s));
    same_both_ways([&] { return std::vector<Tensor>{leaf(s, seed)}; },
                   [](const std::vector<Tensor>& x) { return ops::relu(x[0]); }, seed + 100);
    ++seed;
  }
  same_both_ways([&] { return std::vector<Tensor>{strided_leaf(5, 9, 3)}; },
                 [](const std::vector<Tensor>& x) { return ops::relu(x[0]); }, 7);
  // relu_ in place on a non-leaf (torchvision's ReLU(inplace=True)), contiguous and strided.
  auto in_place = [](const std::vector<Tensor>& x) {
    Tensor y = ops::clone(x[0]);  // the strided leaf's clone keeps its strides
    ops::relu_(y);
    return y;
  };
  for (const Shape& s : kShapes) {
    INFO("relu_, shape " << agtrace::shape_str(s));
    same_both_ways([&] { return std::vector<Tensor>{leaf(s, seed)}; }, in_place, seed + 100);
    ++seed;
  }
  same_both_ways([&] { return std::vector<Tensor>{strided_leaf(5, 9, 3)}; }, in_place, 8);
}

TEST_CASE("fast paths: softmax and log_softmax forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 20;
  for (bool log : {false, true}) {
    for (const Shape& s : kShapes) {
      for (int64_t dim : {int64_t{-1}, int64_t{0}}) {
        INFO("shape " << agtrace::shape_str(s) << " dim " << dim << " log " << log);
        auto f = [log, dim](const std::vector<Tensor>& x) { return log ? ops::log_softmax(x[0], dim) : ops::softmax(x[0], dim); };
        same_both_ways([&] { return std::vector<Tensor>{leaf(s, seed)}; }, f, seed + 1);
        // Without the awkward values too (a NaN or inf spreads over its whole row).
        same_both_ways([&] { return std::vector<Tensor>{leaf(s, seed, 8.0, false)}; }, f, seed + 2);
        ++seed;
      }
    }
    same_both_ways([&] { return std::vector<Tensor>{strided_leaf(6, 11, 5)}; },
                   [log](const std::vector<Tensor>& x) { return log ? ops::log_softmax(x[0], -1) : ops::softmax(x[0], -1); }, 9);
  }
}

TEST_CASE("fast paths: layer_norm forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 40;
  const std::vector<Shape> shapes = {{1, 1}, {3, 5}, {4, 33}, {2, 3, 17}, {128, 40}, {2, 2, 3, 7}};
  for (const Shape& s : shapes) {
    for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
      const Shape ns(s.end() - 1, s.end());
      INFO("shape " << agtrace::shape_str(s) << " affine " << affine);
      auto make = [&] {
        std::vector<Tensor> xs{leaf(s, seed, 3.0, false)};
        if (affine >= 1) xs.push_back(leaf(ns, seed + 1, 2.0, false));
        if (affine >= 2) xs.push_back(leaf(ns, seed + 2, 2.0, false));
        return xs;
      };
      auto f = [ns](const std::vector<Tensor>& x) {
        return ops::layer_norm(x[0], ns, x.size() > 1 ? x[1] : nullptr, x.size() > 2 ? x[2] : nullptr, 1e-5);
      };
      same_both_ways(make, f, seed + 3);
      seed += 4;
    }
  }
  // A strided input (copied first) and two normalised dims.
  same_both_ways([] { return std::vector<Tensor>{strided_leaf(6, 10, 3)}; },
                 [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], {10}, nullptr, nullptr, 1e-5); }, 4);
  same_both_ways([] { return std::vector<Tensor>{leaf({3, 4, 5}, 8, 3.0, false), leaf({4, 5}, 9, 1.0, false)}; },
                 [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], {4, 5}, x[1], nullptr, 1e-5); }, 10);
}

TEST_CASE("fast paths: group_norm forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 500;
  struct Case {
    Shape shape;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 6, 3, 4}, 3}, {{4, 8, 5}, 2}, {{3, 4}, 2}, {{2, 16, 8, 8}, 4}, {{5, 9, 1, 7}, 9}};
  for (const Case& c : cases) {
    for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
      const Shape channels{c.shape[1]};
      INFO("shape " << agtrace::shape_str(c.shape) << " groups " << c.groups << " affine " << affine);
      auto make = [&] {
        std::vector<Tensor> xs{leaf(c.shape, seed, 3.0, false)};
        if (affine >= 1) xs.push_back(leaf(channels, seed + 1, 2.0, false));
        if (affine >= 2) xs.push_back(leaf(channels, seed + 2, 2.0, false));
        return xs;
      };
      auto f = [groups = c.groups](const std::vector<Tensor>& x) {
        return ops::group_norm(x[0], groups, x.size() > 1 ? x[1] : nullptr, x.size() > 2 ? x[2] : nullptr, 1e-5);
      };
      same_both_ways(make, f, seed + 3);
      same_both_ways(make, f, seed + 4, true);  // awkward incoming gradients too
      seed += 5;
    }
  }
  // A strided input (group_norm copies it first).
  same_both_ways([] { return std::vector<Tensor>{ops::transpose(leaf({3, 5, 4}, 3), 1, 2)}; },
                 [](const std::vector<Tensor>& x) { return ops::group_norm(x[0], 2, nullptr, nullptr, 1e-5); }, 4);
}

TEST_CASE("fast paths: batch_norm forward, backward and running statistics give the general path's bits",
          "[fast_paths]") {
  uint64_t seed = 200;
  const std::vector<Shape> shapes = {{4, 3}, {2, 3, 5}, {2, 3, 4, 5}, {8, 16, 6, 6}, {3, 7, 1, 9}};
  // Positive buffers: eval mode reads running_var under a square root.
  auto buffer = [](int64_t channels, uint64_t s, double lo) {
    std::vector<double> v = random_values(channels, s, 0.5, false);
    for (double& e : v) e += lo;
    return agtrace::tensor_from_values({channels}, DType::Float32, v);
  };
  for (const Shape& s : shapes) {
    const int64_t channels = s[1];
    for (int mode = 0; mode < 4; ++mode) {  // training affine, training plain, eval affine, training with awkward values
      const bool training = mode != 2, affine = mode != 1;
      INFO("shape " << agtrace::shape_str(s) << " mode " << mode);
      auto make = [&] {
        std::vector<Tensor> xs{leaf(s, seed, 3.0, mode == 3)};
        if (affine) {
          xs.push_back(leaf({channels}, seed + 1, 2.0, false));
          xs.push_back(leaf({channels}, seed + 2, 2.0, false));
        }
        return xs;
      };
      // Each call's running buffers after the forward: the fast run's, then the general run's.
      std::vector<std::vector<std::vector<uint64_t>>> buffers;
      auto f = [&](const std::vector<Tensor>& x) {
        Tensor rm = buffer(channels, seed + 5, 0.0), rv = buffer(channels, seed + 6, 1.0);
        Tensor y = ops::batch_norm(x[0], rm, rv, x.size() > 1 ? x[1] : nullptr, x.size() > 2 ? x[2] : nullptr,
                                   training, 0.1, 1e-5);
        buffers.push_back({bits(rm), bits(rv)});
        return y;
      };
      same_both_ways(make, f, seed + 3);
      REQUIRE(buffers.size() == 2);
      CHECK(buffers[0] == buffers[1]);
      seed += 8;
    }
  }
  // A strided input takes the general path either way.
  same_both_ways([] { return std::vector<Tensor>{ops::transpose(leaf({5, 6, 4}, 3), 1, 2)}; },
                 [](const std::vector<Tensor>& x) {
                   return ops::batch_norm(x[0], nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5);
                 },
                 4);
}

TEST_CASE("fast paths: max_pool2d forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 300;
  struct Case {
    Shape shape;
    std::vector<int64_t> kernel, stride, padding, dilation;
    bool ceil;
  };
  const std::vector<Case> cases = {
      {{4, 8, 16, 16}, {2}, {}, {0}, {1}, false},       // non-overlapping windows
      {{2, 3, 10, 43}, {2}, {}, {0}, {1}, false},       // eight windows at a time and a tail of five
      {{2, 3, 9, 18}, {2}, {}, {0}, {1}, true},         // ceil_mode: the last row's windows clipped
      {{2, 3, 9, 9}, {2}, {3}, {1}, {1}, true},         // apart, padded, ceil_mode
      {{2, 4, 9, 9}, {3}, {2}, {1}, {1}, false},        // resnet's stem: windows overlap
      {{1, 2, 11, 7}, {3, 2}, {1, 2}, {1, 0}, {2, 1}, true},
      {{3, 5, 6}, {2}, {1}, {0}, {1}, false},           // no batch dimension
  };
  for (const Case& c : cases) {
    for (bool awkward_grad : {false, true}) {  // -0 and NaN gradients: 0 + g as the general loop rounds it
      INFO("shape " << agtrace::shape_str(c.shape) << " awkward gradient " << awkward_grad);
      same_both_ways([&] { return std::vector<Tensor>{leaf(c.shape, seed)}; },
                     [&](const std::vector<Tensor>& x) {
                       return ops::max_pool2d(x[0], c.kernel, c.stride, c.padding, c.dilation, c.ceil).output;
                     },
                     seed + 1, awkward_grad);
      seed += 2;
    }
  }
}

TEST_CASE("fast paths: max_pool2d's float windows pick what the double loop picks on ties, zeros, infinities and NaNs",
          "[fast_paths]") {
  // Values from a small set, so that most windows hold ties (the first stays), -0 beside +0
  // (equal: the first stays), infinities and NaNs (the last NaN wins).
  const double inf = std::numeric_limits<double>::infinity();
  const double pick[] = {0.0, -0.0, 1.0, -1.0, inf, -inf, std::nan(""), 1.0, 0.0, -0.0};
  struct Case {
    Shape shape;
    std::vector<int64_t> kernel, stride, padding, dilation;
  };
  const std::vector<Case> cases = {
      {{3, 4, 12, 12}, {2}, {}, {0}, {1}},
      {{2, 3, 8, 37}, {2}, {}, {0}, {1}},
      {{2, 3, 11, 9}, {3}, {2}, {1}, {1}},
      {{2, 2, 10, 10}, {3, 2}, {1, 2}, {1, 0}, {2, 1}},
  };
  uint64_t s = 12345;
  for (const Case& c : cases) {
    std::vector<double> v(static_cast<size_t>(agtrace::shape_numel(c.shape)));
    for (double& x : v) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      x = pick[(s >> 33) % 10];
    }
    Tensor x = agtrace::tensor_from_values(c.shape, DType::Float32, v);
    ops::MaxPool2dResult fast, slow;
    {
      agtrace::test::FastPathsFor on(true);
      fast = ops::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, false);
    }
    {
      agtrace::test::FastPathsFor off(false);
      slow = ops::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, false);
    }
    INFO("shape " << agtrace::shape_str(c.shape));
    CHECK(agtrace::to_values(fast.indices) == agtrace::to_values(slow.indices));
    const std::vector<uint64_t> fast_bits = bits(fast.output), slow_bits = bits(slow.output);
    CHECK(fast_bits == slow_bits);
    // -0 and +0 compare equal, so only the bits tell which one was kept.
    size_t negative_zeros = 0;
    for (double o : agtrace::to_values(fast.output)) negative_zeros += (o == 0.0 && std::signbit(o)) ? 1 : 0;
    CHECK(negative_zeros > 0);
  }
}

TEST_CASE("fast paths: masked_fill with a mask of self's shape or a repeated block gives the general path's bits",
          "[fast_paths]") {
  auto mask_of = [](const Shape& shape, uint64_t seed) {
    std::vector<double> v = random_values(agtrace::shape_numel(shape), seed, 1.0, false);
    for (double& e : v) e = e > 0.2 ? 1.0 : 0.0;
    return agtrace::tensor_from_values(shape, DType::Bool, v);
  };
  struct Case {
    Shape self, mask;
  };
  const std::vector<Case> cases = {{{3, 5}, {3, 5}},          {{2, 3, 8, 8}, {1, 1, 8, 8}},
                                   {{4, 7}, {7}},             {{2, 6}, {2, 1}},  // broadcast inside: general path
                                   {{5}, {3, 5}}};            // the mask is larger: general path
  uint64_t seed = 400;
  for (const Case& c : cases) {
    for (double fill : {-std::numeric_limits<double>::infinity(), 0.1, 1e40}) {
      INFO("self " << agtrace::shape_str(c.self) << " mask " << agtrace::shape_str(c.mask) << " fill " << fill);
      same_both_ways([&] { return std::vector<Tensor>{leaf(c.self, seed)}; },
                     [&](const std::vector<Tensor>& x) {
                       return ops::masked_fill(x[0], mask_of(c.mask, seed + 1), Value::real(fill));
                     },
                     seed + 2);
      seed += 3;
    }
  }
  // A transposed (non-contiguous) mask takes the general path.
  same_both_ways([] { return std::vector<Tensor>{leaf({4, 6}, 7)}; },
                 [&](const std::vector<Tensor>& x) {
                   return ops::masked_fill(x[0], ops::transpose(mask_of({6, 4}, 8), 0, 1), Value::real(-1.5));
                 },
                 9);
}

TEST_CASE("fast paths: gelu forward and backward give the general path's bits", "[fast_paths]") {
  uint64_t seed = 60;
  for (const char* approximate : {"none", "tanh"}) {
    for (const Shape& s : kShapes) {
      INFO("shape " << agtrace::shape_str(s) << " approximate " << approximate);
      same_both_ways([&] { return std::vector<Tensor>{leaf(s, seed, 6.0)}; },
                     [approximate](const std::vector<Tensor>& x) { return ops::gelu(x[0], approximate); }, seed + 1);
      seed += 2;
    }
  }
}

TEST_CASE("fast paths: contiguous copies of strided views and sums give the general path's bits", "[fast_paths]") {
  // A permuted 3-d view (reshape copies it), a transposed matrix, a sliced row (stride 2).
  auto permuted = [](const std::vector<Tensor>& x) {
    return ops::reshape(ops::transpose(ops::view(x[0], {2, 3, 4, 5}), 1, 2), {2, 60});
  };
  same_both_ways([] { return std::vector<Tensor>{leaf({120}, 70)}; }, permuted, 71);
  same_both_ways([] { return std::vector<Tensor>{leaf({7, 9}, 72)}; },
                 [](const std::vector<Tensor>& x) { return ops::contiguous(ops::transpose(x[0], 0, 1)); }, 73);
  same_both_ways([] { return std::vector<Tensor>{leaf({5, 8}, 74)}; },
                 [](const std::vector<Tensor>& x) { return ops::contiguous(ops::slice(x[0], 1, 1, 8, 2)); }, 75);
  // Sums over leading dims (a bias gradient), trailing dims (a row sum), all and middle dims.
  const std::vector<std::vector<int64_t>> dims = {{0}, {0, 1}, {2}, {1, 2}, {1}, {0, 1, 2}};
  uint64_t seed = 80;
  for (const auto& d : dims) {
    for (bool keepdim : {false, true}) {
      INFO("dims " << d.size() << " first " << d[0] << " keepdim " << keepdim);
      same_both_ways([&] { return std::vector<Tensor>{leaf({3, 17, 33}, seed, 4.0, false)}; },
                     [&](const std::vector<Tensor>& x) { return ops::sum(x[0], d, keepdim); }, seed + 1);
      seed += 2;
    }
  }
  // Broadcast adds reduce their gradient with sum_to (the bias of a linear layer).
  same_both_ways([] { return std::vector<Tensor>{leaf({64, 37}, 90, 2.0, false), leaf({37}, 91, 2.0, false)}; },
                 [](const std::vector<Tensor>& x) { return ops::add(x[0], x[1], Value::integer(1)); }, 92);
}

TEST_CASE("fast paths: add, sub and mul (same shape, bias, Python number) give the general path's bits", "[fast_paths]") {
  using F = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, F>> ops_list = {
      {"add", [](const std::vector<Tensor>& x) { return ops::add(x[0], x[1], Value::integer(1)); }},
      {"add alpha", [](const std::vector<Tensor>& x) { return ops::add(x[0], x[1], Value::real(0.3)); }},
      {"sub", [](const std::vector<Tensor>& x) { return ops::sub(x[0], x[1], Value::real(-1.7)); }},
      {"mul", [](const std::vector<Tensor>& x) { return ops::mul(x[0], x[1]); }},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{5, 7}, {5, 7}}, {{3, 4, 9}, {9}}, {{3, 4, 9}, {1, 9}}, {{3, 4, 9}, {4, 9}}, {{6, 1}, {1}}, {{2, 3}, {}}, {{1}, {1}}};
  uint64_t seed = 100;
  for (const auto& [name, f] : ops_list) {
    for (const auto& [sa, sb] : shapes) {
      INFO(name << " " << agtrace::shape_str(sa) << " with " << agtrace::shape_str(sb));
      same_both_ways([&, sa = sa, sb = sb] { return std::vector<Tensor>{leaf(sa, seed), leaf(sb, seed + 1)}; }, f, seed + 2);
      seed += 3;
    }
    // A Python number (a wrapped 0-d float64 or int64 tensor) and a strided tensor.
    for (const Value& v : {Value::real(0.125), Value::integer(3)}) {
      same_both_ways([&] { return std::vector<Tensor>{leaf({9, 11}, seed)}; },
                     [&, f = f](const std::vector<Tensor>& x) { return f({x[0], ops::wrap_number(v)}); }, seed + 1);
      same_both_ways([&] { return std::vector<Tensor>{leaf({9, 11}, seed + 2)}; },
                     [&, f = f](const std::vector<Tensor>& x) { return f({ops::wrap_number(v), x[0]}); }, seed + 3);
      seed += 4;
    }
    same_both_ways([&] { return std::vector<Tensor>{strided_leaf(4, 6, seed), leaf({4, 6}, seed + 1)}; }, f, seed + 2);
    seed += 3;
  }
}

TEST_CASE("fast paths: relu's float kernels match the double formula on awkward values", "[fast_paths]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::nanf(""), 1e-40f, -1e-40f, 2.5f, -2.5f, 3.0f, -7.0f};
  std::vector<float> o(v.size()), gb(v.size());
  kernels::relu_f32(v.data(), o.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    const float want = static_cast<float>(x < 0.0 ? 0.0 : x);
    CHECK(std::memcmp(&o[i], &want, sizeof want) == 0);
  }
  // Every (grad, result) pair of the awkward values: grad * 0 is NaN for an infinite grad.
  for (float g : v) {
    std::vector<float> gs(v.size(), g);
    kernels::relu_backward_f32(gs.data(), v.data(), gb.data(), static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = static_cast<float>(static_cast<double>(g) * (v[i] <= 0.0f ? 0.0 : 1.0));
      INFO("grad " << g << " result " << v[i]);
      CHECK(std::memcmp(&gb[i], &want, sizeof want) == 0);
    }
  }
}

TEST_CASE("fast paths: parallel_for covers every index once, whatever the thread count", "[fast_paths]") {
  for (int threads : {1, 2, 3}) {
    kernels::set_threads(threads);
    for (int64_t n : {0, 1, 5, 100, 1001}) {
      for (int64_t grain : {1, 7, 1000}) {
        // A lambda (run in place within one grain) and a std::function (always the pool's path).
        std::vector<int> hits(static_cast<size_t>(n), 0), hits_fn(static_cast<size_t>(n), 0);
        std::atomic<int> chunks{0};
        kernels::parallel_for(n, grain, [&](int64_t b, int64_t e) {
          ++chunks;
          for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        });
        const std::function<void(int64_t, int64_t)> fn = [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) ++hits_fn[static_cast<size_t>(i)];
        };
        kernels::parallel_for(n, grain, fn);
        for (int h : hits) CHECK(h == 1);
        for (int h : hits_fn) CHECK(h == 1);
        if (n > 0 && n <= grain) CHECK(chunks == 1);
      }
    }
  }
  kernels::set_threads(1);
}

// The pool keeps its workers off the CPU the caller runs on (tensor/kernels.cpp, WorkerPool):
// a woken worker was otherwise placed on the caller's CPU whenever the other CPU looked busy
// (as it does while OpenBLAS's idle worker polls), and the chunks ran one after the other.
// Checked through the worker's own CPU mask, read inside its chunk; the caller's CPU is read
// at the start of its chunk (it may move between the pool's look and that read only if the
// kernel migrates it in those few instructions, hence 18 of 20 jobs rather than 20).
TEST_CASE("fast paths: parallel_for's worker may not run on the caller's CPU", "[fast_paths]") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  kernels::set_threads(2);
  int kept_off = 0, jobs = 0;
  for (int job = 0; job < 20; ++job) {
    std::atomic<int> caller_cpu{-1};
    std::atomic<bool> worker_may_use_caller_cpu{true}, worker_ran{false};
    const std::thread::id caller = std::this_thread::get_id();
    kernels::parallel_for(2, 1, [&](int64_t b, int64_t) {
      if (b == 0) {  // the caller's chunk: it waits (bounded) for the worker's, so that the
                     // worker takes chunk 1 rather than the caller after it
        caller_cpu = sched_getcpu();
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        while (!worker_ran.load() && std::chrono::steady_clock::now() < until) {
        }
        return;
      }
      if (std::this_thread::get_id() == caller) return;  // the worker had not woken in time
      while (caller_cpu.load() < 0) {
      }
      cpu_set_t mine;
      if (sched_getaffinity(0, sizeof mine, &mine) == 0) worker_may_use_caller_cpu = CPU_ISSET(caller_cpu.load(), &mine);
      worker_ran = true;
    });
    if (!worker_ran) continue;  // the caller took both chunks
    ++jobs;
    if (!worker_may_use_caller_cpu) ++kept_off;
  }
  kernels::set_threads(1);
  INFO("allowed CPUs " << CPU_COUNT(&allowed) << ", jobs the worker ran " << jobs << ", kept off " << kept_off);
  if (CPU_COUNT(&allowed) >= 2) {
    CHECK(jobs >= 10);
    CHECK(kept_off >= jobs - 2);
  } else {
    CHECK(kept_off == 0);  // one CPU: nothing to keep the worker off
  }
}

TEST_CASE("fast paths: results do not depend on the thread count", "[fast_paths]") {
  // 300 * 400 elements: several chunks of kGrain (and of rows), split over the threads.
  const Shape s = {300, 400};
  using F = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, F>> cases = {
      {"relu", [](const std::vector<Tensor>& x) { return ops::relu(x[0]); }},
      {"gelu", [](const std::vector<Tensor>& x) { return ops::gelu(x[0], "none"); }},
      {"softmax", [](const std::vector<Tensor>& x) { return ops::softmax(x[0], -1); }},
      {"log_softmax", [](const std::vector<Tensor>& x) { return ops::log_softmax(x[0], -1); }},
      {"layer_norm", [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], {400}, x[1], x[2], 1e-5); }},
      {"sum", [](const std::vector<Tensor>& x) { return ops::sum(x[0], std::vector<int64_t>{0}, false); }},
      {"copy", [](const std::vector<Tensor>& x) { return ops::contiguous(ops::transpose(x[0], 0, 1)); }},
      {"bias add", [](const std::vector<Tensor>& x) { return ops::add(x[0], x[1], Value::integer(1)); }},
      {"mul", [](const std::vector<Tensor>& x) { return ops::mul(x[0], ops::wrap_number(Value::real(0.125))); }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    auto run = [&, f = f, name = std::string(name)](int threads) {
      kernels::set_threads(threads);
      Bits b = forward_backward(f, {leaf(s, 11, 3.0, false), leaf({400}, 12, 1.0, false), leaf({400}, 13, 1.0, false)}, 14);
      kernels::set_threads(1);
      // layer_norm's weight and bias gradients are sums per thread's rows added up after,
      // as in PyTorch, so they follow the thread count as PyTorch's do
      // (tests/ops/test_layer_norm_cpu.cpp checks them at 2 threads against torch's).
      if (name == "layer_norm") b.resize(2);
      return b;
    };
    const Bits one = run(1);
    CHECK(run(2) == one);
    CHECK(run(3) == one);
  }
}
