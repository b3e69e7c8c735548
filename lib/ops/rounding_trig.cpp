// Rounding and trigonometric pointwise ops: floor ceil round trunc frac sign (no saved
// value), sinh cosh atan asin acos log2 log10 erf erfc erfinv (saving self), tan exp2 (saving
// the result).
// Measured with /usr/bin/python3 and torch 1.13: node names (FloorBackward0 ...), what each
// saves, dtypes (rounding ops and sign keep an integer input's dtype, frac refuses it, the
// others give float32), and which CPU kernels lack Half ("floor_vml_cpu" not implemented for
// 'Half'; frac, sign and exp2 have it). Formulas from derivatives.yaml (1.13).
#include <cmath>
#include <string>

#include "ops/more_util.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

enum class Saves { Nothing, Self, Result };
enum class IntInput { Keep, ToFloat, Refuse };

struct PointwiseSpec {
  const char* op;
  const char* node;
  const char* kernel;  // in "not implemented for" messages
  double (*f)(double);
  autograd::BackwardFn backward;
  Saves saves;
  IntInput int_input;
  bool half_on_cpu;
};

// derivatives.yaml: floor, ceil, round, trunc, sign: zeros_like(grad).
std::vector<Tensor> zero_backward(Node& n, const std::vector<Tensor>& g) {
  return {kernels::full(g[0]->sizes, 0.0, n.input_meta[0].dtype, g[0]->is_meta())};
}
// frac: grad.
std::vector<Tensor> identity_backward(Node& n, const std::vector<Tensor>& g) {
  return {as_dtype(g[0], n.input_meta[0].dtype)};
}

// grad * d(saved) elementwise, in the input's dtype.
template <typename F>
std::vector<Tensor> grad_times(Node& n, const std::vector<Tensor>& g, const char* saved, F&& d) {
  Tensor s = n.unpack(saved);
  return {kernels::binary(
      g[0], s, n.input_meta[0].dtype, [&d](double gv, double v) { return gv * d(v); }, "backward")};
}

std::vector<Tensor> sinh_backward(Node& n, const std::vector<Tensor>& g) {  // grad * self.cosh()
  return grad_times(n, g, "self", [](double s) { return std::cosh(s); });
}
std::vector<Tensor> cosh_backward(Node& n, const std::vector<Tensor>& g) {  // grad * self.sinh()
  return grad_times(n, g, "self", [](double s) { return std::sinh(s); });
}
std::vector<Tensor> atan_backward(Node& n, const std::vector<Tensor>& g) {  // grad / (self * self + 1)
  return grad_times(n, g, "self", [](double s) { return 1.0 / (s * s + 1.0); });
}
std::vector<Tensor> asin_backward(Node& n, const std::vector<Tensor>& g) {  // grad * (-self * self + 1).rsqrt()
  return grad_times(n, g, "self", [](double s) { return 1.0 / std::sqrt(1.0 - s * s); });
}
std::vector<Tensor> acos_backward(Node& n, const std::vector<Tensor>& g) {  // grad * -((-self * self + 1).rsqrt())
  return grad_times(n, g, "self", [](double s) { return -1.0 / std::sqrt(1.0 - s * s); });
}
std::vector<Tensor> log2_backward(Node& n, const std::vector<Tensor>& g) {  // grad / (self * 0.6931471805599453)
  return grad_times(n, g, "self", [](double s) { return 1.0 / (s * 0.6931471805599453); });
}
std::vector<Tensor> log10_backward(Node& n, const std::vector<Tensor>& g) {  // grad / (self * 2.302585092994046)
  return grad_times(n, g, "self", [](double s) { return 1.0 / (s * 2.302585092994046); });
}
std::vector<Tensor> tan_backward(Node& n, const std::vector<Tensor>& g) {  // grad * (1 + result.pow(2))
  return grad_times(n, g, "result", [](double r) { return 1.0 + r * r; });
}
std::vector<Tensor> exp2_backward(Node& n, const std::vector<Tensor>& g) {  // grad * result * ln(2)
  return grad_times(n, g, "result", [](double r) { return r * 0.6931471805599453; });
}

// erf: grad * 2 / sqrt(pi) * exp(-self^2); erfc: its negative; erfinv: grad * sqrt(pi) / 2 *
// exp(self.erfinv()^2).
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
std::vector<Tensor> erf_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", [](double s) { return kTwoOverSqrtPi * std::exp(-s * s); });
}
std::vector<Tensor> erfc_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", [](double s) { return -kTwoOverSqrtPi * std::exp(-s * s); });
}
double erfinv_f(double x);
std::vector<Tensor> erfinv_backward(Node& n, const std::vector<Tensor>& g) {
  return grad_times(n, g, "self", [](double s) {
    const double r = erfinv_f(s);
    return std::exp(r * r) / kTwoOverSqrtPi;
  });
}

// The inverse of erf: ±inf at ±1, NaN outside [-1, 1]; Giles' single-precision
// approximation refined by Newton steps on erf(r) - x to double precision.
double erfinv_f(double x) {
  if (std::isnan(x) || x < -1 || x > 1) return std::nan("");
  if (x == 1 || x == -1) return x * HUGE_VAL;
  const double w = -std::log((1.0 - x) * (1.0 + x));
  double r;
  if (w < 5) {
    const double t = w - 2.5;
    r = ((((((((2.81022636e-08 * t + 3.43273939e-07) * t - 3.5233877e-06) * t - 4.39150654e-06) * t +
              0.00021858087) * t - 0.00125372503) * t - 0.00417768164) * t + 0.246640727) * t + 1.50140941);
  } else {
    const double t = std::sqrt(w) - 3;
    r = ((((((((-0.000200214257 * t + 0.000100950558) * t + 0.00134934322) * t - 0.00367342844) * t +
              0.00573950773) * t - 0.0076224613) * t + 0.00943887047) * t + 1.00167406) * t + 2.83297682);
  }
  r *= x;
  for (int step = 0; step < 3; ++step) r -= (std::erf(r) - x) / (kTwoOverSqrtPi * std::exp(-r * r));
  return r;
}

double frac_f(double x) { return x - std::trunc(x); }
// (0 < x) - (x < 0), as the CPU kernel: sign(-0.0) and sign(nan) are 0.0 (measured).
double sign_f(double x) { return static_cast<double>((0 < x) - (x < 0)); }

// round is half to even, as torch.round: std::nearbyint in the default rounding mode.
const PointwiseSpec kSpecs[] = {
    {"floor", "FloorBackward0", "floor_vml_cpu", [](double x) { return std::floor(x); }, zero_backward, Saves::Nothing,
     IntInput::Keep, false},
    {"ceil", "CeilBackward0", "ceil_vml_cpu", [](double x) { return std::ceil(x); }, zero_backward, Saves::Nothing,
     IntInput::Keep, false},
    {"round", "RoundBackward0", "round_vml_cpu", [](double x) { return std::nearbyint(x); }, zero_backward,
     Saves::Nothing, IntInput::Keep, false},
    {"trunc", "TruncBackward0", "trunc_vml_cpu", [](double x) { return std::trunc(x); }, zero_backward, Saves::Nothing,
     IntInput::Keep, false},
    {"frac", "FracBackward0", "frac_cpu", frac_f, identity_backward, Saves::Nothing, IntInput::Refuse, true},
    {"sign", "SignBackward0", "sign_cpu", sign_f, zero_backward, Saves::Nothing, IntInput::Keep, true},
    {"sinh", "SinhBackward0", "sinh_cpu", [](double x) { return std::sinh(x); }, sinh_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"cosh", "CoshBackward0", "cosh_cpu", [](double x) { return std::cosh(x); }, cosh_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"atan", "AtanBackward0", "atan_vml_cpu", [](double x) { return std::atan(x); }, atan_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"asin", "AsinBackward0", "asin_vml_cpu", [](double x) { return std::asin(x); }, asin_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"acos", "AcosBackward0", "acos_vml_cpu", [](double x) { return std::acos(x); }, acos_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"log2", "Log2Backward0", "log2_vml_cpu", [](double x) { return std::log2(x); }, log2_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"log10", "Log10Backward0", "log10_vml_cpu", [](double x) { return std::log10(x); }, log10_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"tan", "TanBackward0", "tan_vml_cpu", [](double x) { return std::tan(x); }, tan_backward, Saves::Result,
     IntInput::ToFloat, false},
    {"exp2", "Exp2Backward0", "exp2_cpu", [](double x) { return std::exp2(x); }, exp2_backward, Saves::Result,
     IntInput::ToFloat, true},
    // Measured: ErfBackward0 / ErfcBackward0 / ErfinvBackward0 save self; integer inputs give
    // float32; "erf_vml_cpu" not implemented for 'Half'.
    {"erf", "ErfBackward0", "erf_vml_cpu", [](double x) { return std::erf(x); }, erf_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"erfc", "ErfcBackward0", "erfc_vml_cpu", [](double x) { return std::erfc(x); }, erfc_backward, Saves::Self,
     IntInput::ToFloat, false},
    {"erfinv", "ErfinvBackward0", "erfinv_vml_cpu", erfinv_f, erfinv_backward, Saves::Self, IntInput::ToFloat, false},
};

const PointwiseSpec& spec_of(const std::string& op) {
  for (const PointwiseSpec& s : kSpecs)
    if (op == s.op) return s;
  throw std::logic_error("rounding_trig: no spec for " + op);
}

Tensor run_pointwise(const Tensor& a, const PointwiseSpec& s) {
  OpScope scope(s.op);
  require_host(a);
  DType out = a->dtype();
  if (out == DType::Bool) not_implemented(s.kernel, out);
  if (!is_floating(out)) {
    if (s.int_input == IntInput::Refuse) not_implemented(s.kernel, out);
    if (s.int_input == IntInput::ToFloat) out = DType::Float32;
  }
  if (!s.half_on_cpu) refuse_half_on_cpu(a, s.kernel);
  Tensor r = kernels::unary(a, out, s.f);
  // An integer result (floor of an int64 tensor) has no gradient.
  if (needs_grad({&a}) && is_floating(out)) {
    auto node = make_node(s.node, s.backward, {a});
    set_history(r, node);
    if (s.saves == Saves::Self) node->save_input("self", a);
    if (s.saves == Saves::Result) node->save_output("result", r, 0);
  }
  return r;
}

// x.floor(), torch.floor(x), ...: the op's name is the spelling's last part.
Value impl_pointwise(Args& a, Runtime&) {
  const std::string op = a.fn.substr(a.fn.rfind('.') + 1);
  if (op == "round" && a.given("decimals")) unsupported("round(decimals=...)");
  return T(run_pointwise(a.tensor("self"), spec_of(op)));
}

}  // namespace

std::vector<OpEntry> rounding_trig_ops() {
  std::vector<OpEntry> t;
  for (const PointwiseSpec& s : kSpecs) {
    const std::string op = s.op;
    const std::string saves = s.saves == Saves::Self     ? "self (same object)"
                              : s.saves == Saves::Result ? "result (new object, same storage)"
                                                         : "nothing";
    const std::string signature = op == "round" ? "(self, *, decimals=None)" : "(self)";
    t.push_back({op, {"torch." + op, "Tensor." + op}, signature, "pointwise", s.node, saves, impl_pointwise, {}});
  }
  return t;
}

}  // namespace agtrace::ops
