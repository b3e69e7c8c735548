// narrow, unfold, movedim, mT, T, swapaxes, view_as / reshape_as and .data (lib/ops/views.cpp):
// gradient checks by central differences in float64, and the facts measured in torch 1.13
// (node names, saved attributes as read back, errors).
#include <catch2/catch.hpp>

#include "support/gradcheck.hpp"
#include "support/node_checks.hpp"

#include <string>

#include "errors.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
namespace ops = agtrace::ops;

using namespace agtrace::test;

namespace {

Tensor leaf(const Shape& shape) { return leaf64(shape, -1.0, 1.0); }

}  // namespace

TEST_CASE("gradcheck: narrow, unfold, movedim, mT, T", "[views-more][gradcheck]") {
  check_gradients("narrow(1, 1, 2)", {leaf({3, 4})}, [](const Inputs& in) { return ops::narrow(in[0], 1, 1, 2); });
  check_gradients("narrow(0, -2, 2)", {leaf({3, 4})}, [](const Inputs& in) { return ops::narrow(in[0], 0, -2, 2); });
  // Overlapping windows: their gradients add up.
  check_gradients("unfold(1, 3, 1)", {leaf({2, 5})}, [](const Inputs& in) { return ops::unfold(in[0], 1, 3, 1); });
  check_gradients("unfold(-1, 2, 2)", {leaf({2, 5})}, [](const Inputs& in) { return ops::unfold(in[0], -1, 2, 2); });
  check_gradients("unfold(0, 2, 1) of 3-D", {leaf({3, 2, 2})},
                  [](const Inputs& in) { return ops::unfold(in[0], 0, 2, 1); });
  check_gradients("movedim((0, 1), (2, 0))", {leaf({2, 3, 4})},
                  [](const Inputs& in) { return ops::movedim(in[0], {0, 1}, {2, 0}); });
  check_gradients("mT", {leaf({2, 3, 4})}, [](const Inputs& in) { return ops::matrix_transpose(in[0]); });
  check_gradients("T of 3-D", {leaf({2, 3, 4})}, [](const Inputs& in) { return ops::reversed_dims(in[0]); });
}

TEST_CASE("views: narrow is a slice", "[views-more]") {
  Tensor x = leaf({4, 5});
  Tensor n = ops::narrow(x, -1, 1, 2);
  CHECK(fn(n).name == "SliceBackward0");
  CHECK(n->sizes == Shape{4, 2});
  CHECK(n->base == x);
  CHECK(n->version == x->version);
  CHECK(attr(fn(n), "dim") == "18446744073709551615");
  CHECK(attr(fn(n), "start") == "1");
  CHECK(attr(fn(n), "end") == "3");
  // A negative start is wrapped before the slice (measured: start 2, end 4).
  Tensor m = ops::narrow(x, 0, -2, 2);
  CHECK(attr(fn(m), "start") == "2");
  CHECK(attr(fn(m), "end") == "4");
  CHECK(ops::narrow(x, 0, 4, 0)->sizes == Shape{0, 5});  // start == size: empty, allowed
  auto e = raised_error([&] { ops::narrow(x, 1, 4, 2); });
  CHECK(e.kind == "shape_mismatch");
  CHECK(e.what() == std::string("start (4) + length (2) exceeds dimension size (5)."));
  CHECK(raised_error([&] { ops::narrow(x, 1, -6, 2); }).kind == "index_out_of_range");
  CHECK(raised_error([&] { ops::narrow(x, 0, 1, -1); }).kind == "shape_mismatch");
}

TEST_CASE("views: unfold", "[views-more]") {
  Tensor x = leaf({4, 5});
  Tensor u = ops::unfold(x, 1, 2, 1);
  CHECK(u->sizes == Shape{4, 4, 2});
  CHECK(u->strides == Shape{5, 1, 1});
  CHECK(u->storage == x->storage);
  CHECK(fn(u).name == "UnfoldBackward0");
  CHECK(saved_names(fn(u)) == Names{"dimension", "self_sizes", "size", "step"});
  CHECK(attr(fn(ops::unfold(x, -1, 2, 2)), "dimension") == "18446744073709551615");
  CHECK(ops::unfold(leaf({}), 0, 1, 1)->sizes == Shape{1});
  CHECK(raised_error([&] { ops::unfold(x, 1, 6, 1); }).what() ==
        std::string("maximum size for tensor at dimension 1 is 5 but size is 6"));
  CHECK(raised_error([&] { ops::unfold(x, 1, 2, 0); }).what() == std::string("step is 0 but must be > 0"));
}

TEST_CASE("views: movedim, mT, T", "[views-more]") {
  Tensor x3 = leaf({2, 3, 4});
  Tensor md = ops::movedim(x3, {0}, {2});
  CHECK(md->sizes == Shape{3, 4, 2});
  CHECK(fn(md).name == "PermuteBackward0");
  CHECK(attr(fn(md), "dims") == "(1, 2, 0)");
  CHECK(attr(fn(ops::movedim(x3, {0, 1}, {2, 0})), "dims") == "(1, 2, 0)");
  CHECK(raised_error([&] { ops::movedim(x3, {0, 0}, {1, 0}); }).what() ==
        std::string("movedim: repeated dim in `source` ([0, 0])"));
  CHECK(raised_error([&] { ops::movedim(x3, {0}, {1, 0}); }).kind == "shape_mismatch");
  Tensor mt = ops::matrix_transpose(x3);
  CHECK(fn(mt).name == "TransposeBackward0");
  CHECK(attr(fn(mt), "dim0") == "18446744073709551614");
  CHECK(mt->sizes == Shape{2, 4, 3});
  CHECK(raised_error([&] { ops::matrix_transpose(leaf({3})); }).what() ==
        std::string("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor."));
  // x.T is a permute on every rank, 2-D included (measured: PermuteBackward0, not TBackward0).
  Tensor t2 = ops::reversed_dims(leaf({2, 3}));
  CHECK(fn(t2).name == "PermuteBackward0");
  CHECK(attr(fn(t2), "dims") == "(1, 0)");
  CHECK(ops::reversed_dims(x3)->sizes == Shape{4, 3, 2});
  CHECK(attr(fn(ops::reversed_dims(leaf({}))), "dims") == "()");
}

TEST_CASE("views: .data has no history and its own version counter", "[views-more]") {
  Tensor x = leaf({3});
  Tensor h = ops::mul(x, x);
  Tensor d = ops::data_alias(h);
  CHECK(d->storage == h->storage);
  CHECK(d->grad_fn == nullptr);
  CHECK_FALSE(d->requires_grad());
  CHECK(d->base == nullptr);
  CHECK(d->version != h->version);
  d->version->bump();
  CHECK(h->version->version == 0);
}
