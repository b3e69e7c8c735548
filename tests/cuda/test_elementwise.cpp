// Elementwise kernels against agtrace's CPU kernels (kernels::unary/binary/ternary/cast)
// evaluating the same formulas (lib/cuda/pointwise_formulas.hpp) on the host, in float for
// float32/float16/bfloat16 and in double for float64, as the device does.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "cuda/elementwise.cuh"
#include "cuda/runtime.hpp"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using agtrace::test::check_close;
using agtrace::test::fresh;
using agtrace::test::fresh_transposed;

namespace {

bool in_double(DType d) { return d == DType::Float64 || d == DType::Int64; }

// Inputs of every op in its domain: positive where log, sqrt, rsqrt, pow or a quotient's
// derivative need it.
bool positive_domain(pw::UnaryOp op) {
  return op == pw::UnaryOp::Log || op == pw::UnaryOp::Sqrt || op == pw::UnaryOp::Rsqrt ||
         op == pw::UnaryOp::PowScalar;
}
bool positive_domain(pw::BinaryOp op) {
  return op == pw::BinaryOp::Pow || op == pw::BinaryOp::LogBackward || op == pw::BinaryOp::SqrtBackward ||
         op == pw::BinaryOp::PowScalarBackward;
}

Tensor device_result(const Shape& shape, DType dtype, const std::function<void(const DeviceTensorRef&)>& run) {
  DeviceTensor out = device_empty(shape, dtype, "test");
  run(out.ref);
  return download(out.ref);
}

std::string label(const char* op, DType d, const char* layout) {
  return std::string(op) + " " + dtype_name(d) + " " + layout;
}

}  // namespace

TEST_CASE("CUDA unary ops match the CPU formula", "[cuda][elementwise]") {
  for (int k = 0; k < static_cast<int>(pw::UnaryOp::Count); ++k) {
    const auto op = static_cast<pw::UnaryOp>(k);
    double s0 = 0.0, s1 = 0.0;
    if (op == pw::UnaryOp::PowScalar) s0 = 2.5;
    if (op == pw::UnaryOp::LeakyRelu) s0 = 0.02;
    if (op == pw::UnaryOp::Clamp) s0 = -0.5, s1 = 0.75;
    if (op == pw::UnaryOp::AddScalar || op == pw::UnaryOp::MulScalar || op == pw::UnaryOp::DivScalar) s0 = 3.0;
    const double lo = positive_domain(op) ? 0.1 : -2.0;
    for (DType d : test::float_dtypes()) {
      auto ref = [&](double x) {
        return in_double(d) ? pw::unary_formula<double>(op, x, s0, s1)
                            : pw::unary_formula<float>(op, static_cast<float>(x), static_cast<float>(s0),
                                                       static_cast<float>(s1));
      };
      for (bool transposed : {false, true}) {
        Tensor in = transposed ? fresh_transposed({4, 3}, d, lo, 2.0) : fresh({3, 4}, d, lo, 2.0);
        DeviceTensor din = upload(in);
        Tensor got = device_result(in->sizes, d, [&](const DeviceTensorRef& o) { unary(op, o, din.ref, s0, s1); });
        check_close(got, kernels::unary(in, d, ref), label(pw::op_name(op), d, transposed ? "transposed" : "contiguous"));
      }
    }
  }
}

TEST_CASE("CUDA binary ops broadcast and match the CPU formula", "[cuda][elementwise]") {
  for (int k = 0; k < static_cast<int>(pw::BinaryOp::Count); ++k) {
    const auto op = static_cast<pw::BinaryOp>(k);
    const bool compare = op >= pw::BinaryOp::Eq && op <= pw::BinaryOp::Ge;
    double s0 = 1.0;
    if (op == pw::BinaryOp::Add || op == pw::BinaryOp::Sub) s0 = 0.5;
    if (op == pw::BinaryOp::PowScalarBackward) s0 = 2.5;
    if (op == pw::BinaryOp::LeakyReluBackward) s0 = 0.02;
    const double lo = positive_domain(op) ? 0.1 : -2.0;
    for (DType d : test::float_dtypes()) {
      const DType out_dtype = compare ? DType::Bool : d;
      auto ref = [&](double x, double y) {
        return in_double(d) ? pw::binary_formula<double>(op, x, y, s0)
                            : pw::binary_formula<float>(op, static_cast<float>(x), static_cast<float>(y),
                                                        static_cast<float>(s0));
      };
      // [3, 1, 4] with [5, 4] (transposed storage) -> [3, 5, 4]; then both [2, 3], with ties
      // for the comparisons (b is a with a few elements changed).
      Tensor a = fresh({3, 1, 4}, d, lo, 2.0, 0.13);
      Tensor b = fresh_transposed({5, 4}, d, lo, 2.0, 0.71);
      DeviceTensor da = upload(a), db = upload(b);
      Tensor got = device_result({3, 5, 4}, out_dtype, [&](const DeviceTensorRef& o) { binary(op, o, da.ref, db.ref, s0); });
      check_close(got, kernels::binary(a, b, out_dtype, ref, "test"), label(pw::op_name(op), d, "broadcast"));

      Tensor c = fresh({2, 3}, d, lo, 2.0, 0.29);
      std::vector<double> tv = to_values(c);
      tv[1] += 0.5;
      tv[4] -= 0.25;
      Tensor e = tensor_from_values({2, 3}, d, tv);
      DeviceTensor dc = upload(c), de = upload(e);
      Tensor got2 = device_result({2, 3}, out_dtype, [&](const DeviceTensorRef& o) { binary(op, o, dc.ref, de.ref, s0); });
      check_close(got2, kernels::binary(c, e, out_dtype, ref, "test"), label(pw::op_name(op), d, "ties"));
    }
  }
}

TEST_CASE("CUDA ternary ops broadcast and match the CPU formula", "[cuda][elementwise]") {
  for (int k = 0; k < static_cast<int>(pw::TernaryOp::Count); ++k) {
    const auto op = static_cast<pw::TernaryOp>(k);
    const double s0 = -0.5, s1 = 0.75;  // clamp_backward's bounds
    const bool positive = op == pw::TernaryOp::PowBackwardSelf || op == pw::TernaryOp::PowBackwardExponent;
    const double lo = positive ? 0.1 : -2.0;
    for (DType d : test::float_dtypes()) {
      auto ref = [&](double x, double y, double z) {
        return in_double(d) ? pw::ternary_formula<double>(op, x, y, z, s0, s1)
                            : pw::ternary_formula<float>(op, static_cast<float>(x), static_cast<float>(y),
                                                         static_cast<float>(z), static_cast<float>(s0),
                                                         static_cast<float>(s1));
      };
      Tensor a = op == pw::TernaryOp::Where ? tensor_from_values({3, 1}, DType::Bool, {1, 0, 1}) : fresh({3, 1}, d, -2.0, 2.0, 0.19);
      Tensor b = fresh_transposed({3, 4}, d, lo, 2.0, 0.53);
      // c: b's values where the column is even (ties for maximum/minimum), others fresh.
      std::vector<double> bv = to_values(b), cv = to_values(fresh({3, 4}, d, lo, 2.0, 0.83));
      for (size_t i = 0; i < cv.size(); i += 2) cv[i] = bv[i];
      Tensor c = tensor_from_values({3, 4}, d, cv);
      DeviceTensor da = upload(a), db = upload(b), dc = upload(c);
      Tensor got = device_result({3, 4}, d, [&](const DeviceTensorRef& o) { ternary(op, o, da.ref, db.ref, dc.ref, s0, s1); });
      check_close(got, kernels::ternary(a, b, c, d, ref, "test"), label(pw::op_name(op), d, "broadcast"));
    }
  }
}

TEST_CASE("CUDA copy casts between every pair of dtypes and broadcasts", "[cuda][elementwise]") {
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Bool};
  for (DType from : all) {
    Tensor src = fresh_transposed({4, 3}, from, -20.0, 20.0);
    DeviceTensor dsrc = upload(src);
    for (DType to : all) {
      Tensor got = device_result({4, 3}, to, [&](const DeviceTensorRef& o) { copy(o, dsrc.ref); });
      // Casting an already rounded value: float16/bfloat16 results may be one rounding step
      // apart from a direct double rounding (float64 goes through float, as c10::Half does).
      check_close(got, kernels::cast(src, to), dtype_name(from) + " -> " + dtype_name(to));
    }
    // [1, 3] broadcast into [4, 3]
    Tensor row = fresh({1, 3}, from, -20.0, 20.0, 0.61);
    DeviceTensor drow = upload(row);
    Tensor got = device_result({4, 3}, from, [&](const DeviceTensorRef& o) { copy(o, drow.ref); });
    Tensor want = kernels::binary(kernels::full({4, 3}, 0.0, from, false), row, from,
                                  [](double, double y) { return y; }, "test");
    check_close(got, want, "broadcast copy " + dtype_name(from));
  }
}

TEST_CASE("CUDA fill writes only the view's elements", "[cuda][elementwise]") {
  for (DType d : {DType::Float32, DType::Float64, DType::Int64}) {
    Tensor base = fresh({20}, d, 1.0, 5.0);
    Tensor view = make_alias(base, {3, 2}, {1, 6}, 2);  // a transposed window
    DeviceTensor dv = upload(view);
    fill(dv.ref, -7.0);
    Tensor whole = download(DeviceTensorRef{dv.storage.get(), d, {20}, {1}, 0});
    write_values(view, std::vector<double>(6, -7.0));  // the same on the CPU
    check_close(whole, kernels::copy(base), "fill " + dtype_name(d));
  }
}

TEST_CASE("CUDA elementwise errors name the operation", "[cuda][elementwise]") {
  Tensor a = fresh({3, 4}, DType::Float32), b = fresh({5}, DType::Float32);
  DeviceTensor da = upload(a), db = upload(b);
  DeviceTensor out = device_empty({3, 4}, DType::Float32, "test");
  try {
    binary(pw::BinaryOp::Mul, out.ref, da.ref, db.ref);
    FAIL("[3, 4] * [5] did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("mul") != std::string::npos);
  }
  DeviceTensor big = device_empty(Shape(9, 1), DType::Float32, "test");
  CHECK_THROWS_AS(unary(pw::UnaryOp::Exp, big.ref, big.ref), CudaError);
}
