// kernels::gemm against a plain triple loop, for every operand layout the ops hand it
// (row-major, transposed views, broadcast rows, offsets) and each dtype's precision.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "tensor/kernels.hpp"

using agtrace::DType;
using agtrace::kernels::MatrixRef;

namespace {

double at(const MatrixRef& x, int64_t i, int64_t j) { return x.data[x.offset + i * x.row_stride + j * x.col_stride]; }

std::vector<double> reference(const MatrixRef& a, const MatrixRef& b, int64_t n, int64_t k, int64_t m) {
  std::vector<double> out(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t p = 0; p < k; ++p) out[static_cast<size_t>(i * m + j)] += at(a, i, p) * at(b, p, j);
  return out;
}

std::vector<double> storage(size_t n, double scale) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<float>(std::sin(scale * (i + 1))));
  return v;
}

}  // namespace

TEST_CASE("gemm: every layout matches the triple loop", "[tensor][gemm]") {
  const int64_t n = 37, k = 53, m = 29;
  const std::vector<double> sa = storage(static_cast<size_t>(2 + n * k), 0.37), sb = storage(static_cast<size_t>(3 + k * m), 0.11);
  struct Layout {
    const char* what;
    MatrixRef a, b;
  } layouts[] = {
      {"row-major", {sa.data(), 2, k, 1}, {sb.data(), 3, m, 1}},
      {"a transposed", {sa.data(), 2, 1, n}, {sb.data(), 3, m, 1}},
      {"b transposed", {sa.data(), 2, k, 1}, {sb.data(), 3, 1, k}},
      {"both transposed", {sa.data(), 2, 1, n}, {sb.data(), 3, 1, k}},
      {"b rows broadcast (stride 0)", {sa.data(), 2, k, 1}, {sb.data(), 3, 0, 1}},
  };
  for (const Layout& l : layouts) {
    INFO(l.what);
    const std::vector<double> want = reference(l.a, l.b, n, k, m);
    std::vector<double> f64(static_cast<size_t>(n * m)), f32(f64.size());
    agtrace::kernels::gemm(DType::Float64, l.a, l.b, n, k, m, f64.data());
    agtrace::kernels::gemm(DType::Float32, l.a, l.b, n, k, m, f32.data());
    for (size_t i = 0; i < want.size(); ++i) {
      // float64: only the summation order may differ from the loop.
      CHECK(std::abs(f64[i] - want[i]) <= 1e-12 * (1 + std::abs(want[i])));
      // float32: float products and sums, as PyTorch's sgemm; the result is a float.
      CHECK(f32[i] == static_cast<double>(static_cast<float>(f32[i])));
      CHECK(std::abs(f32[i] - want[i]) <= 1e-5 * k);
    }
  }
}

TEST_CASE("gemm: integers are exact, empty inner dimension gives zeros", "[tensor][gemm]") {
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<double> out(4, -1.0);
  agtrace::kernels::gemm(DType::Int64, {a.data(), 0, 3, 1}, {b.data(), 0, 2, 1}, 2, 3, 2, out.data());
  CHECK(out == std::vector<double>{58, 64, 139, 154});
  agtrace::kernels::gemm(DType::Float32, {a.data(), 0, 0, 1}, {b.data(), 0, 2, 1}, 2, 0, 2, out.data());
  CHECK(out == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("gemm: a given thread count always gives the same result", "[tensor][gemm][threads]") {
  const int64_t n = 300, k = 200, m = 260;
  const std::vector<double> sa = storage(static_cast<size_t>(n * k), 0.7), sb = storage(static_cast<size_t>(k * m), 0.3);
  std::vector<double> one(static_cast<size_t>(n * m)), first(one.size()), again(one.size());
  agtrace::kernels::set_threads(1);
  agtrace::kernels::gemm(DType::Float32, {sa.data(), 0, k, 1}, {sb.data(), 0, m, 1}, n, k, m, one.data());
  agtrace::kernels::set_threads(2);
  agtrace::kernels::gemm(DType::Float32, {sa.data(), 0, k, 1}, {sb.data(), 0, m, 1}, n, k, m, first.data());
  agtrace::kernels::gemm(DType::Float32, {sa.data(), 0, k, 1}, {sb.data(), 0, m, 1}, n, k, m, again.data());
  agtrace::kernels::set_threads(1);
  CHECK(first == again);
  // Another thread count: the same products up to float rounding.
  for (size_t i = 0; i < one.size(); ++i) CHECK(std::abs(one[i] - first[i]) <= 1e-5 * (1 + std::abs(one[i])));
}

TEST_CASE("gemm_storage: float32 storages read in place give the packed copies' exact results",
          "[tensor][gemm]") {
  // sgemm on the storage itself (another leading dimension) or on packed float copies
  // (today's gemm over double values): the same call on the same floats, so every result
  // bit must agree, for every layout mm and bmm hand over.
  using agtrace::Storage;
  const int64_t n = 19, k = 23, m = 17, wide = 31;
  const std::vector<double> va = storage(static_cast<size_t>(wide * wide + 5), 0.37),
                            vb = storage(static_cast<size_t>(wide * wide + 7), 0.11);
  for (DType d : {DType::Float32, DType::Float64}) {
    Storage sa(d, static_cast<int64_t>(va.size()), false), sb(d, static_cast<int64_t>(vb.size()), false);
    for (size_t i = 0; i < va.size(); ++i) sa.set(static_cast<int64_t>(i), va[i]);
    for (size_t i = 0; i < vb.size(); ++i) sb.set(static_cast<int64_t>(i), vb[i]);
    REQUIRE(sa.holds_float() == (d == DType::Float32));
    struct Layout {
      const char* what;
      int64_t ao, ar, ac, bo, br, bc, n, k, m;
    } layouts[] = {
        {"contiguous", 2, k, 1, 3, m, 1, n, k, m},
        {"row blocks of wider matrices", 2, wide, 1, 3, wide, 1, n, k, m},
        {"transposed", 2, 1, n, 3, 1, k, n, k, m},
        {"transposed blocks of wider matrices", 2, 1, wide, 3, 1, wide, n, k, m},
        {"strided columns (packed)", 2, 2 * k, 2, 3, m, 1, n, k, m},
        {"broadcast rows (packed)", 2, 0, 1, 3, 0, 1, n, k, m},
        {"one row", 4, 999, 1, 3, wide, 1, 1, k, m},
        {"one column", 2, wide, 1, 5, 3, 999, n, k, 1},
        {"vector times vector", 2, 7, 1, 3, 1, 1, 1, k, 1},
        {"outer product", 2, 2, 0, 3, 0, 1, n, 1, m},
    };
    for (const Layout& l : layouts) {
      INFO(agtrace::dtype_name(d) << ": " << l.what);
      const int64_t cells = l.n * l.m;
      Storage out(d, cells + 3, false);
      agtrace::kernels::gemm_storage(d, {&sa, l.ao, l.ar, l.ac}, {&sb, l.bo, l.br, l.bc}, l.n, l.k, l.m, out, 3);
      std::vector<double> want(static_cast<size_t>(cells));
      agtrace::kernels::gemm(d, {va.data(), l.ao, l.ar, l.ac}, {vb.data(), l.bo, l.br, l.bc}, l.n, l.k, l.m,
                             want.data());
      for (int64_t i = 0; i < cells; ++i) CHECK(out.get(3 + i) == want[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < 3; ++i) CHECK(out.get(i) == 0.0);  // nothing written before out_offset
    }
  }
}

TEST_CASE("gemm_storage_batched: a batch shared between threads gives the 1-thread products bit for bit",
          "[tensor][gemm][threads]") {
  // bmm at 2 threads computes each product on one thread (PyTorch's parallel_for over the
  // batch) when there are at least 2: the products must be the ones a 1-thread run
  // computes, and BLAS must be back on its threads afterwards.
  using agtrace::Storage;
  const int64_t n = 128, k = 64, m = 96;
  for (int64_t batches : {int64_t{1}, int64_t{5}, int64_t{16}}) {
    INFO("batches " << batches);
    Storage sa(DType::Float32, batches * n * k + 2, false), sb(DType::Float32, batches * k * m + 3, false);
    const std::vector<double> va = storage(static_cast<size_t>(sa.numel), 0.29), vb = storage(static_cast<size_t>(sb.numel), 0.13);
    for (int64_t i = 0; i < sa.numel; ++i) sa.set(i, va[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < sb.numel; ++i) sb.set(i, vb[static_cast<size_t>(i)]);
    // b read transposed (column stride k), as BmmBackward0 reads self.transpose(1, 2).
    const agtrace::kernels::StorageMatrix a{&sa, 2, k, 1}, b{&sb, 3, 1, k};
    Storage one(DType::Float32, batches * n * m, false), two(DType::Float32, batches * n * m, false);
    // Fewer products than threads: each on BLAS's 2 threads, as mm at 2 threads (whose
    // rounding differs from 1 thread's in a few percent of the elements at this size).
    agtrace::kernels::set_threads(batches < 2 ? 2 : 1);
    for (int64_t i = 0; i < batches; ++i)
      agtrace::kernels::gemm_storage(DType::Float32, {&sa, 2 + i * n * k, k, 1}, {&sb, 3 + i * k * m, 1, k}, n, k, m,
                                     one, i * n * m);
    agtrace::kernels::set_threads(2);
    agtrace::kernels::gemm_storage_batched(DType::Float32, a, n * k, b, k * m, batches, n, k, m, two, 0);
    agtrace::kernels::set_threads(1);
    int64_t differ = 0;
    for (int64_t i = 0; i < batches * n * m; ++i) differ += one.get(i) != two.get(i);
    CHECK(differ == 0);
  }
  // BLAS is on 2 threads again after a shared-out batch (the batch sets it to 1 while its
  // products run; the bit-for-bit check above is what shows they ran on one thread each).
  Storage s1(DType::Float32, 16 * 8 * 8, false), s2(DType::Float32, 16 * 8 * 8, false), so(DType::Float32, 16 * 8 * 8, false);
  agtrace::kernels::set_threads(2);
  REQUIRE(agtrace::kernels::blas_threads() == 2);
  agtrace::kernels::gemm_storage_batched(DType::Float32, {&s1, 0, 8, 1}, 64, {&s2, 0, 8, 1}, 64, 16, 8, 8, 8, so, 0);
  CHECK(agtrace::kernels::blas_threads() == 2);
  agtrace::kernels::set_threads(1);
  CHECK(agtrace::kernels::blas_threads() == 1);
}
