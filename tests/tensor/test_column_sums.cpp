// Sums over leading dims of contiguous float32 tensors (x.sum(0), a bias gradient's sum over
// batch and tokens) bit for bit as torch 1.13 computes them on the CPU: each column in
// cascade_sum's float order (tensor/column_sums_f32.hpp). The references are hashes of
// torch's results made by tests/tools/sum_cpu_reference.py, whose inputs (integers over 63
// times powers of two, in double, rounded to float32) this test rebuilds exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/kernel_settings.hpp"
#include "support/value_hash.hpp"

#include "tensor/column_sums_f32.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
namespace kernels = agtrace::kernels;

namespace {

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
  uint64_t hash;
};

Tensor inputs(const Shape& shape) {
  const int64_t n = agtrace::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double scale = std::ldexp(1.0, static_cast<int>((7 * i) % 13) - 6);
    v[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>((37 * i + 11) % 1009 - 504) / 63 * scale);
  }
  return agtrace::tensor_from_values(shape, DType::Float32, v);
}

}  // namespace

TEST_CASE("sum over leading dims of contiguous float32 gives torch 1.13's bits", "[kernels][reduce][fidelity]") {
  // Printed by tests/tools/sum_cpu_reference.py (torch 1.13 on the CPU; one and two threads
  // give the same results there).
  const std::vector<Case> cases = {
      {{5, 10}, {0}, 0x5623978c6cfb416dull},
      {{16, 32}, {0}, 0x94f2b512b9ef2934ull},
      {{17, 100}, {0}, 0x0fbc44139f15c647ull},
      {{512, 384}, {0}, 0x1b0d96cb2fe5b8b3ull},
      {{1000, 45}, {0}, 0x2144823ee7850518ull},
      {{33, 7}, {0}, 0x750457f487a1166aull},
      {{100, 3}, {0}, 0x2279a40c6686044full},
      {{64, 4}, {0}, 0xd8672d1ff1431a43ull},
      {{9, 5}, {0}, 0x5308c414aa8fffc6ull},
      {{3, 40}, {0}, 0x1094f51a87dabdbcull},
      {{1, 12}, {0}, 0x3850fbb552edbc8eull},
      {{4, 100, 96}, {0, 1}, 0x74954f00e6180d6bull},
      {{8, 64, 65}, {0, 1}, 0x7d44a9ec91b06e6cull},
      {{2, 3, 50}, {0}, 0x0c017777fa78b9bcull},
      {{1048637, 4}, {0}, 0x3b4fd4069f22b00full},
      {{4194319, 2}, {0}, 0x422dbadad3f18de7ull},
  };
  // The float32 path, on one thread or with the columns split between two, and the general
  // path (fast paths off) give the same bits.
  const bool fast = GENERATE(true, false);
  const int threads = GENERATE(1, 2);
  agtrace::test::FastPathsFor paths(fast);
  agtrace::test::ThreadsFor split(threads);
  for (const Case& c : cases) {
    INFO("shape " << agtrace::shape_str(c.shape) << ", fast paths " << fast << ", threads " << threads);
    Tensor x = inputs(c.shape);
    CHECK(agtrace::test::fnv(kernels::sum(x, c.dims, false, DType::Float32)) == c.hash);
  }
}

TEST_CASE("a bias gradient's sum_to takes the column order", "[kernels][reduce][fidelity]") {
  // sum_to of a [4, 100, 96] gradient to a [96] bias (F.linear on a batch of token rows) is
  // the sum over dims 0 and 1 above.
  Tensor g = inputs({4, 100, 96});
  CHECK(agtrace::test::fnv(kernels::sum_to(g, {96})) == 0x74954f00e6180d6bull);
  // A [1, 96] target keeps the leading dim: the same sums.
  CHECK(agtrace::test::fnv(kernels::sum_to(g, {1, 96})) == 0x74954f00e6180d6bull);
}

TEST_CASE("column_sums_f32 gives each column the same bits whatever the range asked for", "[kernels][reduce]") {
  // Threads ask for arbitrary column ranges: every split of 100 columns (three whole groups
  // of 32 and a row_sum tail of 4) gives the full call's bits.
  Tensor x = inputs({37, 100});
  const float* xf = x->storage->f32();
  std::vector<float> whole(100);
  kernels::column_sums_f32(xf, 37, 100, 0, 100, whole.data());
  for (int64_t begin : {0, 1, 31, 32, 33, 95, 96, 97}) {
    for (int64_t end : {begin + 1, begin + 3, int64_t{64}, int64_t{99}, int64_t{100}}) {
      if (end <= begin || end > 100) continue;
      std::vector<float> part(static_cast<size_t>(end - begin));
      kernels::column_sums_f32(xf, 37, 100, begin, end, part.data());
      for (int64_t j = begin; j < end; ++j) {
        INFO("columns [" << begin << ", " << end << "), column " << j);
        CHECK(std::memcmp(&part[static_cast<size_t>(j - begin)], &whole[static_cast<size_t>(j)], sizeof(float)) == 0);
      }
    }
  }
}
