#include "autograd/node.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>

#include "autograd/grad_mode.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "errors.hpp"
#include "tensor/device_kernels.hpp"
#include "tensor/events.hpp"
#include "tensor/kernels.hpp"
#include "util/slot_registry.hpp"

namespace agtrace::autograd {

namespace {
SlotRegistry<Node>& registry() {
  static SlotRegistry<Node> r;
  return r;
}

std::string format_double(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

const std::vector<Node*>& live_nodes() { return registry().live(); }
void forget_live_nodes() { registry().forget_all(); }

namespace {
std::atomic<uint64_t> g_saved_state_changes{0};
void saved_state_changed() { g_saved_state_changes.fetch_add(1, std::memory_order_relaxed); }
}  // namespace
uint64_t saved_state_changes() { return g_saved_state_changes.load(std::memory_order_relaxed); }

InternedString saved_name(const Node& n, const SavedEntry& e) {
  return e.what.empty() ? saved_value_name(n.name, e.name) : e.what;
}

std::string attr_repr(const AttrValue& a) {
  auto int_repr = [&](int64_t v) {
    return a.as_uint64 ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v);
  };
  switch (a.kind) {
    case AttrValue::Kind::None: return "None";
    case AttrValue::Kind::Int: return int_repr(a.i);
    case AttrValue::Kind::Double: return format_double(a.d);
    case AttrValue::Kind::Bool: return a.b ? "True" : "False";
    case AttrValue::Kind::String: return "'" + a.s + "'";
    case AttrValue::Kind::IntList: {
      std::string out = "(";
      for (size_t i = 0; i < a.list.size(); ++i) {
        if (i) out += ", ";
        out += int_repr(a.list[i]);
      }
      if (a.list.size() == 1) out += ",";
      return out + ")";
    }
    case AttrValue::Kind::RealList: {
      std::string out = "(";
      for (size_t i = 0; i < a.reals.size(); ++i) out += (i ? ", " : "") + format_double(a.reals[i]);
      if (a.reals.size() == 1) out += ",";
      return out + ")";
    }
  }
  return "?";
}

Node::Node() {
  id = id_counters().node++;
  created_at = run_position().statement;
  registry().add(this);
  if (ObjectObserver* o = object_observer()) o->node_created(*this);
}

Node::~Node() {
  // Saved values die with their node: announce the releases the accountant must see.
  release_saved_values(run_position().statement);
  if (ObjectObserver* o = object_observer()) o->node_destroyed(*this);
  registry().remove(this);

  // Tear long chains down iteratively (cf. PyTorch's deleteNode/gatherFunctions in
  // torch/csrc/autograd/function.cpp): letting the last edge to a node go inside this
  // destructor recurses once per node, and a chain of ~300,000 ops overflowed the stack.
  // The children this node alone owns are handed to the outermost ~Node, which destroys
  // them in the order the recursive destruction would (next[0]'s subtree first).
  static std::vector<Shared<Node>>* pending = nullptr;
  // Inside the outermost ~Node they go straight to its list (no vector per node, issue #6).
  std::vector<Shared<Node>> owned;
  std::vector<Shared<Node>>& out = pending ? *pending : owned;
  for (auto e = next.rbegin(); e != next.rend(); ++e)
    if (e->fn && e->fn.use_count() == 1) out.push_back(std::move(e->fn));
  if (pending) return;
  pending = &owned;
  while (!owned.empty()) {
    Shared<Node> n = std::move(owned.back());
    owned.pop_back();
    n.reset();  // may append n's own children to `owned`
  }
  pending = nullptr;
}

// ---- Saved-tensor hooks --------------------------------------------------------------

namespace {
std::vector<std::shared_ptr<SavedTensorHooks>>& hooks_stack() {
  static std::vector<std::shared_ptr<SavedTensorHooks>> s;
  return s;
}

// Runs `f` with the op named `label` for the Alloc events it causes (the packed copy is
// made by the hook, not by the op that saved).
template <typename F>
Tensor as_hook_op(const std::string& label, F&& f) {
  RunPosition& pos = run_position();
  const std::string previous = pos.op;
  pos.op = label;
  struct Restore {
    RunPosition& p;
    const std::string& v;
    ~Restore() { p.op = v; }
  } restore{pos, previous};
  return f();
}

// A copy of `t`'s elements in a new contiguous storage of dtype `d` (Tensor.to(d)),
// rounded as PyTorch rounds to `d`; `device` names where the storage lives.
Tensor converted_copy(const Tensor& t, DType d, const std::string& device) { return copy_to(t, d, device); }

// Identity hooks ("count") and save_on_cpu keep the saved storage itself. The hook keeps a
// detached alias rather than the object: what the program sees is the same (unpack always
// builds a new object), and it does not hold the saving node through grad_fn, which would
// be a reference cycle for saved outputs.
Tensor detached_alias(const Tensor& t) { return make_alias(t, t->sizes, t->strides, t->offset); }

class CountHooks : public SavedTensorHooks {
 public:
  std::string kind() const override { return "count"; }
  Tensor pack(SavedVariable&, const Tensor& t) override { return detached_alias(t); }
  Tensor unpack(SavedVariable& v) override { return v.packed(); }
};

// torch.autograd.graph.save_on_cpu (1.13, pin_memory=False): pack keeps `tensor.cpu()`,
// which for a CPU tensor is the tensor itself (measured: `x.cpu() is x`; no copy, no
// pinning), and unpack returns `packed.to(original device)`. On the meta device
// `.cpu()` raises "Cannot copy out of meta tensor; no data!" (measured).
class SaveOnCpuHooks : public SavedTensorHooks {
 public:
  std::string kind() const override { return "save_on_cpu"; }
  Tensor pack(SavedVariable&, const Tensor& t) override {
    if (t->is_meta())
      throw ScenarioError("unsupported",
                          "NotImplementedError: Cannot copy out of meta tensor; no data! (save_on_cpu packs "
                          "with tensor.cpu(), which a meta tensor cannot do)");
    if (t->storage->device == "cpu") return detached_alias(t);
    return as_hook_op("save_on_cpu pack", [&] { return converted_copy(t, t->dtype(), "cpu"); });
  }
  Tensor unpack(SavedVariable& v) override {
    if (v.packed()->storage->device == device_of_saved(v)) return v.packed();
    return as_hook_op("save_on_cpu unpack", [&] { return converted_copy(v.packed(), v.dtype, device_of_saved(v)); });
  }
  static std::string device_of_saved(const SavedVariable& v) {
    return !v.hooked || v.hooked->device.empty() ? "cpu" : v.hooked->device;
  }
};

// fp16 / bf16 packing, as the exported script defines it: pack `t.to(torch.float16)` and
// unpack `packed.to(original dtype)`, for floating tensors only; integer and bool tensors
// (indices, masks) are kept as they are, since a cast would corrupt indices above 2048.
// `.to()` to the tensor's own dtype returns the tensor itself (no copy).
class CastHooks : public SavedTensorHooks {
 public:
  explicit CastHooks(DType d) : d_(d) {}
  std::string kind() const override { return d_ == DType::Float16 ? "fp16" : "bf16"; }
  Tensor pack(SavedVariable&, const Tensor& t) override {
    if (!is_floating(t->dtype()) || t->dtype() == d_) return detached_alias(t);
    return as_hook_op(kind() + " pack", [&] { return converted_copy(t, d_, t->storage->device); });
  }
  Tensor unpack(SavedVariable& v) override {
    if (v.packed()->dtype() == v.dtype) return v.packed();
    return as_hook_op(kind() + " unpack", [&] { return converted_copy(v.packed(), v.dtype, v.packed()->storage->device); });
  }

 private:
  DType d_;
};
}  // namespace

void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks) { hooks_stack().push_back(std::move(hooks)); }
void pop_saved_tensor_hooks() {
  if (!hooks_stack().empty()) hooks_stack().pop_back();
}
std::shared_ptr<SavedTensorHooks> current_saved_tensor_hooks() {
  return hooks_stack().empty() ? nullptr : hooks_stack().back();
}

std::shared_ptr<SavedTensorHooks> make_block_hooks(const std::string& kind) {
  if (kind == "count") return std::make_shared<CountHooks>();
  if (kind == "save_on_cpu") return std::make_shared<SaveOnCpuHooks>();
  if (kind == "fp16") return std::make_shared<CastHooks>(DType::Float16);
  if (kind == "bf16") return std::make_shared<CastHooks>(DType::BFloat16);
  return nullptr;
}

static void announce_save(const Node& node, SavedEntry& e, const Tensor& t) {
  e.var.shape = t->sizes;
  e.var.from_python_number = t->is_wrapped_number;
  e.var.storage_id = t->storage->id;
  e.var.storage_bytes = t->storage->nbytes();
  e.var.id = id_counters().saved++;
  e.var.saved_at = run_position().statement;
  Event ev;
  ev.kind = Event::Kind::Save;
  ev.saved_id = e.var.id;
  ev.node_id = node.id;
  ev.bytes = e.var.nbytes();
  auto st = e.var.held_storage();
  ev.storage_id = st ? st->id : -1;
  e.what = saved_value_name(node.name, e.name);
  ev.what = e.what;
  if (e.var.hooks) {
    // saved_bytes counts what the pack function is handed; the hooks may keep another
    // storage (an fp16 copy) or nothing (checkpoint).
    ev.storage_id = t->storage->id;
    ev.hooks = e.var.hooks->kind();
    ev.packed_storage_id = e.var.packed() ? e.var.packed()->storage->id : -1;
    ev.packed_bytes = e.var.packed() ? e.var.packed()->nbytes() : 0;
  }
  emit(ev);
  if (e.var.hooks) {
    ev.kind = Event::Kind::Pack;
    emit(ev);
  }
}

// Saving under hooks (SavedVariable's constructor with default hooks, 1.13): keep the
// metadata unpack needs, hand the tensor to the pack function, keep only its result.
// Python scalars are handed to the hooks too in this build (measured: `x * 3.0` packs an
// f64[] tensor). Returns false when no hooks are installed.
static bool save_under_hooks(SavedEntry& e, const Tensor& t, bool is_output, int output_nr) {
  std::shared_ptr<SavedTensorHooks> hooks = current_saved_tensor_hooks();
  if (!hooks) return false;
  SavedVariable& v = e.var;
  v.defined = true;
  v.is_output = is_output;
  v.sizes = t->sizes;
  v.strides = t->strides;
  v.offset = t->offset;
  v.version = t->version;
  v.saved_version = t->version->version;
  v.output_nr = is_output ? output_nr : t->output_nr;
  v.tensor_id = t->id;
  v.dtype = t->dtype();
  SavedVariable::Hooked& h = v.hooked_state();
  h.device = t->storage->device;
  h.was_leaf = !is_output && t->is_leaf();
  if (h.was_leaf) {
    h.leaf_requires_grad = t->requires_grad();
    h.grad_accumulator = t->grad_accumulator;
  } else if (!is_output) {
    h.input_grad_fn = t->grad_fn;
  }
  v.hooks = hooks;
  Tensor packed = hooks->pack(v, t);  // the hooks may note things in v (checkpoint: its slot)
  v.hooked->packed = std::move(packed);
  return true;
}

// A new saved entry, filled in place (SavedEntry is large: building it aside and moving it
// in cost ~100 instructions per save; issue #6).
SavedEntry& Node::new_saved_entry(const std::string& attr, bool is_tensor) {
  SavedEntry& e = saved.emplace_back();
  e.name = InternedString::recent(attr);  // "self", "other", "result": among the recent texts
  e.is_tensor = is_tensor;
  return e;
}

// Saves the last entry under the installed saved-tensor hooks and announces it (false:
// no hooks installed). A pack that throws takes the entry out again, so that a failed save
// leaves no entry, as when entries were built aside.
bool Node::hooked_save(SavedEntry& e, const Tensor& t, bool is_output, int output_nr) {
  bool hooked = false;
  try {
    hooked = save_under_hooks(e, t, is_output, output_nr);
  } catch (...) {
    saved.pop_back();
    throw;
  }
  if (hooked) announce_save(*this, e, t);
  return hooked;
}

void Node::save_input(const std::string& attr, const Tensor& t, bool needed) {
  saved_state_changed();
  SavedEntry& e = new_saved_entry(attr, true);
  if (needed && t && hooked_save(e, t, false, 0)) return;
  if (needed && t) {
    e.var.defined = true;
    e.var.original = t;
    e.var.version = t->version;
    e.var.saved_version = t->version->version;
    e.var.tensor_id = t->id;
    e.var.dtype = t->dtype();
    announce_save(*this, e, t);
  }
}

void Node::save_output(const std::string& attr, const Tensor& t, int output_nr, bool needed) {
  saved_state_changed();
  SavedEntry& e = new_saved_entry(attr, true);
  if (needed && t && hooked_save(e, t, true, output_nr)) return;
  if (needed && t) {
    e.var.defined = true;
    e.var.is_output = true;
    e.var.storage = t->storage;
    e.var.sizes = t->sizes;
    e.var.strides = t->strides;
    e.var.offset = t->offset;
    e.var.version = t->version;
    e.var.saved_version = t->version->version;
    e.var.output_nr = output_nr;
    e.var.tensor_id = t->id;
    e.var.dtype = t->dtype();
    announce_save(*this, e, t);
  }
}

void Node::save_attr(const std::string& attr, AttrValue v) {
  saved_state_changed();
  SavedEntry& e = new_saved_entry(attr, false);
  e.attr = std::make_unique<AttrValue>(std::move(v));
}

SavedEntry* Node::find(const std::string& attr) {
  for (auto& e : saved)
    if (e.name == attr) return &e;
  return nullptr;
}

const SavedEntry* Node::find(const std::string& attr) const {
  for (auto& e : saved)
    if (e.name == attr) return &e;
  return nullptr;
}

SavedVariable* Node::checked_saved(const std::string& attr) {
  SavedEntry* e = find(attr);
  return e ? checked_entry(*e) : nullptr;
}

SavedVariable* Node::checked_entry(SavedEntry& entry) {
  if (!entry.is_tensor || !entry.var.defined) return nullptr;
  SavedVariable& v = entry.var;
  if (v.released) {
    // PyTorch: "Trying to backward through the graph a second time ..." raised by
    // SavedVariable::unpack once release_variables() has run.
    ScenarioError err("saved_tensors_freed",
                      "Trying to backward through the graph a second time (or directly access saved "
                      "tensors after they have already been freed). Saved intermediate values of the "
                      "graph are freed when you call .backward() or autograd.grad(). Specify "
                      "retain_graph=True if you need to backward through the graph a second time or "
                      "if you need to access saved tensors after calling backward.");
    err.facts = {{"node", name}, {"node_id", id}, {"attribute", "_saved_" + entry.name.str()},
                 {"released_at", v.released_at}, {"saved_at", v.saved_at}};
    throw err;
  }
  if (v.hooks) return &v;
  const int64_t current = v.version->version;
  if (current != v.saved_version) {
    const InternedShape sz = v.original ? v.original->sizes : v.sizes;
    std::string which;
    // For a saved input PyTorch names the tensor's *current* grad_fn (a stale view's is
    // regenerated first, as reading grad_fn does).
    if (!v.is_output && !multi_output_view_rebased(v.original)) refresh_view_grad_fn(v.original);
    if (v.is_output) {
      which = ", which is output " + std::to_string(v.output_nr) + " of " + qualified_name() + ",";
    } else if (v.original->grad_fn) {
      which = ", which is output " + std::to_string(v.original->output_nr) + " of " +
              v.original->grad_fn->qualified_name() + ",";
    }
    ScenarioError err("saved_tensor_modified",
                      "one of the variables needed for gradient computation has been modified by an "
                      "inplace operation: [torch." + dtype_tensor_type(v.dtype) + " " + shape_str(sz) +
                          "]" + which + " is at version " + std::to_string(current) +
                          "; expected version " + std::to_string(v.saved_version) +
                          " instead. Hint: enable anomaly detection to find the operation that failed to compute "
                          "its gradient, with torch.autograd.set_detect_anomaly(True).");
    err.facts = {{"node", name},
                 {"node_id", id},
                 {"attribute", "_saved_" + entry.name.str()},
                 {"expected_version", v.saved_version},
                 {"found_version", current},
                 {"saved_at", v.saved_at},
                 {"modified_at", v.version->last_bump_statement},
                 {"tensor_shape", sz},
                 {"tensor_type", dtype_tensor_type(v.dtype)}};
    throw err;
  }
  return &v;
}

const SavedVariable* Node::saved_output(const std::string& attr) {
  const SavedVariable* v = checked_saved(attr);
  return v && !v->hooks && v->is_output ? v : nullptr;
}

void Node::skip_unpacked_object() { ++id_counters().tensor; }

Tensor Node::unpack(const std::string& attr) {
  SavedEntry* e = find(attr);
  return e ? unpack_entry(*e) : nullptr;
}

Tensor Node::unpack_entry(SavedEntry& entry) {
  SavedVariable* checked = checked_entry(entry);
  if (!checked) return nullptr;
  SavedVariable& v = *checked;
  if (v.hooks) return unpack_hooked(entry.name.str(), v);
  if (!v.is_output) return v.original;
  auto t = make_shared_object<TensorImpl>();
  t->storage = v.storage;
  t->sizes = v.sizes;
  t->strides = v.strides;
  t->offset = v.offset;
  t->version = v.version;
  // torch 1.13 SavedVariable::unpack: weak_grad_fn_.lock() for an in-place edit of a view
  // (measured: with the view kept alive the gradient graph shows its AsStridedBackward0;
  // with a temporary view, the saving node, e.g. ReluBackward0).
  auto view_fn = v.inplace_view_grad_fn();
  t->grad_fn = view_fn ? view_fn : shared_from_this();
  t->output_nr = view_fn ? 0 : v.output_nr;
  return t;
}

// SavedVariable::unpack with hooks (1.13): no version check ("we can't track versions
// through the hooks"); the data comes from the unpack function and is wrapped in a new
// tensor object that shares the original's version counter, with the saved grad_fn (the
// input's at save time, or this node for a saved output) or, for a leaf, its
// requires_grad and grad accumulator (measured: `_saved_self is x` is False, and it is a
// leaf that requires grad). An Unpack event carries both versions, so the report can warn
// where an in-place edit went unchecked.
Tensor Node::unpack_hooked(const std::string& attr, SavedVariable& v) {
  Tensor data = v.hooks->unpack(v);
  Event ev;
  ev.kind = Event::Kind::Unpack;
  ev.saved_id = v.id;
  ev.node_id = id;
  ev.bytes = v.nbytes();
  ev.storage_id = data ? data->storage->id : -1;
  ev.what = saved_value_name(name.str(), attr);
  ev.hooks = v.hooks->kind();
  ev.version = v.version->version;
  ev.expected_version = v.saved_version;
  emit(ev);
  if (!data) return nullptr;
  auto t = make_shared_object<TensorImpl>();
  t->storage = data->storage;
  t->sizes = data->sizes;
  t->strides = data->strides;
  t->offset = data->offset;
  t->version = v.version;
  if (v.is_output) {
    auto view_fn = v.inplace_view_grad_fn();  // as in unpack() above
    t->grad_fn = view_fn ? view_fn : shared_from_this();
    t->output_nr = view_fn ? 0 : v.output_nr;
  } else if (!v.hooked->was_leaf) {
    t->grad_fn = v.hooked->input_grad_fn ? v.hooked->input_grad_fn : shared_from_this();
    t->output_nr = v.output_nr;
  } else {
    t->requires_grad_flag = v.hooked->leaf_requires_grad;
    t->grad_accumulator = v.hooked->grad_accumulator;
  }
  t->grad_fn_version = t->version->version;
  return t;
}

const AttrValue& Node::attr(const std::string& name_) const {
  static const AttrValue none;
  const SavedEntry* e = find(name_);
  return e && e->attr ? *e->attr : none;
}

void Node::release_saved(int statement) {
  saved_state_changed();
  release_saved_values(statement);
}

// A dying node's releases change no live node's snapshot: the destructor calls this
// directly, without counting a change.
void Node::release_saved_values(int statement) {
  // torch 1.13's CopySlices::release_variables only drops its reference to the wrapped node
  // (fn = nullptr): the node's saved values die with it, unless a create_graph=True gradient
  // still holds it (its saved result unpacked, e.g. ThresholdBackwardBackward0 -> ReluBackward0
  // after h[:, 1].relu_(); measured: a second autograd.grad through both succeeds).
  if (const auto& w = wrapped(); w && w.use_count() == 1) w->release_saved_values(statement);
  for (auto& e : saved) {
    if (!e.is_tensor || !e.var.defined || e.var.released) continue;
    e.var.released = true;
    e.var.released_at = statement;
    Event ev;
    ev.kind = Event::Kind::Release;
    ev.saved_id = e.var.id;
    ev.node_id = id;
    ev.bytes = e.var.nbytes();
    auto st = e.var.held_storage();
    ev.storage_id = st ? st->id : -1;
    emit(ev);
    if (e.var.hooks) e.var.hooks->release(e.var);
    e.var.original.reset();
    e.var.storage.reset();
    if (e.var.hooked) {
      e.var.hooked->packed.reset();
      e.var.hooked->input_grad_fn.reset();
    }
  }
  if (!released) {
    released = true;
    released_at = statement;
  }
}

int64_t Node::saved_bytes() const {
  int64_t n = wrapped() ? wrapped()->saved_bytes() : 0;
  for (auto& e : saved)
    if (e.is_tensor && e.var.defined && !e.var.released) n += e.var.nbytes();
  return n;
}

namespace {
Shared<Node> grad_accumulator(const Tensor& leaf) {
  if (auto acc = leaf->grad_accumulator.lock()) return acc;
  auto acc = make_shared_object<Node>();
  acc->name = "AccumulateGrad";
  acc->cpp_name_prefix = true;
  // AccumulateGrad runs as soon as it is ready (PyTorch gives it sequence_nr UINT64_MAX).
  acc->runs_first = true;
  acc->variable = leaf;
  acc->outputs.push_back({leaf->sizes, leaf->dtype(), leaf->is_meta(), leaf->storage->on_device()});
  leaf->grad_accumulator = acc;
  return acc;
}
}  // namespace

Edge gradient_edge(const Tensor& t) {
  check_no_grad_view_current(t);
  refresh_view_grad_fn(t);
  if (!t || !t->requires_grad()) return {};
  if (t->grad_fn) return {t->grad_fn, t->output_nr};
  // Only a leaf that itself requires grad has an AccumulateGrad; a view that requires grad
  // through its base alone has no edge (impl::grad_accumulator returns null: measured, b*2
  // of such a view has next_functions ((None, 0), (None, 0))).
  if (!t->requires_grad_flag) return {};
  return {grad_accumulator(t), 0};
}

namespace {
Shared<Node> node_with_inputs(std::string_view name, BackwardFn fn, const Tensor* inputs, size_t count,
                              size_t saves) {
  auto node = make_shared_object<Node>();
  node->name = InternedString::recent(name);  // ops name their nodes with a few texts, again and again
  node->backward = fn;
  if (saves > 1) node->saved.reserve(saves);
  node->next.reserve(count);
  node->input_meta.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const Tensor& t = inputs[i];
    node->next.push_back(gradient_edge(t));
    node->input_meta.push_back(t ? OutputMeta{t->sizes, t->dtype(), t->is_meta(), t->storage->on_device()} : OutputMeta{});
  }
  return node;
}
}  // namespace

Shared<Node> make_node(std::string_view name, BackwardFn fn, const std::vector<Tensor>& inputs,
                       size_t saves) {
  return node_with_inputs(name, fn, inputs.data(), inputs.size(), saves);
}

Shared<Node> make_node(std::string_view name, BackwardFn fn, std::initializer_list<Tensor> inputs,
                       size_t saves) {
  return node_with_inputs(name, fn, inputs.begin(), inputs.size(), saves);
}

void set_history(const Tensor& result, const Shared<Node>& node, int output_nr) {
  result->grad_fn = node;
  result->grad_fn_version = result->version->version;
  result->output_nr = output_nr;
  if (static_cast<int>(node->outputs.size()) <= output_nr) node->outputs.resize(output_nr + 1);
  node->outputs[output_nr] = {result->sizes, result->dtype(), result->is_meta(), result->storage->on_device()};
}

namespace {

// AsStridedBackward0: the gradient of the base is zeros with the view's gradient placed at
// the view's size, stride and storage offset (as_strided_backward).
std::vector<Tensor> as_strided_backward(Node& n, const std::vector<Tensor>& g) {
  const Node::Geometry& geo = *n.geometry;
  return {kernels::view_backward(g[0], geo.base_sizes, geo.sizes, geo.strides, geo.offset - geo.base_offset,
                                 &geo.base_strides)};
}

// CopySlices::apply: the base's gradient is copied, the view's slice of it is run through
// the wrapped node, and that node's gradient for the view is written back into the slice;
// its other gradients go to the other inputs.
std::vector<Tensor> copy_slices_backward(Node& n, const std::vector<Tensor>& g) {
  const Node::Geometry& geo = *n.geometry;
  // grad.new_empty_strided(base.sizes(), base.strides()).copy_(grad)
  Tensor result = geo.base_strides == contiguous_strides(geo.base_sizes)
                      ? kernels::copy(g[0])
                      : copy_to(g[0], g[0]->dtype(), g[0]->storage->device, &geo.base_strides);
  Tensor slice = make_alias(result, geo.sizes, geo.strides, geo.offset - geo.base_offset);
  Tensor slice_grad = kernels::copy(slice);
  Node& fn = *n.wrapped();
  std::vector<Tensor> res = fn.backward(fn, {slice_grad});
  if (kernels::device::on_device(slice)) {  // the copy kernel writes the slice on cuda
    if (!res.empty() && res[0]) kernels::device::copy_into(slice, res[0]);
    else kernels::device::fill(slice, 0.0);
  } else if (!res.empty() && res[0]) {
    copy_values(slice, res[0]);
  } else {
    write_values(slice, std::vector<double>(static_cast<size_t>(slice->numel()), 0.0));
  }
  std::vector<Tensor> out{result};
  for (size_t i = 1; i < res.size(); ++i) out.push_back(res[i]);
  return out;
}

std::vector<Tensor> as_strided_dbackward(Node& n, const std::vector<Tensor>& g);

Shared<Node> make_as_strided(const Tensor& view) {
  const Tensor& base = view->base;
  auto node = make_node("AsStridedBackward0", as_strided_backward, {base});
  node->differentiable_backward = as_strided_dbackward;
  node->geometry.reset(
      new Node::Geometry{view->sizes, view->strides, view->offset, base->sizes, base->strides, base->offset, nullptr});
  node->save_attr("size", AttrValue::ints(view->sizes));
  node->save_attr("storage_offset", AttrValue::integer(view->offset));
  node->save_attr("stride", AttrValue::ints(view->strides));
  return node;
}

// ---- create_graph=True through CopySlices and AsStridedBackward0 (torch 1.13) ----------

// CopyBackwards (copy_ in place): edges (self, src); self's gradient is zeros_like(grad),
// src's the gradient itself. Inside CopySlices the zeros are what lands in the slice.
std::vector<Tensor> copy_backwards_self_zero(Node&, const std::vector<Tensor>& g) { return {nullptr, g[0]}; }

// t.as_strided(sizes, strides, offset) on a tensor that is not itself a view: a view that
// records AsStridedBackward0 when `base` requires grad in grad mode.
Tensor as_strided_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  Tensor v = make_alias(base, sizes, strides, base->offset + offset);
  v->base = base->base ? base->base : base;
  v->view_made_in_no_grad = view_creation_in_no_grad(base);
  if (grad_enabled() && base->requires_grad()) set_history(v, make_as_strided(v));
  return v;
}

// dst.copy_(src) in grad mode: CopyBackwards with edges (dst, src), rebased as any in-place
// edit (a view's base gets CopySlices wrapping it).
void copy_in_place(const Tensor& dst, const Tensor& src) {
  Shared<Node> node;
  if (grad_enabled() && (dst->requires_grad() || src->requires_grad())) {
    node = make_node("CopyBackwards", copy_backwards_self_zero, {dst, src});
    node->cpp_name_prefix = true;
    node->differentiable_backward = copy_backwards_self_zero;
  }
  // On cuda the copy kernel (src on cuda, or a 0-d CPU scalar); copy_ across devices is a
  // transfer agtrace does not route yet (to_values/write_values refuse, naming the op).
  if (kernels::device::on_device(dst) && (kernels::device::on_device(src) || src->dim() == 0))
    kernels::device::copy_into(dst, src);
  else if (!dst->is_meta()) copy_values(dst, src);
  dst->version->bump();
  Event e;
  e.kind = Event::Kind::VersionBump;
  e.storage_id = dst->storage->id;
  e.version = dst->version->version;
  emit(e);
  if (!node) return;
  if (dst->is_view())
    rebase_view_history(dst, node);
  else
    set_history(dst, node);
}

[[noreturn]] void unsupported_through(const std::string& what) {
  throw ScenarioError("unsupported", "create_graph=True through " + what + " is not supported yet");
}

// CopySlices::apply in grad mode (torch/csrc/autograd/functions/tensor.cpp, 1.13):
//   result = grad.new_empty_strided(base geometry); result.copy_(grad)   -> CopyBackwards
//   grad_slice = result.as_strided(view geometry)                         -> AsStridedBackward0
//   res = fn(grad_slice.clone())                                          -> CloneBackward0
//   grad_slice.copy_(res[0])            -> CopyBackwards, rebased: result's grad_fn CopySlices
// (measured: `h[:, 1].mul_(w)` gives CopySlices -> (CopyBackwards, MulBackward0 ->
// (CloneBackward0 -> AsStridedBackward0 -> CopyBackwards, w))). Third order through the
// CopySlices this records (it wraps CopyBackwards) is not measured yet, so it raises.
std::vector<Tensor> copy_slices_dbackward(Node& n, const std::vector<Tensor>& g) {
  const Node::Geometry& geo = *n.geometry;
  Node& fn = *n.wrapped();
  if (!fn.differentiable_backward || fn.name == "CopyBackwards")
    unsupported_through("CopySlices (wrapping " + fn.name + ")");
  if (!geo.base_strides.empty() && geo.base_strides != contiguous_strides(geo.base_sizes))
    unsupported_through("CopySlices of a non-contiguous base");
  Tensor result = kernels::copy(g[0]);
  if (grad_enabled() && g[0]->requires_grad()) {
    auto node = make_node("CopyBackwards", copy_backwards_self_zero, {nullptr, g[0]});
    node->cpp_name_prefix = true;
    node->differentiable_backward = copy_backwards_self_zero;
    set_history(result, node);
  }
  Tensor slice = as_strided_view(result, geo.sizes, geo.strides, geo.offset - geo.base_offset);
  Tensor slice_grad = ops::clone_contiguous(slice);  // grad_slice.clone(MemoryFormat::Contiguous)
  // The wrapped node computes the gradients CopySlices is asked for (its edges past the
  // first are CopySlices' own); the slice's gradient is always needed.
  fn.task_outputs = std::make_unique<std::vector<bool>>(fn.next.size(), true);
  if (n.task_outputs)
    for (size_t i = 1; i < fn.next.size() && i < n.task_outputs->size(); ++i) (*fn.task_outputs)[i] = (*n.task_outputs)[i];
  std::vector<Tensor> res;
  try {
    res = fn.differentiable_backward(fn, {slice_grad});
  } catch (...) {
    fn.task_outputs.reset();
    throw;
  }
  fn.task_outputs.reset();
  std::vector<Tensor> out{n.should_compute_output(0) ? result : nullptr};
  if (n.should_compute_output(0)) {
    if (res.empty() || !res[0]) unsupported_through("CopySlices whose view has no gradient");
    copy_in_place(slice, res[0]);
  }
  for (size_t i = 1; i < res.size(); ++i) out.push_back(n.should_compute_output(i) ? res[i] : nullptr);
  return out;
}

// as_strided_backward in grad mode (FunctionsManual.cpp, 1.13) for a view that does not
// overlap itself of a contiguous base: storage = grad.new_zeros(base size);
// storage.as_strided(view geometry).copy_(grad) (CopySlices wrapping CopyBackwards, edges
// (None, grad)); the result is storage.as_strided(base geometry) (AsStridedBackward0)
// (measured: `v = h.view(-1); v.mul_(3)` gives AsStridedBackward0 -> CopySlices -> (None, ...)).
std::vector<Tensor> as_strided_dbackward(Node& n, const std::vector<Tensor>& g) {
  const Node::Geometry& geo = *n.geometry;
  if (geo.base_strides != contiguous_strides(geo.base_sizes))
    unsupported_through("AsStridedBackward0 of a non-contiguous base");
  for (size_t d = 0; d < geo.sizes.size(); ++d)
    if (geo.strides[d] == 0 && geo.sizes[d] > 1) unsupported_through("AsStridedBackward0 of an overlapping view");
  // It first simplifies the output geometry: every size-1 dim of the gradient is squeezed,
  // last dim first (grad.squeeze(i), SqueezeBackward1; measured in test_inplace_on_view_backward:
  // SqueezeBackward1 under CopySlices for a (1, 3, 2, 2) view), and the slot has the other dims.
  Tensor grad = g[0];
  Shape out_sizes = geo.sizes, out_strides = geo.strides;
  if (std::find(geo.sizes.begin(), geo.sizes.end(), 0) == geo.sizes.end())
    for (size_t i = geo.sizes.size(); i-- > 0;)
      if (geo.sizes[i] == 1) {
        grad = ops::squeeze(grad, static_cast<int64_t>(i));
        out_sizes.erase(out_sizes.begin() + static_cast<std::ptrdiff_t>(i));
        out_strides.erase(out_strides.begin() + static_cast<std::ptrdiff_t>(i));
      }
  Tensor storage = kernels::full(geo.base_sizes, 0.0, g[0]->dtype(), g[0]->is_meta());
  Tensor slot = as_strided_view(storage, out_sizes, out_strides, geo.offset - geo.base_offset);
  copy_in_place(slot, grad);
  return {as_strided_view(storage, geo.base_sizes, geo.base_strides, 0)};
}

}  // namespace

void rebase_view_history(const Tensor& view, const Shared<Node>& fn) {
  const Tensor& base = view->base;
  // CopySlices lays the base's gradient out in the base's strides (new_empty_strided); a
  // base that does not fill its storage densely is not modelled.
  if (!ops::non_overlapping_and_dense(base))
    throw ScenarioError("unsupported", "in-place operation on a view of a base that is not dense is not supported yet");
  auto cs = make_shared_object<Node>();
  cs->name = "CopySlices";
  cs->cpp_name_prefix = true;
  cs->backward = copy_slices_backward;
  cs->differentiable_backward = copy_slices_dbackward;
  cs->geometry.reset(
      new Node::Geometry{view->sizes, view->strides, view->offset, base->sizes, base->strides, base->offset, fn});
  cs->next.push_back(gradient_edge(base));
  cs->input_meta.push_back({base->sizes, base->dtype(), base->is_meta()});
  for (size_t i = 1; i < fn->next.size(); ++i) {
    cs->next.push_back(fn->next[i]);
    cs->input_meta.push_back(fn->input_meta[i]);
  }
  set_history(base, cs);
  set_history(view, make_as_strided(view));
}

bool no_grad_view_stale(const Tensor& t) {
  // VariableHooks::grad_fn returns early for a view with no grad_fn of a base that does not
  // require grad; otherwise a version change goes to handle_view_on_rebase.
  return t && t->is_view() && t->view_made_in_no_grad && t->grad_fn_version != t->version->version &&
         (t->grad_fn || t->base->requires_grad());
}

void check_no_grad_view_current(const Tensor& t) {
  if (no_grad_view_stale(t)) throw_view_rebase_error(t, true);
}

bool multi_output_view_rebased(const Tensor& t) {
  return t && t->is_view() && t->grad_fn_version != t->version->version && t->grad_fn &&
         t->base->requires_grad() && !t->multi_output_node.empty();
}

void refresh_view_grad_fn(const Tensor& t) {
  if (!t || !t->is_view() || t->grad_fn_version == t->version->version) return;
  // Views made in grad mode are regenerated, also one taken before its base required grad
  // (measured: b = a[:]; a.add_(r) gives b.grad_fn AsStridedBackward0 over AddBackward0).
  // A view made in no_grad is not: PyTorch raises when its grad_fn is read then.
  if (t->view_made_in_no_grad || !t->base->requires_grad()) return;
  if (multi_output_view_rebased(t)) throw_view_rebase_error(t, true);
  set_history(t, make_as_strided(t));
}

// handle_view_on_rebase (torch/csrc/autograd/variable.cpp, 1.13): the message names the
// view's node when it has one, else says it was made in no_grad mode (also for an output
// of split/unbind made in grad mode of a base that did not require grad, measured).
void throw_view_rebase_error(const Tensor& view, bool indirect) {
  // A view made in grad mode of a no_grad view has a grad_fn and inherits NO_GRAD_MODE; 1.13's
  // handle_view_on_rebase then fails `TORCH_INTERNAL_ASSERT(!grad_fn)` (measured) instead of
  // raising a user error, so agtrace does not pretend to know the outcome.
  if (view->view_made_in_no_grad && view->grad_fn)
    throw ScenarioError("unsupported", std::string(indirect ? "a view of a view made in no_grad mode whose base was "
                                                              "modified inplace"
                                                            : "an in-place edit of a view of a view made in no_grad "
                                                              "mode") +
                                           ": PyTorch 1.13 fails an internal assert (!grad_fn) here");
  const std::string modified = indirect ? "its base or another view of its base has been" : "is being";
  const bool multi_output = !view->multi_output_node.empty() && !view->view_made_in_no_grad;
  std::string msg = view->grad_fn && multi_output
                        ? "Output " + std::to_string(view->output_nr) + " of " + view->grad_fn->name.str() +
                              " is a view and " + modified + " modified inplace."
                        : "A view was created in no_grad mode and " + modified + " modified inplace with grad mode enabled.";
  if (multi_output)
    msg += " This view is the output of a function that returns multiple views. Such functions do not allow the "
           "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.";
  else
    msg += " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
           "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
           "inplace to be tracked) or both outside (if you want the inplace to be tracked).";
  ScenarioError e("view_inplace", msg);
  if (multi_output) e.facts = {{"node", view->multi_output_node.str()}};
  throw e;
}

}  // namespace agtrace::autograd
