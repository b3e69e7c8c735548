// Helpers of the op files added by more.hpp (reduce_more.cpp, pointwise_more.cpp).
#pragma once
#include <string>

#include "errors.hpp"
#include "ops/activations.hpp"
#include "ops/common.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops::more_detail {

// What every file of this family uses (`using namespace more_detail;` brings these along).
using namespace detail;
using namespace act_detail;
using autograd::make_node;
using autograd::set_history;

[[noreturn]] inline void unsupported(const std::string& what) {
  throw ScenarioError("unsupported", what + " is not supported");
}

// These ops have host and meta kernels only: a cuda operand is `unsupported` ("<op> has no
// cuda kernel in agtrace yet", the op named by the OpScope in force), never a silently
// different result.
inline void require_host(const Tensor& a) {
  if (a && !a->is_meta() && a->storage->on_device()) throw_no_device_kernel("cuda");
}

// PyTorch 1.13's CPU kernels of these ops lack Half (measured: "log1p_vml_cpu" not
// implemented for 'Half'); meta has no kernels and passes.
void refuse_half_on_cpu(const Tensor& a, const std::string& kernel);

}  // namespace agtrace::ops::more_detail
