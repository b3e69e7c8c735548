// gather, scatter, index_select, index_add and view_backward against host loops and
// kernels::view_backward.
#include <catch2/catch.hpp>

#include "cuda/indexing.cuh"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

namespace {
Tensor ints(const Shape& shape, const std::vector<double>& v) { return tensor_from_values(shape, DType::Int64, v); }
}  // namespace

TEST_CASE("CUDA gather and scatter along each dim match host loops", "[cuda][indexing]") {
  for (DType d : {DType::Float32, DType::Float64, DType::Float16}) {
    Tensor in = fresh_transposed({3, 4}, d);
    // index [2, 3]: along dim 0 values in [0, 3), along dim 1 in [0, 4).
    for (int64_t dim : {0, 1}) {
      std::vector<double> iv = {2, 0, 1, 1, 2, 0};
      if (dim == 1) iv = {3, 0, 1, 1, 2, 3};
      Tensor index = ints({2, 3}, iv);
      const std::vector<double> x = to_values(in);
      std::vector<double> want;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t k = static_cast<int64_t>(iv[static_cast<size_t>(i * 3 + j)]);
          want.push_back(dim == 0 ? x[static_cast<size_t>(k * 4 + j)] : x[static_cast<size_t>(i * 4 + k)]);
        }
      DeviceTensor din = upload(in), dix = upload(index), out = device_empty({2, 3}, d, "test");
      gather(out.ref, din.ref, dim, dix.ref);
      check_close(download(out.ref), tensor_from_values({2, 3}, d, want), "gather " + dtype_name(d));

      // scatter_add of src [2, 3] into a fresh [3, 4] (collisions add).
      if (d == DType::Float16) continue;  // atomics: float32 and float64 only
      Tensor base = fresh({3, 4}, d, -1, 1, 0.33), src = fresh({2, 3}, d, -1, 1, 0.87);
      std::vector<double> acc = to_values(base), sv = to_values(src);
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t k = static_cast<int64_t>(iv[static_cast<size_t>(i * 3 + j)]);
          const size_t at = static_cast<size_t>(dim == 0 ? k * 4 + j : i * 4 + k);
          acc[at] += sv[static_cast<size_t>(i * 3 + j)];
        }
      DeviceTensor dbase = upload(base), dsrc = upload(src);
      scatter(dbase.ref, dim, dix.ref, dsrc.ref, true);
      check_close(download(dbase.ref), tensor_from_values({3, 4}, d, acc), tolerance(d) * 2, "scatter_add " + dtype_name(d));
    }
    // scatter (assign) with distinct indices along dim 1.
    Tensor base = fresh({2, 4}, d, -1, 1, 0.12), src = fresh({2, 2}, d, -1, 1, 0.58);
    Tensor index = ints({2, 2}, {3, 0, 1, 2});
    std::vector<double> want = to_values(base), sv = to_values(src);
    want[3] = sv[0], want[0] = sv[1], want[5] = sv[2], want[6] = sv[3];
    DeviceTensor dbase = upload(base), dsrc = upload(src), dix = upload(index);
    scatter(dbase.ref, 1, dix.ref, dsrc.ref, false);
    check_close(download(dbase.ref), tensor_from_values({2, 4}, d, want), "scatter " + dtype_name(d));
  }
}

TEST_CASE("CUDA index_select and index_add match host loops", "[cuda][indexing]") {
  for (DType d : {DType::Float32, DType::Float64}) {
    Tensor in = fresh_transposed({4, 3}, d);
    const std::vector<double> x = to_values(in);
    Tensor index = ints({5}, {3, 0, 3, 1, 2});
    DeviceTensor din = upload(in), dix = upload(index);
    // dim 0: [5, 3]; dim 1 with a 3-long index: [4, 3].
    std::vector<double> want;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j)
        want.push_back(x[static_cast<size_t>(to_values(index)[static_cast<size_t>(i)] * 3 + j)]);
    DeviceTensor out = device_empty({5, 3}, d, "test");
    index_select(out.ref, din.ref, 0, dix.ref);
    check_close(download(out.ref), tensor_from_values({5, 3}, d, want), "index_select dim 0 " + dtype_name(d));

    Tensor index1 = ints({3}, {2, 2, 0});
    DeviceTensor dix1 = upload(index1), out1 = device_empty({4, 3}, d, "test");
    index_select(out1.ref, din.ref, 1, dix1.ref);
    std::vector<double> want1;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j : {2, 2, 0}) want1.push_back(x[static_cast<size_t>(i * 3 + j)]);
    check_close(download(out1.ref), tensor_from_values({4, 3}, d, want1), "index_select dim 1 " + dtype_name(d));

    // index_add along dim 0: rows 3 and 3 collide.
    Tensor base = fresh({4, 3}, d, -1, 1, 0.44), src = fresh({5, 3}, d, -1, 1, 0.66);
    std::vector<double> acc = to_values(base), sv = to_values(src), idx = to_values(index);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j)
        acc[static_cast<size_t>(idx[static_cast<size_t>(i)] * 3 + j)] += sv[static_cast<size_t>(i * 3 + j)];
    DeviceTensor dbase = upload(base), dsrc = upload(src);
    index_add(dbase.ref, 0, dix.ref, dsrc.ref);
    check_close(download(dbase.ref), tensor_from_values({4, 3}, d, acc), tolerance(d) * 2, "index_add " + dtype_name(d));
  }
}

TEST_CASE("CUDA view_backward matches kernels::view_backward", "[cuda][indexing]") {
  for (DType d : {DType::Float32, DType::Float64}) {
    // The gradient of x[1:, ::2] for x of shape [3, 5] (strides 5, 2; offset 5), and of a
    // transposed view.
    const Shape base = {3, 5};
    const struct {
      Shape sizes, strides;
      int64_t offset;
    } views[] = {{{2, 3}, {5, 2}, 5}, {{5, 3}, {1, 5}, 0}};
    for (const auto& v : views) {
      Tensor g = fresh(v.sizes, d, -1, 1, 0.52);
      DeviceTensor dg = upload(g), out = device_empty(base, d, "test");
      view_backward(out.ref, dg.ref, v.strides, v.offset);
      check_close(download(out.ref), kernels::view_backward(g, base, v.sizes, v.strides, v.offset),
                  "view_backward " + dtype_name(d));
    }
  }
}

TEST_CASE("CUDA indexing errors name the op: out-of-range index, dtype", "[cuda][indexing]") {
  Tensor in = fresh({3, 4}, DType::Float32);
  Tensor bad = ints({1, 2}, {0, 7});
  DeviceTensor din = upload(in), dbad = upload(bad), out = device_empty({1, 2}, DType::Float32, "test");
  try {
    gather(out.ref, din.ref, 1, dbad.ref);
    FAIL("an index of 7 into a dim of 4 did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("gather") != std::string::npos);
    CHECK(std::string(e.what()).find("out of range") != std::string::npos);
  }
  Tensor neg = ints({2}, {0, -1});
  DeviceTensor dneg = upload(neg), o2 = device_empty({3, 2}, DType::Float32, "test");
  CHECK_THROWS_AS(index_select(o2.ref, din.ref, 1, dneg.ref), CudaError);
  Tensor h = fresh({3, 4}, DType::Float16);
  DeviceTensor dh = upload(h), src = upload(fresh({1, 2}, DType::Float16));
  Tensor ok_index = ints({1, 2}, {0, 1});
  DeviceTensor dok = upload(ok_index);
  try {
    scatter(dh.ref, 1, dok.ref, src.ref, true);
    FAIL("a float16 scatter_add did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("unsupported dtype for CUDA kernel scatter_add") != std::string::npos);
  }
}
