// The scalar formulas of agtrace's pointwise operations, written once for the host and the
// device: the CUDA kernels (elementwise.cu) evaluate them per element, and the CUDA tests
// evaluate the same functions on the host as their reference. A plain C++ compiler sees
// ordinary inline functions (the CPU build compiles this header too).
//
// T is the compute type: float for float32/float16/bfloat16 and double for float64, as
// PyTorch's CUDA kernels compute in opmath_type (at::opmath_type<Half> is float). Where
// PyTorch's CUDA kernel writes a formula in a particular way, it is mirrored and cited
// (ATen/native/cuda/*.cu of PyTorch 1.13); backward formulas follow
// tools/autograd/derivatives.yaml of 1.13.
#pragma once
#include <cmath>

#include "cuda/hd.hpp"

namespace agtrace::cuda::pw {

// One operand: y = f(x; s0, s1).
enum class UnaryOp : int {
  Neg, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Abs, Sin, Cos, Reciprocal,
  Silu,
  PowScalar,   // x ** s0
  LeakyRelu,   // slope s0
  Clamp,       // clamp(x, s0, s1); pass -inf / +inf for a missing bound
  AddScalar,   // x + s0
  MulScalar,   // x * s0
  DivScalar,   // x / s0, computed as x * (1 / s0) (below)
  Sign,        // sgn/sign of a real x: (0 < x) - (x < 0), so NaN gives 0 (as the CPU's sgn)
  Count
};

// Two operands (broadcast): y = f(a, b; s0). The *Backward ops take (grad, saved) and
// give the input's gradient.
enum class BinaryOp : int {
  Add,  // a + s0 * b (alpha = s0)
  Sub,  // a - s0 * b
  Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // 1 or 0 (the result is usually a bool tensor)
  ExpBackward,        // (grad, result)
  LogBackward,        // (grad, self)
  SqrtBackward,       // (grad, result)
  RsqrtBackward,      // (grad, result)
  TanhBackward,       // (grad, result)
  SigmoidBackward,    // (grad, result)
  ReluBackward,       // (grad, result): threshold_backward(grad, result, 0)
  GeluBackward,       // (grad, self)
  GeluTanhBackward,   // (grad, self)
  AbsBackward,        // (grad, self)
  SinBackward,        // (grad, self)
  CosBackward,        // (grad, self)
  ReciprocalBackward, // (grad, result)
  SiluBackward,       // (grad, self)
  PowScalarBackward,  // (grad, self), exponent s0
  LeakyReluBackward,  // (grad, self), slope s0
  Count
};

// Three operands (broadcast).
enum class TernaryOp : int {
  Where,                  // (condition, x, y)
  ClampBackward,          // (grad, self, -) with bounds s0, s1; c unused
  DivBackwardOther,       // (grad, self, other)
  PowBackwardSelf,        // (grad, self, exponent)
  PowBackwardExponent,    // (grad, self, exponent)
  MaximumBackwardSelf,    // (grad, self, other)
  MaximumBackwardOther,   // (grad, self, other)
  MinimumBackwardSelf,    // (grad, self, other)
  MinimumBackwardOther,   // (grad, self, other)
  GeluDoubleBackward,     // (grad, grad_output, self), s0 = 1 for approximate='tanh'
  Count
};

namespace detail {
// std:: on the host; CUDA's overloaded math functions (float and double) on the device.
#if defined(__CUDA_ARCH__)
template <typename T> __device__ inline T exp_(T x) { return ::exp(x); }
template <typename T> __device__ inline T log_(T x) { return ::log(x); }
template <typename T> __device__ inline T sqrt_(T x) { return ::sqrt(x); }
template <typename T> __device__ inline T rsqrt_(T x) { return ::rsqrt(x); }
template <typename T> __device__ inline T tanh_(T x) { return ::tanh(x); }
template <typename T> __device__ inline T erf_(T x) { return ::erf(x); }
template <typename T> __device__ inline T sin_(T x) { return ::sin(x); }
template <typename T> __device__ inline T cos_(T x) { return ::cos(x); }
template <typename T> __device__ inline T pow_(T x, T y) { return ::pow(x, y); }
template <typename T> __device__ inline T fabs_(T x) { return ::fabs(x); }
#else
template <typename T> inline T exp_(T x) { return std::exp(x); }
template <typename T> inline T log_(T x) { return std::log(x); }
template <typename T> inline T sqrt_(T x) { return std::sqrt(x); }
template <typename T> inline T rsqrt_(T x) { return T(1) / std::sqrt(x); }
template <typename T> inline T tanh_(T x) { return std::tanh(x); }
template <typename T> inline T erf_(T x) { return std::erf(x); }
template <typename T> inline T sin_(T x) { return std::sin(x); }
template <typename T> inline T cos_(T x) { return std::cos(x); }
template <typename T> inline T pow_(T x, T y) { return std::pow(x, y); }
template <typename T> inline T fabs_(T x) { return std::fabs(x); }
#endif
template <typename T> AGTRACE_HD inline bool isnan_(T x) { return x != x; }
template <typename T> AGTRACE_HD inline T sgn_(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); }

// M_SQRT1_2, and GeluCUDAKernelImpl's constants: kBeta = M_SQRT2 * M_2_SQRTPI * 0.5
// (sqrt(2/pi)) for the tanh form, M_2_SQRTPI * M_SQRT1_2 * 0.5 (1/sqrt(2 pi)) for erf's.
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluKappa = 0.044715;

// x ** e as pow_tensor_scalar_kernel (PowKernel.cu) special-cases common exponents.
template <typename T>
AGTRACE_HD inline T pow_scalar(T x, T e) {
  if (e == T(2)) return x * x;
  if (e == T(3)) return x * x * x;
  if (e == T(0.5)) return sqrt_(x);
  if (e == T(-0.5)) return rsqrt_(x);
  if (e == T(-1)) return T(1) / x;
  if (e == T(-2)) return T(1) / (x * x);
  return pow_(x, e);
}

template <typename T>
AGTRACE_HD inline T gelu_tanh_inner(T x) {
  const T x_cube = x * x * x;
  return T(kSqrt2OverPi) * (x + T(kGeluKappa) * x_cube);
}
}  // namespace detail

template <typename T>
AGTRACE_HD inline T unary_formula(UnaryOp op, T x, T s0, T s1) {
  using namespace detail;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return exp_(x);
    case UnaryOp::Log: return log_(x);
    case UnaryOp::Sqrt: return sqrt_(x);
    case UnaryOp::Rsqrt: return rsqrt_(x);
    case UnaryOp::Tanh: return tanh_(x);
    // sigmoid_kernel_cuda: one / (one + exp(-x)).
    case UnaryOp::Sigmoid: return T(1) / (T(1) + exp_(-x));
    // relu is clamp_min(x, 0), which keeps NaN (clamp_min_kernel_cuda).
    case UnaryOp::Relu: return isnan_(x) ? x : (x > T(0) ? x : T(0));
    // GeluCUDAKernelImpl (none): x * 0.5 * (1 + erf(x * M_SQRT1_2)).
    case UnaryOp::Gelu: return x * T(0.5) * (T(1) + erf_(x * T(kSqrt1_2)));
    // GeluCUDAKernelImpl (tanh): 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))).
    case UnaryOp::GeluTanh: return T(0.5) * x * (T(1) + tanh_(gelu_tanh_inner(x)));
    case UnaryOp::Abs: return fabs_(x);
    case UnaryOp::Sin: return sin_(x);
    case UnaryOp::Cos: return cos_(x);
    case UnaryOp::Reciprocal: return T(1) / x;
    // silu_kernel (ActivationSiluKernel.cu): x / (1 + exp(-x)).
    case UnaryOp::Silu: return x / (T(1) + exp_(-x));
    case UnaryOp::PowScalar: return pow_scalar(x, s0);
    case UnaryOp::LeakyRelu: return x > T(0) ? x : x * s0;
    // clamp_kernel_cuda: NaN stays; min(max(x, lo), hi), so lo > hi gives hi everywhere.
    case UnaryOp::Clamp: {
      if (isnan_(x)) return x;
      const T lo = x < s0 ? s0 : x;
      return lo > s1 ? s1 : lo;
    }
    case UnaryOp::AddScalar: return x + s0;
    case UnaryOp::MulScalar: return x * s0;
    // div_true_kernel_cuda with a CPU scalar divisor multiplies by its reciprocal,
    // computed once in the compute type (BinaryDivTrueKernel.cu).
    case UnaryOp::DivScalar: return x * (T(1) / s0);
    case UnaryOp::Sign: return T((T(0) < x) - (x < T(0)));
    default: return x;
  }
}

template <typename T>
AGTRACE_HD inline T binary_formula(BinaryOp op, T a, T b, T s0) {
  using namespace detail;
  switch (op) {
    case BinaryOp::Add: return a + s0 * b;
    case BinaryOp::Sub: return a - s0 * b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return pow_(a, b);
    // maximum/minimum propagate NaN (MaxMinElementwiseKernel.cu).
    case BinaryOp::Maximum: return isnan_(a) ? a : (isnan_(b) ? b : (a > b ? a : b));
    case BinaryOp::Minimum: return isnan_(a) ? a : (isnan_(b) ? b : (a < b ? a : b));
    case BinaryOp::Eq: return a == b ? T(1) : T(0);
    case BinaryOp::Ne: return a != b ? T(1) : T(0);
    case BinaryOp::Lt: return a < b ? T(1) : T(0);
    case BinaryOp::Le: return a <= b ? T(1) : T(0);
    case BinaryOp::Gt: return a > b ? T(1) : T(0);
    case BinaryOp::Ge: return a >= b ? T(1) : T(0);
    // derivatives.yaml: exp: grad * result; log: grad.div(self); sqrt: grad / (2 * result);
    // rsqrt: -0.5 * grad * result.pow(3); tanh: tanh_backward = grad * (1 - y^2);
    // sigmoid: sigmoid_backward = grad * (1 - y) * y; relu: threshold_backward(grad, result, 0).
    case BinaryOp::ExpBackward: return a * b;
    case BinaryOp::LogBackward: return a / b;
    case BinaryOp::SqrtBackward: return a / (T(2) * b);
    case BinaryOp::RsqrtBackward: return T(-0.5) * a * (b * b * b);
    case BinaryOp::TanhBackward: return a * (T(1) - b * b);
    case BinaryOp::SigmoidBackward: return a * (T(1) - b) * b;
    case BinaryOp::ReluBackward: return b <= T(0) ? T(0) : a;
    // GeluBackwardCUDAKernelImpl (none): cdf = 0.5 (1 + erf(x M_SQRT1_2)),
    // pdf = exp(-0.5 x^2) * kBeta; dy * (cdf + x * pdf).
    case BinaryOp::GeluBackward: {
      const T cdf = T(0.5) * (T(1) + erf_(b * T(kSqrt1_2)));
      const T pdf = exp_(T(-0.5) * b * b) * T(kInvSqrt2Pi);
      return a * (cdf + b * pdf);
    }
    // GeluBackwardCUDAKernelImpl (tanh), step by step as there.
    case BinaryOp::GeluTanhBackward: {
      const T x_sq = b * b;
      const T t = tanh_(gelu_tanh_inner(b));
      const T left = T(0.5) * b;
      const T right = T(1) + t;
      const T left_derivative = T(0.5) * right;
      const T tanh_derivative = T(1) - t * t;
      const T inner_derivative = T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluKappa) * x_sq);
      const T right_derivative = left * tanh_derivative * inner_derivative;
      return a * (left_derivative + right_derivative);
    }
    case BinaryOp::AbsBackward: return a * sgn_(b);
    case BinaryOp::SinBackward: return a * cos_(b);
    case BinaryOp::CosBackward: return a * -sin_(b);
    case BinaryOp::ReciprocalBackward: return -a * (b * b);
    // silu_backward_kernel: s = 1 / (1 + exp(-x)); dy * s * (1 + x * (1 - s)).
    case BinaryOp::SiluBackward: {
      const T s = T(1) / (T(1) + exp_(-b));
      return a * s * (T(1) + b * (T(1) - s));
    }
    // pow_backward: exponent == 0 ? 0 : grad * exponent * self.pow(exponent - 1).
    case BinaryOp::PowScalarBackward: return s0 == T(0) ? T(0) : a * (s0 * pow_scalar(b, s0 - T(1)));
    // leaky_relu_backward: self > 0 ? grad : grad * negative_slope.
    case BinaryOp::LeakyReluBackward: return b > T(0) ? a : a * s0;
    default: return a;
  }
}

template <typename T>
AGTRACE_HD inline T ternary_formula(TernaryOp op, T a, T b, T c, T s0, T s1) {
  using namespace detail;
  switch (op) {
    case TernaryOp::Where: return a != T(0) ? b : c;
    // clamp_backward: where(self >= min and self <= max, grad, 0); NaN self gives 0.
    case TernaryOp::ClampBackward: return (b >= s0 && b <= s1) ? a : T(0);
    // div_tensor_other_backward: -grad * ((self / other) / other).
    case TernaryOp::DivBackwardOther: return -a * ((b / c) / c);
    // pow_backward_self: exponent == 0 ? 0 : grad * exponent * self.pow(exponent - 1).
    case TernaryOp::PowBackwardSelf: return c == T(0) ? T(0) : a * (c * pow_(b, c - T(1)));
    // pow_backward_exponent: grad * where(self == 0 & exponent >= 0, 0, result * log(self)),
    // result = self.pow(exponent) recomputed here.
    case TernaryOp::PowBackwardExponent:
      return (b == T(0) && c >= T(0)) ? T(0) : a * (pow_(b, c) * log_(b));
    // maximum: self: where(self == other, grad / 2, grad).masked_fill_(self < other, 0);
    // other: the same with self > other. minimum swaps the masks.
    case TernaryOp::MaximumBackwardSelf: return b < c ? T(0) : (b == c ? a / T(2) : a);
    case TernaryOp::MaximumBackwardOther: return b > c ? T(0) : (b == c ? a / T(2) : a);
    case TernaryOp::MinimumBackwardSelf: return b > c ? T(0) : (b == c ? a / T(2) : a);
    case TernaryOp::MinimumBackwardOther: return b < c ? T(0) : (b == c ? a / T(2) : a);
    // gelu_double_backward: grad * grad_output * gelu''(self). Exact: phi(x) (2 - x^2); tanh:
    // with t = tanh(k (x + c x^3)) and u' = k (1 + 3 c x^2), (1 - t^2) (u' - x t u'^2 + 3 k c x^2).
    case TernaryOp::GeluDoubleBackward: {
      if (s0 == T(0)) return a * b * (T(kInvSqrt2Pi) * exp_(T(-0.5) * c * c) * (T(2) - c * c));
      const T t = tanh_(gelu_tanh_inner(c));
      const T du = T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluKappa) * c * c);
      return a * b * ((T(1) - t * t) * (du - c * t * du * du + T(3) * T(kSqrt2OverPi) * T(kGeluKappa) * c * c));
    }
    default: return a;
  }
}

// Names for error messages ("CUDA error in sigmoid_backward (launch): ...").
inline const char* op_name(UnaryOp op) {
  static const char* const names[] = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu",
                                      "gelu_tanh", "abs", "sin", "cos", "reciprocal", "silu", "pow", "leaky_relu",
                                      "clamp", "add_scalar", "mul_scalar", "div_scalar", "sgn"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(UnaryOp::Count), "one name per op");
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(UnaryOp::Count) ? names[i] : "unary";
}
inline const char* op_name(BinaryOp op) {
  static const char* const names[] = {
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
      "exp_backward", "log_backward", "sqrt_backward", "rsqrt_backward", "tanh_backward", "sigmoid_backward",
      "threshold_backward", "gelu_backward", "gelu_backward_tanh", "abs_backward", "sin_backward", "cos_backward",
      "reciprocal_backward", "silu_backward", "pow_backward", "leaky_relu_backward"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(BinaryOp::Count), "one name per op");
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(BinaryOp::Count) ? names[i] : "binary";
}
inline const char* op_name(TernaryOp op) {
  static const char* const names[] = {"where", "clamp_backward", "div_backward_other", "pow_backward_self",
                                      "pow_backward_exponent", "maximum_backward_self", "maximum_backward_other",
                                      "minimum_backward_self", "minimum_backward_other", "gelu_double_backward"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(TernaryOp::Count), "one name per op");
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(TernaryOp::Count) ? names[i] : "ternary";
}

}  // namespace agtrace::cuda::pw
