// index_add, index_copy, index_fill, scatter, scatter_add and their `_` forms. Measured with
// /usr/bin/python3 and torch 1.13:
//  - nodes IndexAddBackward0, IndexCopyBackward0, IndexFillBackward0 (number value) /
//    IndexFillBackward1 (0-d tensor value), ScatterBackward0 (src) / ScatterBackward1
//    (number), ScatterAddBackward0; the `_` forms record the same node over the edited
//    tensor's old history, bump its version once, and on a view put CopySlices on the base;
//  - saved values follow derivatives.yaml and what each gradient needs: index_add saves
//    index and source only when source requires grad (else `_saved_index` is None),
//    index_copy always saves index, source only for source's gradient; scatter always saves
//    index, scatter_add only for src's gradient;
//  - duplicate indices: index_copy and scatter keep the last write (row-major order of the
//    index), index_add and scatter_add sum;
//  - errors are PyTorch's messages at the statement, in the order its kernels check them.
#include <algorithm>
#include <cmath>
#include <set>

#include "ops/double_backward.hpp"
#include "ops/index_family.hpp"
#include "ops/inplace_util.hpp"
#include "ops/more.hpp"
#include "ops/more_util.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

[[noreturn]] void fail(const char* kind, const std::string& message) { throw ScenarioError(kind, message); }

double attr_number(const AttrValue& a) { return a.kind == AttrValue::Kind::Double ? a.d : static_cast<double>(a.i); }

// A tensor of `sizes` seen as (outer, size along dim, inner) blocks, row-major; a 0-d tensor
// is one element along its one dim (PyTorch wraps dim 0 / -1 of a 0-d tensor).
struct Blocks {
  int64_t outer = 1, size = 1, inner = 1;
  Blocks(const Shape& sizes, int64_t d) {
    if (sizes.empty()) return;
    for (int64_t k = 0; k < d; ++k) outer *= sizes[static_cast<size_t>(k)];
    size = sizes[static_cast<size_t>(d)];
    for (size_t k = static_cast<size_t>(d) + 1; k < sizes.size(); ++k) inner *= sizes[k];
  }
  int64_t at(int64_t o, int64_t j, int64_t in) const { return (o * size + j) * inner + in; }
};

// A meta operand has no values to write into a self that has them (PyTorch raises a device
// mismatch there); a meta self with host operands is fine: nothing is written.
void refuse_meta_operands(const Tensor& self, std::initializer_list<const Tensor*> operands) {
  if (self->is_meta()) return;
  for (const Tensor* t : operands)
    if (*t && (*t)->is_meta()) unsupported(run_position().op.str() + " of a " + device_name(self) + " tensor with meta operands");
}

std::vector<int64_t> index_values(const Tensor& index) {
  std::vector<int64_t> out;
  if (index->is_meta()) return out;
  for (double v : to_values(index)) out.push_back(static_cast<int64_t>(v));
  return out;
}

// ---------------------------------------------------------------- index_add / index_copy / index_fill

enum class Write { Add, Copy, Fill };

// self's values with the slices idx[j] along dim written from source's slice j (Add: plus
// alpha times it, Copy: replaced) or with `fill` (Fill). Indices are already in range.
std::vector<double> write_slices(const Tensor& self, int64_t d, const std::vector<int64_t>& idx, const Tensor& source,
                                 Write how, double scalar) {
  std::vector<double> x = to_values(self);
  const Blocks b(self->sizes, d);
  const std::vector<double> s = source ? to_values(source) : std::vector<double>{};
  const auto n = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t in = 0; in < b.inner; ++in) {
        auto& dst = x[static_cast<size_t>(b.at(o, idx[static_cast<size_t>(j)], in))];
        if (how == Write::Fill) {
          dst = scalar;
          continue;
        }
        const double v = s[static_cast<size_t>((o * n + j) * b.inner + in)];
        dst = how == Write::Add ? dst + scalar * v : v;
      }
  return x;
}

// grad.index_select(dim, index) in the layout of the source (expand_as(source) of a source
// with the same slices, the index_select of a 0-d one).
Tensor select_slices(const Tensor& g, int64_t d, const std::vector<int64_t>& idx, const autograd::OutputMeta& m,
                     double scale) {
  if (g->is_meta()) return empty_tensor(m.sizes, m.dtype, true);
  const std::vector<double> gv = to_values(g);
  const Blocks b(g->sizes, d);
  const auto n = static_cast<int64_t>(idx.size());
  std::vector<double> out(static_cast<size_t>(b.outer * n * b.inner));
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t in = 0; in < b.inner; ++in)
        out[static_cast<size_t>((o * n + j) * b.inner + in)] =
            scale * gv[static_cast<size_t>(b.at(o, idx[static_cast<size_t>(j)], in))];
  return make_out(m.sizes, m.dtype, false, out);
}

// grad.index_fill(dim, index, 0): self's gradient where its slices were replaced.
Tensor zero_slices(const Tensor& g, int64_t d, const std::vector<int64_t>& idx, const autograd::OutputMeta& m) {
  if (g->is_meta()) return empty_tensor(m.sizes, m.dtype, true);
  return make_out(m.sizes, m.dtype, false, write_slices(g, d, idx, nullptr, Write::Fill, 0.0));
}

int64_t wrapped_dim(const Node& n) {
  return kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(n.input_meta[0].sizes.size()));
}

// derivatives.yaml index_add: self: grad; source: maybe_multiply(grad.index_select(dim,
// index).expand_as(source), alpha).
std::vector<Tensor> index_add_backward(Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = as_dtype(g[0], n.input_meta[0].dtype);
  if (n.should_compute_output(1))
    out[1] = select_slices(g[0], wrapped_dim(n), index_values(n.unpack("index")), n.input_meta[1],
                           attr_number(n.attr("alpha")));
  return out;
}

// derivatives.yaml index_copy: self: grad.index_fill(dim, index, 0); source:
// grad.index_select(dim, index).expand_as(source).
std::vector<Tensor> index_copy_backward(Node& n, const std::vector<Tensor>& g) {
  const std::vector<int64_t> idx = index_values(n.unpack("index"));
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = zero_slices(g[0], wrapped_dim(n), idx, n.input_meta[0]);
  if (n.should_compute_output(1)) out[1] = select_slices(g[0], wrapped_dim(n), idx, n.input_meta[1], 1.0);
  return out;
}

// derivatives.yaml index_fill: self: grad.index_fill(dim, index, 0); value (the 0-d tensor
// form): grad.index_select(dim, unique(index)).sum() (measured: index [0, 0, 2] counts row 0
// once).
std::vector<Tensor> index_fill_backward(Node& n, const std::vector<Tensor>& g) {
  std::vector<int64_t> idx = index_values(n.unpack("index"));
  std::vector<Tensor> out(n.input_meta.size());
  const int64_t d = wrapped_dim(n);
  // index_fill accepts negative indices (checked in range at the forward): wrap them.
  const Shape& sizes = n.input_meta[0].sizes;
  const int64_t size = sizes.empty() ? 1 : sizes[static_cast<size_t>(d)];
  for (int64_t& i : idx)
    if (i < 0) i += size;
  if (n.should_compute_output(0)) out[0] = zero_slices(g[0], d, idx, n.input_meta[0]);
  if (out.size() > 1 && n.should_compute_output(1)) {
    const auto& m = n.input_meta[1];
    if (g[0]->is_meta()) {
      out[1] = empty_tensor(m.sizes, m.dtype, true);
    } else {
      const std::set<int64_t> unique(idx.begin(), idx.end());
      const std::vector<double> gv = to_values(g[0]);
      const Blocks b(g[0]->sizes, d);
      double sum = 0;
      for (int64_t o = 0; o < b.outer; ++o)
        for (int64_t j : unique)
          for (int64_t in = 0; in < b.inner; ++in) sum += gv[static_cast<size_t>(b.at(o, j, in))];
      out[1] = make_out(m.sizes, m.dtype, false, {sum});
    }
  }
  return out;
}

std::string scalar_type(DType d) { return act_detail::scalar_name(d); }

void require_vector_index(const Tensor& index, const std::string& op) {
  if (index->dim() > 1) {
    if (op == "index_add_")
      fail("index_out_of_range", "index_add_(): Index is supposed to be a vector, but got dim: " +
                                     std::to_string(index->dim()) + " with type: " + scalar_type(index->dtype()) +
                                     " and size: " + shape_str(index->sizes));
    if (op == "index_copy_")
      fail("index_out_of_range",
           "index_copy_(): Index should have dimension 1 or 0 (got " + std::to_string(index->dim()) + ")");
    fail("shape_mismatch", "Index has to be a vector/scalar");
  }
}

// The index's values wrapped into [0, size): index_fill wraps negative indices, index_add
// and index_copy refuse them (measured), each with its own message.
std::vector<int64_t> checked_indices(const Tensor& index, int64_t d, int64_t size, const std::string& op) {
  std::vector<int64_t> idx = index_values(index);
  for (int64_t& i : idx) {
    const bool wraps = op == "index_fill_";
    if (i < (wraps ? -size : 0) || i >= size) {
      if (op == "index_add_") fail("index_out_of_range", "index out of range in self");
      fail("index_out_of_range", std::string(op == "index_copy_" ? "index_copy_(): " : "") + "index " +
                                     std::to_string(i) + " is out of bounds for dimension " + std::to_string(d) +
                                     " with size " + std::to_string(size));
    }
    if (i < 0) i += size;
  }
  return idx;
}

// The shape checks of index_add_ and index_copy_ (their messages, measured), on self,
// index and source; returns the wrapped dim.
int64_t check_source(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const std::string& op) {
  const int64_t d = kernels::wrap_dim(dim, self->dim());
  require_vector_index(index, op);
  const bool add = op == "index_add_";
  if (index->dtype() != DType::Int64)
    fail("type_error", add ? "index_add_(): Expected dtype int32/int64 for index but got: " + scalar_type(index->dtype())
                           : "index_copy_(): Expected a long tensor for index, but got " + scalar_type(index->dtype()));
  if (!add && source->dim() > 0 && self->dim() > 0 && source->dim() != self->dim())
    fail("index_out_of_range",
         "index_copy_(): When source and destination are not scalars, their dimensionality must match. Source "
         "dimensionality (" + std::to_string(source->dim()) + "), destination dimensionality (" +
             std::to_string(self->dim()) + ")");
  // A 1-d self takes a 0-d source for its one index (measured; "source.dim() (2) must one or
  // zero for given self.dim() (1)" otherwise).
  const bool scalar_source = self->dim() == 1 && source->dim() == 0;
  if (self->dim() == 0 && source->numel() != 1)
    unsupported(op + " of a 0-d self with a source of " + std::to_string(source->numel()) + " elements");
  if (self->dim() > 0 && source->dim() != self->dim() && !scalar_source) {
    // index_add_ reads a source of another rank through broadcasting rules of its own
    // (measured: a [2] source for a [3, 4] self fills whole rows, a [1, 1, 4] one raises):
    // not mirrored. index_copy_ refuses a 0-d source for a self with dims (measured).
    if (add) unsupported("index_add_ with a source of " + std::to_string(source->dim()) + " dims for a self of " +
                         std::to_string(self->dim()));
    fail("shape_mismatch", "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                           "shape: " + shape_str(self->sizes) + " and source slice shape: [] (a 0-d source)");
  }
  const int64_t count = std::max<int64_t>(index->numel(), index->dim() == 0 ? 1 : 0);
  const int64_t source_count = source->dim() == 0 ? 1 : source->sizes[static_cast<size_t>(std::min(d, source->dim() - 1))];
  if (count != source_count)
    fail("shape_mismatch", op + "(): Number of indices (" + std::to_string(count) +
                               ") should be equal to source.size(dim)" + (add ? ": (" : " (") +
                               std::to_string(source_count) + ")" + (add ? ", for dim: " + std::to_string(d) : ""));
  if (self->dtype() != source->dtype())
    fail("dtype_mismatch", add ? "index_add_(): self (" + scalar_type(self->dtype()) + ") and source (" +
                                     scalar_type(source->dtype()) + ") must have the same scalar type"
                               : "index_copy_(): self and source expected to have the same dtype, but got (self) " +
                                     scalar_type(self->dtype()) + " and (source) " + scalar_type(source->dtype()));
  // The slices (every dim but d) must agree; PyTorch's index_add_ also broadcasts a source
  // slice of size-1 dims, which is not mirrored.
  if (self->dim() > 0 && source->dim() > 0)
    for (size_t k = 0; k < self->sizes.size(); ++k) {
      if (static_cast<int64_t>(k) == d || self->sizes[k] == source->sizes[k]) continue;
      if (add && source->sizes[k] == 1) unsupported("index_add_ with a source slice broadcast to self's");
      fail("shape_mismatch",
           add ? "The size of tensor a (" + std::to_string(self->sizes[k]) + ") must match the size of tensor b (" +
                     std::to_string(source->sizes[k]) + ") at non-singleton dimension " + std::to_string(k)
               : "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: " +
                     std::to_string(self->sizes[k]) + " at dimension " + std::to_string(k) +
                     " and source slice shape: " + std::to_string(source->sizes[k]) + " at dimension " +
                     std::to_string(k) + ".");
    }
  return d;
}

// What an op that writes self's slices computes: self's new values (none on meta).
struct SliceWrite {
  int64_t dim;
  std::vector<int64_t> idx;
};

SliceWrite plan_source_write(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                             const std::string& op) {
  require_host(self);
  require_host(index);
  require_host(source);
  refuse_meta_operands(self, {&index, &source});
  const int64_t d = check_source(self, dim, index, source, op);
  const int64_t size = self->dim() == 0 ? 1 : self->sizes[static_cast<size_t>(d)];
  return {d, checked_indices(index, d, size, op)};
}

// index_fill's value: a Python number or a 0-d tensor (returned); PyTorch's errors else.
Tensor fill_value(const Value& value) {
  if (value.kind == Value::Kind::Tensor) {
    if (value.t->dim() != 0)
      fail("shape_mismatch", "index_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                                 std::to_string(value.t->dim()) + " dimension(s).");
    require_host(value.t);
    return value.t;
  }
  if (!value.is_number()) type_error("index_fill(): argument 'value' must be Number, not " + type_name(value));
  return nullptr;
}

SliceWrite plan_fill(const Tensor& self, int64_t dim, const Tensor& index) {
  require_host(self);
  require_host(index);
  refuse_meta_operands(self, {&index});
  const int64_t d = kernels::wrap_dim(dim, self->dim());
  if (index->dtype() != DType::Int64) fail("type_error", "index_fill_(): Expected dtype int64 for index.");
  require_vector_index(index, "index_fill_");
  const int64_t size = self->dim() == 0 ? 1 : self->sizes[static_cast<size_t>(d)];
  return {d, checked_indices(index, d, size, "index_fill_")};
}

// ---------------------------------------------------------------- scatter / scatter_add

// For each element of index (row-major), its flat offset in a contiguous tensor of `sizes`:
// the element's own coordinates, with the one along `replaced` (if any) set to the index
// value. replaced -1: the element's coordinates unchanged (where src's element sits).
std::vector<size_t> element_offsets(const Shape& sizes, const Shape& index_sizes, int64_t replaced,
                                    const std::vector<int64_t>& idx) {
  const Shape strides = contiguous_strides(sizes);
  const int64_t count = shape_numel(index_sizes);
  std::vector<size_t> out(static_cast<size_t>(count));
  std::vector<int64_t> coord(index_sizes.size(), 0);
  for (int64_t j = 0; j < count; ++j) {
    int64_t offset = 0;
    for (size_t k = 0; k < coord.size(); ++k)
      offset += (static_cast<int64_t>(k) == replaced ? idx[static_cast<size_t>(j)] : coord[k]) * strides[k];
    out[static_cast<size_t>(j)] = static_cast<size_t>(offset);
    for (size_t k = coord.size(); k-- > 0;) {
      if (++coord[k] < index_sizes[k]) break;
      coord[k] = 0;
    }
  }
  return out;
}

// The checks of scatter / scatter_add (scatter_gather_dtype_check, scatter_shape_check,
// then the kernel's bounds), with PyTorch's messages; returns the wrapped dim.
int64_t check_scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& op) {
  require_host(self);
  require_host(index);
  require_host(src);
  refuse_meta_operands(self, {&index, &src});
  const int64_t d = kernels::wrap_dim(dim, self->dim());
  if (index->dtype() != DType::Int64) fail("type_error", op + "(): Expected dtype int64 for index");
  if (src && src->dtype() != self->dtype()) fail("dtype_mismatch", op + "(): Expected self.dtype to be equal to src.dtype");
  if (index->numel() == 0) return d;
  const int64_t rank = std::max<int64_t>(self->dim(), 1);
  if (std::max<int64_t>(index->dim(), 1) != rank)
    fail("shape_mismatch", "Index tensor must have the same number of dimensions as self tensor");
  if (src && std::max<int64_t>(src->dim(), 1) != rank)
    fail("shape_mismatch", "Index tensor must have the same number of dimensions as src tensor");
  auto size_at = [](const Tensor& t, size_t k) { return t->dim() == 0 ? 1 : t->sizes[k]; };
  bool fits = true;
  for (size_t k = 0; k < static_cast<size_t>(rank); ++k) {
    if (static_cast<int64_t>(k) != d && size_at(index, k) > size_at(self, k)) fits = false;
    if (src && size_at(index, k) > size_at(src, k)) fits = false;
  }
  if (!fits)
    fail("shape_mismatch", "Expected index " + shape_str(index->sizes) + " to be smaller than self " +
                               shape_str(self->sizes) + " apart from dimension " + std::to_string(d) +
                               (src ? " and to be smaller size than src " + shape_str(src->sizes) : ""));
  const int64_t size = size_at(self, static_cast<size_t>(d));
  for (int64_t i : index_values(index))
    if (i < 0 || i >= size)
      fail("index_out_of_range", "index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(d) +
                                     " with size " + std::to_string(size));
  return d;
}

Shape rank_sizes(const Tensor& t) { return t->dim() == 0 ? Shape{1} : t->sizes.vec(); }

// self's values with index's elements written (Write::Copy: src's element or `value`
// replaces, last one kept; Write::Add: src's element added).
std::vector<double> scatter_values(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, Write how,
                                   double value) {
  std::vector<double> x = to_values(self);
  const std::vector<int64_t> idx = index_values(index);
  const std::vector<size_t> at = element_offsets(rank_sizes(self), rank_sizes(index), d, idx);
  std::vector<double> s;
  std::vector<size_t> from;
  if (src) {
    s = to_values(src);
    from = element_offsets(rank_sizes(src), rank_sizes(index), -1, idx);
  }
  for (size_t j = 0; j < at.size(); ++j) {
    const double v = src ? s[from[j]] : value;
    x[at[j]] = how == Write::Add ? x[at[j]] + v : v;
  }
  return x;
}

// src's gradient grad.gather(dim, index). It has index's shape, and the engine's
// validate_outputs refuses it unless that is src's shape (measured: "Function
// ScatterBackward0 returned an invalid gradient at index 1 - got [2, 1] but expected shape
// compatible with [4, 2]").
void check_src_gradient_shape(const Node& n, const Tensor& index) {
  const auto& m = n.input_meta[1];
  if (index->sizes != m.sizes)
    fail("shape_mismatch", "Function " + n.name.str() + " returned an invalid gradient at index 1 - got " +
                               shape_str(index->sizes) + " but expected shape compatible with " + shape_str(m.sizes));
}

Tensor gather_for_src(const Node& n, const Tensor& g, int64_t d, const Tensor& index) {
  check_src_gradient_shape(n, index);
  const auto& m = n.input_meta[1];
  if (g->is_meta()) return empty_tensor(m.sizes, m.dtype, true);
  const std::vector<int64_t> idx = index_values(index);
  const std::vector<double> gv = to_values(g);
  const std::vector<size_t> from = element_offsets(rank_sizes(g), rank_sizes(index), d, idx);
  std::vector<double> out(from.size());
  for (size_t j = 0; j < from.size(); ++j) out[j] = gv[from[j]];
  return make_out(m.sizes, m.dtype, false, out);
}

int64_t scatter_dim(const Node& n) {
  return kernels::wrap_dim(n.attr("dim").i, static_cast<int64_t>(n.input_meta[0].sizes.size()));
}

// derivatives.yaml scatter.src: self: grad.scatter(dim, index, 0); src: grad.gather(dim,
// index). scatter.value: self only.
std::vector<Tensor> scatter_src_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  std::vector<Tensor> out(n.input_meta.size());
  const int64_t d = scatter_dim(n);
  if (n.should_compute_output(0)) {
    const auto& m = n.input_meta[0];
    out[0] = g[0]->is_meta() ? empty_tensor(m.sizes, m.dtype, true)
                             : make_out(m.sizes, m.dtype, false, scatter_values(g[0], d, index, nullptr, Write::Copy, 0));
  }
  if (out.size() > 1 && n.should_compute_output(1)) out[1] = gather_for_src(n, g[0], d, index);
  return out;
}

// derivatives.yaml scatter_add: self: grad; src: grad.gather(dim, index).
std::vector<Tensor> scatter_add_backward(Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = as_dtype(g[0], n.input_meta[0].dtype);
  if (n.should_compute_output(1)) out[1] = gather_for_src(n, g[0], scatter_dim(n), n.unpack("index"));
  return out;
}

// scatter's third argument: a tensor (src) or a number (value); returns src or null.
Tensor scatter_src(const Value& src, const std::string& op) {
  if (src.kind == Value::Kind::Tensor) return src.t;
  if (!src.is_number()) type_error(op + "(): argument 'src' must be Tensor, not " + type_name(src));
  return nullptr;
}

// ---------------------------------------------------------------- create_graph=True formulas
// The same derivatives.yaml formulas written with the autograd-aware ops, so a backward with
// create_graph=True records PyTorch's graph (measured: index_add's source gradient is
// MulBackward1 (alpha != 1) over ExpandBackward0 over IndexSelectBackward0; index_copy's self
// gradient IndexFillBackward0; index_fill's value gradient SumBackward0 over
// IndexSelectBackward0; scatter's self gradient ScatterBackward1, its src's GatherBackward0;
// self's gradient of index_add and scatter_add is the incoming gradient itself).

// grad.index_select(dim, index).expand_as(source), times alpha unless it is 1 (maybe_multiply).
Tensor selected_for_source(const Node& n, const Tensor& g, const Tensor& index, const Value& alpha) {
  const auto& m = n.input_meta[1];
  if (m.sizes.empty()) unsupported("create_graph=True through " + n.name.str() + " of a 0-d source");
  Tensor r = expand(index_select(g, n.attr("dim").i, index), m.sizes.vec());
  if (alpha.kind == Value::Kind::None || alpha.number() == 1.0) return r;
  return mul_scalar(r, alpha);
}

Value alpha_value(const AttrValue& a) {
  return a.kind == AttrValue::Kind::Double ? Value::real(a.d) : Value::integer(a.i);
}

std::vector<Tensor> index_add_dbackward(Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = g[0];
  if (n.should_compute_output(1)) out[1] = selected_for_source(n, g[0], n.unpack("index"), alpha_value(n.attr("alpha")));
  return out;
}

std::vector<Tensor> index_copy_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = index_fill(g[0], n.attr("dim").i, index, Value::real(0.0));
  if (n.should_compute_output(1)) out[1] = selected_for_source(n, g[0], index, Value());
  return out;
}

std::vector<Tensor> index_fill_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  std::vector<Tensor> out(n.input_meta.size());
  if (n.should_compute_output(0)) out[0] = index_fill(g[0], n.attr("dim").i, index, Value::real(0.0));
  if (out.size() > 1 && n.should_compute_output(1)) {
    // at::_unique(index): each index once (the order does not change the sum).
    std::vector<int64_t> idx = index_values(index);
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    Tensor unique = tensor_from_values({static_cast<int64_t>(idx.size())}, DType::Int64,
                                       std::vector<double>(idx.begin(), idx.end()));
    out[1] = sum(index_select(g[0], n.attr("dim").i, unique), std::nullopt, false);
  }
  return out;
}

std::vector<Tensor> scatter_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor index = n.unpack("index");
  std::vector<Tensor> out(n.input_meta.size());
  if (n.should_compute_output(0)) out[0] = scatter(g[0], n.attr("dim").i, index, Value::real(0.0));
  if (out.size() > 1 && n.should_compute_output(1)) {
    check_src_gradient_shape(n, index);  // the engine's check, before the op records anything
    out[1] = gather(g[0], n.attr("dim").i, index);
  }
  return out;
}

std::vector<Tensor> scatter_add_dbackward(Node& n, const std::vector<Tensor>& g) {
  std::vector<Tensor> out(2);
  if (n.should_compute_output(0)) out[0] = g[0];
  if (n.should_compute_output(1)) {
    Tensor index = n.unpack("index");
    check_src_gradient_shape(n, index);
    out[1] = gather(g[0], n.attr("dim").i, index);
  }
  return out;
}

// ---------------------------------------------------------------- the shared recording

// In-place: the checks every edit makes first (inplace_util.hpp), before the op's own.
void begin_inplace(const Tensor& self) {
  require_host(self);
  detail::check_no_internal_overlap(self);
  detail::check_inplace_allowed(self);
}

// The elements [first, last] of its storage a tensor reaches.
std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  int64_t last = t->offset;
  for (size_t k = 0; k < t->sizes.size(); ++k) last += (t->sizes[k] - 1) * t->strides[k];
  return {t->offset, last};
}

// at::assert_no_overlap(self, source) of these in-place kernels (measured: h.index_add_(0, i,
// h[:2]) and h.scatter_(0, ix, h) raise "unsupported operation: some elements of the input
// tensor and the written-to tensor refer to a single memory location"). PyTorch checks only
// dense layouts; agtrace refuses every overlap, since its kernel's order of reads and writes
// is not PyTorch's.
void check_no_overlap(const Tensor& self, const Tensor& source) {
  if (!source || source->storage != self->storage || self->numel() == 0 || source->numel() == 0) return;
  const auto a = element_span(self), b = element_span(source);
  if (a.second < b.first || b.second < a.first) return;
  throw ScenarioError("unsupported",
                      "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                      "single memory location. Please clone() the tensor before performing the operation.");
}

// Writes `values` into self, bumps its version once and rebases its history on `node`.
void finish_inplace(const Tensor& self, const std::vector<double>& values, const Shared<Node>& node) {
  if (!self->is_meta()) write_values(self, values);
  detail::bump(self);
  if (node) detail::record_history(self, node);
}

// The result of an out-of-place form: a new tensor of self's shape holding `values`.
Tensor new_result(const Tensor& self, const std::vector<double>& values) {
  return make_out(self->sizes, self->dtype(), self->is_meta(), values);
}

Shared<Node> index_add_node(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                            const Value& alpha) {
  if (!needs_grad({&self, &source})) return nullptr;
  auto node = make_node("IndexAddBackward0", index_add_backward, {self, source});
  node->differentiable_backward = index_add_dbackward;
  const bool for_source = rg(source);
  node->save_attr("alpha", number_attr(alpha));
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("index", index, for_source);
  node->save_input("source", source, for_source);
  node->save_attr("source_dim", AttrValue::integer(source->dim()));
  return node;
}

Shared<Node> index_copy_node(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  if (!needs_grad({&self, &source})) return nullptr;
  auto node = make_node("IndexCopyBackward0", index_copy_backward, {self, source});
  node->differentiable_backward = index_copy_dbackward;
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("index", index);
  node->save_input("source", source, rg(source));
  node->save_attr("source_dim", AttrValue::integer(source->dim()));
  return node;
}

Shared<Node> index_fill_node(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  if (value ? !needs_grad({&self, &value}) : !needs_grad({&self})) return nullptr;
  auto node = value ? make_node("IndexFillBackward1", index_fill_backward, {self, value})
                    : make_node("IndexFillBackward0", index_fill_backward, {self});
  node->differentiable_backward = index_fill_dbackward;
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("index", index);
  return node;
}

Shared<Node> scatter_node(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (src ? !needs_grad({&self, &src}) : !needs_grad({&self})) return nullptr;
  auto node = src ? make_node("ScatterBackward0", scatter_src_backward, {self, src})
                  : make_node("ScatterBackward1", scatter_src_backward, {self});
  node->differentiable_backward = scatter_dbackward;
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("index", index);
  return node;
}

Shared<Node> scatter_add_node(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (!needs_grad({&self, &src})) return nullptr;
  auto node = make_node("ScatterAddBackward0", scatter_add_backward, {self, src});
  node->differentiable_backward = scatter_add_dbackward;
  node->save_attr("dim", AttrValue::integer(dim, true));
  node->save_input("index", index, rg(src));
  return node;
}

Tensor out_of_place(const Tensor& self, const std::vector<double>& values, const Shared<Node>& node) {
  Tensor r = new_result(self, values);
  if (node) set_history(r, node);
  return r;
}

std::vector<double> add_or_copy(const Tensor& self, const SliceWrite& w, const Tensor& source, Write how, double alpha) {
  if (self->is_meta() || source->is_meta()) return {};
  return write_slices(self, w.dim, w.idx, source, how, alpha);
}

std::vector<double> filled(const Tensor& self, const SliceWrite& w, const Tensor& vt, const Value& value) {
  if (self->is_meta() || (vt && vt->is_meta())) return {};
  const double v = round_to_dtype(vt ? item(vt) : value.number(), self->dtype());
  return write_slices(self, w.dim, w.idx, nullptr, Write::Fill, v);
}

std::vector<double> scattered(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, Write how,
                              const Value& value) {
  if (self->is_meta() || index->is_meta() || (src && src->is_meta())) return {};
  return scatter_values(self, d, index, src, how, src ? 0.0 : round_to_dtype(value.number(), self->dtype()));
}

}  // namespace

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Value& alpha) {
  OpScope scope("index_add");
  const SliceWrite w = plan_source_write(self, dim, index, source, "index_add_");
  const std::vector<double> values = add_or_copy(self, w, source, Write::Add, alpha.number());
  return out_of_place(self, values, index_add_node(self, dim, index, source, alpha));
}

void index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Value& alpha) {
  OpScope scope("index_add_");
  begin_inplace(self);
  check_no_overlap(self, source);
  const SliceWrite w = plan_source_write(self, dim, index, source, "index_add_");
  auto node = index_add_node(self, dim, index, source, alpha);
  finish_inplace(self, add_or_copy(self, w, source, Write::Add, alpha.number()), node);
}

Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  OpScope scope("index_copy");
  const SliceWrite w = plan_source_write(self, dim, index, source, "index_copy_");
  const std::vector<double> values = add_or_copy(self, w, source, Write::Copy, 1.0);
  return out_of_place(self, values, index_copy_node(self, dim, index, source));
}

void index_copy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  OpScope scope("index_copy_");
  begin_inplace(self);
  check_no_overlap(self, source);
  const SliceWrite w = plan_source_write(self, dim, index, source, "index_copy_");
  auto node = index_copy_node(self, dim, index, source);
  finish_inplace(self, add_or_copy(self, w, source, Write::Copy, 1.0), node);
}

Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Value& value) {
  OpScope scope("index_fill");
  const Tensor vt = fill_value(value);
  const SliceWrite w = plan_fill(self, dim, index);
  const std::vector<double> values = filled(self, w, vt, value);
  return out_of_place(self, values, index_fill_node(self, dim, index, vt));
}

void index_fill_(const Tensor& self, int64_t dim, const Tensor& index, const Value& value) {
  OpScope scope("index_fill_");
  const Tensor vt = fill_value(value);
  begin_inplace(self);
  const SliceWrite w = plan_fill(self, dim, index);
  auto node = index_fill_node(self, dim, index, vt);
  finish_inplace(self, filled(self, w, vt, value), node);
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Value& src) {
  OpScope scope("scatter");
  const Tensor st = scatter_src(src, "scatter");
  const int64_t d = check_scatter(self, dim, index, st, "scatter");
  const std::vector<double> values = scattered(self, d, index, st, Write::Copy, src);
  return out_of_place(self, values, scatter_node(self, dim, index, st));
}

void scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Value& src) {
  OpScope scope("scatter_");
  const Tensor st = scatter_src(src, "scatter_");
  begin_inplace(self);
  check_no_overlap(self, st);
  const int64_t d = check_scatter(self, dim, index, st, "scatter");
  auto node = scatter_node(self, dim, index, st);
  finish_inplace(self, scattered(self, d, index, st, Write::Copy, src), node);
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  OpScope scope("scatter_add");
  const int64_t d = check_scatter(self, dim, index, src, "scatter");
  const std::vector<double> values = scattered(self, d, index, src, Write::Add, Value());
  return out_of_place(self, values, scatter_add_node(self, dim, index, src));
}

void scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  OpScope scope("scatter_add_");
  begin_inplace(self);
  check_no_overlap(self, src);
  const int64_t d = check_scatter(self, dim, index, src, "scatter");
  auto node = scatter_add_node(self, dim, index, src);
  finish_inplace(self, scattered(self, d, index, src, Write::Add, Value()), node);
}

}  // namespace agtrace::ops
