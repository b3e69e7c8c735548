// Matrix products: mm, dot, mv, bmm, addmm, F.linear and matmul in every rank combination.
//
// matmul decomposes exactly where PyTorch 1.13's at::native::matmul decomposes (measured
// with /usr/bin/python3 and torch 1.13 for every rank pair, layout and requires_grad
// combination): 1-D @ 1-D is dot, 2-D @ 1-D mv, 1-D @ 2-D unsqueeze + mm + squeeze_,
// 2-D @ 2-D mm; a >=3-D operand against a 1-D or 2-D one is "folded" into one mm/mv over
// a reshape; everything else broadcasts the batch dims (expand + reshape) and calls bmm.
// Backward formulas are those of derivatives.yaml, written with raw kernels.
#include <vector>

#include "autograd/grad_mode.hpp"
#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

// ------------------------------------------------------------------ raw kernels

// Row-major values of a @ b for a (n, k) and b (k, m) given row-major, at the precision
// of PyTorch's CPU kernel for `dtype` (kernels::gemm: BLAS for float32/float64).
std::vector<double> matmul_values(DType dtype, const std::vector<double>& a, const std::vector<double>& b, int64_t n,
                                  int64_t k, int64_t m) {
  std::vector<double> out(static_cast<size_t>(n * m), 0.0);
  kernels::gemm(dtype, {a.data(), 0, k, 1}, {b.data(), 0, m, 1}, n, k, m, out.data());
  return out;
}

// A new tensor of `shape` holding `values` (rounded to dtype); meta: shape only.
Tensor from_values(const Shape& shape, DType dtype, bool meta, const std::vector<double>& values) {
  Tensor r = empty_tensor(shape, dtype, meta);
  if (!meta) write_values(r, values);
  return r;
}

// (B, n, k) @ (B, k, m) without autograd, reading both operands through their strides.
Tensor bmm_kernel(const Tensor& a, const Tensor& b) {
  if (kernels::device::any_on_device({&a, &b})) return kernels::device::bmm(a, b, a->dtype());
  const int64_t B = a->sizes[0], n = a->sizes[1], k = a->sizes[2], m = b->sizes[2];
  Tensor r = uninitialized_tensor({B, n, m}, a->dtype(), a->is_meta() || b->is_meta());  // gemm writes all
  if (r->is_meta()) return r;
  if (a->dtype() == DType::BFloat16 && b->dtype() == DType::BFloat16) {
    write_values(r, kernels::bf16_bmm(a, b));
    return r;
  }
  kernels::gemm_storage_batched(a->dtype(), {a->storage.get(), a->offset, a->strides[1], a->strides[2]}, a->strides[0],
                                {b->storage.get(), b->offset, b->strides[1], b->strides[2]}, b->strides[0], B, n, k, m,
                                *r->storage, 0);
  return r;
}

// (n, k) @ (k,) without autograd.
Tensor mv_kernel(const Tensor& a, const Tensor& v) {
  if (kernels::device::any_on_device({&a, &v})) return kernels::device::mv(a, v, a->dtype());
  const bool meta = a->is_meta() || v->is_meta();
  std::vector<double> out;
  if (!meta) out = matmul_values(a->dtype(), to_values(a), to_values(v), a->sizes[0], a->sizes[1], 1);
  return from_values({a->sizes[0]}, a->dtype(), meta, out);
}

// Outer product g (n,) x v (m,) -> (n, m) (at::ger).
Tensor outer_kernel(const Tensor& g, const Tensor& v) {
  if (kernels::device::any_on_device({&g, &v})) return kernels::device::outer(g, v, g->dtype());
  const bool meta = g->is_meta() || v->is_meta();
  std::vector<double> out;
  if (!meta) out = matmul_values(g->dtype(), to_values(g), to_values(v), g->sizes[0], 1, v->sizes[0]);
  return from_values({g->sizes[0], v->sizes[0]}, g->dtype(), meta, out);
}

// a.transpose(1, 2) of a 3-D tensor as a raw alias.
Tensor batch_transposed(const Tensor& a) {
  return make_alias(a, {a->sizes[0], a->sizes[2], a->sizes[1]}, {a->strides[0], a->strides[2], a->strides[1]},
                    a->offset);
}

// maybe_multiply(t, s) of derivatives.yaml: t itself when s is 1, else t * s (new storage).
Tensor maybe_multiply(const Tensor& t, const AttrValue& s) {
  const double v = s.kind == AttrValue::Kind::Double ? s.d : static_cast<double>(s.i);
  return v == 1.0 ? t : kscale(t, v);
}

// "expected scalar type Float but found Double" (the mm/mv/bmm kernels' dtype check).
[[noreturn]] void scalar_type_error(const Tensor& a, const Tensor& b, const std::string& op) {
  auto scalar = [](DType d) {
    std::string s = dtype_tensor_type(d);  // "FloatTensor"
    return s.substr(0, s.size() - 6);
  };
  ScenarioError e("dtype_mismatch", "expected scalar type " + scalar(a->dtype()) + " but found " + scalar(b->dtype()));
  e.facts = {{"op", op}, {"dtype", dtype_name(b->dtype())}};
  throw e;
}

// Bool has no matrix kernels ("\"addmm_impl_cpu_\" not implemented for 'Bool'"); int64 works
// without autograd (measured: int64 mm, mv, bmm, dot, addmm run).
void reject_bool(const Tensor& a, const std::string& kernel) {
  if (a->dtype() == DType::Bool) require_floating(a, kernel);
}

ScenarioError shape_error(const std::string& msg, const std::string& op, std::vector<Shape> shapes) {
  ScenarioError e("shape_mismatch", msg);
  e.facts = {{"op", op}, {"shapes", shapes}};
  return e;
}

// ------------------------------------------------------------------ backward formulas

// MmBackward0: grad_self = grad @ mat2^T, grad_mat2 = self^T @ grad.
bool column_major(const Node& n, const char* sizes, const char* strides);

// mm_mat1_backward / mm_mat2_backward: a column-major operand (strides (1, rows), F.linear's
// W.t()) gets its gradient column-major too, as the transpose of the product taken the other
// way round, so that W's gradient comes out of TBackward0 contiguous and AccumulateGrad
// takes it without a copy.
Tensor mm_mat1_grad(const Tensor& grad, const Tensor& mat2, bool mat1_column_major) {
  return mat1_column_major ? kernels::transposed(kernels::mm(mat2, kernels::transposed(grad)))
                           : kernels::mm(grad, kernels::transposed(mat2));
}
Tensor mm_mat2_grad(const Tensor& grad, const Tensor& mat1, bool mat2_column_major) {
  return mat2_column_major ? kernels::transposed(kernels::mm(kernels::transposed(grad), mat1))
                           : kernels::mm(kernels::transposed(mat1), grad);
}

std::vector<Tensor> mm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn)
    ga = as_dtype(mm_mat1_grad(g[0], n.unpack("mat2"), column_major(n, "self_sym_sizes", "self_sym_strides")),
                  n.input_meta[0].dtype);
  if (n.next[1].fn)
    gb = as_dtype(mm_mat2_grad(g[0], n.unpack("self"), column_major(n, "mat2_sym_sizes", "mat2_sym_strides")),
                  n.input_meta[1].dtype);
  return {ga, gb};
}

// ---- create_graph=True formulas (derivatives.yaml and FunctionsManual.cpp, torch 1.13).

bool column_major(const Node& n, const char* sizes, const char* strides) {
  const auto& sz = n.attr(sizes).list;
  const auto& st = n.attr(strides).list;
  return sz.size() == 2 && st.size() == 2 && st[0] == 1 && st[1] == sz[0];
}

// maybe_multiply(t, s): t itself when s is 1, else t * s (mul.Scalar, MulBackward1).
Tensor maybe_multiply_graph(const Tensor& t, const AttrValue& s) {
  const double v = s.kind == AttrValue::Kind::Double ? s.d : static_cast<double>(s.i);
  return v == 1.0 ? t : mul_scalar(t, attr_value(s));
}

// mm_mat1_backward: grad.mm(mat2.t()), or mat2.mm(grad.t()).t() when mat1 was column-major
// (strides (1, rows)); mm_mat2_backward: mat1.t().mm(grad), or grad.t().mm(mat1).t() when
// mat2 was column-major (measured: MmBackward0 over (grad, TBackward0) and over
// (TBackward0, grad); F.linear's W.t() is column-major: TBackward0 > MmBackward0).
Tensor mm_mat1_graph(const Tensor& grad, const Tensor& mat2, bool mat1_column_major) {
  return mat1_column_major ? t(mm(mat2, t(grad))) : mm(grad, t(mat2));
}
Tensor mm_mat2_graph(const Tensor& grad, const Tensor& mat1, bool mat2_column_major) {
  return mat2_column_major ? t(mm(t(grad), mat1)) : mm(t(mat1), grad);
}

// MmBackward0.
std::vector<Tensor> mm_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.should_compute_output(0))
    ga = mm_mat1_graph(g[0], n.unpack("mat2"), column_major(n, "self_sym_sizes", "self_sym_strides"));
  if (n.should_compute_output(1))
    gb = mm_mat2_graph(g[0], n.unpack("self"), column_major(n, "mat2_sym_sizes", "mat2_sym_strides"));
  return {ga, gb};
}

// AddmmBackward0: self: maybe_multiply(grad, beta) (the engine's sum_to reduces it to the
// bias: measured ViewBackward0 > SumBackward1 for a (m,) bias); mat1 / mat2:
// maybe_multiply(mm_mat1_backward / mm_mat2_backward, alpha).
std::vector<Tensor> addmm_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor gs, g1, g2;
  if (n.should_compute_output(0)) gs = maybe_multiply_graph(g[0], n.attr("beta"));
  if (n.should_compute_output(1))
    g1 = maybe_multiply_graph(mm_mat1_graph(g[0], n.unpack("mat2"), column_major(n, "mat1_sym_sizes", "mat1_sym_strides")),
                              n.attr("alpha"));
  if (n.should_compute_output(2))
    g2 = maybe_multiply_graph(mm_mat2_graph(g[0], n.unpack("mat1"), column_major(n, "mat2_sym_sizes", "mat2_sym_strides")),
                              n.attr("alpha"));
  return {gs, g1, g2};
}

// UnsafeViewBackward0: grad.reshape(self.sym_sizes()) (ReshapeAliasBackward0 for matmul's
// 3-D @ 2-D, measured).
std::vector<Tensor> unsafe_view_dbackward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  return {reshape(g[0], std::vector<int64_t>(m.sizes.begin(), m.sizes.end()))};
}

// DotBackward0: self: grad * tensor; tensor: grad * self (MulBackward0, measured).
std::vector<Tensor> dot_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = mul(g[0], n.unpack("tensor"));
  if (n.should_compute_output(1)) gb = mul(g[0], n.unpack("self"));
  return {ga, gb};
}

// MvBackward0: self: grad.ger(vec) = grad.reshape({n, 1}) * vec (measured: MulBackward0
// over ReshapeAliasBackward0); vec: self.t().mv(grad) (MvBackward0 over TBackward0).
std::vector<Tensor> mv_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = mul(reshape(g[0], {g[0]->sizes[0], 1}), n.unpack("vec"));
  if (n.should_compute_output(1)) gb = mv(t(n.unpack("self")), g[0]);
  return {ga, gb};
}

// BmmBackward0: self: grad.bmm(mat2.transpose(1, 2)); mat2: self.transpose(1, 2).bmm(grad)
// (BmmBackward0 over TransposeBackward0, measured).
std::vector<Tensor> bmm_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.should_compute_output(0)) ga = bmm(g[0], transpose(n.unpack("mat2"), 1, 2));
  if (n.should_compute_output(1)) gb = bmm(transpose(n.unpack("self"), 1, 2), g[0]);
  return {ga, gb};
}

// DotBackward0 (derivatives.yaml: self: grad * tensor.conj(); tensor: grad * self.conj()).
std::vector<Tensor> dot_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = as_dtype(kmul(g[0], n.unpack("tensor")), n.input_meta[0].dtype);
  if (n.next[1].fn) gb = as_dtype(kmul(g[0], n.unpack("self")), n.input_meta[1].dtype);
  return {ga, gb};
}

// MvBackward0 (derivatives.yaml: self: grad.ger(vec.conj()); vec: self.conj().t().mv(grad)).
std::vector<Tensor> mv_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = as_dtype(outer_kernel(g[0], n.unpack("vec")), n.input_meta[0].dtype);
  if (n.next[1].fn) gb = as_dtype(mv_kernel(kernels::transposed(n.unpack("self")), g[0]), n.input_meta[1].dtype);
  return {ga, gb};
}

// BmmBackward0 (derivatives.yaml: self: grad.bmm(mat2.transpose(1, 2).conj());
// mat2: self.transpose(1, 2).conj().bmm(grad)).
std::vector<Tensor> bmm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor ga, gb;
  if (n.next[0].fn) ga = as_dtype(bmm_kernel(g[0], batch_transposed(n.unpack("mat2"))), n.input_meta[0].dtype);
  if (n.next[1].fn) gb = as_dtype(bmm_kernel(batch_transposed(n.unpack("self")), g[0]), n.input_meta[1].dtype);
  return {ga, gb};
}

// AddmmBackward0 (derivatives.yaml: self: maybe_multiply(grad, beta.conj()), reduced to the
// bias's shape by the engine's sum_to; mat1: mm_mat1_backward = maybe_multiply(grad.mm(
// mat2.t()), alpha); mat2: mm_mat2_backward = maybe_multiply(mat1.t().mm(grad), alpha)).
std::vector<Tensor> addmm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor gs, g1, g2;
  if (n.next[0].fn)
    gs = as_dtype(kernels::sum_to(maybe_multiply(g[0], n.attr("beta")), n.input_meta[0].sizes), n.input_meta[0].dtype);
  if (n.next[1].fn)
    g1 = as_dtype(maybe_multiply(mm_mat1_grad(g[0], n.unpack("mat2"), column_major(n, "mat1_sym_sizes", "mat1_sym_strides")),
                                 n.attr("alpha")),
                  n.input_meta[1].dtype);
  if (n.next[2].fn)
    g2 = as_dtype(maybe_multiply(mm_mat2_grad(g[0], n.unpack("mat1"), column_major(n, "mat2_sym_sizes", "mat2_sym_strides")),
                                 n.attr("alpha")),
                  n.input_meta[2].dtype);
  return {gs, g1, g2};
}

// UnsafeViewBackward0 (derivatives.yaml: grad.reshape(self.sym_sizes())): a view of a
// contiguous grad, else a contiguous copy.
std::vector<Tensor> unsafe_view_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  Tensor c = g[0]->is_contiguous() ? g[0] : kernels::copy(g[0]);
  return {as_dtype(make_alias(c, m.sizes, contiguous_strides(m.sizes), c->offset), m.dtype)};
}

// at::_unsafe_view of a fresh contiguous result: same storage, not a view for autograd
// (no _base), UnsafeViewBackward0 saving self_sym_sizes.
Tensor unsafe_view(const Tensor& a, const Shape& shape) {
  Tensor v = make_alias(a, shape, contiguous_strides(shape), a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("UnsafeViewBackward0", unsafe_view_backward, {a});
    node->differentiable_backward = unsafe_view_dbackward;
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

// matmul's should_fold (torch 1.13, measured): a >=3-D tensor against a 1-D or 2-D one is
// folded into a single mm/mv, except a 3-D tensor against a 2-D one whose last two dims are
// transposed with the batch dim outermost (strides (s1*s2, 1, s1)-like: last stride != 1 and
// first stride == size1*size2), which goes through bmm instead. requires_grad plays no part.
bool should_fold(const Tensor& t, int64_t other_dim) {
  if (t->dim() < 3 || (other_dim != 1 && other_dim != 2)) return false;
  if (t->dim() == 3 && other_dim == 2 && t->strides[2] != 1 && t->strides[0] == t->sizes[1] * t->sizes[2])
    return false;
  return true;
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
  if (a->dtype() != b->dtype()) scalar_type_error(a, b, "mm");
  reject_bool(a, "addmm_impl_cpu_");
  Tensor r = kernels::mm(a, b);
  if (needs_grad({&a, &b})) {
    auto node = make_node("MmBackward0", mm_backward, {a, b});
    node->differentiable_backward = mm_dbackward;
    // derivatives.yaml: mm saves self only for mat2's gradient and mat2 only for self's;
    // each operand's strides are kept only when that operand requires grad (measured).
    node->save_input("mat2", b, rg(a));
    node->save_attr("mat2_sym_sizes", AttrValue::ints(b->sizes));
    node->save_attr("mat2_sym_strides", AttrValue::ints(rg(b) ? b->strides.vec() : Shape{}));
    node->save_input("self", a, rg(b));
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    node->save_attr("self_sym_strides", AttrValue::ints(rg(a) ? a->strides.vec() : Shape{}));
    set_history(r, node);
  }
  return r;
}

Tensor dot(const Tensor& a, const Tensor& b) {
  OpScope scope("dot");
  // at::dot's checks, in order: ranks, dtypes, lengths (measured messages).
  if (a->dim() != 1 || b->dim() != 1)
    throw shape_error("1D tensors expected, but got " + std::to_string(a->dim()) + "D and " + std::to_string(b->dim()) +
                          "D tensors",
                      "dot", {a->sizes, b->sizes});
  if (a->dtype() != b->dtype()) {
    ScenarioError e("dtype_mismatch", "dot : expected both vectors to have same dtype, but found " +
                                          dtype_tensor_type(a->dtype()).substr(0, dtype_tensor_type(a->dtype()).size() - 6) +
                                          " and " +
                                          dtype_tensor_type(b->dtype()).substr(0, dtype_tensor_type(b->dtype()).size() - 6));
    e.facts = {{"op", "dot"}, {"dtype", dtype_name(b->dtype())}};
    throw e;
  }
  if (a->numel() != b->numel())
    throw shape_error("inconsistent tensor size, expected tensor [" + std::to_string(a->numel()) + "] and src [" +
                          std::to_string(b->numel()) + "] to have the same number of elements, but got " +
                          std::to_string(a->numel()) + " and " + std::to_string(b->numel()) + " elements respectively",
                      "dot", {a->sizes, b->sizes});
  reject_bool(a, "dot");
  const bool meta = a->is_meta() || b->is_meta();
  std::vector<double> out;
  const bool on_device = kernels::device::any_on_device({&a, &b});
  if (!meta && !on_device) out = matmul_values(a->dtype(), to_values(a), to_values(b), 1, a->numel(), 1);
  Tensor r = on_device ? kernels::device::dot(a, b, a->dtype()) : from_values({}, a->dtype(), meta, out);
  if (needs_grad({&a, &b})) {
    // SUMMARY matmul_1d_1d: DotBackward0 saves self if `tensor` requires grad and tensor if
    // self does, both the very objects.
    auto node = make_node("DotBackward0", dot_backward, {a, b});
    node->differentiable_backward = dot_dbackward;
    node->save_input("self", a, rg(b));
    node->save_input("tensor", b, rg(a));
    set_history(r, node);
  }
  return r;
}

Tensor mv(const Tensor& a, const Tensor& v) {
  OpScope scope("mv");
  if (a->dim() != 2 || v->dim() != 1)
    throw shape_error("vector + matrix @ vector expected, got 1, " + std::to_string(a->dim()) + ", " +
                          std::to_string(v->dim()),
                      "mv", {a->sizes, v->sizes});
  if (a->sizes[1] != v->sizes[0])
    throw shape_error("size mismatch, got " + std::to_string(a->sizes[0]) + ", " + std::to_string(a->sizes[0]) + "x" +
                          std::to_string(a->sizes[1]) + "," + std::to_string(v->sizes[0]),
                      "mv", {a->sizes, v->sizes});
  if (a->dtype() != v->dtype()) scalar_type_error(a, v, "mv");
  reject_bool(a, "addmv_impl_cpu");
  Tensor r = mv_kernel(a, v);
  if (needs_grad({&a, &v})) {
    // SUMMARY matmul_2d_1d: MvBackward0 saves self if vec requires grad, vec if self does.
    auto node = make_node("MvBackward0", mv_backward, {a, v});
    node->differentiable_backward = mv_dbackward;
    node->save_input("self", a, rg(v));
    node->save_input("vec", v, rg(a));
    set_history(r, node);
  }
  return r;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  OpScope scope("bmm");
  if (a->dim() != 3) throw shape_error("batch1 must be a 3D tensor", "bmm", {a->sizes, b->sizes});
  if (b->dim() != 3) throw shape_error("batch2 must be a 3D tensor", "bmm", {a->sizes, b->sizes});
  if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
    throw shape_error("Expected size for first two dimensions of batch2 tensor to be: [" + std::to_string(a->sizes[0]) +
                          ", " + std::to_string(a->sizes[2]) + "] but got: [" + std::to_string(b->sizes[0]) + ", " +
                          std::to_string(b->sizes[1]) + "].",
                      "bmm", {a->sizes, b->sizes});
  if (a->dtype() != b->dtype()) scalar_type_error(a, b, "bmm");
  reject_bool(a, "bmm");
  Tensor r = bmm_kernel(a, b);
  if (needs_grad({&a, &b})) {
    // SUMMARY bmm: BmmBackward0 saves mat2 if self requires grad, self if mat2 does; no
    // sizes or strides (measured: dir() has _saved_mat2 and _saved_self only).
    auto node = make_node("BmmBackward0", bmm_backward, {a, b});
    node->differentiable_backward = bmm_dbackward;
    node->save_input("mat2", b, rg(a));
    node->save_input("self", a, rg(b));
    set_history(r, node);
  }
  return r;
}

Tensor addmm(const Tensor& bias, const Tensor& m1, const Tensor& m2, const Value& beta, const Value& alpha) {
  OpScope scope("addmm");
  // addmm's checks, in order (measured): dtypes of self/mat2 and mat1/mat2, ranks, shapes,
  // then the bias must expand to (n, m).
  if (bias->dtype() != m2->dtype()) {
    ScenarioError e("dtype_mismatch", "self and mat2 must have the same dtype");
    e.facts = {{"op", "addmm"}, {"dtype", dtype_name(m2->dtype())}};
    throw e;
  }
  if (m1->dtype() != m2->dtype()) {
    ScenarioError e("dtype_mismatch", "mat1 and mat2 must have the same dtype");
    e.facts = {{"op", "addmm"}, {"dtype", dtype_name(m2->dtype())}};
    throw e;
  }
  if (m1->dim() != 2)
    throw shape_error("mat1 must be a matrix, got " + std::to_string(m1->dim()) + "-D tensor", "addmm", {m1->sizes});
  if (m2->dim() != 2)
    throw shape_error("mat2 must be a matrix, got " + std::to_string(m2->dim()) + "-D tensor", "addmm", {m2->sizes});
  if (m1->sizes[1] != m2->sizes[0])
    throw shape_error("mat1 and mat2 shapes cannot be multiplied (" + std::to_string(m1->sizes[0]) + "x" +
                          std::to_string(m1->sizes[1]) + " and " + std::to_string(m2->sizes[0]) + "x" +
                          std::to_string(m2->sizes[1]) + ")",
                      "addmm", {m1->sizes, m2->sizes});
  const Shape out_shape{m1->sizes[0], m2->sizes[1]};
  Tensor bias_b;
  {
    // addmm expands self to (n, m) (expand_size): same checks and messages as Tensor.expand.
    autograd::GradModeGuard no_grad(false);
    bias_b = expand(bias, out_shape);
  }
  reject_bool(m1, "addmm_impl_cpu_");
  const double be = beta.number(), al = alpha.number();
  const bool meta = bias->is_meta() || m1->is_meta() || m2->is_meta();
  Tensor r;
  if (kernels::device::any_on_device({&bias_b, &m1, &m2})) {
    // cuBLAS's alpha * (mat1 @ mat2) + beta * self, as the product then the scaled bias
    // added in place: the same roundings (the product accumulates in float either way).
    r = kernels::device::mm(m1, m2, m1->dtype());
    if (al != 1.0) kernels::device::unary_inplace(cuda::pw::UnaryOp::MulScalar, r, al);
    if (be != 0.0) kernels::device::binary_inplace(cuda::pw::BinaryOp::Add, r, bias_b, be);
  } else if (!meta && (r = kernels::addmm_f32(bias_b, m1, m2, al, be))) {
    // float32: sgemm on the storages in place, transposed operands by BLAS's flags.
  } else {
    std::vector<double> out;
    if (!meta && m1->dtype() == DType::BFloat16) {
      // bfloat16: 1.13's oneDNN or cpublas rounding, by size and layout (kernels::bf16_addmm).
      out = kernels::bf16_addmm(m1, m2, to_values(bias_b), be, al);
    } else if (!meta) {
      out = matmul_values(m1->dtype(), to_values(m1), to_values(m2), m1->sizes[0], m1->sizes[1], m2->sizes[1]);
      std::vector<double> bv = to_values(bias_b);
      // beta == 0 ignores the bias (NaN included), as BLAS does.
      for (size_t i = 0; i < out.size(); ++i) out[i] = al * out[i] + (be == 0.0 ? 0.0 : be * bv[i]);
    }
    r = from_values(out_shape, m1->dtype(), meta, out);
  }
  if (needs_grad({&bias, &m1, &m2})) {
    // SUMMARY addmm: mat1 saved only if mat2 requires grad and mat2 only if mat1 does (so a
    // bias-only graph saves no tensors); each operand's strides only when it requires grad
    // (measured with F.linear: mat1_sym_strides is () unless x requires grad).
    auto node = make_node("AddmmBackward0", addmm_backward, {bias, m1, m2});
    node->differentiable_backward = addmm_dbackward;
    node->save_attr("alpha", number_attr(alpha));
    node->save_attr("beta", number_attr(beta));
    node->save_input("mat1", m1, rg(m2));
    node->save_attr("mat1_sym_sizes", AttrValue::ints(m1->sizes));
    node->save_attr("mat1_sym_strides", AttrValue::ints(rg(m1) ? m1->strides.vec() : Shape{}));
    node->save_input("mat2", m2, rg(m1));
    node->save_attr("mat2_sym_sizes", AttrValue::ints(m2->sizes));
    node->save_attr("mat2_sym_strides", AttrValue::ints(rg(m2) ? m2->strides.vec() : Shape{}));
    set_history(r, node);
  }
  return r;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  OpScope scope("linear");
  // at::linear (torch 1.13, measured node chains):
  //  2-D x with bias: addmm(b, x, W.t())          -> AddmmBackward0 over TBackward0
  //  contiguous 3-D x with bias: addmm on x.view(-1, in), then .view(b0, b1, out)
  //                                                -> ViewBackward0 over AddmmBackward0
  //  otherwise: matmul(x, W.t()), then out.add_(b) -> e.g. MmBackward0 without bias,
  //             AddBackward0 (in place, version 1) over UnsafeViewBackward0 for 4-D x.
  const Value one = Value::integer(1);
  if (x->dim() == 2 && bias) return addmm(bias, x, t(w), one, one);
  if (x->dim() == 3 && bias && x->is_contiguous()) {
    Tensor folded = view(x, {x->sizes[0] * x->sizes[1], x->sizes[2]});
    Tensor r = addmm(bias, folded, t(w), one, one);
    return view(r, {x->sizes[0], x->sizes[1], r->sizes[1]});
  }
  Tensor out = matmul(x, t(w));
  if (bias) add_(out, bias, one);
  return out;
}

namespace {
// PyTorch's "Expected all tensors to be on the same device" for a cuda operand with a CPU
// tensor of one or more dims (the interpreter leaves matmul's to it: at::matmul is
// composite, and its batched branch raises the batch-size error before any kernel checks
// devices; the other branches reach dot/mv/mm, whose wrappers check devices first).
void require_one_device(const Tensor& a, const Tensor& b) {
  const bool da = kernels::device::on_device(a), db = kernels::device::on_device(b);
  const bool cpu_a = !da && !a->is_meta() && a->dim() > 0, cpu_b = !db && !b->is_meta() && b->dim() > 0;
  if ((da && cpu_b) || (db && cpu_a)) {
    ScenarioError e("device_mismatch",
                    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
    e.facts = {{"op", "matmul"}, {"devices", {"cuda:0", "cpu"}}};
    throw e;
  }
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  OpScope scope("matmul");
  const int64_t d1 = a->dim(), d2 = b->dim();
  if (d1 == 0 || d2 == 0)
    throw shape_error("both arguments to matmul need to be at least 1D, but they are " + std::to_string(d1) + "D and " +
                          std::to_string(d2) + "D",
                      "matmul", {a->sizes, b->sizes});
  const bool batched = !(d1 <= 2 && d2 <= 2) && !should_fold(a, d2) && !should_fold(b, d1);
  if (!batched) require_one_device(a, b);
  if (d1 == 1 && d2 == 1) return dot(a, b);  // DotBackward0
  if (d1 == 2 && d2 == 1) return mv(a, b);   // MvBackward0
  if (d1 == 1 && d2 == 2) {
    // tensor1.unsqueeze(0).mm(tensor2).squeeze_(0): SqueezeBackward3 over MmBackward0 whose
    // self is the UnsqueezeBackward0 view of a (measured; the result is at version 1).
    Tensor r = mm(unsqueeze(a, 0), b);
    squeeze_(r, 0);
    return r;
  }
  if (d1 == 2 && d2 == 2) return mm(a, b);  // MmBackward0
  if (should_fold(a, d2) || should_fold(b, d1)) {
    // Fold the batch of the larger operand into the rows of one mm/mv. When the right
    // operand is the larger one, work on its transpose (b.mT, TransposeBackward0 with dims
    // -2, -1) and a.t(), and transpose the result back with a copy (measured for 2-D @ 3-D:
    // CloneBackward0 over TransposeBackward0 over UnsafeViewBackward0 over MmBackward0).
    const bool swap = d2 > d1;
    Tensor t1 = swap ? transpose(b, -2, -1) : a;
    Tensor t2 = !swap ? b : (d1 == 2 ? t(a) : a);
    Shape out_shape(t1->sizes.begin(), t1->sizes.end() - 1);
    const int64_t folded = shape_numel(out_shape);
    // reshape: ReshapeAliasBackward0 when a view fits, else UnsafeViewBackward0 over a clone.
    Tensor t1f = reshape(t1, {folded, t1->sizes.back()});
    if (t2->dim() == 2) {
      out_shape.push_back(t2->sizes[1]);
      Tensor out = unsafe_view(mm(t1f, t2), out_shape);
      return swap ? contiguous(transpose(out, -2, -1)) : out;
    }
    return unsafe_view(mv(t1f, t2), out_shape);
  }
  // Batched: broadcast the batch dims, expand both operands to them (ExpandBackward0 even
  // when nothing broadcasts), reshape to (batch, rows, cols) and bmm (measured for 3-D @ 3-D:
  // UnsafeViewBackward0 over BmmBackward0 whose saved self/mat2 are ReshapeAliasBackward0
  // views over ExpandBackward0; a broadcast batch makes the reshape a clone). Only matrix
  // operands reach here: a 1-D operand against a >=3-D one is always folded above.
  const int64_t n = a->sizes[static_cast<size_t>(d1 - 2)], m1 = a->sizes.back();
  const int64_t m2 = b->sizes[static_cast<size_t>(d2 - 2)], p = b->sizes.back();
  const Shape batch1(a->sizes.begin(), a->sizes.end() - 2), batch2(b->sizes.begin(), b->sizes.end() - 2);
  const Shape batch = kernels::broadcast_shapes(batch1, batch2, "matmul");
  require_one_device(a, b);
  const int64_t nb = shape_numel(batch);
  Shape e1 = batch, e2 = batch;
  e1.insert(e1.end(), {n, m1});
  e2.insert(e2.end(), {m2, p});
  Tensor t1 = reshape(expand(a, e1), {nb, n, m1});
  Tensor t2 = reshape(expand(b, e2), {nb, m2, p});
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {n, p});
  return unsafe_view(bmm(t1, t2), out_shape);
}

}  // namespace agtrace::ops
