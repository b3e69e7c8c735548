// copy_values (lib/tensor/tensor.cpp): the typed element copy that cat, stack, index_select,
// copy_ and the view gradients use, against its definition, write_values(dst, to_values(src)),
// bit for bit: every dtype, contiguous and strided on either side, one storage copied onto
// itself through overlapping views, empty tensors, and a dtype change (which goes through
// doubles). Then the ops that use it, against the same definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/shapes.hpp"
#include "tensor/dtype.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
namespace ops = agtrace::ops;

namespace {

// Values with the awkward ones mixed in; each is rounded to the dtype by tensor_from_values.
std::vector<double> mixed_values(int64_t n, uint64_t seed) {
  const double odd[] = {0.0, -0.0, std::numeric_limits<double>::infinity(), -1e-40, 65504.0, 1.0 / 3.0, -7.0};
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v[static_cast<size_t>(i)] = static_cast<double>(static_cast<int64_t>(s >> 40) - (1 << 23)) / 4096.0;
    if ((s >> 13) % 5 == 0) v[static_cast<size_t>(i)] = odd[(s >> 21) % 7];
  }
  return v;
}

std::vector<uint64_t> storage_bits(const Tensor& t) {
  // The whole storage, so a write outside the destination's elements shows too.
  Tensor whole = agtrace::make_alias(t, {t->storage->numel}, {1}, 0);
  std::vector<uint64_t> out;
  for (double v : agtrace::to_values(whole)) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  return out;
}

Tensor transposed(const Tensor& t) { return agtrace::make_alias(t, {t->sizes[1], t->sizes[0]}, {t->strides[1], t->strides[0]}, t->offset); }

}  // namespace

TEST_CASE("copy_values: the typed copy gives write_values(dst, to_values(src))'s bits", "[tensor][copy_values]") {
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Bool};
  for (DType dst_dtype : dtypes)
    for (DType src_dtype : {dst_dtype, DType::Float32}) {
      // bit 0: src transposed, bit 1: dst transposed, bit 2: src a window of a bigger
      // storage (rows of stride 1 that are not contiguous, copied a row at a time).
      for (int layout = 0; layout < 8; ++layout) {
        INFO(agtrace::dtype_name(dst_dtype) << " <- " << agtrace::dtype_name(src_dtype) << ", layout " << layout);
        const bool src_t = (layout & 1) != 0, dst_t = (layout & 2) != 0, src_window = (layout & 4) != 0;
        Tensor src_base = agtrace::tensor_from_values(src_t ? Shape{5, 7} : Shape{7, 5}, src_dtype, mixed_values(35, 3));
        if (src_window) {
          Tensor bigger = agtrace::tensor_from_values(src_t ? Shape{6, 9} : Shape{8, 6}, src_dtype, mixed_values(54, 4));
          src_base = src_t ? agtrace::make_alias(bigger, {5, 7}, {9, 1}, 11) : agtrace::make_alias(bigger, {7, 5}, {6, 1}, 7);
        }
        Tensor src = src_t ? transposed(src_base) : src_base;
        // The destination is a window in a bigger storage: [1:6, 1:8] of [7, 9] (or its
        // transpose), so the elements around it must stay.
        auto make_dst = [&] {
          Tensor big = agtrace::tensor_from_values({7, 9}, dst_dtype, mixed_values(63, 11));
          Tensor window = agtrace::make_alias(big, {5, 7}, {9, 1}, 10);
          if (!dst_t) window = agtrace::make_alias(big, {7, 5}, {9, 1}, 1);
          return dst_t ? transposed(window) : window;
        };
        Tensor by_copy = make_dst(), by_definition = make_dst();
        REQUIRE(by_copy->sizes == src->sizes);
        agtrace::copy_values(by_copy, src);
        agtrace::write_values(by_definition, agtrace::to_values(src));
        CHECK(storage_bits(by_copy) == storage_bits(by_definition));
      }
    }
}

TEST_CASE("copy_values: overlapping views of one storage copy as a snapshot of the source", "[tensor][copy_values]") {
  struct View {
    Shape sizes, strides;
    int64_t offset;
  };
  // Copies src onto dst, both views of one n-element storage; returns the storage's bits.
  auto copy_within = [](DType dtype, int64_t n, const View& dst_view, const View& src_view, bool typed) {
    Tensor base = agtrace::tensor_from_values({n}, dtype, mixed_values(n, 5));
    Tensor dst = agtrace::make_alias(base, dst_view.sizes, dst_view.strides, dst_view.offset);
    Tensor src = agtrace::make_alias(base, src_view.sizes, src_view.strides, src_view.offset);
    if (typed) agtrace::copy_values(dst, src);
    else agtrace::write_values(dst, agtrace::to_values(src));
    return storage_bits(base);
  };
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    INFO(agtrace::dtype_name(dtype));
    // dst = elements 1..12, src = elements 0..11: an element-by-element forward copy would
    // smear element 0 over the whole window.
    const View shifted{{3, 4}, {4, 1}, 1}, unshifted{{3, 4}, {4, 1}, 0};
    CHECK(copy_within(dtype, 13, shifted, unshifted, true) == copy_within(dtype, 13, shifted, unshifted, false));
    // A storage copied onto itself through its transpose.
    const View rows{{4, 4}, {4, 1}, 0}, columns{{4, 4}, {1, 4}, 0};
    CHECK(copy_within(dtype, 16, rows, columns, true) == copy_within(dtype, 16, rows, columns, false));
  }
}

TEST_CASE("copy_values: empty tensors copy nothing", "[tensor][copy_values]") {
  // An empty window inside a non-empty storage: the storage around it must stay as it was.
  Tensor big = agtrace::tensor_from_values({9}, DType::Float32, mixed_values(9, 7));
  const std::vector<uint64_t> before = storage_bits(big);
  Tensor dst = agtrace::make_alias(big, {0, 3}, {3, 1}, 2);
  Tensor src = agtrace::tensor_from_values({0, 3}, DType::Float32, {});
  agtrace::copy_values(dst, src);
  CHECK(storage_bits(big) == before);
}

TEST_CASE("cat, stack and index_select keep each element's bits in every dtype", "[tensor][copy_values]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64}) {
    INFO(agtrace::dtype_name(dtype));
    Tensor a = agtrace::tensor_from_values({4, 3}, dtype, mixed_values(12, 1));
    Tensor b_base = agtrace::tensor_from_values({3, 4}, dtype, mixed_values(12, 2));
    Tensor b = transposed(b_base);  // strided input
    const std::vector<double> av = agtrace::to_values(a), bv = agtrace::to_values(b);
    auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
      if (x.size() != y.size()) return false;
      return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
    };
    // cat along dim 1: row r is a's row r then b's row r.
    std::vector<double> cat1;
    for (int r = 0; r < 4; ++r) {
      cat1.insert(cat1.end(), av.begin() + 3 * r, av.begin() + 3 * r + 3);
      cat1.insert(cat1.end(), bv.begin() + 3 * r, bv.begin() + 3 * r + 3);
    }
    CHECK(same(agtrace::to_values(ops::cat({a, b}, 1)), cat1));
    std::vector<double> cat0 = av;
    cat0.insert(cat0.end(), bv.begin(), bv.end());
    CHECK(same(agtrace::to_values(ops::cat({a, b}, 0)), cat0));
    // stack along dim 2: element (r, c, k) is (k == 0 ? a : b)[r, c].
    std::vector<double> stacked;
    for (size_t i = 0; i < av.size(); ++i) {
      stacked.push_back(av[i]);
      stacked.push_back(bv[i]);
    }
    CHECK(same(agtrace::to_values(ops::stack({a, b}, 2)), stacked));
    Tensor idx = agtrace::tensor_from_values({3}, DType::Int64, {2, 0, 2});
    std::vector<double> picked;
    for (int r = 0; r < 4; ++r)
      for (int c : {2, 0, 2}) picked.push_back(bv[static_cast<size_t>(3 * r + c)]);
    CHECK(same(agtrace::to_values(ops::index_select(b, 1, idx)), picked));
  }
}
