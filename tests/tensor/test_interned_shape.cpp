// Interned shapes (lib/tensor/interned_shape.hpp): one entry per distinct shape, read as the
// vector it holds, and the contiguous strides of each shape computed once.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "tensor/interned_shape.hpp"
#include "tensor/tensor.hpp"

using namespace agtrace;

TEST_CASE("equal shapes are one entry, distinct shapes are not", "[tensor][interned_shape]") {
  const InternedShape a(Shape{7, 11, 13});
  const size_t after_first = InternedShape::table_size();
  const InternedShape b(Shape{7, 11, 13});
  CHECK(InternedShape::table_size() == after_first);  // a repeat adds no entry
  CHECK(a == b);
  CHECK(&a.vec() == &b.vec());
  const InternedShape c(Shape{7, 11, 14});
  CHECK(InternedShape::table_size() == after_first + 1);
  CHECK(a != c);
  CHECK(a == Shape{7, 11, 13});
  CHECK(Shape{7, 11, 14} == c);
  CHECK(a != Shape{7, 11});
  // Made from another entry's vector (an InternedShape converted to const Shape&): the same
  // entry.
  const Shape& as_vector = a;
  const InternedShape d(as_vector);
  CHECK(&d.vec() == &a.vec());
  // Read as the vector.
  CHECK(a.size() == 3);
  CHECK(a[1] == 11);
  CHECK(a.front() == 7);
  CHECK(a.back() == 13);
  CHECK(std::vector<int64_t>(a.begin(), a.end()) == Shape{7, 11, 13});
  CHECK(std::vector<int64_t>(a.rbegin(), a.rend()) == Shape{13, 11, 7});
  CHECK_THROWS_AS(a.at(3), std::out_of_range);
  // The default is [] (0-d), the same entry as [] interned.
  const InternedShape scalar;
  CHECK(scalar.empty());
  CHECK(scalar == InternedShape(Shape{}));
}

TEST_CASE("a shape's contiguous strides are PyTorch's, computed once", "[tensor][interned_shape]") {
  // torch.empty(shape).stride() in PyTorch 1.13 (measured): size-1 and size-0 dims count as 1.
  const std::vector<std::pair<Shape, Shape>> cases = {{{}, {}},           {{5}, {1}},           {{2, 3, 4}, {12, 4, 1}},
                                                      {{3, 1, 2}, {2, 2, 1}}, {{4, 0, 3}, {3, 3, 1}}, {{1, 1}, {1, 1}}};
  for (const auto& [sizes, torch_strides] : cases) {
    const InternedShape shape(sizes);
    const InternedShape strides = shape.contiguous_strides();
    CHECK(strides == torch_strides);
    CHECK(&shape.contiguous_strides().vec() == &strides.vec());  // kept with the entry
  }
}

TEST_CASE("a tensor's sizes and strides are interned entries", "[tensor][interned_shape]") {
  const Tensor a = empty_tensor({2, 3}, DType::Float32, false);
  const Tensor b = empty_tensor({2, 3}, DType::Float32, false);
  CHECK(&a->sizes.vec() == &b->sizes.vec());
  CHECK(&a->strides.vec() == &b->strides.vec());
  CHECK(a->strides == Shape{3, 1});
  CHECK(a->is_contiguous());
}

TEST_CASE("shapes interned from two threads at once are one entry each", "[tensor][interned_shape]") {
  std::vector<const Shape*> first(200), second(200);
  auto intern_all = [](std::vector<const Shape*>& out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = &InternedShape(Shape{9001, static_cast<int64_t>(i)}).vec();
  };
  std::thread t1(intern_all, std::ref(first));
  std::thread t2(intern_all, std::ref(second));
  t1.join();
  t2.join();
  CHECK(first == second);
}
