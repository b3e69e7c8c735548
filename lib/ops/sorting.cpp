// sort, argsort and topk: forward, node, saved values and backward side by side. Nodes,
// saved values, ties and NaN order measured with /usr/bin/python3 and torch 1.13.
//
// PyTorch 1.13's CPU sort runs std::sort over each slice unless stable=True: a slice of at
// most 16 elements is sorted by insertion alone, which keeps equal elements in their order
// (measured: ties keep their order in slices of 6, not in a slice of 20). agtrace sorts
// stably, so a slice longer than 16 holding equal values (NaN counts as equal to NaN) is
// `unsupported` unless stable=True. topk selects by partial sorting, whose order of equal
// values is not the input's (measured: topk(2) of [1, 3, 3, 0, 3, 1] gives indices [2, 4]),
// so a tie among the selected values or at the cut is `unsupported`.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/more.hpp"
#include "ops/more_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

constexpr size_t kInsertionSortLimit = 16;  // libstdc++'s std::sort threshold (_S_threshold)

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Ascending: NaN last; descending: NaN first (measured), each otherwise by value.
bool before(double a, double b, bool descending) {
  if (std::isnan(a) || std::isnan(b)) return descending ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b);
  return descending ? a > b : a < b;
}

// SortBackward0 / TopkBackward0: value_selecting_reduction_backward(grad, dim, indices,
// self_sizes, true) = zeros(self_sizes).scatter(dim, indices, grad).
std::vector<Tensor> selected_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("indices");
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {empty_tensor(m.sizes, m.dtype, true)};
  const std::vector<double> gv = to_values(g[0]), iv = to_values(indices);
  std::vector<double> out(static_cast<size_t>(shape_numel(m.sizes)), 0.0);
  if (m.sizes.empty()) return {make_out(m.sizes, m.dtype, false, gv)};
  const auto d = static_cast<size_t>(kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(m.sizes.size())));
  int64_t inner = 1;
  for (size_t k = d + 1; k < m.sizes.size(); ++k) inner *= m.sizes[k];
  const int64_t out_d = indices->sizes[d];
  for (size_t j = 0; j < gv.size(); ++j) {
    const int64_t o = static_cast<int64_t>(j) / (inner * out_d), in = static_cast<int64_t>(j) % inner;
    out[static_cast<size_t>((o * m.sizes[d] + static_cast<int64_t>(iv[j])) * inner + in)] = gv[j];
  }
  return {make_out(m.sizes, m.dtype, false, out)};
}

// Sorts every slice along dim and keeps the first `keep` of each: (values, indices) in the
// output layout (dim of size keep). `check` vets each slice's order (ties: unsupported).
template <typename Check>
std::pair<std::vector<double>, std::vector<double>> sorted_slices(const Tensor& a, int64_t d, int64_t keep,
                                                                  bool descending, Check&& check) {
  const std::vector<double> x = to_values(a);
  const int64_t size_d = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(d)];
  int64_t inner = 1;
  for (size_t k = static_cast<size_t>(d) + 1; k < a->sizes.size(); ++k) inner *= a->sizes[k];
  const int64_t outer = size_d == 0 ? 0 : static_cast<int64_t>(x.size()) / (size_d * inner);
  std::vector<double> vals(static_cast<size_t>(outer * keep * inner)), idx(vals.size());
  std::vector<int64_t> order(static_cast<size_t>(size_d));
  std::vector<double> slice(static_cast<size_t>(size_d));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      for (int64_t j = 0; j < size_d; ++j) slice[static_cast<size_t>(j)] = x[static_cast<size_t>((o * size_d + j) * inner + in)];
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
        return before(slice[static_cast<size_t>(p)], slice[static_cast<size_t>(q)], descending);
      });
      check(slice, order);
      for (int64_t j = 0; j < keep; ++j) {
        const auto at = static_cast<size_t>((o * keep + j) * inner + in);
        vals[at] = slice[static_cast<size_t>(order[static_cast<size_t>(j)])];
        idx[at] = static_cast<double>(order[static_cast<size_t>(j)]);
      }
    }
  return {vals, idx};
}

std::pair<Tensor, Tensor> select_sorted(const Tensor& a, int64_t dim, int64_t keep, bool descending, const char* node,
                                        bool check_ties, bool topk) {
  require_host(a);
  const int64_t wd = kernels::wrap_dim(dim, a->dim());
  Shape shape = a->sizes.vec();
  if (!shape.empty()) shape[static_cast<size_t>(wd)] = keep;
  std::vector<double> vals, idx;
  if (!a->is_meta()) {
    auto check = [&](const std::vector<double>& slice, const std::vector<int64_t>& order) {
      if (!check_ties) return;
      if (!topk) {
        if (slice.size() <= kInsertionSortLimit) return;
        for (size_t j = 1; j < order.size(); ++j)
          if (same_value(slice[static_cast<size_t>(order[j - 1])], slice[static_cast<size_t>(order[j])]))
            unsupported("sort of a slice of more than 16 elements with equal values without stable=True "
                        "(std::sort's order of ties)");
        return;
      }
      // A tie that reaches the selection: between two selected values or across the cut.
      for (size_t j = 1; j < order.size() && j <= static_cast<size_t>(keep); ++j)
        if (same_value(slice[static_cast<size_t>(order[j - 1])], slice[static_cast<size_t>(order[j])]))
          unsupported("topk with equal values among the selected ones (its order of ties)");
    };
    std::tie(vals, idx) = sorted_slices(a, wd, keep, descending, check);
  }
  Tensor values = make_out(shape, a->dtype(), a->is_meta(), vals);
  Tensor indices = make_out(shape, DType::Int64, a->is_meta(), idx);
  if (needs_grad({&a})) {
    // indices is saved as the very object returned (measured: `_saved_indices is r.indices`).
    auto n = make_node(node, selected_backward, {a});
    set_history(values, n);
    n->save_attr("dim", AttrValue::integer(dim, true));
    n->save_input("indices", indices);
    n->save_attr("self_sizes", AttrValue::ints(a->sizes));
  }
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  OpScope scope("sort");
  const int64_t size = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(kernels::wrap_dim(dim, a->dim()))];
  return select_sorted(a, dim, size, descending, "SortBackward0", !stable, false);
}

Tensor argsort(const Tensor& a, int64_t dim, bool descending) {
  // at::argsort is std::get<1>(at::sort(self, dim, descending)): with an input that requires
  // grad it records the sort's SortBackward0 on the values it drops, saving the indices
  // (measured: each x.argsort() adds the indices' bytes to what pack hooks see).
  return sort(a, dim, descending, false).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  OpScope scope("topk");
  const int64_t size = a->dim() == 0 ? 1 : a->sizes[static_cast<size_t>(kernels::wrap_dim(dim, a->dim()))];
  if (k < 0 || k > size) throw ScenarioError("index_out_of_range", "selected index k out of range");
  return select_sorted(a, dim, k, largest, "TopkBackward0", true, true);
}

}  // namespace agtrace::ops
