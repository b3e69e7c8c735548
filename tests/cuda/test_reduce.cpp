// Reductions and softmax against host references computed in double (kernels::sum where
// agtrace has a CPU kernel).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "cuda/reduce.cuh"
#include "cuda/softmax.cuh"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

namespace {
// Float32 and narrower results accumulate in float on the device and in double on the
// host: a sum of a few dozen elements differs by a few float ulps.
double reduce_tol(DType d) { return d == DType::Float32 ? 1e-5 : tolerance(d); }
}  // namespace

TEST_CASE("CUDA sum, mean, amax, amin over dims match the CPU", "[cuda][reduce]") {
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {2}, {-1, 0}, {1}};
  for (DType d : float_dtypes()) {
    for (bool transposed : {false, true}) {
      Tensor in = transposed ? fresh_transposed({3, 5, 4}, d) : fresh({3, 5, 4}, d);
      DeviceTensor din = upload(in);
      for (const auto& dims : dim_sets) {
        for (bool keepdim : {false, true}) {
          std::vector<bool> mask(3, dims.empty());
          std::vector<int64_t> wrapped;
          for (int64_t x : dims) {
            mask[static_cast<size_t>(x < 0 ? x + 3 : x)] = true;
            wrapped.push_back(x < 0 ? x + 3 : x);
          }
          Tensor want_sum = kernels::sum(in, wrapped, keepdim);
          const Shape out_shape = want_sum->sizes;
          const auto rows = rows_of(in, mask);
          std::vector<double> mean, amax, amin;
          for (const auto& r : rows) {
            double s = 0, hi = -INFINITY, lo = INFINITY;
            for (double v : r) s += v, hi = std::max(hi, v), lo = std::min(lo, v);
            mean.push_back(s / static_cast<double>(r.size()));
            amax.push_back(hi);
            amin.push_back(lo);
          }
          const std::string what = dtype_name(d) + (transposed ? " transposed" : "") + " dims " +
                                   std::to_string(dims.size()) + (keepdim ? " keepdim" : "");
          const std::pair<ReduceOp, Tensor> cases[] = {
              {ReduceOp::Sum, want_sum},
              {ReduceOp::Mean, tensor_from_values(out_shape, d, mean)},
              {ReduceOp::Amax, tensor_from_values(out_shape, d, amax)},
              {ReduceOp::Amin, tensor_from_values(out_shape, d, amin)}};
          for (const auto& [op, want] : cases) {
            DeviceTensor out = device_empty(out_shape, d, "test");
            reduce(op, out.ref, din.ref, dims, keepdim);
            check_close(download(out.ref), want, reduce_tol(d), what + " op " + std::to_string(static_cast<int>(op)));
          }
        }
      }
    }
  }
}

TEST_CASE("CUDA max/min along a dim: values and first indices, NaN wins", "[cuda][reduce]") {
  for (DType d : float_dtypes()) {
    // Values on a 0.5 grid: ties inside rows.
    std::vector<double> v = spread(4 * 7, -2.0, 2.0);
    for (double& x : v) x = std::round(x * 2.0) / 2.0;
    if (d != DType::Int64) v[9] = std::numeric_limits<double>::quiet_NaN();  // row 1 of dim 1
    Tensor in = tensor_from_values({4, 7}, d, v);
    DeviceTensor din = upload(in);
    for (bool is_min : {false, true}) {
      for (int64_t dim : {0, 1}) {
        const auto rows = rows_of(in, only_dim(2, dim));
        std::vector<double> vals, idx;
        for (const auto& r : rows) {
          size_t best = 0;
          for (size_t j = 1; j < r.size(); ++j) {
            if (std::isnan(r[best])) break;
            if (std::isnan(r[j]) || (is_min ? r[j] < r[best] : r[j] > r[best])) best = j;
          }
          vals.push_back(r[best]);
          idx.push_back(static_cast<double>(best));
        }
        Shape shape = {dim == 0 ? 7 : 4};
        DeviceTensor dv = device_empty(shape, d, "test"), di = device_empty(shape, DType::Int64, "test");
        max_dim(dv.ref, di.ref, din.ref, dim, false, is_min);
        const std::string what = dtype_name(d) + (is_min ? " min" : " max") + " dim " + std::to_string(dim);
        check_close(download(dv.ref), tensor_from_values(shape, d, vals), what + " values");
        check_close(download(di.ref), tensor_from_values(shape, DType::Int64, idx), what + " indices");
      }
    }
  }
}

TEST_CASE("CUDA softmax and log_softmax, forward and backward, match double references", "[cuda][softmax]") {
  for (DType d : float_dtypes()) {
    for (int64_t dim : {0, 1, 2}) {
      for (bool log : {false, true}) {
        Tensor in = fresh_transposed({2, 3, 6}, d, -3.0, 3.0);
        Tensor g = fresh({2, 3, 6}, d, -1.0, 1.0, 0.77);
        const auto mask = only_dim(3, dim);
        std::vector<double> y(static_cast<size_t>(in->numel())), gi(y.size());
        const auto xr = rows_of(in, mask), gr = rows_of(g, mask);
        // Forward and backward per row, in double.
        std::vector<std::vector<double>> yr(xr.size()), gir(xr.size());
        for (size_t r = 0; r < xr.size(); ++r) {
          double m = -INFINITY, s = 0;
          for (double v : xr[r]) m = std::max(m, v);
          for (double v : xr[r]) s += std::exp(v - m);
          double dot = 0, gs = 0;
          for (size_t j = 0; j < xr[r].size(); ++j) {
            const double out = log ? xr[r][j] - m - std::log(s) : std::exp(xr[r][j] - m) / s;
            yr[r].push_back(round_to_dtype(out, d));
            dot += gr[r][j] * yr[r][j];
            gs += gr[r][j];
          }
          for (size_t j = 0; j < xr[r].size(); ++j)
            gir[r].push_back(log ? gr[r][j] - std::exp(yr[r][j]) * gs : yr[r][j] * (gr[r][j] - dot));
        }
        for_rows(in->sizes, mask, [&](int64_t row, int64_t j, int64_t linear) {
          y[static_cast<size_t>(linear)] = yr[static_cast<size_t>(row)][static_cast<size_t>(j)];
          gi[static_cast<size_t>(linear)] = gir[static_cast<size_t>(row)][static_cast<size_t>(j)];
        });
        const Tensor want_y = tensor_from_values(in->sizes, d, y), want_gi = tensor_from_values(in->sizes, d, gi);
        DeviceTensor din = upload(in), dg = upload(g);
        DeviceTensor out = device_empty(in->sizes, d, "test"), gin = device_empty(in->sizes, d, "test");
        softmax(out.ref, din.ref, dim, log);
        const std::string what = dtype_name(d) + (log ? " log_softmax" : " softmax") + " dim " + std::to_string(dim);
        check_close(download(out.ref), want_y, reduce_tol(d), what);
        // The backward from the reference output (uploaded), so only the backward is tested.
        DeviceTensor dy = upload(want_y);
        softmax_backward(gin.ref, dg.ref, dy.ref, dim, log);
        check_close(download(gin.ref), want_gi, d == DType::Float32 ? 1e-5 : tolerance(d) * 4, what + " backward");
      }
    }
  }
}

TEST_CASE("CUDA reductions reject what they cannot do, naming the op", "[cuda][reduce]") {
  Tensor in = fresh({3, 0}, DType::Float32);
  DeviceTensor din = upload(in), out = device_empty({3}, DType::Float32, "test");
  try {
    reduce(ReduceOp::Amax, out.ref, din.ref, {1}, false);
    FAIL("amax over an empty dim did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("amax") != std::string::npos);
  }
  reduce(ReduceOp::Sum, out.ref, din.ref, {1}, false);  // an empty sum is 0
  check_close(download(out.ref), kernels::full({3}, 0.0, DType::Float32, false), "empty sum");
  Tensor ints = fresh({2, 2}, DType::Int64, 1, 5);
  DeviceTensor di = upload(ints), o2 = device_empty({2, 2}, DType::Int64, "test");
  CHECK_THROWS_AS(softmax(o2.ref, di.ref, 0, false), CudaError);
}
