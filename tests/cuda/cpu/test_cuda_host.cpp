// The host side of lib/cuda, which runs without a GPU: index arithmetic, the checks every
// launcher makes before it launches, what the runtime says, and that a launch's or an
// allocation's failure comes back as CudaError naming the operation. Only a CUDA build has
// lib/cuda's code; a CPU build compiles this file to nothing.
#ifdef AGTRACE_HAVE_CUDA
#include <catch2/catch.hpp>

#include <string>

#include "cuda/allocator.hpp"
#include "cuda/batch_norm.cuh"
#include "cuda/conv.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/indexing.cuh"
#include "cuda/layer_norm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/pooling.cuh"
#include "cuda/reduce.cuh"
#include "cuda/runtime.hpp"
#include "cuda/softmax.cuh"
#include "cuda/strided.hpp"
#include "tensor/tensor.hpp"

using namespace agtrace;
using namespace agtrace::cuda;

namespace {

// A reference to no memory: the launchers must reject these before touching it.
DeviceTensorRef dref(const Shape& sizes, DType d = DType::Float32, Shape strides = {}, int64_t offset = 0) {
  static char dummy[8];
  if (strides.empty()) strides = contiguous_strides(sizes);
  return DeviceTensorRef{dummy, d, sizes, strides, offset};
}

// Runs f, which must throw CudaError whose message holds every one of `parts`.
template <typename F>
void throws_naming(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no CudaError");
  } catch (const CudaError& e) {
    const std::string m = e.what();
    INFO(m);
    for (const std::string& p : parts) CHECK(m.find(p) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("CUDA host: Strided walks transposed, offset and broadcast tensors", "[cuda_host]") {
  // A [3, 4] view transposed from a [4, 3] storage at offset 5: element (i, j) at 5 + i + 3 j.
  const Strided t = make_strided(dref({3, 4}, DType::Float32, {1, 3}, 5), "t");
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(t.at(i * 4 + j) == 5 + i + 3 * j);
  // [4] broadcast to [2, 3, 4]: element (a, b, c) at c; [3, 1] to [2, 3, 4]: at b.
  const Strided row = make_broadcast(dref({4}), {2, 3, 4}, "b");
  const Strided col = make_broadcast(dref({3, 1}), {2, 3, 4}, "b");
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) {
        CHECK(row.at((a * 3 + b) * 4 + c) == c);
        CHECK(col.at((a * 3 + b) * 4 + c) == b);
      }
  CHECK(make_strided(dref({}), "scalar").at(0) == 0);
  throws_naming([] { make_broadcast(dref({3}), {2, 4}, "mul"); }, {"mul", "broadcast"});
  throws_naming([] { make_strided(dref(Shape(9, 1)), "exp"); }, {"exp", "8 dims"});
}

TEST_CASE("CUDA host: split_dims gives rows and reduced parts in order", "[cuda_host]") {
  // [2, 3, 4] contiguous (strides 12, 4, 1) at offset 7, reducing dims 0 and 2.
  Strided outer, inner;
  split_dims(dref({2, 3, 4}, DType::Float32, {}, 7), dims_mask(3, {0, -1}, "sum"), outer, inner, "sum");
  REQUIRE(outer.ndim == 1);
  REQUIRE(inner.ndim == 2);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c) CHECK(outer.at(b) + inner.at(a * 4 + c) == 7 + a * 12 + b * 4 + c);
  CHECK(dims_mask(2, {}, "sum") == std::vector<bool>{true, true});
  throws_naming([] { dims_mask(2, {2}, "amax"); }, {"amax", "dim 2"});
}

TEST_CASE("CUDA host: launchers reject bad arguments before launching, naming the op", "[cuda_host]") {
  throws_naming([] { binary(pw::BinaryOp::Mul, dref({3, 4}), dref({3, 4}), dref({5})); }, {"mul", "broadcast"});
  throws_naming([] { ternary(pw::TernaryOp::Where, dref({2}), dref({3}), dref({2}), dref({2})); }, {"where"});
  throws_naming([] { reduce(ReduceOp::Amax, dref({3}), dref({3, 0}), {1}, false); }, {"amax", "size 0"});
  throws_naming([] { reduce(ReduceOp::Sum, dref({3, 1}), dref({3, 4}), {1}, false); }, {"sum", "dims"});
  throws_naming([] { max_dim(dref({3}), dref({3}, DType::Float32), dref({3, 4}), 1, false); }, {"max", "int64"});
  throws_naming([] { softmax(dref({2, 2}, DType::Int64), dref({2, 2}, DType::Int64), 0, true); },
                {"unsupported dtype for CUDA kernel log_softmax: int64"});
  throws_naming([] { softmax_backward(dref({2, 2}), dref({2, 3}), dref({2, 2}), 1, false); }, {"softmax_backward"});
  throws_naming([] { matmul(dref({2, 2}, DType::Int64), dref({2, 2}, DType::Int64), dref({2, 2}, DType::Int64)); },
                {"unsupported dtype for CUDA kernel mm: int64"});
  throws_naming([] { matmul(dref({2, 3}), dref({2, 4}), dref({3, 3})); }, {"mm", "shapes"});
  throws_naming([] { matmul(dref({2, 2, 3}), dref({2, 2, 4}), dref({3, 4, 3})); }, {"bmm", "shapes"});
  throws_naming([] { layer_norm(dref({2, 3}), dref({2}), dref({2}), dref({2, 3}), nullptr, nullptr, 3, 1e-5); },
                {"layer_norm", "normalized_ndim"});
  throws_naming(
      [] {
        const DeviceTensorRef w = dref({4});
        layer_norm(dref({2, 3}), dref({2}), dref({2}), dref({2, 3}), &w, nullptr, 1, 1e-5);
      },
      {"layer_norm", "normalized shape"});
  throws_naming([] { gather(dref({2}), dref({3}), 0, dref({2}, DType::Float32)); }, {"gather", "int64"});
  throws_naming([] { scatter(dref({3}, DType::Float16), 0, dref({2}, DType::Int64), dref({2}, DType::Float16), true); },
                {"unsupported dtype for CUDA kernel scatter_add: float16"});
  throws_naming([] { index_select(dref({2, 3}), dref({4, 3}), 0, dref({2, 2}, DType::Int64)); }, {"index_select", "1-D"});
  throws_naming([] { view_backward(dref({3, 5}), dref({2, 3}), {5, 2}, 6); }, {"view_backward", "outside"});
  throws_naming([] { view_backward(dref({3, 5}, DType::Float32, {1, 3}), dref({2, 3}), {5, 2}, 0); },
                {"view_backward", "contiguous"});
  throws_naming([] { conv2d(dref({1, 4, 3, 3}), dref({1, 3, 5, 5}), dref({4, 2, 3, 3}), nullptr, Conv2dGeometry{}); },
                {"conv2d", "do not match"});
  throws_naming(
      [] { conv2d(dref({1, 4, 3, 3}, DType::Int64), dref({1, 2, 5, 5}, DType::Int64), dref({4, 2, 3, 3}, DType::Int64), nullptr, Conv2dGeometry{}); },
      {"unsupported dtype for CUDA kernel conv2d: int64"});
  throws_naming([] { batch_norm(dref({2, 3}), nullptr, nullptr, dref({2, 3}), nullptr, nullptr, nullptr, nullptr, false, 0.1, 1e-5); },
                {"batch_norm", "running_mean"});
  throws_naming(
      [] {
        const DeviceTensorRef w = dref({4});
        batch_norm(dref({2, 3}), nullptr, nullptr, dref({2, 3}), &w, nullptr, nullptr, nullptr, true, 0.1, 1e-5);
      },
      {"batch_norm", "per channel"});
  throws_naming([] { max_pool2d(dref({2, 3, 3}), dref({2, 3, 3}, DType::Float32), dref({2, 6, 6}), Pool2dGeometry{}); },
                {"max_pool2d", "int64"});
  throws_naming([] { max_pool2d(dref({2, 3, 3}), dref({2, 3, 2}, DType::Int64), dref({2, 6, 6}), Pool2dGeometry{}); },
                {"max_pool2d", "do not match"});
  throws_naming(
      [] { max_pool2d_backward(dref({6, 6}), dref({3, 3}), dref({3, 3}, DType::Int64), Pool2dGeometry{0, 1}); },
      {"max_pool2d_backward", "positive"});
}

TEST_CASE("CUDA host: the runtime's answer, and failures named by operation", "[cuda_host]") {
  const RuntimeStatus st = runtime_status();
  if (st.usable) {
    CHECK(st.device_count > 0);
    CHECK_FALSE(st.device_name.empty());
    return;
  }
  // No usable GPU (this machine, CI): the runtime's reason, and every call into it fails
  // with an error that names the operation and quotes the runtime.
  CHECK_FALSE(st.reason.empty());
  throws_naming([] { device_alloc(1024, "probe_alloc"); }, {"probe_alloc", "cudaMalloc", runtime_status().reason});
  CHECK(allocator_stats().requested_live == 0);
  CHECK(allocator_stats().reserved_live == 0);
  // A launch with valid arguments gets as far as the launch, which fails and is named.
  const DeviceTensorRef a = dref({4});
  throws_naming([&] { unary(pw::UnaryOp::Sigmoid, a, a); }, {"sigmoid", "launch", st.reason});
  throws_naming([&] { binary(pw::BinaryOp::GeluBackward, a, a, a); }, {"gelu_backward", "launch"});
}
#endif  // AGTRACE_HAVE_CUDA
