// Op-table fragment (see table.hpp): index_add, index_copy, index_fill, scatter, scatter_add
// and their `_` forms; median, nanmedian, kthvalue. The ops are in index_family.cpp and
// median.cpp; this file maps PyTorch's Python signatures onto them (measured with
// /usr/bin/python3 and torch 1.13).
#include "ops/index_family.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

[[noreturn]] void not_mirrored(const std::string& what) {
  throw ScenarioError("unsupported", what + " is not supported");
}

Value impl_index_add(Args& a, Runtime&) {
  return T(index_add(a.tensor("self"), a.integer("dim"), a.tensor("index"), a.tensor("source"), a.get("alpha")));
}
Value impl_index_add_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  index_add_(self, a.integer("dim"), a.tensor("index"), a.tensor("source"), a.get("alpha"));
  return T(self);
}
Value impl_index_copy(Args& a, Runtime&) {
  return T(index_copy(a.tensor("self"), a.integer("dim"), a.tensor("index"), a.tensor("source")));
}
Value impl_index_copy_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  index_copy_(self, a.integer("dim"), a.tensor("index"), a.tensor("source"));
  return T(self);
}
Value impl_index_fill(Args& a, Runtime&) {
  return T(index_fill(a.tensor("self"), a.integer("dim"), a.tensor("index"), a.get("value")));
}
Value impl_index_fill_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  index_fill_(self, a.integer("dim"), a.tensor("index"), a.get("value"));
  return T(self);
}

// scatter(dim, index, src) / scatter(dim, index, value): the third argument positionally,
// or src= / value= by keyword. reduce= ('add', 'multiply') records a node with no
// derivative in 1.13 (measured: "derivative for aten::scatter is not implemented" at
// backward); not mirrored.
const Value& scatter_operand(const Args& a) {
  if (a.given("reduce")) not_mirrored(short_fn(a.fn) + "(reduce=...)");
  if (a.given("src") && a.given("value")) type_error(short_fn(a.fn) + "() got both 'src' and 'value'");
  if (!a.given("src") && !a.given("value")) type_error(short_fn(a.fn) + "() missing required argument 'src' or 'value'");
  // value= takes a number only (measured: value=<tensor> is the parser's TypeError).
  if (a.given("value") && !a.get("value").is_number())
    type_error(short_fn(a.fn) + "() received an invalid combination of arguments - got value=" +
               type_name(a.get("value")) + ", but 'value' must be Number");
  return a.given("src") ? a.get("src") : a.get("value");
}
Value impl_scatter(Args& a, Runtime&) {
  return T(scatter(a.tensor("self"), a.integer("dim"), a.tensor("index"), scatter_operand(a)));
}
Value impl_scatter_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  scatter_(self, a.integer("dim"), a.tensor("index"), scatter_operand(a));
  return T(self);
}
Value impl_scatter_add(Args& a, Runtime&) {
  return T(scatter_add(a.tensor("self"), a.integer("dim"), a.tensor("index"), a.tensor("src")));
}
Value impl_scatter_add_(Args& a, Runtime&) {
  Tensor self = a.tensor("self");
  scatter_add_(self, a.integer("dim"), a.tensor("index"), a.tensor("src"));
  return T(self);
}

// median() and median(dim, keepdim): the dim-less overload takes no keepdim.
Value median_impl(Args& a, bool ignore_nan) {
  const char* fn = ignore_nan ? "nanmedian" : "median";
  a.reject_explicit_none_dim("dim");
  if (!a.given("dim")) {
    if (a.passed("keepdim"))
      type_error(std::string(fn) + "() received an invalid combination of arguments - got (keepdim=bool, ), but "
                 "expected one of: (), (int dim, bool keepdim)");
    return T(median_all(a.tensor("self"), ignore_nan));
  }
  auto [values, indices] = median_dim(a.tensor("self"), a.integer("dim"), a.flag("keepdim"), ignore_nan);
  return Value::return_type(fn, T(values), T(indices));
}
Value impl_median(Args& a, Runtime&) { return median_impl(a, false); }
Value impl_nanmedian(Args& a, Runtime&) { return median_impl(a, true); }
Value impl_kthvalue(Args& a, Runtime&) {
  auto [values, indices] = kthvalue(a.tensor("self"), a.integer("k"), a.integer("dim"), a.flag("keepdim"));
  return Value::return_type("kthvalue", T(values), T(indices));
}

}  // namespace

std::vector<OpEntry> index_ops() {
  return {
      {"index_add", {"torch.index_add", "Tensor.index_add"}, "(self, dim, index, source, *, alpha=1)", "indexing",
       "IndexAddBackward0",
       "alpha, dim, index and source (same objects; both None unless source requires grad), source_dim",
       impl_index_add, {}},
      {"index_add_", {"Tensor.index_add_"}, "(self, dim, index, source, *, alpha=1)", "inplace", "IndexAddBackward0",
       "as index_add; CopySlices on a view", impl_index_add_, {}},
      {"index_copy", {"torch.index_copy", "Tensor.index_copy"}, "(self, dim, index, source)", "indexing",
       "IndexCopyBackward0", "dim, index (same object), source (None unless it requires grad), source_dim",
       impl_index_copy, {}},
      {"index_copy_", {"Tensor.index_copy_"}, "(self, dim, index, source)", "inplace", "IndexCopyBackward0",
       "as index_copy; CopySlices on a view", impl_index_copy_, {}},
      {"index_fill", {"torch.index_fill", "Tensor.index_fill"}, "(self, dim, index, value)", "indexing",
       "IndexFillBackward0 / IndexFillBackward1", "dim, index (same object); a 0-d tensor value is Backward1",
       impl_index_fill, {}},
      {"index_fill_", {"Tensor.index_fill_"}, "(self, dim, index, value)", "inplace",
       "IndexFillBackward0 / IndexFillBackward1", "as index_fill; CopySlices on a view", impl_index_fill_, {}},
      {"scatter", {"torch.scatter", "Tensor.scatter"}, "(self, dim, index, src=None, *, value=None, reduce=None)",
       "indexing", "ScatterBackward0 / ScatterBackward1",
       "dim, index (same object); a number value is Backward1; reduce= not supported", impl_scatter, {}},
      {"scatter_", {"Tensor.scatter_"}, "(self, dim, index, src=None, *, value=None, reduce=None)", "inplace",
       "ScatterBackward0 / ScatterBackward1", "as scatter; CopySlices on a view", impl_scatter_, {}},
      {"scatter_add", {"torch.scatter_add", "Tensor.scatter_add"}, "(self, dim, index, src)", "indexing",
       "ScatterAddBackward0", "dim, index (None unless src requires grad)", impl_scatter_add, {}},
      {"scatter_add_", {"Tensor.scatter_add_"}, "(self, dim, index, src)", "inplace", "ScatterAddBackward0",
       "as scatter_add; CopySlices on a view", impl_scatter_add_, {}},
      {"median", {"torch.median", "Tensor.median"}, "(self, dim=None, keepdim=False)", "reduction",
       "MedianBackward0 / MedianBackward1",
       "all: result and self (the lower median); by dim: returns torch.return_types.median(values, indices) and "
       "saves dim, indices (the returned object), keepdim, self_sizes",
       impl_median, {}},
      {"nanmedian", {"torch.nanmedian", "Tensor.nanmedian"}, "(self, dim=None, keepdim=False)", "reduction",
       "NanmedianBackward0 / NanmedianBackward1",
       "as median, NaNs skipped; an all-NaN slice by dim unsupported", impl_nanmedian, {}},
      {"kthvalue", {"torch.kthvalue", "Tensor.kthvalue"}, "(self, k, dim=-1, keepdim=False)", "reduction",
       "KthvalueBackward0",
       "returns torch.return_types.kthvalue(values, indices); saves dim, indices (the returned object), keepdim, "
       "self_sizes",
       impl_kthvalue, {}},
  };
}

}  // namespace agtrace::ops
