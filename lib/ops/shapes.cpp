// Shape operations, indexing with tensors, concatenation and dtype conversion.
//
// Views (permute, expand, (un)squeeze, split/chunk/unbind, flatten when a view fits)
// share the input's storage and version counter and save only sizes and dims (SUMMARY:
// "No tensors saved: ... all views"). Copies (index_select, x[idx], cat, stack, to)
// allocate one new storage, as the ATen kernel does. Every fact cited below was measured
// with /usr/bin/python3 and torch 1.13 (shared/oracle/SUMMARY.md and re-measurements).
//
// Dims and indices are saved as the user passed them: PyTorch keeps them in int64
// fields that Python reads back as uint64, so dim=-1 reads 18446744073709551615
// (measured for PermuteBackward0.dims, UnsqueezeBackward0.dim, SqueezeBackward1.dim,
// CatBackward0.dim, StackBackward0.dim, SplitBackward0.dim, UnbindBackward0.dim,
// IndexSelectBackward0.dim). Backward formulas wrap them against the recorded shapes.
#include "ops/shapes.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "tensor/device_backend.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

// ------------------------------------------------------------------ helpers

AttrValue dim_attr(int64_t dim) { return AttrValue::integer(dim, true); }

// One version bump, announced to the accountant (what every in-place op does).
void bump_version(const Tensor& t) {
  t->version->bump();
  Event e;
  e.kind = Event::Kind::VersionBump;
  e.storage_id = t->storage->id;
  e.version = t->version->version;
  emit(e);
}

ScenarioError shape_error(const std::string& msg, nlohmann::json facts = nlohmann::json::object()) {
  ScenarioError e("shape_mismatch", msg);
  e.facts = std::move(facts);
  return e;
}

// The stride at.unsqueeze gives a new size-1 dim at `d` (inferUnsqueezeGeometry).
int64_t unsqueeze_stride(const Shape& sizes, const Shape& strides, size_t d) {
  return d >= sizes.size() ? 1 : sizes[d] * strides[d];
}

// grad.unsqueeze(d) / grad.squeeze(d) as raw aliases for backward formulas (no storage).
Tensor unsqueeze_alias(const Tensor& g, int64_t d) {
  Shape sz = g->sizes, st = g->strides;
  const int64_t s = unsqueeze_stride(sz, st, static_cast<size_t>(d));
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return make_alias(g, sz, st, g->offset);
}

Tensor squeeze_alias(const Tensor& g, int64_t d) {
  if (g->dim() == 0 || g->sizes[static_cast<size_t>(d)] != 1) return g;
  Shape sz = g->sizes, st = g->strides;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_alias(g, sz, st, g->offset);
}

// grad.narrow(dim, start, length) as a raw alias.
Tensor narrow_alias(const Tensor& g, int64_t dim, int64_t start, int64_t length) {
  Shape sz = g->sizes;
  sz[static_cast<size_t>(dim)] = length;
  return make_alias(g, sz, g->strides, g->offset + start * g->strides[static_cast<size_t>(dim)]);
}

// grad.select(dim, i) as a raw alias.
Tensor select_alias(const Tensor& g, int64_t dim, int64_t i) {
  Shape sz = g->sizes, st = g->strides;
  const int64_t off = g->offset + i * st[static_cast<size_t>(dim)];
  sz.erase(sz.begin() + dim);
  st.erase(st.begin() + dim);
  return make_alias(g, sz, st, off);
}

// at::cat without autograd: one new contiguous storage of dtype `out`.
Tensor cat_kernel(const std::vector<Tensor>& ts, int64_t dim, const Shape& out_shape, DType out, bool meta) {
  Tensor r = empty_tensor(out_shape, out, meta);
  if (meta) return r;
  int64_t at = 0;
  for (const Tensor& t : ts) {
    if (t->dim() == 1 && t->numel() == 0 && out_shape.size() != 1) continue;  // legacy empty input
    const int64_t len = t->sizes[static_cast<size_t>(dim)];
    // On cuda the copy kernel writes each input into its slice (cast to `out`).
    if (kernels::device::on_device(r)) kernels::device::copy_into(narrow_alias(r, dim, at, len), t);
    else copy_values(narrow_alias(r, dim, at, len), t);
    at += len;
  }
  return r;
}

// at::stack without autograd: the inputs (all of one shape) placed along a new dim.
Tensor stack_kernel(const std::vector<Tensor>& ts, int64_t dim, DType out, bool meta) {
  Shape shape = ts[0]->sizes;
  shape.insert(shape.begin() + dim, static_cast<int64_t>(ts.size()));
  Tensor r = empty_tensor(shape, out, meta);
  if (meta) return r;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (kernels::device::on_device(r)) kernels::device::copy_into(select_alias(r, dim, static_cast<int64_t>(i)), ts[i]);
    else copy_values(select_alias(r, dim, static_cast<int64_t>(i)), ts[i]);
  }
  return r;
}

bool any_meta(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t->is_meta()) return true;
  return false;
}

// The gradient for a differentiable input, in its dtype (PyTorch's engine casts a
// gradient to the input's dtype in validate_outputs).
Tensor in_dtype(const Tensor& g, const autograd::OutputMeta& m) { return as_dtype(g, m.dtype); }

// ------------------------------------------------------------------ create_graph=True
// The formulas of derivatives.yaml (torch 1.13) written with autograd-aware ops, so the
// gradient records PyTorch's nodes (each walk measured with /usr/bin/python3).

// PermuteBackward0: permute_backwards(grad, dims) = grad.permute(inverse permutation)
// (PermuteBackward0; measured x.permute(-1, 0) gives the gradient's _saved_dims (1, 0)).
std::vector<Tensor> permute_dbackward(Node& n, const std::vector<Tensor>& g) {
  const auto& dims = n.attr("dims").list;
  const int64_t nd = static_cast<int64_t>(dims.size());
  std::vector<int64_t> inverse(dims.size());
  for (int64_t i = 0; i < nd; ++i) inverse[static_cast<size_t>(kernels::wrap_dim(dims[static_cast<size_t>(i)], nd))] = i;
  return {permute(g[0], inverse)};
}

// ExpandBackward0: at::sum_to(grad, self.sym_sizes()) (SumBackward1 keepdim, then
// ViewBackward0 when leading dims were added; measured (2, 3) -> (4, 2, 3): ViewBackward0 >
// SumBackward1).
std::vector<Tensor> expand_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {sum_to_graph(g[0], n.attr("self_sym_sizes").list)};
}

// UnsqueezeBackward0: grad.squeeze(dim) (SqueezeBackward1 with dim as written).
std::vector<Tensor> unsqueeze_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {squeeze(g[0], n.attr("dim").i)};
}

// SqueezeBackward0/1/3: unsqueeze_to(grad, [dim,] sizes): grad.unsqueeze(d) for the removed
// size-1 dims, wrapped, in ascending order (measured: squeeze(-2) of (2, 1, 3) gives
// UnsqueezeBackward0 _saved_dim 1; squeeze() of (2, 1, 3, 1) gives dims 1 then 3).
std::vector<Tensor> squeeze_dbackward(Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  Tensor r = g[0];
  if (n.find("dim")) {
    if (sizes.empty()) return {r};
    const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(sizes.size()));
    if (sizes[static_cast<size_t>(d)] == 1) r = unsqueeze(r, d);
  } else {
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] == 1) r = unsqueeze(r, static_cast<int64_t>(d));
  }
  return {r};
}

// SplitBackward0 / SplitWithSizesBackward0: split_with_sizes_backward = at::cat(grads, dim)
// with dim wrapped (CatBackward0, measured _saved_dim 1 for split(1, -1)); an unused
// output's gradient is zeros without a graph (a None edge).
std::vector<Tensor> split_dbackward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  return {cat(g, kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size())))};
}

// UnbindBackward0: unbind_backward = at::stack(grads, dim) with dim as written
// (StackBackward0, measured _saved_dim 18446744073709551615 for unbind(-1)).
std::vector<Tensor> unbind_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {stack(g, n.attr("dim").i)};
}

// cat_tensors_backward's pieces: input i's gradient is piece(dim, offset, size), the dim
// wrapped against the inputs that took part (legacy 1-D empty inputs are skipped and get
// an empty gradient); null where `wanted(i)` is false.
std::vector<Tensor> cat_pieces(const Node& n, const std::function<bool(size_t)>& wanted,
                               const std::function<Tensor(size_t, int64_t, int64_t, int64_t)>& piece) {
  const auto& metas = n.input_meta;
  int64_t rank = 0;
  for (const auto& m : metas)
    if (!(m.sizes.size() == 1 && m.sizes[0] == 0)) rank = static_cast<int64_t>(m.sizes.size());
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, rank);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (size_t i = 0; i < metas.size(); ++i) {
    const auto& m = metas[i];
    if (m.sizes.size() == 1 && m.sizes[0] == 0 && rank != 1) {
      out.push_back(wanted(i) ? kernels::full({0}, 0.0, m.dtype, m.meta) : nullptr);
      continue;
    }
    const int64_t len = m.sizes[static_cast<size_t>(d)];
    out.push_back(wanted(i) ? piece(i, d, at, len) : nullptr);
    at += len;
  }
  return out;
}

// CatBackward0: cat_tensors_backward = grad.narrow(dim, offset, size) with dim wrapped
// (SliceBackward0, measured _saved_dim 1, _saved_start 0, _saved_end 3 for cat(.., -1)).
std::vector<Tensor> cat_dbackward(Node& n, const std::vector<Tensor>& g) {
  return cat_pieces(
      n, [&n](size_t i) { return n.should_compute_output(i); },
      [&g](size_t, int64_t d, int64_t at, int64_t len) { return slice(g[0], d, at, at + len, 1); });
}

// StackBackward0: stack_tensors_backward = grad.select(dim, i) with dim as written
// (SelectBackward0, measured _saved_dim 18446744073709551615 for stack(.., -1)).
std::vector<Tensor> stack_dbackward(Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < n.input_meta.size(); ++i)
    out.push_back(n.should_compute_output(i) ? select(g[0], n.attr("dim").i, static_cast<int64_t>(i)) : nullptr);
  return out;
}

// ToCopyBackward0: _to_copy_backward(grad, self.options()) = grad.to(dtype); the cast is the
// engine's validate_outputs step here (ToCopyBackward0, measured).
std::vector<Tensor> to_copy_dbackward(Node&, const std::vector<Tensor>& g) { return {g[0]}; }

// ------------------------------------------------------------------ permute

// PermuteBackward0 (derivatives.yaml: permute_backwards(grad, dims)): grad permuted by the
// inverse permutation, a view of grad, no storage.
std::vector<Tensor> permute_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& dims = n.attr("dims").list;
  const int64_t nd = static_cast<int64_t>(dims.size());
  Shape sz(dims.size()), st(dims.size());
  for (int64_t i = 0; i < nd; ++i) {
    const auto d = static_cast<size_t>(kernels::wrap_dim(dims[static_cast<size_t>(i)], nd));
    sz[d] = g[0]->sizes[static_cast<size_t>(i)];
    st[d] = g[0]->strides[static_cast<size_t>(i)];
  }
  return {in_dtype(make_alias(g[0], sz, st, g[0]->offset), n.input_meta[0])};
}

// ------------------------------------------------------------------ expand

// ExpandBackward0 (derivatives.yaml: at::sum_to(grad, self.sym_sizes())): sums the
// broadcast dims; grad itself when nothing was broadcast.
std::vector<Tensor> expand_backward(Node& n, const std::vector<Tensor>& g) {
  return {in_dtype(kernels::sum_to(g[0], n.attr("self_sym_sizes").list), n.input_meta[0])};
}

// ------------------------------------------------------------------ (un)squeeze

// UnsqueezeBackward0 (derivatives.yaml: grad.squeeze(dim)): a view of grad.
std::vector<Tensor> unsqueeze_backward(Node& n, const std::vector<Tensor>& g) {
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, g[0]->dim());
  return {in_dtype(squeeze_alias(g[0], d), n.input_meta[0])};
}

// SqueezeBackward0/1/3 (derivatives.yaml: unsqueeze_to(grad, [dim,] self.sym_sizes())):
// grad viewed back with the removed size-1 dims.
std::vector<Tensor> squeeze_backward(Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  Tensor r = g[0];
  if (n.find("dim")) {
    if (sizes.empty()) return {in_dtype(r, n.input_meta[0])};
    const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(sizes.size()));
    if (sizes[static_cast<size_t>(d)] == 1) r = unsqueeze_alias(r, d);
  } else {
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] == 1) r = unsqueeze_alias(r, static_cast<int64_t>(d));
  }
  return {in_dtype(r, n.input_meta[0])};
}

Tensor squeeze_impl(const Tensor& a, std::optional<int64_t> dim) {
  Shape sz, st;
  const int64_t d = dim ? kernels::wrap_dim(*dim, a->dim()) : -1;
  for (int64_t i = 0; i < a->dim(); ++i) {
    const auto u = static_cast<size_t>(i);
    const bool drop = a->sizes[u] == 1 && (!dim || i == d);
    if (!drop) {
      sz.push_back(a->sizes[u]);
      st.push_back(a->strides[u]);
    }
  }
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node(dim ? "SqueezeBackward1" : "SqueezeBackward0", squeeze_backward, {a});
    node->differentiable_backward = squeeze_dbackward;
    if (dim) node->save_attr("dim", dim_attr(*dim));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

// ------------------------------------------------------------------ split / chunk / unbind

// SplitWithSizesBackward0 / SplitBackward0 (derivatives.yaml: split_with_sizes_backward /
// split_backward): the outputs' gradients concatenated along dim, one new storage. The
// engine has already filled the gradient of an unused output with zeros of its shape, as
// split_with_sizes_backward does with at::zeros.
std::vector<Tensor> split_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  return {in_dtype(cat_kernel(g, d, m.sizes, g[0]->dtype(), any_meta(g)), m)};
}

// UnbindBackward0 (derivatives.yaml: unbind_backward(grads, dim) = at::stack): one new storage.
std::vector<Tensor> unbind_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  return {in_dtype(stack_kernel(g, d, g[0]->dtype(), any_meta(g)), m)};
}

// The views of one multi-output node: output i has output_nr i (measured: split outputs
// share one SplitBackward0; their _base is x).
// In grad mode the outputs are MULTI_OUTPUT_NODE views even when no node is recorded (a base
// that does not require grad): an in-place edit with an input that requires grad is refused
// (measured: a.unbind()[0].add_(r), r requiring grad, raises view_inplace).
void mark_multi_output(const std::vector<Tensor>& outs, const char* node_name) {
  if (!autograd::grad_enabled()) return;
  for (const Tensor& t : outs) t->multi_output_node = InternedString(node_name);
}

void record_outputs(const std::vector<Tensor>& outs, const Shared<Node>& node) {
  for (size_t i = 0; i < outs.size(); ++i) {
    set_history(outs[i], node, static_cast<int>(i));
    outs[i]->multi_output_node = node->name;
  }
}

std::vector<Tensor> narrow_views(const Tensor& a, int64_t d, const std::vector<int64_t>& lengths) {
  std::vector<Tensor> outs;
  int64_t at = 0;
  for (int64_t len : lengths) {
    Shape sz = a->sizes;
    sz[static_cast<size_t>(d)] = len;
    outs.push_back(make_view(a, sz, a->strides, a->offset + at * a->strides[static_cast<size_t>(d)]));
    at += len;
  }
  return outs;
}

void require_dim(const Tensor& a, const std::string& op) {
  if (a->dim() == 0)
    throw shape_error(op + " expects at least a 1-dimensional tensor", {{"op", op}});
}

// ------------------------------------------------------------------ indexing

void require_index_dtype(const Tensor& idx) {
  if (idx->dtype() != DType::Int64 && idx->dtype() != DType::Bool) {
    // IndexError in PyTorch.
    ScenarioError e("index_out_of_range", "tensors used as indices must be long, byte or bool tensors");
    e.facts = {{"dtype", dtype_name(idx->dtype())}};
    throw e;
  }
}

// Index values, wrapped, checked against `size` with the message `oob(value)`. A cuda
// index is copied to the host first (host_values: a synchronising read): PyTorch's CUDA
// kernels check indices on the device and stop on a device-side assert, which leaves no
// error to report but poisons the CUDA context; agtrace raises the CPU's error instead,
// before the launch.
template <typename Msg>
std::vector<int64_t> index_values(const Tensor& idx, int64_t size, bool wrap_negative, Msg oob) {
  std::vector<int64_t> out;
  for (double v : host_values(idx)) {
    int64_t i = static_cast<int64_t>(v);
    if (i >= size || i < (wrap_negative ? -size : 0)) throw oob(i);
    out.push_back(i < 0 ? i + size : i);
  }
  return out;
}

// zeros(self_sizes) with grad's slices added at the indices along dim (index_add_ /
// index_put_ with accumulate=True): one new storage.
Tensor scatter_add_rows(const Tensor& g, const Shape& self_sizes, int64_t dim, const std::vector<int64_t>& index) {
  Tensor r = kernels::full(self_sizes, 0.0, g->dtype(), g->is_meta());
  if (r->is_meta()) return r;
  // View r and g as (outer, size_along_dim, inner).
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self_sizes[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < self_sizes.size(); ++d) inner *= self_sizes[d];
  const int64_t rows = self_sizes.empty() ? 1 : self_sizes[static_cast<size_t>(dim)];
  const int64_t k = static_cast<int64_t>(index.size());
  std::vector<double> gv = to_values(g), acc(static_cast<size_t>(r->numel()), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < inner; ++i)
        acc[static_cast<size_t>((o * rows + index[static_cast<size_t>(j)]) * inner + i)] +=
            gv[static_cast<size_t>((o * k + j) * inner + i)];
  write_values(r, acc);
  return r;
}

// IndexSelectBackward0 (derivatives.yaml: index_select_backward(grad, self.sym_sizes(), dim,
// index) = zeros(self_sizes).index_add_(dim, index, grad)).
std::vector<Tensor> index_select_backward(Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(sizes.size()));
  Tensor index = n.unpack("index");
  if (kernels::device::any_on_device({&g[0], &index})) {
    // zeros, then cuda/indexing.cuh's index_add: the one new storage, as below.
    Tensor r = kernels::full(sizes, 0.0, g[0]->dtype(), false);
    kernels::device::index_add(r, d, index, g[0]);
    return {in_dtype(r, n.input_meta[0])};
  }
  std::vector<int64_t> idx;
  for (double v : to_values(index)) idx.push_back(static_cast<int64_t>(v));
  return {in_dtype(scatter_add_rows(g[0], sizes, d, idx), n.input_meta[0])};
}

// IndexBackward0 (derivatives.yaml: index_backward(grad.new_zeros(self.sym_sizes()),
// indices, grad) = zeros.index_put_(indices, grad, accumulate=True)).
std::vector<Tensor> index_backward(Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  Tensor index = n.unpack("indices");
  if (kernels::device::any_on_device({&g[0], &index})) {
    // zeros, then index_add along dim 0 (index_put_ with accumulate), the indices wrapped on
    // the host (the forward checked them).
    std::vector<int64_t> rows;
    for (double v : host_values(index)) {
      const auto i = static_cast<int64_t>(v);
      rows.push_back(i < 0 ? i + sizes[0] : i);
    }
    Tensor r = kernels::full(sizes, 0.0, g[0]->dtype(), false);
    kernels::device::index_add_rows_wrapped(r, index, rows, g[0]);
    return {in_dtype(r, n.input_meta[0])};
  }
  std::vector<int64_t> idx;
  for (double v : to_values(index)) {
    const auto i = static_cast<int64_t>(v);
    idx.push_back(i < 0 ? i + sizes[0] : i);
  }
  return {in_dtype(scatter_add_rows(g[0], sizes, 0, idx), n.input_meta[0])};
}

// The true positions of a bool mask, row-major over its dims. A cuda mask is read on the
// host: the result's size depends on it (PyTorch's nonzero synchronises too).
std::vector<int64_t> mask_positions(const Tensor& mask) {
  std::vector<int64_t> out;
  const std::vector<double> mv = host_values(mask);
  for (size_t i = 0; i < mv.size(); ++i)
    if (mv[i] != 0) out.push_back(static_cast<int64_t>(i));
  return out;
}

// IndexBackward0 of x[mask] (index_backward: zeros(self_sizes).index_put_((mask,), grad,
// accumulate=True)): the gradient's rows added back at the mask's positions.
std::vector<Tensor> mask_index_backward(Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  Tensor mask = n.unpack("indices");
  const int64_t k = mask->dim();
  if (g[0]->is_meta()) return {in_dtype(kernels::full(sizes, 0.0, g[0]->dtype(), true), n.input_meta[0])};
  const std::vector<int64_t> pos = mask_positions(mask);
  Tensor r = kernels::full(sizes, 0.0, g[0]->dtype(), false);
  if (kernels::device::on_device(g[0])) {
    kernels::device::masked_rows_add(r, k, pos, g[0]);
    return {in_dtype(r, n.input_meta[0])};
  }
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(k); d < sizes.size(); ++d) inner *= sizes[d];
  const std::vector<double> gv = to_values(g[0]);
  std::vector<double> acc(static_cast<size_t>(shape_numel(sizes)), 0.0);
  for (size_t j = 0; j < pos.size(); ++j)
    for (int64_t i = 0; i < inner; ++i)
      acc[static_cast<size_t>(pos[j] * inner + i)] += gv[j * static_cast<size_t>(inner) + static_cast<size_t>(i)];
  write_values(r, acc);
  return {in_dtype(r, n.input_meta[0])};
}

// create_graph=True. IndexSelectBackward0: index_select_backward =
// zeros(self_sizes).index_add(dim, index, grad) (IndexAddBackward0, edges (None, grad),
// saving alpha 1, dim, index, source (the gradient) and source_dim; measured).
// IndexBackward0: index_backward = zeros._index_put_impl_(indices, grad, accumulate=True)
// (IndexPutImplBackward0, edges (None, grad), saving accumulate True and indices; measured).

// IndexAddBackward0 (derivatives.yaml index_add: source: maybe_multiply(grad.index_select(
// dim, index).expand_as(source), alpha)).
std::vector<Tensor> index_add_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor source = n.unpack("source");
  Tensor picked = index_select(g[0], n.attr("dim").i, n.unpack("index"));
  return {nullptr, expand(picked, std::vector<int64_t>(source->sizes.begin(), source->sizes.end()))};
}

// IndexPutImplBackward0 (values: grad.index(indices)).
std::vector<Tensor> index_put_backward(Node& n, const std::vector<Tensor>& g) {
  return {nullptr, index_with_tensor(g[0], n.unpack("indices"))};
}

std::vector<Tensor> index_select_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = index_select_backward(n, g)[0];
  if (needs_grad({&g[0]})) {
    auto node = make_node("IndexAddBackward0", index_add_backward, {nullptr, g[0]});
    node->differentiable_backward = index_add_backward;
    node->save_attr("alpha", AttrValue::integer(1));
    node->save_attr("dim", n.attr("dim"));
    node->save_input("index", n.unpack("index"));
    node->save_input("source", g[0]);
    node->save_attr("source_dim", AttrValue::integer(g[0]->dim()));
    set_history(r, node);
  }
  return {r};
}

// IndexBackward0 under create_graph (x[idx] and x[mask] alike; measured for a mask:
// IndexPutImplBackward0 with edges (None, grad), saving accumulate True and indices =
// (mask,), the very object): r is the gradient index_backward computed.
std::vector<Tensor> index_put_graph(Node& n, const std::vector<Tensor>& g, const Tensor& r) {
  if (needs_grad({&g[0]})) {
    auto node = make_node("IndexPutImplBackward0", index_put_backward, {nullptr, g[0]});
    node->differentiable_backward = index_put_backward;
    node->save_attr("accumulate", AttrValue::boolean(true));
    node->save_input("indices", n.unpack("indices"));
    node->saved.back().as_list = true;
    set_history(r, node);
  }
  return {r};
}

std::vector<Tensor> index_dbackward(Node& n, const std::vector<Tensor>& g) {
  return index_put_graph(n, g, index_backward(n, g)[0]);
}

std::vector<Tensor> mask_index_dbackward(Node& n, const std::vector<Tensor>& g) {
  return index_put_graph(n, g, mask_index_backward(n, g)[0]);
}

// ------------------------------------------------------------------ cat / stack

// CatBackward0 (derivatives.yaml: cat_tensors_backward(grad, sizes, dtypes, dim)): each
// input's gradient is grad.narrow(dim, offset, size), a view of grad.
std::vector<Tensor> cat_backward(Node& n, const std::vector<Tensor>& g) {
  return cat_pieces(
      n, [&n](size_t i) { return static_cast<bool>(n.next[i].fn); },
      [&](size_t i, int64_t d, int64_t at, int64_t len) { return in_dtype(narrow_alias(g[0], d, at, len), n.input_meta[i]); });
}

// StackBackward0 (derivatives.yaml: stack_tensors_backward(grad, dim, dtypes) =
// grad.unbind(dim)): views of grad.
std::vector<Tensor> stack_backward(Node& n, const std::vector<Tensor>& g) {
  const int64_t d = kernels::wrap_dim(n.attr("dim").i, g[0]->dim());
  std::vector<Tensor> out;
  for (size_t i = 0; i < n.input_meta.size(); ++i)
    out.push_back(n.next[i].fn ? in_dtype(select_alias(g[0], d, static_cast<int64_t>(i)), n.input_meta[i]) : nullptr);
  return out;
}

DType promoted_dtype(const std::vector<Tensor>& ts) {
  DType d = ts[0]->dtype();
  for (const Tensor& t : ts) d = kernels::promote(d, t->dtype());
  return d;
}

// ------------------------------------------------------------------ to(dtype)

// ToCopyBackward0 (derivatives.yaml: _to_copy_backward(grad, self.options())): the
// gradient cast back to the input's dtype (a new storage when the dtypes differ).
std::vector<Tensor> to_copy_backward(Node& n, const std::vector<Tensor>& g) {
  const autograd::OutputMeta& m = n.input_meta[0];
  const std::string device = m.cuda ? "cuda" : "cpu";
  // Across devices (x.cuda(), x.cpu()) the gradient goes back to the input's device.
  if (g[0] && !g[0]->is_meta() && g[0]->storage->device != device) return {copy_to(g[0], m.dtype, device)};
  return {in_dtype(g[0], m)};
}


// at::infer_dense_strides: dense strides in the order of the input's strides (a stable
// insertion sort that leaves stride-0 dims in place).
Shape infer_dense_strides(const Shape& sizes, const Shape& strides) {
  const size_t nd = sizes.size();
  std::vector<size_t> perm(nd);
  for (size_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  auto should_swap = [&](size_t d0, size_t d1) {
    if (strides[d0] == 0 || strides[d1] == 0) return 0;
    if (strides[d0] < strides[d1]) return -1;
    if (strides[d0] > strides[d1]) return 1;
    return sizes[d0] > sizes[d1] ? 1 : 0;
  };
  for (size_t i = 1; i < nd; ++i) {
    size_t d1 = i;
    for (size_t j = 1; j <= i; ++j) {
      const size_t d0 = i - j;
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Shape out(nd);
  int64_t cur = 1;
  for (size_t i = 0; i < nd; ++i) {
    out[perm[i]] = cur;
    if (sizes[perm[i]] > 1) cur *= sizes[perm[i]];
  }
  return out;
}

}  // namespace

// ================================================================== views

Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  OpScope scope("permute");
  const int64_t nd = a->dim();
  if (static_cast<int64_t>(dims.size()) != nd)
    throw shape_error("permute(sparse_coo): number of dimensions in the tensor input does not match the length of "
                      "the desired ordering of dimensions i.e. input.dim() = " + std::to_string(nd) +
                          " is not equal to len(dims) = " + std::to_string(dims.size()),
                      {{"op", "permute"}, {"ndim", nd}});
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<size_t>(kernels::wrap_dim(dims[i], nd));
    if (seen[d]) throw ScenarioError("type_error", "permute(): duplicate dims are not allowed.");
    seen[d] = true;
    sz[i] = a->sizes[d];
    st[i] = a->strides[d];
  }
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("PermuteBackward0", permute_backward, {a});
    node->differentiable_backward = permute_dbackward;
    node->save_attr("dims", AttrValue::ints(dims, true));
    set_history(v, node);
  }
  return v;
}

Tensor expand(const Tensor& a, const std::vector<int64_t>& sizes_in) {
  OpScope scope("expand");
  const auto n = static_cast<int64_t>(sizes_in.size());
  const int64_t nd = a->dim();
  if (n < nd)
    throw shape_error("expand(torch." + dtype_tensor_type(a->dtype()) + "{" + shape_str(a->sizes) + "}, size=" +
                          shape_str(sizes_in) + "): the number of sizes provided (" + std::to_string(n) +
                          ") must be greater or equal to the number of dimensions in the tensor (" +
                          std::to_string(nd) + ")",
                      {{"op", "expand"}, {"shapes", {a->sizes, sizes_in}}});
  // at::inferExpandGeometry, dim by dim from the last.
  Shape sz(static_cast<size_t>(n)), st(static_cast<size_t>(n));
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t d = nd - n + i;  // the input's dim, < 0 for a new leading dim
    const auto u = static_cast<size_t>(i);
    int64_t size = d >= 0 ? a->sizes[static_cast<size_t>(d)] : 1;
    int64_t stride = d >= 0 ? a->strides[static_cast<size_t>(d)] : (i + 1 < n ? sz[u + 1] * st[u + 1] : 1);
    int64_t target = sizes_in[u];
    if (target == -1) {
      if (d < 0)
        throw shape_error("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension " +
                              std::to_string(i),
                          {{"op", "expand"}, {"dim", i}});
      target = size;
    }
    if (target < 0)
      throw shape_error("Trying to create tensor with negative dimension " + std::to_string(target) + ": " +
                            shape_str(sizes_in),
                        {{"op", "expand"}});
    if (size != target) {
      if (size != 1)
        throw shape_error("The expanded size of the tensor (" + std::to_string(target) +
                              ") must match the existing size (" + std::to_string(size) +
                              ") at non-singleton dimension " + std::to_string(i) + ".  Target sizes: " +
                              shape_str(sizes_in) + ".  Tensor sizes: " + shape_str(a->sizes),
                          {{"op", "expand"}, {"shapes", {a->sizes, sizes_in}}, {"dim", i}});
      size = target;
      stride = 0;
    }
    sz[u] = size;
    st[u] = stride;
  }
  // A node even when nothing is broadcast (measured: r.expand(3) of a [3] tensor gives
  // ExpandBackward0 and a new object).
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("ExpandBackward0", expand_backward, {a});
    node->differentiable_backward = expand_dbackward;
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  OpScope scope("unsqueeze");
  const int64_t d = kernels::wrap_dim(dim, a->dim() + 1);
  Shape sz = a->sizes, st = a->strides;
  const int64_t s = unsqueeze_stride(sz, st, static_cast<size_t>(d));
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("UnsqueezeBackward0", unsqueeze_backward, {a});
    node->differentiable_backward = unsqueeze_dbackward;
    node->save_attr("dim", dim_attr(dim));
    set_history(v, node);
  }
  return v;
}

Tensor squeeze(const Tensor& a) {
  OpScope scope("squeeze");
  return squeeze_impl(a, std::nullopt);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  OpScope scope("squeeze");
  return squeeze_impl(a, dim);
}

void squeeze_(const Tensor& a, int64_t dim) {
  OpScope scope("squeeze_");
  if (autograd::grad_enabled() && a->is_leaf() && a->requires_grad_flag)
    throw ScenarioError("leaf_inplace", "a leaf Variable that requires grad is being used in an in-place operation.");
  if (a->is_view())
    throw ScenarioError("unsupported", "squeeze_ on a view is not supported");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  // The node is built before the edit: its edge is the tensor's current history and it
  // keeps the sizes before the squeeze (measured for u @ W with 1-D u: SqueezeBackward3,
  // dim 0, self_sizes (1, 4), over MmBackward0; the result is at version 1).
  Shared<Node> node;
  if (needs_grad({&a})) {
    node = make_node("SqueezeBackward3", squeeze_backward, {a});
    node->differentiable_backward = squeeze_dbackward;
    node->save_attr("dim", dim_attr(dim));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
  }
  if (a->dim() > 0 && a->sizes[static_cast<size_t>(d)] == 1) {
    Shape sizes = a->sizes, strides = a->strides;
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
    a->sizes = sizes;
    a->strides = strides;
  }
  bump_version(a);
  if (node) set_history(a, node);
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  OpScope scope("flatten");
  // at::flatten: reshape, so a view where one fits (ReshapeAliasBackward0), else clone +
  // _unsafe_view (measured: a.transpose(0, 2).flatten() gives UnsafeViewBackward0 over
  // CloneBackward0). A 0-d input becomes [1]; start == end returns the input itself
  // (measured: r.flatten() is r for 1-D r, a.flatten(1, 1) is a).
  const int64_t s = kernels::wrap_dim(start_dim, a->dim()), e = kernels::wrap_dim(end_dim, a->dim());
  if (s > e) throw ScenarioError("type_error", "flatten() has invalid args: start_dim cannot come after end_dim");
  if (a->dim() == 0) return reshape(a, {1});
  if (s == e) return a;
  std::vector<int64_t> shape(a->sizes.begin(), a->sizes.begin() + s);
  int64_t folded = 1;
  for (int64_t d = s; d <= e; ++d) folded *= a->sizes[static_cast<size_t>(d)];
  shape.push_back(folded);
  shape.insert(shape.end(), a->sizes.begin() + e + 1, a->sizes.end());
  return reshape(a, shape);
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  OpScope scope("split");
  require_dim(a, "split");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  if (split_size < 0)
    throw shape_error("split expects split_size be non-negative, but got split_size=" + std::to_string(split_size));
  const int64_t size = a->sizes[static_cast<size_t>(d)];
  if (split_size == 0 && size != 0)
    throw shape_error("split_size can only be 0 if dimension size is 0, but got dimension size of " +
                      std::to_string(size));
  // at::split: ceil(size / split_size) pieces (at least one); the last may be shorter.
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<int64_t> lengths(static_cast<size_t>(pieces), split_size);
  lengths.back() = split_size - (split_size * pieces - size);
  std::vector<Tensor> outs = narrow_views(a, d, lengths);
  mark_multi_output(outs, "SplitBackward0");
  if (needs_grad({&a})) {
    auto node = make_node("SplitBackward0", split_backward, {a});
    node->differentiable_backward = split_dbackward;
    node->save_attr("dim", dim_attr(dim));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    node->save_attr("split_size", AttrValue::integer(split_size));
    record_outputs(outs, node);
  }
  return outs;
}

std::vector<Tensor> split_with_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  OpScope scope("split_with_sizes");
  require_dim(a, "split_with_sizes");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  const int64_t size = a->sizes[static_cast<size_t>(d)];
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      throw shape_error("split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=" +
                        shape_str(sizes));
    total += s;
  }
  if (total != size)
    throw shape_error("split_with_sizes expects split_sizes to sum exactly to " + std::to_string(size) +
                          " (input tensor's size at dimension " + std::to_string(d) + "), but got split_sizes=" +
                          shape_str(sizes),
                      {{"op", "split_with_sizes"}, {"size", size}, {"dim", d}});
  std::vector<Tensor> outs = narrow_views(a, d, sizes);
  mark_multi_output(outs, "SplitWithSizesBackward0");
  if (needs_grad({&a})) {
    auto node = make_node("SplitWithSizesBackward0", split_backward, {a});
    node->differentiable_backward = split_dbackward;
    node->save_attr("dim", dim_attr(dim));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    node->save_attr("split_sizes", AttrValue::ints(sizes));
    record_outputs(outs, node);
  }
  return outs;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  require_dim(a, "chunk");
  if (chunks <= 0)
    throw shape_error("chunk expects `chunks` to be greater than 0, got: " + std::to_string(chunks));
  const int64_t size = a->sizes[static_cast<size_t>(kernels::wrap_dim(dim, a->dim()))];
  const int64_t split_size = (size + chunks - 1) / chunks;
  // at::chunk is split(ceil(size / chunks)) (measured: x.chunk(3, dim=1) records
  // SplitBackward0 with split_size 1), except for an empty dim, which keeps `chunks` pieces.
  if (split_size == 0 && size == 0) return split_with_sizes(a, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(a, split_size, dim);
}

std::vector<Tensor> unbind(const Tensor& a, int64_t dim) {
  OpScope scope("unbind");
  if (a->dim() == 0) {
    ScenarioError e("index_out_of_range", "Dimension specified as " + std::to_string(dim) +
                                              " but tensor has no dimensions");
    e.facts = {{"dim", dim}, {"ndim", 0}};
    throw e;
  }
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < a->sizes[static_cast<size_t>(d)]; ++i) {
    Shape sz = a->sizes, st = a->strides;
    const int64_t off = a->offset + i * st[static_cast<size_t>(d)];
    sz.erase(sz.begin() + d);
    st.erase(st.begin() + d);
    outs.push_back(make_view(a, sz, st, off));
  }
  mark_multi_output(outs, "UnbindBackward0");
  if (needs_grad({&a})) {
    auto node = make_node("UnbindBackward0", unbind_backward, {a});
    node->differentiable_backward = unbind_dbackward;
    node->save_attr("dim", dim_attr(dim));
    record_outputs(outs, node);
  }
  return outs;
}

// ================================================================== copies

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  OpScope scope("index_select");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  if (a->dim() == 0) throw ScenarioError("unsupported", "index_select on a 0-d tensor is not supported");
  if (index->dim() > 1) {
    ScenarioError e("index_out_of_range", "index_select(): Index is supposed to be a vector");
    e.facts = {{"op", "index_select"}, {"shape", index->sizes}};
    throw e;
  }
  if (index->dtype() != DType::Int64) {
    ScenarioError e("dtype_mismatch", "index_select(): Expected dtype int32 or int64 for index");
    e.facts = {{"dtype", dtype_name(index->dtype())}};
    throw e;
  }
  const int64_t size = a->sizes[static_cast<size_t>(d)];
  // The CPU kernel rejects negative indices too (measured: "INDICES element is out of DATA
  // bounds, id=-1 axis_dim=3").
  auto out_of_bounds = [&](int64_t i) {
    ScenarioError e("index_out_of_range", "INDICES element is out of DATA bounds, id=" + std::to_string(i) +
                                              " axis_dim=" + std::to_string(size));
    e.facts = {{"index", i}, {"dim", d}, {"size", size}};
    return e;
  };
  if (kernels::device::any_on_device({&a, &index})) {
    // The indices checked on the host (index_values), then cuda/indexing.cuh's index_select.
    index_values(index, size, false, out_of_bounds);
    Tensor r = kernels::device::index_select(a, d, index);
    if (needs_grad({&a})) {
      auto node = make_node("IndexSelectBackward0", index_select_backward, {a});
      node->differentiable_backward = index_select_dbackward;
      node->save_attr("dim", dim_attr(dim));
      node->save_input("index", index);
      node->save_attr("self_sizes", AttrValue::ints(a->sizes));
      set_history(r, node);
    }
    return r;
  }
  std::vector<int64_t> idx;
  if (!index->is_meta() && !a->is_meta()) idx = index_values(index, size, false, out_of_bounds);
  Shape shape = a->sizes;
  shape[static_cast<size_t>(d)] = index->numel();  // a 0-d index keeps the dim, size 1 (measured)
  Tensor r = empty_tensor(shape, a->dtype(), a->is_meta() || index->is_meta());
  if (!r->is_meta())
    for (size_t j = 0; j < idx.size(); ++j)
      copy_values(narrow_alias(r, d, static_cast<int64_t>(j), 1), narrow_alias(a, d, idx[j], 1));
  if (needs_grad({&a})) {
    auto node = make_node("IndexSelectBackward0", index_select_backward, {a});
    node->differentiable_backward = index_select_dbackward;
    node->save_attr("dim", dim_attr(dim));
    node->save_input("index", index);  // the very object (measured: _saved_index is idx)
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    set_history(r, node);
  }
  return r;
}

namespace {

// x[mask], a bool mask over self's first mask.dim() dims (measured, 1.13): the selected
// rows, [count] + self.sizes[k:]; IndexBackward0 saving indices = (mask,) (the very object:
// bool, numel bytes under pack hooks) and self_sizes. A mask with more dims than self raises
// IndexError "too many indices for tensor of dimension 2", one of another shape "The shape of
// the mask [4] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0".
// The mask is read on the host on either device.
Tensor index_with_mask(const Tensor& self, const Tensor& mask) {
  const int64_t k = mask->dim();
  // x[True] / x[False] add a dim of size 1 / 0 (measured [1, 3, 4] for x[torch.tensor(True)]):
  // not mirrored.
  if (k == 0) throw ScenarioError("unsupported", "indexing with a 0-d bool tensor is not supported");
  if (k > self->dim()) {
    ScenarioError e("index_out_of_range", "too many indices for tensor of dimension " + std::to_string(self->dim()));
    e.facts = {{"ndim", self->dim()}};
    throw e;
  }
  for (int64_t d = 0; d < k; ++d)
    if (mask->sizes[static_cast<size_t>(d)] != self->sizes[static_cast<size_t>(d)]) {
      ScenarioError e("shape_mismatch", "The shape of the mask " + shape_str(mask->sizes) + " at index " +
                                                std::to_string(d) + " does not match the shape of the indexed tensor " +
                                                shape_str(self->sizes) + " at index " + std::to_string(d));
      e.facts = {{"shape", mask->sizes}, {"self_shape", self->sizes}, {"dim", d}};
      throw e;
    }
  // The result's size depends on the mask's values (nonzero), which the meta device lacks.
  if (self->is_meta() || mask->is_meta())
    throw ScenarioError("unsupported", "indexing with a bool mask on the meta device is not supported");
  const bool on_device = kernels::device::on_device(self);
  // A cuda mask with a CPU tensor (or the reverse): PyTorch's wording not measured.
  if (on_device != kernels::device::on_device(mask))
    throw ScenarioError("unsupported", "indexing with a bool mask on another device than the tensor is not supported");
  const std::vector<int64_t> pos = mask_positions(mask);
  Shape shape{static_cast<int64_t>(pos.size())};
  shape.insert(shape.end(), self->sizes.begin() + k, self->sizes.end());
  Tensor r;
  if (on_device) {
    r = kernels::device::masked_rows(self, k, pos);
  } else {
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(k); d < self->sizes.size(); ++d) inner *= self->sizes[d];
    const std::vector<double> sv = to_values(self);
    std::vector<double> values;
    values.reserve(pos.size() * static_cast<size_t>(inner));
    for (int64_t p : pos) values.insert(values.end(), sv.begin() + p * inner, sv.begin() + (p + 1) * inner);
    r = empty_tensor(shape, self->dtype(), false);
    write_values(r, values);
  }
  if (needs_grad({&self})) {
    auto node = make_node("IndexBackward0", mask_index_backward, {self});
    node->differentiable_backward = mask_index_dbackward;
    node->save_input("indices", mask);
    node->saved.back().as_list = true;  // `_saved_indices` reads back as (mask,)
    node->save_attr("self_sizes", AttrValue::ints(self->sizes));
    set_history(r, node);
  }
  return r;
}

}  // namespace

Tensor index_with_tensor(const Tensor& self, const Tensor& idx) {
  OpScope scope("index");
  require_index_dtype(idx);
  if (self->dim() == 0) {
    ScenarioError e("index_out_of_range", "too many indices for tensor of dimension 0");
    e.facts = {{"ndim", 0}};
    throw e;
  }
  if (idx->dtype() == DType::Bool) return index_with_mask(self, idx);
  // A 0-d integer tensor indexes like a Python int (measured: x[torch.tensor(1)] gives
  // SelectBackward0 with index 1).
  if (idx->dim() == 0) return select(self, 0, static_cast<int64_t>(item(idx)));
  const int64_t size = self->sizes[0];
  std::vector<int64_t> rows;
  const bool on_device = kernels::device::any_on_device({&self, &idx});
  // On cuda too the indices are read on the host (index_values) to raise the CPU's error
  // and to wrap negative ones, as PyTorch's CUDA index kernel does on the device.
  if (!idx->is_meta() && !self->is_meta())
    rows = index_values(idx, size, true, [&](int64_t i) {
      ScenarioError e("index_out_of_range", "index " + std::to_string(i) + " is out of bounds for dimension 0 with size " +
                                                std::to_string(size));
      e.facts = {{"index", i}, {"dim", 0}, {"size", size}};
      return e;
    });
  // The result has idx's shape followed by self's remaining dims (advanced indexing).
  Shape shape = idx->sizes;
  shape.insert(shape.end(), self->sizes.begin() + 1, self->sizes.end());
  Tensor r = on_device ? kernels::device::index_rows_wrapped(self, idx, rows)
                       : empty_tensor(shape, self->dtype(), self->is_meta() || idx->is_meta());
  if (!r->is_meta() && !on_device) {
    std::vector<double> values;
    for (int64_t row : rows) {
      std::vector<double> v = to_values(select_alias(self, 0, row));
      values.insert(values.end(), v.begin(), v.end());
    }
    write_values(r, values);
  }
  if (needs_grad({&self})) {
    auto node = make_node("IndexBackward0", index_backward, {self});
    node->differentiable_backward = index_dbackward;
    // PyTorch saves `indices` as a list of tensors, here the one index tensor, the very
    // object (measured: x[idx].grad_fn._saved_indices is (idx,), [0] is idx; 24 B for [3]).
    node->save_input("indices", idx);
    node->saved.back().as_list = true;  // `_saved_indices` reads back as a tuple of tensors
    node->save_attr("self_sizes", AttrValue::ints(self->sizes));
    set_history(r, node);
  }
  return r;
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  OpScope scope("cat");
  if (ts.empty()) throw ScenarioError("type_error", "torch.cat(): expected a non-empty list of Tensors");
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i]->dim() == 0)
      throw shape_error("zero-dimensional tensor (at position " + std::to_string(i) + ") cannot be concatenated",
                        {{"op", "cat"}, {"input", i}});
  // Legacy rule kept by at::cat: 1-D empty tensors are skipped in the shape checks.
  auto skipped = [](const Tensor& t) { return t->dim() == 1 && t->numel() == 0; };
  const Tensor* ref = &ts[0];
  for (const Tensor& t : ts)
    if (!skipped(t)) {
      ref = &t;
      break;
    }
  const int64_t d = kernels::wrap_dim(dim, (*ref)->dim());
  Shape shape = (*ref)->sizes;
  int64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (skipped(t) && (*ref)->dim() != 1) continue;
    if (t->dim() != (*ref)->dim())
      throw shape_error("Tensors must have same number of dimensions: got " + std::to_string((*ref)->dim()) + " and " +
                            std::to_string(t->dim()),
                        {{"op", "cat"}, {"shapes", {(*ref)->sizes, t->sizes}}});
    for (int64_t k = 0; k < t->dim(); ++k) {
      const auto u = static_cast<size_t>(k);
      if (k != d && t->sizes[u] != (*ref)->sizes[u])
        throw shape_error("Sizes of tensors must match except in dimension " + std::to_string(d) + ". Expected size " +
                              std::to_string((*ref)->sizes[u]) + " but got size " + std::to_string(t->sizes[u]) +
                              " for tensor number " + std::to_string(i) + " in the list.",
                          {{"op", "cat"}, {"shapes", {(*ref)->sizes, t->sizes}}, {"input", i}});
    }
    total += t->sizes[static_cast<size_t>(d)];
  }
  shape[static_cast<size_t>(d)] = total;
  // The result dtype is the promotion of the inputs' (measured: float32 with float64 gives
  // float64, float32 with int64 gives float32).
  Tensor r = cat_kernel(ts, d, shape, promoted_dtype(ts), any_meta(ts));
  bool any = false;
  for (const Tensor& t : ts) any = any || needs_grad({&t});
  if (any && is_floating(r->dtype())) {
    // One edge per input, None for one that does not require grad; only dim is saved
    // (measured: dir(CatBackward0) has _saved_dim only).
    auto node = make_node("CatBackward0", cat_backward, ts);
    node->differentiable_backward = cat_dbackward;
    node->save_attr("dim", dim_attr(dim));
    set_history(r, node);
  }
  return r;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  OpScope scope("stack");
  if (ts.empty()) throw ScenarioError("type_error", "stack expects a non-empty TensorList");
  const int64_t d = kernels::wrap_dim(dim, ts[0]->dim() + 1);
  for (size_t i = 1; i < ts.size(); ++i)
    if (ts[i]->sizes != ts[0]->sizes)
      throw shape_error("stack expects each tensor to be equal size, but got " + shape_str(ts[0]->sizes) +
                            " at entry 0 and " + shape_str(ts[i]->sizes) + " at entry " + std::to_string(i),
                        {{"op", "stack"}, {"shapes", {ts[0]->sizes, ts[i]->sizes}}, {"input", i}});
  Tensor r = stack_kernel(ts, d, promoted_dtype(ts), any_meta(ts));
  bool any = false;
  for (const Tensor& t : ts) any = any || needs_grad({&t});
  if (any && is_floating(r->dtype())) {
    auto node = make_node("StackBackward0", stack_backward, ts);
    node->differentiable_backward = stack_dbackward;
    node->save_attr("dim", dim_attr(dim));
    set_history(r, node);
  }
  return r;
}

Tensor to_dtype(const Tensor& a, DType dtype, bool copy) { return to_device(a, dtype, a->storage->device, copy); }

Tensor to_device(const Tensor& a, DType dtype, const std::string& device, bool copy) {
  // Same dtype and device: the very object, no node (measured: x.to(torch.float32) is x;
  // x.float() is x; x.cpu() is x on the CPU, x.cuda() is x on cuda).
  if (a->dtype() == dtype && a->storage->device == device && !copy) return a;
  OpScope scope("to");
  // _to_copy keeps the input's layout (MemoryFormat::Preserve): its strides when it is
  // non-overlapping and dense, else dense strides in the same order; across devices too.
  Shape strides = non_overlapping_and_dense(a) ? a->strides.vec() : infer_dense_strides(a->sizes, a->strides);
  Tensor r = copy_to(a, dtype, device, &strides);
  // Only a floating result is differentiable (measured: x.to(torch.int64) and x.long()
  // have no grad_fn and do not require grad); ToCopyBackward0 exposes no _saved_ values,
  // and x.cuda() / x.cpu() record the same node (both are _to_copy in PyTorch 1.13).
  if (needs_grad({&a}) && is_floating(dtype)) {
    auto node = make_node("ToCopyBackward0", to_copy_backward, {a});
    node->differentiable_backward = to_copy_dbackward;
    set_history(r, node);
  }
  return r;
}

Shape preserve_format_strides(const Tensor& a) {
  return non_overlapping_and_dense(a) ? a->strides.vec() : infer_dense_strides(a->sizes, a->strides);
}

Tensor with_preserved_format(Tensor fresh, const Tensor& a) {
  if (a->is_contiguous() || a->numel() == 0 || fresh->sizes != a->sizes) return fresh;
  fresh->strides = preserve_format_strides(a);
  return fresh;
}

bool non_overlapping_and_dense(const Tensor& a) {
  std::vector<size_t> perm(a->sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t x, size_t y) {
    if (a->sizes[x] < 2 || a->sizes[y] < 2) return a->sizes[x] < 2 && a->sizes[y] >= 2;
    return a->strides[x] < a->strides[y];
  });
  int64_t expected = 1;
  for (size_t d : perm) {
    if (a->sizes[d] == 1) continue;
    if (a->strides[d] != expected) return false;
    expected *= a->sizes[d];
  }
  return true;
}

}  // namespace agtrace::ops
