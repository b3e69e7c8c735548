// In-place view ops: t_, transpose_ (swapaxes_, swapdims_), unsqueeze_, squeeze_ change the
// tensor's own sizes and strides, and detach_ its autograd state. Measured in PyTorch 1.13:
//  - each records its own node class (TBackward1, TransposeBackward1 saving dim0/dim1,
//    UnsqueezeBackward1 saving dim, SqueezeBackward2 saving self_sizes, SqueezeBackward3
//    saving dim and self_sizes) over the tensor's previous history, and bumps the version once;
//  - on a view the view itself takes the node: no CopySlices over the base (its elements did
//    not move), and the base keeps its history;
//  - a leaf that requires grad raises as any in-place edit does;
//  - detach_() drops grad_fn and requires_grad without a bump, and refuses a view
//    ("Can't detach views in-place").
#include "ops/common.hpp"
#include "ops/inplace_util.hpp"
#include "ops/ops.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

AttrValue dim_attr(int64_t dim) { return AttrValue::integer(dim, true); }  // uint64 in the node

// The gradient of the tensor as it was, from the gradient of the tensor as it is: the same
// elements, laid out in the old geometry. `transposed`: the op swapped dims d0 and d1.
Tensor regather(const Tensor& g, const Shape& old_sizes, bool transposed, int64_t d0, int64_t d1) {
  if (g->is_meta()) return kernels::full(old_sizes, 0.0, g->dtype(), true);
  Tensor src = g;
  if (transposed) {
    Shape sz = g->sizes, st = g->strides;
    std::swap(sz[static_cast<size_t>(d0)], sz[static_cast<size_t>(d1)]);
    std::swap(st[static_cast<size_t>(d0)], st[static_cast<size_t>(d1)]);
    src = make_alias(g, sz, st, g->offset);
  }
  Tensor r = empty_tensor(old_sizes, g->dtype(), false);
  copy_values(r, src);
  return r;
}

std::vector<Tensor> transpose_inplace_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  const int64_t nd = static_cast<int64_t>(n.input_meta[0].sizes.size());
  const bool t = n.name == "TBackward1";
  const int64_t d0 = t ? 0 : kernels::wrap_dim(n.attr("dim0").i, nd), d1 = t ? nd - 1 : kernels::wrap_dim(n.attr("dim1").i, nd);
  return {regather(g[0], n.input_meta[0].sizes, nd > 1, d0, d1)};
}

std::vector<Tensor> reshape_inplace_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  return {regather(g[0], n.input_meta[0].sizes, false, 0, 0)};
}

void require_host_geometry(const Tensor& self, const char* op) {
  if (kernels::device::on_device(self))
    throw ScenarioError("unsupported", std::string(op) + " on cuda is not supported yet");
}

// The common course: checks, node over the old history, new geometry, one bump.
void change_geometry(const Tensor& self, const char* op, const char* node_name, autograd::BackwardFn backward,
                     const Shape& sizes, const Shape& strides, const std::vector<std::pair<const char*, AttrValue>>& attrs) {
  OpScope scope(op);
  require_host_geometry(self, op);
  check_inplace_allowed(self);
  Shared<autograd::Node> node = needs_grad({&self}) ? make_node(node_name, backward, {self}) : nullptr;
  if (node)
    for (const auto& [name, value] : attrs) node->save_attr(name, value);
  self->sizes = sizes;
  self->strides = strides;
  bump(self);
  if (node) set_history(self, node);
}

}  // namespace

void t_(const Tensor& self) {
  if (self->dim() > 2)
    throw ScenarioError("shape_mismatch",
                        "t_() expects a tensor with <= 2 dimensions, but self is " + std::to_string(self->dim()) + "D");
  Shape sz = self->sizes, st = self->strides;
  std::reverse(sz.begin(), sz.end());
  std::reverse(st.begin(), st.end());
  change_geometry(self, "t_", "TBackward1", transpose_inplace_backward, sz, st, {});
}

void transpose_(const Tensor& self, int64_t dim0, int64_t dim1) {
  const int64_t nd = std::max<int64_t>(self->dim(), 1);
  const int64_t d0 = kernels::wrap_dim(dim0, nd), d1 = kernels::wrap_dim(dim1, nd);
  Shape sz = self->sizes, st = self->strides;
  if (self->dim() > 0) {
    std::swap(sz[static_cast<size_t>(d0)], sz[static_cast<size_t>(d1)]);
    std::swap(st[static_cast<size_t>(d0)], st[static_cast<size_t>(d1)]);
  }
  change_geometry(self, "transpose_", "TransposeBackward1", transpose_inplace_backward, sz, st,
                  {{"dim0", dim_attr(dim0)}, {"dim1", dim_attr(dim1)}});
}

void restride_in_place(const Tensor& self, const Shape& strides) {
  change_geometry(self, "as_strided_", "AsStridedBackward1", reshape_inplace_backward, self->sizes, strides,
                  {{"size", AttrValue::ints(self->sizes)}, {"storage_offset", AttrValue::none()},
                   {"stride", AttrValue::ints(strides)}});
}

void unsqueeze_(const Tensor& self, int64_t dim) {
  const int64_t d = kernels::wrap_dim(dim, self->dim() + 1);
  Shape sz = self->sizes, st = self->strides;
  // at::unsqueeze's stride for the new dim: size * stride of the dim after it, 1 at the end.
  const int64_t new_stride = d >= self->dim() ? 1 : sz[static_cast<size_t>(d)] * st[static_cast<size_t>(d)];
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  change_geometry(self, "unsqueeze_", "UnsqueezeBackward1", reshape_inplace_backward, sz, st, {{"dim", dim_attr(dim)}});
}

void squeeze_(const Tensor& self, std::optional<int64_t> dim) {
  Shape sz, st;
  const int64_t nd = self->dim();
  const int64_t d = dim ? kernels::wrap_dim(*dim, std::max<int64_t>(nd, 1)) : -1;
  for (int64_t i = 0; i < nd; ++i) {
    const bool drop = self->sizes[static_cast<size_t>(i)] == 1 && (!dim || i == d);
    if (drop) continue;
    sz.push_back(self->sizes[static_cast<size_t>(i)]);
    st.push_back(self->strides[static_cast<size_t>(i)]);
  }
  const AttrValue sizes_attr = AttrValue::ints(self->sizes);
  if (dim)
    change_geometry(self, "squeeze_", "SqueezeBackward3", reshape_inplace_backward, sz, st,
                    {{"dim", dim_attr(*dim)}, {"self_sizes", sizes_attr}});
  else
    change_geometry(self, "squeeze_", "SqueezeBackward2", reshape_inplace_backward, sz, st, {{"self_sizes", sizes_attr}});
}

void detach_(const Tensor& self) {
  if (self->is_view())
    throw ScenarioError("view_inplace",
                        "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                        "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                        "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                        "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.");
  self->grad_fn.reset();
  self->requires_grad_flag = false;
  self->output_nr = 0;
}

}  // namespace agtrace::ops
