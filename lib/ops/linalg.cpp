// Matrix products. `x @ W` on 2-D operands is mm (MmBackward0); other ranks of matmul
// decompose into views and bmm/mv/dot in PyTorch and are not implemented yet.
#include "ops/common.hpp"
#include "ops/ops.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

// MmBackward0: grad_self = grad @ mat2^T, grad_mat2 = self^T @ grad.
std::vector<Tensor> mm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) {
    Tensor mat2 = n.unpack("mat2");
    ga = as_dtype(kernels::mm(g[0], kernels::transposed(mat2)), n.input_meta[0].dtype);
  }
  if (n.next[1].fn) {
    Tensor self = n.unpack("self");
    gb = as_dtype(kernels::mm(kernels::transposed(self), g[0]), n.input_meta[1].dtype);
  }
  return {ga, gb};
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  OpScope scope("mm");
  if (a->dim() != 2) throw ScenarioError("shape_mismatch", "self must be a matrix");
  if (b->dim() != 2) throw ScenarioError("shape_mismatch", "mat2 must be a matrix");
  if (a->sizes[1] != b->sizes[0]) {
    ScenarioError e("shape_mismatch", "mat1 and mat2 shapes cannot be multiplied (" + std::to_string(a->sizes[0]) + "x" +
                                          std::to_string(a->sizes[1]) + " and " + std::to_string(b->sizes[0]) + "x" +
                                          std::to_string(b->sizes[1]) + ")");
    e.facts = {{"op", "mm"}, {"shapes", {a->sizes, b->sizes}}};
    throw e;
  }
  if (a->dtype() != b->dtype()) {
    ScenarioError e("dtype_mismatch", "expected scalar type " +
                                          dtype_tensor_type(a->dtype()).substr(0, dtype_tensor_type(a->dtype()).size() - 6) +
                                          " but found " +
                                          dtype_tensor_type(b->dtype()).substr(0, dtype_tensor_type(b->dtype()).size() - 6));
    e.facts = {{"op", "mm"}, {"dtypes", {dtype_name(a->dtype()), dtype_name(b->dtype())}}};
    throw e;
  }
  if (a->dtype() == DType::Bool) require_floating(a, "addmm_impl_cpu_");
  Tensor r = kernels::mm(a, b);
  if (needs_grad({&a, &b})) {
    auto node = make_node("MmBackward0", mm_backward, {a, b});
    // derivatives.yaml: mm saves self only for mat2's gradient and mat2 only for self's;
    // each operand's strides are kept only when that operand requires grad (measured).
    node->save_input("mat2", b, rg(a));
    node->save_attr("mat2_sym_sizes", AttrValue::ints(b->sizes));
    node->save_attr("mat2_sym_strides", AttrValue::ints(rg(b) ? b->strides : Shape{}));
    node->save_input("self", a, rg(b));
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    node->save_attr("self_sym_strides", AttrValue::ints(rg(a) ? a->strides : Shape{}));
    set_history(r, node);
  }
  return r;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a->dim() == 2 && b->dim() == 2) return mm(a, b);
  if (a->dim() == 0 || b->dim() == 0) {
    ScenarioError e("shape_mismatch", "both arguments to matmul need to be at least 1D, but they are " +
                                          std::to_string(a->dim()) + "D and " + std::to_string(b->dim()) + "D");
    throw e;
  }
  throw ScenarioError("unsupported", "matmul of a " + std::to_string(a->dim()) + "-D and a " +
                                         std::to_string(b->dim()) + "-D tensor is not supported yet (only 2-D @ 2-D)");
}

}  // namespace agtrace::ops
