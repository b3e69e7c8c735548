// batch_norm on the CPU for contiguous float32 inputs, NCHW after a convolution and [N, C]
// (one element per channel and sample, torch's channels-last kernels, whose sums follow the
// thread count): every result bit for bit as torch 1.13 computes it, the output, the saved
// statistics, the running buffers and the gradients. The references are hashes of
// torch's results made by tests/tools/batch_norm_cpu_reference.py, whose inputs (integers
// over odd divisors in double, rounded to float32) this test rebuilds exactly.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "support/kernel_settings.hpp"
#include "support/node_checks.hpp"
#include "support/value_hash.hpp"

#include "autograd/engine.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "ops/nn.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
namespace ops = agtrace::ops;
namespace kernels = agtrace::kernels;
using agtrace::test::fn;
using agtrace::test::fnv;

namespace {

enum class Params { Affine, None };

struct Case {
  int64_t batch, channels;
  std::vector<int64_t> spatial;
  bool training;
  Params params;
  int offset;
  // output, saved mean, saved invstd (0 in evaluation), running mean and variance after,
  // input, weight and bias gradients (0: no such gradient)
  std::array<uint64_t, 8> hashes;
  int threads = 1;  // agtrace's and torch's thread count (the channels-last sums follow it)
};

Tensor floats(const Shape& shape, const std::vector<double>& v, bool requires_grad = false) {
  Tensor t = agtrace::tensor_from_values(shape, DType::Float32, v);
  t->requires_grad_flag = requires_grad;
  return t;
}

}  // namespace

TEST_CASE("batch_norm: contiguous float32 results are torch 1.13's bits", "[nn][fidelity][batch_norm]") {
  // Printed by tests/tools/batch_norm_cpu_reference.py (torch 1.13 on the CPU, on each case's
  // thread count).
  const std::vector<Case> cases = {
      {4, 3, {3, 3}, true, Params::Affine, 0, {0x73d7d036c4690d7eull, 0xde1673c84ca64c16ull, 0x7607f6840c397e7bull, 0x5f5ca5efae3047e3ull, 0x227beb9abbeddd3bull, 0xfb9d7b2c3edcc29aull, 0xe5503e4e08d4cc87ull, 0x16056a23390c9ba6ull}, 1},
      {6, 4, {7}, true, Params::None, 2, {0xa8de3101efa1d1e0ull, 0x212c1e0eb98d9822ull, 0x9d3aa0c89ebd0f4full, 0x41e554814f0f7e76ull, 0x44e77e7c3e2068b5ull, 0xe565b1d3a68629b9ull, 0x0000000000000000ull, 0x0000000000000000ull}, 1},
      {8, 16, {16, 16}, true, Params::Affine, 0, {0x683c1924c22452e6ull, 0x4b58a94f75d3eaf7ull, 0x70be901391859ee7ull, 0x6021aa6655fc9a07ull, 0x68d11960b1a3b23dull, 0x33495fe905e66b40ull, 0xce249a9022f36013ull, 0xc2954805431c6cabull}, 1},
      {2, 5, {33, 31}, true, Params::Affine, 40, {0xda49c659de08c7e9ull, 0xfcaf357a3ee9110dull, 0x5f03fc15229cbe7full, 0xd88e5159052d61adull, 0xe513d6ca7940d23dull, 0x2f45a3d291698a1eull, 0x99951e155961d641ull, 0x0825c881b6243f5aull}, 1},
      {4, 3, {3, 3}, false, Params::Affine, 0, {0xde99db93475dceabull, 0x0000000000000000ull, 0x0000000000000000ull, 0xca5428bf6d21b381ull, 0x794bb7b1111f7adeull, 0x8c95f32a63e26535ull, 0x61f0750e3747b10bull, 0x16056a23390c9ba6ull}, 1},
      {3, 6, {5, 4}, false, Params::None, 1, {0xa093749133eddd04ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x16c6acac20c62b73ull, 0x163b604605615c80ull, 0x5e8423a393eec25bull, 0x0000000000000000ull, 0x0000000000000000ull}, 1},
      {16, 5, {}, true, Params::Affine, 0, {0xb370ed186189d0cfull, 0x9af1aa05565026bcull, 0x5b255dc802a17747ull, 0x082cd0e751e61321ull, 0xbb07751ec19ae5b7ull, 0x0c23cfbf93bf1327ull, 0x548cec302dd87eadull, 0xb0afd1ac68fbdca8ull}, 1},
      {16, 5, {}, true, Params::Affine, 0, {0x55ef08703563ffb1ull, 0x6ef60fbbdeb792f0ull, 0xe9de683fc7d753a8ull, 0x1ca6d301c43c5382ull, 0xf62bb7a78c6a4aa8ull, 0x0062504ece548a54ull, 0x3771f1b6ce580571ull, 0xc25a09fc989adf70ull}, 2},
      {33, 12, {}, true, Params::Affine, 3, {0x0d704a58df910d80ull, 0xe23da7b6b88b1ad7ull, 0xb46199d8a13e3e9aull, 0x5de4c45aabf00a1full, 0x860d86add3e2494dull, 0xb446fedb1786da91ull, 0x9a46e3a758b29406ull, 0x7262580af6dc08abull}, 3},
      {3, 8, {}, true, Params::None, 0, {0xef74568a510c198full, 0xedfa04a2b616831aull, 0x1db99a36c7bdb16dull, 0x7580228e1eef1e94ull, 0x592c27a91bdb8799ull, 0x175f3df8c164f9a4ull, 0x0000000000000000ull, 0x0000000000000000ull}, 4},
      {8, 6, {1, 1}, true, Params::Affine, 1, {0x64d0e9d03c39ce77ull, 0x56c9c6a1fb120694ull, 0xcfd0409672ba915full, 0x81da8ba416450332ull, 0xd7410a656f78c3bdull, 0x0434e42f153c2099ull, 0x2504daddb3f5949dull, 0xd0798d117466ee45ull}, 2},
      {10, 4, {}, false, Params::Affine, 0, {0x12b2a7933eb6611cull, 0x0000000000000000ull, 0x0000000000000000ull, 0x4089d315688d38f3ull, 0x4192fe473394aa44ull, 0x08d60b167fa12c6aull, 0x4110a480f2d7fcceull, 0x7fc4fac99a3b4972ull}, 2},
  };
  // The float32 kernels and the general path (fast paths off) give the same bits.
  const bool fast = GENERATE(true, false);
  agtrace::test::FastPathsFor paths(fast);
  for (const Case& c : cases) {
    int64_t inner = 1;
    for (int64_t s : c.spatial) inner *= s;
    INFO("batch " << c.batch << ", channels " << c.channels << ", inner " << inner << ", training " << c.training
                  << ", params " << static_cast<int>(c.params) << ", threads " << c.threads << ", fast paths " << fast);
    agtrace::test::ThreadsFor threads(c.threads);
    const int64_t n = c.batch * c.channels * inner;
    std::vector<double> xv, gv, wv, bv, rmv, rvv;
    for (int64_t i = 0; i < n; ++i) {
      xv.push_back(static_cast<double>((37 * i + 11) % 1009 - 504) / 63 + c.offset);
      gv.push_back(static_cast<double>((7 * i) % 23 - 11) / 7);
    }
    for (int64_t j = 0; j < c.channels; ++j) {
      wv.push_back(1 + static_cast<double>((7 * j) % 13 - 6) / 31);
      bv.push_back(static_cast<double>((5 * j) % 11 - 5) / 61);
      rmv.push_back(static_cast<double>((3 * j) % 7 - 3) / 29);
      rvv.push_back(1 + static_cast<double>((5 * j) % 9) / 17);
    }
    Shape shape{c.batch, c.channels};
    shape.insert(shape.end(), c.spatial.begin(), c.spatial.end());
    Tensor x = floats(shape, xv, true);
    Tensor w = c.params == Params::Affine ? floats({c.channels}, wv, true) : nullptr;
    Tensor b = c.params == Params::Affine ? floats({c.channels}, bv, true) : nullptr;
    Tensor rm = floats({c.channels}, rmv), rv = floats({c.channels}, rvv);
    Tensor y = ops::batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5);
    CHECK(fnv(y) == c.hashes[0]);
    if (c.training) {
      CHECK(fnv(fn(y).unpack("result1")) == c.hashes[1]);
      CHECK(fnv(fn(y).unpack("result2")) == c.hashes[2]);
    }
    CHECK(fnv(rm) == c.hashes[3]);
    CHECK(fnv(rv) == c.hashes[4]);
    // The gradient reaching NativeBatchNormBackward0 is g itself (MulBackward0 of y * g).
    agtrace::autograd::BackwardRequest req;
    req.roots = {ops::sum(ops::mul(y, floats(shape, gv)), std::nullopt, false)};
    agtrace::autograd::run_backward(req);
    CHECK(fnv(x->grad) == c.hashes[5]);
    if (w) CHECK(fnv(w->grad) == c.hashes[6]);
    if (b) CHECK(fnv(b->grad) == c.hashes[7]);
  }
}
