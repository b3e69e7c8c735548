// sum and mean. sum saves only sizes; mean over all elements saves sizes and numel, but
// mean over dims saves the whole input (MeanBackward1._saved_self, measured).
#include <algorithm>

#include "ops/common.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

std::vector<int64_t> normalise_dims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = kernels::wrap_dim(d, ndim);
    if (std::find(out.begin(), out.end(), w) != out.end()) {
      ScenarioError e("type_error", "dim " + std::to_string(w) + " appears multiple times in the list of dims");
      throw e;
    }
    out.push_back(w);
  }
  return out;
}

// The reduced dims of the input, wrapped. A 0-d input has none: PyTorch accepts dim 0 / -1
// for it (wrapped against max(ndim, 1)) but reduces nothing, and sum_backward skips the
// unsqueeze for empty sizes, so the gradient is the incoming one expanded to ().
std::vector<int64_t> dims_of(const Node& n) {
  const AttrValue& a = n.attr("dim");
  std::vector<int64_t> dims;
  const int64_t nd = static_cast<int64_t>(n.input_meta[0].sizes.size());
  if (nd == 0) return dims;
  for (int64_t d : a.list) dims.push_back(d < 0 ? d + std::max<int64_t>(nd, 1) : d);
  return dims;
}

// SumBackward0 / MeanBackward0: broadcast the gradient back to the input's shape.
std::vector<Tensor> sum_all_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  Tensor e = kernels::expand_to(g[0], m.sizes, {}, false);
  if (n.name == "MeanBackward0") e = kscale(e, 1.0 / static_cast<double>(std::max<int64_t>(shape_numel(m.sizes), 1)));
  return {as_dtype(e, m.dtype)};
}

// SumBackward1 / MeanBackward1.
std::vector<Tensor> sum_dim_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  std::vector<int64_t> dims = dims_of(n);
  Tensor e = kernels::expand_to(g[0], m.sizes, dims, n.attr("keepdim").b);
  if (n.name == "MeanBackward1") {
    int64_t count = 1;
    for (int64_t d : dims) count *= m.sizes[static_cast<size_t>(d)];
    e = kscale(e, 1.0 / static_cast<double>(std::max<int64_t>(count, 1)));
  }
  return {as_dtype(e, m.dtype)};
}

// ---- create_graph=True formulas (derivatives.yaml, torch 1.13).
// sum_backward: for dims without keepdim, unsqueeze_multiple (UnsqueezeBackward0 per dim in
// ascending order), then grad.expand(self.sym_sizes()) (ExpandBackward0 when the gradient
// requires grad; measured: (x.sum(1)**2).sum() gives ExpandBackward0 over UnsqueezeBackward0).
Tensor sum_backward_graph(const Tensor& g, const Node& n, bool over_dims) {
  const auto& m = n.input_meta[0];
  if (g->dtype() != m.dtype)
    throw ScenarioError("unsupported", "create_graph=True through " + n.name + " with a dtype-promoted input is not supported yet");
  Tensor e = g;
  if (over_dims && !n.attr("keepdim").b && !m.sizes.empty()) {
    std::vector<int64_t> dims = dims_of(n);
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    for (int64_t d : dims) e = unsqueeze(e, d);
  }
  return expand(e, std::vector<int64_t>(m.sizes.begin(), m.sizes.end()));
}

// SumBackward0 / SumBackward1: sum_backward.
// MeanBackward0: grad.expand(sizes) / numel; MeanBackward1: sum_backward(...) / (number of
// elements reduced) — both div.Scalar (measured DivBackward1, _saved_other 6 and 3, ints).
std::vector<Tensor> reduce_dbackward(Node& n, const std::vector<Tensor>& g) {
  const bool over_dims = n.name == "SumBackward1" || n.name == "MeanBackward1";
  Tensor e = sum_backward_graph(g[0], n, over_dims);
  if (n.name == "MeanBackward0" || n.name == "MeanBackward1") {
    const auto& m = n.input_meta[0];
    int64_t count = 1;
    if (n.name == "MeanBackward0") {
      count = shape_numel(m.sizes);
    } else {
      for (int64_t d : dims_of(n)) count *= m.sizes[static_cast<size_t>(d)];
    }
    e = div_scalar(e, Value::integer(count));
  }
  return {e};
}

Tensor reduce(const Tensor& a, const std::optional<std::vector<int64_t>>& dims_in, bool keepdim, bool is_mean,
              std::optional<DType> dtype) {
  OpScope scope(is_mean ? "mean" : "sum");
  const DType result_dtype = dtype ? *dtype : a->dtype();
  if (is_mean && !is_floating(result_dtype)) {
    const std::string type = dtype_tensor_type(result_dtype);
    ScenarioError e("dtype_mismatch", std::string("mean(): could not infer output dtype. ") +
                                          (dtype ? "Optional" : "Input") +
                                          " dtype must be either a floating point or complex dtype. Got: " +
                                          type.substr(0, type.size() - 6));
    throw e;
  }
  // PyTorch casts the input to dtype before reducing. Widening to float64 (or no change) reads
  // every element exactly, so summing in float64 is that; a narrowing cast is not modelled.
  if (dtype && *dtype != a->dtype() && *dtype != DType::Float64)
    throw ScenarioError("unsupported", std::string(is_mean ? "mean" : "sum") + "(dtype=" + dtype_name(*dtype) +
                                           ") of a " + dtype_name(a->dtype()) + " tensor is not supported");
  std::vector<int64_t> dims = dims_in ? normalise_dims(*dims_in, a->dim()) : std::vector<int64_t>{};
  // An empty dim list reduces everything, like dims=None.
  std::vector<int64_t> kernel_dims = dims;
  if (a->dim() == 0) kernel_dims.clear();
  Tensor r = dtype ? kernels::sum(a, kernel_dims, keepdim && dims_in.has_value(), *dtype)
                   : kernels::sum(a, kernel_dims, keepdim && dims_in.has_value());
  if (is_mean) {
    int64_t count = 1;
    if (dims.empty() || a->dim() == 0)
      count = a->numel();
    else
      for (int64_t d : dims) count *= a->sizes[static_cast<size_t>(d)];
    // On cuda the same two storages (the sum, then the quotient), so the accountant sees
    // the CPU's allocations; DivScalar is x * (1 / count) in the compute type, as PyTorch's
    // CUDA div by a scalar.
    Tensor m = kernels::device::on_device(r)
                   ? kernels::device::unary(cuda::pw::UnaryOp::DivScalar, r, r->dtype(), static_cast<double>(count))
                   : kernels::unary(r, r->dtype(), [count](double v) { return v / static_cast<double>(count); });
    r = m;
  }
  if (needs_grad({&a})) {
    if (!dims_in) {
      auto node = make_node(is_mean ? "MeanBackward0" : "SumBackward0", sum_all_backward, {a});
      node->differentiable_backward = reduce_dbackward;
      if (is_mean) {
        node->save_attr("self_numel", AttrValue::integer(a->numel()));
        node->save_attr("self_sizes", AttrValue::ints(a->sizes));
      } else {
        node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
      }
      set_history(r, node);
    } else {
      auto node = make_node(is_mean ? "MeanBackward1" : "SumBackward1", sum_dim_backward, {a});
      node->differentiable_backward = reduce_dbackward;
      // Dims are stored as written (a negative dim reads back as 2**64 + dim).
      node->save_attr("dim", AttrValue::ints(*dims_in, true));
      node->save_attr("keepdim", AttrValue::boolean(keepdim));
      if (is_mean) node->save_input("self", a);
      node->save_attr("self_sym_sizes", AttrValue::ints(a->sizes));
      set_history(r, node);
    }
  }
  return r;
}

}  // namespace

Tensor sum(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, bool keepdim, std::optional<DType> dtype) {
  return reduce(a, dims, keepdim, false, dtype);
}

Tensor mean(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, bool keepdim, std::optional<DType> dtype) {
  return reduce(a, dims, keepdim, true, dtype);
}

}  // namespace agtrace::ops
