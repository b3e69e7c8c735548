// index_add, index_copy, index_fill, scatter, scatter_add (lib/ops/index_family.cpp) and
// median, nanmedian, kthvalue (lib/ops/median.cpp): gradient checks by central differences
// in float64, nodes and saved values as PyTorch 1.13 records them, the index each selection
// picks among ties (measured), errors and meta shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "errors.hpp"
#include "ops/index_family.hpp"
#include "ops/ops.hpp"
#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
namespace ops = agtrace::ops;

using namespace agtrace::test;

namespace {

Tensor longs(const Shape& shape, const std::vector<double>& v) { return agtrace::tensor_from_values(shape, DType::Int64, v); }
Tensor floats(const Shape& shape, const std::vector<double>& v) {
  return agtrace::tensor_from_values(shape, DType::Float32, v);
}

std::string error_kind(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e.kind;
  }
  return "none";
}

std::vector<double> values(const Tensor& t) { return agtrace::to_values(t); }

}  // namespace

TEST_CASE("index family gradcheck: out-of-place and in-place forms", "[index-family][gradcheck]") {
  const Tensor i = longs({2}, {2, 0}), dup = longs({3}, {1, 1, 3});
  const Tensor ix = longs({2, 4}, {0, 1, 2, 0, 2, 0, 0, 1});
  check_gradients("index_add alpha", {leaf64({3, 4}, -2, 2), leaf64({2, 4}, -1, 1)},
                  [&](const Inputs& in) { return ops::index_add(in[0], 0, i, in[1], Value::real(2.5)); });
  check_gradients("index_add dim 1 duplicates", {leaf64({3, 4}, -2, 2), leaf64({3, 3}, -1, 1)},
                  [&](const Inputs& in) { return ops::index_add(in[0], 1, dup, in[1], Value::integer(1)); });
  check_gradients("index_copy", {leaf64({3, 4}, -2, 2), leaf64({2, 4}, -1, 1)},
                  [&](const Inputs& in) { return ops::index_copy(in[0], 0, i, in[1]); });
  check_gradients("index_fill tensor value", {leaf64({3, 4}, -2, 2), leaf64({}, -1, 1)},
                  [&](const Inputs& in) { return ops::index_fill(in[0], 1, dup, Value::tensor(in[1])); });
  check_gradients("scatter src", {leaf64({3, 4}, -2, 2), leaf64({2, 4}, -1, 1)},
                  [&](const Inputs& in) { return ops::scatter(in[0], 0, ix, Value::tensor(in[1])); });
  check_gradients("scatter value", {leaf64({3, 4}, -2, 2)},
                  [&](const Inputs& in) { return ops::scatter(in[0], 0, ix, Value::real(0.5)); });
  check_gradients("scatter_add", {leaf64({3, 4}, -2, 2), leaf64({2, 4}, -1, 1)},
                  [&](const Inputs& in) { return ops::scatter_add(in[0], 0, ix, in[1]); });
  check_gradients("index_add_ on a clone", {leaf64({3, 4}, -2, 2), leaf64({2, 4}, -1, 1)}, [&](const Inputs& in) {
    Tensor h = ops::clone(in[0]);
    ops::index_add_(h, 0, i, in[1], Value::integer(1));
    return h;
  });
  check_gradients("scatter_ on a slice of a clone", {leaf64({4, 4}, -2, 2), leaf64({2, 4}, -1, 1)},
                  [&](const Inputs& in) {
                    Tensor h = ops::clone(in[0]);
                    ops::scatter_(ops::slice(h, 0, 1, std::nullopt, 1), 0, ix, Value::tensor(in[1]));
                    return h;
                  });
}

TEST_CASE("index family: nodes and saved values as PyTorch 1.13 records them", "[index-family]") {
  Tensor x = linspace_leaf({3, 4}), s = linspace_leaf({2, 4}), plain = linspace_leaf({2, 4}, -1, 1, false);
  const Tensor i = longs({2}, {2, 0});
  // Measured: only self requires grad: _saved_index and _saved_source are None.
  Tensor a = ops::index_add(x, 0, i, plain, Value::real(0.5));
  CHECK(fn(a).name == "IndexAddBackward0");
  CHECK(saved_names(fn(a)) == Names{"alpha", "dim", "index", "source", "source_dim"});
  CHECK_FALSE(defined(fn(a), "index"));
  CHECK_FALSE(defined(fn(a), "source"));
  CHECK(next_names(fn(a)) == Names{"AccumulateGrad", "None"});
  Tensor b = ops::index_add(x, 0, i, s, Value::integer(2));
  CHECK(fn(b).unpack("source") == s);
  CHECK(fn(b).unpack("index") == i);
  // index_copy saves index always, source only for its gradient.
  Tensor c = ops::index_copy(x, 0, i, plain);
  CHECK(defined(fn(c), "index"));
  CHECK_FALSE(defined(fn(c), "source"));
  Tensor f0 = ops::index_fill(x, 0, i, Value::real(1.0));
  Tensor f1 = ops::index_fill(x, 0, i, Value::tensor(linspace_leaf({}, 2, 2)));
  CHECK(fn(f0).name == "IndexFillBackward0");
  CHECK(fn(f1).name == "IndexFillBackward1");
  CHECK(fn(f1).next.size() == 2);
  const Tensor ix = longs({2, 4}, {0, 1, 2, 0, 2, 0, 0, 1});
  CHECK(fn(ops::scatter(x, 0, ix, Value::tensor(s))).name == "ScatterBackward0");
  CHECK(fn(ops::scatter(x, 0, ix, Value::real(2))).name == "ScatterBackward1");
  // scatter_add saves index only for src's gradient.
  CHECK_FALSE(defined(fn(ops::scatter_add(x, 0, ix, plain)), "index"));
  // The in-place form: the node over the old history, one version bump.
  Tensor h = ops::clone(x);
  ops::index_fill_(h, 1, longs({1}, {3}), Value::real(0.0));
  CHECK(h->version->version == 1);
  CHECK(fn(h).name == "IndexFillBackward0");
  CHECK(next_names(fn(h)) == Names{"CloneBackward0"});
}

TEST_CASE("index family: values, duplicates and PyTorch's errors", "[index-family]") {
  Tensor z = floats({3, 2}, {0, 0, 0, 0, 0, 0}), s = floats({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  // Measured: the last of duplicate indices wins for index_copy and scatter; index_add sums.
  CHECK(values(ops::index_copy(z, 0, longs({4}, {1, 1, 0, 1}), s)) == std::vector<double>{4, 5, 6, 7, 0, 0});
  CHECK(values(ops::scatter(z, 0, longs({4, 2}, {1, 1, 1, 0, 1, 1, 0, 1}), Value::tensor(s))) ==
        std::vector<double>{6, 3, 4, 7, 0, 0});
  CHECK(values(ops::index_add(z, 0, longs({4}, {0, 1, 2, 0}), s, Value::integer(2))) ==
        std::vector<double>{12, 16, 4, 6, 8, 10});
  // index_fill wraps a negative index; index_add and index_copy refuse it.
  CHECK(values(ops::index_fill(z, 0, longs({1}, {-1}), Value::real(3))) == std::vector<double>{0, 0, 0, 0, 3, 3});
  CHECK(error_kind([&] { ops::index_copy(z, 0, longs({4}, {-1, 0, 0, 0}), s); }) == "index_out_of_range");
  CHECK(error_kind([&] { ops::index_add(z, 0, longs({4}, {0, 3, 0, 0}), s, Value::integer(1)); }) ==
        "index_out_of_range");
  CHECK(error_kind([&] { ops::index_add(z, 0, floats({4}, {0, 1, 0, 0}), s, Value::integer(1)); }) == "type_error");
  CHECK(error_kind([&] { ops::index_add(z, 0, longs({3}, {0, 1, 0}), s, Value::integer(1)); }) == "shape_mismatch");
  CHECK(error_kind([&] { ops::scatter(z, 0, longs({1, 2}, {0, 3}), Value::tensor(s)); }) == "index_out_of_range");
  CHECK(error_kind([&] { ops::scatter(z, 0, longs({2}, {0, 1}), Value::tensor(s)); }) == "shape_mismatch");
  CHECK(error_kind([&] { ops::scatter_add(z, 0, longs({1, 2}, {0, 1}), ops::clone(linspace_leaf({4, 2}, -1, 1, false, DType::Float64))); }) ==
        "dtype_mismatch");
  CHECK(error_kind([&] { ops::index_fill(z, 0, longs({1}, {0}), Value::tensor(floats({1}, {1}))); }) ==
        "shape_mismatch");
  // A leaf that requires grad refuses the in-place forms before any other check.
  Tensor leaf = linspace_leaf({3, 2});
  CHECK(error_kind([&] { ops::index_add_(leaf, 0, longs({1}, {7}), s, Value::integer(1)); }) == "leaf_inplace");
  CHECK(leaf->version->version == 0);
  // at::assert_no_overlap: a source on the edited memory is refused; a disjoint slice is not.
  Tensor h = ops::clone(floats({3, 2}, {0, 1, 2, 3, 4, 5}));
  CHECK(error_kind([&] { ops::index_add_(h, 0, longs({2}, {1, 2}), ops::slice(h, 0, 0, 2, 1), Value::integer(1)); }) ==
        "unsupported");
  ops::index_copy_(ops::slice(h, 0, 2, std::nullopt, 1), 0, longs({1}, {0}), ops::slice(h, 0, 0, 1, 1));
  CHECK(values(h) == std::vector<double>{0, 1, 2, 3, 0, 1});
  // Meta: shapes only, the same nodes.
  Tensor m = agtrace::empty_tensor(Shape{3, 4}, DType::Float32, true);
  m->requires_grad_flag = true;
  Tensor mi = agtrace::empty_tensor(Shape{2, 4}, DType::Int64, true);
  Tensor r = ops::scatter(m, 0, mi, Value::real(1));
  CHECK(r->is_meta());
  CHECK(r->sizes == Shape{3, 4});
  CHECK(fn(r).name == "ScatterBackward1");
}

TEST_CASE("median and kthvalue: the index chosen among ties and NaN, as measured", "[index-family][median]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Measured: median(0) of [5, 3, 5, 3, 5, 3] is index 5; of [0, 1, 1, 0] index 3; of
  // [1, 1, 1, 1] index 1 (the stable order's (n - 1) / 2-th element).
  CHECK(values(ops::median_dim(floats({6}, {5, 3, 5, 3, 5, 3}), 0, false, false).second) == std::vector<double>{5});
  CHECK(values(ops::median_dim(floats({4}, {0, 1, 1, 0}), 0, false, false).second) == std::vector<double>{3});
  CHECK(values(ops::median_dim(floats({4}, {1, 1, 1, 1}), 0, false, false).second) == std::vector<double>{1});
  // Measured: kthvalue(k) indices for k = 1..6 of [5, 3, 5, 3, 5, 3]: [5, 3, 1, 0, 4, 2]; of
  // [0, 1, 1, 0]: [3, 0, 2, 1] (quick_select_template's order, not the stable one).
  const std::vector<double> expected6{5, 3, 1, 0, 4, 2}, expected4{3, 0, 2, 1};
  for (int64_t k = 1; k <= 6; ++k)
    CHECK(values(ops::kthvalue(floats({6}, {5, 3, 5, 3, 5, 3}), k, 0, false).second) ==
          std::vector<double>{expected6[static_cast<size_t>(k - 1)]});
  for (int64_t k = 1; k <= 4; ++k)
    CHECK(values(ops::kthvalue(floats({4}, {0, 1, 1, 0}), k, 0, false).second) ==
          std::vector<double>{expected4[static_cast<size_t>(k - 1)]});
  // NaN: median gives the first NaN; nanmedian skips them; kthvalue sorts NaN last.
  Tensor with_nan = floats({3}, {1, nan, 3});
  CHECK(values(ops::median_dim(with_nan, 0, false, false).second) == std::vector<double>{1});
  CHECK(std::isnan(values(ops::median_all(with_nan, false))[0]));
  CHECK(values(ops::median_all(with_nan, true)) == std::vector<double>{1});
  CHECK(values(ops::kthvalue(with_nan, 3, 0, false).second) == std::vector<double>{1});
  CHECK(error_kind([&] { ops::kthvalue(with_nan, 4, 0, false); }) == "index_out_of_range");
  CHECK(error_kind([&] { ops::median_dim(floats({2}, {nan, nan}), 0, false, true); }) == "unsupported");
}

TEST_CASE("median and kthvalue: nodes, saved values, gradients", "[index-family][median]") {
  Tensor x = linspace_leaf({3, 4});
  Tensor m = ops::median_all(x, false);
  CHECK(fn(m).name == "MedianBackward0");
  CHECK(saved_names(fn(m)) == Names{"result", "self"});
  auto [v, i] = ops::median_dim(x, 1, true, false);
  CHECK(fn(v).name == "MedianBackward1");
  CHECK(saved_names(fn(v)) == Names{"dim", "indices", "keepdim", "self_sizes"});
  CHECK(fn(v).unpack("indices") == i);
  CHECK(v->sizes == Shape{3, 1});
  auto [kv, ki] = ops::kthvalue(x, 2, 0, false);
  CHECK(fn(kv).name == "KthvalueBackward0");
  CHECK(kv->sizes == Shape{4});
  CHECK(fn(ops::median_dim(x, 0, false, true).first).name == "NanmedianBackward1");
  check_gradients("median dim", {leaf64({3, 5}, -2, 2)}, [](const Inputs& in) { return ops::median_dim(in[0], 1, false, false).first; });
  check_gradients("kthvalue", {leaf64({4, 3}, -2, 2)}, [](const Inputs& in) { return ops::kthvalue(in[0], 3, 0, true).first; });
  check_gradients("median all", {leaf64({2, 3}, -2, 2)}, [](const Inputs& in) { return ops::median_all(in[0], false); });
  // No meta kernel for median in PyTorch 1.13.
  Tensor meta = agtrace::empty_tensor(Shape{3, 4}, DType::Float32, true);
  CHECK(error_kind([&] { ops::median_all(meta, false); }) == "unsupported");
  CHECK(ops::median_dim(meta, 0, false, true).first->sizes == Shape{4});
}
