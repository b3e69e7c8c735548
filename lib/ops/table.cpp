#include "ops/table.hpp"

#include <map>
#include <unordered_map>

#include "autograd/grad_mode.hpp"
#include "ops/autocast_policy.hpp"
#include "errors.hpp"
#include "ops/indexing.hpp"
#include "ops/ops.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/kernels.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

void type_error(const std::string& msg) { throw ScenarioError("type_error", msg); }

std::string device_name(const Tensor& t) { return t->is_meta() ? "meta" : t->storage->device; }

// agtrace runs one GPU, device 0 (PyTorch's 'cuda' means the current device, 0 unless
// changed). A misspelled device is PyTorch 1.13's RuntimeError from c10::Device's parser,
// word for word (measured); agtrace files it as type_error (a malformed argument).
std::string parse_device(const std::string& spelled) {
  if (spelled == "cpu" || spelled == "cuda" || spelled == "meta") return spelled;
  if (spelled == "cuda:0") return "cuda";
  if (spelled.rfind("cuda:", 0) == 0)
    throw ScenarioError("unsupported", "device '" + spelled + "': agtrace runs one GPU, cuda:0");
  throw ScenarioError("type_error",
                      "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, ort, xla, "
                      "lazy, vulkan, mps, meta, hpu, privateuseone device type at start of device string: " +
                          spelled);
}

std::optional<std::string> device_argument(const Args& a) {
  if (!a.given("device")) return std::nullopt;
  const Value& d = a.get("device");
  if (d.kind == Value::Kind::None) return std::nullopt;
  // torch.device accepts an ordinal alone: device=0 is cuda:0.
  if (d.kind == Value::Kind::Int) return parse_device("cuda:" + std::to_string(d.i));
  if (d.kind != Value::Kind::Str)
    type_error(short_fn(a.fn) + "(): argument 'device' must be torch.device, not " + type_name(d));
  return parse_device(d.s);
}

std::string short_fn(const std::string& fn) {
  auto dot = fn.rfind('.');
  return dot == std::string::npos ? fn : fn.substr(dot + 1);
}

// ---------------------------------------------------------------- argument access

const Value& Args::get(const std::string& name) const {
  static const Value none;
  for (size_t i = 0; params && i < params->size(); ++i)
    if ((*params)[i].name == name) return values[i] ? *values[i] : none;
  return none;
}

bool Args::given(const std::string& name) const { return get(name).kind != Value::Kind::None; }

bool Args::passed(const std::string& name) const {
  for (size_t i = 0; params && i < params->size(); ++i)
    if ((*params)[i].name == name) return i < kMaxParams && ((written >> i) & 1) != 0;
  return false;
}

void Args::reject_explicit_none_dim(const std::string& name) const {
  // PyTorch 1.13 binds an explicit None to the Dimname overload and raises this RuntimeError.
  if (passed(name) && get(name).kind == Value::Kind::None)
    type_error("Please look up dimensions by name, got: name = None.");
}

Tensor Args::tensor(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind != Value::Kind::Tensor)
    type_error(short_fn(fn) + "(): argument '" + name + "' must be Tensor, not " + type_name(v));
  return v.t;
}

Tensor Args::tensor_or_number(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind == Value::Kind::Tensor) return v.t;
  if (v.is_number()) return wrap_number(v);
  type_error(short_fn(fn) + "(): argument '" + name + "' must be Tensor or a number, not " + type_name(v));
}

double Args::number(const std::string& name) const {
  const Value& v = get(name);
  if (!v.is_number()) type_error(short_fn(fn) + "(): argument '" + name + "' must be a number, not " + type_name(v));
  return v.number();
}

int64_t Args::integer(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind != Value::Kind::Int && v.kind != Value::Kind::Bool)
    type_error(short_fn(fn) + "(): argument '" + name + "' must be int, not " + type_name(v));
  return v.kind == Value::Kind::Int ? v.i : (v.b ? 1 : 0);
}

bool Args::flag(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind == Value::Kind::None) return false;
  if (v.kind != Value::Kind::Bool && v.kind != Value::Kind::Int)
    type_error(short_fn(fn) + "(): argument '" + name + "' must be bool, not " + type_name(v));
  return v.kind == Value::Kind::Bool ? v.b : v.i != 0;
}

static std::vector<int64_t> int_sequence(const Value& v, const std::string& fn, const std::string& name) {
  std::vector<int64_t> out;
  if (v.kind == Value::Kind::Size) return v.size;
  for (const Value& item : v.items) {
    if (item.kind != Value::Kind::Int)
      type_error(short_fn(fn) + "(): argument '" + name + "' must be a tuple of ints, but found element of type " +
                 type_name(item));
    out.push_back(item.i);
  }
  return out;
}

std::optional<std::vector<int64_t>> Args::dims(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind == Value::Kind::None) return std::nullopt;
  if (v.kind == Value::Kind::Int) return std::vector<int64_t>{v.i};
  if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) return int_sequence(v, fn, name);
  type_error(short_fn(fn) + "(): argument '" + name + "' must be int or tuple of ints, not " + type_name(v));
}

std::vector<int64_t> Args::shape(const std::string& name) const {
  const Value& v = get(name);
  // view(2, 3) and view((2, 3)) both work, as in PyTorch.
  if (v.kind == Value::Kind::Tuple && v.items.size() == 1 &&
      (v.items[0].kind == Value::Kind::Tuple || v.items[0].kind == Value::Kind::List ||
       v.items[0].kind == Value::Kind::Size))
    return int_sequence(v.items[0], fn, name);
  if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List || v.kind == Value::Kind::Size)
    return int_sequence(v, fn, name);
  if (v.kind == Value::Kind::Int) return {v.i};
  type_error(short_fn(fn) + "(): argument '" + name + "' must be tuple of ints, not " + type_name(v));
}

std::vector<Tensor> Args::tensors(const std::string& name) const {
  const Value& v = get(name);
  if (v.kind == Value::Kind::Tensor) return {v.t};
  std::vector<Tensor> out;
  if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) {
    for (const Value& item : v.items) {
      if (item.kind != Value::Kind::Tensor)
        type_error(short_fn(fn) + "(): argument '" + name + "' must be a sequence of Tensors, found " + type_name(item));
      out.push_back(item.t);
    }
    return out;
  }
  type_error(short_fn(fn) + "(): argument '" + name + "' must be Tensor or a sequence of Tensors, not " + type_name(v));
}

bool retain_flag(const Args& a, bool create_graph) {
  // retain_graph defaults to create_graph (torch.autograd.backward).
  return a.given("retain_graph") ? a.flag("retain_graph") : create_graph;
}

// ---------------------------------------------------------------- implementations

namespace {

// torch.add / sub / mul / div also take a Python number as self (PythonArgParser's
// should_allow_numbers_as_tensors), wrapped as a 0-d tensor: torch.mul(2, x) is MulBackward0
// with next_functions ((None, 0), (x, 0)) and _saved_self tensor(2) (measured; `2 * x` is
// x.__rmul__(2) instead). Two numbers make a plain tensor, which is not modelled.
Tensor arith_self(const Args& a) {
  if (a.get("self").is_number() && a.get("other").kind != Value::Kind::Tensor)
    throw ScenarioError("unsupported", short_fn(a.fn) + "() of two numbers is not supported");
  return a.tensor_or_number("self");
}

// Python number or tensor operand of an arithmetic op.
Value binary_dispatch(Args& a, Tensor (*f)(const Tensor&, const Tensor&)) {
  return T(f(arith_self(a), a.tensor_or_number("other")));
}

Value impl_add(Args& a, Runtime&) {
  Value alpha = a.given("alpha") ? a.get("alpha") : Value::integer(1);
  return T(add(arith_self(a), a.tensor_or_number("other"), alpha));
}
Value impl_sub(Args& a, Runtime&) {
  Value alpha = a.given("alpha") ? a.get("alpha") : Value::integer(1);
  return T(sub(arith_self(a), a.tensor_or_number("other"), alpha));
}
Value impl_mul(Args& a, Runtime&) { return binary_dispatch(a, mul); }
Value impl_div(Args& a, Runtime&) { return binary_dispatch(a, div); }
Value impl_neg(Args& a, Runtime&) { return T(neg(a.tensor("self"))); }
Value impl_pow(Args& a, Runtime&) {
  const Value& e = a.get("exponent");
  if (a.get("self").is_number() && e.kind == Value::Kind::Tensor) return T(pow_number_base(a.get("self"), e.t));
  if (e.kind == Value::Kind::Tensor) return T(pow_tensor(a.tensor("self"), e.t));
  if (!e.is_number()) type_error("pow(): argument 'exponent' must be Tensor or Number, not " + type_name(e));
  return T(pow_scalar(a.tensor("self"), e));
}
Value impl_reciprocal(Args& a, Runtime&) { return T(reciprocal(a.tensor("self"))); }
template <const char* Op>
Value impl_compare(Args& a, Runtime&) {
  return T(compare(a.tensor("self"), a.tensor_or_number("other"), Op));
}
constexpr char kEq[] = "eq", kNe[] = "ne", kLt[] = "lt", kLe[] = "le", kGt[] = "gt", kGe[] = "ge";

Value impl_exp(Args& a, Runtime&) { return T(exp(a.tensor("self"))); }
Value impl_log(Args& a, Runtime&) { return T(log(a.tensor("self"))); }
Value impl_sqrt(Args& a, Runtime&) { return T(sqrt(a.tensor("self"))); }
Value impl_tanh(Args& a, Runtime&) { return T(tanh(a.tensor("self"))); }
Value impl_sigmoid(Args& a, Runtime&) { return T(sigmoid(a.tensor("self"))); }
Value impl_relu(Args& a, Runtime&) {
  Tensor x = a.tensor("self");
  if (a.flag("inplace")) {
    relu_(x);
    return T(x);
  }
  return T(relu(x));
}

std::optional<DType> optional_dtype(const Args& a) {
  const Value& d = a.get("dtype");
  if (d.kind == Value::Kind::None) return std::nullopt;
  if (d.kind != Value::Kind::DType) type_error(short_fn(a.fn) + "(): argument 'dtype' must be torch.dtype, not " + type_name(d));
  return d.dtype;
}
Value impl_sum(Args& a, Runtime&) {
  return T(sum(a.tensor("self"), a.dims("dim"), a.flag("keepdim"), optional_dtype(a)));
}
Value impl_mean(Args& a, Runtime&) {
  return T(mean(a.tensor("self"), a.dims("dim"), a.flag("keepdim"), optional_dtype(a)));
}
Value impl_mm(Args& a, Runtime&) { return T(mm(a.tensor("self"), a.tensor("mat2"))); }
Value impl_matmul(Args& a, Runtime&) { return T(matmul(a.tensor("self"), a.tensor("other"))); }

Value impl_view(Args& a, Runtime&) {
  const Value& s = a.get("size");
  if (s.kind == Value::Kind::Tuple && s.items.size() == 1 && s.items[0].kind == Value::Kind::DType)
    throw ScenarioError("unsupported", "view(dtype) is not supported");
  return T(view(a.tensor("self"), a.shape("size")));
}
Value impl_reshape(Args& a, Runtime&) { return T(reshape(a.tensor("self"), a.shape("shape"))); }
Value impl_t(Args& a, Runtime&) { return T(t(a.tensor("self"))); }
Value impl_transpose(Args& a, Runtime&) {
  return T(transpose(a.tensor("self"), a.integer("dim0"), a.integer("dim1")));
}
Value impl_select(Args& a, Runtime&) { return T(select(a.tensor("self"), a.integer("dim"), a.integer("index"))); }
Value impl_clone(Args& a, Runtime&) { return T(clone(a.tensor("self"))); }
Value impl_detach(Args& a, Runtime&) { return T(detach(a.tensor("self"))); }
Value impl_contiguous(Args& a, Runtime&) { return T(contiguous(a.tensor("self"))); }

Value impl_add_(Args& a, Runtime&) {
  Value alpha = a.given("alpha") ? a.get("alpha") : Value::integer(1);
  add_(a.tensor("self"), a.tensor_or_number("other"), alpha);
  return a.get("self");
}
Value impl_sub_(Args& a, Runtime&) {
  Value alpha = a.given("alpha") ? a.get("alpha") : Value::integer(1);
  sub_(a.tensor("self"), a.tensor_or_number("other"), alpha);
  return a.get("self");
}
Value impl_mul_(Args& a, Runtime&) {
  mul_(a.tensor("self"), a.tensor_or_number("other"));
  return a.get("self");
}
Value impl_div_(Args& a, Runtime&) {
  div_(a.tensor("self"), a.tensor_or_number("other"));
  return a.get("self");
}
Value impl_relu_(Args& a, Runtime&) { relu_(a.tensor("self")); return a.get("self"); }
Value impl_exp_(Args& a, Runtime&) { exp_(a.tensor("self")); return a.get("self"); }
Value impl_sigmoid_(Args& a, Runtime&) { sigmoid_(a.tensor("self")); return a.get("self"); }
Value impl_tanh_(Args& a, Runtime&) { tanh_(a.tensor("self")); return a.get("self"); }
Value impl_zero_(Args& a, Runtime&) { zero_(a.tensor("self")); return a.get("self"); }
// x.sin_(), torch.sin_(x), ...: the op's name is the spelling's last part less its "_".
Value impl_unary_inplace(Args& a, Runtime&) {
  const std::string name = a.fn.substr(a.fn.rfind('.') + 1);
  unary_inplace_named(a.tensor("self"), name.substr(0, name.size() - 1));
  return a.get("self");
}
Value impl_pow_(Args& a, Runtime&) {
  const Value& e = a.get("exponent");
  if (e.kind != Value::Kind::Tensor && !e.is_number())
    throw ScenarioError("type_error", "pow_() received an invalid combination of arguments - got (" + type_name(e) + ")");
  pow_(a.tensor("self"), e);
  return a.get("self");
}
Value impl_t_(Args& a, Runtime&) {
  t_(a.tensor("self"));
  return a.get("self");
}
Value impl_transpose_(Args& a, Runtime&) {
  transpose_(a.tensor("self"), a.integer("dim0"), a.integer("dim1"));
  return a.get("self");
}
Value impl_unsqueeze_(Args& a, Runtime&) {
  unsqueeze_(a.tensor("self"), a.integer("dim"));
  return a.get("self");
}
Value impl_squeeze_(Args& a, Runtime&) {
  std::optional<int64_t> dim;
  if (a.given("dim")) dim = a.integer("dim");
  squeeze_(a.tensor("self"), dim);
  return a.get("self");
}
Value impl_detach_(Args& a, Runtime&) {
  detach_(a.tensor("self"));
  return a.get("self");
}
Value impl_copy_(Args& a, Runtime&) {
  copy_(a.tensor("self"), a.tensor("src"));
  return a.get("self");
}
Value impl_fill_(Args& a, Runtime&) {
  const Value& v = a.get("value");
  if (v.kind == Value::Kind::Tensor)
    fill_tensor_(a.tensor("self"), v.t);
  else if (v.is_number())
    fill_number_(a.tensor("self"), v);
  else
    throw ScenarioError("type_error", "fill_() received an invalid combination of arguments - got (" + type_name(v) + ")");
  return a.get("self");
}
// Tensor.index_put_(indices, values, accumulate=False): indices a tuple of tensors (None for
// a dim left alone), as aten::index_put_ takes them.
Value impl_index_put_(Args& a, Runtime&) {
  const Value& list = a.get("indices");
  if (list.kind != Value::Kind::Tuple && list.kind != Value::Kind::List)
    throw ScenarioError("type_error", "index_put_(): argument 'indices' must be tuple of Tensors, not " + type_name(list));
  std::vector<Tensor> indices;
  for (const Value& v : list.items) {
    if (v.kind == Value::Kind::None) indices.push_back(nullptr);
    else if (v.kind == Value::Kind::Tensor) indices.push_back(v.t);
    else throw ScenarioError("type_error", "index_put_(): argument 'indices' must be tuple of Tensors, not " + type_name(v));
  }
  index_put_(a.tensor("self"), indices, a.tensor("values"), a.flag("accumulate"));
  return a.get("self");
}

Value impl_autograd_grad(Args& a, Runtime& rt) {
  std::vector<Tensor> outputs = a.tensors("outputs");
  std::vector<Tensor> inputs = a.tensors("inputs");
  std::vector<Tensor> grads(outputs.size());
  // _tensor_or_tensors_to_tuple: None is one None per output, a tensor a 1-tuple.
  const Value& given = a.get("grad_outputs");
  std::vector<Value> entries(outputs.size(), Value::none());
  if (given.kind == Value::Kind::Tensor) entries = {given};
  else if (given.kind == Value::Kind::Tuple || given.kind == Value::Kind::List) entries = given.items;
  else if (given.kind != Value::Kind::None) a.tensors("grad_outputs");  // raises the type error
  // _make_grads pairs outputs with them by zip (extra entries are dropped), reading None as
  // the implicit ones of a scalar output; the engine then refuses fewer gradients than
  // outputs (measured: "got 2 tensors and 1 gradients"). PyTorch raises these inside the
  // call, after the walks are recorded.
  std::optional<ScenarioError> argument_error;
  for (size_t i = 0; i < grads.size() && i < entries.size() && !argument_error; ++i) {
    const Value& item = entries[i];
    if (item.kind == Value::Kind::Tensor) grads[i] = item.t;
    else if (item.kind == Value::Kind::None && outputs[i]->numel() != 1)
      argument_error.emplace("grad_not_scalar", "grad can be implicitly created only for scalar outputs");
    else if (item.kind != Value::Kind::None)
      argument_error.emplace("type_error", "gradients can be either Tensors or None, but got " + type_name(item));
  }
  if (!argument_error && entries.size() < outputs.size())
    argument_error.emplace("type_error", "got " + std::to_string(outputs.size()) + " tensors and " +
                                             std::to_string(entries.size()) + " gradients");
  const bool create = a.flag("create_graph");
  return rt.backward(outputs, grads, retain_flag(a, create), create, &inputs, a.flag("allow_unused"), false,
                     argument_error ? &*argument_error : nullptr);
}

}  // namespace

DType creation_dtype(const Args& a, DType fallback) { return optional_dtype(a).value_or(fallback); }

Value finish_creation(const Args& a, Tensor t) {
  if (a.flag("requires_grad")) {
    if (!is_floating(t->dtype()))
      throw ScenarioError("type_error", "Only Tensors of floating point and complex dtype can require gradients");
    t->requires_grad_flag = true;
  }
  return T(std::move(t));
}

// Where a creation function puts its tensor: `device=` when given (torch.zeros(3,
// device=x.device), as device-agnostic PyTorch code writes it), else `fallback` (the CPU for
// torch.zeros / torch.tensor, the input's device for the *_like functions). A meta run makes
// every tensor on meta (shapes only), whatever was asked.
std::string creation_device(const Args& a, const Runtime& rt, const std::string& fallback) {
  if (rt.device() == "meta") return "meta";
  const std::string device = device_argument(a).value_or(fallback);
  // agtrace does not mix meta tensors into a run with element data.
  if (device == "meta" && fallback != "meta")
    throw ScenarioError("unsupported", "device='meta' in a " + rt.device() + " run: run the scenario with --device meta");
  return device;
}

namespace {

Value impl_full_of(Args& a, Runtime& rt, double v) {
  std::vector<int64_t> shape = a.shape("size");
  for (int64_t d : shape)
    if (d < 0) throw ScenarioError("shape_mismatch", "Trying to create tensor with negative dimension " + std::to_string(d));
  const std::string device = creation_device(a, rt, "cpu");
  DeviceScope on(device == "meta" ? "cpu" : device);
  return finish_creation(a, kernels::full(shape, v, creation_dtype(a, DType::Float32), device == "meta"));
}
Value impl_zeros(Args& a, Runtime& rt) { return impl_full_of(a, rt, 0.0); }
Value impl_ones(Args& a, Runtime& rt) { return impl_full_of(a, rt, 1.0); }
Value impl_like(Args& a, Runtime& rt, double v) {
  Tensor src = a.tensor("input");
  const std::string device = creation_device(a, rt, device_name(src));
  DeviceScope on(device == "meta" ? "cpu" : device);
  return finish_creation(a, with_preserved_format(kernels::full(src->sizes, v, creation_dtype(a, src->dtype()), device == "meta"), src));
}
Value impl_zeros_like(Args& a, Runtime& rt) { return impl_like(a, rt, 0.0); }
Value impl_ones_like(Args& a, Runtime& rt) { return impl_like(a, rt, 1.0); }

}  // namespace

void flatten_data(const Value& v, Shape& shape, size_t depth, std::vector<double>& out, int& kind,
                  bool* int_beyond_double) {
  if (v.kind == Value::Kind::List || v.kind == Value::Kind::Tuple) {
    if (shape.size() <= depth) shape.push_back(static_cast<int64_t>(v.items.size()));
    else if (shape[depth] != static_cast<int64_t>(v.items.size()))
      throw ScenarioError("shape_mismatch", "expected sequence of length " + std::to_string(shape[depth]) +
                                                " at dim " + std::to_string(depth) + " (got " +
                                                std::to_string(v.items.size()) + ")");
    for (const Value& item : v.items) flatten_data(item, shape, depth + 1, out, kind, int_beyond_double);
    return;
  }
  if (!v.is_number()) type_error("tensor(): could not infer dtype of " + type_name(v));
  kind = std::max(kind, v.kind == Value::Kind::Float ? 2 : v.kind == Value::Kind::Int ? 1 : 0);
  constexpr int64_t kExact = int64_t{1} << 53;
  if (int_beyond_double && v.kind == Value::Kind::Int && (v.i > kExact || v.i < -kExact)) *int_beyond_double = true;
  out.push_back(v.number());
}

void require_exact_int64(DType d, bool int_beyond_double) {
  if (d == DType::Int64 && int_beyond_double)
    throw ScenarioError("unsupported",
                        "int64 tensor values beyond 2**53 are not supported (agtrace holds int64 elements as doubles, "
                        "which would round them)");
}

namespace {

Value impl_tensor(Args& a, Runtime& rt) {
  Shape shape;
  std::vector<double> data;
  int kind = 0;
  bool int_beyond_double = false;
  flatten_data(a.get("data"), shape, 0, data, kind, &int_beyond_double);
  DType d = creation_dtype(a, kind == 2 ? DType::Float32 : kind == 1 ? DType::Int64 : DType::Bool);
  require_exact_int64(d, int_beyond_double);
  const std::string device = creation_device(a, rt, "cpu");
  DeviceScope on(device == "meta" ? "cpu" : device);
  Tensor t = device == "meta" ? kernels::full(shape, 0.0, d, true) : tensor_from_values(shape, d, data);
  return finish_creation(a, t);
}

Value impl_print(Args& a, Runtime& rt) {
  std::string line;
  const Value& vals = a.get("values");
  for (size_t i = 0; i < vals.items.size(); ++i) {
    if (i) line += " ";
    line += print_form(vals.items[i]);
  }
  rt.print_line(line);
  return Value::none();
}

Value impl_shares_storage(Args& a, Runtime&) {
  return Value::boolean(a.tensor("a")->storage == a.tensor("b")->storage);
}

Value impl_equal(Args& a, Runtime&) {
  Tensor x = a.tensor("input"), y = a.tensor("other");
  if (x->sizes != y->sizes) return Value::boolean(false);
  // A Python bool: for cuda tensors PyTorch compares on the device and copies one flag
  // back; agtrace copies both over (host_values) and compares them on the host.
  return Value::boolean(host_values(x) == host_values(y));
}

Value impl_is_grad_enabled(Args&, Runtime&) { return Value::boolean(autograd::grad_enabled()); }
Value impl_is_autocast_enabled(Args&, Runtime&) { return Value::boolean(autocast_query().cuda_enabled); }
Value impl_is_autocast_cpu_enabled(Args&, Runtime&) { return Value::boolean(autocast_query().cpu_enabled); }
Value impl_get_autocast_cpu_dtype(Args&, Runtime&) { return Value::dtype_of(autocast_query().cpu_dtype); }
Value impl_get_autocast_gpu_dtype(Args&, Runtime&) { return Value::dtype_of(autocast_query().gpu_dtype); }
// A scenario's autocast block always caches (it has no cache_enabled=False).
Value impl_is_autocast_cache_enabled(Args&, Runtime&) { return Value::boolean(true); }

Value impl_size(Args& a, Runtime&) {
  Tensor t = a.tensor("self");
  if (!a.given("dim")) return Value::torch_size(t->sizes);
  return Value::integer(t->sizes[static_cast<size_t>(kernels::wrap_dim(a.integer("dim"), t->dim()))]);
}
// Tensor.stride(): a tuple of ints (not a torch.Size), or one int for a dim.
Value impl_stride(Args& a, Runtime&) {
  Tensor t = a.tensor("self");
  if (a.given("dim")) return Value::integer(t->strides[static_cast<size_t>(kernels::wrap_dim(a.integer("dim"), t->dim()))]);
  std::vector<Value> items;
  for (int64_t s : t->strides) items.push_back(Value::integer(s));
  return Value::tuple(std::move(items));
}
Value impl_storage_offset(Args& a, Runtime&) { return Value::integer(a.tensor("self")->offset); }
Value impl_dim(Args& a, Runtime&) { return Value::integer(a.tensor("self")->dim()); }
Value impl_numel(Args& a, Runtime&) { return Value::integer(a.tensor("self")->numel()); }
Value impl_element_size(Args& a, Runtime&) { return Value::integer(dtype_size(a.tensor("self")->dtype())); }
Value impl_is_contiguous(Args& a, Runtime&) { return Value::boolean(a.tensor("self")->is_contiguous()); }
// Tensor._is_view(): whether the tensor is a view of another (has a _base), as PyTorch's
// tests ask it (test_autograd.py's view checks).
Value impl_is_view(Args& a, Runtime&) { return Value::boolean(a.tensor("self")->is_view()); }
Value impl_data_ptr(Args& a, Runtime&) {
  // Not an address: storage id and element offset, enough for equality checks.
  Tensor t = a.tensor("self");
  return Value::integer((t->storage->id << 32) + t->offset * dtype_size(t->dtype()));
}
Value impl_item(Args& a, Runtime&) {
  Tensor t = a.tensor("self");
  if (t->numel() != 1)
    throw ScenarioError("type_error", "a Tensor with " + std::to_string(t->numel()) +
                                          " elements cannot be converted to Scalar");
  if (t->is_meta()) throw ScenarioError("unsupported", "Tensor.item() cannot be called on meta tensors");
  double v = item(t);
  if (t->dtype() == DType::Bool) return Value::boolean(v != 0.0);
  if (t->dtype() == DType::Int64) return Value::integer(static_cast<int64_t>(v));
  return Value::real(v);
}
Value impl_requires_grad_(Args& a, Runtime&) {
  Tensor t = a.tensor("self");
  const bool on = a.given("requires_grad") ? a.flag("requires_grad") : true;
  // A non-leaf already requires grad: requires_grad_(True) leaves it as it is (measured:
  // (x * 2).requires_grad_() returns the tensor); only turning it off is refused.
  if (!t->is_leaf() && on) return a.get("self");
  if (!t->is_leaf())
    throw ScenarioError("type_error", "you can only change requires_grad flags of leaf variables. If you want to use a "
                                      "computed variable in a subgraph that doesn't require differentiation use "
                                      "var_no_grad = var.detach().");
  if (on && !is_floating(t->dtype()))
    throw ScenarioError("type_error", "only Tensors of floating point dtype can require gradients");
  t->requires_grad_flag = on;
  return a.get("self");
}

Param parse_param(std::string text, bool kw_only) {
  Param p;
  p.keyword_only = kw_only;
  if (!text.empty() && text[0] == '*') {
    p.varargs = true;
    text = text.substr(1);
    p.keyword_list = text == "size" || text == "shape" || text == "dims";
  }
  auto eq = text.find('=');
  if (eq == std::string::npos) {
    p.name = text;
    return p;
  }
  p.name = text.substr(0, eq);
  std::string d = text.substr(eq + 1);
  p.has_default = true;
  if (d == "None") p.default_value = Value::none();
  else if (d == "True") p.default_value = Value::boolean(true);
  else if (d == "False") p.default_value = Value::boolean(false);
  else if (d.find('.') != std::string::npos) p.default_value = Value::real(std::stod(d));
  else p.default_value = Value::integer(std::stoll(d));
  return p;
}

std::vector<Param> parse_signature(const std::string& sig) {
  std::vector<Param> out;
  std::string inner = sig.substr(1, sig.size() - 2);
  bool kw_only = false;
  size_t start = 0;
  while (start <= inner.size()) {
    size_t comma = inner.find(',', start);
    std::string item = inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    if (item == "*") kw_only = true;
    else if (!item.empty()) {
      Param p = parse_param(item, kw_only);
      if (p.varargs) kw_only = true;  // parameters after *args are keyword-only
      out.push_back(p);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<OpEntry> core_ops() {
  const std::string none = "-";
  std::vector<OpEntry> t = {
      // ---- arithmetic
      {"add", {"torch.add", "Tensor.add", "a + b"}, "(self, other, *, alpha=1)", "math", "AddBackward0",
       "alpha only; no tensors (a Python number operand gives next_functions (x, None))", impl_add, {}},
      {"sub", {"torch.sub", "Tensor.sub", "a - b"}, "(self, other, *, alpha=1)", "math", "SubBackward0",
       "alpha only; no tensors", impl_sub, {}},
      {"rsub", {"number - tensor"}, "(self, other)", "math", "RsubBackward1", "alpha only; one edge", nullptr, {}},
      {"mul", {"torch.mul", "Tensor.mul", "a * b"}, "(self, other)", "math", "MulBackward0",
       "other if self requires grad; self if other requires grad; a Python number is saved as a 0-d tensor "
       "(float64 8 B, int64 8 B)",
       impl_mul, {}},
      {"div", {"torch.div", "Tensor.div", "a / b"}, "(self, other)", "math", "DivBackward0",
       "other always; self if other requires grad; a Python number is saved as a 0-d tensor", impl_div, {}},
      {"rdiv", {"number / tensor"}, "(self, other)", "math", "MulBackward0 over ReciprocalBackward0",
       "reciprocal saves result; mul saves the number as a 0-d tensor", nullptr, {}},
      {"neg", {"torch.neg", "Tensor.neg", "-a"}, "(self)", "math", "NegBackward0", "nothing", impl_neg, {}},
      {"pow", {"torch.pow", "Tensor.pow", "a ** b"}, "(self, exponent)", "math", "PowBackward0 / PowBackward1 / PowBackward2",
       "number exponent: self and exponent; tensor exponent: self, exponent and result; torch.pow(number, tensor) "
       "(PowBackward2): exponent, result and the number as self", impl_pow, {}},
      {"rpow", {"number ** tensor"}, "(self, exponent)", "math", "PowBackward1",
       "self (the number as a 0-d tensor of the result dtype), exponent, result; edges (None, exponent)", nullptr, {}},
      {"reciprocal", {"torch.reciprocal", "Tensor.reciprocal"}, "(self)", "pointwise", "ReciprocalBackward0",
       "result", impl_reciprocal, {}},
      {"eq", {"torch.eq", "Tensor.eq", "a == b"}, "(self, other)", "comparison", none, "not differentiable; bool result",
       impl_compare<kEq>, {}},
      {"ne", {"torch.ne", "Tensor.ne", "a != b"}, "(self, other)", "comparison", none, "not differentiable", impl_compare<kNe>, {}},
      {"lt", {"torch.lt", "Tensor.lt", "a < b"}, "(self, other)", "comparison", none, "not differentiable", impl_compare<kLt>, {}},
      {"le", {"torch.le", "Tensor.le", "a <= b"}, "(self, other)", "comparison", none, "not differentiable", impl_compare<kLe>, {}},
      {"gt", {"torch.gt", "Tensor.gt", "a > b"}, "(self, other)", "comparison", none, "not differentiable", impl_compare<kGt>, {}},
      {"ge", {"torch.ge", "Tensor.ge", "a >= b"}, "(self, other)", "comparison", none, "not differentiable", impl_compare<kGe>, {}},
      // ---- pointwise
      {"exp", {"torch.exp", "Tensor.exp"}, "(self)", "pointwise", "ExpBackward0", "result (new object, same storage)", impl_exp, {}},
      {"log", {"torch.log", "Tensor.log"}, "(self)", "pointwise", "LogBackward0", "self (same object)", impl_log, {}},
      {"sqrt", {"torch.sqrt", "Tensor.sqrt"}, "(self)", "pointwise", "SqrtBackward0", "result", impl_sqrt, {}},
      {"tanh", {"torch.tanh", "Tensor.tanh", "F.tanh"}, "(self)", "pointwise", "TanhBackward0", "result", impl_tanh, {}},
      {"sigmoid", {"torch.sigmoid", "Tensor.sigmoid", "F.sigmoid"}, "(self)", "pointwise", "SigmoidBackward0", "result",
       impl_sigmoid, {}},
      {"relu", {"torch.relu", "Tensor.relu", "F.relu"}, "(self, inplace=False)", "pointwise", "ReluBackward0",
       "result (inplace=True behaves as relu_)", impl_relu, {}},
      // ---- reductions
      {"sum", {"torch.sum", "Tensor.sum"}, "(self, dim=None, keepdim=False, *, dtype=None)", "reduction", "SumBackward0 / SumBackward1",
       "sizes only (self_sym_sizes; dim and keepdim when by dim)", impl_sum, {}},
      {"mean", {"torch.mean", "Tensor.mean"}, "(self, dim=None, keepdim=False, *, dtype=None)", "reduction",
       "MeanBackward0 / MeanBackward1", "all: self_sizes and self_numel; by dim: the whole input (self)", impl_mean, {}},
      // ---- linear algebra
      {"mm", {"torch.mm", "Tensor.mm"}, "(self, mat2)", "linalg", "MmBackward0",
       "self if mat2 requires grad; mat2 if self requires grad; sizes and strides", impl_mm, {}},
      {"matmul", {"torch.matmul", "Tensor.matmul", "a @ b"}, "(self, other)", "linalg", "MmBackward0 (2-D @ 2-D)",
       "as mm; other ranks are not supported yet", impl_matmul, {}},
      // ---- views and copies
      {"view", {"Tensor.view"}, "(self, *size)", "view", "ViewBackward0", "self_sym_sizes", impl_view, {}},
      {"reshape", {"torch.reshape", "Tensor.reshape"}, "(self, *shape)", "view",
       "ReshapeAliasBackward0 / UnsafeViewBackward0 over CloneBackward0", "self_sym_sizes (copies when no view fits)",
       impl_reshape, {}},
      {"t", {"torch.t", "Tensor.t"}, "(self)", "view", "TBackward0", "nothing", impl_t, {}},
      {"transpose", {"torch.transpose", "Tensor.transpose"}, "(self, dim0, dim1)", "view", "TransposeBackward0",
       "dim0, dim1", impl_transpose, {}},
      {"select", {"torch.select", "Tensor.select", "x[i]"}, "(self, dim, index)", "view", "SelectBackward0",
       "dim, index, self_sizes", impl_select, {}},
      {"slice", {"x[a:b:c]"}, "(self, dim, start, end, step)", "view", "SliceBackward0 (one per sliced dim, ':' included)",
       "dim, start, end, step, self_sym_sizes", nullptr, {}},
      {"clone", {"torch.clone", "Tensor.clone"}, "(self)", "view", "CloneBackward0", "nothing (new storage)", impl_clone, {}},
      {"contiguous", {"Tensor.contiguous"}, "(self)", "view", "- / CloneBackward0",
       "the same object when already contiguous, else a clone", impl_contiguous, {}},
      {"detach", {"torch.detach", "Tensor.detach"}, "(self)", "view", none,
       "no node; shares storage and version counter", impl_detach, {}},
      // ---- in-place
      {"add_", {"Tensor.add_", "a += b"}, "(self, other, *, alpha=1)", "inplace", "AddBackward0", "alpha only", impl_add_, {}},
      {"sub_", {"Tensor.sub_", "a -= b"}, "(self, other, *, alpha=1)", "inplace", "SubBackward0", "alpha only", impl_sub_, {}},
      {"mul_", {"Tensor.mul_", "a *= b"}, "(self, other)", "inplace", "MulBackward0",
       "other if self requires grad; a clone of the old self (new storage) if other requires grad", impl_mul_, {}},
      {"div_", {"Tensor.div_", "a /= b"}, "(self, other)", "inplace", "DivBackward0",
       "other; a clone of the old self if other requires grad", impl_div_, {}},
      {"relu_", {"Tensor.relu_", "torch.relu_"}, "(self)", "inplace", "ReluBackward0", "result (the edited tensor, version 1)",
       impl_relu_, {}},
      {"exp_", {"Tensor.exp_", "torch.exp_"}, "(self)", "inplace", "ExpBackward0", "result", impl_exp_, {}},
      {"sigmoid_", {"Tensor.sigmoid_", "torch.sigmoid_"}, "(self)", "inplace", "SigmoidBackward0", "result", impl_sigmoid_, {}},
      {"tanh_", {"Tensor.tanh_", "torch.tanh_"}, "(self)", "inplace", "TanhBackward0", "result", impl_tanh_, {}},
      {"zero_", {"Tensor.zero_"}, "(self)", "inplace", "ZeroBackward0", "nothing", impl_zero_, {}},
      {"sin_", {"Tensor.sin_", "torch.sin_"}, "(self)", "inplace", "SinBackward0",
       "self: a clone of the old self (CloneBackward0, its own storage)", impl_unary_inplace, {}},
      {"cos_", {"Tensor.cos_", "torch.cos_"}, "(self)", "inplace", "CosBackward0", "self: a clone of the old self",
       impl_unary_inplace, {}},
      {"abs_", {"Tensor.abs_", "torch.abs_"}, "(self)", "inplace", "AbsBackward0", "self: a clone of the old self",
       impl_unary_inplace, {}},
      {"log_", {"Tensor.log_", "torch.log_"}, "(self)", "inplace", "LogBackward0", "self: a clone of the old self",
       impl_unary_inplace, {}},
      {"sqrt_", {"Tensor.sqrt_", "torch.sqrt_"}, "(self)", "inplace", "SqrtBackward0", "result (the edited tensor)",
       impl_unary_inplace, {}},
      {"rsqrt_", {"Tensor.rsqrt_", "torch.rsqrt_"}, "(self)", "inplace", "RsqrtBackward0", "result (the edited tensor)",
       impl_unary_inplace, {}},
      {"neg_", {"Tensor.neg_", "torch.neg_"}, "(self)", "inplace", "NegBackward0", "nothing", impl_unary_inplace, {}},
      {"pow_", {"Tensor.pow_"}, "(self, exponent)", "inplace", "PowBackward0 / PowBackward1",
       "a number: exponent and a clone of the old self; a tensor: exponent, result (the edited tensor), a clone of "
       "the old self",
       impl_pow_, {}},
      {"t_", {"Tensor.t_"}, "(self)", "inplace", "TBackward1", "nothing; the tensor's own sizes and strides change",
       impl_t_, {}},
      {"transpose_", {"Tensor.transpose_", "Tensor.swapaxes_", "Tensor.swapdims_"}, "(self, dim0, dim1)", "inplace",
       "TransposeBackward1", "dim0, dim1", impl_transpose_, {}},
      {"unsqueeze_", {"Tensor.unsqueeze_"}, "(self, dim)", "inplace", "UnsqueezeBackward1", "dim", impl_unsqueeze_, {}},
      {"squeeze_", {"Tensor.squeeze_"}, "(self, dim=None)", "inplace", "SqueezeBackward2 / SqueezeBackward3",
       "self_sizes (no dim); dim and self_sizes", impl_squeeze_, {}},
      {"detach_", {"Tensor.detach_"}, "(self)", "inplace", none,
       "no node: grad_fn and requires_grad dropped, no version bump; a view raises", impl_detach_, {}},
      {"copy_", {"Tensor.copy_"}, "(self, src, non_blocking=False)", "inplace", "CopyBackwards",
       "nothing; edges (self, src): self gets zeros, src the gradient in its dtype, reduced to its shape", impl_copy_, {}},
      {"fill_", {"Tensor.fill_"}, "(self, value)", "inplace", "FillBackward2 / FillBackward3",
       "nothing; a Python number FillBackward2 (one edge), a 0-d tensor FillBackward3 (edges self, value: grad.sum())",
       impl_fill_, {}},
      {"index_put_", {"Tensor.index_put_"}, "(self, indices, values, accumulate=False)", "inplace", "IndexPutBackward0",
       "indices (the list, None entries included), accumulate; edges (self, values)", impl_index_put_, {}},
      // ---- autograd
      {"grad", {"torch.autograd.grad"},
       "(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False)", "autograd",
       none, "returns gradients without touching .grad", impl_autograd_grad, {}},
      {"requires_grad_", {"Tensor.requires_grad_"}, "(self, requires_grad=True)", "autograd", none, "-",
       impl_requires_grad_, {}},
      {"is_grad_enabled", {"torch.is_grad_enabled"}, "()", "autograd", none, "-", impl_is_grad_enabled, {}},
      {"is_autocast_enabled", {"torch.is_autocast_enabled"}, "()", "autograd", none, "-", impl_is_autocast_enabled, {}},
      {"is_autocast_cpu_enabled", {"torch.is_autocast_cpu_enabled"}, "()", "autograd", none, "-",
       impl_is_autocast_cpu_enabled, {}},
      {"get_autocast_cpu_dtype", {"torch.get_autocast_cpu_dtype"}, "()", "autograd", none, "-",
       impl_get_autocast_cpu_dtype, {}},
      {"get_autocast_gpu_dtype", {"torch.get_autocast_gpu_dtype"}, "()", "autograd", none, "-",
       impl_get_autocast_gpu_dtype, {}},
      {"is_autocast_cache_enabled", {"torch.is_autocast_cache_enabled"}, "()", "autograd", none, "-",
       impl_is_autocast_cache_enabled, {}},
      // ---- creation
      {"zeros", {"torch.zeros"}, "(*size, dtype=None, device=None, requires_grad=False)", "creation", none, "-", impl_zeros, {}},
      {"ones", {"torch.ones"}, "(*size, dtype=None, device=None, requires_grad=False)", "creation", none, "-", impl_ones, {}},
      {"zeros_like", {"torch.zeros_like"}, "(input, *, dtype=None, device=None, requires_grad=False)", "creation", none, "-",
       impl_zeros_like, {}},
      {"ones_like", {"torch.ones_like"}, "(input, *, dtype=None, device=None, requires_grad=False)", "creation", none, "-",
       impl_ones_like, {}},
      {"tensor", {"torch.tensor"}, "(data, *, dtype=None, device=None, requires_grad=False)", "creation", none, "-", impl_tensor, {}},
      // ---- introspection
      {"print", {"print"}, "(*values)", "introspection", none, "records the printed line", impl_print, {}},
      {"shares_storage", {"shares_storage"}, "(a, b)", "introspection", none, "True when both use the same storage",
       impl_shares_storage, {}},
      {"equal", {"torch.equal", "Tensor.equal"}, "(input, other)", "introspection", none, "same shape and values", impl_equal, {}},
      {"size", {"Tensor.size"}, "(self, dim=None)", "introspection", none, "-", impl_size, {}},
      {"stride", {"Tensor.stride"}, "(self, dim=None)", "introspection", none, "-", impl_stride, {}},
      {"storage_offset", {"Tensor.storage_offset"}, "(self)", "introspection", none, "-", impl_storage_offset, {}},
      {"dim", {"Tensor.dim"}, "(self)", "introspection", none, "-", impl_dim, {}},
      {"numel", {"Tensor.numel", "torch.numel"}, "(self)", "introspection", none, "-", impl_numel, {}},
      {"element_size", {"Tensor.element_size"}, "(self)", "introspection", none, "-", impl_element_size, {}},
      {"is_contiguous", {"Tensor.is_contiguous"}, "(self)", "introspection", none, "-", impl_is_contiguous, {}},
      {"_is_view", {"Tensor._is_view"}, "(self)", "introspection", none, "-", impl_is_view, {}},
      {"data_ptr", {"Tensor.data_ptr"}, "(self)", "introspection", none, "for comparison only", impl_data_ptr, {}},
      {"item", {"Tensor.item"}, "(self)", "introspection", none, "-", impl_item, {}},
  };
  return t;
}

namespace {

// Every fragment of the table, in the order `agtrace ops` lists them.
const TableFragment kFragments[] = {core_ops,         activation_ops, shape_ops, nn_ops,
                                    autograd_api_ops, creation_ops,   more_ops,  rounding_trig_ops,
                                    index_ops,
                                    shapes_extra_ops,
                                    binary_more_ops,
                                    activation_inplace_ops, random_inplace_ops,
                                    model_ops};


std::vector<OpEntry> build_table() {
  std::vector<OpEntry> all;
  for (TableFragment fragment : kFragments)
    for (OpEntry& e : fragment()) {
      e.params = parse_signature(e.signature);
      all.push_back(std::move(e));
    }
  return all;
}

}  // namespace

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = build_table();
  return table;
}

std::string keyword_param(const OpEntry& entry, const std::string& spelling, bool method, const std::string& kw) {
  // Measured in torch 1.13: these are Python functions, not parsed by PythonArgParser, so
  // they take their own parameter names only (x.split(1, axis=1) and x.norm(axis=0) raise).
  static const std::vector<std::string> python_defined = {"Tensor.split", "torch.split", "Tensor.norm", "torch.norm",
                                                          "Tensor.backward", "torch.autograd.grad"};
  const bool parsed = (spelling.rfind("torch.", 0) == 0 || spelling.rfind("Tensor.", 0) == 0) &&
                      std::find(python_defined.begin(), python_defined.end(), spelling) == python_defined.end();
  if (!parsed) return kw;
  // python_arg_parser.cpp's numpy_compatibility_arg_names.
  std::string name = kw;
  if (kw == "axis") name = "dim";
  else if (kw == "keepdims") name = "keepdim";
  else if (kw == "x" || kw == "a" || kw == "x1") name = "input";
  else if (kw == "x2") name = "other";
  // A function's tensor `self` is named `input` (torch.sum(input=x)); a method's receiver
  // has no keyword (x.sum(input=x) raises).
  if (name == "input" && !method && !entry.params.empty() && entry.params[0].name == "self") return "self";
  return name;
}

const OpEntry* find_op(const std::string& spelling) {
  // A hash map: the interpreter looks up every call's spelling (twice for a method call),
  // and a tree of ~400 spellings took ~9 string comparisons each time (issue #6). Only
  // looked up, never iterated, so its order shows nowhere.
  static const std::unordered_map<std::string, const OpEntry*> index = [] {
    std::unordered_map<std::string, const OpEntry*> m;
    for (const OpEntry& e : op_table())
      if (e.impl)
        for (const std::string& s : e.spellings) m[s] = &e;
    return m;
  }();
  auto it = index.find(spelling);
  return it == index.end() ? nullptr : it->second;
}

std::vector<std::string> all_spellings() {
  std::vector<std::string> out;
  for (const OpEntry& e : op_table())
    if (e.impl)
      for (const std::string& s : e.spellings)
        if (s.find(' ') == std::string::npos) out.push_back(s);
  return out;
}

}  // namespace agtrace::ops
