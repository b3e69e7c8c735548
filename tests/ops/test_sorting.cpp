// sort, argsort and topk (lib/ops/sorting.cpp): gradient checks by central differences in
// float64; ties and NaN ordered as PyTorch 1.13's CPU kernel orders them (measured), and
// `unsupported` where its order of ties is the sort algorithm's own; nodes and meta shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "errors.hpp"
#include "ops/more.hpp"
#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
namespace ops = agtrace::ops;

using namespace agtrace::test;

namespace {

Tensor tensor_of(const Shape& shape, const std::vector<double>& v) { return agtrace::tensor_from_values(shape, DType::Float32, v); }

std::vector<double> indices_of(const std::pair<Tensor, Tensor>& r) { return agtrace::to_values(r.second); }

bool unsupported(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.kind == "unsupported";
  }
  return false;
}

}  // namespace

TEST_CASE("sorting gradcheck: sort and topk along each dim", "[sorting][gradcheck]") {
  for (int64_t dim : {0, 1, -1})
    for (bool descending : {false, true})
      check_gradients("sort dim " + std::to_string(dim) + (descending ? " descending" : ""), {leaf64({3, 4}, -2, 2)},
                      [=](const Inputs& in) { return ops::sort(in[0], dim, descending, false).first; });
  check_gradients("topk 2", {leaf64({3, 4}, -2, 2)}, [](const Inputs& in) { return ops::topk(in[0], 2, -1, true).first; });
  check_gradients("topk 2 smallest dim 0", {leaf64({3, 4}, -2, 2)},
                  [](const Inputs& in) { return ops::topk(in[0], 2, 0, false).first; });
}

TEST_CASE("sorting: ties and NaN as PyTorch 1.13's CPU sort orders them", "[sorting]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Measured: [[1, 3, 3, 0, 3, 1], [2, nan, 0, 0, 5, nan]]: sort() indices [[3, 0, 5, 1, 2, 4],
  // [2, 3, 0, 4, 1, 5]]; descending [[1, 2, 4, 0, 5, 3], [1, 5, 4, 0, 2, 3]].
  Tensor x = tensor_of({2, 6}, {1, 3, 3, 0, 3, 1, 2, nan, 0, 0, 5, nan});
  CHECK(indices_of(ops::sort(x, -1, false, false)) == std::vector<double>{3, 0, 5, 1, 2, 4, 2, 3, 0, 4, 1, 5});
  CHECK(indices_of(ops::sort(x, 1, true, false)) == std::vector<double>{1, 2, 4, 0, 5, 3, 1, 5, 4, 0, 2, 3});
  CHECK(agtrace::to_values(ops::argsort(x, 1, true)) == std::vector<double>{1, 2, 4, 0, 5, 3, 1, 5, 4, 0, 2, 3});
  // Measured: a slice of 20 with ties is not in input order without stable=True; with it, it is.
  std::vector<double> long_slice;
  for (int i = 0; i < 20; ++i) long_slice.push_back(i % 2 ? 1 : 5);
  Tensor y = tensor_of({20}, long_slice);
  CHECK(unsupported([&] { ops::sort(y, 0, false, false); }));
  CHECK(indices_of(ops::sort(y, 0, false, true)) ==
        std::vector<double>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18});
  // topk's order of equal values is its partial sort's (measured: topk(2) of [1, 3, 3, 0, 3, 1]
  // gives [2, 4]): unsupported; ties the selection does not reach are fine.
  CHECK(unsupported([&] { ops::topk(tensor_of({6}, {1, 3, 3, 0, 3, 1}), 2, 0, true); }));
  CHECK(indices_of(ops::topk(tensor_of({5}, {1, 4, 1, 3, 1}), 2, 0, true)) == std::vector<double>{1, 3});
  CHECK(unsupported([&] { ops::topk(tensor_of({5}, {1, 4, 1, 3, 1}), 3, 0, true); }));
}

TEST_CASE("sorting fidelity: nodes and saved values, meta shapes", "[sorting]") {
  Tensor x = linspace_leaf({3, 4});
  auto [v, i] = ops::sort(x, -1, false, false);
  CHECK(fn(v).name == "SortBackward0");
  CHECK(saved_names(fn(v)) == Names{"dim", "indices", "self_sizes"});
  CHECK(attr(fn(v), "dim") == "18446744073709551615");
  CHECK(fn(v).unpack("indices") == i);
  auto [tv, ti] = ops::topk(x, 2, 0, true);
  CHECK(fn(tv).name == "TopkBackward0");
  CHECK(tv->sizes == Shape{2, 4});
  CHECK(attr(fn(tv), "self_sizes") == "(3, 4)");
  CHECK(ops::argsort(x, 0, false)->dtype() == DType::Int64);
  Tensor m = agtrace::empty_tensor(Shape{3, 4}, DType::Float32, true);
  CHECK(ops::topk(m, 3, 1, false).first->sizes == Shape{3, 3});
  CHECK(ops::sort(m, 0, true, false).second->is_meta());
}
