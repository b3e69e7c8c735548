// Advanced indexing (aten::index, aten::index_put_) over the index lists PyTorch 1.13's
// applySlicing records, and x[...]'s alias. The layout rule is NumPy's, as aten::index
// applies it: the index tensors broadcast to one shape B; when the indexed dims are
// adjacent, B replaces them in place, otherwise B comes first, followed by the dims no
// tensor indexes (measured: x (3, 4): x[:, idx] is (3, 2), x[idx, None] is (2, 1, 4);
// y (2, 3, 4): y[idx1, :, idx2] is (2, 3), y[0, :, idx] is (3, 2)).
#include <algorithm>
#include <optional>

#include "ops/common.hpp"
#include "ops/indexing.hpp"
#include "ops/inplace_util.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

[[noreturn]] void index_error(const std::string& kind, const std::string& message, nlohmann::json facts = {}) {
  ScenarioError e(kind, message);
  if (!facts.is_null()) e.facts = std::move(facts);
  throw e;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_str(shapes[i]);
  return s;
}

// Where the elements of an advanced-indexing result come from: each one's row-major
// position in self (none on meta), and the result's sizes.
struct IndexPlan {
  Shape result_sizes;
  std::vector<int64_t> source;
};

// One indexed dim of self: the index values (wrapped, checked) and the index's shape.
struct DimIndex {
  Shape sizes;
  std::vector<int64_t> values;
};

IndexPlan plan_index(const Shape& self_sizes, const std::vector<Tensor>& indices, bool meta) {
  const auto nd = static_cast<int64_t>(self_sizes.size());
  auto too_many = [&] {
    index_error("index_out_of_range", "too many indices for tensor of dimension " + std::to_string(nd), {{"ndim", nd}});
  };
  std::vector<std::optional<DimIndex>> per_dim;
  bool values_known = !meta;
  for (const Tensor& t : indices) {
    const auto d = static_cast<int64_t>(per_dim.size());
    if (!t) {
      if (d >= nd) too_many();
      per_dim.emplace_back();
      continue;
    }
    if (t->dtype() != DType::Int64 && t->dtype() != DType::Bool)
      index_error("index_out_of_range", "tensors used as indices must be long, byte or bool tensors",
                  {{"dtype", dtype_name(t->dtype())}});
    if (t->dtype() == DType::Bool) {
      // A k-dim mask indexes k dims with the coordinates of its true positions (nonzero).
      const int64_t k = t->dim();
      if (d + k > nd) too_many();
      for (int64_t j = 0; j < k; ++j)
        if (t->sizes[static_cast<size_t>(j)] != self_sizes[static_cast<size_t>(d + j)])
          index_error("shape_mismatch", "The shape of the mask " + shape_str(t->sizes) + " at index " +
                                            std::to_string(j) + " does not match the shape of the indexed tensor " +
                                            shape_str(self_sizes) + " at index " + std::to_string(d + j),
                      {{"shape", t->sizes}, {"self_shape", self_sizes}, {"dim", d + j}});
      if (t->is_meta())  // the result's size is the count of true values, which meta lacks
        throw ScenarioError("unsupported", "indexing with a bool mask on the meta device is not supported");
      const std::vector<double> mv = host_values(t);
      const Shape strides = contiguous_strides(t->sizes);
      std::vector<DimIndex> coords(static_cast<size_t>(k));
      for (size_t p = 0; p < mv.size(); ++p) {
        if (mv[p] == 0) continue;
        auto rest = static_cast<int64_t>(p);
        for (size_t j = 0; j < coords.size(); ++j) {
          coords[j].values.push_back(rest / strides[j]);
          rest %= strides[j];
        }
      }
      for (auto& c : coords) {
        c.sizes = {static_cast<int64_t>(c.values.size())};
        per_dim.emplace_back(std::move(c));
      }
      continue;
    }
    if (d >= nd) too_many();
    DimIndex di{t->sizes, {}};
    if (t->is_meta()) {
      values_known = false;
    } else {
      const int64_t size = self_sizes[static_cast<size_t>(d)];
      for (double v : host_values(t)) {
        const auto i = static_cast<int64_t>(v);
        if (i >= size || i < -size)
          index_error("index_out_of_range",
                      "index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(d) +
                          " with size " + std::to_string(size),
                      {{"index", i}, {"dim", d}, {"size", size}});
        di.values.push_back(i < 0 ? i + size : i);
      }
    }
    per_dim.emplace_back(std::move(di));
  }

  // The index tensors' common shape (broadcasting, right-aligned).
  std::vector<Shape> shapes;
  std::vector<int64_t> indexed;
  for (size_t d = 0; d < per_dim.size(); ++d)
    if (per_dim[d]) {
      shapes.push_back(per_dim[d]->sizes);
      indexed.push_back(static_cast<int64_t>(d));
    }
  Shape common;
  for (const Shape& s : shapes) {
    if (s.size() > common.size()) common.insert(common.begin(), s.size() - common.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& c = common[common.size() - s.size() + i];
      if (s[i] == c || s[i] == 1) continue;
      if (c != 1)
        index_error("shape_mismatch",
                    "shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes_str(shapes),
                    {{"shapes", shapes}});
      c = s[i];
    }
  }
  const bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  // Result axes: the dims no tensor indexes, with B's axes at `at`.
  std::vector<int64_t> plain;
  for (int64_t d = 0; d < nd; ++d)
    if (d >= static_cast<int64_t>(per_dim.size()) || !per_dim[static_cast<size_t>(d)]) plain.push_back(d);
  const size_t at = adjacent ? static_cast<size_t>(std::count_if(plain.begin(), plain.end(),
                                                                 [&](int64_t d) { return d < indexed.front(); }))
                             : 0;
  IndexPlan plan;
  for (size_t i = 0; i < at; ++i) plan.result_sizes.push_back(self_sizes[static_cast<size_t>(plain[i])]);
  plan.result_sizes.insert(plan.result_sizes.end(), common.begin(), common.end());
  for (size_t i = at; i < plain.size(); ++i) plan.result_sizes.push_back(self_sizes[static_cast<size_t>(plain[i])]);
  if (!values_known) return plan;

  // Offset in self of each position of B: the sum over indexed dims of value * stride.
  const Shape self_strides = contiguous_strides(self_sizes);
  const int64_t b_numel = shape_numel(common);
  std::vector<int64_t> b_offset(static_cast<size_t>(b_numel), 0);
  for (int64_t d : indexed) {
    const DimIndex& di = *per_dim[static_cast<size_t>(d)];
    const Shape own_strides = contiguous_strides(di.sizes);
    const size_t lead = common.size() - di.sizes.size();
    for (int64_t b = 0; b < b_numel; ++b) {
      int64_t rest = b, pos = 0, block = b_numel;
      for (size_t a = 0; a < common.size(); ++a) {
        block /= common[a];
        const int64_t c = rest / block;
        rest %= block;
        if (a >= lead && di.sizes[a - lead] != 1) pos += c * own_strides[a - lead];
      }
      b_offset[static_cast<size_t>(b)] += di.values[static_cast<size_t>(pos)] * self_strides[static_cast<size_t>(d)];
    }
  }
  const int64_t n = shape_numel(plan.result_sizes);
  plan.source.resize(static_cast<size_t>(n));
  const size_t rank = plan.result_sizes.size(), b_rank = common.size();
  std::vector<int64_t> coord(rank, 0);
  for (int64_t r = 0; r < n; ++r) {
    int64_t off = 0, b = 0;
    for (size_t a = 0; a < rank; ++a) {
      if (a >= at && a < at + b_rank) {
        b = b * common[a - at] + coord[a];
      } else {
        const size_t p = a < at ? a : a - b_rank;
        off += coord[a] * self_strides[static_cast<size_t>(plain[p])];
      }
    }
    plan.source[static_cast<size_t>(r)] = off + b_offset[static_cast<size_t>(b)];
    for (size_t a = rank; a-- > 0;) {
      if (++coord[a] < plan.result_sizes[a]) break;
      coord[a] = 0;
    }
  }
  return plan;
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// PyTorch saves the index list as one SavedVariable per entry, None for an undefined one
// (measured: x[:, idx].grad_fn._saved_indices is (None, idx), idx the very object).
void save_index_list(autograd::Node& node, const std::vector<Tensor>& indices) {
  for (const Tensor& t : indices) {
    node.save_input("indices", t, t != nullptr);
    node.saved.back().as_list = true;
  }
}

std::vector<Tensor> unpack_index_list(autograd::Node& n) {
  std::vector<Tensor> out;
  for (auto& e : n.saved)
    if (e.name == "indices") out.push_back(n.unpack_entry(e));
  return out;
}

Tensor gradient_in(const Tensor& g, const autograd::OutputMeta& m) { return as_dtype(g, m.dtype); }

void require_host(const std::vector<const Tensor*>& ts, const char* op) {
  for (const Tensor* t : ts)
    if (*t && kernels::device::on_device(*t))
      throw ScenarioError("unsupported", std::string(op) + " on cuda is not supported yet (this advanced-indexing route runs on the CPU)");
}

// IndexBackward0: index_backward(zeros(self_sizes), indices, grad), that is zeros with the
// gradient added at every position the forward read (index_put_ with accumulate=True).
std::vector<Tensor> index_advanced_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  const Shape& sizes = n.attr("self_sizes").list;
  const std::vector<Tensor> indices = unpack_index_list(n);
  Tensor r = kernels::full(sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  if (r->is_meta()) return {gradient_in(r, n.input_meta[0])};
  require_host({&g[0]}, "index backward");
  const IndexPlan plan = plan_index(sizes, indices, false);
  const std::vector<double> gv = to_values(g[0]);
  std::vector<double> acc(static_cast<size_t>(r->numel()), 0.0);
  for (size_t i = 0; i < plan.source.size(); ++i) acc[static_cast<size_t>(plan.source[i])] += gv[i];
  write_values(r, acc);
  return {gradient_in(r, n.input_meta[0])};
}

// IndexPutBackward0 (derivatives.yaml, index_put): self gets the gradient, with the
// written positions zeroed unless accumulate; values get grad.index(indices), reduced to
// their own shape (they were broadcast to the indexing result).
std::vector<Tensor> index_put_backward(autograd::Node& n, const std::vector<Tensor>& g) {
  const bool accumulate = n.attr("accumulate").b;
  const std::vector<Tensor> indices = unpack_index_list(n);
  const Tensor& grad = g[0];
  std::vector<Tensor> out(2);
  if (grad->is_meta()) {
    if (n.should_compute_output(0)) out[0] = kernels::full(grad->sizes, 0.0, grad->dtype(), true);
    if (n.should_compute_output(1))
      out[1] = kernels::full(n.input_meta[1].sizes, 0.0, n.input_meta[1].dtype, true);
    return out;
  }
  require_host({&grad}, "index_put_ backward");
  const IndexPlan plan = plan_index(grad->sizes, indices, false);
  const std::vector<double> gv = to_values(grad);
  if (n.should_compute_output(0)) {
    if (accumulate) {
      out[0] = grad;
    } else {
      std::vector<double> self_grad = gv;
      for (int64_t p : plan.source) self_grad[static_cast<size_t>(p)] = 0.0;
      out[0] = empty_tensor(grad->sizes, grad->dtype(), false);
      write_values(out[0], self_grad);
    }
  }
  if (n.should_compute_output(1)) {
    std::vector<double> picked(plan.source.size());
    for (size_t i = 0; i < picked.size(); ++i) picked[i] = gv[static_cast<size_t>(plan.source[i])];
    Tensor at_result = empty_tensor(plan.result_sizes, grad->dtype(), false);
    write_values(at_result, picked);
    out[1] = gradient_in(kernels::sum_to(at_result, n.input_meta[1].sizes), n.input_meta[1]);
  }
  return out;
}

// AliasBackward0: the gradient passes through unchanged.
std::vector<Tensor> alias_backward(autograd::Node&, const std::vector<Tensor>& g) { return {g[0]}; }

}  // namespace

// v's row-major values broadcast to `to` (right-aligned; v's sizes are 1 or equal).
std::vector<double> broadcast_values(const Tensor& v, const Shape& to) {
  const std::vector<double> src = to_values(v);
  const Shape own = contiguous_strides(v->sizes);
  const size_t lead = to.size() - v->sizes.size();
  const int64_t n = shape_numel(to);
  std::vector<double> out(static_cast<size_t>(n));
  std::vector<int64_t> coord(to.size(), 0);
  for (int64_t r = 0; r < n; ++r) {
    int64_t pos = 0;
    for (size_t a = lead; a < to.size(); ++a)
      if (v->sizes[a - lead] != 1) pos += coord[a] * own[a - lead];
    out[static_cast<size_t>(r)] = src[static_cast<size_t>(pos)];
    for (size_t a = to.size(); a-- > 0;) {
      if (++coord[a] < to[a]) break;
      coord[a] = 0;
    }
  }
  return out;
}

Tensor index_advanced(const Tensor& self, const std::vector<Tensor>& indices) {
  OpScope scope("index");
  require_host({&self}, "indexing");
  for (const Tensor& t : indices) require_host({&t}, "indexing");
  bool meta = self->is_meta();
  for (const Tensor& t : indices) meta = meta || (t && t->is_meta());
  const IndexPlan plan = plan_index(self->sizes, indices, meta);
  Tensor r = empty_tensor(plan.result_sizes, self->dtype(), meta);
  if (!r->is_meta()) {
    const std::vector<double> sv = to_values(self);
    std::vector<double> out(plan.source.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = sv[static_cast<size_t>(plan.source[i])];
    write_values(r, out);
  }
  if (needs_grad({&self})) {
    auto node = make_node("IndexBackward0", index_advanced_backward, {self});
    save_index_list(*node, indices);
    node->save_attr("self_sizes", AttrValue::ints(self->sizes));
    set_history(r, node);
  }
  return r;
}

void index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  OpScope scope("index_put_");
  require_host({&self, &values}, "index_put_");
  for (const Tensor& t : indices) require_host({&t}, "index_put_");
  check_inplace_allowed(self, {&values});
  check_no_internal_overlap(self);
  if (values->dtype() != self->dtype()) {
    index_error("dtype_mismatch",
                "Index put requires the source and destination dtypes match, got " + dtype_scalar_name(self->dtype()) +
                    " for the destination and " + dtype_scalar_name(values->dtype()) + " for the source.",
                {{"self_dtype", dtype_name(self->dtype())}, {"values_dtype", dtype_name(values->dtype())}});
  }
  bool meta = self->is_meta() || values->is_meta();
  for (const Tensor& t : indices) meta = meta || (t && t->is_meta());
  const IndexPlan plan = plan_index(self->sizes, indices, meta);
  if (!broadcastable_to(values->sizes, plan.result_sizes))
    index_error("shape_mismatch",
                "shape mismatch: value tensor of shape " + shape_str(values->sizes) +
                    " cannot be broadcast to indexing result of shape " + shape_str(plan.result_sizes),
                {{"shape", values->sizes}, {"result_shape", plan.result_sizes}});
  Shared<autograd::Node> node;
  if (needs_grad({&self, &values}) && is_floating(self->dtype())) {
    node = make_node("IndexPutBackward0", index_put_backward, {self, values});
    node->save_attr("accumulate", AttrValue::boolean(accumulate));
    save_index_list(*node, indices);
  }
  if (!meta && !plan.source.empty()) {
    std::vector<double> sv = to_values(self);
    const std::vector<double> vv = broadcast_values(values, plan.result_sizes);
    for (size_t i = 0; i < plan.source.size(); ++i) {
      double& dst = sv[static_cast<size_t>(plan.source[i])];
      dst = accumulate ? dst + vv[i] : vv[i];
    }
    write_values(self, sv);
  }
  bump(self);
  if (node) record_history(self, node);
}

Tensor alias(const Tensor& self) {
  OpScope scope("alias");
  Tensor v = make_view(self, self->sizes, self->strides, self->offset);
  if (needs_grad({&self})) {
    auto node = make_node("AliasBackward0", alias_backward, {self});
    node->differentiable_backward = alias_backward;
    set_history(v, node);
  }
  return v;
}

}  // namespace agtrace::ops
