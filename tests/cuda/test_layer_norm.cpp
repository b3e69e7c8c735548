// layer_norm forward and backward against a double reference of the same formulas.
#include <catch2/catch.hpp>

#include <cmath>

#include "cuda/layer_norm.cuh"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

TEST_CASE("CUDA layer_norm forward and backward match a double reference", "[cuda][layer_norm]") {
  const double eps = 1e-5;
  for (DType d : float_dtypes()) {
    const DType stat_dtype = (d == DType::Float16 || d == DType::BFloat16) ? DType::Float32 : d;
    for (int64_t nnd : {1, 2}) {
      for (bool affine : {true, false}) {
        const Shape shape = {3, 4, 6};
        const Shape norm(shape.end() - nnd, shape.end());
        Tensor x = fresh_transposed(shape, d, -2.0, 2.0);
        Tensor w = fresh(norm, d, 0.5, 1.5, 0.23), b = fresh(norm, d, -0.5, 0.5, 0.47);
        Tensor dy = fresh(shape, d, -1.0, 1.0, 0.91);
        std::vector<bool> mask(3, false);
        for (size_t k = 3 - static_cast<size_t>(nnd); k < 3; ++k) mask[k] = true;
        const auto xr = rows_of(x, mask), gr = rows_of(dy, mask);
        const std::vector<double> wv = to_values(w), bv = to_values(b);
        const size_t n = static_cast<size_t>(shape_numel(norm));
        std::vector<double> mean, rstd, y(static_cast<size_t>(x->numel())), dx(y.size()), dw(n, 0.0), db(n, 0.0);
        std::vector<std::vector<double>> yr(xr.size()), dxr(xr.size());
        for (size_t r = 0; r < xr.size(); ++r) {
          double mu = 0, var = 0;
          for (double v : xr[r]) mu += v;
          mu /= static_cast<double>(n);
          for (double v : xr[r]) var += (v - mu) * (v - mu);
          const double rs = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
          mean.push_back(mu);
          rstd.push_back(rs);
          double s1 = 0, s2 = 0;
          for (size_t j = 0; j < n; ++j) {
            const double xhat = (xr[r][j] - mu) * rs;
            yr[r].push_back(affine ? xhat * wv[j] + bv[j] : xhat);
            const double g = gr[r][j] * (affine ? wv[j] : 1.0);
            s1 += g;
            s2 += g * xhat;
            dw[j] += gr[r][j] * xhat;
            db[j] += gr[r][j];
          }
          for (size_t j = 0; j < n; ++j) {
            const double xhat = (xr[r][j] - mu) * rs;
            const double g = gr[r][j] * (affine ? wv[j] : 1.0);
            dxr[r].push_back(rs / static_cast<double>(n) * (static_cast<double>(n) * g - s1 - xhat * s2));
          }
        }
        for_rows(shape, mask, [&](int64_t row, int64_t j, int64_t linear) {
          y[static_cast<size_t>(linear)] = yr[static_cast<size_t>(row)][static_cast<size_t>(j)];
          dx[static_cast<size_t>(linear)] = dxr[static_cast<size_t>(row)][static_cast<size_t>(j)];
        });
        const int64_t rows = static_cast<int64_t>(xr.size());
        DeviceTensor dxin = upload(x), dwt = upload(w), dbt = upload(b), ddy = upload(dy);
        DeviceTensor out = device_empty(shape, d, "test"), m = device_empty({rows}, stat_dtype, "test"),
                     rs = device_empty({rows}, stat_dtype, "test");
        layer_norm(out.ref, m.ref, rs.ref, dxin.ref, affine ? &dwt.ref : nullptr, affine ? &dbt.ref : nullptr, nnd, eps);
        const std::string what = dtype_name(d) + " normalized dims " + std::to_string(nnd) + (affine ? " affine" : "");
        const double tol = d == DType::Float32 ? 1e-5 : tolerance(d) * 2;
        check_close(download(m.ref), tensor_from_values({rows}, stat_dtype, mean), tol, what + " mean");
        check_close(download(rs.ref), tensor_from_values({rows}, stat_dtype, rstd), tol, what + " rstd");
        check_close(download(out.ref), tensor_from_values(shape, d, y), tol, what + " output");

        // Backward from the reference mean/rstd (uploaded), so only the backward is tested.
        DeviceTensor m_ref = upload(tensor_from_values({rows}, stat_dtype, mean));
        DeviceTensor rs_ref = upload(tensor_from_values({rows}, stat_dtype, rstd));
        DeviceTensor gx = device_empty(shape, d, "test"), gw = device_empty(norm, d, "test"),
                     gb = device_empty(norm, d, "test");
        layer_norm_backward(&gx.ref, affine ? &gw.ref : nullptr, affine ? &gb.ref : nullptr, ddy.ref, dxin.ref,
                            m_ref.ref, rs_ref.ref, affine ? &dwt.ref : nullptr, nnd);
        const double btol = d == DType::Float32 ? 3e-5 : tolerance(d) * 4;
        check_close(download(gx.ref), tensor_from_values(shape, d, dx), btol, what + " grad input");
        if (affine) {
          check_close(download(gw.ref), tensor_from_values(norm, d, dw), btol, what + " grad weight");
          check_close(download(gb.ref), tensor_from_values(norm, d, db), btol, what + " grad bias");
        }
      }
    }
  }
}
