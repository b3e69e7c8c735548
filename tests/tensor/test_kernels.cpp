// Kernels without autograd (lib/tensor/kernels.cpp): type promotion, broadcasting,
// reductions and the helpers backward formulas use. Expected values measured with
// torch 1.13.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "errors.hpp"
#include "tensor/events.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
namespace kernels = agtrace::kernels;

namespace {

Tensor vals(const Shape& shape, const std::vector<double>& v, DType d = DType::Float32) {
  return agtrace::tensor_from_values(shape, d, v);
}
Tensor zeros(const Shape& shape, DType d) { return agtrace::empty_tensor(shape, d, false); }
// A Python number as PyTorch wraps it (ops::wrap_number without the autograd layer).
Tensor wrapped(double v, DType d) {
  Tensor t = agtrace::scalar_tensor(v, d);
  t->is_wrapped_number = true;
  return t;
}
Tensor iota(const Shape& shape) {
  std::vector<double> v;
  for (int64_t i = 0; i < agtrace::shape_numel(shape); ++i) v.push_back(static_cast<double>(i));
  return vals(shape, v);
}

template <typename F>
ScenarioError raised(F&& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("expected a ScenarioError");
  return ScenarioError("", "");
}

}  // namespace

// ---------------------------------------------------------------- type promotion

TEST_CASE("kernels: result_type follows at::result_type", "[kernels][dtype]") {
  const Tensor f32 = zeros({2}, DType::Float32), f64 = zeros({2}, DType::Float64), i64 = zeros({2}, DType::Int64);
  const Tensor b = zeros({2}, DType::Bool), f16 = zeros({2}, DType::Float16), bf16 = zeros({2}, DType::BFloat16);
  // float32 tensor with a Python float -> float32
  CHECK(kernels::result_type(f32, wrapped(1.5, DType::Float64)) == DType::Float32);
  // int64 tensor with a Python float -> float32 (default dtype)
  CHECK(kernels::result_type(i64, wrapped(1.5, DType::Float64)) == DType::Float32);
  // int64 tensor with a Python int -> int64
  CHECK(kernels::result_type(i64, wrapped(1, DType::Int64)) == DType::Int64);
  // bool tensor with a Python int -> int64; with a Python float -> float32
  CHECK(kernels::result_type(b, wrapped(1, DType::Int64)) == DType::Int64);
  CHECK(kernels::result_type(b, wrapped(1.5, DType::Float64)) == DType::Float32);
  // 0-d float64 tensor with a float32 [2] -> float32 (dimensioned tensors win within a category)
  CHECK(kernels::result_type(agtrace::scalar_tensor(1, DType::Float64), f32) == DType::Float32);
  CHECK(kernels::result_type(f32, agtrace::scalar_tensor(1, DType::Float64)) == DType::Float32);
  // 0-d float64 with an int64 [2] -> float64 (a higher category wins; a 0-d tensor keeps its dtype)
  CHECK(kernels::result_type(agtrace::scalar_tensor(1, DType::Float64), i64) == DType::Float64);
  // 0-d int64 with a 0-d float64 -> float64
  CHECK(kernels::result_type(agtrace::scalar_tensor(1, DType::Int64), agtrace::scalar_tensor(1, DType::Float64)) ==
        DType::Float64);
  // float16 [2] with a 0-d float64 -> float16
  CHECK(kernels::result_type(f16, agtrace::scalar_tensor(1, DType::Float64)) == DType::Float16);
  // int64 + bool -> int64; float32 + float64 -> float64; float16 + bfloat16 -> float32
  CHECK(kernels::result_type(i64, b) == DType::Int64);
  CHECK(kernels::result_type(f32, f64) == DType::Float64);
  CHECK(kernels::result_type(f16, bf16) == DType::Float32);
  // a 0-d float64 times a Python float -> float64
  CHECK(kernels::result_type(agtrace::scalar_tensor(1, DType::Float64), wrapped(2.0, DType::Float64)) ==
        DType::Float64);
}

TEST_CASE("kernels: promote", "[kernels][dtype]") {
  CHECK(kernels::promote(DType::Bool, DType::Int64) == DType::Int64);
  CHECK(kernels::promote(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(kernels::promote(DType::BFloat16, DType::Float64) == DType::Float64);
  CHECK(kernels::promote(DType::Float32, DType::Float32) == DType::Float32);
}

// ---------------------------------------------------------------- broadcasting

TEST_CASE("kernels: broadcast_shapes", "[kernels][broadcast]") {
  CHECK(kernels::broadcast_shapes({2, 3}, {3}, "add") == (Shape{2, 3}));
  CHECK(kernels::broadcast_shapes({2, 1}, {1, 3}, "add") == (Shape{2, 3}));
  CHECK(kernels::broadcast_shapes({}, {4}, "add") == (Shape{4}));
  CHECK(kernels::broadcast_shapes({5, 1, 3}, {4, 1}, "add") == (Shape{5, 4, 3}));
  ScenarioError e = raised([] { kernels::broadcast_shapes({2, 3}, {4}, "add"); });
  CHECK(e.kind == "shape_mismatch");
  CHECK(std::string(e.what()) ==
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
  CHECK(e.facts["op"] == "add");
  CHECK(e.facts["dim"] == 1);
  CHECK(raised([] { kernels::broadcast_shapes({2, 3}, {3, 3}, "mul"); }).kind == "shape_mismatch");
}

TEST_CASE("kernels: binary broadcasts and rounds to the output dtype", "[kernels][broadcast]") {
  Tensor a = iota({2, 3});
  Tensor r = vals({3}, {0.1, 0.2, 0.3}, DType::Float64);
  Tensor out = kernels::binary(a, r, DType::Float32, [](double x, double y) { return x + y; }, "add");
  CHECK(out->sizes == (Shape{2, 3}));
  CHECK(out->dtype() == DType::Float32);
  CHECK(out->storage != a->storage);
  const auto v = agtrace::to_values(out);
  CHECK(v[0] == static_cast<double>(0.1f));
  CHECK(v[5] == static_cast<double>(5.3f));
  // a [2,1] operand broadcast along columns, a transposed operand read through strides
  Tensor col = vals({2, 1}, {10, 20});
  Tensor at = agtrace::make_alias(a, {3, 2}, {1, 3}, 0);  // a.t()
  Tensor s = kernels::binary(kernels::transposed(at), col, DType::Float32, [](double x, double y) { return x * y; },
                             "mul");
  CHECK(agtrace::to_values(s) == std::vector<double>{0, 10, 20, 60, 80, 100});
}

TEST_CASE("kernels: binary_inplace cannot grow its output", "[kernels][broadcast]") {
  Tensor a = vals({3}, {1, 2, 3});
  ScenarioError e = raised([&] {
    kernels::binary_inplace(a, zeros({2, 3}, DType::Float32), [](double x, double y) { return x + y; }, "add_");
  });
  CHECK(e.kind == "shape_mismatch");
  CHECK(std::string(e.what()) == "output with shape [3] doesn't match the broadcast shape [2, 3]");
  CHECK(agtrace::to_values(a) == std::vector<double>{1, 2, 3});
  Tensor m = iota({2, 3});
  kernels::binary_inplace(m, vals({3}, {1, 1, 2}), [](double x, double y) { return x * y; }, "mul_");
  CHECK(agtrace::to_values(m) == std::vector<double>{0, 1, 4, 3, 4, 10});
}

// ---------------------------------------------------------------- dims

TEST_CASE("kernels: wrap_dim", "[kernels][dims]") {
  CHECK(kernels::wrap_dim(-1, 2) == 1);
  CHECK(kernels::wrap_dim(-2, 2) == 0);
  CHECK(kernels::wrap_dim(1, 2) == 1);
  ScenarioError hi = raised([] { kernels::wrap_dim(2, 2); });
  CHECK(hi.kind == "index_out_of_range");
  CHECK(std::string(hi.what()) == "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  ScenarioError lo = raised([] { kernels::wrap_dim(-3, 2); });
  CHECK(std::string(lo.what()) == "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
  // A 0-d tensor accepts dims 0 and -1 (torch.tensor(1.).sum(0) works).
  CHECK(kernels::wrap_dim(0, 0) == 0);
  CHECK(kernels::wrap_dim(-1, 0) == 0);
  ScenarioError zero_d = raised([] { kernels::wrap_dim(1, 0); });
  CHECK(std::string(zero_d.what()) == "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

// ---------------------------------------------------------------- reductions

TEST_CASE("kernels: sum", "[kernels][reduce]") {
  Tensor a = iota({2, 3});
  CHECK(agtrace::to_values(kernels::sum(a, {}, false)) == std::vector<double>{15});
  CHECK(kernels::sum(a, {}, false)->dim() == 0);
  Tensor s1 = kernels::sum(a, {1}, false);
  CHECK(s1->sizes == Shape{2});
  CHECK(agtrace::to_values(s1) == std::vector<double>{3, 12});
  Tensor s0 = kernels::sum(a, {0}, true);
  CHECK(s0->sizes == (Shape{1, 3}));
  CHECK(agtrace::to_values(s0) == std::vector<double>{3, 5, 7});
  // a transposed input is read through its strides
  Tensor at = agtrace::make_alias(a, {3, 2}, {1, 3}, 0);
  CHECK(agtrace::to_values(kernels::sum(at, {1}, false)) == std::vector<double>{3, 5, 7});
  // bool and int64 sums are int64 (torch.tensor([True, True, False]).sum().dtype)
  Tensor b = vals({3}, {1, 1, 0}, DType::Bool);
  CHECK(kernels::sum(b, {}, false)->dtype() == DType::Int64);
  CHECK(agtrace::item(kernels::sum(b, {}, false)) == 2);
  CHECK(kernels::sum(vals({2}, {1, 2}, DType::Int64), {}, false)->dtype() == DType::Int64);
}

TEST_CASE("kernels: sum_to reduces a broadcast gradient", "[kernels][reduce]") {
  Tensor g = iota({2, 3});
  Tensor r3 = kernels::sum_to(g, {3});
  CHECK(r3->sizes == Shape{3});
  CHECK(agtrace::to_values(r3) == std::vector<double>{3, 5, 7});
  Tensor r21 = kernels::sum_to(g, {2, 1});
  CHECK(r21->sizes == (Shape{2, 1}));
  CHECK(agtrace::to_values(r21) == std::vector<double>{3, 12});
  Tensor r13 = kernels::sum_to(g, {1, 3});
  CHECK(agtrace::to_values(r13) == std::vector<double>{3, 5, 7});
  Tensor r0 = kernels::sum_to(g, {});
  CHECK(r0->dim() == 0);
  CHECK(agtrace::item(r0) == 15);
  // Same shape: the very same tensor, no copy.
  CHECK(kernels::sum_to(g, {2, 3}) == g);
  // 3-D to [3, 1]
  Tensor g3 = iota({2, 3, 2});
  CHECK(agtrace::to_values(kernels::sum_to(g3, {3, 1})) == std::vector<double>{14, 22, 30});
}

TEST_CASE("kernels: expand_to is a stride-0 view of the gradient", "[kernels][reduce]") {
  Tensor g = vals({2}, {1, 2});  // grad of x.sum(dim=1) for x [2,3]
  Tensor e = kernels::expand_to(g, {2, 3}, {1}, false);
  CHECK(e->storage == g->storage);
  CHECK(e->sizes == (Shape{2, 3}));
  CHECK(e->strides == (Shape{1, 0}));
  CHECK(agtrace::to_values(e) == std::vector<double>{1, 1, 1, 2, 2, 2});
  Tensor gk = vals({1, 3}, {4, 5, 6});  // grad of x.sum(dim=0, keepdim=True)
  Tensor ek = kernels::expand_to(gk, {2, 3}, {0}, true);
  CHECK(ek->strides == (Shape{0, 1}));
  CHECK(agtrace::to_values(ek) == std::vector<double>{4, 5, 6, 4, 5, 6});
  Tensor s = agtrace::scalar_tensor(7, DType::Float32);  // grad of x.sum()
  Tensor es = kernels::expand_to(s, {2, 2}, {}, false);
  CHECK(es->strides == (Shape{0, 0}));
  CHECK(agtrace::to_values(es) == std::vector<double>(4, 7));
}

// ---------------------------------------------------------------- products, copies

TEST_CASE("kernels: mm and transposed", "[kernels][linalg]") {
  Tensor a = iota({2, 3});
  Tensor b = vals({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor c = kernels::mm(a, b);
  CHECK(c->sizes == (Shape{2, 2}));
  CHECK(agtrace::to_values(c) == std::vector<double>{2, 3, 8, 9});
  Tensor at = kernels::transposed(a);
  CHECK(at->storage == a->storage);
  CHECK(at->sizes == (Shape{3, 2}));
  CHECK(at->strides == (Shape{1, 3}));
  // a non-contiguous operand: a.t() @ a.t().t() = a^T a
  CHECK(agtrace::to_values(kernels::mm(at, a)) == std::vector<double>{9, 12, 15, 12, 17, 22, 15, 22, 29});
  Tensor d = kernels::mm(vals({1, 2}, {0.1, 0.2}, DType::Float64), vals({2, 1}, {1, 1}, DType::Float64));
  CHECK(d->dtype() == DType::Float64);
  CHECK(agtrace::item(d) == Approx(0.3).epsilon(1e-15));
}

TEST_CASE("kernels: view_backward scatters into zeros", "[kernels][views]") {
  // gradient of x[:, 1] for x [2,3]
  Tensor g = vals({2}, {5, 6});
  Tensor r = kernels::view_backward(g, {2, 3}, {2}, {3}, 1);
  CHECK(r->sizes == (Shape{2, 3}));
  CHECK(agtrace::to_values(r) == std::vector<double>{0, 5, 0, 0, 6, 0});
  // gradient of x[:, ::2]
  Tensor g2 = vals({2, 2}, {1, 2, 3, 4});
  CHECK(agtrace::to_values(kernels::view_backward(g2, {2, 3}, {2, 2}, {3, 2}, 0)) ==
        std::vector<double>{1, 0, 2, 3, 0, 4});
}

TEST_CASE("kernels: unary, copy, cast, full", "[kernels]") {
  Tensor a = iota({2, 3});
  Tensor at = kernels::transposed(a);
  Tensor c = kernels::copy(at);
  CHECK(c->is_contiguous());
  CHECK(c->storage != a->storage);
  CHECK(agtrace::to_values(c) == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor h = kernels::cast(vals({2}, {0.1, 1.00390625}, DType::Float64), DType::BFloat16);
  CHECK(h->dtype() == DType::BFloat16);
  CHECK(agtrace::to_values(h) == std::vector<double>{0.10009765625, 1.0});
  Tensor u = kernels::unary(a, DType::Float32, [](double x) { return x / 3; });
  CHECK(agtrace::to_values(u)[1] == static_cast<double>(1.0f / 3.0f));
  Tensor f = kernels::full({2, 2}, 0.1, DType::Float16, false);
  CHECK(agtrace::to_values(f) == std::vector<double>(4, 0.0999755859375));
  Tensor m = kernels::full({2, 2}, 1.0, DType::Float32, true);
  CHECK(m->is_meta());
  CHECK(kernels::unary(m, DType::Float32, [](double x) { return x; })->is_meta());
  CHECK(kernels::mm(m, agtrace::empty_tensor({2, 5}, DType::Float32, true))->sizes == (Shape{2, 5}));
}

TEST_CASE("kernels: each result is an allocation the sink sees", "[kernels][events]") {
  struct Count : agtrace::EventSink {
    int allocs = 0;
    int64_t bytes = 0;
    void on_event(const agtrace::Event& e) override {
      if (e.kind == agtrace::Event::Kind::Alloc) {
        ++allocs;
        bytes += e.bytes;
      }
    }
  } sink;
  Tensor a = iota({2, 3}), b = iota({3});
  agtrace::EventSink* previous = agtrace::event_sink();
  agtrace::set_event_sink(&sink);
  Tensor s = kernels::binary(a, b, DType::Float64, [](double x, double y) { return x + y; }, "add");
  Tensor t = kernels::transposed(a);  // a view: no allocation
  Tensor r = kernels::sum_to(s, {3});
  agtrace::set_event_sink(previous);
  CHECK(sink.allocs == 2);
  CHECK(sink.bytes == 48 + 24);
}
