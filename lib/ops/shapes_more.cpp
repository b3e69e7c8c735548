// tril, triu, flip and roll: copies that move or mask elements, each with its node, saved
// values and backward (the same movement of the gradient). Measured with /usr/bin/python3
// and torch 1.13: TrilBackward0 / TriuBackward0 save diagonal, FlipBackward0 dims,
// RollBackward0 dims and shifts, each as written (-1 reads 2**64 - 1).
#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

// out[i] = x[source(i)] over a contiguous tensor of `sizes`, where source maps an output
// element's coordinates to its input element's flat index (-1: zero).
template <typename Source>
std::vector<double> gather_by(const Shape& sizes, const std::vector<double>& x, Source&& source) {
  std::vector<double> out(x.size());
  std::vector<int64_t> coord(sizes.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t from = source(coord);
    out[i] = from < 0 ? 0.0 : x[static_cast<size_t>(from)];
    for (size_t d = sizes.size(); d-- > 0;) {  // next coordinate, row-major
      if (++coord[d] < sizes[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

int64_t flat_index(const Shape& sizes, const std::vector<int64_t>& coord) {
  int64_t at = 0;
  for (size_t d = 0; d < sizes.size(); ++d) at = at * sizes[d] + coord[d];
  return at;
}

// ---- tril / triu: element (..., i, j) kept when j - i <= diagonal (tril) or >= (triu).
std::vector<double> triangle(const Shape& sizes, const std::vector<double>& x, int64_t diagonal, bool lower) {
  const size_t r = sizes.size() - 2, c = sizes.size() - 1;
  return gather_by(sizes, x, [&](const std::vector<int64_t>& k) {
    const int64_t off = k[c] - k[r];
    return (lower ? off <= diagonal : off >= diagonal) ? flat_index(sizes, k) : -1;
  });
}

// derivatives.yaml: tril: grad.tril(diagonal); triu: grad.triu(diagonal).
std::vector<Tensor> triangle_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  return {make_out(m.sizes, m.dtype, false,
                   triangle(m.sizes, to_values(g[0]), n.attr("diagonal").i, n.name == "TrilBackward0"))};
}

// ---- flip: each listed dim reversed.
std::vector<double> flipped(const Shape& sizes, const std::vector<double>& x, const std::vector<int64_t>& dims) {
  return gather_by(sizes, x, [&](std::vector<int64_t> k) {
    for (int64_t d : dims) k[static_cast<size_t>(d)] = sizes[static_cast<size_t>(d)] - 1 - k[static_cast<size_t>(d)];
    return flat_index(sizes, k);
  });
}

std::vector<int64_t> wrapped_list(const Node& n, const char* attr) {
  std::vector<int64_t> out;
  for (int64_t d : n.attr(attr).list) out.push_back(kernels::wrap_dim(d, static_cast<int64_t>(n.input_meta[0].sizes.size())));
  return out;
}

// derivatives.yaml: flip: grad.flip(dims).
std::vector<Tensor> flip_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  return {make_out(m.sizes, m.dtype, false, flipped(m.sizes, to_values(g[0]), wrapped_list(n, "dims")))};
}

// ---- roll: out[k] = x[k - shift] along each dim (mod size); no dims: the flattened tensor.
std::vector<double> rolled(const Shape& sizes, const std::vector<double>& x, const std::vector<int64_t>& shifts,
                           const std::vector<int64_t>& dims, int64_t sign) {
  if (dims.empty()) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<double> out(x.size());
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[static_cast<size_t>((((i - sign * shifts[0]) % n) + n) % n)];
    return out;
  }
  return gather_by(sizes, x, [&](std::vector<int64_t> k) {
    for (size_t j = 0; j < dims.size(); ++j) {
      const auto d = static_cast<size_t>(dims[j]);
      k[d] = (((k[d] - sign * shifts[j]) % sizes[d]) + sizes[d]) % sizes[d];
    }
    return flat_index(sizes, k);
  });
}

// derivatives.yaml: roll: grad.roll(fmap(reverse_list(shifts), [](int64_t i) { return -i; }), reverse_list(dims)):
// the opposite shifts.
std::vector<Tensor> roll_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  return {make_out(m.sizes, m.dtype, false,
                   rolled(m.sizes, to_values(g[0]), n.attr("shifts").list, wrapped_list(n, "dims"), -1))};
}

// create_graph=True: RollBackward0's formula is grad.roll(-shifts reversed, dims reversed),
// recording RollBackward0 (measured: roll((1, -2), (2, 3)) gives _saved_shifts (2, -1),
// _saved_dims (3, 2)); ConstantPadNdBackward0's is constant_pad_nd(grad, -pad), recording
// ConstantPadNdBackward0 with the negated pad.
std::vector<Tensor> roll_dbackward(Node& n, const std::vector<Tensor>& g) {
  const std::vector<int64_t>& shifts = n.attr("shifts").list;
  const std::vector<int64_t>& dims = n.attr("dims").list;
  std::vector<int64_t> back_shifts(shifts.rbegin(), shifts.rend()), back_dims(dims.rbegin(), dims.rend());
  for (int64_t& s : back_shifts) s = -s;
  return {roll(g[0], back_shifts, back_dims)};
}
std::vector<Tensor> constant_pad_dbackward(Node& n, const std::vector<Tensor>& g) {
  std::vector<int64_t> pad = n.attr("pad").list;
  for (int64_t& p : pad) p = -p;
  return {constant_pad(g[0], pad, 0.0)};
}

Tensor record_copy(const Tensor& a, const Tensor& r, const char* name, autograd::BackwardFn fn,
                   std::initializer_list<std::pair<const char*, AttrValue>> attrs) {
  if (needs_grad({&a})) {
    auto node = make_node(name, fn, {a});
    set_history(r, node);
    for (const auto& [attr, v] : attrs) node->save_attr(attr, v);
  }
  return r;
}

}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal, bool lower) {
  OpScope scope(lower ? "tril" : "triu");
  require_host(a);
  // Measured: tril of a 1-d tensor raises IndexError "Dimension out of range (expected to be
  // in range of [-1, 0], but got -2)".
  kernels::wrap_dim(-2, a->dim());
  std::vector<double> v;
  if (!a->is_meta()) v = triangle(a->sizes, to_values(a), diagonal, lower);
  return record_copy(a, make_out(a->sizes, a->dtype(), a->is_meta(), v), lower ? "TrilBackward0" : "TriuBackward0",
                     triangle_backward, {{"diagonal", AttrValue::integer(diagonal, true)}});
}

Tensor flip(const Tensor& a, const std::vector<int64_t>& dims) {
  OpScope scope("flip");
  require_host(a);
  const std::vector<int64_t> wd = wrap_dims(dims, a->dim());  // a repeated dim raises, as measured
  std::vector<double> v;
  if (!a->is_meta()) v = flipped(a->sizes, to_values(a), a->dim() == 0 ? std::vector<int64_t>{} : wd);
  return record_copy(a, make_out(a->sizes, a->dtype(), a->is_meta(), v), "FlipBackward0", flip_backward,
                     {{"dims", AttrValue::ints(dims, true)}});
}

Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  OpScope scope("roll");
  require_host(a);
  if (dims.empty() ? shifts.size() != 1 : shifts.size() != dims.size())
    throw ScenarioError("type_error", "shifts and dimensions must align. shifts: " + std::to_string(shifts.size()) +
                                          ", dims:" + std::to_string(dims.size()));
  std::vector<int64_t> wd;
  for (int64_t d : dims) wd.push_back(kernels::wrap_dim(d, a->dim()));
  std::vector<double> v;
  if (!a->is_meta() && a->numel() > 0) v = rolled(a->sizes, to_values(a), shifts, wd, 1);
  Tensor r = record_copy(a, make_out(a->sizes, a->dtype(), a->is_meta(), v), "RollBackward0", roll_backward,
                         {{"dims", AttrValue::ints(dims, true)}, {"shifts", AttrValue::ints(shifts, true)}});
  if (r->grad_fn) r->grad_fn->differentiable_backward = roll_dbackward;
  return r;
}

// ================================================================ repeat gather masked_select pad outer

namespace {

// Coordinates of flat index i in a contiguous tensor of `sizes`.
std::vector<int64_t> coords_of(const Shape& sizes, int64_t i) {
  std::vector<int64_t> k(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    k[d] = sizes[d] > 0 ? i % sizes[d] : 0;
    i = sizes[d] > 0 ? i / sizes[d] : 0;
  }
  return k;
}

// The input sizes of a repeat: leading dims of size 1 when repeats are more than the dims.
Shape padded_sizes(const Shape& sizes, size_t ndim) {
  Shape out(ndim - sizes.size(), 1);
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

// derivatives.yaml repeat: repeat_backward(grad, repeats, self.sym_sizes()): each input
// element gets the sum of its copies.
std::vector<Tensor> repeat_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const Shape in = padded_sizes(m.sizes, g[0]->sizes.size());
  const std::vector<double> gv = to_values(g[0]);
  std::vector<double> out(static_cast<size_t>(shape_numel(m.sizes)), 0.0);
  for (size_t i = 0; i < gv.size(); ++i) {
    std::vector<int64_t> k = coords_of(g[0]->sizes, static_cast<int64_t>(i));
    for (size_t d = 0; d < k.size(); ++d) k[d] %= in[d];
    out[static_cast<size_t>(flat_index(in, k))] += gv[i];
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

// derivatives.yaml gather: gather_backward(grad, self, dim, index, sparse_grad) =
// zeros(self.sizes()).scatter_add_(dim, index, grad).
std::vector<Tensor> gather_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  n.unpack("self");  // unpacked (and version-checked) by PyTorch's apply too
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const auto d = static_cast<size_t>(kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size())));
  const std::vector<double> gv = to_values(g[0]), iv = to_values(index);
  std::vector<double> out(static_cast<size_t>(shape_numel(m.sizes)), 0.0);
  for (size_t j = 0; j < gv.size(); ++j) {
    std::vector<int64_t> k = coords_of(index->sizes, static_cast<int64_t>(j));
    if (!k.empty()) k[d] = static_cast<int64_t>(iv[j]);
    out[static_cast<size_t>(flat_index(m.sizes, k))] += gv[j];
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

// derivatives.yaml masked_select: masked_select_backward(grad, self, mask): zeros of self's
// shape with grad scattered, in order, where mask is set.
std::vector<Tensor> masked_select_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor mask = n.unpack("mask");
  n.unpack("self");
  const auto& m = n.input_meta[0];
  const std::vector<double> gv = to_values(g[0]), mv = kernels::detail::broadcast_values(mask, m.sizes);
  std::vector<double> out(mv.size(), 0.0);
  size_t next = 0;
  for (size_t i = 0; i < mv.size(); ++i)
    if (mv[i] != 0) out[i] = gv[next++];
  return {make_out(m.sizes, m.dtype, false, out)};
}

// constant_pad_nd's geometry: pad lists (before, after) pairs from the last dim backwards;
// an output coordinate is the input's plus `before` (negative pads crop).
Shape padded_shape(const Shape& sizes, const std::vector<int64_t>& pad) {
  Shape out = sizes;
  for (size_t j = 0; j < pad.size() / 2; ++j) {
    const size_t d = sizes.size() - 1 - j;
    out[d] += pad[2 * j] + pad[2 * j + 1];
  }
  return out;
}
// The flat output index of each input element, -1 where it is cropped away.
std::vector<int64_t> pad_targets(const Shape& in, const Shape& out, const std::vector<int64_t>& pad) {
  std::vector<int64_t> at(static_cast<size_t>(shape_numel(in)));
  for (size_t i = 0; i < at.size(); ++i) {
    std::vector<int64_t> k = coords_of(in, static_cast<int64_t>(i));
    bool inside = true;
    for (size_t j = 0; j < pad.size() / 2; ++j) {
      const size_t d = in.size() - 1 - j;
      k[d] += pad[2 * j];
      inside = inside && k[d] >= 0 && k[d] < out[d];
    }
    at[i] = inside ? flat_index(out, k) : -1;
  }
  return at;
}

// constant_pad_nd_backward(grad, pad): the gradient of the input's elements that remain.
std::vector<Tensor> constant_pad_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const std::vector<int64_t> at = pad_targets(m.sizes, g[0]->sizes, n.attr("pad").list);
  const std::vector<double> gv = to_values(g[0]);
  std::vector<double> out(at.size());
  for (size_t i = 0; i < at.size(); ++i) out[i] = at[i] < 0 ? 0.0 : gv[static_cast<size_t>(at[i])];
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

Tensor repeat(const Tensor& a, const std::vector<int64_t>& repeats) {
  OpScope scope("repeat");
  require_host(a);
  if (repeats.size() < a->sizes.size())
    throw ScenarioError("type_error",
                        "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  const Shape in = padded_sizes(a->sizes, repeats.size());
  Shape shape(in.size());
  for (size_t d = 0; d < in.size(); ++d) shape[d] = in[d] * repeats[d];
  std::vector<double> v;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    v.resize(static_cast<size_t>(shape_numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) {
      std::vector<int64_t> k = coords_of(shape, static_cast<int64_t>(i));
      for (size_t d = 0; d < k.size(); ++d) k[d] %= in[d];
      v[i] = x[static_cast<size_t>(flat_index(in, k))];
    }
  }
  return record_copy(a, make_out(shape, a->dtype(), a->is_meta(), v), "RepeatBackward0", repeat_backward,
                     {{"repeats", AttrValue::ints(repeats)}, {"self_sym_sizes", AttrValue::ints(a->sizes)}});
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  OpScope scope("gather");
  require_host(a);
  if (index->dtype() != DType::Int64)
    throw ScenarioError("type_error", "gather(): Expected dtype int64 for index");
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  if (index->dim() != a->dim())
    throw ScenarioError("shape_mismatch", "Index tensor must have the same number of dimensions as input tensor");
  for (size_t d = 0; d < index->sizes.size(); ++d)
    if (static_cast<int64_t>(d) != wd && index->sizes[d] > a->sizes[d])
      throw ScenarioError("shape_mismatch", "Size does not match at dimension " + std::to_string(d) +
                                                " expected index " + shape_str(index->sizes) +
                                                " to be smaller than self " + shape_str(a->sizes) +
                                                " apart from dimension " + std::to_string(wd));
  if (a->is_meta() || index->is_meta()) unsupported("gather on the meta device");
  const std::vector<double> x = to_values(a), iv = to_values(index);
  std::vector<double> out(iv.size());
  const int64_t size_d = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(wd)];
  for (size_t j = 0; j < iv.size(); ++j) {
    const auto at = static_cast<int64_t>(iv[j]);
    if (at < -size_d || at >= size_d)
      throw ScenarioError("index_out_of_range", "index " + std::to_string(at) + " is out of bounds for dimension " +
                                                    std::to_string(wd) + " with size " + std::to_string(size_d));
    std::vector<int64_t> k = coords_of(index->sizes, static_cast<int64_t>(j));
    if (!k.empty()) k[static_cast<size_t>(wd)] = at;
    out[j] = x[static_cast<size_t>(flat_index(a->sizes, k))];
  }
  Tensor r = make_out(index->sizes, a->dtype(), false, out);
  if (needs_grad({&a})) {
    auto node = make_node("GatherBackward0", gather_backward, {a});
    set_history(r, node);
    node->save_attr("dim", AttrValue::integer(dim, true));
    node->save_input("index", index);
    node->save_input("self", a);
    node->save_attr("sparse_grad", AttrValue::boolean(false));
  }
  return r;
}

Tensor masked_select(const Tensor& a, const Tensor& mask) {
  OpScope scope("masked_select");
  require_host(a);
  require_host(mask);
  if (mask->dtype() != DType::Bool)
    throw ScenarioError("type_error", "masked_select: expected BoolTensor for mask");
  if (kernels::broadcast_shapes(a->sizes, mask->sizes, "masked_select") != a->sizes)
    unsupported("masked_select with a mask of more elements than self (self broadcast)");
  if (a->is_meta() || mask->is_meta()) unsupported("masked_select on the meta device (its size depends on the values)");
  const std::vector<double> x = to_values(a), mv = kernels::detail::broadcast_values(mask, a->sizes);
  std::vector<double> out;
  for (size_t i = 0; i < x.size(); ++i)
    if (mv[i] != 0) out.push_back(x[i]);
  Tensor r = make_out({static_cast<int64_t>(out.size())}, a->dtype(), false, out);
  if (needs_grad({&a})) {
    auto node = make_node("MaskedSelectBackward0", masked_select_backward, {a});
    set_history(r, node);
    node->save_input("mask", mask);
    node->save_input("self", a);
  }
  return r;
}

Tensor constant_pad(const Tensor& a, const std::vector<int64_t>& pad, double value) {
  OpScope scope("constant_pad_nd");
  require_host(a);
  if (pad.size() % 2 != 0) throw ScenarioError("type_error", "Padding length must be divisible by 2");
  if (pad.size() / 2 > a->sizes.size())
    throw ScenarioError("type_error", "Padding length too large");
  const Shape shape = padded_shape(a->sizes, pad);
  for (int64_t s : shape)
    if (s < 0) throw ScenarioError("shape_mismatch", "The input size after padding is negative");
  std::vector<double> v;
  if (!a->is_meta()) {
    const std::vector<int64_t> at = pad_targets(a->sizes, shape, pad);
    const std::vector<double> x = to_values(a);
    v.assign(static_cast<size_t>(shape_numel(shape)), value);
    for (size_t i = 0; i < at.size(); ++i)
      if (at[i] >= 0) v[static_cast<size_t>(at[i])] = x[i];
  }
  Tensor r = record_copy(a, make_out(shape, a->dtype(), a->is_meta(), v), "ConstantPadNdBackward0",
                         constant_pad_backward, {{"pad", AttrValue::ints(pad, true)}});
  if (r->grad_fn) r->grad_fn->differentiable_backward = constant_pad_dbackward;
  return r;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  // at::outer: self.reshape({self.size(0), 1}) * vec2 (measured: MulBackward0 over
  // ReshapeAliasBackward0 and the second vector's AccumulateGrad).
  if (a->dim() != 1 || b->dim() != 1)
    throw ScenarioError("shape_mismatch", "outer: Expected 1-D argument self, but got " + std::to_string(a->dim()) + "-D");
  return mul(reshape(a, {a->sizes[0], 1}), b);
}

}  // namespace agtrace::ops
