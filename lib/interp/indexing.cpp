// Tensor.__getitem__ / __setitem__, step by step as PyTorch 1.13 takes them
// (python_variable_indexing.cpp, TensorIndexing.h):
//  - applySlicing walks the indices left to right: an int selects (the dim goes), a slice
//    slices, None unsqueezes, `...` skips the dims the other indices leave, and a tensor is
//    recorded as an advanced index at the current dim (a 0-d integer tensor selects, a bool
//    scalar unsqueezes and records [0] or []);
//  - getitem returns the sliced view, an alias when nothing was applied (x[...]), or
//    aten::index over the recorded tensors;
//  - setitem converts a Python number to a 0-d tensor of x's dtype, then copy_to()s the
//    value into the sliced view (copy_, or fill_ for a 0-d CPU value, or the value viewed
//    without its leading 1s and expanded), or index_put_s it when tensors were recorded.
//  - applySlice skips a slice written with start 0, stop the dim's size and step 1 (the
//    raw Python bounds: `:` and `0:` carry stop PY_SSIZE_T_MAX and are kept), except for
//    a getitem whose index is one lone slice (disable_slice_optimization). Measured:
//    `x[:, :, :3]` on size 3 records two SliceBackward0, `x[0:2, :3]` on (2, 3) is
//    AliasBackward0, `x[0:2]` is SliceBackward0; `y[0:3] = 1.0` on 3 rows records
//    FillBackward3 on y itself, while `y[:] = 1.0` and `y[0:100] = 1.0` record CopySlices.
#include "interp/indexing.hpp"

#include <optional>

#include "errors.hpp"
#include "ops/indexing.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table_util.hpp"

namespace agtrace::interp {

namespace {

[[noreturn]] void fail(const std::string& kind, const std::string& message) { throw ScenarioError(kind, message); }

struct Sliced {
  Tensor result;
  std::vector<Tensor> tensor_indices;  // entry d: the advanced index of dim d (null: none)
};

// A Python list used as one index (x[[0, 2]], x[[True, False, True]], an item of a tuple
// such as the [[0, 1], [1, 2]] of x[[[0, 1], [1, 2]], 0]): sequenceToVariable, i.e.
// torch.tensor(list): nested lists give a tensor of their depth, int64, or bool when every
// element is a bool (a float element is a float tensor, which indexing then refuses).
Tensor list_index(const Value& v) {
  Shape shape;
  std::vector<double> values;
  int kind = 0;  // flatten_data's: 0 bool, 1 int, 2 float
  for (const Value& item : v.items)
    if (item.kind == Value::Kind::Tensor)
      fail("unsupported", "indexing with a list holding a tensor inside a nested list is not supported");
  ops::flatten_data(v, shape, 0, values, kind);
  if (values.empty()) kind = 1;  // torch.tensor([]) is float, but x[[]] indexes with an empty long tensor
  const DType d = kind == 2 ? DType::Float32 : kind == 1 ? DType::Int64 : DType::Bool;
  return tensor_from_values(shape, d, values);
}

// treatSequenceAsTuple (python_variable_indexing.cpp, 1.13): a tuple is a tuple of indices;
// so is a list (of fewer than 32 items) holding a tensor, a sequence, a slice, `...` or None
// (NumPy's legacy reading: x[[[0, 1], [1, 2]]] is x[[0, 1], [1, 2]]). Any other list is one
// index.
std::vector<Value> index_items(const std::vector<Value>& indices) {
  if (indices.size() != 1) return indices;
  const Value& only = indices[0];
  if (only.kind == Value::Kind::Tuple) return only.items;
  if (only.kind != Value::Kind::List || only.items.size() >= 32) return indices;
  for (const Value& item : only.items)
    switch (item.kind) {
      case Value::Kind::Tensor:
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Size:
      case Value::Kind::Slice:
      case Value::Kind::Ellipsis:
      case Value::Kind::None:
        return only.items;
      default:
        break;
    }
  return indices;
}

// x[True] / x[False] as a tensor index (boolToIndexingTensor): [0] or an empty long tensor.
Tensor bool_index(bool b) {
  return b ? tensor_from_values({1}, DType::Int64, {0.0}) : tensor_from_values({0}, DType::Int64, {});
}

void record(Sliced& s, int64_t& dim, const Tensor& index) {
  s.tensor_indices.resize(static_cast<size_t>(dim) + 1);
  s.tensor_indices[static_cast<size_t>(dim)] = index;
  ++dim;
}

std::optional<int64_t> slice_bound(const Value& x) {
  if (x.kind == Value::Kind::None) return std::nullopt;
  if (x.kind == Value::Kind::Int) return x.i;
  if (x.kind == Value::Kind::Bool) return x.b ? 1 : 0;
  fail("type_error", "slice indices must be integers or None or have an __index__ method");
}

Sliced apply_slicing(const Tensor& self, const std::vector<Value>& indices, bool skip_whole_slices) {
  // count_specified_dimensions: ints, slices and tensors (a bool tensor its ndim); None,
  // `...` and bool scalars take no dim.
  int64_t specified = 0;
  for (const Value& v : indices) {
    if (v.kind == Value::Kind::Tensor)
      specified += v.t->dtype() == DType::Bool ? v.t->dim() : 1;
    else if (v.kind != Value::Kind::None && v.kind != Value::Kind::Ellipsis && v.kind != Value::Kind::Bool)
      ++specified;
  }
  if (specified > self->dim())
    fail("index_out_of_range", "too many indices for tensor of dimension " + std::to_string(self->dim()));
  Sliced s{self, {}};
  int64_t dim = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const Value& v = indices[k];
    switch (v.kind) {
      case Value::Kind::Int:
        s.result = ops::select(s.result, dim, v.i);
        break;
      case Value::Kind::Slice: {
        const std::optional<int64_t> start = slice_bound(v.items[0]), stop = slice_bound(v.items[1]);
        const int64_t step = slice_bound(v.items[2]).value_or(1);
        if (step <= 0) fail("type_error", "step must be greater than zero");
        if (s.result->dim() == 0) fail("index_out_of_range", "slice() cannot be applied to a 0-dim tensor.");
        const bool whole = start.value_or(0) == 0 && stop && *stop == s.result->sizes[static_cast<size_t>(dim)] &&
                           step == 1;
        if (!(skip_whole_slices && whole)) s.result = ops::slice(s.result, dim, start, stop, step);
        ++dim;
        break;
      }
      case Value::Kind::Ellipsis:
        // Every `...` skips the dims the other indices leave (1.13 accepts several: measured,
        // x[..., 0, ...] is x[:, 0]).
        dim += self->dim() - specified;
        break;
      case Value::Kind::None:
        s.result = ops::unsqueeze(s.result, dim);
        ++dim;
        break;
      case Value::Kind::Bool:
        s.result = ops::unsqueeze(s.result, dim);
        record(s, dim, bool_index(v.b));
        break;
      case Value::Kind::List:
      case Value::Kind::Tuple:  // a sequence inside the tuple of indices: torch.tensor of it
        record(s, dim, list_index(v));
        break;
      case Value::Kind::Tensor: {
        const Tensor& t = v.t;
        if (t->dim() == 0 && (t->dtype() == DType::Int64 || t->dtype() == DType::Bool)) {
          if (t->dtype() == DType::Int64) {
            s.result = ops::select(s.result, dim, static_cast<int64_t>(item(t)));
          } else {
            s.result = ops::unsqueeze(s.result, dim);
            record(s, dim, bool_index(item(t) != 0));
          }
          break;
        }
        // PyTorch records a k-dim mask at one position and moves on by one dim, so the
        // indices after it would land on the mask's own dims: not mirrored.
        if (t->dtype() == DType::Bool && t->dim() > 1 && k + 1 < indices.size())
          fail("unsupported", "a bool mask of more than one dim followed by other indices is not supported");
        record(s, dim, t);
        break;
      }
      default:
        fail("index_out_of_range", "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                                   "valid indices (got " + type_name(v) + ")");
    }
  }
  return s;
}

// Index dtypes PyTorch accepts, checked before anything runs (an IndexError).
void check_index_dtypes(const Sliced& s) {
  for (const Tensor& t : s.tensor_indices)
    if (t && t->dtype() != DType::Int64 && t->dtype() != DType::Bool)
      fail("index_out_of_range", "tensors used as indices must be long, byte or bool tensors");
}

// The value's sizes without their leading 1s (slicePrefix1sSize).
Shape without_leading_ones(const Shape& sizes) {
  size_t first = 0;
  while (first < sizes.size() && sizes[first] == 1) ++first;
  return Shape(sizes.begin() + static_cast<std::ptrdiff_t>(first), sizes.end());
}

// copy_to (python_variable_indexing.cpp): the same sizes copy_; a 0-d CPU value fill_s;
// otherwise the value is viewed without its leading 1s (ViewBackward0), expanded to the
// destination (ExpandBackward0 when the sizes differ), and copied.
void copy_to(const Tensor& dst, const Tensor& src) {
  if (dst->sizes == src->sizes) {
    ops::copy_(dst, src);
    return;
  }
  if (src->dim() == 0 && !src->storage->on_device()) {
    ops::fill_tensor_(dst, src);
    return;
  }
  Tensor view = ops::view(src, without_leading_ones(src->sizes));
  if (view->sizes != dst->sizes) view = ops::expand(view, dst->sizes.vec());
  ops::copy_(dst, view);
}

// valueToTensor: a Python number becomes a 0-d tensor of x's dtype (not a wrapped number);
// on cuda it is made on the CPU, as PyTorch does, so copy_to fills with it.
Tensor value_tensor(const Tensor& self, const Value& value) {
  if (value.kind == Value::Kind::Tensor) return value.t;
  if (value.is_number()) return scalar_tensor(value.number(), self->dtype());
  fail("type_error", "can't assign a " + type_name(value) + " to a torch." + dtype_tensor_type(self->dtype()));
}

}  // namespace

Value tensor_getitem(const Tensor& t, const std::vector<Value>& written) {
  const std::vector<Value> indices = index_items(written);
  const bool lone_slice = written.size() == 1 && written[0].kind == Value::Kind::Slice;
  Sliced s = apply_slicing(t, indices, !lone_slice);
  check_index_dtypes(s);
  if (s.tensor_indices.empty()) return Value::tensor(s.result == t ? ops::alias(t) : s.result);
  // One tensor indexing dim 0: the single-index op (it has cuda and create_graph routes).
  if (s.tensor_indices.size() == 1) return Value::tensor(ops::index_with_tensor(s.result, s.tensor_indices[0]));
  return Value::tensor(ops::index_advanced(s.result, s.tensor_indices));
}

void tensor_setitem(const Tensor& t, const std::vector<Value>& written, const Value& value) {
  const std::vector<Value> indices = index_items(written);
  // x[False] = v does nothing (THPVariable_setitem returns before looking at the value).
  if (indices.size() == 1 && indices[0].kind == Value::Kind::Bool && !indices[0].b) return;
  const Tensor v = value_tensor(t, value);
  // x[True] = v alone is x.unsqueeze(0) written through (set_item's one-index case), not
  // the index_put_ a True inside a tuple gives.
  if (indices.size() == 1 && indices[0].kind == Value::Kind::Bool) {
    copy_to(ops::unsqueeze(t, 0), v);
    return;
  }
  Sliced s = apply_slicing(t, indices, true);
  check_index_dtypes(s);
  if (s.tensor_indices.empty()) {
    copy_to(s.result, v);
    return;
  }
  const Shape stripped = without_leading_ones(v->sizes);
  const Tensor values = stripped == v->sizes.vec() ? v : ops::view(v, stripped);
  ops::index_put_(s.result, s.tensor_indices, values, false);
}

}  // namespace agtrace::interp
