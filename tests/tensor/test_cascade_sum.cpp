// Sums of contiguous float32 tensors bit for bit as torch 1.13 computes them on the CPU, in
// cascade_sum's float orders (tensor/cascade_sum.hpp): over leading dims (x.sum(0), a bias
// gradient's sum over batch and tokens), over trailing dims (row sums), and of every element,
// which torch splits between its threads from 32,768 elements on. The references are hashes of
// torch's results made by tests/tools/sum_cpu_reference.py, whose inputs (integers over 63
// times powers of two, in double, rounded to float32) this test rebuilds exactly.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/kernel_settings.hpp"
#include "support/value_hash.hpp"

#include "tensor/cascade_sum.hpp"
#include "tensor/kernels.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Shape;
using agtrace::Tensor;
namespace kernels = agtrace::kernels;

namespace {

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
  uint64_t hash;
};

Tensor inputs(const Shape& shape) {
  const int64_t n = agtrace::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double scale = std::ldexp(1.0, static_cast<int>((7 * i) % 13) - 6);
    v[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>((37 * i + 11) % 1009 - 504) / 63 * scale);
  }
  return agtrace::tensor_from_values(shape, DType::Float32, v);
}

}  // namespace

TEST_CASE("sums over leading or trailing dims of contiguous float32 give torch 1.13's bits", "[kernels][reduce][fidelity]") {
  // Printed by tests/tools/sum_cpu_reference.py (torch 1.13 on the CPU; one and two threads
  // give the same results there).
  const std::vector<Case> cases = {
      {{5, 10}, {0}, 0x5623978c6cfb416dull},
      {{16, 32}, {0}, 0x94f2b512b9ef2934ull},
      {{17, 100}, {0}, 0x0fbc44139f15c647ull},
      {{512, 384}, {0}, 0x1b0d96cb2fe5b8b3ull},
      {{1000, 45}, {0}, 0x2144823ee7850518ull},
      {{33, 7}, {0}, 0x750457f487a1166aull},
      {{100, 3}, {0}, 0x2279a40c6686044full},
      {{64, 4}, {0}, 0xd8672d1ff1431a43ull},
      {{9, 5}, {0}, 0x5308c414aa8fffc6ull},
      {{3, 40}, {0}, 0x1094f51a87dabdbcull},
      {{1, 12}, {0}, 0x3850fbb552edbc8eull},
      {{4, 100, 96}, {0, 1}, 0x74954f00e6180d6bull},
      {{8, 64, 65}, {0, 1}, 0x7d44a9ec91b06e6cull},
      {{2, 3, 50}, {0}, 0x0c017777fa78b9bcull},
      {{1048637, 4}, {0}, 0x3b4fd4069f22b00full},
      {{4194319, 2}, {0}, 0x422dbadad3f18de7ull},
      // over trailing dims: rows
      {{5, 10}, {1}, 0x4553dd04aa036bccull},
      {{3, 7}, {1}, 0x21997ea8c5096ab6ull},
      {{16, 3}, {1}, 0x1d864fa4ba6b0fb3ull},
      {{4, 100}, {1}, 0x51cac1189f0a235full},
      {{128, 512}, {1}, 0xdaad52185dfaba80ull},
      {{2, 8}, {1}, 0x7c60a06e69e33792ull},
      {{7, 33}, {1}, 0x274f737dab61017cull},
      {{3, 4, 25}, {1, 2}, 0xaf2cb92b8bb65770ull},
      {{6, 1}, {1}, 0xde052cfd382fd249ull},
  };
  // The float32 path, on one thread or with the columns or rows split between two, and the
  // general path (fast paths off) give the same bits.
  const bool fast = GENERATE(true, false);
  const int threads = GENERATE(1, 2);
  agtrace::test::FastPathsFor paths(fast);
  agtrace::test::ThreadsFor split(threads);
  for (const Case& c : cases) {
    INFO("shape " << agtrace::shape_str(c.shape) << ", fast paths " << fast << ", threads " << threads);
    Tensor x = inputs(c.shape);
    CHECK(agtrace::test::fnv(kernels::sum(x, c.dims, false, DType::Float32)) == c.hash);
  }
}

TEST_CASE("sums of every element give torch 1.13's bits on one to four threads", "[kernels][reduce][fidelity]") {
  // Printed by tests/tools/sum_cpu_reference.py: the size, then the hash on 1, 2, 3 and 4
  // threads (torch.set_num_threads; agtrace's --threads).
  struct Full {
    int64_t n;
    std::array<uint64_t, 4> by_threads;
  };
  const std::vector<Full> sums = {
      {1, {0x7658978541b4cf88ull, 0x7658978541b4cf88ull, 0x7658978541b4cf88ull, 0x7658978541b4cf88ull}},
      {3, {0x632b6482d31935d2ull, 0x632b6482d31935d2ull, 0x632b6482d31935d2ull, 0x632b6482d31935d2ull}},
      {7, {0x8e4a28d00777bcaaull, 0x8e4a28d00777bcaaull, 0x8e4a28d00777bcaaull, 0x8e4a28d00777bcaaull}},
      {8, {0x471a269208e62547ull, 0x471a269208e62547ull, 0x471a269208e62547ull, 0x471a269208e62547ull}},
      {9, {0xe24d975d6ba7dfe9ull, 0xe24d975d6ba7dfe9ull, 0xe24d975d6ba7dfe9ull, 0xe24d975d6ba7dfe9ull}},
      {31, {0xe8e6d92c5ee70a71ull, 0xe8e6d92c5ee70a71ull, 0xe8e6d92c5ee70a71ull, 0xe8e6d92c5ee70a71ull}},
      {33, {0x7c748ad7ceeb4770ull, 0x7c748ad7ceeb4770ull, 0x7c748ad7ceeb4770ull, 0x7c748ad7ceeb4770ull}},
      {1000, {0x3702d2d7a78ab93bull, 0x3702d2d7a78ab93bull, 0x3702d2d7a78ab93bull, 0x3702d2d7a78ab93bull}},
      {4097, {0x862cffe9d230a0b3ull, 0x862cffe9d230a0b3ull, 0x862cffe9d230a0b3ull, 0x862cffe9d230a0b3ull}},
      {32767, {0xe29c0c58f6f644a2ull, 0xe29c0c58f6f644a2ull, 0xe29c0c58f6f644a2ull, 0xe29c0c58f6f644a2ull}},
      {32768, {0x0f47073f0d2000e2ull, 0x0f47073f0d2000e2ull, 0x0f47073f0d2000e2ull, 0x0f47073f0d2000e2ull}},
      {32769, {0xe45cb06fe91e2475ull, 0x7273e8a9c0357c13ull, 0x7273e8a9c0357c13ull, 0x7273e8a9c0357c13ull}},
      {100000, {0xceb1260f56e36b59ull, 0x71ac502f445678a2ull, 0x2411f6722767bde5ull, 0x247673d735887ab5ull}},
      {262147, {0xcd55a65f0950d9b5ull, 0x4e3f8cf0381389b1ull, 0xa46778029a910b00ull, 0xcd55a65f0950d9b5ull}},
      {1000001, {0x1340ca5c8f74bee1ull, 0x304f1662c7e9bfc1ull, 0x475009cda44fa2bcull, 0x5579a8c0de087676ull}},
  };
  const bool fast = GENERATE(true, false);
  agtrace::test::FastPathsFor paths(fast);
  for (int threads = 1; threads <= 4; ++threads) {
    agtrace::test::ThreadsFor split(threads);
    for (const Full& c : sums) {
      INFO(c.n << " elements, " << threads << " threads, fast paths " << fast);
      const Tensor x = inputs({c.n});
      CHECK(agtrace::test::fnv(kernels::sum(x, {}, false, DType::Float32)) == c.by_threads[static_cast<size_t>(threads - 1)]);
    }
  }
}

TEST_CASE("float64 sums give torch 1.13's bits in its orders for vectors of four", "[kernels][reduce][fidelity]") {
  // Printed by tests/tools/sum_cpu_reference.py: shape, reduced dims (empty: every element),
  // then the hash on 1, 2, 3 and 4 threads. The inputs are the float32 tests' formula kept in
  // double.
  struct F64 {
    Shape shape;
    std::vector<int64_t> dims;
    std::array<uint64_t, 4> by_threads;
  };
  const std::vector<F64> sums = {
      {{512, 384}, {0}, {0x1ee5ae0a877746b9ull, 0x1ee5ae0a877746b9ull, 0x1ee5ae0a877746b9ull, 0x1ee5ae0a877746b9ull}},
      {{17, 3}, {0}, {0xfdc5790632ce170eull, 0xfdc5790632ce170eull, 0xfdc5790632ce170eull, 0xfdc5790632ce170eull}},
      {{33, 7}, {0}, {0xaf58f8f2760bc872ull, 0xaf58f8f2760bc872ull, 0xaf58f8f2760bc872ull, 0xaf58f8f2760bc872ull}},
      {{100, 17}, {0}, {0x9d2290d798fb5f3bull, 0x9d2290d798fb5f3bull, 0x9d2290d798fb5f3bull, 0x9d2290d798fb5f3bull}},
      {{5, 10}, {1}, {0x2b981c7df39816cfull, 0x2b981c7df39816cfull, 0x2b981c7df39816cfull, 0x2b981c7df39816cfull}},
      {{9, 2}, {1}, {0x358a3b0d48350e96ull, 0x358a3b0d48350e96ull, 0x358a3b0d48350e96ull, 0x358a3b0d48350e96ull}},
      {{100, 17}, {1}, {0x507d184daf16d3efull, 0x507d184daf16d3efull, 0x507d184daf16d3efull, 0x507d184daf16d3efull}},
      {{3, 4, 25}, {1, 2}, {0xc1e24b12ce00adc9ull, 0xc1e24b12ce00adc9ull, 0xc1e24b12ce00adc9ull, 0xc1e24b12ce00adc9ull}},
      {{3}, {}, {0x52d69157e5b1076bull, 0x52d69157e5b1076bull, 0x52d69157e5b1076bull, 0x52d69157e5b1076bull}},
      {{5}, {}, {0x65f8071ad466e226ull, 0x65f8071ad466e226ull, 0x65f8071ad466e226ull, 0x65f8071ad466e226ull}},
      {{1001}, {}, {0x83fbf101fcb31d5aull, 0x83fbf101fcb31d5aull, 0x83fbf101fcb31d5aull, 0x83fbf101fcb31d5aull}},
      {{32769}, {}, {0x4ca61d13c38f947aull, 0x77695ba748855e47ull, 0x77695ba748855e47ull, 0x77695ba748855e47ull}},
      {{300001}, {}, {0x02939e478727e1b8ull, 0x6f80a8b543e6a2f3ull, 0xdeff8cebd7b541a1ull, 0xf4cd6dff33478d2full}},
  };
  for (int threads = 1; threads <= 4; ++threads) {
    agtrace::test::ThreadsFor split(threads);
    for (const F64& c : sums) {
      INFO("shape " << agtrace::shape_str(c.shape) << ", " << threads << " threads");
      const int64_t n = agtrace::shape_numel(c.shape);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] =
            static_cast<double>((37 * i + 11) % 1009 - 504) / 63 * std::ldexp(1.0, static_cast<int>((7 * i) % 13) - 6);
      const Tensor x = agtrace::tensor_from_values(c.shape, DType::Float64, v);
      CHECK(agtrace::test::fnv(kernels::sum(x, c.dims, false, DType::Float64)) ==
            c.by_threads[static_cast<size_t>(threads - 1)]);
    }
  }
}

TEST_CASE("a bias gradient's sum_to takes the column order", "[kernels][reduce][fidelity]") {
  // sum_to of a [4, 100, 96] gradient to a [96] bias (F.linear on a batch of token rows) is
  // the sum over dims 0 and 1 above.
  Tensor g = inputs({4, 100, 96});
  CHECK(agtrace::test::fnv(kernels::sum_to(g, {96})) == 0x74954f00e6180d6bull);
  // A [1, 96] target keeps the leading dim: the same sums.
  CHECK(agtrace::test::fnv(kernels::sum_to(g, {1, 96})) == 0x74954f00e6180d6bull);
}

TEST_CASE("column_sums gives each column the same bits whatever the range asked for", "[kernels][reduce]") {
  // Threads ask for arbitrary column ranges: every split of 100 columns (three whole groups
  // of 32 and a row_sum tail of 4) gives the full call's bits.
  Tensor x = inputs({37, 100});
  const float* xf = x->storage->f32();
  std::vector<float> whole(100);
  kernels::column_sums(xf, 37, 100, 0, 100, whole.data());
  for (int64_t begin : {0, 1, 31, 32, 33, 95, 96, 97}) {
    for (int64_t end : {begin + 1, begin + 3, int64_t{64}, int64_t{99}, int64_t{100}}) {
      if (end <= begin || end > 100) continue;
      std::vector<float> part(static_cast<size_t>(end - begin));
      kernels::column_sums(xf, 37, 100, begin, end, part.data());
      for (int64_t j = begin; j < end; ++j) {
        INFO("columns [" << begin << ", " << end << "), column " << j);
        CHECK(std::memcmp(&part[static_cast<size_t>(j - begin)], &whole[static_cast<size_t>(j)], sizeof(float)) == 0);
      }
    }
  }
}
