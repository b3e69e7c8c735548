// max_pool2d forward (values, indices) and backward against agtrace's CPU max_pool2d and
// its autograd.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/engine.hpp"
#include "cuda/pooling.cuh"
#include "ops/nn.hpp"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

TEST_CASE("CUDA max_pool2d forward and backward match the CPU", "[cuda][pooling]") {
  struct Case {
    std::vector<int64_t> k, s, p, d;
    bool ceil, ties, transposed;
  };
  const Case cases[] = {{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false, false},
                        {{2, 3}, {1, 2}, {0, 1}, {2, 1}, true, false, true},
                        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, false}};
  for (DType d : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      const Shape shape = {2, 3, 7, 6};
      Tensor x = c.transposed ? fresh_transposed(shape, d) : fresh(shape, d);
      if (c.ties) {  // values on a 0.5 grid: ties inside windows (the first one wins)
        std::vector<double> v = to_values(x);
        for (double& e : v) e = std::round(e * 2.0) / 2.0;
        x = tensor_from_values(shape, d, v);
      }
      x->requires_grad_flag = true;
      ops::MaxPool2dResult r = ops::max_pool2d(x, c.k, c.s, c.p, c.d, c.ceil);
      Tensor w = fresh(r.output->sizes, d, -1.0, 1.0, 0.57);
      autograd::BackwardRequest req;
      req.roots = {weighted_loss(r.output, w)};
      autograd::run_backward(req);
      REQUIRE(x->grad != nullptr);

      const Pool2dGeometry g{c.k[0], c.k[1], c.s[0], c.s[1], c.p[0], c.p[1], c.d[0], c.d[1]};
      DeviceTensor dx = upload(x), dw = upload(w);
      DeviceTensor out = device_empty(r.output->sizes, d, "test"), idx = device_empty(r.output->sizes, DType::Int64, "test");
      max_pool2d(out.ref, idx.ref, dx.ref, g);
      const std::string what = dtype_name(d) + " kernel " + std::to_string(c.k[0]) + "x" + std::to_string(c.k[1]) +
                               (c.ceil ? " ceil" : "") + (c.ties ? " ties" : "") + (c.transposed ? " transposed" : "");
      check_close(download(out.ref), r.output, what + " output");
      check_close(download(idx.ref), r.indices, what + " indices");
      DeviceTensor gin = device_empty(shape, d, "test");
      max_pool2d_backward(gin.ref, dw.ref, idx.ref, g);
      check_close(download(gin.ref), x->grad, what + " grad input");
    }
  }
}
