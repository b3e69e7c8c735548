// Op-table fragment: tensors a program creates (see table.hpp) — torch.arange, torch.full,
// torch.empty, the Tensor.new_* family, full_like / empty_like / rand_like / randn_like and
// the random creators torch.rand, randn, randint and randperm. zeros, ones, zeros_like,
// ones_like and torch.tensor are in core_ops (table.cpp).
//
// torch.empty's elements are undefined in PyTorch; agtrace's are zeros (never compare them).
// Random values come from the run-wide generator (Runtime::generator(), lib/scenario/
// random.hpp), drawn element by element in row-major order, in the order the statements run:
//   rand    u = uniform01()                                   in [0, 1)
//   randn   Box-Muller as the leaf initialiser "normal" (lib/scenario/init.cpp): u1 =
//           uniform01_open_below(), u2 = uniform01(), sqrt(-2 ln u1) * cos(2 pi u2)
//   randint v = low + floor(uniform01() * (high - low)), high - 1 if rounding reached high
//   randperm Fisher-Yates from the end: for i = n-1 .. 1, j = floor(uniform01() * (i + 1)),
//           swap elements i and j of 0, 1, ..., n-1
// PyTorch's generator gives other values: the differential corpus uses random creators
// only where the values reach no printed number and no compared gradient.
#include <cmath>

#include "errors.hpp"
#include "ops/ops.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/kernels.hpp"

namespace agtrace::ops {

namespace {

constexpr double kPi = 3.141592653589793;

Shape checked_size(const std::vector<int64_t>& size) {
  for (int64_t d : size)
    if (d < 0) throw ScenarioError("shape_mismatch", "Trying to create tensor with negative dimension " + std::to_string(d));
  return Shape(size.begin(), size.end());
}

// A tensor of `shape` on `device` holding `fill` (a number) or, with `draw`, a value drawn
// per element; meta: no elements.
template <typename Draw>
Tensor make_tensor(const Shape& shape, DType dtype, const std::string& device, double fill, Draw draw) {
  DeviceScope on(device == "meta" ? "cpu" : device);
  if (device == "meta") return kernels::full(shape, 0.0, dtype, true);
  if constexpr (std::is_same_v<Draw, std::nullptr_t>) {
    return kernels::full(shape, fill, dtype, false);
  } else {
    // The size is checked (PyTorch's "Storage size calculation overflowed", the memory
    // budget) before any element is drawn: torch.arange(0, 2**62) raises as in PyTorch
    // instead of building a vector of 2**62 doubles.
    check_allocation(shape, dtype);
    std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
    for (double& v : values) v = draw();
    return tensor_from_values(shape, dtype, values);
  }
}

Value filled(const Args& a, const Runtime& rt, const Shape& shape, double fill, DType dtype,
             const std::string& fallback_device) {
  return finish_creation(a, make_tensor(shape, dtype, creation_device(a, rt, fallback_device), fill, nullptr));
}

// PyTorch's dtype for a Python fill value (torch.full, 1.13): bool, int64 or the default float.
DType fill_dtype(const Value& v) {
  return v.kind == Value::Kind::Bool ? DType::Bool : v.kind == Value::Kind::Int ? DType::Int64 : DType::Float32;
}

double fill_number(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (v.kind == Value::Kind::Tensor)
    throw ScenarioError("unsupported", short_fn(a.fn) + "(): a tensor as " + name + " (only Python numbers)");
  return a.number(name);
}

// ---- torch.arange(end) / (start, end) / (start, end, step)
Value impl_arange(Args& a, Runtime& rt) {
  const Value& args = a.get("args");
  if (args.items.empty() || args.items.size() > 3)
    type_error("arange() received an invalid combination of arguments - got " + std::to_string(args.items.size()) +
               " positional arguments");
  bool any_float = false;
  std::vector<double> n;
  for (const Value& v : args.items) {
    if (v.kind == Value::Kind::Tensor)
      throw ScenarioError("unsupported", "arange() with tensor bounds (only Python numbers)");
    if (!v.is_number()) type_error("arange(): argument 'end' must be Number, not " + type_name(v));
    any_float = any_float || v.kind == Value::Kind::Float;
    n.push_back(v.number());
  }
  const double start = n.size() > 1 ? n[0] : 0.0, end = n.size() > 1 ? n[1] : n[0], step = n.size() > 2 ? n[2] : 1.0;
  if (step == 0) throw ScenarioError("type_error", "step must be nonzero");
  if ((step > 0 && start > end) || (step < 0 && start < end))
    throw ScenarioError("type_error", "upper bound and larger bound inconsistent with step sign");
  // Integers give int64, any float the default float32 (measured); the length is
  // ceil((end - start) / step) in double, element i is start + i * step in double, rounded.
  const DType dtype = creation_dtype(a, any_float ? DType::Float32 : DType::Int64);
  const auto length = static_cast<int64_t>(std::ceil((end - start) / step));
  int64_t i = 0;
  Tensor t = make_tensor(Shape{length}, dtype, creation_device(a, rt, "cpu"), 0.0,
                         [&] { return start + static_cast<double>(i++) * step; });
  return finish_creation(a, t);
}

Value impl_full(Args& a, Runtime& rt) {
  const Value& size = a.get("size");
  if (size.kind != Value::Kind::Tuple && size.kind != Value::Kind::List && size.kind != Value::Kind::Size)
    type_error("full(): argument 'size' (position 1) must be tuple of SymInts, not " + type_name(size));
  const double fill = fill_number(a, "fill_value");
  return filled(a, rt, checked_size(a.shape("size")), fill, creation_dtype(a, fill_dtype(a.get("fill_value"))), "cpu");
}

Value impl_empty(Args& a, Runtime& rt) {
  return filled(a, rt, checked_size(a.shape("size")), 0.0, creation_dtype(a, DType::Float32), "cpu");
}

// ---- x.new_zeros / new_ones / new_empty / new_full / new_tensor: x's dtype and device
// unless given.
Value new_filled(Args& a, Runtime& rt, double fill) {
  Tensor self = a.tensor("self");
  return filled(a, rt, checked_size(a.shape("size")), fill, creation_dtype(a, self->dtype()), device_name(self));
}
Value impl_new_zeros(Args& a, Runtime& rt) { return new_filled(a, rt, 0.0); }
Value impl_new_ones(Args& a, Runtime& rt) { return new_filled(a, rt, 1.0); }
Value impl_new_full(Args& a, Runtime& rt) { return new_filled(a, rt, fill_number(a, "fill_value")); }

// x.new_tensor(data): x's dtype whatever the data hold (measured: a float32 x gives float32
// from [1, 2]).
Value impl_new_tensor(Args& a, Runtime& rt) {
  Tensor self = a.tensor("self");
  if (a.get("data").kind == Value::Kind::Tensor)
    throw ScenarioError("unsupported", "new_tensor() of a tensor (it copies and warns): use clone().detach()");
  Shape shape;
  std::vector<double> data;
  int kind = 0;  // the data's own dtype does not matter: self's is used
  bool int_beyond_double = false;
  flatten_data(a.get("data"), shape, 0, data, kind, &int_beyond_double);
  const DType d = creation_dtype(a, self->dtype());
  require_exact_int64(d, int_beyond_double);
  size_t next = 0;
  Tensor t = make_tensor(shape, d, creation_device(a, rt, device_name(self)), 0.0, [&] { return data[next++]; });
  return finish_creation(a, t);
}

// ---- *_like: the input's shape, dtype and device unless given
Value impl_full_like(Args& a, Runtime& rt) {
  Tensor src = a.tensor("input");
  return T(with_preserved_format(filled(a, rt, src->sizes, fill_number(a, "fill_value"), creation_dtype(a, src->dtype()), device_name(src)).t, src));
}
Value impl_empty_like(Args& a, Runtime& rt) {
  Tensor src = a.tensor("input");
  return T(with_preserved_format(filled(a, rt, src->sizes, 0.0, creation_dtype(a, src->dtype()), device_name(src)).t, src));
}

// ---- random creators
double standard_normal(SplitMix64& gen) {
  const double u1 = gen.uniform01_open_below();
  const double u2 = gen.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos((2.0 * kPi) * u2);
}

// rand / randn on a non-floating dtype: PyTorch's kernel error (measured).
void require_floating(DType d, const char* kernel) {
  if (!is_floating(d))
    throw ScenarioError("dtype_mismatch", std::string("\"") + kernel + "\" not implemented for '" +
                                              (d == DType::Bool ? "Bool" : "Long") + "'");
}

template <bool Normal>
Value random_tensor(Args& a, Runtime& rt, const Shape& shape, DType dtype, const std::string& fallback_device) {
  require_floating(dtype, Normal ? "normal_kernel_cpu" : "check_uniform_bounds");
  SplitMix64& gen = rt.generator();
  Tensor t = make_tensor(shape, dtype, creation_device(a, rt, fallback_device), 0.0,
                         [&] { return Normal ? standard_normal(gen) : gen.uniform01(); });
  return finish_creation(a, t);
}
Value impl_rand(Args& a, Runtime& rt) {
  return random_tensor<false>(a, rt, checked_size(a.shape("size")), creation_dtype(a, DType::Float32), "cpu");
}
Value impl_randn(Args& a, Runtime& rt) {
  return random_tensor<true>(a, rt, checked_size(a.shape("size")), creation_dtype(a, DType::Float32), "cpu");
}
Value impl_rand_like(Args& a, Runtime& rt) {
  Tensor src = a.tensor("input");
  return T(with_preserved_format(random_tensor<false>(a, rt, src->sizes, creation_dtype(a, src->dtype()), device_name(src)).t, src));
}
Value impl_randn_like(Args& a, Runtime& rt) {
  Tensor src = a.tensor("input");
  return T(with_preserved_format(random_tensor<true>(a, rt, src->sizes, creation_dtype(a, src->dtype()), device_name(src)).t, src));
}

// torch.randint(high, size) / randint(low, high, size), int64 unless dtype= says otherwise.
Value impl_randint(Args& a, Runtime& rt) {
  const Value& args = a.get("args");
  if (args.items.size() != 2 && args.items.size() != 3)
    type_error("randint() received an invalid combination of arguments - got " +
               std::to_string(args.items.size()) + " positional arguments");
  const bool has_low = args.items.size() == 3;
  auto bound = [&](const Value& v) {
    if (v.kind != Value::Kind::Int) type_error("randint(): argument 'high' must be int, not " + type_name(v));
    return v.i;
  };
  const int64_t low = has_low ? bound(args.items[0]) : 0;
  const int64_t high = bound(args.items[has_low ? 1 : 0]);
  const Value& size = args.items.back();
  if (size.kind != Value::Kind::Tuple && size.kind != Value::Kind::List && size.kind != Value::Kind::Size)
    type_error("randint(): argument 'size' must be tuple of ints, not " + type_name(size));
  std::vector<int64_t> dims;
  for (const Value& d : size.kind == Value::Kind::Size ? std::vector<Value>{} : size.items) dims.push_back(bound(d));
  if (size.kind == Value::Kind::Size) dims.assign(size.size.begin(), size.size.end());
  if (low >= high)
    throw ScenarioError("type_error", "random_ expects 'from' to be less than 'to', but got from=" +
                                          std::to_string(low) + " >= to=" + std::to_string(high));
  SplitMix64& gen = rt.generator();
  const double lo = static_cast<double>(low), hi = static_cast<double>(high);
  Tensor t = make_tensor(checked_size(dims), creation_dtype(a, DType::Int64), creation_device(a, rt, "cpu"), 0.0, [&] {
    const double v = lo + std::floor(gen.uniform01() * (hi - lo));
    return v >= hi ? hi - 1 : v;
  });
  return finish_creation(a, t);
}

Value impl_randperm(Args& a, Runtime& rt) {
  const int64_t n = a.integer("n");
  if (n < 0)
    throw ScenarioError("shape_mismatch", "Trying to create tensor with negative dimension " + std::to_string(n) +
                                              ": [" + std::to_string(n) + "]");
  std::vector<double> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = static_cast<double>(i);
  const std::string device = creation_device(a, rt, "cpu");
  if (device != "meta") {
    SplitMix64& gen = rt.generator();
    for (int64_t i = n - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(std::floor(gen.uniform01() * static_cast<double>(i + 1)));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
  }
  size_t next = 0;
  Tensor t = make_tensor(Shape{n}, creation_dtype(a, DType::Int64), device, 0.0, [&] { return perm[next++]; });
  return finish_creation(a, t);
}

}  // namespace

std::vector<OpEntry> creation_ops() {
  const std::string none = "-";
  const std::string kw = "dtype=None, device=None, requires_grad=False";
  return {
      {"arange", {"torch.arange"}, "(*args, " + kw + ")", "creation", none,
       "(end), (start, end), (start, end, step); int64 from integers, float32 when any bound is a float", impl_arange,
       {}},
      {"full", {"torch.full"}, "(size, fill_value, *, " + kw + ")", "creation", none,
       "dtype from the fill value: bool, int64 or float32", impl_full, {}},
      {"empty", {"torch.empty"}, "(*size, " + kw + ")", "creation", none,
       "elements undefined in PyTorch; agtrace's are zeros", impl_empty, {}},
      {"new_zeros", {"Tensor.new_zeros"}, "(self, *size, " + kw + ")", "creation", none, "self's dtype and device",
       impl_new_zeros, {}},
      {"new_ones", {"Tensor.new_ones"}, "(self, *size, " + kw + ")", "creation", none, "self's dtype and device",
       impl_new_ones, {}},
      {"new_empty", {"Tensor.new_empty"}, "(self, *size, " + kw + ")", "creation", none,
       "self's dtype and device; zeros (undefined in PyTorch)", impl_new_zeros, {}},
      {"new_full", {"Tensor.new_full"}, "(self, size, fill_value, *, " + kw + ")", "creation", none,
       "self's dtype and device (the fill value is cast)", impl_new_full, {}},
      {"new_tensor", {"Tensor.new_tensor"}, "(self, data, *, " + kw + ")", "creation", none,
       "self's dtype and device whatever the data hold", impl_new_tensor, {}},
      {"full_like", {"torch.full_like"}, "(input, fill_value, *, " + kw + ")", "creation", none,
       "input's shape, dtype and device", impl_full_like, {}},
      {"empty_like", {"torch.empty_like"}, "(input, *, " + kw + ")", "creation", none,
       "input's shape, dtype and device; zeros (undefined in PyTorch)", impl_empty_like, {}},
      {"rand_like", {"torch.rand_like"}, "(input, *, " + kw + ")", "creation", none,
       "uniform [0, 1) from agtrace's generator; floating dtypes only", impl_rand_like, {}},
      {"randn_like", {"torch.randn_like"}, "(input, *, " + kw + ")", "creation", none,
       "standard normal from agtrace's generator; floating dtypes only", impl_randn_like, {}},
      {"rand", {"torch.rand"}, "(*size, " + kw + ")", "creation", none,
       "uniform [0, 1) from agtrace's generator (not PyTorch's values)", impl_rand, {}},
      {"randn", {"torch.randn"}, "(*size, " + kw + ")", "creation", none,
       "standard normal from agtrace's generator (not PyTorch's values)", impl_randn, {}},
      {"randint", {"torch.randint"}, "(*args, " + kw + ")", "creation", none,
       "(high, size) or (low, high, size): int64 in [low, high) from agtrace's generator", impl_randint, {}},
      {"randperm", {"torch.randperm"}, "(n, *, dtype=None, device=None, requires_grad=False)", "creation", none,
       "a permutation of 0..n-1 (int64) from agtrace's generator", impl_randperm, {}},
  };
}

}  // namespace agtrace::ops
