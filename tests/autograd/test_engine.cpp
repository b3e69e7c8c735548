// The backward engine (lib/autograd/engine.cpp) against PyTorch 1.13's behaviour:
// release of saved values, retain_graph, torch.autograd.grad capture, implicit
// gradients, accumulation into .grad, and long chains.
#include <catch2/catch.hpp>

#include "support/gradcheck.hpp"

#include <cmath>
#include <pthread.h>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

namespace {

Tensor A(const Shape& shape, double lo = -1.0, double hi = 1.0, bool requires_grad = true) {
  return agtrace::test::linspace_leaf(shape, lo, hi, requires_grad);
}
Tensor num(double v) { return ops::wrap_number(Value::real(v)); }
Value I(int64_t v) { return Value::integer(v); }
const std::optional<std::vector<int64_t>> kAll = std::nullopt;
Tensor total(const Tensor& t) { return ops::sum(t, kAll, false); }

void backward(const Tensor& root, bool retain_graph = false, Tensor grad = nullptr) {
  autograd::BackwardRequest req;
  req.roots = {root};
  if (grad) req.grad_roots = {grad};
  req.retain_graph = retain_graph;
  autograd::run_backward(req);
}

std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs, bool retain_graph = false,
                         bool allow_unused = false) {
  autograd::BackwardRequest req;
  req.roots = {root};
  req.inputs = inputs;
  req.capture = true;
  req.retain_graph = retain_graph;
  req.allow_unused = allow_unused;
  return autograd::run_backward(req);
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

void check_values(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t != nullptr);
  const std::vector<double> v = agtrace::to_values(t);
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(1e-5));
  }
}

// x = linspace(-1, 1, 6).reshape(2, 3), W = linspace(-0.5, 0.9, 12).reshape(3, 4):
// (x @ W).sum() gives x.grad = W.sum(1) per row (SUMMARY second_backward).
const std::vector<double> kXGrad = {-1.236364, 0.8, 2.836364, -1.236364, 0.8, 2.836364};

}  // namespace

// ---------------------------------------------------------------- release

TEST_CASE("engine: backward without retain_graph frees saved tensors", "[engine][release]") {
  Tensor x = A({2, 3}), W = A({3, 4}, -0.5, 0.9);
  Tensor y = total(ops::mm(x, W));
  auto mm = y->grad_fn->next[0].fn;
  REQUIRE(mm->name == "MmBackward0");
  backward(y);
  check_values(x->grad, kXGrad);
  CHECK(mm->released);
  CHECK(mm->saved_bytes() == 0);
  // Reading a saved tensor raises; sizes stay readable.
  ScenarioError read = raised([&] { mm->unpack("self"); });
  CHECK(read.kind == "saved_tensors_freed");
  CHECK(attr_repr(mm->attr("self_sym_sizes")) == "(2, 3)");
  CHECK(attr_repr(y->grad_fn->attr("self_sym_sizes")) == "(2, 4)");
  // A second backward raises, and x.grad is left as it was.
  ScenarioError again = raised([&] { backward(y); });
  CHECK(again.kind == "saved_tensors_freed");
  check_values(x->grad, kXGrad);
}

TEST_CASE("engine: a graph that saved no tensor can be backwarded twice", "[engine][release]") {
  Tensor x = A({2, 3});
  Tensor y = total(ops::add(x, num(1.0), I(1)));
  REQUIRE(y->grad_fn->name == "SumBackward0");
  REQUIRE(y->grad_fn->next[0].fn->name == "AddBackward0");
  backward(y);
  backward(y);
  check_values(x->grad, std::vector<double>(6, 2.0));
  CHECK(x->grad->version->version == 1);
}

TEST_CASE("engine: x * 2.0 saved a scalar tensor, so a second backward raises", "[engine][release]") {
  Tensor x = A({2, 3});
  Tensor y = total(ops::mul(x, num(2.0)));
  backward(y);
  CHECK(raised([&] { backward(y); }).kind == "saved_tensors_freed");
  check_values(x->grad, std::vector<double>(6, 2.0));
}

TEST_CASE("engine: retain_graph keeps saved tensors and grads accumulate", "[engine][release]") {
  Tensor x = A({2, 3}), W = A({3, 4}, -0.5, 0.9);
  Tensor y = total(ops::mm(x, W));
  auto mm = y->grad_fn->next[0].fn;
  backward(y, true);
  check_values(x->grad, kXGrad);
  CHECK_FALSE(mm->released);
  CHECK(mm->unpack("self") == x);
  Tensor first = x->grad;
  backward(y, true);
  std::vector<double> twice;
  for (double v : kXGrad) twice.push_back(2 * v);
  check_values(x->grad, twice);
  CHECK(x->grad == first);
  CHECK(x->grad->version->version == 1);
  backward(y);  // the last one may free
  std::vector<double> thrice;
  for (double v : kXGrad) thrice.push_back(3 * v);
  check_values(x->grad, thrice);
  CHECK(x->grad->version->version == 2);
  CHECK(mm->released);
  CHECK(raised([&] { backward(y); }).kind == "saved_tensors_freed");
}

// ---------------------------------------------------------------- accumulation into .grad

TEST_CASE("engine: .grad accumulates in place into the existing tensor", "[engine][accumulate]") {
  Tensor x = A({2, 3}, -1, 1, false), W = A({3, 4}, -0.5, 0.9);
  CHECK(W->grad == nullptr);
  backward(total(ops::mm(x, W)));
  Tensor g = W->grad;
  REQUIRE(g != nullptr);
  check_values(g, {-0.8, -0.8, -0.8, -0.8, 0, 0, 0, 0, 0.8, 0.8, 0.8, 0.8});
  CHECK(g->version->version == 0);
  CHECK(g->grad_fn == nullptr);
  CHECK_FALSE(g->requires_grad());
  CHECK(g->sizes == W->sizes);
  const auto storage = g->storage;
  backward(total(ops::mm(x, W)));
  CHECK(W->grad == g);                 // W.grad is g_first
  CHECK(W->grad->storage == storage);  // same data_ptr
  CHECK(g->version->version == 1);
  check_values(g, {-1.6, -1.6, -1.6, -1.6, 0, 0, 0, 0, 1.6, 1.6, 1.6, 1.6});
  // x did not require grad: no .grad.
  CHECK(x->grad == nullptr);
}

TEST_CASE("engine: gradients from several paths are summed before a node runs", "[engine][accumulate]") {
  Tensor x = A({2, 3});
  Tensor h = ops::mul(x, num(2.0));
  Tensor y = total(ops::add(ops::mul(h, h), h, I(1)));  // sum(4x^2 + 2x): grad 8x + 2
  backward(y);
  std::vector<double> expected;
  for (double v : agtrace::to_values(x)) expected.push_back(8 * v + 2);
  check_values(x->grad, expected);
  // non-leaf: no .grad
  CHECK(h->grad == nullptr);
}

TEST_CASE("engine: an explicit root gradient is used as given", "[engine][accumulate]") {
  Tensor x = A({2, 3});
  Tensor v = ops::mul(x, num(3.0));
  Tensor g = agtrace::tensor_from_values({2, 3}, DType::Float32, {1, 2, 3, 4, 5, 6});
  backward(v, false, g);
  check_values(x->grad, {3, 6, 9, 12, 15, 18});
}

// ---------------------------------------------------------------- errors

TEST_CASE("engine: implicit gradient errors", "[engine][errors]") {
  Tensor x = A({2, 3});
  SECTION("a root that does not require grad") {
    Tensor d = total(ops::detach(x));
    ScenarioError e = raised([&] { backward(d); });
    CHECK(e.kind == "no_grad_fn");
    CHECK(std::string(e.what()) == "element 0 of tensors does not require grad and does not have a grad_fn");
  }
  SECTION("an output computed under no_grad") {
    Tensor y;
    {
      autograd::GradModeGuard no_grad(false);
      y = total(ops::mul(x, x));
    }
    CHECK(raised([&] { backward(y); }).kind == "no_grad_fn");
  }
  SECTION("a non-scalar root without a gradient") {
    Tensor v = ops::mul(x, num(2.0));
    ScenarioError e = raised([&] { backward(v); });
    CHECK(e.kind == "grad_not_scalar");
    CHECK(std::string(e.what()) == "grad can be implicitly created only for scalar outputs");
    CHECK(x->grad == nullptr);
    CHECK(raised([&] { grad(v, {x}); }).kind == "grad_not_scalar");
  }
  SECTION("a root gradient of the wrong shape") {
    Tensor v = ops::mul(x, num(2.0));
    Tensor g = agtrace::tensor_from_values({3}, DType::Float32, {1, 1, 1});
    ScenarioError e = raised([&] { backward(v, false, g); });
    CHECK(e.kind == "shape_mismatch");
    CHECK(std::string(e.what()) ==
          "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a shape of "
          "torch.Size([2, 3]).");
  }
  SECTION("a saved tensor modified in place raises at backward") {
    Tensor e = ops::exp(x);
    ops::add_(e, num(1.0), I(1));
    ScenarioError err = raised([&] { backward(total(e)); });
    CHECK(err.kind == "saved_tensor_modified");
    CHECK(err.facts["node"] == "ExpBackward0");
    CHECK(err.facts["expected_version"] == 0);
    CHECK(err.facts["found_version"] == 1);
    CHECK(x->grad == nullptr);
  }
}

// ---------------------------------------------------------------- torch.autograd.grad

TEST_CASE("engine: capture mode returns gradients without touching .grad", "[engine][capture]") {
  Tensor x = A({2, 3});
  Tensor y = total(ops::pow_scalar(x, I(3)));
  auto g = grad(y, {x});
  REQUIRE(g.size() == 1);
  check_values(g[0], {3.0, 1.08, 0.12, 0.12, 1.08, 3.0});
  CHECK(x->grad == nullptr);
  // Not retained: a second call raises.
  CHECK(raised([&] { grad(y, {x}); }).kind == "saved_tensors_freed");

  SECTION("retain_graph: equal results, distinct objects, then backward still works") {
    Tensor y2 = total(ops::pow_scalar(x, I(3)));
    auto g1 = grad(y2, {x}, true);
    auto g2 = grad(y2, {x}, true);
    CHECK(agtrace::to_values(g1[0]) == agtrace::to_values(g2[0]));
    CHECK(g1[0] != g2[0]);
    CHECK(x->grad == nullptr);
    backward(y2);
    check_values(x->grad, {3.0, 1.08, 0.12, 0.12, 1.08, 3.0});
  }
}

TEST_CASE("engine: capture of a non-leaf input", "[engine][capture]") {
  Tensor x = A({2, 3}, -1, 1);
  Tensor h = ops::mul(x, num(2.0));
  Tensor y = total(ops::mul(h, h));
  auto g = grad(y, {h});
  std::vector<double> expected;
  for (double v : agtrace::to_values(h)) expected.push_back(2 * v);
  check_values(g[0], expected);
  CHECK(x->grad == nullptr);
  CHECK(h->grad == nullptr);
}

TEST_CASE("engine: capture with an unused input", "[engine][capture]") {
  Tensor x = A({2, 3}), u = A({3});
  SECTION("raises unless allow_unused") {
    Tensor w = total(ops::mul(x, num(2.0)));
    ScenarioError e = raised([&] { grad(w, {x, u}); });
    CHECK(e.kind == "unused_input");
    CHECK(std::string(e.what()).find("One of the differentiated Tensors appears to not have been used in the graph") ==
          0);
  }
  SECTION("allow_unused gives None for it") {
    Tensor w = total(ops::mul(x, num(2.0)));
    auto g = grad(w, {x, u}, false, true);
    REQUIRE(g.size() == 2);
    check_values(g[0], std::vector<double>(6, 2.0));
    CHECK(g[1] == nullptr);
    CHECK(x->grad == nullptr);
    CHECK(u->grad == nullptr);
  }
  SECTION("an input that does not require grad") {
    Tensor c = A({3}, -1, 1, false);
    Tensor w = total(ops::mul(x, num(2.0)));
    CHECK(raised([&] { grad(w, {c}); }).kind == "no_grad_fn");
  }
}

// ---------------------------------------------------------------- long chains

TEST_CASE("engine: a 10,000-op chain runs backward without recursion", "[engine][chain]") {
  Tensor x = A({3}, 0.5, 1.5, false);
  x->requires_grad_flag = true;
  {
    Tensor h = x;
    const int n = 10000;
    for (int i = 0; i < n; ++i) h = ops::add(h, num(0.001), I(1));
    Tensor y = total(ops::mul(h, h));
    backward(y);
    // d/dx sum((x + 10)^2) = 2 (x + 10), float32 rounding along the chain allowed for
    std::vector<double> xs = agtrace::to_values(x), hv = agtrace::to_values(h);
    const std::vector<double> g = agtrace::to_values(x->grad);
    for (size_t i = 0; i < 3; ++i) CHECK(g[i] == Approx(2 * hv[i]).epsilon(1e-6));
    CHECK(hv[0] == Approx(xs[0] + 10.0).epsilon(1e-3));
  }
  // The whole chain is destroyed when the last reference goes (no deep recursion crash).
  CHECK(x->grad != nullptr);
}

namespace {
// Builds a chain of n adds, runs backward and drops the graph, on a thread whose stack is
// only `stack_kb` KiB. Catch's assertions are not thread-safe, so it only reports back.
struct ChainRun {
  int n = 0;
  bool done = false;
  double grad0 = 0.0, h0 = 0.0;
};
void* run_chain(void* arg) {
  auto* run = static_cast<ChainRun*>(arg);
  Tensor x = agtrace::tensor_from_values({3}, DType::Float32, {1, 2, 3});
  x->requires_grad_flag = true;
  {
    Tensor h = x;
    for (int i = 0; i < run->n; ++i) h = ops::add(h, num(0.001), I(1));
    backward(total(ops::mul(h, h)));
    run->h0 = agtrace::to_values(h)[0];
  }  // the 20,000 nodes die here
  run->grad0 = agtrace::to_values(x->grad)[0];
  run->done = true;
  return nullptr;
}
}  // namespace

TEST_CASE("engine: a long chain is built, differentiated and freed on a small stack", "[engine][chain]") {
  // Regression: ~Node used to free its inputs' nodes recursively, one stack frame chain
  // per node; 20,000 nodes overflowed a 256 KiB stack (and ~300,000 the main thread's).
  ChainRun run;
  run.n = 20000;
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, run_chain, &run) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
  REQUIRE(run.done);
  CHECK(run.grad0 == Approx(2 * run.h0).epsilon(1e-6));
  CHECK(run.h0 == Approx(21.0).epsilon(1e-2));
}
