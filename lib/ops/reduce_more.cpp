// min, argmax / argmin, cumsum, prod and logsumexp: forward, node, saved values and
// backward side by side. Nodes, saved attributes, dtypes, ties and errors measured with
// /usr/bin/python3 and torch 1.13; formulas from tools/autograd/derivatives.yaml and
// FunctionsManual.cpp of 1.13.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/device_backend.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

// ================================================================ min argmax argmin

// Whether `e` replaces the running extreme `best`: NaN wins and then stays (measured:
// max, min, argmax and argmin of [1, nan, 3, nan] all pick index 1); otherwise strictly
// greater (less), so the first of equal values wins (measured: [2, 2, 0, 0] gives argmax
// 0, argmin 2).
bool replaces(double e, double best, bool is_max) {
  if (std::isnan(best)) return false;
  return std::isnan(e) || (is_max ? e > best : e < best);
}

// The extreme of each group of a reduction plan and its position: along `dim` when given,
// else in the flattened tensor. Host data only.
void scan_extremes(const Tensor& a, const ReducePlan& p, std::optional<int64_t> dim, bool is_max,
                   std::vector<double>& vals, std::vector<double>& idx) {
  const std::vector<double> x = to_values(a);
  vals.assign(static_cast<size_t>(p.groups), 0.0);
  idx.assign(static_cast<size_t>(p.groups), 0.0);
  std::vector<bool> seen(static_cast<size_t>(p.groups), false);
  int64_t inner = 1, size_d = 1;
  if (dim && a->dim() > 0) {
    for (size_t k = static_cast<size_t>(*dim) + 1; k < a->sizes.size(); ++k) inner *= a->sizes[k];
    size_d = a->sizes[static_cast<size_t>(*dim)];
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    if (seen[k] && !replaces(x[i], vals[k], is_max)) continue;
    seen[k] = true;
    vals[k] = x[i];
    const int64_t pos = static_cast<int64_t>(i);
    idx[k] = static_cast<double>(dim ? (pos / inner) % size_d : pos);
  }
}

}  // namespace

Tensor min_all(const Tensor& a) {
  OpScope scope("min");
  if (a->numel() == 0)
    throw ScenarioError("shape_mismatch",
                        "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                        "reduction dim with the 'dim' argument.");
  const bool on_device = kernels::device::on_device(a);
  std::vector<double> vals, idx;
  if (!a->is_meta() && !on_device) scan_extremes(a, plan_reduce(a->sizes, {}, false), std::nullopt, false, vals, idx);
  Tensor r = on_device ? kernels::device::reduce(cuda::ReduceOp::Amin, a, {}, false)
                       : make_out({}, a->dtype(), a->is_meta(), vals);
  if (needs_grad({&a})) record_extreme_all("MinBackward1", r, a);
  return r;
}

std::pair<Tensor, Tensor> min_dim(const Tensor& a, int64_t dim, bool keepdim) {
  OpScope scope("min");
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  if (a->dim() > 0 && a->sizes[static_cast<size_t>(wd)] == 0)
    throw ScenarioError("index_out_of_range",
                        "min(): Expected reduction dim " + std::to_string(wd) + " to have non-zero size.");
  Tensor values, indices;
  if (kernels::device::on_device(a)) {
    std::tie(values, indices) = kernels::device::max_dim(a, wd, keepdim, /*is_min=*/true);
  } else {
    const ReducePlan p = plan_reduce(a->sizes, {wd}, keepdim);
    std::vector<double> vals, idx;
    if (!a->is_meta()) scan_extremes(a, p, wd, false, vals, idx);
    values = make_out(p.out_shape, a->dtype(), a->is_meta(), vals);
    indices = make_out(p.out_shape, DType::Int64, a->is_meta(), idx);
  }
  // Measured: `y.grad_fn._saved_indices is r.indices` is True, as for max.
  if (needs_grad({&a})) record_extreme_dim("MinBackward0", values, indices, a, dim, keepdim);
  return {values, indices};
}

Tensor arg_extreme(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  OpScope scope(op);
  std::optional<int64_t> wd;
  if (dim) wd = kernels::wrap_dim(*dim, a->dim());
  if (a->numel() == 0 && (!wd || a->dim() == 0 || a->sizes[static_cast<size_t>(*wd)] == 0))
    throw ScenarioError("index_out_of_range", std::string(op) + "(): Expected reduction dim" +
                                                  (wd ? " " + std::to_string(*wd) : std::string()) +
                                                  " to have non-zero size.");
  if (kernels::device::on_device(a)) {
    if (wd) return kernels::device::max_dim(a, *wd, keepdim, !is_max).second;
    // No dim: the index into the flattened tensor, as max(dim) of its 1-d view gives it.
    autograd::GradModeGuard no_grad(false);
    Tensor index = kernels::device::max_dim(reshape(a, {-1}), 0, false, !is_max).second;
    return keepdim ? reshape(index, std::vector<int64_t>(static_cast<size_t>(a->dim()), 1)) : index;
  }
  // No dim: the flattened tensor's index; keepdim keeps every dim as size 1 (measured:
  // x.argmax(dim=None, keepdim=True) of a (2, 3) tensor is [[5]]).
  const ReducePlan p = plan_reduce(a->sizes, wd ? std::vector<int64_t>{*wd} : std::vector<int64_t>{}, keepdim);
  std::vector<double> vals, idx;
  if (!a->is_meta()) scan_extremes(a, p, wd, is_max, vals, idx);
  return make_out(p.out_shape, DType::Int64, a->is_meta(), idx);
}

// ================================================================ cumsum

namespace {

// Walks each line along `dim` of a contiguous tensor of `sizes`: f(offsets of the line in
// order). A 0-d tensor is one line of one element.
template <typename F>
void for_each_line(const Shape& sizes, int64_t dim, F&& f) {
  if (sizes.empty()) {
    f(std::vector<size_t>{0});
    return;
  }
  const auto d = static_cast<size_t>(dim);
  int64_t inner = 1, outer = 1;
  for (size_t k = d + 1; k < sizes.size(); ++k) inner *= sizes[k];
  for (size_t k = 0; k < d; ++k) outer *= sizes[k];
  std::vector<size_t> line(static_cast<size_t>(sizes[d]));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      for (int64_t j = 0; j < sizes[d]; ++j) line[static_cast<size_t>(j)] = static_cast<size_t>((o * sizes[d] + j) * inner + in);
      f(line);
    }
}

// cumsum_backward(grad, dim): the reversed cumulative sum, grad.flip(dim).cumsum(dim).flip(dim).
std::vector<Tensor> cumsum_backward(Node& n, const std::vector<Tensor>& g) {
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const int64_t d = m.sizes.empty() ? 0 : kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size()));
  const std::vector<double> gv = to_values(g[0]);
  std::vector<double> out(gv.size());
  for_each_line(m.sizes, d, [&](const std::vector<size_t>& line) {
    double acc = 0;
    for (size_t j = line.size(); j-- > 0;) out[line[j]] = acc += gv[line[j]];
  });
  return {make_out(m.sizes, m.dtype, false, out)};
}

DType integral_to_long(DType d) { return is_floating(d) ? d : DType::Int64; }

}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim) {
  OpScope scope("cumsum");
  require_host(a);
  refuse_half_on_cpu(a, "cumsum_out_cpu");
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  const DType out = integral_to_long(a->dtype());
  std::vector<double> values;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    values.resize(x.size());
    // The CPU kernel accumulates in double for float32 (acc_type), rounding each output.
    for_each_line(a->sizes, wd, [&](const std::vector<size_t>& line) {
      double acc = 0;
      for (size_t j : line) values[j] = acc += x[j];
    });
  }
  Tensor r = make_out(a->sizes, out, a->is_meta(), values);
  if (needs_grad({&a})) {
    auto node = make_node("CumsumBackward0", cumsum_backward, {a});
    set_history(r, node);
    node->save_attr("dim", AttrValue::integer(dim, true));  // as written: -1 reads 2**64 - 1 (measured)
  }
  return r;
}

// ================================================================ prod

namespace {

// prod_safe_zeros_backward(grad, input, dim) on one line: grad * (product of the elements
// before) * (product of the elements after), exact where input has zeros.
void products_of_others(const std::vector<double>& x, const std::vector<size_t>& line, std::vector<double>& out) {
  double before = 1;
  for (size_t j : line) {
    out[j] = before;
    before *= x[j];
  }
  double after = 1;
  for (size_t j = line.size(); j-- > 0;) {
    out[line[j]] *= after;
    after *= x[line[j]];
  }
}

// ProdBackward0 (prod_backward(grad, self, result)) and ProdBackward1 (prod_backward(grad,
// self, result, dim, keepdim)): a 0-d input gets grad; without zeros in the input,
// grad * (result / self); with zeros, the products of the other elements (all: zero when
// two or more elements are zero; by dim: along every line once the input has any zero).
std::vector<Tensor> prod_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const std::vector<double> x = to_values(self), r = to_values(result), gv = to_values(g[0]);
  if (m.sizes.empty()) return {make_out(m.sizes, m.dtype, false, gv)};
  const bool by_dim = n.find("dim") != nullptr;  // ProdBackward1
  const int64_t d = by_dim ? kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size())) : 0;
  const ReducePlan p = plan_reduce(m.sizes, by_dim ? std::vector<int64_t>{d} : std::vector<int64_t>{}, true);
  int64_t zeros = 0;
  for (double v : x) zeros += v == 0 ? 1 : 0;
  std::vector<double> out(x.size(), 0.0);
  if (zeros == 0) {
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = static_cast<size_t>(p.group[i]);
      out[i] = gv[k] * round_to_dtype(r[k] / x[i], m.dtype);
    }
  } else if (by_dim || zeros == 1) {
    std::vector<size_t> all(x.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    if (by_dim)
      for_each_line(m.sizes, d, [&](const std::vector<size_t>& line) { products_of_others(x, line, out); });
    else
      products_of_others(x, all, out);
    for (size_t i = 0; i < x.size(); ++i) out[i] *= gv[static_cast<size_t>(p.group[i])];
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  OpScope scope("prod");
  require_host(a);
  refuse_half_on_cpu(a, "prod_cpu");
  std::optional<int64_t> wd;
  if (dim) wd = kernels::wrap_dim(*dim, a->dim());
  const ReducePlan p = plan_reduce(a->sizes, wd && a->dim() > 0 ? std::vector<int64_t>{*wd} : std::vector<int64_t>{},
                                   keepdim && dim);
  std::vector<double> values;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    values.assign(static_cast<size_t>(p.groups), 1.0);
    for (size_t i = 0; i < x.size(); ++i) values[static_cast<size_t>(p.group[i])] *= x[i];
  }
  Tensor r = make_out(p.out_shape, integral_to_long(a->dtype()), a->is_meta(), values);
  if (needs_grad({&a})) {
    auto node = make_node(dim ? "ProdBackward1" : "ProdBackward0", prod_backward, {a});
    set_history(r, node);
    if (dim) {
      node->save_attr("dim", AttrValue::integer(*dim, true));
      node->save_attr("keepdim", AttrValue::boolean(keepdim));
    }
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

// ================================================================ logsumexp

namespace {

// logsumexp_backward(grad, self, result, dim, keepdim): grad * (self - result).exp(), grad
// and result unsqueezed at the reduced dims.
std::vector<Tensor> logsumexp_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  std::vector<int64_t> dims;
  for (int64_t d : n.attr("dim").list) dims.push_back(kernels::wrap_dim(d, static_cast<int64_t>(m.sizes.size())));
  const ReducePlan p = plan_reduce(m.sizes, m.sizes.empty() ? std::vector<int64_t>{} : dims, true);
  const std::vector<double> x = to_values(self), r = to_values(result), gv = to_values(g[0]);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    out[i] = gv[k] * round_to_dtype(std::exp(round_to_dtype(x[i] - r[k], m.dtype)), m.dtype);
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  OpScope scope("logsumexp");
  require_host(a);
  refuse_half_on_cpu(a, "exp_vml_cpu");
  std::vector<int64_t> wd = wrap_dims(dims, a->dim());
  if (a->dim() == 0) wd.clear();
  if (dims.empty() && a->dim() > 0) {
    // Measured: x.logsumexp(()) of a (2, 3) tensor raises "output with shape [] doesn't
    // match the broadcast shape [1, 1]" (the all-dims sum meets a keepdim amax).
    std::string ones;
    for (int64_t d = 0; d < a->dim(); ++d) ones += d ? ", 1" : "1";
    throw ScenarioError("shape_mismatch", "output with shape [] doesn't match the broadcast shape [" + ones + "]");
  }
  const ReducePlan p = plan_reduce(a->sizes, wd, keepdim);
  std::vector<double> values;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    // maxes = amax(self, dim, true), infinite maxes replaced by 0; log(sum(exp(self - maxes))) + maxes.
    std::vector<double> maxes(static_cast<size_t>(p.groups), -std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < x.size(); ++i) {
      double& best = maxes[static_cast<size_t>(p.group[i])];
      if (std::isnan(x[i]) || x[i] > best) best = std::isnan(best) ? best : x[i];
    }
    for (double& v : maxes)
      if (std::isinf(v)) v = 0;
    std::vector<double> sums(maxes.size(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) sums[static_cast<size_t>(p.group[i])] += std::exp(x[i] - maxes[static_cast<size_t>(p.group[i])]);
    values.resize(sums.size());
    for (size_t k = 0; k < sums.size(); ++k) values[k] = std::log(sums[k]) + maxes[k];
  }
  const DType out = is_floating(a->dtype()) ? a->dtype() : DType::Float32;
  Tensor r = make_out(p.out_shape, out, a->is_meta(), values);
  if (needs_grad({&a})) {
    auto node = make_node("LogsumexpBackward0", logsumexp_backward, {a});
    set_history(r, node);
    node->save_attr("dim", AttrValue::ints(dims, true));
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

// ================================================================ std

namespace {

std::vector<int64_t> std_dims(const Node& n) {
  std::vector<int64_t> out;
  const AttrValue& d = n.attr("dim");
  const int64_t nd = static_cast<int64_t>(n.input_meta[0].sizes.size());
  if (d.kind == AttrValue::Kind::IntList && nd > 0)
    for (int64_t v : d.list) out.push_back(kernels::wrap_dim(v, nd));
  return out;
}

// std_backward(result, grad, self, dim, correction, keepdim) =
// var_backward((grad / (result * 2)).masked_fill_(result == 0, 0), self, dim, correction, keepdim)
// = grad * (self - mean) / (result * (N - correction)), 0 where result is 0.
std::vector<Tensor> std_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self"), result = n.unpack("result");
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const ReducePlan p = plan_reduce(m.sizes, std_dims(n), true);
  const double dof = static_cast<double>(p.count - n.attr("correction").i);
  const std::vector<double> x = to_values(self), r = to_values(result), gv = to_values(g[0]);
  std::vector<double> mean(static_cast<size_t>(p.groups), 0.0);
  for (size_t i = 0; i < x.size(); ++i) mean[static_cast<size_t>(p.group[i])] += x[i];
  for (double& v : mean) v /= static_cast<double>(p.count);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = static_cast<size_t>(p.group[i]);
    out[i] = r[k] == 0 ? 0.0 : gv[k] * (x[i] - mean[k]) / (r[k] * dof);
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

}  // namespace

Tensor std_dev(const Tensor& a, const std::optional<std::vector<int64_t>>& dims, int64_t correction, bool keepdim) {
  OpScope scope("std");
  require_host(a);
  require_floating(a, "std");
  std::vector<int64_t> wd;
  if (dims && a->dim() > 0) wd = wrap_dims(*dims, a->dim());
  // dim None and an empty dim list both reduce every element.
  const ReducePlan p = plan_reduce(a->sizes, wd, keepdim && dims);
  std::vector<double> values;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    std::vector<double> mean(static_cast<size_t>(p.groups), 0.0), sq(static_cast<size_t>(p.groups), 0.0);
    for (size_t i = 0; i < x.size(); ++i) mean[static_cast<size_t>(p.group[i])] += x[i];
    for (double& v : mean) v /= static_cast<double>(p.count);
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i] - mean[static_cast<size_t>(p.group[i])];
      sq[static_cast<size_t>(p.group[i])] += d * d;
    }
    values.resize(sq.size());
    const double dof = std::max(0.0, static_cast<double>(p.count - correction));
    for (size_t k = 0; k < sq.size(); ++k) values[k] = std::sqrt(sq[k] / dof);
  }
  Tensor r = make_out(p.out_shape, a->dtype(), a->is_meta(), values);
  if (needs_grad({&a})) {
    auto node = make_node("StdBackward0", std_backward, {a});
    set_history(r, node);
    node->save_attr("correction", AttrValue::integer(correction));
    node->save_attr("dim", dims ? AttrValue::ints(*dims, true) : AttrValue::none());
    node->save_attr("keepdim", AttrValue::boolean(keepdim));
    node->save_output("result", r, 0);
    node->save_input("self", a);
  }
  return r;
}

}  // namespace agtrace::ops
