#include "interp/autocast.hpp"

#include "errors.hpp"
#include "ops/shapes.hpp"
#include "tensor/kernels.hpp"

namespace agtrace {

using ops::CastPolicy;

std::string AutocastState::device_type_of(const Tensor& t) {
  if (t->is_meta() || t->storage->device == std::string("cuda")) return "cuda";
  return "cpu";
}

void AutocastState::enter(const std::string& device_type, DType dtype) {
  regions_.push_back({device_type, dtype});
  publish();
}

AutocastState::~AutocastState() { ops::autocast_query() = {}; }

// torch.autocast's __enter__ sets the device type's flag and dtype, __exit__ restores the
// previous ones: the innermost region of each device type decides.
void AutocastState::publish() const {
  ops::AutocastQuery q;
  for (const Region& r : regions_) {
    if (r.device_type == "cpu") {
      q.cpu_enabled = true;
      q.cpu_dtype = r.dtype;
    } else {
      q.cuda_enabled = true;
      q.gpu_dtype = r.dtype;
    }
  }
  ops::autocast_query() = q;
}

// autocast's __exit__ decrements the nesting count and calls clear_cache() at zero: the cached
// copies live until the outermost region (of any device type) ends, inner exits keep them
// (measured: F.linear(x, W) after an inner `with torch.autocast` block reuses the
// ToCopyBackward0 of a call made before it; a new outer region makes a new one).
void AutocastState::exit() {
  regions_.pop_back();
  publish();
  if (regions_.empty()) cache_.clear();
}

const DType* AutocastState::dtype_for(const std::string& device_type) const {
  for (auto it = regions_.rbegin(); it != regions_.rend(); ++it)
    if (it->device_type == device_type) return &it->dtype;
  return nullptr;
}

// is_eligible (autocast_mode.h): defined, floating point, on the region's device type, and
// not float64 (measured: a float64 weight meets a bf16-cast input in addmm and raises
// "expected scalar type BFloat16 but found Double").
bool AutocastState::eligible(const Tensor& t, const std::string& device_type) const {
  return t && is_floating(t->dtype()) && t->dtype() != DType::Float64 && device_type_of(t) == device_type;
}

// arg.to(to_type): ToCopyBackward0 when the source requires grad in grad mode.
Tensor AutocastState::make_cast(DType to, const Tensor& t) {
  Tensor cast = ops::to_dtype(t, to);
  cast_storages_.insert(cast->storage->id);
  return cast;
}

Tensor AutocastState::cached_cast(DType to, const Tensor& t, const std::string& device_type, DType low) {
  if (!eligible(t, device_type) || t->dtype() == to) return t;
  // Any float32 leaf that requires grad, inputs included (measured: two F.linear(x2, W) with
  // x2 a leaf requiring grad save casts of x2 on one storage); views (W.t()) and non-leaves
  // are cast at every use, leaves not requiring grad too (measured: distinct ToCopyBackward0).
  const bool can_cache = to == low && t->dtype() == DType::Float32 && t->requires_grad() && t->is_leaf() &&
                         !t->is_view();
  if (!can_cache) return make_cast(to, t);
  auto it = cache_.find(t.get());
  if (it != cache_.end() && it->second.first.lock().get() == t.get()) return it->second.second;
  // A cached copy is handed out again even if the source was edited in place since, or was
  // first cast under no_grad (measured: after `with torch.no_grad(): F.linear(x, W)`, a
  // F.linear(x, W) in grad mode has no grad_fn; after W.mul_(2) the result is unchanged).
  Tensor cast = make_cast(to, t);
  leaf_cast_storages_.insert(cast->storage->id);
  cache_[t.get()] = {Weak<TensorImpl>(t), cast};
  return cast;
}

DType AutocastState::target_dtype(CastPolicy policy, const std::vector<Tensor*>& ts, const std::string& device_type,
                                  DType low) const {
  if (policy == CastPolicy::LowerPrecision) return low;
  if (policy == CastPolicy::Fp32) return DType::Float32;
  // promote_type: the widest of the low dtype and every eligible input's dtype.
  DType widest = low;
  for (const Tensor* t : ts)
    if (eligible(*t, device_type)) widest = kernels::promote(widest, (*t)->dtype());
  return widest;
}

void AutocastState::refuse(const std::string& op, const std::string& spelling, const std::string& device_type,
                           CastPolicy policy) const {
  if (policy == CastPolicy::Banned)
    // binary_cross_entropy_banned (autocast_mode.cpp), PyTorch's RuntimeError word for word.
    throw ScenarioError("type_error",
                        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
                        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
                        "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
                        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
                        "safe to autocast.");
  throw ScenarioError("unsupported", spelling + " under torch.autocast('" + device_type +
                                         "'): agtrace does not know PyTorch 1.13's cast policy for '" + op +
                                         "' (lower_precision_fp / fp32 / promote lists of autocast_mode.cpp)");
}

namespace {

// The tensors among an op's arguments, lists and tuples included (stack's TensorList).
std::vector<Tensor*> tensors_of(ops::Args& args) {
  std::vector<Tensor*> out;
  for (auto& v : args.values) {
    if (!v) continue;
    if (v->kind == Value::Kind::Tensor) out.push_back(&v->t);
    if (v->kind == Value::Kind::List || v->kind == Value::Kind::Tuple)
      for (Value& item : v->items)
        if (item.kind == Value::Kind::Tensor) out.push_back(&item.t);
  }
  return out;
}

}  // namespace

void AutocastState::cast_operands(const std::string& op, std::vector<Tensor*> operands) {
  if (operands.empty()) return;
  const std::string device_type = device_type_of(*operands[0]);
  const DType* low = dtype_for(device_type);
  if (!low) return;
  const CastPolicy policy = ops::autocast_policy(op, device_type);
  if (policy == CastPolicy::None) return;
  if (policy == CastPolicy::Unknown || policy == CastPolicy::Banned || policy == CastPolicy::Fp32SetOptDtype)
    refuse(op, op, device_type, policy == CastPolicy::Fp32SetOptDtype ? CastPolicy::Unknown : policy);
  const DType to = target_dtype(policy, operands, device_type, *low);
  for (Tensor* t : operands) *t = cached_cast(to, *t, device_type, *low);
}

void AutocastState::cast_arguments(const std::string& op, const std::string& spelling, ops::Args& args) {
  std::vector<Tensor*> ts = tensors_of(args);
  // The autocast dispatch key is computed from the inputs' devices; an op without tensor
  // inputs (creation, introspection) passes through.
  if (ts.empty()) return;
  const std::string device_type = device_type_of(*ts[0]);
  const DType* low = dtype_for(device_type);
  if (!low) return;
  const CastPolicy policy = ops::autocast_policy(op, device_type);
  if (op == "pad" && device_type == "cpu" && args.given("mode") && args.get("mode").kind == Value::Kind::Str &&
      args.get("mode").s != "constant")
    // reflection_pad / replication_pad kernels are on the CPU fp32 list; not modelled.
    refuse(op, spelling + "(mode='" + args.get("mode").s + "')", device_type, CastPolicy::Unknown);
  switch (policy) {
    case CastPolicy::None:
      return;
    case CastPolicy::Unknown:
    case CastPolicy::Banned:
      refuse(op, spelling, device_type, policy);
      return;
    case CastPolicy::Fp32SetOptDtype: {
      // set_opt_dtype: dtype=float32 when the first argument is eligible and no dtype is given;
      // the op then casts its input itself (softmax's ToCopyBackward0).
      if (!eligible(*ts[0], device_type) || args.given("dtype")) return;
      for (size_t k = 0; args.params && k < args.params->size(); ++k)
        if ((*args.params)[k].name == "dtype") {
          args.values[k] = Value::dtype_of(DType::Float32);
          return;
        }
      refuse(op, spelling, device_type, CastPolicy::Unknown);
      return;
    }
    default:
      break;
  }
  const DType to = target_dtype(policy, ts, device_type, *low);
  for (Tensor* t : ts) *t = cached_cast(to, *t, device_type, *low);
}

}  // namespace agtrace
