// layer_norm on the CPU in float32 and float64 (ops/layer_norm_cpu.hpp): every result bit
// for bit as torch 1.13 computes it. The references are hashes of torch's results made by
// tests/tools/layer_norm_cpu_reference.py, whose inputs (integers over odd divisors in
// double, rounded to the dtype) this test rebuilds exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/kernel_settings.hpp"
#include "support/node_checks.hpp"
#include "support/value_hash.hpp"

#include "autograd/engine.hpp"
#include "interp/value.hpp"
#include "ops/layer_norm_cpu.hpp"
#include "ops/model_ops.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
namespace ops = agtrace::ops;
namespace kernels = agtrace::kernels;
namespace autograd = agtrace::autograd;
using agtrace::test::fn;
using agtrace::test::fnv;

namespace {

enum class Params { Affine, Weight, None };

struct Case {
  int64_t rows, cols;
  Params params;
  int offset;
  DType dtype;
  int threads;
  // y, mean, rstd, the input, weight and bias gradients (0: no such result)
  std::array<uint64_t, 6> hashes;
};

Tensor leaf(const Shape& shape, DType dtype, const std::vector<double>& v, bool requires_grad) {
  Tensor t = agtrace::tensor_from_values(shape, dtype, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

}  // namespace

TEST_CASE("layer_norm_cpu: float32 and float64 results are torch 1.13's bits", "[nn][fidelity][layer_norm]") {
  // Printed by tests/tools/layer_norm_cpu_reference.py (torch 1.13 on the CPU).
  const std::vector<Case> cases = {
      {2, 5, Params::Affine, 0, DType::Float32, 1, {0xae3790f61c782865ull, 0xb6a41862e923f90aull, 0x985d98c94e4b8bc7ull, 0x3e640e3af708c006ull, 0x6072696dcfe9807bull, 0x52d9b72c127dcfcdull}},
      {3, 8, Params::None, 0, DType::Float32, 1, {0xe5d07eeefa85f34dull, 0x525222360a75ca1dull, 0x35ce4ed5175169caull, 0x37c3b536ef8c16eaull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {2, 20, Params::Weight, 0, DType::Float32, 1, {0x2e82f8e61a0e32e4ull, 0xdeda5e3b5a8b2438ull, 0x1b86a36ce57e01dbull, 0x3829b5432bc9f440ull, 0xd46b6966837cfd7bull, 0x0000000000000000ull}},
      {4, 256, Params::Affine, 0, DType::Float32, 1, {0x68bc44b34bb10214ull, 0xd06c7eb13f61b5faull, 0xfaebd9a98e6a98bfull, 0x2783413889c38c95ull, 0x93fcdf0e2e46d4e9ull, 0x4aef9fa3b52e356bull}},
      {3, 1100, Params::Affine, 50, DType::Float32, 1, {0x7099aa72cedfda0aull, 0x1c580d867444a085ull, 0x9c4a474578386a0full, 0xe4cc235b2d5c097dull, 0x367b5439cc861237ull, 0xb499b954f7245784ull}},
      {5, 300, Params::None, 3, DType::Float32, 1, {0x4a1d31b2efbbee76ull, 0x4f0553ffdd0ddf38ull, 0x8e2769c649c09e25ull, 0x07fa4923a5513c14ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {7, 64, Params::Affine, 0, DType::Float32, 2, {0x07d59417c3687ce4ull, 0xf83aa7f9abd245b2ull, 0x93ba79df15235683ull, 0x4b20ca61275af6daull, 0x1b1693d1968321fcull, 0x5d8d80dc4a49c138ull}},
      {4, 130, Params::Affine, 0, DType::Float64, 1, {0x7f9b5fff1c70a8e6ull, 0x60a79706461d4254ull, 0xcf40cd041f06b454ull, 0xb18826f9c9d225f4ull, 0x6b1be769c5f68ff8ull, 0x6f7474eb054cc45eull}},
      {3, 1100, Params::Weight, 50, DType::Float64, 1, {0xed674cb07686dcc3ull, 0xe395e104e1656bd5ull, 0x920903192cd2c487ull, 0x8eecc894982cea89ull, 0x4cb68593919f9a22ull, 0x0000000000000000ull}},
  };
  for (const Case& c : cases) {
    INFO("rows " << c.rows << ", cols " << c.cols << ", params " << static_cast<int>(c.params) << ", "
                 << agtrace::dtype_name(c.dtype) << ", threads " << c.threads);
    agtrace::test::ThreadsFor threads(c.threads);
    const int64_t n = c.rows * c.cols;
    std::vector<double> xv, gv, wv, bv;
    for (int64_t i = 0; i < n; ++i) {
      xv.push_back(static_cast<double>((37 * i + 11) % 1009 - 504) / 63 + c.offset);
      gv.push_back(static_cast<double>((7 * i) % 23 - 11) / 7);
    }
    for (int64_t j = 0; j < c.cols; ++j) {
      wv.push_back(1 + static_cast<double>((7 * j) % 13 - 6) / 31);
      bv.push_back(static_cast<double>((5 * j) % 11 - 5) / 61);
    }
    Tensor x = leaf({c.rows, c.cols}, c.dtype, xv, true);
    Tensor w = c.params != Params::None ? leaf({c.cols}, c.dtype, wv, true) : nullptr;
    Tensor b = c.params == Params::Affine ? leaf({c.cols}, c.dtype, bv, true) : nullptr;
    Tensor y = ops::layer_norm(x, {c.cols}, w, b, 1e-5);
    CHECK(fnv(y) == c.hashes[0]);
    CHECK(fnv(fn(y).unpack("result1")) == c.hashes[1]);
    CHECK(fnv(fn(y).unpack("result2")) == c.hashes[2]);
    autograd::BackwardRequest req;
    req.roots = {ops::sum(ops::mul(y, leaf({c.rows, c.cols}, c.dtype, gv, false)), std::nullopt, false)};
    autograd::run_backward(req);
    CHECK(fnv(x->grad) == c.hashes[3]);
    if (w) CHECK(fnv(w->grad) == c.hashes[4]);
    if (b) CHECK(fnv(b->grad) == c.hashes[5]);
  }
}

TEST_CASE("layer_norm_cpu: group_norm's float32 and float64 results are torch 1.13's bits",
          "[nn][fidelity][layer_norm]") {
  struct GroupCase {
    int64_t batch, channels, hxw, groups;
    Params params;
    int offset;
    DType dtype;
    std::array<uint64_t, 3> hashes;  // y, mean, rstd
  };
  // Printed by tests/tools/layer_norm_cpu_reference.py after the layer_norm table.
  const std::vector<GroupCase> cases = {
      {2, 6, 5, 3, Params::Affine, 0, DType::Float32, {0x0435fb4776922a53ull, 0x4a3d2e29cf471ab5ull, 0x39486c1443a34311ull}},
      {3, 4, 49, 2, Params::None, 2, DType::Float32, {0x21282fe239530bcbull, 0x9515e96b69e3a715ull, 0x02fb918662afaf0eull}},
      {2, 8, 64, 4, Params::Weight, 0, DType::Float32, {0xfe4c531f78e0edefull, 0xac1a31d5112e0195ull, 0x8b77b3362fbee5feull}},
      {1, 2, 700, 1, Params::Affine, 50, DType::Float32, {0xfacbd3ebf6861a48ull, 0xd0cd610e7345d12full, 0xf866740deeb07d9cull}},
      {2, 6, 33, 2, Params::Affine, 0, DType::Float64, {0x4d6333b9f5084b88ull, 0x148438f903444cfaull, 0xb6e09d2a6e942847ull}},
      {2, 4, 17, 4, Params::None, 3, DType::Float64, {0xdac3326a463ab570ull, 0x32bde5a74db9a598ull, 0x9b5e24ea1a00aed6ull}},
  };
  for (const GroupCase& c : cases) {
    INFO("batch " << c.batch << ", channels " << c.channels << ", HxW " << c.hxw << ", groups " << c.groups << ", "
                  << agtrace::dtype_name(c.dtype));
    const int64_t n = c.batch * c.channels * c.hxw;
    std::vector<double> xv, wv, bv;
    for (int64_t i = 0; i < n; ++i) xv.push_back(static_cast<double>((37 * i + 11) % 1009 - 504) / 63 + c.offset);
    for (int64_t j = 0; j < c.channels; ++j) {
      wv.push_back(1 + static_cast<double>((7 * j) % 13 - 6) / 31);
      bv.push_back(static_cast<double>((5 * j) % 11 - 5) / 61);
    }
    Tensor x = leaf({c.batch, c.channels, c.hxw}, c.dtype, xv, true);
    Tensor w = c.params != Params::None ? leaf({c.channels}, c.dtype, wv, true) : nullptr;
    Tensor b = c.params == Params::Affine ? leaf({c.channels}, c.dtype, bv, true) : nullptr;
    Tensor y = ops::group_norm(x, c.groups, w, b, 1e-5);
    CHECK(fnv(y) == c.hashes[0]);
    CHECK(fnv(fn(y).unpack("result1")) == c.hashes[1]);
    CHECK(fnv(fn(y).unpack("result2")) == c.hashes[2]);
  }
}

TEST_CASE("layer_norm_cpu: empty rows and constant rows give torch's NaN and inf", "[nn][fidelity][layer_norm]") {
  // torch.native_layer_norm(torch.randn(3, 0), [0], None, None, 1e-5): mean 0, rstd nan.
  Tensor empty = ops::layer_norm(leaf({3, 0}, DType::Float32, {}, true), {0}, nullptr, nullptr, 1e-5);
  for (double v : agtrace::to_values(fn(empty).unpack("result1"))) CHECK(v == 0.0);
  for (double v : agtrace::to_values(fn(empty).unpack("result2"))) CHECK(std::isnan(v));
  CHECK(agtrace::to_values(fn(empty).unpack("result2")).size() == 3);
  // torch.native_layer_norm(torch.full((2, 5), 3.0), [5], None, None, 0.0): rstd inf, y nan.
  const std::vector<double> constant(10, 3.0);
  Tensor yc = ops::layer_norm(leaf({2, 5}, DType::Float32, constant, true), {5}, nullptr, nullptr, 0.0);
  for (double v : agtrace::to_values(yc)) CHECK(std::isnan(v));
  for (double v : agtrace::to_values(fn(yc).unpack("result2"))) CHECK(std::isinf(v));
  for (double v : agtrace::to_values(fn(yc).unpack("result1"))) CHECK(v == 3.0);
}

TEST_CASE("layer_norm_cpu: thread ranges follow at::parallel_for's OpenMP split", "[nn][layer_norm]") {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(ops::layer_norm_cpu::thread_row_ranges(7, 1) == Ranges{{0, 7}});
  CHECK(ops::layer_norm_cpu::thread_row_ranges(7, 2) == Ranges{{0, 4}, {4, 7}});
  CHECK(ops::layer_norm_cpu::thread_row_ranges(10, 4) == Ranges{{0, 3}, {3, 6}, {6, 9}, {9, 10}});
  CHECK(ops::layer_norm_cpu::thread_row_ranges(9, 4) == Ranges{{0, 3}, {3, 6}, {6, 9}});  // 3 chunks of ceil(9/4)
  CHECK(ops::layer_norm_cpu::thread_row_ranges(1, 8) == Ranges{{0, 1}});
  CHECK(ops::layer_norm_cpu::thread_row_ranges(0, 2).empty());
}
