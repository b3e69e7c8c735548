// The strides of a pointwise result (lib/tensor/iterator_layout.cpp). Every expected stride
// was printed by torch 1.13 for the same operands (x.stride() after the op).
#include <catch2/catch.hpp>

#include <vector>

#include "tensor/iterator_layout.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::kernels::iterator_output_strides;

namespace {

Tensor arange_tensor(const Shape& sizes) {
  std::vector<double> v(static_cast<size_t>(agtrace::shape_numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return agtrace::tensor_from_values(sizes, DType::Float32, v);
}

Tensor view_of(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset = 0) {
  return agtrace::make_alias(t, sizes, strides, offset);
}

}  // namespace

TEST_CASE("a pointwise result takes its inputs' memory order", "[tensor][layout]") {
  Tensor a = arange_tensor({3, 4});
  const Tensor at = view_of(a, {4, 3}, {1, 4});  // a.t()
  CHECK(iterator_output_strides({4, 3}, {&at}) == Shape{1, 4});
  CHECK(iterator_output_strides({4, 3}, {&at, &at}) == Shape{1, 4});
  const Tensor column = view_of(a, {4, 1}, {1, 1});  // a[0].unsqueeze(1)
  CHECK(iterator_output_strides({4, 3}, {&at, &column}) == Shape{1, 4});
  const Tensor sliced = view_of(a, {3, 2}, {4, 2});  // a[:, ::2]
  CHECK(iterator_output_strides({3, 2}, {&sliced}) == Shape{2, 1});
  const Tensor expanded = view_of(a, {4, 3, 2}, {1, 4, 0});  // a.unsqueeze(0).expand(2, 3, 4).transpose(0, 2)
  CHECK(iterator_output_strides({4, 3, 2}, {&expanded}) == Shape{2, 8, 1});
  Tensor q = arange_tensor({2, 5, 3, 2, 4});
  const Tensor head = view_of(q, {2, 2, 5, 4}, {120, 4, 24, 1});  // q.permute(2, 0, 3, 1, 4)[0]
  CHECK(iterator_output_strides({2, 2, 5, 4}, {&head}) == Shape{40, 4, 8, 1});
  Tensor img = arange_tensor({2, 3, 4, 5});
  const Tensor channels_last = view_of(img, {2, 3, 4, 5}, {60, 1, 15, 3});
  CHECK(iterator_output_strides({2, 3, 4, 5}, {&channels_last}) == Shape{60, 1, 15, 3});
  // Contiguous operands, broadcast or not, give a contiguous result.
  Tensor row = arange_tensor({1, 4});
  CHECK(iterator_output_strides({3, 4}, {&a, &row}) == Shape{4, 1});
}

TEST_CASE("adopt_iterator_layout moves the row-major values into the new strides", "[tensor][layout]") {
  Tensor a = arange_tensor({3, 4});
  const Tensor at = view_of(a, {4, 3}, {1, 4});
  Tensor r = agtrace::kernels::unary(at, DType::Float32, [](double v) { return 2 * v; });
  CHECK(r->strides.vec() == Shape{1, 4});
  CHECK_FALSE(r->is_contiguous());
  const std::vector<double> got = agtrace::to_values(r), source = agtrace::to_values(at);
  REQUIRE(got.size() == source.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 2 * source[i]);
  // The storage holds a's order: element (i, j) of the result is at j * 4 + i.
  CHECK(r->storage->get(1) == 2 * 1.0);   // result (1, 0) = 2 * a[0][1]
  CHECK(r->storage->get(4) == 2 * 4.0);   // result (0, 1) = 2 * a[1][0]
  Tensor c = agtrace::kernels::unary(a, DType::Float32, [](double v) { return v; });
  CHECK(c->is_contiguous());
}

TEST_CASE("suggest_memory_format's channels-last test", "[tensor][layout]") {
  using agtrace::kernels::strides_like_channels_last;
  CHECK(strides_like_channels_last({2, 3, 4, 5}, {60, 1, 15, 3}));
  CHECK(strides_like_channels_last({2, 3, 1, 1}, {3, 1, 3, 3}));
  CHECK_FALSE(strides_like_channels_last({2, 3, 4, 5}, {60, 20, 5, 1}));
  CHECK_FALSE(strides_like_channels_last({1, 3, 1, 1}, {3, 1, 1, 1}));
  CHECK_FALSE(strides_like_channels_last({2, 1, 1, 1}, {1, 1, 1, 1}));  // N111: NCHW by default
  CHECK_FALSE(strides_like_channels_last({2, 3, 4}, {12, 4, 1}));
}
