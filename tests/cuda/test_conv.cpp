// conv2d forward and backward against agtrace's CPU conv2d and its autograd.
#include <catch2/catch.hpp>

#include "autograd/engine.hpp"
#include "cuda/conv.cuh"
#include "ops/nn.hpp"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

TEST_CASE("CUDA conv2d forward and backward match the CPU", "[cuda][conv]") {
  struct Case {
    Shape input, weight;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups;
    bool bias, transposed;
  };
  const Case cases[] = {{{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
                        {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, false, true},
                        {{1, 2, 5, 5}, {2, 1, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 2, true, false}};
  for (DType d : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      Tensor x = c.transposed ? fresh_transposed(c.input, d) : fresh(c.input, d);
      Tensor w = fresh(c.weight, d, -1.0, 1.0, 0.29), b = fresh({c.weight[0]}, d, -0.5, 0.5, 0.71);
      x->requires_grad_flag = w->requires_grad_flag = true;
      b->requires_grad_flag = c.bias;
      ops::Conv2dArgs args;
      args.stride = c.stride;
      args.padding = c.padding;
      args.dilation = c.dilation;
      args.groups = c.groups;
      Tensor y = ops::conv2d(x, w, c.bias ? b : nullptr, args);
      Tensor g = fresh(y->sizes, d, -1.0, 1.0, 0.53);
      autograd::BackwardRequest req;
      req.roots = {weighted_loss(y, g)};
      autograd::run_backward(req);

      const Conv2dGeometry geo{c.stride[0], c.stride[1], c.padding[0], c.padding[1], c.dilation[0], c.dilation[1],
                               c.groups};
      DeviceTensor dx = upload(x), dw = upload(w), db = upload(b), dg = upload(g);
      DeviceTensor out = device_empty(y->sizes, d, "test");
      conv2d(out.ref, dx.ref, dw.ref, c.bias ? &db.ref : nullptr, geo);
      const std::string what = dtype_name(d) + " groups " + std::to_string(c.groups) + (c.bias ? " bias" : "") +
                               (c.transposed ? " transposed" : "");
      const double tol = d == DType::Float32 ? 2e-5 : 1e-12;
      check_close(download(out.ref), y, tol, what + " output");
      DeviceTensor gx = device_empty(c.input, d, "test"), gw = device_empty(c.weight, d, "test"),
                   gb = device_empty({c.weight[0]}, d, "test");
      conv2d_backward(&gx.ref, &gw.ref, c.bias ? &gb.ref : nullptr, dg.ref, dx.ref, dw.ref, geo);
      check_close(download(gx.ref), x->grad, tol, what + " grad input");
      check_close(download(gw.ref), w->grad, tol, what + " grad weight");
      if (c.bias) check_close(download(gb.ref), b->grad, tol, what + " grad bias");
    }
  }
}
