// Random in-place fills and torch.bernoulli: x.uniform_, x.normal_, x.bernoulli_, x.random_
// and torch.bernoulli / x.bernoulli, with this family's op-table fragment.
//
// Autograd facts measured with /usr/bin/python3 and torch 1.13: each in-place fill records
// its own node over self's old history (UniformBackward0, NormalBackward0, BernoulliBackward2
// for a number p, BernoulliBackward1 with edges (self, p) for a tensor p, RandomBackward0 /
// 1 / 2 for random_(from, to) / random_(to) / random_()), saves nothing, bumps the version
// once, and every gradient is zeros (derivatives.yaml: zeros_like); torch.bernoulli(input) is
// BernoulliBackward0 over input, torch.bernoulli(input, p) records no node.
//
// The values are agtrace's, not PyTorch's: drawn from the run-wide generator (Runtime::
// generator(), lib/scenario/random.hpp) element by element in row-major order, with the
// rules creation.cpp documents for the random creators:
//   uniform_(from, to)  from + uniform01() * (to - from)
//   normal_(mean, std)  mean + std * (Box-Muller as randn: u1 = uniform01_open_below(),
//                       u2 = uniform01(), sqrt(-2 ln u1) * cos(2 pi u2))
//   bernoulli_(p)       1 if uniform01() < p else 0 (p per element for a tensor p)
//   random_(from, to)   from + floor(uniform01() * (to - from)), to - 1 if rounding reached to;
//                       random_() draws [0, 2^digits] for a floating dtype (24 for float32, 53
//                       for float64, 11 float16, 8 bfloat16) and [0, 2^63 - 1] for int64
// So a scenario compares them with PyTorch only where the values reach no printed number and
// no compared gradient (p of 0 or 1, std 0 and from == to are deterministic in both).
#include <cmath>
#include <string>
#include <vector>

#include "ops/common.hpp"
#include "ops/indexing.hpp"
#include "ops/inplace_util.hpp"
#include "ops/more_util.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

constexpr double kPi = 3.141592653589793;

// Every input's gradient is zeros of its shape (derivatives.yaml `zeros_like(grad)`), in both
// modes: under create_graph the zeros carry no graph (as zero_'s).
std::vector<Tensor> zeros_backward(Node& n, const std::vector<Tensor>&) {
  std::vector<Tensor> out;
  for (const auto& m : n.input_meta) out.push_back(kernels::full(m.sizes, 0.0, m.dtype, m.meta));
  return out;
}

[[noreturn]] void value_error(const std::string& message) { throw ScenarioError("type_error", message); }

std::string number_text(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// The steps of an in-place fill in VariableType's order (inplace_util.hpp): the autograd
// checks, the overlap check, the node (edges self and a tensor p), the values, one bump, the
// history. `draw(i)` gives element i (row-major) on a device with data.
template <typename Draw>
void random_fill_(const Tensor& self, const char* op, const char* node_name, const Tensor& p, Draw&& draw) {
  OpScope scope(op);
  check_inplace_allowed(self);
  check_no_internal_overlap(self);
  require_host(self);
  Shared<Node> node;
  if (p ? needs_grad({&self, &p}) : needs_grad({&self}))
    node = p ? make_node(node_name, zeros_backward, {self, p}) : make_node(node_name, zeros_backward, {self});
  if (node) node->differentiable_backward = zeros_backward;
  int64_t i = 0;
  kernels::unary_inplace(self, [&](double) { return draw(i++); });
  bump(self);
  if (node) record_history(self, node);
}

void require_floating_kernel(const Tensor& t, const char* kernel) {
  if (!is_floating(t->dtype())) act_detail::not_implemented(kernel, t->dtype());
}

double bernoulli_p(double p) {
  if (!(p >= 0 && p <= 1)) value_error("bernoulli_ expects p to be in [0, 1], but got p=" + number_text(p));
  return p;
}

// A tensor p's values broadcast to `shape`, each checked to be a probability (measured:
// "Expected p_in >= 0 && p_in <= 1 to be true, but got false.").
std::vector<double> probabilities(const Tensor& p, const Shape& shape) {
  const Shape common = kernels::broadcast_shapes(shape, p->sizes, "bernoulli_");
  if (common != shape)
    throw ScenarioError("shape_mismatch", "The expanded size of the tensor must match the existing size (bernoulli_ "
                                          "of a p that does not broadcast to self)");
  if (p->is_meta()) return {};
  std::vector<double> v = broadcast_values(p, shape);
  for (double q : v)
    if (!(q >= 0 && q <= 1)) value_error("Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  return v;
}

// random_()'s upper bound, inclusive: 2^digits for a floating dtype, int64's max.
double random_default_to(DType d) {
  switch (d) {
    case DType::Float32: return std::ldexp(1.0, 24) + 1;
    case DType::Float64: return std::ldexp(1.0, 53) + 1;
    case DType::Float16: return std::ldexp(1.0, 11) + 1;
    case DType::BFloat16: return std::ldexp(1.0, 8) + 1;
    case DType::Int64: return std::ldexp(1.0, 63);
    default: throw ScenarioError("unsupported", "random_() of a bool tensor is not supported");
  }
}

}  // namespace

// ---------------------------------------------------------------- the table fragment

namespace {

const Value& number_arg(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (!v.is_number()) type_error(short_fn(a.fn) + "(): argument '" + name + "' must be Number, not " + type_name(v));
  return v;
}

Value impl_uniform_(Args& a, Runtime& rt) {
  Tensor x = a.tensor("self");
  const double from = number_arg(a, "from").number(), to = number_arg(a, "to").number();
  require_floating_kernel(x, "check_uniform_bounds");
  if (!std::isfinite(from) || !std::isfinite(to))
    throw ScenarioError("unsupported", "uniform_ with a non-finite bound is not supported");
  if (from > to)
    value_error("uniform_ expects to return a [from, to) range, but found from=" + number_text(from) +
                " > to=" + number_text(to));
  SplitMix64& gen = rt.generator();
  random_fill_(x, "uniform_", "UniformBackward0", nullptr, [&](int64_t) { return from + gen.uniform01() * (to - from); });
  return T(x);
}

Value impl_normal_(Args& a, Runtime& rt) {
  Tensor x = a.tensor("self");
  const double mean = number_arg(a, "mean").number(), std_dev = number_arg(a, "std").number();
  require_floating_kernel(x, "normal_kernel_cpu");
  if (std_dev < 0) value_error("normal expects std >= 0.0, but found std " + number_text(std_dev));
  SplitMix64& gen = rt.generator();
  random_fill_(x, "normal_", "NormalBackward0", nullptr, [&](int64_t) {
    const double u1 = gen.uniform01_open_below(), u2 = gen.uniform01();
    return mean + std_dev * (std::sqrt(-2.0 * std::log(u1)) * std::cos((2.0 * kPi) * u2));
  });
  return T(x);
}

Value impl_bernoulli_(Args& a, Runtime& rt) {
  Tensor x = a.tensor("self");
  const Value& p = a.get("p");
  SplitMix64& gen = rt.generator();
  // measured: "bernoulli_scalar_cpu_" not implemented for 'Half' (the tensor-p kernel was not
  // measured in Half: refused too, as unsupported).
  if (x->dtype() == DType::Float16 && !x->is_meta()) {
    if (p.kind == Value::Kind::Tensor)
      throw ScenarioError("unsupported", "bernoulli_ of a float16 tensor with a tensor p is not supported");
    act_detail::not_implemented("bernoulli_scalar_cpu_", DType::Float16);
  }
  if (p.kind == Value::Kind::Tensor) {
    const std::vector<double> probs = probabilities(p.t, x->sizes);
    random_fill_(x, "bernoulli_", "BernoulliBackward1", p.t,
                 [&](int64_t i) { return gen.uniform01() < probs[static_cast<size_t>(i)] ? 1.0 : 0.0; });
    return T(x);
  }
  const double q = bernoulli_p(number_arg(a, "p").number());
  random_fill_(x, "bernoulli_", "BernoulliBackward2", nullptr, [&](int64_t) { return gen.uniform01() < q ? 1.0 : 0.0; });
  return T(x);
}

// torch.bernoulli(input): a new tensor of input's shape and dtype, 1 with probability
// input[i]; BernoulliBackward0 over input. torch.bernoulli(input, p): p for every element,
// no node (measured: requires_grad False).
Value impl_bernoulli(Args& a, Runtime& rt) {
  Tensor x = a.tensor("self");
  OpScope scope("bernoulli");
  require_host(x);
  SplitMix64& gen = rt.generator();
  if (a.given("p")) {
    const double q = bernoulli_p(number_arg(a, "p").number());
    Tensor r = empty_tensor(x->sizes, x->dtype(), x->is_meta());
    kernels::unary_inplace(r, [&](double) { return gen.uniform01() < q ? 1.0 : 0.0; });
    return T(r);
  }
  require_floating_kernel(x, "bernoulli_tensor_cpu_p_");
  const std::vector<double> probs = probabilities(x, x->sizes);
  Tensor r = empty_tensor(x->sizes, x->dtype(), x->is_meta());
  int64_t i = 0;
  kernels::unary_inplace(r, [&](double) { return gen.uniform01() < probs[static_cast<size_t>(i++)] ? 1.0 : 0.0; });
  if (needs_grad({&x})) {
    auto node = make_node("BernoulliBackward0", zeros_backward, {x});
    node->differentiable_backward = zeros_backward;
    set_history(r, node);
  }
  return T(r);
}

// random_(), random_(to), random_(from, to): Python's overloads, `to` also by keyword.
Value impl_random_(Args& a, Runtime& rt) {
  Tensor x = a.tensor("self");
  const Value& args = a.get("args");
  std::vector<Value> bounds = args.items;
  if (a.given("to")) bounds.push_back(a.get("to"));
  if (bounds.size() > 2) type_error("random_() received an invalid combination of arguments");
  for (const Value& b : bounds)
    if (b.kind != Value::Kind::Int) type_error("random_(): argument 'to' must be int, not " + type_name(b));
  const char* node = bounds.size() == 2 ? "RandomBackward0" : bounds.size() == 1 ? "RandomBackward1" : "RandomBackward2";
  const double from = bounds.size() == 2 ? static_cast<double>(bounds[0].i) : 0.0;
  const double to = bounds.empty() ? random_default_to(x->dtype()) : static_cast<double>(bounds.back().i);
  if (from >= to)
    value_error("random_ expects 'from' to be less than 'to', but got from=" + number_text(from) +
                " >= to=" + number_text(to));
  if (x->dtype() == DType::Bool || (is_floating(x->dtype()) && !bounds.empty() && to - from > random_default_to(x->dtype())))
    throw ScenarioError("unsupported", "random_ of this range on a " + dtype_name(x->dtype()) + " tensor is not supported");
  SplitMix64& gen = rt.generator();
  random_fill_(x, "random_", node, nullptr, [&](int64_t) {
    const double v = from + std::floor(gen.uniform01() * (to - from));
    return v >= to ? to - 1 : v;
  });
  return T(x);
}

}  // namespace

std::vector<OpEntry> random_inplace_ops() {
  const std::string values = "nothing; values from agtrace's generator (not PyTorch's), gradient zeros";
  return {
      {"uniform_", {"Tensor.uniform_"}, "(self, from=0, to=1)", "inplace", "UniformBackward0", values, impl_uniform_, {}},
      {"normal_", {"Tensor.normal_"}, "(self, mean=0, std=1)", "inplace", "NormalBackward0", values, impl_normal_, {}},
      {"bernoulli_", {"Tensor.bernoulli_"}, "(self, p=0.5)", "inplace", "BernoulliBackward2 / BernoulliBackward1",
       values + "; a tensor p (BernoulliBackward1) is an edge too", impl_bernoulli_, {}},
      {"bernoulli", {"torch.bernoulli", "Tensor.bernoulli"}, "(self, p=None)", "creation", "BernoulliBackward0 / -",
       "nothing; p element-wise from self (BernoulliBackward0), or a number p (no node); agtrace's generator",
       impl_bernoulli, {}},
      {"random_", {"Tensor.random_"}, "(self, *args, to=None)", "inplace",
       "RandomBackward0 / RandomBackward1 / RandomBackward2", values + "; (from, to), (to) or ()", impl_random_, {}},
  };
}

}  // namespace agtrace::ops
