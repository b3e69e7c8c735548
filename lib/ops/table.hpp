// The one table of every callable a scenario statement may use: tensor operations,
// in-place edits, views, autograd entry points and introspection helpers. Each entry
// holds its Python spellings, signature, backward node and what it saves, and the
// function that runs it; `agtrace ops` prints this same table, so the documentation
// cannot drift from the code (design: "One op, one place").
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "interp/value.hpp"
#include "scenario/random.hpp"

namespace agtrace::ops {

struct Param {
  std::string name;
  bool has_default = false;
  Value default_value;
  bool keyword_only = false;
  bool varargs = false;  // *shape: collects the remaining positional arguments
  // An ATen int list written as varargs (view's *size, reshape's *shape, permute's *dims):
  // PyTorch's argument parser also takes it by its name, as one sequence.
  bool keyword_list = false;
};

// Services of the interpreter an entry may need (backward, printing, names).
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual void print_line(const std::string& line) = 0;
  // Runs backward / autograd.grad; records the walk of each root first.
  // `inputs` without `accumulate_inputs`: autograd.grad, the gradients are returned; with it:
  // backward(inputs=...), only those tensors' .grad are filled. `argument_error`, if given, is
  // raised right after that record, as the backward phase: an error PyTorch finds inside
  // torch.autograd.grad (its grad_outputs) once the call has begun.
  virtual Value backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                         bool create_graph, const std::vector<Tensor>* inputs, bool allow_unused,
                         bool accumulate_inputs = false, const ScenarioError* argument_error = nullptr) = 0;
  virtual std::string device() const = 0;
  // The run-wide generator for random operations (dropout masks), seeded with the
  // scenario seed XOR fnv1a64("__program__"); see lib/scenario/random.hpp.
  virtual SplitMix64& generator() = 0;
};

struct Args {
  std::string fn;  // the spelling used, for messages: "mm", "Tensor.view"
  const std::vector<Param>* params = nullptr;  // the entry's (the op table outlives every call)
  std::vector<std::optional<Value>> values;
  // Bit k: param k was given in the call (not filled from its default). A mask, not a
  // vector<bool> (an allocation per call, issue #6): an op has at most kMaxParams params.
  static constexpr size_t kMaxParams = 64;
  uint64_t written = 0;

  const Value& get(const std::string& name) const;
  bool given(const std::string& name) const;  // passed explicitly or has a non-None value
  // Written in the call, even as an explicit None: PyTorch's dim=None overloads differ from
  // an omitted dim for some ops (x.max(dim=None) raises, x.max() does not).
  bool passed(const std::string& name) const;
  // Raises PyTorch's error for a dim written as None where only a named/int dim is accepted.
  void reject_explicit_none_dim(const std::string& name) const;
  Tensor tensor(const std::string& name) const;          // must be a tensor
  Tensor tensor_or_number(const std::string& name) const; // numbers become wrapped 0-d tensors
  double number(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  bool flag(const std::string& name) const;
  std::optional<std::vector<int64_t>> dims(const std::string& name) const;  // int, tuple or None
  std::vector<int64_t> shape(const std::string& name) const;  // varargs or one tuple/list/Size
  std::vector<Tensor> tensors(const std::string& name) const;  // a tensor or a sequence of them
};

using Impl = Value (*)(Args& args, Runtime& rt);

struct OpEntry {
  std::string name;                    // canonical name: "mm"
  std::vector<std::string> spellings;  // "torch.mm", "Tensor.mm", "@"
  std::string signature;               // "(self, mat2)"
  std::string category;                // math, pointwise, reduction, linalg, view, inplace, autograd, creation, introspection
  std::string node;                    // backward node PyTorch records ("-" for none)
  std::string saves;                   // what that node saves, and when
  Impl impl = nullptr;
  std::vector<Param> params;           // parsed from signature
};

const std::vector<OpEntry>& op_table();

// The table is assembled from fragments, one per family of operations, each in its own
// file (table.cpp lists them in kFragments).
using TableFragment = std::vector<OpEntry> (*)();
std::vector<OpEntry> core_ops();        // table.cpp
std::vector<OpEntry> activation_ops();  // table_activations.cpp: pointwise math, activations, reductions, losses
std::vector<OpEntry> shape_ops();       // table_shapes.cpp: shape ops, indexing, matmul family
std::vector<OpEntry> nn_ops();          // table_nn.cpp: layer_norm, batch_norm, dropout, embedding, conv2d, pooling
std::vector<OpEntry> rounding_trig_ops(); // rounding_trig.cpp: floor ceil round trunc frac sign, sinh cosh tan atan asin acos, log2 log10 exp2, erf erfc erfinv
std::vector<OpEntry> more_ops();        // table_more.cpp: min, argmax, cumsum, prod, logsumexp, more activations
std::vector<OpEntry> autograd_api_ops(); // interp/autograd_api.cpp: backward, retain_grad, grad mode, allclose, tolist
std::vector<OpEntry> creation_ops();     // creation.cpp: arange, full, empty, new_*, *_like, random creators
std::vector<OpEntry> index_ops();        // table_index.cpp: index_add/copy/fill, scatter(_add), median, kthvalue
std::vector<OpEntry> shapes_extra_ops();  // shapes_extra.cpp: diagonal, diag, atleast_nd, h/v/dstack, broadcast_tensors, var_mean, cumprod, isnan, type, Size, eye, unsafe splits, einsum
std::vector<OpEntry> binary_more_ops();  // table_binary.cpp: maximum, fmax, atan2, remainder, lerp, addcmul, dist, addmv, addbmm, ...
std::vector<OpEntry> activation_inplace_ops(); // activations_inplace.cpp: elu_, leaky_relu_, hardtanh_, threshold_, celu, hardswish, mish, rrelu
std::vector<OpEntry> random_inplace_ops();     // random_inplace.cpp: uniform_, normal_, bernoulli_, random_, torch.bernoulli
std::vector<OpEntry> model_ops();              // table_model.cpp: adaptive_avg_pool2d/1d, adaptive_max_pool2d, avg_pool2d/1d, group_norm, interpolate, type_as
// Looks up "Tensor.<method>", "torch.<fn>", "F.<fn>", "torch.autograd.<fn>" or a builtin.
const OpEntry* find_op(const std::string& spelling);
// The parameter a keyword names, as PyTorch's argument parser reads it: NumPy's spellings
// (axis, keepdims, x / a / x1, x2) and, for a torch.* function, `input` for the tensor
// the table calls `self`. Other keywords are returned as written.
std::string keyword_param(const OpEntry& entry, const std::string& spelling, bool method, const std::string& kw);
// All spellings, for "did you mean" suggestions.
std::vector<std::string> all_spellings();

}  // namespace agtrace::ops
