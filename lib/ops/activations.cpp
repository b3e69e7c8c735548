// Pointwise math, activations, reductions and selection: for every op its forward, the
// node PyTorch 1.13 records, what that node saves (attributes in dir() order, which is
// alphabetical) and its backward formula, side by side. Formulas follow
// tools/autograd/derivatives.yaml and FunctionsManual.cpp of PyTorch 1.13; node names,
// saved attributes, dtypes and error wording were measured with /usr/bin/python3 and
// torch 1.13 (the row of shared/oracle/SUMMARY.md is cited where it has one).
//
// Backward formulas compute each gradient in one pass into one new storage (PyTorch's
// fused CPU kernels allocate the gradient, not every intermediate of the formula).
#include "ops/activations.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/gelu_f32.hpp"
#include "ops/inplace_util.hpp"
#include "ops/softmax_f32.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/fast_paths.hpp"

namespace agtrace::ops {

using namespace detail;
using namespace act_detail;
using autograd::make_node;
using autograd::set_history;

// ================================================================ shared helpers

namespace act_detail {

std::string scalar_name(DType d) {
  const std::string s = dtype_tensor_type(d);  // "FloatTensor" -> "Float"
  return s.substr(0, s.size() - 6);
}

void not_implemented(const std::string& kernel, DType d) {
  // AT_DISPATCH's wording: "sin_vml_cpu" not implemented for 'Half'.
  ScenarioError e("dtype_mismatch", "\"" + kernel + "\" not implemented for '" + scalar_name(d) + "'");
  e.facts = {{"op", kernel}, {"dtype", dtype_name(d)}};
  throw e;
}

void require_kernel_dtype(const Tensor& t, const std::string& kernel, bool half_on_cpu_ok) {
  const DType d = t->dtype();
  if (!is_floating(d)) not_implemented(kernel, d);
  // The CPU kernels of 1.13 lack Half for most of these ops (measured); meta has no kernels,
  // and the CUDA kernels have Half (AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16) in
  // ATen/native/cuda), so a cuda tensor passes.
  if (d == DType::Float16 && !half_on_cpu_ok && !t->is_meta() && !t->storage->on_device()) not_implemented(kernel, d);
}

Tensor make_out(const Shape& shape, DType dtype, bool meta, const std::vector<double>& values) {
  if (meta) return empty_tensor(shape, dtype, meta);
  return tensor_from_values(shape, dtype, values);  // rounds to dtype
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t w = kernels::wrap_dim(d, ndim);
    if (std::find(out.begin(), out.end(), w) != out.end())
      throw ScenarioError("type_error", "dim " + std::to_string(w) + " appears multiple times in the list of dims");
    out.push_back(w);
  }
  return out;
}

ReducePlan plan_reduce(const Shape& sizes, const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p;
  const size_t nd = sizes.size();
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims)
    if (static_cast<size_t>(d) < nd) reduced[static_cast<size_t>(d)] = true;
  Shape kept;
  for (size_t d = 0; d < nd; ++d) {
    kept.push_back(reduced[d] ? 1 : sizes[d]);
    if (!reduced[d] || keepdim) p.out_shape.push_back(reduced[d] ? 1 : sizes[d]);
  }
  p.groups = shape_numel(kept);
  const int64_t n = shape_numel(sizes);
  p.count = p.groups > 0 ? n / p.groups : 0;
  Shape kstr = contiguous_strides(kept);
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) kstr[d] = 0;
  p.group.resize(static_cast<size_t>(n));
  for_each_offset(sizes, kstr, 0, [&](int64_t i, int64_t off) { p.group[static_cast<size_t>(i)] = off; });
  return p;
}

}  // namespace act_detail

namespace {

const AttrValue& attr_of(const Node& n, const char* name) { return n.attr(name); }

// create_graph=True formulas, defined in their section below.
autograd::BackwardFn unary_dbackward_for(const std::string& node);
std::vector<Tensor> softmax_dbackward(Node& n, const std::vector<Tensor>& g);

// The input's gradient from per-element values (row-major), in the input's dtype.
Tensor input_grad(const Node& n, size_t i, bool meta, const std::vector<double>& values) {
  const auto& m = n.input_meta[i];
  return make_out(m.sizes, m.dtype, meta, values);
}

// grad * f(saved value) in one pass, in the input's dtype (pointwise backward formulas
// written in terms of one saved tensor: self or result). f(saved) is a tensor of the
// input's dtype in PyTorch's formula (grad * self.cos()), so it is rounded to that dtype
// before the product, unless the kernel keeps it in float (gelu's, measured in bfloat16).
// On cuda, `device_op` (lib/cuda's backward op code on (grad, saved), slope s0) computes
// the same product in one kernel: one new storage, as here.
template <typename F>
std::vector<Tensor> grad_times(Node& n, const std::vector<Tensor>& g, const char* attr, cuda::pw::BinaryOp device_op,
                               F&& f, bool round_factor = true, double s0 = 1) {
  Tensor s = n.unpack(attr);
  const DType dt = n.input_meta[0].dtype;
  if (kernels::device::any_on_device({&g[0], &s}))
    return {kernels::device::binary(device_op, g[0], s, dt, "backward", s0)};
  const DType factor_dt = round_factor ? dt : DType::Float32;
  return {kernels::binary_split(g[0], s, dt,
                          [&f, factor_dt](double gv, double sv) {
                            return gv * (factor_dt == DType::Float64 ? f(sv) : round_to_dtype(f(sv), factor_dt));
                          },
                          "backward")};
}

// ================================================================ abs sin cos rsqrt

// derivatives.yaml: abs: grad * self.sgn()   (sgn(0) = 0, measured: abs'(0) = 0)
std::vector<Tensor> abs_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", cuda::pw::BinaryOp::AbsBackward,
                    [](double s) { return s > 0 ? 1.0 : (s < 0 ? -1.0 : 0.0); });
}
// sin: grad * self.cos().conj()
std::vector<Tensor> sin_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", cuda::pw::BinaryOp::SinBackward, [](double s) { return std::cos(s); });
}
// cos: grad * -self.sin().conj()
std::vector<Tensor> cos_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", cuda::pw::BinaryOp::CosBackward, [](double s) { return -std::sin(s); });
}
// rsqrt: -0.5 * grad * result.pow(3).conj(); pow(3) multiplies in the dtype, r * r then
// * r (measured in bfloat16: 2.234375 ** 3 gives 11.1875, not the nearest 11.125).
std::vector<Tensor> rsqrt_backward(Node& n, const std::vector<Tensor>& g) {
  const DType dt = n.input_meta[0].dtype;
  return grad_times(n, g, "result", cuda::pw::BinaryOp::RsqrtBackward,
                    [dt](double r) { return -0.5 * round_to_dtype(round_to_dtype(r * r, dt) * r, dt); });
}

struct UnaryOp {
  const char* op;
  const char* node;
  const char* kernel;      // kernel name in PyTorch's "not implemented for" message
  double (*f)(double);
  autograd::BackwardFn backward;
  bool saves_result;       // else saves self (SUMMARY: abs/sin/cos self, rsqrt result)
  bool int_to_float;       // integer and bool inputs give float32 (sin, cos, rsqrt)
  bool half_on_cpu;        // the CPU kernel has Half (abs; not sin, cos, rsqrt: measured)
  cuda::pw::UnaryOp device_op;
};

Tensor unary_op(const Tensor& a, const UnaryOp& op) {
  OpScope scope(op.op);
  DType out = a->dtype();
  if (!is_floating(out)) {
    if (op.int_to_float) out = DType::Float32;
    else if (out == DType::Bool) not_implemented(op.kernel, out);  // "abs_cpu" not implemented for 'Bool'
  }
  const bool on_device = kernels::device::on_device(a);
  // The CUDA kernels have Half (the CPU's sin/cos/rsqrt lack it).
  if (out == DType::Float16 && !op.half_on_cpu && !a->is_meta() && !on_device) not_implemented(op.kernel, out);
  Tensor r = on_device ? kernels::device::unary(op.device_op, a, out) : kernels::unary(a, out, op.f);
  if (needs_grad({&a})) {
    auto node = make_node(op.node, op.backward, {a});
    node->differentiable_backward = unary_dbackward_for(op.node);
    set_history(r, node);
    if (op.saves_result)
      node->save_output("result", r, 0);
    else
      node->save_input("self", a);
  }
  return r;
}

const UnaryOp kAbs{"abs", "AbsBackward0", "abs_cpu", [](double x) { return std::fabs(x); }, abs_backward, false, false,
                   true, cuda::pw::UnaryOp::Abs};
const UnaryOp kSin{"sin", "SinBackward0", "sin_vml_cpu", [](double x) { return std::sin(x); }, sin_backward, false,
                   true, false, cuda::pw::UnaryOp::Sin};
const UnaryOp kCos{"cos", "CosBackward0", "cos_vml_cpu", [](double x) { return std::cos(x); }, cos_backward, false,
                   true, false, cuda::pw::UnaryOp::Cos};
const UnaryOp kRsqrt{"rsqrt", "RsqrtBackward0", "rsqrt_cpu", [](double x) { return 1.0 / std::sqrt(x); },
                     rsqrt_backward, true, true, false, cuda::pw::UnaryOp::Rsqrt};

// ================================================================ clamp

double attr_number(const AttrValue& a) { return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i); }

// clamp_backward(grad, self, min, max): the gradient passes where min <= self <= max
// (both bounds inclusive; measured: clamp(-1, 1) passes at -1 and 1, and nothing when
// min > max).
std::vector<Tensor> clamp_backward(Node& n, const std::vector<Tensor>& g) {
  const AttrValue& mn = attr_of(n, "min");
  const AttrValue& mx = attr_of(n, "max");
  const bool has_min = mn.kind != AttrValue::Kind::None, has_max = mx.kind != AttrValue::Kind::None;
  const double lo = has_min ? attr_number(mn) : 0.0, hi = has_max ? attr_number(mx) : 0.0;
  // where(mask, grad, 0): a selection, so an inf or NaN gradient outside the range is 0.
  Tensor self = n.unpack("self");
  if (kernels::device::any_on_device({&g[0], &self})) {
    // ClampBackward with a missing bound as -inf / +inf (every value but NaN passes it).
    const double inf = std::numeric_limits<double>::infinity();
    return {kernels::device::ternary(cuda::pw::TernaryOp::ClampBackward, g[0], self, self, n.input_meta[0].dtype,
                                     "backward", has_min ? lo : -inf, has_max ? hi : inf)};
  }
  return {kernels::binary(g[0], self, n.input_meta[0].dtype,
                          [=](double gv, double s) {
                            const bool pass = (!has_min || s >= lo) && (!has_max || s <= hi);
                            return pass ? gv : 0.0;
                          },
                          "backward")};
}

// ================================================================ leaky_relu gelu silu

// leaky_relu_backward(grad, self, negative_slope, false): self > 0 ? grad : grad * slope.
std::vector<Tensor> leaky_relu_backward(Node& n, const std::vector<Tensor>& g) {
  const double slope = attr_number(attr_of(n, "negative_slope"));
  return grad_times(n, g, "self", cuda::pw::BinaryOp::LeakyReluBackward,
                    [slope](double s) { return s > 0 ? 1.0 : slope; }, true, slope);
}

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluC = 0.044715;

inline double gelu_none(double x) { return 0.5 * x * (1.0 + std::erf(x / kSqrt2)); }
// d/dx x*Phi(x) = Phi(x) + x*phi(x). The CPU kernel computes it in float, even for
// bfloat16 (measured: bitwise equal with one final rounding).
inline double gelu_none_grad(double x) { return 0.5 * (1.0 + std::erf(x / kSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x); }

// The tanh approximation as GeluKernelImpl / GeluBackwardKernelImpl compute it: every
// step and both constants in the input's dtype (scalar_t), in this order. Measured
// bitwise in bfloat16 for 6 and 40 elements; in float64 it is the exact formula
//   y = 0.5 x (1 + tanh(u)), u = k (x + c x^3),
//   y' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(u).
struct GeluTanh {
  DType dt;
  double rd(double v) const { return round_to_dtype(v, dt); }
  double k() const { return rd(kSqrt2OverPi); }
  double c() const { return rd(kGeluC); }
  double forward(double x) const {
    const double x_cube = rd(rd(x * x) * x);
    const double inner = rd(k() * rd(x + rd(c() * x_cube)));
    return rd(rd(0.5 * x) * rd(1.0 + rd(std::tanh(inner))));
  }
  double backward(double dy, double x) const {
    const double x_sq = rd(x * x);
    const double x_cube = rd(x_sq * x);
    const double inner = rd(k() * rd(x + rd(c() * x_cube)));
    const double t = rd(std::tanh(inner));
    const double left = rd(0.5 * x);
    const double right = rd(1.0 + t);
    const double left_derivative = rd(0.5 * right);
    const double tanh_derivative = rd(1.0 - rd(t * t));
    const double inner_derivative = rd(k() * rd(1.0 + rd(rd(3.0 * c()) * x_sq)));
    const double right_derivative = rd(rd(left * tanh_derivative) * inner_derivative);
    return dy * rd(left_derivative + right_derivative);
  }
};

// approximate='none' on bfloat16 as GeluKernelImpl / GeluBackwardKernelImpl compute it on the
// CPU: Vectorized<BFloat16> arithmetic, every step (constants included) rounded to bfloat16,
// erf and exp in float. Measured on 100,000 elements: 0 differences forward and backward;
// rounding the exact value once differs in 46,021 outputs and 57,203 gradients.
// Where 1.13's use_mkldnn holds instead (gelu_out_cpu / gelu_backward_out_cpu: oneDNN's
// eltwise gelu_erf on a contiguous input of more than one element, for bfloat16 only where
// mkldnn_bf16_device_check() does, kernels::bf16_cpu_kernels), the value is the float formula
// rounded once (gelu_bf16_onednn below). Measured on an AVX-512 machine: 100,000 outputs and
// 100,000 gradients are the float kernel's rounded once; a one-element or strided input (a
// strided grad does not matter) rounds every step as above.
struct GeluNoneBf16 {
  static double rd(double v) { return kernels::round_bf16(v); }
  static double alpha() { return rd(1.0 / kSqrt2); }                // scalar_t(M_SQRT1_2)
  static double beta() { return rd(kInvSqrt2Pi); }                  // M_2_SQRTPI * M_SQRT1_2 * 0.5
  static double cdf(double x) { return rd(0.5 * rd(1.0 + rd(std::erf(rd(x * alpha()))))); }
  static double forward(double x) { return rd(rd(x * 0.5) * rd(1.0 + rd(std::erf(rd(x * alpha()))))); }
  static double backward(double dy, double x) {
    const double pdf = rd(beta() * rd(std::exp(rd(rd(x * x) * -0.5))));
    return rd(dy * rd(cdf(x) + rd(x * pdf)));
  }
};

bool gelu_bf16_onednn(const Tensor& self) {
  return kernels::bf16_cpu_kernels() == kernels::Bf16CpuKernels::OneDnn && self->is_contiguous() && self->numel() > 1;
}

// PyTorch's float formula (ops/gelu_f32.hpp) on one element held as a double: float32's
// general path, and bfloat16's oneDNN path (its result then rounded to bfloat16).
double gelu_float(double x) { return static_cast<double>(gelu_f32::forward(static_cast<float>(x))); }
double gelu_float_backward(double dy, double x) {
  return static_cast<double>(gelu_f32::backward(static_cast<float>(dy), static_cast<float>(x)));
}

// gelu_backward(grad, self, approximate)
std::vector<Tensor> gelu_backward(Node& n, const std::vector<Tensor>& g) {
  const DType dt = n.input_meta[0].dtype;
  if (dt == DType::BFloat16 && attr_of(n, "approximate").s != "tanh") {
    Tensor self = n.unpack("self");
    if (!kernels::device::any_on_device({&g[0], &self}) && !self->is_meta() && g[0]->dtype() == DType::BFloat16) {
      if (gelu_bf16_onednn(self)) return {kernels::binary_split(g[0], self, dt, gelu_float_backward, "backward")};
      return {kernels::binary_split(g[0], self, dt, [](double dy, double x) { return GeluNoneBf16::backward(dy, x); },
                                    "backward")};
    }
  }
  if (attr_of(n, "approximate").s == "tanh") {
    Tensor self = n.unpack("self");
    if (kernels::device::any_on_device({&g[0], &self}))
      return {kernels::device::binary(cuda::pw::BinaryOp::GeluTanhBackward, g[0], self, dt, "backward")};
    const GeluTanh gt{dt};
    return {kernels::binary_split(g[0], self, dt, [gt](double dy, double x) { return gt.backward(dy, x); }, "backward")};
  }
  if (dt == DType::Float32) {
    // PyTorch's float formula (ops/gelu_f32.hpp): dy * (cdf + x * pdf) in float.
    Tensor self = n.unpack("self");
    if (kernels::device::any_on_device({&g[0], &self}))
      return {kernels::device::binary(cuda::pw::BinaryOp::GeluBackward, g[0], self, dt, "backward")};
    if (g[0]->dtype() == DType::Float32)
      if (Tensor r = kernels::binary_exact_f32(g[0], self, gelu_f32::backward_block)) return {r};
    return {kernels::binary(g[0], self, dt, gelu_float_backward, "backward")};
  }
  return grad_times(n, g, "self", cuda::pw::BinaryOp::GeluBackward, gelu_none_grad, dt == DType::Float64);
}

// silu_backward(grad, self): grad * s * (1 + self * (1 - s)), s = sigmoid(self), each
// step in the input's dtype as the CPU kernel computes it in scalar_t (measured in bfloat16).
std::vector<Tensor> silu_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const DType dt = n.input_meta[0].dtype;
  if (kernels::device::any_on_device({&g[0], &self}))
    return {kernels::device::binary(cuda::pw::BinaryOp::SiluBackward, g[0], self, dt, "backward")};
  auto r = [dt](double v) { return round_to_dtype(v, dt); };
  return {kernels::binary(g[0], self, dt,
                          [r](double dy, double x) {
                            const double s = r(1.0 / r(1.0 + r(std::exp(-x))));
                            return r(dy * s) * r(1.0 + r(x * r(1.0 - s)));
                          },
                          "backward")};
}

// ================================================================ softmax log_softmax

// Checks the dtype as the CPU kernels do (the lastdim kernel when dim is the last one).
void softmax_dtype_check(const Tensor& a, int64_t wrapped_dim, bool log) {
  const bool last = wrapped_dim == std::max<int64_t>(a->dim(), 1) - 1;
  const std::string kernel = last ? (log ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl")
                                  : "softmax_kernel_impl";
  require_kernel_dtype(a, kernel, false);
}

// Per-element values of softmax (or log_softmax) along one dim.
std::vector<double> softmax_values(const Tensor& a, int64_t wrapped_dim, bool log) {
  std::vector<double> x = to_values(a);
  const ReducePlan p = plan_reduce(a->sizes, {wrapped_dim}, true);
  std::vector<double> mx(static_cast<size_t>(p.groups), -std::numeric_limits<double>::infinity());
  std::vector<double> sum(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < x.size(); ++i) mx[p.group[i]] = std::max(mx[p.group[i]], x[i]);
  // exp of x - max <= 0, and the row sums: below float64, the float32 fast path's
  // arithmetic (ops/softmax_f32.hpp: its exp, each row summed in lanes by its elements'
  // positions, the order visited here); float64 results show every bit, so they keep glibc's
  // exp and the row summed in order.
  const bool f64 = a->dtype() == DType::Float64;
  auto exp_le0 = [f64](double v) { return f64 ? std::exp(v) : softmax_f32::exp_nonpositive(v); };
  std::vector<LaneSum> lanes(f64 ? 0 : static_cast<size_t>(p.groups));
  std::vector<int64_t> position(lanes.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    const double e = exp_le0(x[i] - mx[k]);
    if (f64) sum[k] += e;
    else lanes[k].add(position[k]++, e);
  }
  for (size_t k = 0; k < lanes.size(); ++k) sum[k] = lanes[k].total();
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    out[i] = log ? x[i] - mx[k] - std::log(sum[k]) : exp_le0(x[i] - mx[k]) / sum[k];
  }
  return out;
}

// Fast paths for softmax / log_softmax over the last dim of contiguous float32 tensors
// (issue #6): the same double arithmetic as softmax_values and the backward formulas below,
// in the same order (a row's elements are its group's elements in row-major order), read
// from and written to the float storages directly, rows split between threads (each row
// computed alone, so the split does not change a bit). Null when they do not apply.
struct LastDimRows {
  int64_t rows = 0, cols = 0;
};
bool last_dim_rows(const Shape& sizes, int64_t wrapped_dim, LastDimRows& out) {
  if (sizes.empty() || wrapped_dim != static_cast<int64_t>(sizes.size()) - 1) return false;
  out.cols = sizes.back();
  out.rows = out.cols > 0 ? shape_numel(sizes) / out.cols : 0;
  return out.cols > 0;
}
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kernels::kGrain / std::max<int64_t>(cols, 1)); }

Tensor softmax_fast(const Tensor& a, int64_t wrapped_dim, bool log) {
  LastDimRows p;
  const float* x = kernels::contiguous_f32(a);
  if (!x || !last_dim_rows(a->sizes, wrapped_dim, p)) return nullptr;
  Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
  float* out = r->storage->f32();
  kernels::parallel_for(p.rows, row_grain(p.cols), [&](int64_t r0, int64_t r1) {
    std::vector<double> e(static_cast<size_t>(p.cols));
    for (int64_t row = r0; row < r1; ++row) {
      const float* xr = x + row * p.cols;
      float* o = out + row * p.cols;
      const double mx = static_cast<double>(softmax_f32::row_max(xr, p.cols));
      const double sum = softmax_f32::exp_row(xr, mx, e.data(), p.cols);
      if (log) {
        const double ls = std::log(sum);
        for (int64_t c = 0; c < p.cols; ++c) o[c] = static_cast<float>(static_cast<double>(xr[c]) - mx - ls);
      } else {
        for (int64_t c = 0; c < p.cols; ++c) o[c] = static_cast<float>(e[static_cast<size_t>(c)] / sum);
      }
    }
  });
  return r;
}

// _softmax_backward_data / _log_softmax_backward_data over the last dim (the last-dim
// kernel: the row's reduction rounded to float32 before use, as in the general path).
Tensor softmax_backward_fast(const Node& n, const Tensor& g, const Tensor& res, int64_t wrapped_dim, bool log) {
  LastDimRows p;
  const auto& m = n.input_meta[0];
  const float* gv = kernels::contiguous_f32(g);
  const float* rv = kernels::contiguous_f32(res);
  if (!gv || !rv || m.dtype != DType::Float32 || m.sizes != g->sizes || res->sizes != g->sizes ||
      !last_dim_rows(g->sizes, wrapped_dim, p))
    return nullptr;
  Tensor r = uninitialized_tensor(m.sizes, DType::Float32, false);
  float* out = r->storage->f32();
  kernels::parallel_for(p.rows, row_grain(p.cols), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const float* gr = gv + row * p.cols;
      const float* rr = rv + row * p.cols;
      float* o = out + row * p.cols;
      double acc = 0.0;
      if (log) {
        for (int64_t c = 0; c < p.cols; ++c) acc += static_cast<double>(gr[c]);
        acc = static_cast<double>(static_cast<float>(acc));
        for (int64_t c = 0; c < p.cols; ++c)
          o[c] = static_cast<float>(static_cast<double>(gr[c]) - std::exp(static_cast<double>(rr[c])) * acc);
      } else {
        for (int64_t c = 0; c < p.cols; ++c) acc += static_cast<double>(gr[c]) * static_cast<double>(rr[c]);
        acc = static_cast<double>(static_cast<float>(acc));
        for (int64_t c = 0; c < p.cols; ++c)
          o[c] = static_cast<float>(static_cast<double>(rr[c]) * (static_cast<double>(gr[c]) - acc));
      }
    }
  });
  return r;
}

int64_t wrapped_attr_dim(const Node& n) {
  return kernels::wrap_dim(attr_of(n, "dim").i, static_cast<int64_t>(n.input_meta[0].sizes.size()));
}

bool is_last_dim(const Node& n) {
  return wrapped_attr_dim(n) == std::max<int64_t>(static_cast<int64_t>(n.input_meta[0].sizes.size()), 1) - 1;
}

// _softmax_backward_data(grad, result, dim): result * (grad - sum(grad * result, dim, keepdim))
std::vector<Tensor> softmax_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = n.unpack("result");
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  if (kernels::device::any_on_device({&g[0], &r}))  // cuda/softmax.cuh's backward, one new storage
    return {kernels::device::softmax_backward(g[0], r, wrapped_attr_dim(n), false, n.input_meta[0].dtype)};
  if (Tensor fast = softmax_backward_fast(n, g[0], r, wrapped_attr_dim(n), false)) return {fast};
  const ReducePlan p = plan_reduce(n.input_meta[0].sizes, {wrapped_attr_dim(n)}, true);
  std::vector<double> gv = to_values(g[0]), rv = to_values(r);
  // The last-dim kernel holds the reduction in scalar_t, the other computes in float
  // (measured bitwise in bfloat16; bfloat16 softmax(b, -1).sum() has exactly zero gradient).
  const DType dt = n.input_meta[0].dtype;
  const bool last = is_last_dim(n);
  std::vector<double> dot(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < gv.size(); ++i) dot[p.group[i]] += gv[i] * rv[i];
  if (last)
    for (double& d : dot) d = round_to_dtype(d, dt);
  std::vector<double> out(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) out[i] = rv[i] * (gv[i] - dot[p.group[i]]);
  return {input_grad(n, 0, false, out)};
}

// _log_softmax_backward_data(grad, result, dim): grad - exp(result) * sum(grad, dim, keepdim)
std::vector<Tensor> log_softmax_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = n.unpack("result");
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  if (kernels::device::any_on_device({&g[0], &r}))
    return {kernels::device::softmax_backward(g[0], r, wrapped_attr_dim(n), true, n.input_meta[0].dtype)};
  if (Tensor fast = softmax_backward_fast(n, g[0], r, wrapped_attr_dim(n), true)) return {fast};
  const ReducePlan p = plan_reduce(n.input_meta[0].sizes, {wrapped_attr_dim(n)}, true);
  std::vector<double> gv = to_values(g[0]), rv = to_values(r);
  // As for softmax: the last-dim kernel rounds the sum to scalar_t (measured in bfloat16).
  const DType dt = n.input_meta[0].dtype;
  const bool last = is_last_dim(n);
  std::vector<double> sum(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < gv.size(); ++i) sum[p.group[i]] += gv[i];
  if (last)
    for (double& v : sum) v = round_to_dtype(v, dt);
  std::vector<double> out(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) out[i] = gv[i] - std::exp(rv[i]) * sum[p.group[i]];
  return {input_grad(n, 0, false, out)};
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log) {
  OpScope scope(log ? "log_softmax" : "softmax");
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  softmax_dtype_check(a, wd, log);
  Tensor r = kernels::device::on_device(a) ? kernels::device::softmax(a, wd, log) : softmax_fast(a, wd, log);
  if (!r) r = make_out(a->sizes, a->dtype(), a->is_meta(), a->is_meta() ? std::vector<double>{} : softmax_values(a, wd, log));
  if (needs_grad({&a})) {
    auto node = make_node(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", log ? log_softmax_backward : softmax_backward,
                          {a});
    node->differentiable_backward = softmax_dbackward;
    set_history(r, node);
    // The dim as written: -1 reads back as 2**64 - 1 (SUMMARY: softmax dim=18446744073709551615).
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_output("result", r, 0);
  }
  return r;
}

// ================================================================ max amax

bool nan_aware_greater(double v, double best) { return std::isnan(v) || v > best; }

// evenly_distribute_backward(grad, self, result): the gradient is shared evenly by every
// element equal to the maximum (measured: max of [1, 3, 3] gives 0.5 to each 3); when the
// maximum is NaN, by the NaN elements.
std::vector<Tensor> max_all_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  if (kernels::device::any_on_device({&g[0], &self}))  // evenly among the maxima, as below
    return {kernels::device::amax_backward(self, result, g[0], {}, false, n.input_meta[0].dtype)};
  const double r = item(result), gv = item(g[0]);
  std::vector<double> s = to_values(self);
  auto hit = [r](double v) { return std::isnan(r) ? std::isnan(v) : v == r; };
  double count = 0;
  for (double v : s) count += hit(v) ? 1 : 0;
  std::vector<double> out(s.size(), 0.0);
  for (size_t i = 0; i < s.size(); ++i)
    if (hit(s[i])) out[i] = gv / count;
  return {input_grad(n, 0, false, out)};
}

// value_selecting_reduction_backward(grad, dim, indices, self_sizes, keepdim):
// zeros(self_sizes).scatter(dim, indices, grad).
std::vector<Tensor> max_dim_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("indices");
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  const Shape& sizes = n.input_meta[0].sizes;
  if (kernels::device::any_on_device({&g[0], &indices}))  // cuda/indexing.cuh's scatter into zeros
    return {kernels::device::max_dim_backward(
        sizes, n.input_meta[0].dtype, g[0], indices,
        sizes.empty() ? 0 : kernels::wrap_dim(attr_of(n, "dim").i, static_cast<int64_t>(sizes.size())),
        attr_of(n, "keepdim").b)};
  std::vector<double> gv = to_values(g[0]), iv = to_values(indices);
  std::vector<double> out(static_cast<size_t>(shape_numel(sizes)), 0.0);
  if (sizes.empty()) {
    out[0] = gv[0];
  } else {
    const size_t d = static_cast<size_t>(kernels::wrap_dim(attr_of(n, "dim").i, static_cast<int64_t>(sizes.size())));
    int64_t inner = 1;
    for (size_t k = d + 1; k < sizes.size(); ++k) inner *= sizes[k];
    for (size_t j = 0; j < gv.size(); ++j) {
      const int64_t o = static_cast<int64_t>(j) / inner, in = static_cast<int64_t>(j) % inner;
      const int64_t idx = static_cast<int64_t>(iv[j]);
      out[static_cast<size_t>((o * sizes[d] + idx) * inner + in)] = gv[j];
    }
  }
  return {input_grad(n, 0, false, out)};
}

std::vector<int64_t> reduced_dims_of(const Node& n) {
  const AttrValue& a = attr_of(n, "dim");
  const int64_t nd = static_cast<int64_t>(n.input_meta[0].sizes.size());
  std::vector<int64_t> out;
  for (int64_t d : a.list) out.push_back(kernels::wrap_dim(d, nd));
  return out;
}

// amax: scale_grad_by_count(restore_reduced_dims(grad, dim, keepdim),
//                           restore_reduced_dims(result, dim, keepdim) == self, dim)
//     = (grad / mask.sum(dim, keepdim=True)) * mask
// (measured: amax of [1, 3, 3] gives 0.5 to each 3).
std::vector<Tensor> amax_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  if (kernels::device::any_on_device({&g[0], &self}))
    return {kernels::device::amax_backward(self, result, g[0], reduced_dims_of(n), attr_of(n, "keepdim").b,
                                           n.input_meta[0].dtype)};
  const ReducePlan p = plan_reduce(n.input_meta[0].sizes, reduced_dims_of(n), true);
  std::vector<double> s = to_values(self), r = to_values(result), gv = to_values(g[0]);
  std::vector<double> count(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < s.size(); ++i) count[p.group[i]] += s[i] == r[p.group[i]] ? 1 : 0;
  std::vector<double> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    out[i] = (gv[k] / count[k]) * (s[i] == r[k] ? 1.0 : 0.0);
  }
  return {input_grad(n, 0, false, out)};
}

// ================================================================ var

std::string shape_list(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// var_backward(grad, self, dim, correction, keepdim), PyTorch 1.13:
//  - self 0-d or dim None: n == correction gives INFINITY * grad (grad's own shape: an
//    error for inputs of another shape, measured "Function VarBackward0 returned an
//    invalid gradient at index 0 - got [] but expected shape compatible with [1]"),
//    else (2 / (numel - correction)) * grad * (self - self.mean());
//  - by dim: (2 / (_safe_size(sizes, dim) - correction)) * grad * (self - self.mean(dim, true)),
//    where _safe_size of an empty dim list is 1 (measured: var(()) has infinite gradients).
std::vector<Tensor> var_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const Shape& sizes = n.input_meta[0].sizes;
  const int64_t correction = attr_of(n, "correction").i;
  const AttrValue& dim_attr = attr_of(n, "dim");
  const bool all = sizes.empty() || dim_attr.kind == AttrValue::Kind::None;
  std::vector<int64_t> dims;
  if (!all) dims = reduced_dims_of(n);
  const int64_t numel = shape_numel(sizes);
  if (all && numel == correction) {
    if (g[0]->sizes != sizes) {
      ScenarioError e("shape_mismatch", "Function VarBackward0 returned an invalid gradient at index 0 - got " +
                                            shape_list(g[0]->sizes) + " but expected shape compatible with " +
                                            shape_list(sizes));
      e.facts = {{"op", "var_backward"}, {"shapes", {g[0]->sizes, sizes}}};
      throw e;
    }
    const double inf = std::numeric_limits<double>::infinity();
    if (kernels::device::on_device(g[0]))
      return {as_dtype(kernels::device::unary(cuda::pw::UnaryOp::MulScalar, g[0], g[0]->dtype(), inf),
                       n.input_meta[0].dtype)};
    return {as_dtype(kernels::unary(g[0], g[0]->dtype(), [](double v) { return std::numeric_limits<double>::infinity() * v; }),
                     n.input_meta[0].dtype)};
  }
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  double dof;
  if (all) {
    dof = static_cast<double>(numel - correction);
  } else {
    int64_t safe = 1;
    for (int64_t d : dims) safe *= sizes[static_cast<size_t>(d)];
    dof = static_cast<double>(safe - correction);
  }
  if (kernels::device::any_on_device({&g[0], &self}))
    return {kernels::device::var_backward(self, g[0], all ? std::vector<int64_t>{} : dims,
                                          !all && attr_of(n, "keepdim").b, dof, n.input_meta[0].dtype)};
  // self.mean(dim, keepdim=True): an empty dim list means every dim, as for all.
  const ReducePlan mean_plan = plan_reduce(sizes, all ? std::vector<int64_t>{} : dims, true);
  std::vector<double> s = to_values(self), gv = to_values(g[0]);
  // Each tensor op of the formula rounds to the dtype (the mean, self - mean, the scaled
  // grad), as PyTorch's do (measured: bfloat16 var(1) gives exactly 0 at the mean).
  const DType dt = n.input_meta[0].dtype;
  std::vector<double> mean(static_cast<size_t>(mean_plan.groups), 0.0);
  for (size_t i = 0; i < s.size(); ++i) mean[mean_plan.group[i]] += s[i];
  for (double& m : mean) m = round_to_dtype(m / static_cast<double>(mean_plan.count), dt);
  // The gradient is broadcast over the reduced dims (unsqueeze_multiple when !keepdim).
  const ReducePlan grad_plan = plan_reduce(sizes, all ? std::vector<int64_t>{} : dims, true);
  std::vector<double> out(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    out[i] = round_to_dtype((2.0 / dof) * gv[grad_plan.group[i]], dt) *
             round_to_dtype(s[i] - mean[mean_plan.group[i]], dt);
  return {input_grad(n, 0, false, out)};
}

// ================================================================ norm

// norm_backward(grad, self, p, result, dim, keepdim), FunctionsManual.cpp (1.13):
//   p = 0: no gradient (undefined; measured: x.grad stays None)
//   p = 1: self.sgn() * grad
//   p = 2: grad * (self / norm), 0 where norm == 0
//   p = +-inf: self.sign() * (grad / mask.sum(dim, true)) * mask, mask = |self| == norm or NaN
//   p < 1: self.sgn() * |self|^(p-1) (0 where self == 0) * grad * norm^(1-p)
//   p < 2: self.sgn() * |self|^(p-1) * grad / norm^(p-1), 0 where norm == 0
//   else:  self * |self|^(p-2) * grad / norm^(p-1), 0 where norm == 0
// Checked against torch: p = 0.5, 1, 2, 3, inf with zero rows and ties.
std::vector<Tensor> norm_backward(Node& n, const std::vector<Tensor>& g) {
  const double p = attr_number(attr_of(n, "p"));
  Tensor self = n.unpack("self"), result = n.unpack("result");
  if (p == 0.0) return {nullptr};
  if (g[0]->is_meta()) return {input_grad(n, 0, true, {})};
  if (kernels::device::any_on_device({&g[0], &self})) {
    if (p != 2.0)  // the formulas above composed from device kernels
      return {kernels::device::norm_p_backward(self, result, g[0], p, reduced_dims_of(n), attr_of(n, "keepdim").b,
                                               n.input_meta[0].dtype)};
    return {kernels::device::norm2_backward(self, result, g[0], reduced_dims_of(n), attr_of(n, "keepdim").b,
                                            n.input_meta[0].dtype)};
  }
  const ReducePlan plan = plan_reduce(n.input_meta[0].sizes, reduced_dims_of(n), true);
  std::vector<double> s = to_values(self), r = to_values(result), gv = to_values(g[0]);
  auto sgn = [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); };
  std::vector<double> out(s.size());
  std::vector<double> count;
  if (std::isinf(p)) {
    count.assign(static_cast<size_t>(plan.groups), 0.0);
    for (size_t i = 0; i < s.size(); ++i) {
      const double ab = std::fabs(s[i]);
      count[plan.group[i]] += (ab == r[plan.group[i]] || std::isnan(ab)) ? 1 : 0;
    }
  }
  // Each tensor op of the formula rounds to the dtype, as PyTorch's (measured in bfloat16).
  const DType dt = n.input_meta[0].dtype;
  auto rd = [dt](double v) { return round_to_dtype(v, dt); };
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t k = static_cast<size_t>(plan.group[i]);
    const double x = s[i], nv = r[k], gr = gv[k];
    double v;
    if (p == 1.0) {
      v = sgn(x) * gr;
    } else if (p == 2.0) {
      v = nv == 0 ? 0.0 : gr * rd(x / nv);
    } else if (std::isinf(p)) {
      const double ab = std::fabs(x);
      const double mask = (ab == nv || std::isnan(ab)) ? 1.0 : 0.0;
      v = sgn(x) * (rd(gr / count[k]) * mask);
    } else if (p < 1.0) {
      const double scaled = x == 0 ? 0.0 : sgn(x) * rd(std::pow(std::fabs(x), p - 1));
      v = rd(scaled * gr) * rd(std::pow(nv, 1 - p));
    } else if (p < 2.0) {
      const double scale = nv == 0 ? 0.0 : rd(gr / rd(std::pow(nv, p - 1)));
      v = sgn(x) * rd(std::pow(std::fabs(x), p - 1)) * scale;
    } else {
      const double scale = nv == 0 ? 0.0 : rd(gr / rd(std::pow(nv, p - 1)));
      v = rd(x * rd(std::pow(std::fabs(x), p - 2))) * scale;
    }
    out[i] = v;
  }
  return {input_grad(n, 0, false, out)};
}

void require_norm_dtype(const Tensor& a) {
  if (!is_floating(a->dtype())) {
    ScenarioError e("dtype_mismatch", "norm(): input dtype should be either floating point or complex. Got " +
                                          scalar_name(a->dtype()) + " instead.");
    e.facts = {{"op", "norm"}, {"dtype", dtype_name(a->dtype())}};
    throw e;
  }
}

// ================================================================ where masked_fill

// where: grad_self = where(condition, grad, 0), grad_other = where(condition, 0, grad),
// each reduced to its input's shape (broadcast) and dtype.
std::vector<Tensor> where_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor cond = n.unpack("condition");
  Tensor ga, gb;
  if (kernels::device::any_on_device({&cond, &g[0]})) {  // where(cond, grad, 0) / where(cond, 0, grad)
    for (size_t i = 0; i < 2; ++i) {
      if (!n.next[i].fn) continue;
      Tensor w = kernels::device::select_or(cond, g[0], 0.0, i == 0, g[0]->dtype(), "where");
      (i == 0 ? ga : gb) = grad_for_meta(w, n.input_meta[i], n.input_meta[i].sizes, n.input_meta[i].dtype);
    }
    return {ga, gb};
  }
  if (n.next[0].fn) {
    Tensor w = kernels::binary(cond, g[0], g[0]->dtype(), [](double c, double v) { return c != 0 ? v : 0.0; }, "where");
    ga = grad_for_meta(w, n.input_meta[0], n.input_meta[0].sizes, n.input_meta[0].dtype);
  }
  if (n.next[1].fn) {
    Tensor w = kernels::binary(cond, g[0], g[0]->dtype(), [](double c, double v) { return c != 0 ? 0.0 : v; }, "where");
    gb = grad_for_meta(w, n.input_meta[1], n.input_meta[1].sizes, n.input_meta[1].dtype);
  }
  return {ga, gb};
}

// masked_fill: self: grad.masked_fill(mask, 0) (reduced to self's shape when self was
// broadcast); value (MaskedFillBackward1): masked_fill_backward = grad.masked_select(mask).sum().
std::vector<Tensor> masked_fill_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor mask = n.unpack("mask");
  Tensor ga, gv;
  if (kernels::device::any_on_device({&mask, &g[0]})) {
    if (n.next[0].fn)  // grad.masked_fill(mask, 0)
      ga = grad_for_meta(kernels::device::select_or(mask, g[0], 0.0, false, g[0]->dtype(), "masked_fill"),
                         n.input_meta[0], n.input_meta[0].sizes, n.input_meta[0].dtype);
    if (n.next.size() > 1 && n.next[1].fn) {  // the masked gradient's sum, in value's dtype
      Tensor w = kernels::device::select_or(mask, g[0], 0.0, true, g[0]->dtype(), "masked_fill");
      gv = kernels::device::sum(w, {}, false, n.input_meta[1].dtype);
    }
    if (n.next.size() > 1) return {ga, gv};
    return {ga};
  }
  if (n.next[0].fn) {
    // A selection: the float32 loop gives the general path's bits (attention's causal mask).
    Tensor w = kernels::masked_fill_exact_f32(g[0], mask, 0.0);
    if (!w)
      w = kernels::binary(g[0], mask, g[0]->dtype(), [](double v, double m) { return m != 0 ? 0.0 : v; }, "masked_fill");
    ga = grad_for_meta(w, n.input_meta[0], n.input_meta[0].sizes, n.input_meta[0].dtype);
  }
  if (n.next.size() > 1 && n.next[1].fn) {
    const auto& m = n.input_meta[1];
    if (g[0]->is_meta()) {
      gv = empty_tensor(m.sizes, m.dtype, true);
    } else {
      Tensor w = kernels::binary(g[0], mask, g[0]->dtype(), [](double v, double mk) { return mk != 0 ? v : 0.0; },
                                 "masked_fill");
      double total = 0;
      for (double v : to_values(w)) total += v;
      gv = make_out(m.sizes, m.dtype, false, {total});
    }
  }
  if (n.next.size() > 1) return {ga, gv};
  return {ga};
}

// ================================================================ create_graph=True
// The formulas of derivatives.yaml (torch 1.13) written with autograd-aware ops, so the
// gradient records PyTorch's nodes (walks measured with /usr/bin/python3, torch 1.13).
// Where PyTorch calls a dedicated backward op (leaky_relu_backward, gelu_backward,
// _softmax_backward_data, _log_softmax_backward_data) it is an op with its own node here.

// AbsBackward0: grad * self.sgn() (MulBackward0 over SgnBackward0).
std::vector<Tensor> abs_dbackward(Node& n, const std::vector<Tensor>& g) { return {mul(g[0], sgn(n.unpack("self")))}; }
// SinBackward0: grad * self.cos() (MulBackward0 over CosBackward0).
std::vector<Tensor> sin_dbackward(Node& n, const std::vector<Tensor>& g) { return {mul(g[0], cos(n.unpack("self")))}; }
// CosBackward0: grad * -self.sin() (MulBackward0 over NegBackward0 over SinBackward0).
std::vector<Tensor> cos_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {mul(g[0], neg(sin(n.unpack("self"))))};
}
// RsqrtBackward0: -0.5 * grad * result.pow(3) (measured: MulBackward0 over MulBackward1
// _saved_other -0.5 and PowBackward0 _saved_exponent 3).
std::vector<Tensor> rsqrt_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor cube = pow_scalar(n.unpack("result"), Value::integer(3));
  return {mul(mul_scalar(g[0], Value::real(-0.5)), cube)};
}

autograd::BackwardFn unary_dbackward_for(const std::string& node) {
  if (node == "AbsBackward0") return abs_dbackward;
  if (node == "SinBackward0") return sin_dbackward;
  if (node == "CosBackward0") return cos_dbackward;
  if (node == "RsqrtBackward0") return rsqrt_dbackward;
  return nullptr;
}

// ClampBackward1: clamp_backward(grad, self, min, max) = where(min <= self <= max, grad,
// at::zeros({}, grad.options())) (measured: WhereBackward0, edges (MulBackward0, None)).
std::vector<Tensor> clamp_dbackward(Node& n, const std::vector<Tensor>& g) {
  const AttrValue& mn = attr_of(n, "min");
  const AttrValue& mx = attr_of(n, "max");
  const bool has_min = mn.kind != AttrValue::Kind::None, has_max = mx.kind != AttrValue::Kind::None;
  const double lo = has_min ? attr_number(mn) : 0.0, hi = has_max ? attr_number(mx) : 0.0;
  Tensor self = n.unpack("self");
  Tensor mask;
  if (kernels::device::on_device(self)) {
    // PyTorch's own expression on the device: (self >= min).logical_and_(self <= max), each
    // comparison a bool tensor.
    using cuda::pw::BinaryOp;
    if (has_min) mask = kernels::device::compare_scalar(BinaryOp::Ge, self, lo, "ge");
    if (has_max) {
      Tensor upper = kernels::device::compare_scalar(BinaryOp::Le, self, hi, "le");
      if (mask) kernels::device::binary_inplace(BinaryOp::Mul, mask, upper);
      else mask = upper;
    }
  } else {
    mask = kernels::unary(self, DType::Bool, [=](double v) {
      return ((!has_min || v >= lo) && (!has_max || v <= hi)) ? 1.0 : 0.0;
    });
  }
  Tensor zero;
  {
    OpScope scope("zeros");
    zero = scalar_tensor(0.0, g[0]->dtype());
  }
  return {where(mask, g[0], zero)};
}

// LeakyReluBackwardBackward0 (derivatives.yaml leaky_relu_backward: grad_output:
// leaky_relu_backward(grad, self, negative_slope, false); self: zeros_like(grad)).
std::vector<Tensor> leaky_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor a, b;
  if (n.should_compute_output(0)) a = leaky_relu_backward_op(g[0], n.unpack("self"), attr_value(attr_of(n, "negative_slope")));
  if (n.should_compute_output(1)) b = kernels::full(g[0]->sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  return {a, b};
}

// LeakyReluBackward0: leaky_relu_backward(grad, self, negative_slope, false)
// (LeakyReluBackwardBackward0, edges (grad, self), saving negative_slope and self).
std::vector<Tensor> leaky_relu_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {leaky_relu_backward_op(g[0], n.unpack("self"), attr_value(attr_of(n, "negative_slope")))};
}

// d2/dx2 gelu(x). Exact: phi(x) (2 - x^2). Tanh approximation, u = k (x + c x^3),
// t = tanh(u), u' = k (1 + 3 c x^2): (1 - t^2) (u' - x t u'^2 + 3 k c x^2).
double gelu_second(double x, bool tanh_approx) {
  if (!tanh_approx) return kInvSqrt2Pi * std::exp(-0.5 * x * x) * (2.0 - x * x);
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
  const double du = kSqrt2OverPi * (1.0 + 3.0 * kGeluC * x * x);
  return (1.0 - t * t) * (du - x * t * du * du + 3.0 * kSqrt2OverPi * kGeluC * x * x);
}
double gelu_first(double x, bool tanh_approx) {
  return tanh_approx ? GeluTanh{DType::Float64}.backward(1.0, x) : gelu_none_grad(x);
}

// GeluBackwardBackward0 (derivatives.yaml gelu_backward: grad_output: gelu_backward(grad,
// self, approximate); self: gelu_double_backward(grad, grad_output, self, approximate)).
// Its own create_graph formula is not mirrored: third order through it raises unsupported.
std::vector<Tensor> gelu_bb_backward(Node& n, const std::vector<Tensor>& g) {
  const bool th = attr_of(n, "approximate").s == "tanh";
  Tensor self = n.unpack("self");
  Tensor a, b;
  if (kernels::device::any_on_device({&g[0], &self})) {
    using cuda::pw::BinaryOp;
    if (n.next[0].fn)
      a = kernels::device::binary(th ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, g[0], self,
                                  n.input_meta[0].dtype, "gelu_backward");
    if (n.next[1].fn)
      b = kernels::device::ternary(cuda::pw::TernaryOp::GeluDoubleBackward, g[0], n.unpack("grad_output"), self,
                                   n.input_meta[1].dtype, "gelu_double_backward", th ? 1.0 : 0.0);
    return {a, b};
  }
  if (n.next[0].fn)
    a = kernels::binary(g[0], self, n.input_meta[0].dtype, [th](double gv, double x) { return gv * gelu_first(x, th); },
                        "gelu_backward");
  if (n.next[1].fn) {
    Tensor go = n.unpack("grad_output");
    b = kernels::ternary(g[0], go, self, n.input_meta[1].dtype,
                         [th](double gv, double gov, double x) { return gv * gov * gelu_second(x, th); }, "mul");
  }
  return {a, b};
}

// GeluBackward0: gelu_backward(grad, self, approximate) (GeluBackwardBackward0, measured
// edges (grad, self), saving approximate, grad_output, self).
std::vector<Tensor> gelu_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const std::string approximate = attr_of(n, "approximate").s;
  Tensor r = gelu_backward(n, g)[0];
  if (needs_grad({&g[0], &self})) {
    auto node = make_node("GeluBackwardBackward0", gelu_bb_backward, {g[0], self});
    node->save_attr("approximate", AttrValue::string(approximate));
    node->save_input("grad_output", g[0]);
    node->save_input("self", self);
    set_history(r, node);
  }
  return {r};
}

// SiluBackward0 in grad mode: infinitely_differentiable_silu_backward(grad, self) =
// grad * sigmoid * (1.0 + self * (1.0 - sigmoid)), sigmoid = self.sigmoid(). `1.0 - t` is
// empty_like(t).fill_(1.0).sub_(t) (SubBackward0, edges (None, SigmoidBackward0)) and
// `1.0 + t` is t.add(1.0) (AddBackward1); measured walk MulBackward0 > MulBackward0 >
// SigmoidBackward0, AddBackward1 > MulBackward0 > SubBackward0.
std::vector<Tensor> silu_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  Tensor sig = sigmoid(self);
  Tensor one_minus;
  {
    OpScope scope("fill_");
    one_minus = kernels::full(sig->sizes, 1.0, sig->dtype(), sig->is_meta());
  }
  sub_(one_minus, sig, Value::integer(1));
  Tensor right = add_scalar(mul(self, one_minus), Value::real(1.0));
  return {mul(mul(g[0], sig), right)};
}

// Softmax's and log_softmax's dedicated backward ops. go: grad_output, o: output.
// The grad_output gradients of the two nodes, from G (grad) and o (output) along dim:
// softmax: _softmax_backward_data(G, o) = o * (G - sum(G * o));
// log_softmax: G - sum(G * exp(o)) (derivatives.yaml `grad - (grad * output.exp()).sum(dim,
// true)`, the transpose of _log_softmax_backward_data, which is not self-adjoint).
std::vector<double> softmax_data_values(const Tensor& G, const Tensor& o, int64_t wdim, bool log) {
  const ReducePlan p = plan_reduce(o->sizes, {wdim}, true);
  std::vector<double> gv = to_values(G), ov = to_values(o), acc(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < gv.size(); ++i) acc[p.group[i]] += gv[i] * (log ? std::exp(ov[i]) : ov[i]);
  std::vector<double> out(gv.size());
  for (size_t i = 0; i < gv.size(); ++i)
    out[i] = log ? gv[i] - acc[p.group[i]] : ov[i] * (gv[i] - acc[p.group[i]]);
  return out;
}

// SoftmaxBackwardDataBackward0 (grad_output: _softmax_backward_data(grad, output, dim);
// output: softmax_double_backward = go * grad - sum(o * go) * grad - go * sum(o * grad)).
// LogSoftmaxBackwardDataBackward0 (grad_output: grad - (grad * output.exp()).sum(dim, true);
// output: -grad_output.sum(dim, true) * output.exp() * grad). Third order through either
// is not mirrored.
std::vector<Tensor> softmax_data_bb_backward(Node& n, const std::vector<Tensor>& g) {
  const bool log = n.name == "LogSoftmaxBackwardDataBackward0";
  Tensor go = n.unpack("grad_output"), o = n.unpack("output");
  const int64_t wdim = kernels::wrap_dim(attr_of(n, "dim").i, o->dim());
  Tensor a, b;
  if (g[0]->is_meta()) {
    if (n.next[0].fn) a = input_grad(n, 0, true, {});
    if (n.next[1].fn) b = input_grad(n, 1, true, {});
    return {a, b};
  }
  if (kernels::device::any_on_device({&g[0], &go, &o})) {  // the same formulas from device kernels
    if (n.next[0].fn) a = kernels::device::softmax_data_grad_output(g[0], o, wdim, log, n.input_meta[0].dtype);
    if (n.next[1].fn) b = kernels::device::softmax_data_grad_result(g[0], go, o, wdim, log, n.input_meta[1].dtype);
    return {a, b};
  }
  if (n.next[0].fn) a = input_grad(n, 0, false, softmax_data_values(g[0], o, wdim, log));
  if (n.next[1].fn) {
    const ReducePlan p = plan_reduce(o->sizes, {wdim}, true);
    std::vector<double> G = to_values(g[0]), gov = to_values(go), ov = to_values(o);
    std::vector<double> s_go(static_cast<size_t>(p.groups), 0.0), s_g(static_cast<size_t>(p.groups), 0.0);
    for (size_t i = 0; i < G.size(); ++i) {
      s_go[p.group[i]] += log ? gov[i] : ov[i] * gov[i];
      s_g[p.group[i]] += ov[i] * G[i];
    }
    std::vector<double> out(G.size());
    for (size_t i = 0; i < G.size(); ++i) {
      const size_t k = static_cast<size_t>(p.group[i]);
      out[i] = log ? -G[i] * std::exp(ov[i]) * s_go[k] : gov[i] * G[i] - s_go[k] * G[i] - gov[i] * s_g[k];
    }
    b = input_grad(n, 1, false, out);
  }
  return {a, b};
}

// SoftmaxBackward0 / LogSoftmaxBackward0: _softmax_backward_data(grad, result, dim,
// self.scalar_type()) / _log_softmax_backward_data(...): SoftmaxBackwardDataBackward0 /
// LogSoftmaxBackwardDataBackward0 (measured: edges (grad, SoftmaxBackward0), saving dim as
// written, grad_output, output).
std::vector<Tensor> softmax_dbackward(Node& n, const std::vector<Tensor>& g) {
  const bool log = n.name == "LogSoftmaxBackward0";
  Tensor r = n.unpack("result");
  Tensor out = (log ? log_softmax_backward : softmax_backward)(n, g)[0];
  if (needs_grad({&g[0], &r})) {
    auto node = make_node(log ? "LogSoftmaxBackwardDataBackward0" : "SoftmaxBackwardDataBackward0",
                          softmax_data_bb_backward, {g[0], r});
    node->save_attr("dim", attr_of(n, "dim"));
    node->save_input("grad_output", g[0]);
    node->save_input("output", r);
    set_history(out, node);
  }
  return {out};
}

// VarBackward0 (var_backward): (2.0 / dof) * grad * (self - self.mean()) for all dims, else
// the gradient unsqueezed at each reduced dim (ascending; when !keepdim and self.dim() > 1)
// times (self - self.mean(dim, true)) (measured: MulBackward0 over MulBackward1 and
// SubBackward0 > MeanBackward0 / MeanBackward1). dof <= 0 (an infinite gradient) is
// not mirrored under create_graph.
std::vector<Tensor> var_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  const Shape& sizes = n.input_meta[0].sizes;
  const int64_t correction = attr_of(n, "correction").i;
  const AttrValue& dim_attr = attr_of(n, "dim");
  const bool all = sizes.empty() || dim_attr.kind == AttrValue::Kind::None;
  int64_t count = shape_numel(sizes);
  std::vector<int64_t> dims;
  if (!all) {
    dims = reduced_dims_of(n);
    count = 1;
    for (int64_t d : dims) count *= sizes[static_cast<size_t>(d)];
  }
  const int64_t dof = count - correction;
  if (dof <= 0)
    throw ScenarioError("unsupported", "create_graph=True through VarBackward0 with no degrees of freedom is not supported yet");
  Tensor grad = g[0];
  Tensor centered;
  if (all) {
    centered = sub(self, mean(self, std::nullopt, false), Value::integer(1));
  } else {
    if (!attr_of(n, "keepdim").b && sizes.size() > 1) {
      std::vector<int64_t> sorted = dims;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t d : sorted) grad = unsqueeze(grad, d);
    }
    centered = sub(self, mean(self, dim_attr.list, true), Value::integer(1));
  }
  return {mul(mul_scalar(grad, Value::real(2.0 / static_cast<double>(dof))), centered)};
}

// MaxBackward1: evenly_distribute_backward (CPU path) =
// grad.new_zeros(sizes).masked_fill_(mask, grad / mask.sum()), mask = self == result (NaNs
// where the maximum is NaN): MaskedFillBackward1 with edges (None, DivBackward0), measured.
//
// On cuda PyTorch takes the other branch of evenly_distribute_backward (input.is_cuda()):
// mask = (input == value).logical_or_(input.isnan().logical_and_(value.isnan())), and
// mask * (grad / mask.sum()): MulBackward0 with edges (None, DivBackward0) where the CPU
// has MaskedFillBackward1, saving the same bool mask (a known difference between the
// devices in PyTorch itself, which agtrace mirrors; measured on the CPU with torch 1.13's
// LoggingTensor, a tensor subclass, which takes the same branch: MulBackward0 with edges
// (None, DivBackward0), _saved_self the bool mask, _saved_other None).
std::vector<Tensor> max_all_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  if (kernels::device::any_on_device({&self, &g[0]})) {
    using cuda::pw::BinaryOp;
    auto isnan = [](const Tensor& t) {
      return kernels::device::binary(BinaryOp::Ne, t, t, DType::Bool, "isnan", 1, t->dtype());
    };
    Tensor both_nan = isnan(self);
    kernels::device::binary_inplace(BinaryOp::Mul, both_nan, isnan(result));  // logical_and_
    Tensor mask = kernels::device::binary(BinaryOp::Eq, self, result, DType::Bool, "eq", 1, self->dtype());
    kernels::device::binary_inplace(BinaryOp::Maximum, mask, both_nan);  // logical_or_
    return {mul(mask, div(g[0], sum(mask, std::nullopt, false)))};
  }
  const double r = self->is_meta() ? 0.0 : item(result);
  Tensor mask = kernels::binary(self, result, DType::Bool,
                                [r](double v, double) { return (std::isnan(r) ? std::isnan(v) : v == r) ? 1.0 : 0.0; },
                                "eq");
  Tensor share = div(g[0], sum(mask, std::nullopt, false));
  Tensor zeros;
  {
    OpScope scope("new_zeros");
    zeros = kernels::full(self->sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  }
  return {masked_fill(zeros, mask, Value::tensor(share))};
}

// Flat offsets into a contiguous tensor of `sizes` for each element of an index tensor of
// `index_sizes` (same rank) along dim d: the element's own coordinates with coordinate d
// replaced by the index value (scatter / gather addressing).
std::vector<size_t> scatter_offsets(const Shape& sizes, const Shape& index_sizes, int64_t d,
                                    const std::vector<double>& index) {
  const Shape out_strides = contiguous_strides(sizes);
  std::vector<size_t> out(index.size());
  for (size_t j = 0; j < index.size(); ++j) {
    int64_t rest = static_cast<int64_t>(j), offset = 0;
    for (int64_t k = static_cast<int64_t>(index_sizes.size()) - 1; k >= 0; --k) {
      const auto ku = static_cast<size_t>(k);
      const int64_t coord = index_sizes[ku] > 0 ? rest % index_sizes[ku] : 0;
      rest = index_sizes[ku] > 0 ? rest / index_sizes[ku] : 0;
      offset += (k == d ? static_cast<int64_t>(index[j]) : coord) * out_strides[ku];
    }
    out[j] = static_cast<size_t>(offset);
  }
  return out;
}

// ScatterBackward0 (derivatives.yaml scatter.src: src: grad.gather(dim, index); self is
// the zeros here, no edge). Its own create_graph formula (GatherBackward0) is not mirrored.
std::vector<Tensor> scatter_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  const auto& m = n.input_meta[1];
  if (g[0]->is_meta()) return {nullptr, empty_tensor(m.sizes, m.dtype, true)};
  const int64_t d = kernels::wrap_dim(attr_of(n, "dim").i, g[0]->dim());
  if (kernels::device::any_on_device({&g[0], &index}))  // grad.gather(dim, index)
    return {nullptr, kernels::device::gather(g[0], d, index, m.dtype)};
  const std::vector<double> gv = to_values(g[0]);
  const std::vector<size_t> at = scatter_offsets(g[0]->sizes, index->sizes, d, to_values(index));
  std::vector<double> out(at.size());
  for (size_t j = 0; j < at.size(); ++j) out[j] = gv[at[j]];
  return {nullptr, make_out(m.sizes, m.dtype, false, out)};
}

// MaxBackward0: value_selecting_reduction_backward = zeros(self_sizes).scatter(dim,
// indices.unsqueeze(dim), grad.unsqueeze(dim)) (without keepdim; measured ScatterBackward0
// with edges (None, UnsqueezeBackward0), saving dim as written and the unsqueezed indices).
std::vector<Tensor> max_dim_dbackward(Node& n, const std::vector<Tensor>& g) {
  const int64_t dim = attr_of(n, "dim").i;
  const Shape& sizes = attr_of(n, "self_sizes").list;
  Tensor src = g[0], index = n.unpack("indices");
  if (!attr_of(n, "keepdim").b && !sizes.empty()) {
    src = unsqueeze(g[0], dim);
    autograd::GradModeGuard no_grad(false);
    index = unsqueeze(index, dim);
  }
  std::vector<double> out;
  const bool on_device = kernels::device::any_on_device({&src, &index});
  if (!g[0]->is_meta() && !on_device) {
    out.assign(static_cast<size_t>(shape_numel(sizes)), 0.0);
    const std::vector<double> sv = to_values(src);
    const int64_t d = sizes.empty() ? 0 : kernels::wrap_dim(dim, static_cast<int64_t>(sizes.size()));
    const std::vector<size_t> at = scatter_offsets(sizes, index->sizes, d, to_values(index));
    for (size_t j = 0; j < at.size(); ++j) out[at[j]] = sv[j];
  }
  // On cuda: zeros with src scattered at the (unsqueezed) indices, one new storage.
  Tensor r = on_device ? kernels::device::max_dim_backward(
                             sizes, g[0]->dtype(), src, index,
                             sizes.empty() ? 0 : kernels::wrap_dim(dim, static_cast<int64_t>(sizes.size())), true)
                       : make_out(sizes, g[0]->dtype(), g[0]->is_meta(), out);
  if (needs_grad({&src})) {
    auto node = make_node("ScatterBackward0", scatter_backward, {nullptr, src});
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_input("index", index);
    set_history(r, node);
  }
  return {r};
}

// restore_reduced_dims(output, dims, keepdim): output.reshape with a 1 at each reduced dim.
Tensor restore_reduced_dims(const Tensor& output, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return output;
  const int64_t total = output->dim() + static_cast<int64_t>(dims.size());
  std::vector<int64_t> target(static_cast<size_t>(total), 0);
  for (int64_t d : dims) target[static_cast<size_t>(d < 0 ? d + total : d)] = 1;
  size_t j = 0;
  for (int64_t size : output->sizes) {
    while (target[j] > 0) ++j;
    target[j++] = size;
  }
  return reshape(output, target);
}

// AmaxBackward0: scale_grad_by_count(restore_reduced_dims(grad, dim, keepdim),
// restore_reduced_dims(result, dim, keepdim) == self, dim) = (grad / mask.sum(dim, true)) *
// mask (measured: MulBackward0 > DivBackward0 > ReshapeAliasBackward0; arguments evaluated
// right to left, so the result's reshape comes first).
std::vector<Tensor> amax_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  const std::vector<int64_t>& dims = attr_of(n, "dim").list;
  const bool keepdim = attr_of(n, "keepdim").b;
  Tensor mask = compare(restore_reduced_dims(result, dims, keepdim), self, "eq");
  Tensor grad = restore_reduced_dims(g[0], dims, keepdim);
  return {mul(div(grad, sum(mask, dims, true)), mask)};
}

// unsqueeze_multiple(t, dims, n): t.unsqueeze(d) for each wrapped dim, ascending.
Tensor unsqueeze_multiple(const Tensor& t, const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> sorted;
  for (int64_t d : dims) sorted.push_back(kernels::wrap_dim(d, ndim));
  std::sort(sorted.begin(), sorted.end());
  Tensor r = t;
  for (int64_t d : sorted) r = unsqueeze(r, d);
  return r;
}

// NormBackward1 (norm_backward): grad and norm unsqueezed at the reduced dims unless
// keepdim; p = 2: grad * (self / norm).masked_fill_(norm == 0, 0) (measured: MulBackward0 >
// MaskedFillBackward0 > DivBackward0 > UnsqueezeBackward0 > NormBackward1); p = 1:
// self.sgn() * grad. Other p are not mirrored under create_graph.
std::vector<Tensor> norm_dbackward(Node& n, const std::vector<Tensor>& g) {
  const double p = attr_number(attr_of(n, "p"));
  if (p != 1.0 && p != 2.0)
    throw ScenarioError("unsupported", "create_graph=True through NormBackward1 with p other than 1 and 2 is not supported yet");
  Tensor self = n.unpack("self"), norm_t = n.unpack("result");
  Tensor grad = g[0];
  if (!attr_of(n, "keepdim").b && self->dim() != 0) {
    // An empty dim list (x.norm()) unsqueezes nothing: the 0-d values broadcast (measured).
    const std::vector<int64_t>& dims = attr_of(n, "dim").list;
    grad = unsqueeze_multiple(grad, dims, self->dim());
    norm_t = unsqueeze_multiple(norm_t, dims, self->dim());
  }
  if (p == 1.0) return {mul(sgn(self), grad)};
  Tensor zero_norm = kernels::device::on_device(norm_t)
                         ? kernels::device::compare_scalar(cuda::pw::BinaryOp::Eq, norm_t, 0, "eq")
                         : kernels::unary(norm_t, DType::Bool, [](double v) { return v == 0.0 ? 1.0 : 0.0; });
  return {mul(grad, masked_fill(div(self, norm_t), zero_norm, Value::integer(0)))};
}

// WhereBackward0: self: where(condition, grad, 0); other: where(condition, 0, grad)
// (WhereBackward0 with a None edge for the Python 0, measured).
std::vector<Tensor> where_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor cond = n.unpack("condition");
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = where(cond, g[0], wrap_number(Value::integer(0)));
  if (n.should_compute_output(1)) gb = where(cond, wrap_number(Value::integer(0)), g[0]);
  return {ga, gb};
}

// MaskedFillBackward0: grad.masked_fill(mask, 0) (MaskedFillBackward0, measured).
std::vector<Tensor> masked_fill_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {masked_fill(g[0], n.unpack("mask"), Value::integer(0))};
}

}  // namespace

namespace act_detail {

Tensor masked_fill_value(const Value& value, const std::string& fn) {
  if (value.kind == Value::Kind::Tensor) {
    if (value.t->dim() != 0)
      throw ScenarioError("shape_mismatch", "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                                            "with " + std::to_string(value.t->dim()) + " dimension(s).");
    return value.t;
  }
  if (!value.is_number())
    throw ScenarioError("type_error", fn + "(): argument 'value' must be Number or Tensor, not " + type_name(value));
  return nullptr;
}

const InplaceSharedFormulas& inplace_shared_formulas() {
  static const InplaceSharedFormulas fns{clamp_backward, clamp_dbackward, masked_fill_backward, masked_fill_dbackward,
                                         silu_backward,  silu_dbackward};
  return fns;
}

void record_extreme_all(const char* name, const Tensor& r, const Tensor& a) {
  // result (new object on the output's storage), self (SUMMARY max_all; measured for min).
  auto node = make_node(name, max_all_backward, {a});
  node->differentiable_backward = max_all_dbackward;
  set_history(r, node);
  node->save_output("result", r, 0);
  node->save_input("self", a);
}

void record_extreme_dim(const char* name, const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim,
                        bool keepdim) {
  // indices is a non-differentiable output saved as the very object returned (SUMMARY:
  // "_saved_indices is indices" is True), so it is saved like an input.
  auto node = make_node(name, max_dim_backward, {a});
  node->differentiable_backward = max_dim_dbackward;
  set_history(values, node);
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("indices", indices);
  node->save_attr("keepdim", AttrValue::boolean(keepdim));
  node->save_attr("self_sizes", AttrValue::ints(a->sizes));
}

}  // namespace act_detail

// ================================================================ public entry points

namespace detail {
std::optional<UnaryRecipe> activation_recipe(const std::string& name) {
  for (const UnaryOp* u : {&kAbs, &kSin, &kCos, &kRsqrt})
    if (name == u->op)
      return UnaryRecipe{u->op, u->node, u->f, u->backward, unary_dbackward_for(u->node),
                         u->saves_result ? UnaryRecipe::Saves::Result : UnaryRecipe::Saves::Self, u->int_to_float,
                         u->device_op};
  return std::nullopt;
}
}  // namespace detail

Tensor abs(const Tensor& a) { return unary_op(a, kAbs); }
Tensor sin(const Tensor& a) { return unary_op(a, kSin); }
Tensor cos(const Tensor& a) { return unary_op(a, kCos); }
Tensor rsqrt(const Tensor& a) { return unary_op(a, kRsqrt); }

Tensor clamp(const Tensor& a, const Value& min, const Value& max) {
  OpScope scope("clamp");
  const bool has_min = min.kind != Value::Kind::None, has_max = max.kind != Value::Kind::None;
  if (!has_min && !has_max)
    throw ScenarioError("type_error", "torch.clamp: At least one of 'min' or 'max' must not be None");
  // Type promotion with the bounds as Python numbers (measured: int tensor with a float
  // bound gives float32; a bool tensor with an int bound gives int64).
  DType out = a->dtype();
  for (const Value* v : {&min, &max}) {
    if (v->kind == Value::Kind::Float && !is_floating(out)) out = DType::Float32;
    if (v->kind == Value::Kind::Int && out == DType::Bool) out = DType::Int64;
  }
  const bool on_device = kernels::device::on_device(a);
  if (out == DType::Float16 && !a->is_meta() && !on_device) not_implemented("clamp_scalar_cpu", out);
  const double lo = has_min ? min.number() : 0.0, hi = has_max ? max.number() : 0.0;
  // min(max(x, min), max): NaN stays NaN; with min > max every element becomes max.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor r = on_device ? kernels::device::unary(cuda::pw::UnaryOp::Clamp, a, out, has_min ? lo : -inf,
                                                has_max ? hi : inf)
                       : kernels::unary(a, out, [=](double x) {
                           if (std::isnan(x)) return x;
                           if (has_min && x < lo) x = lo;
                           if (has_max && x > hi) x = hi;
                           return x;
                         });
  if (needs_grad({&a})) {
    // ClampBackward1 (clamp.Scalar-overload): max, min (None when absent), self
    // (SUMMARY rows clamp and clamp_min: x.clamp(min=0.0) is ClampBackward1 with max None).
    auto node = make_node("ClampBackward1", clamp_backward, {a});
    node->differentiable_backward = clamp_dbackward;
    set_history(r, node);
    node->save_attr("max", has_max ? number_attr(max) : AttrValue::none());
    node->save_attr("min", has_min ? number_attr(min) : AttrValue::none());
    node->save_input("self", a);
  }
  return r;
}

Tensor leaky_relu_backward_op(const Tensor& grad_output, const Tensor& self, const Value& negative_slope) {
  OpScope scope("leaky_relu_backward");
  const double slope = negative_slope.number();
  Tensor r = kernels::device::any_on_device({&grad_output, &self})
                 ? kernels::device::binary(cuda::pw::BinaryOp::LeakyReluBackward, grad_output, self,
                                           kernels::result_type(grad_output, self), "leaky_relu_backward", slope)
                 : kernels::binary(grad_output, self, kernels::result_type(grad_output, self),
                                   [slope](double g, double x) { return x > 0 ? g : g * slope; }, "leaky_relu_backward");
  if (needs_grad({&grad_output, &self})) {
    auto node = make_node("LeakyReluBackwardBackward0", leaky_bb_backward, {grad_output, self});
    node->differentiable_backward = leaky_bb_backward;
    node->save_attr("negative_slope", number_attr(negative_slope));
    node->save_input("self", self);
    set_history(r, node);
  }
  return r;
}

Tensor leaky_relu(const Tensor& a, const Value& negative_slope) {
  OpScope scope("leaky_relu");
  require_kernel_dtype(a, "leaky_relu_cpu", false);
  const double slope = negative_slope.number();
  Tensor r = kernels::device::on_device(a)
                 ? kernels::device::unary(cuda::pw::UnaryOp::LeakyRelu, a, a->dtype(), slope)
                 : kernels::unary(a, a->dtype(), [slope](double x) { return x > 0 ? x : x * slope; });
  if (needs_grad({&a})) {
    // LeakyReluBackward0: negative_slope (as written: an int reads back as an int), self.
    auto node = make_node("LeakyReluBackward0", leaky_relu_backward, {a});
    node->differentiable_backward = leaky_relu_dbackward;
    set_history(r, node);
    node->save_attr("negative_slope", number_attr(negative_slope));
    node->save_input("self", a);
  }
  return r;
}

namespace {
// approximate='none' on float32: PyTorch's float formula (ops/gelu_f32.hpp), split between
// threads for large contiguous inputs.
Tensor gelu_f32_forward(const Tensor& a) {
  if (Tensor r = kernels::unary_exact_f32(a, gelu_f32::forward_block)) return r;
  return kernels::unary(a, DType::Float32, gelu_float);
}
}  // namespace

Tensor gelu(const Tensor& a, const std::string& approximate) {
  OpScope scope("gelu");
  if (approximate != "none" && approximate != "tanh")
    throw ScenarioError("type_error", "approximate argument must be either none or tanh.");
  require_kernel_dtype(a, "GeluKernelImpl", false);
  const GeluTanh gt{a->dtype()};
  // Split between threads for large inputs (erf per element; results unchanged).
  Tensor r = kernels::device::on_device(a)
                 ? kernels::device::unary(approximate == "tanh" ? cuda::pw::UnaryOp::GeluTanh : cuda::pw::UnaryOp::Gelu,
                                          a, a->dtype())
             : approximate == "tanh" ? kernels::unary_split(a, a->dtype(), [gt](double x) { return gt.forward(x); })
             : a->dtype() == DType::Float32 ? gelu_f32_forward(a)
             : a->dtype() == DType::BFloat16 && gelu_bf16_onednn(a)
                 ? kernels::unary_split(a, a->dtype(), gelu_float)
             : a->dtype() == DType::BFloat16
                 ? kernels::unary_split(a, a->dtype(), [](double x) { return GeluNoneBf16::forward(x); })
                 : kernels::unary_split(a, a->dtype(), [](double x) { return gelu_none(x); });
  if (needs_grad({&a})) {
    // GeluBackward0: approximate ('none' or 'tanh'), self (SUMMARY gelu_none / gelu_tanh).
    auto node = make_node("GeluBackward0", gelu_backward, {a});
    node->differentiable_backward = gelu_dbackward;
    set_history(r, node);
    node->save_attr("approximate", AttrValue::string(approximate));
    node->save_input("self", a);
  }
  return r;
}

Tensor silu(const Tensor& a) {
  OpScope scope("silu");
  require_kernel_dtype(a, "silu_cpu", false);
  // x / (1 + exp(-x)), each step in the dtype as silu_kernel computes it (measured in bfloat16).
  const DType dt = a->dtype();
  Tensor r = kernels::device::on_device(a) ? kernels::device::unary(cuda::pw::UnaryOp::Silu, a, dt)
                                           : kernels::unary(a, dt, [dt](double x) {
                                               return x / round_to_dtype(1.0 + round_to_dtype(std::exp(-x), dt), dt);
                                             });
  if (needs_grad({&a})) {
    auto node = make_node("SiluBackward0", silu_backward, {a});  // saves self (SUMMARY silu)
    node->differentiable_backward = silu_dbackward;
    set_history(r, node);
    node->save_input("self", a);
  }
  return r;
}

Tensor softmax(const Tensor& a, int64_t dim) { return softmax_impl(a, dim, false); }
Tensor log_softmax(const Tensor& a, int64_t dim) { return softmax_impl(a, dim, true); }

int64_t implicit_softmax_dim(int64_t ndim) {
  // torch.nn.functional._get_softmax_dim (deprecated implicit choice).
  return (ndim == 0 || ndim == 1 || ndim == 3) ? 0 : 1;
}

Tensor max_all(const Tensor& a) {
  OpScope scope("max");
  if (a->numel() == 0)
    throw ScenarioError("shape_mismatch",
                        "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                        "reduction dim with the 'dim' argument.");
  std::vector<double> v;
  const bool on_device = kernels::device::on_device(a);
  if (!a->is_meta() && !on_device) {
    std::vector<double> x = to_values(a);
    double best = x[0];
    for (double e : x)
      if (!std::isnan(best) && nan_aware_greater(e, best)) best = e;
    v = {best};
  }
  // On cuda: amax over every dim (NaN propagates, as PyTorch's max_all_cuda).
  Tensor r = on_device ? kernels::device::reduce(cuda::ReduceOp::Amax, a, {}, false)
                       : make_out({}, a->dtype(), a->is_meta(), v);
  if (needs_grad({&a})) record_extreme_all("MaxBackward1", r, a);
  return r;
}

static std::pair<Tensor, Tensor> max_dim_values(const Tensor& a, int64_t wd, bool keepdim);

std::pair<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim) {
  OpScope scope("max");
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  if (a->dim() > 0 && a->sizes[static_cast<size_t>(wd)] == 0)
    throw ScenarioError("index_out_of_range", "max(): Expected reduction dim " + std::to_string(wd) +
                                                  " to have non-zero size.");
  Tensor values, indices;
  if (kernels::device::on_device(a)) {
    std::tie(values, indices) = kernels::device::max_dim(a, wd, keepdim);
  } else {
    std::tie(values, indices) = max_dim_values(a, wd, keepdim);
  }
  if (needs_grad({&a})) record_extreme_dim("MaxBackward0", values, indices, a, dim, keepdim);
  return {values, indices};
}

// max(dim)'s values and indices on the host (wd already wrapped).
static std::pair<Tensor, Tensor> max_dim_values(const Tensor& a, int64_t wd, bool keepdim) {
  const ReducePlan p = plan_reduce(a->sizes, {wd}, keepdim);
  std::vector<double> vals, idx;
  if (!a->is_meta()) {
    std::vector<double> x = to_values(a);
    vals.assign(static_cast<size_t>(p.groups), 0.0);
    idx.assign(static_cast<size_t>(p.groups), 0.0);
    std::vector<bool> seen(static_cast<size_t>(p.groups), false);
    int64_t inner = 1;
    for (size_t k = static_cast<size_t>(wd) + 1; k < a->sizes.size(); ++k) inner *= a->sizes[k];
    const int64_t size_d = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(wd)];
    // Row-major order visits each group's elements by increasing position along dim, so
    // the first maximum wins ties (measured: [1, 3, 3] gives index 1); NaN wins and stays.
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = static_cast<size_t>(p.group[i]);
      if (!seen[k] || (!std::isnan(vals[k]) && nan_aware_greater(x[i], vals[k]))) {
        seen[k] = true;
        vals[k] = x[i];
        idx[k] = static_cast<double>((static_cast<int64_t>(i) / inner) % size_d);
      }
    }
  }
  Tensor values = make_out(p.out_shape, a->dtype(), a->is_meta(), vals);
  Tensor indices = make_out(p.out_shape, DType::Int64, a->is_meta(), idx);
  return {values, indices};
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  OpScope scope("amax");
  std::vector<int64_t> wd = wrap_dims(dims, a->dim());
  if (a->dim() == 0) wd.clear();
  for (size_t d = 0; d < a->sizes.size(); ++d) {
    const bool reduced = wd.empty() || std::find(wd.begin(), wd.end(), static_cast<int64_t>(d)) != wd.end();
    if (reduced && a->sizes[d] == 0)
      throw ScenarioError("index_out_of_range",
                          "amax(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
  }
  const ReducePlan p = plan_reduce(a->sizes, wd, keepdim);
  std::vector<double> vals;
  const bool on_device = kernels::device::on_device(a);
  if (!a->is_meta() && !on_device) {
    std::vector<double> x = to_values(a);
    vals.assign(static_cast<size_t>(p.groups), -std::numeric_limits<double>::infinity());
    std::vector<bool> seen(static_cast<size_t>(p.groups), false);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = static_cast<size_t>(p.group[i]);
      if (!seen[k] || (!std::isnan(vals[k]) && nan_aware_greater(x[i], vals[k]))) {
        seen[k] = true;
        vals[k] = x[i];
      }
    }
  }
  Tensor r = on_device ? kernels::device::reduce(cuda::ReduceOp::Amax, a, wd, keepdim)
                       : make_out(p.out_shape, a->dtype(), a->is_meta(), vals);
  if (needs_grad({&a})) {
    // AmaxBackward0: dim (as written; () for all), keepdim, result, self (SUMMARY amax).
    auto node = make_node("AmaxBackward0", amax_backward, {a});
    node->differentiable_backward = amax_dbackward;
    set_history(r, node);
    node->save_attr("dim", AttrValue::ints(dims, true));
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

Tensor var(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, int64_t correction, bool keepdim) {
  OpScope scope("var");
  if (!is_floating(a->dtype())) {
    ScenarioError e("dtype_mismatch", "std and var only support floating point and complex dtypes");
    e.facts = {{"op", "var"}, {"dtype", dtype_name(a->dtype())}};
    throw e;
  }
  std::vector<int64_t> wd = dims ? wrap_dims(*dims, a->dim()) : std::vector<int64_t>{};
  if (a->dim() == 0) wd.clear();
  // An empty dim list reduces every dim, like dim=None (measured: x.var(()) == x.var()).
  const ReducePlan p = plan_reduce(a->sizes, wd, keepdim && dims.has_value());
  std::vector<double> vals;
  const bool on_device = kernels::device::on_device(a);
  if (!a->is_meta() && !on_device) {
    std::vector<double> x = to_values(a);
    std::vector<double> mean(static_cast<size_t>(p.groups), 0.0), ss(static_cast<size_t>(p.groups), 0.0);
    for (size_t i = 0; i < x.size(); ++i) mean[p.group[i]] += x[i];
    for (double& m : mean) m /= static_cast<double>(p.count);
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i] - mean[p.group[i]];
      ss[p.group[i]] += d * d;
    }
    // Divisor max(0, N - correction): 0/0 is NaN, x/0 is inf (measured var(correction > N)).
    const double divisor = static_cast<double>(std::max<int64_t>(0, p.count - correction));
    vals.resize(ss.size());
    for (size_t k = 0; k < ss.size(); ++k) vals[k] = ss[k] / divisor;
  }
  Tensor r = on_device ? kernels::device::var(a, wd, keepdim && dims.has_value(), correction)
                       : make_out(p.out_shape, a->dtype(), a->is_meta(), vals);
  if (needs_grad({&a})) {
    // VarBackward0: correction (unbiased=True is 1, False 0), dim (None when not given;
    // as written), keepdim, self (SUMMARY var_all / var_dim).
    auto node = make_node("VarBackward0", var_backward, {a});
    node->differentiable_backward = var_dbackward;
    set_history(r, node);
    node->save_attr("correction", AttrValue::integer(correction));
    node->save_attr("dim", dims ? AttrValue::ints(*dims, true) : AttrValue::none());
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    node->save_input("self", a);
  }
  return r;
}

Tensor norm(const Tensor& a, const Value& p, const std::vector<int64_t>& dims, bool keepdim) {
  OpScope scope("norm");
  require_norm_dtype(a);
  std::vector<int64_t> wd = wrap_dims(dims, a->dim());
  if (a->dim() == 0) wd.clear();
  const ReducePlan plan = plan_reduce(a->sizes, wd, keepdim);
  const double pv = p.number();
  std::vector<double> vals;
  const bool on_device = kernels::device::on_device(a);
  if (!a->is_meta() && !on_device) {
    std::vector<double> x = to_values(a);
    std::vector<double> acc(static_cast<size_t>(plan.groups), 0.0);
    const bool pinf = std::isinf(pv) && pv > 0, ninf = std::isinf(pv) && pv < 0;
    if (pinf) acc.assign(acc.size(), 0.0);
    if (ninf) acc.assign(acc.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < x.size(); ++i) {
      const double ab = std::fabs(x[i]);
      double& s = acc[plan.group[i]];
      if (pinf) s = (std::isnan(ab) || ab > s) ? ab : s;
      else if (ninf) s = (std::isnan(ab) || ab < s) ? ab : s;
      else if (pv == 0.0) s += x[i] != 0 ? 1.0 : 0.0;
      else if (pv == 1.0) s += ab;
      else if (pv == 2.0) s += ab * ab;
      else s += std::pow(ab, pv);
    }
    vals.resize(acc.size());
    for (size_t k = 0; k < acc.size(); ++k) {
      if (std::isinf(pv) || pv == 0.0 || pv == 1.0) vals[k] = acc[k];
      else if (pv == 2.0) vals[k] = std::sqrt(acc[k]);
      else vals[k] = std::pow(acc[k], 1.0 / pv);
    }
  }
  Tensor r = !on_device   ? make_out(plan.out_shape, a->dtype(), a->is_meta(), vals)
             : pv == 2.0 ? kernels::device::norm2(a, wd, keepdim)
                         : kernels::device::norm_p(a, pv, wd, keepdim);
  if (needs_grad({&a})) {
    // NormBackward1 (norm.ScalarOpt_dim): dim (as passed to at::norm), keepdim, p (its
    // Python type shows: 2 vs 2.0), result, self (SUMMARY norm_all / norm_dim).
    auto node = make_node("NormBackward1", norm_backward, {a});
    node->differentiable_backward = norm_dbackward;
    set_history(r, node);
    node->save_attr("dim", AttrValue::ints(dims, true));
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    node->save_attr("p", number_attr(p));
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

Tensor norm_functional(const Tensor& a, const Value& p, const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  // torch/functional.py norm (1.13), with out=None and dtype=None:
  //  - dim None, p 'fro': frobenius_norm(input, dim=()) = at::norm(input, 2, (), keepdim);
  //  - dim None, p a number: at::norm(input, p, all dims listed, keepdim);
  //  - p 'fro' with dims: frobenius_norm(input, dims): one or no dim: at::norm(input, 2, dims),
  //    two dims: sqrt(sum(input * input, wrapped dims, keepdim)) (measured: SqrtBackward0 >
  //    SumBackward1 dim=(1, 0) > MulBackward0 for x.norm(dim=(-1, 0)));
  //  - p a number with dims: at::norm(input, p, dims, keepdim).
  const bool fro = p.kind == Value::Kind::None || (p.kind == Value::Kind::Str && p.s == "fro");
  if (p.kind == Value::Kind::Str && p.s != "fro") {
    if (p.s == "nuc") throw ScenarioError("unsupported", "norm(p='nuc') is not supported");
    throw ScenarioError("type_error", "only valid string values are 'fro' and 'nuc', found " + p.s);
  }
  if (!fro && !p.is_number())
    throw ScenarioError("type_error", "norm(): argument 'p' must be a number or 'fro', not " + type_name(p));
  const Value two = Value::integer(2);
  if (!dims) {
    if (fro) return norm(a, two, {}, keepdim);
    std::vector<int64_t> all;
    for (int64_t d = 0; d < a->dim(); ++d) all.push_back(d);
    return norm(a, p, all, keepdim);
  }
  if (!fro) return norm(a, p, *dims, keepdim);
  if (dims->size() <= 1) return norm(a, two, *dims, keepdim);
  if (dims->size() > 2)
    throw ScenarioError("shape_mismatch", "Expected at most 2 dimensions, but got " + std::to_string(dims->size()) +
                                              " dimensions instead.");
  require_norm_dtype(a);
  std::vector<int64_t> wd{kernels::wrap_dim((*dims)[0], a->dim()), kernels::wrap_dim((*dims)[1], a->dim())};
  if (wd[0] == wd[1])
    throw ScenarioError("type_error", "Expected dims to be different, got [" + std::to_string((*dims)[0]) + ", " +
                                          std::to_string((*dims)[1]) + "] instead");
  // The sqrt at the end has no Half CPU kernel (measured: "sqrt_vml_cpu" not implemented for 'Half').
  if (a->dtype() == DType::Float16 && !a->is_meta()) not_implemented("sqrt_vml_cpu", DType::Float16);
  return ops::sqrt(ops::sum(ops::mul(a, a), wd, keepdim));
}

Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other) {
  OpScope scope("where");
  if (condition->dtype() != DType::Bool) {
    ScenarioError e("dtype_mismatch", "where expected condition to be a boolean tensor, but got a tensor with dtype " +
                                          scalar_name(condition->dtype()));
    e.facts = {{"op", "where"}, {"dtype", dtype_name(condition->dtype())}};
    throw e;
  }
  // The result dtype promotes input and other (Python numbers lowest, as wrapped numbers):
  // measured where(m, x, 0) is float32, where(m, 1, 0) int64, where(m, 1.0, 0.0) float32.
  const DType out = kernels::result_type(input, other);
  Tensor r = kernels::device::any_on_device({&condition, &input, &other})
                 ? kernels::device::ternary(cuda::pw::TernaryOp::Where, condition, input, other, out, "where")
                 : kernels::ternary(condition, input, other, out,
                                    [](double c, double x, double y) { return c != 0 ? x : y; }, "where");
  if (needs_grad({&input, &other})) {
    // WhereBackward0: edges (input, other) (a Python number's edge is None); saves only
    // condition, the same object (SUMMARY where: 6 B, is:m, for every requires_grad combination).
    auto node = make_node("WhereBackward0", where_backward, {input, other});
    node->differentiable_backward = where_dbackward;
    set_history(r, node);
    node->save_input("condition", condition);
  }
  return r;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Value& value) {
  OpScope scope("masked_fill");
  if (mask->dtype() != DType::Bool)
    // PyTorch 1.13 accepts other mask dtypes, inconsistently (a float mask fills nothing,
    // measured); agtrace refuses rather than guess.
    throw ScenarioError("unsupported", "masked_fill with a " + dtype_name(mask->dtype()) +
                                           " mask is not supported (only torch.bool masks)");
  Tensor vt = masked_fill_value(value, "masked_fill");
  // The out-of-place masked_fill broadcasts self with the mask (measured: a [3] tensor
  // with a [2, 3] mask gives a [2, 3] result).
  kernels::broadcast_shapes(a->sizes, mask->sizes, "masked_fill");
  const double fill = vt ? (vt->is_meta() ? 0.0 : item(vt)) : value.number();
  Tensor r = kernels::device::any_on_device({&a, &mask})
                 ? kernels::device::select_or(mask, a, fill, false, a->dtype(), "masked_fill")
                 : kernels::masked_fill_exact_f32(a, mask, fill);
  if (!r)
    r = kernels::binary(a, mask, a->dtype(), [fill](double x, double m) { return m != 0 ? fill : x; }, "masked_fill");
  const bool tensor_value = static_cast<bool>(vt);
  if (tensor_value ? needs_grad({&a, &vt}) : needs_grad({&a})) {
    // MaskedFillBackward0 (Scalar value): edge self; MaskedFillBackward1 (0-d tensor value):
    // edges self and value. Both save only mask, the same object (SUMMARY masked_fill; measured).
    auto node = tensor_value ? make_node("MaskedFillBackward1", masked_fill_backward, {a, vt})
                             : make_node("MaskedFillBackward0", masked_fill_backward, {a});
    if (!tensor_value) node->differentiable_backward = masked_fill_dbackward;
    set_history(r, node);
    node->save_input("mask", mask);
  }
  return r;
}

}  // namespace agtrace::ops
