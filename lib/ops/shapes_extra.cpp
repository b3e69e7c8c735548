// diagonal, diag, atleast_1d/2d/3d, hstack / vstack / dstack, broadcast_tensors, var_mean /
// std_mean, cumprod, isnan / isinf / isfinite, Tensor.type, torch.Size, torch.eye,
// split_with_sizes and the unsafe splits: forward, node, saved values and backward side by
// side, then the table fragment (which also lists einsum, einsum.cpp).
// Every fact measured with /usr/bin/python3 and torch 1.13 (type(node).__name__, dir(node),
// `_base is`, `_version`); formulas from tools/autograd/derivatives.yaml of 1.13.
#include "ops/shapes_extra.hpp"

#include <algorithm>
#include <cmath>

#include "ops/activations.hpp"
#include "ops/common.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"
#include "tensor/device_backend.hpp"

namespace agtrace::ops {

using namespace more_detail;

// ================================================================ diagonal

namespace {

// Where x.diagonal(offset, d1, d2) looks in a tensor of `sizes`/`strides` (at::diagonal):
// d1 and d2 removed, the diagonal appended with stride s1 + s2; an empty diagonal keeps the
// storage offset (measured: x.diagonal(10) of a 5x6 tensor has size 0).
struct DiagonalGeometry {
  Shape sizes, strides;
  int64_t offset = 0;  // added to the input's storage offset
};

DiagonalGeometry diagonal_geometry(const Shape& sizes, const Shape& strides, int64_t offset, int64_t d1, int64_t d2) {
  const auto u1 = static_cast<size_t>(d1), u2 = static_cast<size_t>(d2);
  const int64_t length = offset >= 0 ? std::min(sizes[u1], sizes[u2] - offset) : std::min(sizes[u1] + offset, sizes[u2]);
  DiagonalGeometry g;
  const int64_t n = std::max<int64_t>(length, 0);
  if (n > 0) g.offset = offset >= 0 ? offset * strides[u2] : -offset * strides[u1];
  for (size_t k = 0; k < sizes.size(); ++k)
    if (k != u1 && k != u2) {
      g.sizes.push_back(sizes[k]);
      g.strides.push_back(strides[k]);
    }
  g.sizes.push_back(n);
  g.strides.push_back(strides[u1] + strides[u2]);
  return g;
}

struct DiagonalDims {
  int64_t d1, d2;
};

DiagonalDims wrap_diagonal_dims(int64_t ndim, int64_t dim1, int64_t dim2) {
  const int64_t d1 = kernels::wrap_dim(dim1, ndim), d2 = kernels::wrap_dim(dim2, ndim);
  if (d1 == d2)
    type_error("diagonal dimensions cannot be identical " + std::to_string(dim1) + ", " + std::to_string(dim2));
  return {d1, d2};
}

DiagonalDims saved_diagonal_dims(const Node& n, size_t ndim) {
  return {kernels::wrap_dim(n.attr("dim1").i, static_cast<int64_t>(ndim)),
          kernels::wrap_dim(n.attr("dim2").i, static_cast<int64_t>(ndim))};
}

// diagonal_backward(grad, self_sizes, offset, dim1, dim2): zeros of the input's shape with
// the gradient written on the diagonal.
Tensor place_on_diagonal(const Tensor& g, const Shape& sizes, int64_t offset, DiagonalDims d) {
  const DiagonalGeometry geo = diagonal_geometry(sizes, contiguous_strides(sizes), offset, d.d1, d.d2);
  return kernels::view_backward(g, sizes, geo.sizes, geo.strides, geo.offset);
}

std::vector<Tensor> diagonal_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  return {as_dtype(place_on_diagonal(g[0], m.sizes, n.attr("offset").i, saved_diagonal_dims(n, m.sizes.size())), m.dtype)};
}

void save_diagonal_attrs(Node& node, int64_t offset, int64_t dim1, int64_t dim2) {
  node.save_attr("dim1", AttrValue::integer(dim1, true));
  node.save_attr("dim2", AttrValue::integer(dim2, true));
  node.save_attr("offset", AttrValue::integer(offset, true));
}

// DiagonalBackwardBackward0 (derivatives.yaml diagonal_backward: grad_output:
// grad.diagonal(offset, dim1, dim2)).
std::vector<Tensor> diagonal_backward_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor grad = g[0]->is_contiguous() ? g[0] : kernels::copy(g[0]);
  const DiagonalDims d = saved_diagonal_dims(n, grad->sizes.size());
  const DiagonalGeometry geo = diagonal_geometry(grad->sizes, grad->strides, n.attr("offset").i, d.d1, d.d2);
  return {kernels::copy(make_alias(grad, geo.sizes, geo.strides, grad->offset + geo.offset))};
}

// create_graph=True through DiagonalBackward0: at::diagonal_backward, an op of its own
// (measured: DiagonalBackwardBackward0 saving dim1, dim2, offset, over the incoming graph).
std::vector<Tensor> diagonal_dbackward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  Tensor r = as_dtype(place_on_diagonal(g[0], m.sizes, n.attr("offset").i, saved_diagonal_dims(n, m.sizes.size())),
                      m.dtype);
  if (needs_grad({&g[0]})) {
    auto node = make_node("DiagonalBackwardBackward0", diagonal_backward_backward, {g[0]});
    save_diagonal_attrs(*node, n.attr("offset").i, n.attr("dim1").i, n.attr("dim2").i);
    set_history(r, node);
  }
  return {r};
}

}  // namespace

Tensor diagonal(const Tensor& a, int64_t offset, int64_t dim1, int64_t dim2) {
  OpScope scope("diagonal");
  const DiagonalDims d = wrap_diagonal_dims(a->dim(), dim1, dim2);
  const DiagonalGeometry geo = diagonal_geometry(a->sizes, a->strides, offset, d.d1, d.d2);
  Tensor v = detail::make_view(a, geo.sizes, geo.strides, a->offset + geo.offset);
  if (needs_grad({&a})) {
    auto node = make_node("DiagonalBackward0", diagonal_backward, {a});
    node->differentiable_backward = diagonal_dbackward;
    save_diagonal_attrs(*node, offset, dim1, dim2);
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

// ================================================================ diag

namespace {

// The diagonal of a matrix as a new contiguous tensor.
Tensor copy_diagonal(const Tensor& m, int64_t offset) {
  if (m->is_meta()) {
    const DiagonalGeometry geo = diagonal_geometry(m->sizes, m->strides, offset, 0, 1);
    return empty_tensor(geo.sizes, m->dtype(), true);
  }
  Tensor c = m->is_contiguous() ? m : kernels::copy(m);
  const DiagonalGeometry geo = diagonal_geometry(c->sizes, c->strides, offset, 0, 1);
  return kernels::copy(make_alias(c, geo.sizes, geo.strides, c->offset + geo.offset));
}

// DiagBackward0 (derivatives.yaml diag: diag_backward): a vector's gradient is the matrix
// gradient's diagonal; a matrix's is zeros with the gradient on the diagonal.
std::vector<Tensor> diag_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const int64_t offset = n.attr("diagonal").i;
  if (m.sizes.size() == 1) return {as_dtype(copy_diagonal(g[0], offset), m.dtype)};
  return {as_dtype(place_on_diagonal(g[0], m.sizes, offset, {0, 1}), m.dtype)};
}

}  // namespace

Tensor diag(const Tensor& a, int64_t offset) {
  OpScope scope("diag");
  if (a->dim() != 1 && a->dim() != 2) throw ScenarioError("shape_mismatch", "matrix or a vector expected");
  refuse_half_on_cpu(a, "diag");  // measured: "diag" not implemented for 'Half'
  Tensor r;
  if (a->dim() == 2) {
    // at::diag does not clamp a diagonal past the matrix to size 0 (measured: a 3x4
    // matrix's diag(5) raises, diag(4) has size 0).
    const int64_t length = offset >= 0 ? std::min(a->sizes[0], a->sizes[1] - offset)
                                       : std::min(a->sizes[0] + offset, a->sizes[1]);
    if (length < 0) type_error("numel: integer multiplication overflow");
    r = copy_diagonal(a, offset);
  } else {
    const int64_t n = a->sizes[0] + (offset < 0 ? -offset : offset);
    r = a->is_meta() ? empty_tensor(Shape{n, n}, a->dtype(), true) : place_on_diagonal(a, Shape{n, n}, offset, {0, 1});
  }
  if (needs_grad({&a})) {
    auto node = make_node("DiagBackward0", diag_backward, {a});
    node->save_attr("diagonal", AttrValue::integer(offset, true));  // as written: -1 reads 2**64 - 1 (measured)
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    set_history(r, node);
  }
  return r;
}

// ================================================================ hstack vstack dstack

namespace {

// at::atleast_1d / 2d / 3d (1.13): a 0-d tensor is reshaped ({1}, {1, 1}, {1, 1, 1}); a
// missing leading dim is unsqueeze(0), a missing trailing one unsqueeze(-1) (measured:
// UnsqueezeBackward0 _saved_dim 18446744073709551615); a tensor with enough dims is itself.
Tensor at_least(const Tensor& t, int64_t ndim) {
  if (t->dim() >= ndim) return t;
  if (t->dim() == 0) return reshape(t, std::vector<int64_t>(static_cast<size_t>(ndim), 1));
  if (ndim == 2) return unsqueeze(t, 0);
  return t->dim() == 1 ? unsqueeze(unsqueeze(t, 0), -1) : unsqueeze(t, -1);
}

Tensor stack_along(const std::vector<Tensor>& tensors, int64_t ndim, const char* op) {
  if (tensors.empty()) type_error(std::string(op) + " expects a non-empty TensorList");
  std::vector<Tensor> raised;
  for (const Tensor& t : tensors) raised.push_back(at_least(t, ndim));
  // hstack joins 1-d tensors along dim 0, others along dim 1; vstack 0; dstack 2.
  int64_t dim = ndim - 1;
  if (ndim == 1) dim = raised[0]->dim() == 1 ? 0 : 1;
  return cat(raised, ndim == 2 ? 0 : dim);
}

}  // namespace

Tensor atleast_nd(const Tensor& t, int64_t ndim) { return at_least(t, ndim); }
Tensor hstack(const std::vector<Tensor>& tensors) { return stack_along(tensors, 1, "hstack"); }
Tensor vstack(const std::vector<Tensor>& tensors) { return stack_along(tensors, 2, "vstack"); }
Tensor dstack(const std::vector<Tensor>& tensors) { return stack_along(tensors, 3, "dstack"); }

// ================================================================ broadcast_tensors

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  OpScope scope("broadcast_tensors");
  Shape shape;
  for (size_t k = 0; k < tensors.size(); ++k)
    shape = k == 0 ? Shape(tensors[k]->sizes) : kernels::broadcast_shapes(shape, tensors[k]->sizes, "broadcast_tensors");
  std::vector<Tensor> out;
  for (const Tensor& t : tensors)
    out.push_back(Shape(t->sizes) == shape ? t : expand(t, std::vector<int64_t>(shape.begin(), shape.end())));
  return out;
}

// ================================================================ var_mean std_mean

namespace {

struct GroupStats {
  std::vector<double> mean, spread;  // spread: var or std per output element
};

GroupStats group_stats(const std::vector<double>& x, const ReducePlan& p, int64_t correction, bool std_dev) {
  GroupStats s;
  s.mean.assign(static_cast<size_t>(p.groups), 0.0);
  s.spread.assign(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < x.size(); ++i) s.mean[static_cast<size_t>(p.group[i])] += x[i];
  for (double& m : s.mean) m /= static_cast<double>(p.count);
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - s.mean[static_cast<size_t>(p.group[i])];
    s.spread[static_cast<size_t>(p.group[i])] += d * d;
  }
  // Divisor max(0, N - correction), as var: 0/0 is NaN.
  const double dof = static_cast<double>(std::max<int64_t>(0, p.count - correction));
  for (double& v : s.spread) v = std_dev ? std::sqrt(v / dof) : v / dof;
  return s;
}

std::vector<int64_t> saved_reduced_dims(const Node& n, size_t ndim) {
  const AttrValue& d = n.attr("dim");
  std::vector<int64_t> out;
  if (d.kind == AttrValue::Kind::IntList && ndim > 0)
    for (int64_t v : d.list) out.push_back(kernels::wrap_dim(v, static_cast<int64_t>(ndim)));
  return out;
}

// var_mean_backward / std_mean_backward (FunctionsManual.cpp): var_backward(grads[0]) (or
// std_backward, 0 where the std is 0) plus mean_backward(grads[1]) = grads[1] / N.
std::vector<Tensor> var_mean_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const bool std_dev = n.name == "StdMeanBackward0";
  Tensor self = n.unpack("self");
  const ReducePlan p = plan_reduce(m.sizes, saved_reduced_dims(n, m.sizes.size()), true);
  const int64_t correction = n.attr("correction").i;
  const std::vector<double> x = to_values(self), g_spread = to_values(g[0]), g_mean = to_values(g[1]);
  const GroupStats s = group_stats(x, p, correction, false);
  std::vector<double> spread = s.spread;
  if (std_dev) spread = to_values(n.unpack("result0"));
  const double dof = static_cast<double>(p.count - correction);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const auto k = static_cast<size_t>(p.group[i]);
    const double centered = x[i] - s.mean[k];
    const double from_spread = std_dev ? (spread[k] == 0 ? 0.0 : g_spread[k] * centered / (spread[k] * dof))
                                       : 2.0 * g_spread[k] * centered / dof;
    out[i] = from_spread + g_mean[k] / static_cast<double>(p.count);
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

std::pair<Tensor, Tensor> var_mean(const Tensor& a, const std::optional<std::vector<int64_t>>& dims,
                                   int64_t correction, bool keepdim, bool std_dev) {
  OpScope scope(std_dev ? "std_mean" : "var_mean");
  require_host(a);
  if (!is_floating(a->dtype())) {
    ScenarioError e("dtype_mismatch", "std and var only support floating point and complex dtypes");
    e.facts = {{"op", std_dev ? "std_mean" : "var_mean"}, {"dtype", dtype_name(a->dtype())}};
    throw e;
  }
  std::vector<int64_t> wd;
  if (dims && a->dim() > 0) wd = wrap_dims(*dims, a->dim());
  const ReducePlan p = plan_reduce(a->sizes, wd, keepdim && dims);
  GroupStats s;
  if (!a->is_meta()) s = group_stats(to_values(a), p, correction, std_dev);
  Tensor spread = make_out(p.out_shape, a->dtype(), a->is_meta(), s.spread);
  Tensor mean = make_out(p.out_shape, a->dtype(), a->is_meta(), s.mean);
  if (needs_grad({&a})) {
    auto node = make_node(std_dev ? "StdMeanBackward0" : "VarMeanBackward0", var_mean_backward, {a});
    set_history(spread, node, 0);
    set_history(mean, node, 1);
    node->save_attr("correction", AttrValue::integer(correction));
    node->save_attr("dim", dims ? AttrValue::ints(*dims, true) : AttrValue::none());
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    if (std_dev) node->save_output("result0", spread, 0);
    node->save_input("self", a);
  }
  return {spread, mean};
}

// ================================================================ cumprod

namespace {

// Calls f(first, step, length) for every line along `dim` of a contiguous tensor of `sizes`
// (a 0-d tensor is one line of one element).
template <typename F>
void for_each_dim_line(const Shape& sizes, int64_t dim, F&& f) {
  if (sizes.empty()) return f(size_t{0}, size_t{1}, size_t{1});
  const auto d = static_cast<size_t>(dim);
  size_t inner = 1, outer = 1;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (k < d) outer *= static_cast<size_t>(sizes[k]);
    if (k > d) inner *= static_cast<size_t>(sizes[k]);
  }
  const auto length = static_cast<size_t>(sizes[d]);
  for (size_t o = 0; o < outer; ++o)
    for (size_t in = 0; in < inner; ++in) f(o * length * inner + in, inner, length);
}

// cumprod_backward: d out[j] / d x[k] = prod of x[i] for i <= j, i != k (j >= k), written
// without dividing by x, so zeros in the input get their exact gradient (measured: cumprod
// of [1, 2, 0, 3, 0, 4] summed gives [3, 1, 8, 0, 0, 0]).
std::vector<Tensor> cumprod_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const int64_t d = m.sizes.empty() ? 0 : kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  const std::vector<double> x = to_values(n.unpack("self")), gv = to_values(g[0]);
  n.unpack("result");  // saved, and checked like every saved value of the node
  std::vector<double> out(x.size(), 0.0);
  for_each_dim_line(m.sizes, d, [&](size_t first, size_t step, size_t length) {
    for (size_t k = 0; k < length; ++k) {
      double before = 1;  // product of x[i] for i < k
      for (size_t i = 0; i < k; ++i) before *= x[first + i * step];
      double acc = 0, after = 1;  // after: product of x[i] for k < i <= j
      for (size_t j = k; j < length; ++j) {
        if (j > k) after *= x[first + j * step];
        acc += gv[first + j * step] * before * after;
      }
      out[first + k * step] = acc;
    }
  });
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

Tensor cumprod(const Tensor& a, int64_t dim) {
  OpScope scope("cumprod");
  require_host(a);
  refuse_half_on_cpu(a, "cumprod_out_cpu");
  const int64_t wd = a->dim() == 0 ? kernels::wrap_dim(dim, 1) : kernels::wrap_dim(dim, a->dim());
  const DType out = is_floating(a->dtype()) ? a->dtype() : DType::Int64;
  std::vector<double> values;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    values.resize(x.size());
    // Accumulated in double (the CPU kernel's acc_type for float), each output rounded.
    for_each_dim_line(a->sizes, a->dim() == 0 ? 0 : wd, [&](size_t first, size_t step, size_t length) {
      double acc = 1;
      for (size_t j = 0; j < length; ++j) values[first + j * step] = acc *= x[first + j * step];
    });
  }
  Tensor r = make_out(a->sizes, out, a->is_meta(), values);
  if (needs_grad({&a})) {
    auto node = make_node("CumprodBackward0", cumprod_backward, {a});
    set_history(r, node);
    node->save_attr("dim", AttrValue::integer(dim, true));  // as written: -1 reads 2**64 - 1 (measured)
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

// ================================================================ isnan isinf isfinite

Tensor float_class(const Tensor& a, const std::string& op) {
  OpScope scope(op);
  require_host(a);
  // Integer and bool tensors hold no NaN or infinity (measured: arange(3).isfinite() is all True).
  double (*f)(double) = [](double v) { return std::isfinite(v) ? 1.0 : 0.0; };
  if (op == "isnan") f = [](double v) { return std::isnan(v) ? 1.0 : 0.0; };
  if (op == "isinf") f = [](double v) { return std::isinf(v) ? 1.0 : 0.0; };
  // at::isfinite is (self == self) * (self.abs() != inf): its abs records an AbsBackward0 that
  // saves self and is dropped at once (measured: a pack hook sees x under isfinite only).
  if (op == "isfinite" && is_floating(a->dtype())) return kernels::unary(abs(a), DType::Bool, f);
  return kernels::unary(a, DType::Bool, f);
}

// ================================================================ unsafe splits

namespace {

// split_backward / split_with_sizes_backward: the pieces' gradients joined along dim.
std::vector<Tensor> unsafe_split_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  return {as_dtype(cat(g, d), m.dtype)};
}

// at::unsafe_split: split's pieces, each given a version counter of its own (measured:
// s1.mul_(2) bumps s1._version only; b._version and s2._version stay 0; s1._base is None).
// `split_views` runs with grad mode off: the views' own node is not recorded.
template <typename Split>
std::vector<Tensor> unsafe_pieces(const Tensor& a, Split&& split_views) {
  std::vector<Tensor> views;
  {
    autograd::GradModeGuard off(false);
    views = split_views();
  }
  std::vector<Tensor> out;
  for (const Tensor& v : views) {
    Tensor piece = make_alias(a, v->sizes, v->strides, v->offset);
    piece->version = make_shared_object<VersionCounter>();
    out.push_back(piece);
  }
  return out;
}

std::vector<Tensor> record_unsafe(const Tensor& a, std::vector<Tensor> pieces, const char* node_name, int64_t dim,
                                  const char* size_attr, AttrValue sizes) {
  if (needs_grad({&a})) {
    auto node = make_node(node_name, unsafe_split_backward, {a});
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    node->save_attr(size_attr, std::move(sizes));
    for (size_t i = 0; i < pieces.size(); ++i) set_history(pieces[i], node, static_cast<int>(i));
  }
  return pieces;
}

}  // namespace

std::vector<Tensor> unsafe_split(const Tensor& a, int64_t split_size, int64_t dim) {
  OpScope scope("unsafe_split");
  return record_unsafe(a, unsafe_pieces(a, [&] { return split(a, split_size, dim); }), "UnsafeSplitBackward0", dim,
                       "split_size", AttrValue::integer(split_size));
}

std::vector<Tensor> unsafe_split_with_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  OpScope scope("unsafe_split_with_sizes");
  return record_unsafe(a, unsafe_pieces(a, [&] { return split_with_sizes(a, sizes, dim); }),
                       "UnsafeSplitWithSizesBackward0", dim, "split_sizes", AttrValue::ints(sizes));
}

// ================================================================ the table fragment

namespace {

Value tensors_value(const std::vector<Tensor>& ts) {
  std::vector<Value> items;
  for (const Tensor& t : ts) items.push_back(T(t));
  return Value::tuple(std::move(items));
}

Value impl_diagonal(Args& a, Runtime&) {
  return T(diagonal(a.tensor("self"), a.integer("offset"), a.integer("dim1"), a.integer("dim2")));
}
Value impl_diag(Args& a, Runtime&) { return T(diag(a.tensor("self"), a.integer("diagonal"))); }
// torch.atleast_1d(x) is a tensor; several tensors, or one list of them, a tuple.
Value impl_atleast(Args& a, Runtime&) {
  const int64_t ndim = a.fn[a.fn.size() - 2] - '0';  // torch.atleast_<n>d
  const Value& v = a.get("tensors");
  const bool one_list =
      v.items.size() == 1 && (v.items[0].kind == Value::Kind::List || v.items[0].kind == Value::Kind::Tuple);
  Args inner = a;
  if (one_list) inner.values[0] = v.items[0];
  std::vector<Tensor> out;
  for (const Tensor& t : inner.tensors("tensors")) out.push_back(atleast_nd(t, ndim));
  if (out.size() == 1 && !one_list) return T(out[0]);
  return tensors_value(out);
}
// torch.eye(n, m=None, *, dtype, device, requires_grad): ones on the diagonal of zeros (no node).
Value impl_eye(Args& a, Runtime& rt) {
  const int64_t n = a.integer("n");
  const int64_t m = a.given("m") ? a.integer("m") : n;
  if (n < 0) type_error("n must be greater or equal to 0, got " + std::to_string(n));
  if (m < 0) type_error("m must be greater or equal to 0, got " + std::to_string(m));
  const std::string device = creation_device(a, rt, "cpu");
  const DType dtype = creation_dtype(a, DType::Float32);
  const Shape shape{n, m};
  if (device == "meta") return finish_creation(a, empty_tensor(shape, dtype, true));
  DeviceScope on(device);
  Tensor ones = kernels::full(Shape{std::min(n, m)}, 1.0, dtype, false);
  return finish_creation(a, place_on_diagonal(ones, shape, 0, {0, 1}));
}
// A tensor list argument: a tensor alone is PyTorch's TypeError (measured: torch.hstack(x)).
std::vector<Tensor> tensor_list(const Args& a) {
  const Value& v = a.get("tensors");
  if (v.kind != Value::Kind::List && v.kind != Value::Kind::Tuple)
    type_error(short_fn(a.fn) + "(): argument 'tensors' (position 1) must be tuple of Tensors, not " + type_name(v));
  return a.tensors("tensors");
}
Value impl_hstack(Args& a, Runtime&) { return T(hstack(tensor_list(a))); }
Value impl_vstack(Args& a, Runtime&) { return T(vstack(tensor_list(a))); }
Value impl_dstack(Args& a, Runtime&) { return T(dstack(tensor_list(a))); }
Value impl_broadcast_tensors(Args& a, Runtime&) {
  // torch.broadcast_tensors(*tensors) only (measured: a list is "expected Tensor as element 0
  // in argument 0, but got list").
  const Value& v = a.get("tensors");
  for (size_t k = 0; k < v.items.size(); ++k)
    if (v.items[k].kind != Value::Kind::Tensor)
      type_error("expected Tensor as element " + std::to_string(k) + " in argument 0, but got " + type_name(v.items[k]));
  return tensors_value(broadcast_tensors(a.tensors("tensors")));
}
Value var_mean_pair(Args& a, bool std_dev) {
  const VarArgs v = parse_var_args(a, std_dev ? "std_mean" : "var_mean");
  auto [spread, mean] = var_mean(a.tensor("self"), v.dims, v.correction, v.keepdim, std_dev);
  return Value::tuple({T(spread), T(mean)});
}
Value impl_var_mean(Args& a, Runtime&) { return var_mean_pair(a, false); }
Value impl_std_mean(Args& a, Runtime&) { return var_mean_pair(a, true); }
Value impl_cumprod(Args& a, Runtime&) {
  // dtype= casts before the op in PyTorch; not mirrored.
  if (a.given("dtype")) unsupported("cumprod(dtype=...)");
  return T(cumprod(a.tensor("self"), a.integer("dim")));
}
Value impl_float_class(Args& a, Runtime&) { return T(float_class(a.tensor("self"), short_fn(a.fn))); }

// Tensor.type(): the legacy type name; Tensor.type(dtype) is Tensor.to(dtype) (measured:
// ToCopyBackward0, and the same object for the tensor's own dtype).
const std::pair<DType, const char*> kLegacyTypeNames[] = {
    {DType::Float32, "FloatTensor"}, {DType::Float64, "DoubleTensor"}, {DType::Float16, "HalfTensor"},
    {DType::BFloat16, "BFloat16Tensor"}, {DType::Int64, "LongTensor"}, {DType::Bool, "BoolTensor"}};

Value impl_type(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  const Value& d = a.get("dtype");
  if (d.kind == Value::Kind::None) {
    // PyTorch 1.13 has no legacy type for meta: RuntimeError "Unimplemented backend Meta".
    if (x->is_meta()) type_error("Unimplemented backend Meta");
    for (const auto& [dtype, name] : kLegacyTypeNames)
      if (dtype == x->dtype()) return Value::str(std::string(x->storage->on_device() ? "torch.cuda." : "torch.") + name);
  }
  if (d.kind == Value::Kind::DType) return T(to_dtype(x, d.dtype));
  if (d.kind == Value::Kind::Str)
    for (const auto& [dtype, name] : kLegacyTypeNames)
      if (d.s == std::string("torch.") + name) return T(to_dtype(x, dtype));
  unsupported("Tensor.type(" + type_name(d) + ")");
}

Value impl_torch_size(Args& a, Runtime&) {
  const Value& v = a.get("sizes");
  if (v.kind == Value::Kind::None) return Value::torch_size({});
  const std::vector<int64_t> sizes = a.shape("sizes");
  return Value::torch_size(Shape(sizes.begin(), sizes.end()));
}

std::vector<int64_t> int_list(const Args& a, const char* name) {
  const Value& v = a.get(name);
  if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List)
    type_error(short_fn(a.fn) + "(): argument '" + name + "' must be tuple of ints, not " + type_name(v));
  return a.shape(name);
}

Value impl_split_with_sizes(Args& a, Runtime&) {
  return tensors_value(split_with_sizes(a.tensor("self"), int_list(a, "split_sizes"), a.integer("dim")));
}
Value impl_unsafe_split(Args& a, Runtime&) {
  return tensors_value(unsafe_split(a.tensor("self"), a.integer("split_size"), a.integer("dim")));
}
Value impl_unsafe_split_with_sizes(Args& a, Runtime&) {
  return tensors_value(unsafe_split_with_sizes(a.tensor("self"), int_list(a, "split_sizes"), a.integer("dim")));
}
Value impl_unsafe_chunk(Args& a, Runtime&) {
  // at::unsafe_chunk is unsafe_split(ceil(size / chunks)) (measured: 3 chunks of 3 rows
  // record split_size 1).
  Tensor x = a.tensor("self");
  const int64_t chunks = a.integer("chunks");
  if (x->dim() == 0) throw ScenarioError("shape_mismatch", "chunk expects at least a 1-dimensional tensor");
  if (chunks <= 0)
    throw ScenarioError("shape_mismatch", "chunk expects `chunks` to be greater than 0, got: " + std::to_string(chunks));
  const int64_t size = x->sizes[static_cast<size_t>(kernels::wrap_dim(a.integer("dim"), x->dim()))];
  if (size == 0) unsupported("unsafe_chunk of an empty dim");
  return tensors_value(unsafe_split(x, (size + chunks - 1) / chunks, a.integer("dim")));
}

Value impl_einsum(Args& a, Runtime&) {
  const Value& eq = a.get("equation");
  if (eq.kind != Value::Kind::Str)
    unsupported("einsum(" + type_name(eq) + ", ...) (the sublist form)");
  const Value& ops_value = a.get("operands");
  // torch.einsum(eq, [a, b]) is torch.einsum(eq, a, b) (torch.functional.einsum).
  if (ops_value.items.size() == 1 &&
      (ops_value.items[0].kind == Value::Kind::List || ops_value.items[0].kind == Value::Kind::Tuple)) {
    Args inner = a;
    inner.values[1] = ops_value.items[0];
    return T(einsum(eq.s, inner.tensors("operands")));
  }
  return T(einsum(eq.s, a.tensors("operands")));
}

}  // namespace

std::vector<OpEntry> shapes_extra_ops() {
  const char* var_sig = "(self, dim=None, unbiased=None, keepdim=None, *, correction=None)";
  return {
      {"diagonal", {"torch.diagonal", "Tensor.diagonal"}, "(self, offset=0, dim1=0, dim2=1)", "view",
       "DiagonalBackward0", "dim1, dim2, offset (as written), self_sym_sizes; create_graph: DiagonalBackwardBackward0",
       impl_diagonal, {}},
      {"diag", {"torch.diag", "Tensor.diag"}, "(self, diagonal=0)", "shape", "DiagBackward0",
       "diagonal (as written), self_sym_sizes; a matrix's diagonal or a vector's matrix, a new tensor", impl_diag, {}},
      {"atleast_1d", {"torch.atleast_1d"}, "(*tensors)", "view", "ReshapeAliasBackward0",
       "self_sym_sizes for a 0-d tensor (reshape to (1,)); other tensors are returned themselves", impl_atleast, {}},
      {"atleast_2d", {"torch.atleast_2d"}, "(*tensors)", "view", "ReshapeAliasBackward0 / UnsqueezeBackward0",
       "0-d: reshape (1, 1); 1-d: unsqueeze(0) (dim); others are returned themselves", impl_atleast, {}},
      {"atleast_3d", {"torch.atleast_3d"}, "(*tensors)", "view", "ReshapeAliasBackward0 / UnsqueezeBackward0",
       "0-d: reshape (1, 1, 1); 1-d: unsqueeze(0) then unsqueeze(-1); 2-d: unsqueeze(-1); others themselves",
       impl_atleast, {}},
      {"eye", {"torch.eye"}, "(n, m=None, *, dtype=None, device=None, requires_grad=False)", "creation", "-", "-",
       impl_eye, {}},
      {"hstack", {"torch.hstack"}, "(tensors)", "shape", "CatBackward0",
       "cat(atleast_1d(tensors), dim 0 for 1-d else 1): dim; ReshapeAliasBackward0 for a 0-d tensor", impl_hstack, {}},
      {"vstack", {"torch.vstack"}, "(tensors)", "shape", "CatBackward0",
       "cat(atleast_2d(tensors), 0): dim; UnsqueezeBackward0 (dim 0) for a 1-d tensor", impl_vstack, {}},
      {"dstack", {"torch.dstack"}, "(tensors)", "shape", "CatBackward0",
       "cat(atleast_3d(tensors), 2): dim; UnsqueezeBackward0 (dim -1, after dim 0 for a 1-d tensor)", impl_dstack,
       {}},
      {"broadcast_tensors", {"torch.broadcast_tensors"}, "(*tensors)", "view", "ExpandBackward0",
       "self_sym_sizes of each expanded tensor; a tensor already of the shape is returned itself",
       impl_broadcast_tensors, {}},
      {"var_mean", {"torch.var_mean"}, var_sig, "reduction", "VarMeanBackward0",
       "one node for both outputs: correction, dim (None for all), keepdim, self", impl_var_mean, {}},
      {"std_mean", {"torch.std_mean"}, var_sig, "reduction", "StdMeanBackward0",
       "one node for both outputs: correction, dim (None for all), keepdim, result0 (the std), self", impl_std_mean,
       {}},
      {"cumprod", {"torch.cumprod", "Tensor.cumprod"}, "(self, dim, *, dtype=None)", "reduction", "CumprodBackward0",
       "dim (as written), result, self; exact gradients where the input has zeros", impl_cumprod, {}},
      {"isnan", {"torch.isnan", "Tensor.isnan"}, "(self)", "pointwise", "-", "nothing (a bool result)",
       impl_float_class, {}},
      {"isinf", {"torch.isinf", "Tensor.isinf"}, "(self)", "pointwise", "-", "nothing (a bool result)",
       impl_float_class, {}},
      {"isfinite", {"torch.isfinite", "Tensor.isfinite"}, "(self)", "pointwise", "-", "nothing (a bool result)",
       impl_float_class, {}},
      {"type", {"Tensor.type"}, "(self, dtype=None, non_blocking=False)", "conversion", "ToCopyBackward0",
       "as Tensor.to(dtype); no argument: the legacy type name ('torch.FloatTensor')", impl_type, {}},
      {"Size", {"torch.Size"}, "(sizes=None)", "introspection", "-", "nothing (a torch.Size)", impl_torch_size, {}},
      {"split_with_sizes", {"torch.split_with_sizes", "Tensor.split_with_sizes"}, "(self, split_sizes, dim=0)", "view",
       "SplitWithSizesBackward0", "one node for all the views: dim, self_sizes, split_sizes", impl_split_with_sizes,
       {}},
      {"unsafe_split", {"torch.unsafe_split", "Tensor.unsafe_split"}, "(self, split_size, dim=0)", "shape",
       "UnsafeSplitBackward0",
       "dim, self_sizes, split_size; the pieces share storage but are not views (own version counters)",
       impl_unsafe_split, {}},
      {"unsafe_split_with_sizes", {"torch.unsafe_split_with_sizes", "Tensor.unsafe_split_with_sizes"},
       "(self, split_sizes, dim=0)", "shape", "UnsafeSplitWithSizesBackward0",
       "dim, self_sizes, split_sizes; pieces as unsafe_split", impl_unsafe_split_with_sizes, {}},
      {"unsafe_chunk", {"torch.unsafe_chunk", "Tensor.unsafe_chunk"}, "(self, chunks, dim=0)", "shape",
       "UnsafeSplitBackward0", "unsafe_split(ceil(size / chunks)): dim, self_sizes, split_size", impl_unsafe_chunk,
       {}},
      {"einsum", {"torch.einsum"}, "(equation, *operands)", "linalg",
       "PermuteBackward0, DiagonalBackward0, SumBackward1, MulBackward0, BmmBackward0, ...",
       "what each op of at::einsum's decomposition saves; three or more operands contracted left to right", impl_einsum, {}},
  };
}

}  // namespace agtrace::ops
