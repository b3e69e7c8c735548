// median, nanmedian and kthvalue: forward, node and saved values (the backward formulas are
// max's: derivatives.yaml gives median() and nanmedian() evenly_distribute_backward(grad,
// self, result), as for max(), and median(dim), nanmedian(dim), kthvalue
// value_selecting_reduction_backward(grad, dim, indices, self_sizes, keepdim), as for
// max(dim)). Measured with /usr/bin/python3 and torch 1.13, on thousands of random slices
// full of ties and NaNs:
//  - the median of n values is the lower one, element (n - 1) / 2 in order; median(dim)'s
//    index is that element's in a stable sort (the CPU kernel's nth_element compares
//    (value, index)), and a slice holding NaN gives its first NaN and that index;
//  - nanmedian skips NaNs: element (n - nans - 1) / 2 of the stably sorted non-NaN values (an
//    all-NaN slice is not mirrored: which NaN's index it returns is the selection's);
//  - kthvalue's index is what ATen's quick_select_template (median of three, Hoare
//    partition, NaN largest) leaves at k - 1 on a copy of the slice, mirrored step by step.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/index_family.hpp"
#include "ops/more_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

// PyTorch 1.13 has no meta kernel for median and kthvalue (measured: NotImplementedError
// "Could not run 'aten::median' with arguments from the 'Meta' backend"); nanmedian has one.
void refuse_meta(const Tensor& a, const char* op) {
  if (a->is_meta()) unsupported(std::string(op) + " on the meta device (PyTorch 1.13 has no meta kernel for it)");
}

// The CPU kernels lack Half and Bool (measured: "median_cpu" not implemented for 'Half',
// "median_out" for the dim forms, "kthvalue_cpu"); meta has no kernels and passes.
void require_cpu_kernel(const Tensor& a, const char* kernel) {
  if (!a->is_meta() && (a->dtype() == DType::Float16 || a->dtype() == DType::Bool))
    act_detail::not_implemented(kernel, a->dtype());
}

// The value's position in ascending order with NaN last, ties kept in index order.
std::vector<int64_t> stable_order(const std::vector<double>& slice) {
  std::vector<int64_t> order(slice.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
    const double a = slice[static_cast<size_t>(p)], b = slice[static_cast<size_t>(q)];
    if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    return a < b;
  });
  return order;
}

int64_t median_index(const std::vector<double>& slice, bool ignore_nan) {
  const auto n = static_cast<int64_t>(slice.size());
  const auto nans = static_cast<int64_t>(std::count_if(slice.begin(), slice.end(), [](double v) { return std::isnan(v); }));
  if (!ignore_nan && nans > 0)
    return static_cast<int64_t>(std::find_if(slice.begin(), slice.end(), [](double v) { return std::isnan(v); }) -
                                slice.begin());
  if (ignore_nan && nans == n) unsupported("nanmedian(dim) of a slice of NaNs only (the index it returns)");
  return stable_order(slice)[static_cast<size_t>((n - nans - 1) / 2)];
}

// ATen's quick_select_template on (values, indices), comparing "greater or NaN": returns
// the index that lands at position k.
int64_t quick_select_index(std::vector<double> vals, int64_t k) {
  std::vector<int64_t> idx(vals.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto gt = [](double x, double y) { return (std::isnan(x) && !std::isnan(y)) || x > y; };
  auto swap = [&](int64_t i, int64_t j) {
    std::swap(vals[static_cast<size_t>(i)], vals[static_cast<size_t>(j)]);
    std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(j)]);
  };
  auto v = [&](int64_t i) { return vals[static_cast<size_t>(i)]; };
  int64_t lo = 0, hi = static_cast<int64_t>(vals.size()) - 1;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (gt(v(lo), v(hi))) swap(lo, hi);
      break;
    }
    // Median of three as the pivot, moved to lo.
    swap(lo + (hi - lo) / 2, lo + 1);
    if (gt(v(lo + 1), v(hi))) swap(lo + 1, hi);
    if (gt(v(lo), v(hi))) swap(lo, hi);
    if (gt(v(lo + 1), v(lo))) swap(lo + 1, lo);
    int64_t i = lo + 1, j = hi;
    const double pivot = v(lo);
    while (true) {
      do ++i;
      while (gt(pivot, v(i)));
      do --j;
      while (gt(v(j), pivot));
      if (j < i) break;
      swap(i, j);
    }
    swap(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
  return idx[static_cast<size_t>(k)];
}

// Runs `pick` (a slice's values -> the chosen index) over every slice along dim:
// (values, indices) shaped as a reduction over dim.
template <typename Pick>
std::pair<Tensor, Tensor> select_along(const char* op, const Tensor& a, int64_t dim, bool keepdim, Pick&& pick) {
  require_host(a);
  const int64_t d = kernels::wrap_dim(dim, a->dim());
  Shape shape = a->sizes.vec();
  if (!shape.empty()) {
    if (keepdim) shape[static_cast<size_t>(d)] = 1;
    else shape.erase(shape.begin() + d);
  }
  const int64_t size = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(d)];
  if (size == 0) unsupported(std::string(op) + " over a dimension of size 0");
  std::vector<double> vals, idx;
  if (!a->is_meta()) {
    const std::vector<double> x = to_values(a);
    int64_t inner = 1;
    for (size_t k = static_cast<size_t>(d) + 1; k < a->sizes.size(); ++k) inner *= a->sizes[k];
    const int64_t outer = static_cast<int64_t>(x.size()) / (size * inner);
    vals.resize(static_cast<size_t>(outer * inner));
    idx.resize(vals.size());
    std::vector<double> slice(static_cast<size_t>(size));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        for (int64_t j = 0; j < size; ++j) slice[static_cast<size_t>(j)] = x[static_cast<size_t>((o * size + j) * inner + in)];
        const int64_t chosen = pick(slice);
        vals[static_cast<size_t>(o * inner + in)] = slice[static_cast<size_t>(chosen)];
        idx[static_cast<size_t>(o * inner + in)] = static_cast<double>(chosen);
      }
  }
  return {make_out(shape, a->dtype(), a->is_meta(), vals), make_out(shape, DType::Int64, a->is_meta(), idx)};
}

}  // namespace

Tensor median_all(const Tensor& self, bool ignore_nan) {
  OpScope scope(ignore_nan ? "nanmedian" : "median");
  require_host(self);
  if (!ignore_nan) refuse_meta(self, "median");
  require_cpu_kernel(self, "median_cpu");
  if (self->numel() == 0) unsupported(std::string(ignore_nan ? "nanmedian" : "median") + "() of an empty tensor");
  std::vector<double> v;
  if (!self->is_meta()) {
    const std::vector<double> x = to_values(self);
    const bool all_nan = std::all_of(x.begin(), x.end(), [](double e) { return std::isnan(e); });
    v = {ignore_nan && all_nan ? x[0] : x[static_cast<size_t>(median_index(x, ignore_nan))]};
  }
  Tensor r = make_out({}, self->dtype(), self->is_meta(), v);
  if (needs_grad({&self})) act_detail::record_extreme_all(ignore_nan ? "NanmedianBackward0" : "MedianBackward0", r, self);
  return r;
}

std::pair<Tensor, Tensor> median_dim(const Tensor& self, int64_t dim, bool keepdim, bool ignore_nan) {
  OpScope scope(ignore_nan ? "nanmedian" : "median");
  if (!ignore_nan) refuse_meta(self, "median");
  require_cpu_kernel(self, "median_out");
  auto r = select_along(ignore_nan ? "nanmedian" : "median", self, dim, keepdim,
                        [&](const std::vector<double>& s) { return median_index(s, ignore_nan); });
  if (needs_grad({&self}))
    act_detail::record_extreme_dim(ignore_nan ? "NanmedianBackward1" : "MedianBackward1", r.first, r.second, self, dim,
                                   keepdim);
  return r;
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  OpScope scope("kthvalue");
  refuse_meta(self, "kthvalue");
  require_cpu_kernel(self, "kthvalue_cpu");
  const int64_t d = kernels::wrap_dim(dim, self->dim());
  const int64_t size = self->dim() == 0 ? 1 : self->sizes[static_cast<size_t>(d)];
  if (k < 1 || k > size)
    throw ScenarioError("index_out_of_range",
                        "kthvalue(): selected number k out of range for dimension " + std::to_string(d));
  auto r = select_along("kthvalue", self, dim, keepdim,
                        [&](const std::vector<double>& s) { return quick_select_index(s, k - 1); });
  if (needs_grad({&self})) act_detail::record_extreme_dim("KthvalueBackward0", r.first, r.second, self, dim, keepdim);
  return r;
}

}  // namespace agtrace::ops
