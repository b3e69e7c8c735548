// batch_norm forward (training and eval, running statistics) and backward against agtrace's
// CPU batch_norm and its autograd.
#include <catch2/catch.hpp>

#include "autograd/engine.hpp"
#include "autograd/node.hpp"
#include "cuda/batch_norm.cuh"
#include "ops/nn.hpp"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

TEST_CASE("CUDA batch_norm forward and backward match the CPU", "[cuda][batch_norm]") {
  const double momentum = 0.1, eps = 1e-5;
  for (DType d : {DType::Float32, DType::Float64}) {
    for (bool training : {true, false}) {
      for (bool affine : {true, false}) {
        const Shape shape = {4, 3, 5, 2};
        Tensor x = fresh_transposed(shape, d, -2.0, 3.0);
        x->requires_grad_flag = true;
        Tensor w = fresh({3}, d, 0.5, 1.5, 0.23), b = fresh({3}, d, -0.5, 0.5, 0.47);
        w->requires_grad_flag = b->requires_grad_flag = affine;
        Tensor rm = fresh({3}, d, -0.2, 0.2, 0.61), rv = fresh({3}, d, 0.5, 1.5, 0.83);
        // The device starts from the same running statistics (uploaded before the CPU
        // updates them in place).
        DeviceTensor drm = upload(rm), drv = upload(rv), dx = upload(x), dwt = upload(w), dbt = upload(b);
        Tensor y = ops::batch_norm(x, rm, rv, affine ? w : nullptr, affine ? b : nullptr, training, momentum, eps);
        Tensor g = fresh(shape, d, -1.0, 1.0, 0.91);
        autograd::BackwardRequest req;
        req.roots = {weighted_loss(y, g)};
        autograd::run_backward(req);

        DeviceTensor out = device_empty(shape, d, "test"), sm = device_empty({3}, d, "test"),
                     si = device_empty({3}, d, "test");
        batch_norm(out.ref, training ? &sm.ref : nullptr, training ? &si.ref : nullptr, dx.ref,
                   affine ? &dwt.ref : nullptr, affine ? &dbt.ref : nullptr, &drm.ref, &drv.ref, training, momentum,
                   eps);
        const std::string what = dtype_name(d) + (training ? " training" : " eval") + (affine ? " affine" : "");
        const double tol = d == DType::Float32 ? 1e-5 : 1e-12;
        check_close(download(out.ref), y, tol, what + " output");
        check_close(download(drm.ref), rm, tol, what + " running_mean");
        check_close(download(drv.ref), rv, tol, what + " running_var");
        if (training) {
          check_close(download(sm.ref), y->grad_fn->unpack("result1"), tol, what + " save_mean");
          check_close(download(si.ref), y->grad_fn->unpack("result2"), tol, what + " save_invstd");
        }

        DeviceTensor dg = upload(g), gx = device_empty(shape, d, "test"), gw = device_empty({3}, d, "test"),
                     gb = device_empty({3}, d, "test");
        // Statistics the CPU saved (training) or the running ones it used (eval: uploaded
        // before the update, which eval does not make).
        DeviceTensor mean = upload(training ? y->grad_fn->unpack("result1") : rm);
        DeviceTensor stat = upload(training ? y->grad_fn->unpack("result2") : rv);
        batch_norm_backward(&gx.ref, affine ? &gw.ref : nullptr, affine ? &gb.ref : nullptr, dg.ref, dx.ref,
                            affine ? &dwt.ref : nullptr, mean.ref, stat.ref, training, eps);
        const double btol = d == DType::Float32 ? 3e-5 : 1e-11;
        check_close(download(gx.ref), x->grad, btol, what + " grad input");
        if (affine) {
          check_close(download(gw.ref), w->grad, btol, what + " grad weight");
          check_close(download(gb.ref), b->grad, btol, what + " grad bias");
        }
      }
    }
  }
}
