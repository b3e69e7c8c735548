// Element types a tensor can hold, with PyTorch's names, sizes and promotion rules.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace agtrace {

enum class DType { Float32, Float64, Float16, BFloat16, Int64, Bool };

// "float32" etc. as scenarios write them.
std::string dtype_name(DType d);
// "torch.float32", as Python prints a dtype.
std::string dtype_torch_name(DType d);
// "FloatTensor", as PyTorch's version error names a tensor type.
std::string dtype_tensor_type(DType d);
// The scalar type's name in ATen's messages: Float, Double, Half, BFloat16, Long, Bool.
std::string dtype_scalar_name(DType d);
std::optional<DType> parse_dtype(const std::string& name);
// Bytes per element (inline: lib/cuda's plugin uses it without agtrace_lib).
inline int64_t dtype_size(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}
bool is_floating(DType d);

// Rounds a value computed in double to what a tensor of dtype d stores. Inline for the
// float32/float64 cases every elementwise loop takes (an out-of-line call per element was
// 7% of bench/scenarios/transformer_block.json; issue #6).
double round_to_dtype_other(double v, DType d);
// int64 elements are held as doubles, exact up to 2**53. A value rounded to Int64 beyond that
// (or infinite) may already have lost digits PyTorch keeps, so it raises a flag (kernels may
// run on worker threads, where no exception can be thrown); the interpreter takes it after
// each statement and raises `unsupported` there instead of printing a rounded integer.
bool take_int64_beyond_double();
inline double round_to_dtype(double v, DType d) {
  if (d == DType::Float32) return static_cast<double>(static_cast<float>(v));
  if (d == DType::Float64) return v;
  return round_to_dtype_other(v, d);
}

}  // namespace agtrace
