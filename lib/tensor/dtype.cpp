#include "tensor/dtype.hpp"

#include <atomic>
#include <cmath>
#include <cstring>

namespace agtrace {

std::string dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

std::string dtype_torch_name(DType d) { return "torch." + dtype_name(d); }

// PyTorch's legacy type names, used in its version-counter error message
// ("[torch.FloatTensor [2, 3]], which is output 0 of ...").
std::string dtype_tensor_type(DType d) {
  switch (d) {
    case DType::Float32: return "FloatTensor";
    case DType::Float64: return "DoubleTensor";
    case DType::Float16: return "HalfTensor";
    case DType::BFloat16: return "BFloat16Tensor";
    case DType::Int64: return "LongTensor";
    case DType::Bool: return "BoolTensor";
  }
  return "?";
}

std::string dtype_scalar_name(DType d) {
  const std::string t = dtype_tensor_type(d);
  return t.substr(0, t.size() - std::string("Tensor").size());
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64,
                  DType::Bool})
    if (name == dtype_name(d)) return d;
  return std::nullopt;
}

bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
}

namespace {

// bfloat16 keeps the top 16 bits of a float32, rounded to nearest even (as c10::BFloat16).
double round_bf16(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f)) return v;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  bits &= 0xffff0000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

// IEEE binary16 round-to-nearest-even, via scaling: exact for normal and subnormal ranges.
double round_f16(double v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  double a = std::fabs(v);
  if (a >= 65520.0) return std::copysign(INFINITY, v);  // beyond max half (65504) + half ulp
  int exp;
  std::frexp(a, &exp);                 // a = m * 2^exp, m in [0.5, 1)
  int e = exp - 1;                     // a = m' * 2^e, m' in [1, 2)
  if (e < -14) e = -14;                // subnormal: fixed spacing 2^-24
  double ulp = std::ldexp(1.0, e - 10);
  double q = std::nearbyint(a / ulp) * ulp;  // nearbyint rounds half to even
  return std::copysign(q, v);
}

std::atomic<bool> g_int64_beyond_double{false};

}  // namespace

bool take_int64_beyond_double() { return g_int64_beyond_double.exchange(false, std::memory_order_relaxed); }

double round_to_dtype_other(double v, DType d) {
  switch (d) {
    case DType::Float32: return static_cast<double>(static_cast<float>(v));
    case DType::Float64: return v;
    case DType::Float16: return round_f16(v);
    case DType::BFloat16: return round_bf16(v);
    case DType::Int64: {
      const double t = std::trunc(v);
      if (std::fabs(t) > 9007199254740992.0) g_int64_beyond_double.store(true, std::memory_order_relaxed);
      return t;
    }
    case DType::Bool: return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

}  // namespace agtrace
