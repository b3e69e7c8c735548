// Views share the input's storage and version counter; their nodes save only sizes and
// indices (SUMMARY: "No tensors saved: ... all views"). clone and a non-viewable reshape
// copy. detach shares storage and version counter but records no node.
#include <algorithm>
#include <limits>

#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace detail {

Tensor make_view(const Tensor& a, const Shape& sizes, const Shape& strides, int64_t offset) {
  Tensor v = make_alias(a, sizes, strides, offset);
  v->base = a->base ? a->base : a;
  v->view_made_in_no_grad = autograd::view_creation_in_no_grad(a);
  v->multi_output_node = a->multi_output_node;
  return v;
}

}  // namespace detail

namespace {

// Gradient of a reshaping view: the same elements in the input's shape.
std::vector<Tensor> reshape_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  Tensor c = g[0]->is_contiguous() ? g[0] : kernels::copy(g[0]);
  return {as_dtype(make_alias(c, m.sizes, contiguous_strides(m.sizes), c->offset), m.dtype)};
}

std::vector<Tensor> transpose_backward(Node& n, const std::vector<Tensor>& g) {
  int64_t d0 = 0, d1 = 1;
  if (n.name == "TransposeBackward0") {
    const int64_t nd = g[0]->dim();
    d0 = n.attr("dim0").i < 0 ? n.attr("dim0").i + nd : n.attr("dim0").i;
    d1 = n.attr("dim1").i < 0 ? n.attr("dim1").i + nd : n.attr("dim1").i;
  }
  // PyTorch's TBackward0 / TransposeBackward0 return grad.t() / grad.transpose(): views.
  if (g[0]->dim() < 2) return {g[0]};
  Shape sz = g[0]->sizes, st = g[0]->strides;
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return {make_alias(g[0], sz, st, g[0]->offset)};
}

// SelectBackward0 / SliceBackward0: zeros of the input's shape with the gradient placed
// where the view looked (select_backward / slice_backward).
std::vector<Tensor> select_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  // The node keeps dim as written (it may be negative); wrap it against the input's rank.
  const int64_t dim = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  int64_t index = n.attr("index").i;
  if (index < 0) index += m.sizes[dim];
  Shape base_strides = contiguous_strides(m.sizes);
  Shape sz = m.sizes, st = base_strides;
  sz.erase(sz.begin() + dim);
  st.erase(st.begin() + dim);
  return {kernels::view_backward(g[0], m.sizes, sz, st, index * base_strides[dim])};
}

struct SliceBounds {
  int64_t start, length;
};

SliceBounds slice_bounds(int64_t size, std::optional<int64_t> start_in, std::optional<int64_t> end_in, int64_t step) {
  int64_t start = start_in.value_or(0), end = end_in.value_or(std::numeric_limits<int64_t>::max());
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  // PyTorch 1.13 rounds up as (len + step - 1) / step in int64, which wraps for a step near
  // 2**63 (measured: v[1::2**63-1] on 10 elements has size 0, not 1); a wrong size is
  // worse than a refusal.
  int64_t rounded = 0;
  if (__builtin_add_overflow(end - start, step - 1, &rounded))
    throw ScenarioError("unsupported", "slice step " + std::to_string(step) +
                                           ": PyTorch 1.13's slice length overflows for this step (it gives a wrong size)");
  return {start, rounded / step};
}

std::vector<Tensor> slice_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const int64_t dim = kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  const int64_t step = n.attr("step").i;
  SliceBounds b = slice_bounds(m.sizes[dim], n.attr("start").i, n.attr("end").i, step);
  Shape base_strides = contiguous_strides(m.sizes);
  Shape sz = m.sizes, st = base_strides;
  sz[dim] = b.length;
  st[dim] *= step;
  return {kernels::view_backward(g[0], m.sizes, sz, st, b.start * base_strides[dim])};
}

// ---- create_graph=True formulas (derivatives.yaml, torch 1.13).
// ViewBackward0 / ReshapeAliasBackward0 / UnsafeViewBackward0: grad.reshape(self.sym_sizes())
// (measured: x.view(6) gives ReshapeAliasBackward0 in the gradient graph).
std::vector<Tensor> reshape_dbackward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  return {reshape(g[0], std::vector<int64_t>(m.sizes.begin(), m.sizes.end()))};
}

// TBackward0: grad.t(); TransposeBackward0: grad.transpose(dim0, dim1).
std::vector<Tensor> transpose_dbackward(Node& n, const std::vector<Tensor>& g) {
  if (n.name == "TransposeBackward0") return {transpose(g[0], n.attr("dim0").i, n.attr("dim1").i)};
  return {t(g[0])};
}

// SelectBackward0: select_backward(grad, self.sym_sizes(), dim, index)
// (SelectBackwardBackward0, measured).
std::vector<Tensor> select_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {select_backward_op(g[0], n.input_meta[0].sizes, n.attr("dim").i, n.attr("index").i)};
}

// SliceBackward0: slice_backward(grad, self.sym_sizes(), dim, start, end, step)
// (SliceBackwardBackward0, measured).
std::vector<Tensor> slice_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {slice_backward_op(g[0], n.input_meta[0].sizes, n.attr("dim").i, n.attr("start").i, n.attr("end").i,
                            n.attr("step").i)};
}

// CloneBackward0: grad (a dtype change is the engine's validate_outputs cast).
std::vector<Tensor> identity_dbackward(Node&, const std::vector<Tensor>& g) { return {g[0]}; }

std::vector<Tensor> identity_backward(Node& n, const std::vector<Tensor>& g) {
  return {as_dtype(g[0], n.input_meta[0].dtype)};
}

// Resolves one -1 in a requested shape (at::infer_size).
Shape infer_size(const std::vector<int64_t>& shape, int64_t numel) {
  Shape out(shape.begin(), shape.end());
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) throw ScenarioError("shape_mismatch", "only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      throw ScenarioError("shape_mismatch", "invalid shape dimension " + std::to_string(out[i]));
    } else {
      known *= out[i];
    }
  }
  auto invalid = [&] {
    ScenarioError e("shape_mismatch", "shape '" + shape_str(Shape(shape.begin(), shape.end())) +
                                          "' is invalid for input of size " + std::to_string(numel));
    e.facts = {{"shape", shape}, {"numel", numel}};
    return e;
  };
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) throw invalid();
    out[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    throw invalid();
  }
  return out;
}

// Strides that let `new_sizes` view a tensor of `sizes`/`strides` without copying, if any
// (the rule of at::detail::computeStride: dims are grouped into runs that are contiguous
// with each other; each run must be split or merged exactly).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  if (sizes.empty() || shape_numel(sizes) == 0) return contiguous_strides(new_sizes);
  Shape out(new_sizes.size(), 1);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    const bool run_ends = d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!run_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor reshaping_view(const Tensor& a, const Shape& shape, const Shape& strides, const char* node_name) {
  Tensor v = make_view(a, shape, strides, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node(node_name, reshape_backward, {a});
    node->differentiable_backward = reshape_dbackward;
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

// UnfoldBackward0 (derivatives.yaml: unfold_backward(grad, self_sizes, dimension, size,
// step)): every window's gradient is added back where the window looked, so overlapping
// windows (step < size) sum (measured: x.unfold(1, 3, 1).sum() gives x.grad rows 1 2 3 2 1).
// Window i of the gradient (the unfolded dim selected at i, its elements along the last dim)
// is placed into zeros of the input's shape and the windows are added, on any device.
std::vector<Tensor> unfold_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  const Tensor& grad = g[0];  // input's sizes with sizes[dim] = windows, then the window size
  if (m.sizes.empty()) {      // a 0-d input unfolds to one window of one element
    Tensor c = grad->is_contiguous() ? grad : kernels::copy(grad);
    return {make_alias(c, m.sizes, m.sizes, c->offset)};
  }
  const int64_t nd = static_cast<int64_t>(m.sizes.size());
  const auto dim = static_cast<size_t>(kernels::wrap_dim(n.attr("dimension").i, nd));
  const int64_t step = n.attr("step").i;
  const Shape in_strides = contiguous_strides(m.sizes);
  Shape window_sizes = grad->sizes, window_grad_strides = grad->strides, window_strides = in_strides;
  window_sizes.erase(window_sizes.begin() + static_cast<std::ptrdiff_t>(dim));
  window_grad_strides.erase(window_grad_strides.begin() + static_cast<std::ptrdiff_t>(dim));
  window_strides.erase(window_strides.begin() + static_cast<std::ptrdiff_t>(dim));
  window_strides.push_back(in_strides[dim]);
  Tensor sum;
  for (int64_t i = 0; i < grad->sizes[dim]; ++i) {
    Tensor window = make_alias(grad, window_sizes, window_grad_strides, grad->offset + i * grad->strides[dim]);
    Tensor placed = kernels::view_backward(window, m.sizes, window_sizes, window_strides, i * step * in_strides[dim]);
    sum = sum ? kadd(sum, placed) : placed;
  }
  return {sum};  // (sizes[dim] - size) / step + 1 >= 1 windows: size <= sizes[dim], step > 0
}

}  // namespace

Tensor view(const Tensor& a, const std::vector<int64_t>& shape_in) {
  OpScope scope("view");
  Shape shape = infer_size(shape_in, a->numel());
  auto strides = view_strides(a->sizes, a->strides, shape);
  if (!strides)
    throw ScenarioError("shape_mismatch",
                        "view size is not compatible with input tensor's size and stride (at least one dimension "
                        "spans across two contiguous subspaces). Use .reshape(...) instead.");
  return reshaping_view(a, shape, *strides, "ViewBackward0");
}

namespace {
// clone(memory_format=Preserve) keeps a's layout; contiguous() clones with
// MemoryFormat::Contiguous. Both record CloneBackward0.
Tensor clone_in_format(const Tensor& a, bool preserve) {
  OpScope scope("clone");
  Tensor r;
  if (preserve && !a->is_contiguous() && a->numel() > 0) {
    const Shape strides = preserve_format_strides(a);
    r = copy_to(a, a->dtype(), a->storage->device, &strides);
  } else {
    r = kernels::copy(a);
  }
  if (needs_grad({&a})) {
    auto node = make_node("CloneBackward0", identity_backward, {a});
    node->differentiable_backward = identity_dbackward;
    set_history(r, node);
  }
  return r;
}
}  // namespace

Tensor reshape(const Tensor& a, const std::vector<int64_t>& shape_in) {
  OpScope scope("reshape");
  Shape shape = infer_size(shape_in, a->numel());
  // reshape is _reshape_alias when a view is possible, else clone + _unsafe_view.
  if (auto strides = view_strides(a->sizes, a->strides, shape))
    return reshaping_view(a, shape, *strides, "ReshapeAliasBackward0");
  Tensor c = clone_in_format(a, false);  // self.clone(at::MemoryFormat::Contiguous)
  Tensor v = make_alias(c, shape, contiguous_strides(shape), 0);  // _unsafe_view: not a view
  if (needs_grad({&c})) {
    auto node = make_node("UnsafeViewBackward0", reshape_backward, {c});
    node->differentiable_backward = reshape_dbackward;
    node->save_attr("self_sym_sizes", AttrValue::ints(c->sizes));
    set_history(v, node);
  }
  return v;
}

Tensor t(const Tensor& a) {
  OpScope scope("t");
  if (a->dim() > 2)
    throw ScenarioError("shape_mismatch",
                        "t() expects a tensor with <= 2 dimensions, but self is " + std::to_string(a->dim()) + "D");
  Shape sz = a->sizes, st = a->strides;
  std::reverse(sz.begin(), sz.end());
  std::reverse(st.begin(), st.end());
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("TBackward0", transpose_backward, {a});
    node->differentiable_backward = transpose_dbackward;
    set_history(v, node);
  }
  return v;
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  OpScope scope("transpose");
  const int64_t d0 = kernels::wrap_dim(dim0, a->dim()), d1 = kernels::wrap_dim(dim1, a->dim());
  Shape sz = a->sizes, st = a->strides;
  if (a->dim() > 0) {
    std::swap(sz[d0], sz[d1]);
    std::swap(st[d0], st[d1]);
  }
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("TransposeBackward0", transpose_backward, {a});
    node->differentiable_backward = transpose_dbackward;
    node->save_attr("dim0", AttrValue::integer(dim0, true));
    node->save_attr("dim1", AttrValue::integer(dim1, true));
    set_history(v, node);
  }
  return v;
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  OpScope scope("select");
  if (a->dim() == 0) throw ScenarioError("index_out_of_range", "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  const int64_t size = a->sizes[d];
  if (index < -size || index >= size) {
    ScenarioError e("index_out_of_range", "index " + std::to_string(index) + " is out of bounds for dimension " +
                                              std::to_string(d) + " with size " + std::to_string(size));
    e.facts = {{"index", index}, {"dim", d}, {"size", size}};
    throw e;
  }
  const int64_t i = index < 0 ? index + size : index;
  Shape sz = a->sizes, st = a->strides;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Tensor v = make_view(a, sz, st, a->offset + i * a->strides[d]);
  if (needs_grad({&a})) {
    auto node = make_node("SelectBackward0", select_backward, {a});
    node->differentiable_backward = select_dbackward;
    // PyTorch saves dim as passed, not wrapped: x.select(-1, -1).grad_fn._saved_dim reads
    // 18446744073709551615 (torch 1.13, measured), like _saved_index.
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_attr("index", AttrValue::integer(index, true));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    set_history(v, node);
  }
  return v;
}

Tensor slice(const Tensor& a, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  OpScope scope("slice");
  if (a->dim() == 0) throw ScenarioError("index_out_of_range", "slice() cannot be applied to a 0-dim tensor.");
  if (step <= 0) throw ScenarioError("type_error", "slice step must be positive");
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  SliceBounds b = slice_bounds(a->sizes[d], start, end, step);
  Shape sz = a->sizes, st = a->strides;
  sz[d] = b.length;
  st[d] *= step;
  Tensor v = make_view(a, sz, st, a->offset + b.start * a->strides[d]);
  if (needs_grad({&a})) {
    auto node = make_node("SliceBackward0", slice_backward, {a});
    node->differentiable_backward = slice_dbackward;
    // dim, start and end are saved as passed and read back as uint64 (torch 1.13, measured):
    // x.narrow(-1, 0, 2) has _saved_dim 18446744073709551615, x[:, -2:] has _saved_start
    // 18446744073709551614, x[:, :-1] has _saved_end 18446744073709551615.
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_attr("end", AttrValue::integer(end.value_or(std::numeric_limits<int64_t>::max()), true));
    node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
    node->save_attr("start", AttrValue::integer(start.value_or(0), true));
    node->save_attr("step", AttrValue::integer(step));
    set_history(v, node);
  }
  return v;
}


Tensor clone(const Tensor& a) { return clone_in_format(a, true); }
Tensor clone_contiguous(const Tensor& a) { return clone_in_format(a, false); }

Tensor contiguous(const Tensor& a) {
  // Already contiguous: the very same object, no node (measured: contiguous_noop).
  if (a->is_contiguous()) return a;
  return clone_in_format(a, false);
}

Tensor detach(const Tensor& a) {
  // detach() shares storage and the version counter, records no node, and is no view.
  return make_alias(a, a->sizes, a->strides, a->offset);
}

}  // namespace agtrace::ops

namespace agtrace::ops {

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  // at::narrow (1.13): checks, then slice(dim, start, start + length); the slice node keeps
  // dim as passed and the wrapped start (measured: x.narrow(0, -2, 2) saves start 2, end 4).
  if (a->dim() == 0) throw ScenarioError("index_out_of_range", "narrow() cannot be applied to a 0-dim tensor.");
  const int64_t size = a->sizes[static_cast<size_t>(kernels::wrap_dim(dim, a->dim()))];
  // A start equal to the size is valid (an empty slice at the end), but no valid index.
  if (start != size) start = kernels::wrap_dim(start, size);
  if (length < 0 || start > size - length) {
    ScenarioError e("shape_mismatch", "start (" + std::to_string(start) + ") + length (" + std::to_string(length) +
                                          ") exceeds dimension size (" + std::to_string(size) + ").");
    e.facts = {{"start", start}, {"length", length}, {"size", size}};
    throw e;
  }
  return slice(a, dim, start, start + length, 1);
}

Tensor unfold(const Tensor& a, int64_t dimension, int64_t size, int64_t step) {
  OpScope scope("unfold");
  // at::unfold (1.13): a 0-d tensor unfolds as if it had one dim of size 1.
  const int64_t nd = a->dim();
  const int64_t d = kernels::wrap_dim(dimension, nd);
  const int64_t max_size = nd == 0 ? 1 : a->sizes[static_cast<size_t>(d)];
  if (size > max_size)
    throw ScenarioError("shape_mismatch", "maximum size for tensor at dimension " + std::to_string(d) + " is " +
                                              std::to_string(max_size) + " but size is " + std::to_string(size));
  if (step <= 0) throw ScenarioError("type_error", "step is " + std::to_string(step) + " but must be > 0");
  // PyTorch fails later, computing the storage size of a negative window.
  if (size < 0) throw ScenarioError("unsupported", "unfold() with a negative size");
  Shape sz = a->sizes, st = a->strides;
  sz.push_back(size);
  st.push_back(nd == 0 ? 1 : a->strides[static_cast<size_t>(d)]);
  if (nd > 0) {
    sz[static_cast<size_t>(d)] = (a->sizes[static_cast<size_t>(d)] - size) / step + 1;
    st[static_cast<size_t>(d)] = step * a->strides[static_cast<size_t>(d)];
  }
  Tensor v = make_view(a, sz, st, a->offset);
  if (needs_grad({&a})) {
    auto node = make_node("UnfoldBackward0", unfold_backward, {a});
    node->save_attr("dimension", AttrValue::integer(dimension, true));
    node->save_attr("self_sizes", AttrValue::ints(a->sizes));
    node->save_attr("size", AttrValue::integer(size));
    node->save_attr("step", AttrValue::integer(step));
    set_history(v, node);
  }
  return v;
}

namespace {
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}
}  // namespace

Tensor movedim(const Tensor& a, const std::vector<int64_t>& source, const std::vector<int64_t>& destination) {
  const int64_t nd = a->dim();
  if (source.size() != destination.size())
    throw ScenarioError("shape_mismatch", "movedim: Invalid source or destination dims: source (" +
                                              dims_text(source) + " dims) should contain the same number of dims as "
                                              "destination (" + dims_text(destination) + " dims)");
  // A 0-d tensor gives self.alias() (AliasBackward0, measured), which agtrace does not record.
  if (nd == 0) throw ScenarioError("unsupported", "movedim() of a 0-d tensor (AliasBackward0)");
  std::vector<int64_t> src, dst;
  for (int64_t s : source) src.push_back(kernels::wrap_dim(s, nd));
  for (int64_t s : destination) dst.push_back(kernels::wrap_dim(s, nd));
  auto check_repeats = [](const std::vector<int64_t>& wrapped, const std::vector<int64_t>& as_passed,
                          const char* which) {
    std::vector<int64_t> sorted = wrapped;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw ScenarioError("type_error",
                          std::string("movedim: repeated dim in `") + which + "` (" + dims_text(as_passed) + ")");
  };
  check_repeats(src, source, "source");
  check_repeats(dst, destination, "destination");
  // at::movedim: the moved dims land at their destinations; the others keep their order
  // in the places left (measured: x.movedim(0, 2) of a 3-D tensor permutes (1, 2, 0)).
  std::vector<int64_t> order(static_cast<size_t>(nd), -1);
  std::vector<bool> src_used(static_cast<size_t>(nd), false);
  for (size_t i = 0; i < src.size(); ++i) {
    order[static_cast<size_t>(dst[i])] = src[i];
    src_used[static_cast<size_t>(src[i])] = true;
  }
  int64_t next_src = 0;
  for (int64_t& o : order) {
    if (o >= 0) continue;
    while (src_used[static_cast<size_t>(next_src)]) ++next_src;
    o = next_src++;
  }
  return permute(a, order);
}

Tensor matrix_transpose(const Tensor& a) {
  if (a->dim() < 2)
    throw ScenarioError("shape_mismatch", "tensor.mT is only supported on matrices or batches of matrices. Got " +
                                              std::to_string(a->dim()) + "-D tensor.");
  // transpose(-2, -1): the node keeps the negative dims (measured _saved_dim0 2**64-2).
  return transpose(a, -2, -1);
}

Tensor reversed_dims(const Tensor& a) {
  // at::numpy_T: permute(n-1, ..., 0) on every rank (measured: PermuteBackward0 for 2-D too,
  // not TBackward0). Ranks other than 0 and 2 warn (UserWarning, not part of the report).
  std::vector<int64_t> dims;
  for (int64_t d = a->dim() - 1; d >= 0; --d) dims.push_back(d);
  return permute(a, dims);
}

Tensor data_alias(const Tensor& a) {
  // Tensor.data (1.13 VariableHooks::variable_data): a shallow copy with no autograd
  // metadata and a NEW version counter, so an edit through it is not seen by autograd
  // (measured: x.data.add_(1) bumps the alias to version 1, x stays at 0). Not a view.
  Tensor d = make_alias(a, a->sizes, a->strides, a->offset);
  d->version = make_shared_object<VersionCounter>();
  return d;
}

void set_data(const Tensor& self, const Tensor& new_data) {
  // _has_compatible_shallow_copy_type: the same backend (measured: a meta tensor into a cpu
  // one is refused; another dtype or size is not).
  if (new_data->is_meta() != self->is_meta() || new_data->storage->device != self->storage->device)
    throw ScenarioError("dtype_mismatch",
                        "Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have incompatible "
                        "tensor type.");
  if (self->requires_grad() && !is_floating(new_data->dtype()))
    throw ScenarioError("dtype_mismatch", "data set to a tensor that requires gradients must be floating point or complex dtype");
  // A saved input is the object itself, so PyTorch's backward then reads the new data
  // (measured: y = x.sin(); x.data = torch.zeros(3) gives x.grad = cos(0)); the accountant
  // keeps the storage each value was saved on, so agtrace does not follow that case.
  for (const autograd::Node* n : autograd::live_nodes())
    for (const autograd::SavedEntry& e : n->saved)
      if (e.is_tensor && !e.var.released && e.var.original.get() == self.get())
        throw ScenarioError("unsupported", "assigning .data of a tensor that " + autograd::saved_name(*n, e).str() +
                                               " saved is not supported: the saved value would read the new data");
  // The leaf's AccumulateGrad is dropped when the type changes, so the next backward makes
  // one for the new dtype.
  if (new_data->dtype() != self->dtype() || new_data->storage->device != self->storage->device)
    self->grad_accumulator.reset();
  self->storage = new_data->storage;
  self->sizes = new_data->sizes;
  self->strides = new_data->strides;
  self->offset = new_data->offset;
  // The accountant's holder index reads the tensor's storage again at the next commit, and
  // its AccumulateGrad's hold on the leaf's data.
  notify_grad_changed(*self);
  if (ObjectObserver* o = object_observer())
    for (autograd::Node* n : autograd::live_nodes())
      if (n->variable.get() == self.get()) o->node_changed(*n);
}

}  // namespace agtrace::ops
