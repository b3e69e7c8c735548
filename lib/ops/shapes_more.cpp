// tril, triu, flip and roll: copies that move or mask elements, each with its node, saved
// values and backward (the same movement of the gradient). Measured with /usr/bin/python3
// and torch 1.13: TrilBackward0 / TriuBackward0 save diagonal, FlipBackward0 dims,
// RollBackward0 dims and shifts, each as written (-1 reads 2**64 - 1).
#include "ops/more.hpp"
#include "ops/more_util.hpp"

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
  return record_copy(a, make_out(a->sizes, a->dtype(), a->is_meta(), v), "RollBackward0", roll_backward,
                     {{"dims", AttrValue::ints(dims, true)}, {"shifts", AttrValue::ints(shifts, true)}});
}

}  // namespace agtrace::ops
