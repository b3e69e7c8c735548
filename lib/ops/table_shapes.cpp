// Op-table fragment: shape ops, indexing, concatenation, dtype conversion and the matmul
// family (see table.hpp). view/reshape/t/transpose/select/matmul/mm are in core_ops();
// matmul's entry there calls ops::matmul (linalg.cpp), which handles every rank pair.
#include "errors.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

namespace {

Value tensor_tuple(const std::vector<Tensor>& ts) {
  std::vector<Value> items;
  for (const Tensor& t : ts) items.push_back(T(t));
  return Value::tuple(std::move(items));
}

Value impl_permute(Args& a, Runtime&) { return T(permute(a.tensor("self"), a.shape("dims"))); }
Value impl_expand(Args& a, Runtime&) { return T(expand(a.tensor("self"), a.shape("size"))); }
// x.expand_as(y) is x.expand(y.size()) (measured: ExpandBackward0, self_sym_sizes of x).
Value impl_expand_as(Args& a, Runtime&) { return T(expand(a.tensor("self"), a.tensor("other")->sizes)); }
Value impl_view_as(Args& a, Runtime&) { return T(view(a.tensor("self"), a.tensor("other")->sizes)); }
Value impl_reshape_as(Args& a, Runtime&) { return T(reshape(a.tensor("self"), a.tensor("other")->sizes)); }
Value impl_swapaxes(Args& a, Runtime&) {
  return T(transpose(a.tensor("self"), a.integer("axis0"), a.integer("axis1")));
}
Value impl_movedim(Args& a, Runtime&) {
  auto as_dims = [&](const char* name) {
    auto d = a.dims(name);
    if (!d) type_error(short_fn(a.fn) + "(): argument '" + name + "' must be tuple of ints, not NoneType");
    return *d;
  };
  return T(movedim(a.tensor("self"), as_dims("source"), as_dims("destination")));
}
Value impl_unfold(Args& a, Runtime&) {
  return T(unfold(a.tensor("self"), a.integer("dimension"), a.integer("size"), a.integer("step")));
}
Value impl_narrow(Args& a, Runtime&) {
  // PyTorch also takes a 0-d integer tensor as start (narrow.Tensor); agtrace does not.
  if (a.get("start").kind == Value::Kind::Tensor)
    throw ScenarioError("unsupported", "narrow() with a tensor start");
  return T(narrow(a.tensor("self"), a.integer("dim"), a.integer("start"), a.integer("length")));
}
Value impl_unsqueeze(Args& a, Runtime&) { return T(unsqueeze(a.tensor("self"), a.integer("dim"))); }
Value impl_squeeze(Args& a, Runtime&) {
  a.reject_explicit_none_dim("dim");
  Tensor x = a.tensor("self");
  return T(a.given("dim") ? squeeze(x, a.integer("dim")) : squeeze(x));
}
Value impl_flatten(Args& a, Runtime&) {
  return T(flatten(a.tensor("self"), a.integer("start_dim"), a.integer("end_dim")));
}

// torch.split(tensor, split_size_or_sections, dim) and Tensor.split(self, split_size, dim)
// are Python functions with their own parameter names (measured: each refuses the other's).
Value impl_split(Args& a, Runtime&) {
  Tensor x = a.tensor((*a.params)[0].name);
  const Value& s = a.get((*a.params)[1].name);
  const int64_t dim = a.integer("dim");
  if (s.kind == Value::Kind::Int) return tensor_tuple(split(x, s.i, dim));
  if (s.kind == Value::Kind::Tuple || s.kind == Value::Kind::List) {
    std::vector<int64_t> sizes;
    for (const Value& v : s.items) {
      if (v.kind != Value::Kind::Int)
        type_error("split_with_sizes(): argument 'split_sizes' must be tuple of ints, but found element of type " +
                   type_name(v));
      sizes.push_back(v.i);
    }
    return tensor_tuple(split_with_sizes(x, sizes, dim));
  }
  type_error("split(): argument 'split_size' must be int or list of ints, not " + type_name(s));
}
Value impl_chunk(Args& a, Runtime&) {
  return tensor_tuple(chunk(a.tensor("self"), a.integer("chunks"), a.integer("dim")));
}
Value impl_unbind(Args& a, Runtime&) { return tensor_tuple(unbind(a.tensor("self"), a.integer("dim"))); }

Value impl_index_select(Args& a, Runtime&) {
  return T(index_select(a.tensor("self"), a.integer("dim"), a.tensor("index")));
}
Value impl_cat(Args& a, Runtime&) { return T(cat(a.tensors("tensors"), a.integer("dim"))); }
Value impl_stack(Args& a, Runtime&) { return T(stack(a.tensors("tensors"), a.integer("dim"))); }

// x moved to `device` (and cast to `dtype`): one _to_copy, ToCopyBackward0.
Tensor move_to(const Tensor& x, DType dtype, const std::string& device, bool copy) {
  const std::string from = device_name(x);
  if (device != from && (from == "meta" || device == "meta"))
    // Measured (1.13): a meta tensor's .to('cpu') raises "Cannot copy out of meta tensor;
    // no data!"; .to('meta') of a real tensor works in PyTorch but agtrace runs a whole
    // program on meta or not at all.
    throw ScenarioError("unsupported", "to('" + device + "'): moving a tensor between the meta device and " +
                                           (from == "meta" ? device : from) + " is not supported");
  return to_device(x, dtype, device == "meta" ? x->storage->device.str() : device, copy);
}

// x.to(dtype), x.to(other), x.to('cuda'), x.to('cpu', dtype), x.to(device=..., dtype=...),
// with copy=.
Value impl_to(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  std::string device = device_name(x);
  DType target = x->dtype();
  for (const Value& v : a.get("args").items) {
    if (v.kind == Value::Kind::DType) {
      target = v.dtype;
    } else if (v.kind == Value::Kind::Tensor) {  // x.to(other): other's dtype and device
      target = v.t->dtype();
      device = device_name(v.t);
    } else if (v.kind == Value::Kind::Str) {
      device = parse_device(v.s);
    } else {
      type_error("to() received an invalid combination of arguments - got (" + type_name(v) + ")");
    }
  }
  if (auto d = device_argument(a)) device = *d;
  if (a.given("dtype")) {
    const Value& d = a.get("dtype");
    if (d.kind != Value::Kind::DType) type_error("to(): argument 'dtype' must be torch.dtype, not " + type_name(d));
    target = d.dtype;
  }
  return T(move_to(x, target, device, a.flag("copy")));
}

// x.cuda() and x.cpu(): Tensor.to(device), the same object when already there.
Value impl_cuda(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  return T(move_to(x, x->dtype(), "cuda", false));
}
Value impl_cpu(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  return T(move_to(x, x->dtype(), "cpu", false));
}

template <DType D>
Value impl_cast(Args& a, Runtime&) {
  return T(to_dtype(a.tensor("self"), D));
}

Value impl_dot(Args& a, Runtime&) { return T(dot(a.tensor("self"), a.tensor("tensor"))); }
Value impl_mv(Args& a, Runtime&) { return T(mv(a.tensor("self"), a.tensor("vec"))); }
Value impl_bmm(Args& a, Runtime&) { return T(bmm(a.tensor("self"), a.tensor("mat2"))); }
Value impl_addmm(Args& a, Runtime&) {
  const Value& beta = a.get("beta");
  const Value& alpha = a.get("alpha");
  if (!beta.is_number() || !alpha.is_number()) type_error("addmm(): argument 'beta' and 'alpha' must be numbers");
  return T(addmm(a.tensor("self"), a.tensor("mat1"), a.tensor("mat2"), beta, alpha));
}
Value impl_linear(Args& a, Runtime&) {
  Tensor bias = a.given("bias") ? a.tensor("bias") : nullptr;
  return T(linear(a.tensor("input"), a.tensor("weight"), bias));
}

}  // namespace

std::vector<OpEntry> shape_ops() {
  const std::string none = "-";
  return {
      // ---- views
      {"permute", {"torch.permute", "Tensor.permute"}, "(self, *dims)", "view", "PermuteBackward0",
       "dims (as passed; -1 reads 2**64-1)", impl_permute, {}},
      {"expand", {"Tensor.expand"}, "(self, *size)", "view", "ExpandBackward0",
       "self_sym_sizes (a node even when nothing broadcasts; -1 keeps a size)", impl_expand, {}},
      {"expand_as", {"Tensor.expand_as"}, "(self, other)", "view", "ExpandBackward0", "as expand(other.size())",
       impl_expand_as, {}},
      {"view_as", {"Tensor.view_as"}, "(self, other)", "view", "ViewBackward0", "as view(other.size())",
       impl_view_as, {}},
      {"reshape_as", {"Tensor.reshape_as"}, "(self, other)", "view",
       "ReshapeAliasBackward0 / UnsafeViewBackward0 over CloneBackward0", "as reshape(other.size())", impl_reshape_as,
       {}},
      {"swapaxes", {"torch.swapaxes", "Tensor.swapaxes"}, "(self, axis0, axis1)", "view", "TransposeBackward0",
       "as transpose: dim0, dim1 as passed", impl_swapaxes, {}},
      {"swapdims", {"torch.swapdims", "Tensor.swapdims"}, "(self, axis0, axis1)", "view", "TransposeBackward0",
       "as transpose: dim0, dim1 as passed", impl_swapaxes, {}},
      {"movedim", {"torch.movedim", "Tensor.movedim", "torch.moveaxis", "Tensor.moveaxis"},
       "(self, source, destination)", "view", "PermuteBackward0", "dims (the permutation computed, non-negative)",
       impl_movedim, {}},
      {"narrow", {"torch.narrow", "Tensor.narrow"}, "(self, dim, start, length)", "view", "SliceBackward0",
       "as slice(dim, start, start + length): dim as passed, start wrapped, end, step 1, self_sym_sizes", impl_narrow,
       {}},
      {"unfold", {"Tensor.unfold"}, "(self, dimension, size, step)", "view", "UnfoldBackward0",
       "dimension (as passed), self_sizes, size, step", impl_unfold, {}},
      {"T", {"x.T"}, "(self)", "view", "PermuteBackward0",
       "dims (n-1, ..., 0), on every rank (2-D too); other ranks than 0 and 2 warn", nullptr, {}},
      {"mT", {"x.mT"}, "(self)", "view", "TransposeBackward0", "dim0 -2, dim1 -1 (read back as uint64)", nullptr, {}},
      {"unsqueeze", {"torch.unsqueeze", "Tensor.unsqueeze"}, "(self, dim)", "view", "UnsqueezeBackward0", "dim",
       impl_unsqueeze, {}},
      {"squeeze", {"torch.squeeze", "Tensor.squeeze"}, "(self, dim=None)", "view", "SqueezeBackward1 / SqueezeBackward0",
       "squeeze(dim): dim, self_sizes; squeeze(): self_sizes", impl_squeeze, {}},
      {"flatten", {"torch.flatten", "Tensor.flatten"}, "(self, start_dim=0, end_dim=-1)", "view",
       "ReshapeAliasBackward0 / UnsafeViewBackward0 over CloneBackward0",
       "self_sym_sizes; copies when no view fits; start_dim == end_dim returns the input itself", impl_flatten, {}},
      {"split", {"torch.split"}, "(tensor, split_size_or_sections, dim=0)", "view",
       "SplitBackward0 / SplitWithSizesBackward0",
       "one node for all the views: dim, self_sizes, split_size (int) or split_sizes (list)", impl_split, {}},
      {"split", {"Tensor.split"}, "(self, split_size, dim=0)", "view", "SplitBackward0 / SplitWithSizesBackward0",
       "as torch.split", impl_split, {}},
      {"chunk", {"torch.chunk", "Tensor.chunk"}, "(self, chunks, dim=0)", "view", "SplitBackward0",
       "split(ceil(size / chunks)): dim, self_sizes, split_size", impl_chunk, {}},
      {"unbind", {"torch.unbind", "Tensor.unbind"}, "(self, dim=0)", "view", "UnbindBackward0",
       "dim; one node for all the views", impl_unbind, {}},
      // ---- indexing and concatenation (new storage)
      {"index_select", {"torch.index_select", "Tensor.index_select"}, "(self, dim, index)", "indexing",
       "IndexSelectBackward0", "dim, index (the same object), self_sizes", impl_index_select, {}},
      {"index", {"x[idx]"}, "(self, indices)", "indexing", "IndexBackward0",
       "indices (a list holding the int64 index tensor or bool mask, the same object), self_sizes; a 0-d index "
       "selects",
       nullptr, {}},
      {"cat", {"torch.cat", "torch.concat"}, "(tensors, dim=0)", "shape", "CatBackward0",
       "dim only; no tensors (dtype promoted over the inputs)", impl_cat, {}},
      {"stack", {"torch.stack"}, "(tensors, dim=0)", "shape", "StackBackward0", "dim only; no tensors", impl_stack, {}},
      // ---- dtype conversion
      {"to", {"Tensor.to"}, "(self, *args, device=None, dtype=None, non_blocking=False, copy=False)", "conversion",
       "ToCopyBackward0",
       "nothing; the same object (no node) when neither dtype nor device changes; no node for an integer result",
       impl_to, {}},
      {"cuda", {"Tensor.cuda"}, "(self)", "conversion", "ToCopyBackward0",
       "as to('cuda'): nothing; the same object on cuda", impl_cuda, {}},
      {"cpu", {"Tensor.cpu"}, "(self)", "conversion", "ToCopyBackward0",
       "as to('cpu'): nothing; the same object on the CPU", impl_cpu, {}},
      {"float", {"Tensor.float"}, "(self)", "conversion", "ToCopyBackward0", "as to(torch.float32)",
       impl_cast<DType::Float32>, {}},
      {"double", {"Tensor.double"}, "(self)", "conversion", "ToCopyBackward0", "as to(torch.float64)",
       impl_cast<DType::Float64>, {}},
      {"half", {"Tensor.half"}, "(self)", "conversion", "ToCopyBackward0", "as to(torch.float16)", impl_cast<DType::Float16>,
       {}},
      {"bfloat16", {"Tensor.bfloat16"}, "(self)", "conversion", "ToCopyBackward0", "as to(torch.bfloat16)",
       impl_cast<DType::BFloat16>, {}},
      {"long", {"Tensor.long"}, "(self)", "conversion", none, "as to(torch.int64): not differentiable",
       impl_cast<DType::Int64>, {}},
      // ---- the matmul family (matmul and mm are in core_ops)
      {"dot", {"torch.dot", "Tensor.dot"}, "(self, tensor)", "linalg", "DotBackward0",
       "self if tensor requires grad; tensor if self requires grad", impl_dot, {}},
      {"mv", {"torch.mv", "Tensor.mv"}, "(self, vec)", "linalg", "MvBackward0",
       "self if vec requires grad; vec if self requires grad", impl_mv, {}},
      {"bmm", {"torch.bmm", "Tensor.bmm"}, "(self, mat2)", "linalg", "BmmBackward0",
       "self if mat2 requires grad; mat2 if self requires grad", impl_bmm, {}},
      {"addmm", {"torch.addmm", "Tensor.addmm"}, "(self, mat1, mat2, *, beta=1, alpha=1)", "linalg", "AddmmBackward0",
       "alpha, beta; mat1 if mat2 requires grad, mat2 if mat1 requires grad; sizes; strides of an operand that "
       "requires grad",
       impl_addmm, {}},
      {"linear", {"F.linear"}, "(input, weight, bias=None)", "linalg",
       "AddmmBackward0 over TBackward0 / MmBackward0 / ViewBackward0 over AddmmBackward0",
       "as addmm (mat2 is W.t(), a view of W) for 2-D input with bias; 3-D contiguous input: views around "
       "addmm; else matmul(x, W.t()) and an in-place add of the bias",
       impl_linear, {}},
  };
}

}  // namespace agtrace::ops
