#include "interp/interpreter.hpp"
#include "account/save_rules.hpp"  // issue #4: why saved

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "account/accountant.hpp"
#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "cuda/device.hpp"
#include "errors.hpp"
#include "interp/autocast.hpp"
#include "interp/holder_tracker.hpp"
#include "interp/builtins.hpp"
#include "interp/indexing.hpp"
#include "interp/suggest.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table.hpp"
#include "syntax/ast.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/events.hpp"
#include "tensor/kernels.hpp"
#include "util/profile.hpp"

namespace agtrace {

using syntax::Expr;
using syntax::ExprKind;
using syntax::Stmt;
using syntax::StmtKind;

namespace {

[[noreturn]] void fail(const std::string& kind, const std::string& message) { throw ScenarioError(kind, message); }

// The devices of an op's tensor arguments (inside tuples and lists too): `cpu` counts CPU
// tensors of one or more dimensions only (see device_of_arguments).
struct ArgumentDevices {
  bool cuda = false, cpu = false;
};
void note_devices(const Value& v, ArgumentDevices& d) {
  if (v.kind == Value::Kind::Tensor && v.t) {
    if (v.t->storage->on_device()) d.cuda = true;
    else if (!v.t->is_meta() && v.t->dim() > 0) d.cpu = true;
  }
  if (v.kind == Value::Kind::List || v.kind == Value::Kind::Tuple)
    for (const Value& item : v.items) note_devices(item, d);
}

// The device an op's results are made on: cuda when a tensor argument is on cuda (PyTorch:
// results live with their operands). A cuda tensor with a CPU tensor of one or more
// dimensions is PyTorch's "Expected all tensors to be on the same device" error; a 0-d
// CPU tensor mixes with cuda tensors as a scalar does (TensorIterator allows it).
// `mixing_allowed` (asked only when a cuda tensor is there): moves (to, cuda, cpu) and
// introspection take tensors of either device. The names returned are the scopes' own
// (no string built per op: issue #6).
template <typename MixingAllowed>
const std::string& device_from(const ArgumentDevices& d, const std::string& op, MixingAllowed mixing_allowed) {
  if (!d.cuda) return cpu_device_name();
  if (d.cpu && !mixing_allowed()) {
    ScenarioError e("device_mismatch",
                    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
    e.facts = {{"op", op}, {"devices", {"cuda:0", "cpu"}}};
    throw e;
  }
  return cuda_device_name();
}

const std::string& device_of_arguments(std::initializer_list<const Value*> values, const std::string& op,
                                       bool mixing_allowed = false) {
  ArgumentDevices d;
  for (const Value* v : values)
    if (v) note_devices(*v, d);
  return device_from(d, op, [&] { return mixing_allowed; });
}

const std::string& device_of_arguments(const ops::OpEntry& entry, const ops::Args& args) {
  ArgumentDevices d;
  for (const auto& v : args.values)
    if (v) note_devices(*v, d);
  // matmul is composite in PyTorch (its batched branch broadcasts shapes before any kernel's
  // device check): ops::matmul checks devices itself, in PyTorch's order.
  return device_from(d, entry.name, [&] {
    return entry.category == "conversion" || entry.category == "introspection" || entry.name == "matmul";
  });
}

std::optional<DType> torch_dtype_attr(const std::string& name) {
  static const std::map<std::string, DType> m = {
      {"float32", DType::Float32}, {"float", DType::Float32},    {"float64", DType::Float64},
      {"double", DType::Float64},  {"float16", DType::Float16},  {"half", DType::Float16},
      {"bfloat16", DType::BFloat16}, {"int64", DType::Int64},    {"long", DType::Int64},
      {"bool", DType::Bool}};
  auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

Value attr_to_value(const autograd::AttrValue& a) {
  using K = autograd::AttrValue::Kind;
  switch (a.kind) {
    case K::None: return Value::none();
    case K::Int: { Value v = Value::integer(a.i); v.unsigned_int = a.as_uint64 && a.i < 0; return v; }
    case K::Double: return Value::real(a.d);
    case K::Bool: return Value::boolean(a.b);
    case K::String: return Value::str(a.s);
    case K::IntList: {
      std::vector<Value> items;
      for (int64_t x : a.list) {
        Value v = Value::integer(x);
        v.unsigned_int = a.as_uint64 && x < 0;
        items.push_back(v);
      }
      return Value::tuple(std::move(items));
    }
    case K::RealList: {
      std::vector<Value> items;
      for (double x : a.reals) items.push_back(Value::real(x));
      return Value::tuple(std::move(items));
    }
  }
  return Value::none();
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.i != 0;
    case Value::Kind::Float: return v.f != 0.0;
    case Value::Kind::Str: return !v.s.empty();
    case Value::Kind::Tuple:
    case Value::Kind::List: return !v.items.empty();
    case Value::Kind::Size: return !v.size.empty();
    case Value::Kind::Tensor:
      if (v.t->numel() != 1) fail("type_error", "Boolean value of Tensor with more than one value is ambiguous");
      if (v.t->is_meta()) fail("unsupported", "Boolean value of a meta tensor is not known");
      return item(v.t) != 0.0;
    default: return true;
  }
}

// Python equality for non-tensor values.
bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  auto seq = [](const Value& v) -> std::optional<std::vector<Value>> {
    if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) return v.items;
    if (v.kind == Value::Kind::Size) {
      std::vector<Value> out;
      for (int64_t x : v.size) out.push_back(Value::integer(x));
      return out;
    }
    return std::nullopt;
  };
  auto sa = seq(a), sb = seq(b);
  if (sa && sb) {
    // A list never equals a tuple in Python; torch.Size is a tuple.
    const bool la = a.kind == Value::Kind::List, lb = b.kind == Value::Kind::List;
    if (la != lb || sa->size() != sb->size()) return false;
    for (size_t i = 0; i < sa->size(); ++i)
      if (!py_equal((*sa)[i], (*sb)[i])) return false;
    return true;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::None: return true;
    case Value::Kind::Str: return a.s == b.s;
    case Value::Kind::DType: return a.dtype == b.dtype;
    case Value::Kind::Node: return a.node == b.node;
    case Value::Kind::Module: return a.s == b.s;
    default: return false;
  }
}

bool py_is(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::None: return true;
    case Value::Kind::Tensor: return a.t == b.t;
    case Value::Kind::Node: return a.node == b.node;
    case Value::Kind::Bool: return a.b == b.b;
    // Small ints are cached in CPython, so `1 is 1` is True; agtrace treats equal ints so.
    case Value::Kind::Int: return a.i == b.i;
    case Value::Kind::DType: return a.dtype == b.dtype;
    case Value::Kind::Module: return a.s == b.s;
    default: return false;  // a new tuple/list/float object is never `is` another
  }
}

std::vector<double> display_values(const Tensor& t) {
  std::vector<double> v = host_values(t);  // a cuda tensor's are copied over to show them
  for (double& x : v) x = display_value(x, t->dtype());
  return v;
}

std::string root_label_of(const Expr* e) {
  if (e && e->kind == ExprKind::Name) return e->text;
  return "";
}

// Walks captured after the last statement carry this statement number.
constexpr int kEndOfProgram = -2;

// The data attributes of a tensor (`x.grad_fn`, ...); any other name after a tensor and a
// dot is a method. Names of different lengths are told apart by length alone (most
// lookups are methods, `h.tanh()`: issue #6).
enum class TensorAttr { GradFn, Grad, RequiresGrad, IsLeaf, Shape, Dtype, Version, Ndim, Base, T, MT, Data, RetainsGrad, Device };
constexpr std::pair<std::string_view, TensorAttr> kTensorAttrs[] = {
    {"grad_fn", TensorAttr::GradFn},   {"grad", TensorAttr::Grad},   {"requires_grad", TensorAttr::RequiresGrad},
    {"is_leaf", TensorAttr::IsLeaf},   {"shape", TensorAttr::Shape}, {"dtype", TensorAttr::Dtype},
    {"_version", TensorAttr::Version}, {"ndim", TensorAttr::Ndim},   {"_base", TensorAttr::Base},
    {"T", TensorAttr::T},              {"device", TensorAttr::Device}, {"mT", TensorAttr::MT},
    {"data", TensorAttr::Data},        {"retains_grad", TensorAttr::RetainsGrad}};
bool is_tensor_attribute(const std::string& name) {
  for (const auto& entry : kTensorAttrs)
    if (name.size() == entry.first.size() && name == entry.first) return true;
  return false;
}

// The names in scope (Python's globals of the program), in name order. A Name expression
// reads or binds its name through the slot parse_all gave it, which remembers where the
// name's entry is (std::map entries stay put until erased): a map lookup, comparing the
// text with each name passed, per read and per bind was 3 % of a long chain (issue #6).
// Erasing or replacing entries forgets every remembered place.
class Scope {
 public:
  using Map = std::map<std::string, Value>;
  const Map& map() const { return map_; }
  // Changes whenever a name may have left the scope (erase, clear, replace); with the count
  // of names it tells that the names are the same (HolderTracker::commit).
  uint64_t keys_version() const { return epoch_; }
  void set_slot_count(size_t n) {
    slots_.assign(n, Slot{});
    names_.assign(n, InternedString());
  }
  // `name` interned (slot: its Expr::name_slot, or -1), looked up once per slot.
  InternedString interned(const std::string& name, int slot) {
    if (slot < 0) return InternedString::recent(name);
    InternedString& s = names_[static_cast<size_t>(slot)];
    if (s.empty()) s = InternedString(name);
    return s;
  }
  // The value bound to `name` (slot: its Expr::name_slot, or -1), null when unbound.
  Value* find(const std::string& name, int slot = -1) {
    if (slot >= 0 && slots_[static_cast<size_t>(slot)].epoch == epoch_) return slots_[static_cast<size_t>(slot)].entry;
    auto it = map_.find(name);
    if (it == map_.end()) return nullptr;
    if (slot >= 0) slots_[static_cast<size_t>(slot)] = Slot{&it->second, epoch_};
    return &it->second;
  }
  void set(const std::string& name, const Value& v, int slot = -1) {
    if (Value* entry = find(name, slot)) {
      *entry = v;
      return;
    }
    Value* entry = &map_.emplace(name, v).first->second;
    if (slot >= 0) slots_[static_cast<size_t>(slot)] = Slot{entry, epoch_};
  }
  bool erase(const std::string& name) {
    ++epoch_;
    return map_.erase(name) > 0;
  }
  void clear() {
    ++epoch_;
    map_.clear();
  }
  void replace(Map m) {
    ++epoch_;
    map_ = std::move(m);
  }

 private:
  struct Slot {
    Value* entry = nullptr;
    uint64_t epoch = 0;  // valid while equal to epoch_
  };
  Map map_;
  std::vector<Slot> slots_;
  std::vector<InternedString> names_;  // by slot: the name interned (empty: not yet)
  uint64_t epoch_ = 1;
};

class Interpreter : public ops::Runtime {
 public:
  Interpreter(const Scenario& sc, const RunOptions& opt)
      : sc_(sc), opt_(opt), rng_(sc.seed ^ fnv1a64("__program__")) {
    device_ = opt.device.empty() ? sc.device : opt.device;
    acc_.set_model_device_only(device_ == "cuda");
    const char* verify = std::getenv("AGTRACE_VERIFY_HOLDERS");
    verify_holders_ = opt.verify_holders || (verify && std::string(verify) == "1");
  }

  RunResult run();

  // ops::Runtime
  void print_line(const std::string& line) override { result_.printed.push_back(line); }
  Value backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                 bool create_graph, const std::vector<Tensor>* inputs, bool allow_unused,
                 bool accumulate_inputs, const ScenarioError* argument_error) override;
  std::string device() const override { return device_; }
  SplitMix64& generator() override { return rng_; }

 private:
  const Scenario& sc_;
  RunOptions opt_;
  SplitMix64 rng_;
  std::string device_;
  RunResult result_;
  Accountant acc_;
  std::vector<Stmt> parsed_;
  Scope env_;
  // Looked up per saved value of every snapshot, never iterated: hash maps (issue #6).
  // Indexed by the dense creation-order ids (an empty label: never bound); interned names,
  // copied into every snapshot of a saved value (issue #6).
  std::vector<InternedString> tensor_label_;                 // object id -> latest name bound
  // Storage id -> names bound to tensors on it: an interned list, not a vector per storage
  // (issue #6: a heap block per bound storage, one per op of a chain).
  std::vector<InternedList> storage_labels_;
  const InternedString* tensor_label(int64_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tensor_label_.size() && !tensor_label_[static_cast<size_t>(id)].empty()
               ? &tensor_label_[static_cast<size_t>(id)]
               : nullptr;
  }
  const InternedList* storage_labels(int64_t id) const {
    return id >= 0 && static_cast<size_t>(id) < storage_labels_.size() && !storage_labels_[static_cast<size_t>(id)].empty()
               ? &storage_labels_[static_cast<size_t>(id)]
               : nullptr;
  }
  // why_saved() answers for the few (node, attribute, inputs) a program has, so a snapshot
  // of a long graph does not rebuild the same sentence per node.
  struct WhyEntry {
    InternedString what;  // "<node>._saved_<attr>" (SavedEntry::what)
    size_t inputs = 0;
    InternedString why;
  };
  mutable std::vector<WhyEntry> why_cache_;
  // Snapshots kept as current without a look at the node: a snapshot made or found current
  // when snapshot_epoch() was e still is while it is e (issue #6: the end of a program
  // whose last statement was backward looked at every node of the graph again).
  uint64_t labels_changed_ = 0;            // tensors bound to names (labels may change)
  std::vector<uint64_t> snapshot_stamp_;   // node id -> snapshot_epoch() + 1 when last current
  uint64_t snapshot_epoch() const { return labels_changed_ + autograd::saved_state_changes(); }
  InternedString why_saved_cached(const autograd::Node& n, const autograd::SavedEntry& e) const;
  // A non-tensor saved value's Python repr, interned; numbers and booleans remembered by
  // value (issue #6: `_saved_alpha` of every AddBackward0 was printed and looked up per
  // snapshot).
  InternedString attr_text(const autograd::AttrValue& a) const;
  struct AttrText {
    autograd::AttrValue::Kind kind;
    int64_t i;
    double d;
    bool b, as_uint64;
    InternedString text;
  };
  mutable std::vector<AttrText> attr_texts_;
  std::vector<Tensor> leaves_;                                  // the scenario's leaves, in file order
  bool is_declared_leaf(const TensorImpl& t) const {
    for (const Tensor& leaf : leaves_)
      if (leaf.get() == &t) return true;
    return false;
  }
  // What holds each storage, kept from changes; it forwards every event to acc_.
  HolderTracker tracker_{[this](int64_t id) { return label_of(id); }, &acc_};
  bool verify_holders_ = false;  // check tracker_ against the full scan at every statement end
  int statement_ = -1;
  int64_t calls_run_ = 0;
  int statements_since_memory_check_ = 31;  // check_process_memory: statements since getrusage (the first is checked)
  int64_t live_bytes_at_memory_check_ = 0;  // and the accountant's live bytes then  // operator and function calls, for RunOptions::on_statement_end
  std::string root_label_;                                      // name of the receiver of backward()
  // The enclosing blocks of the statement running, as "repeat/no_grad" paths: entry k is the
  // path through block k (joined once per block entered, not once per statement: issue #6).
  std::vector<std::string> block_paths_;
  void push_block(const char* kind) {
    block_paths_.push_back(block_paths_.empty() ? std::string(kind) : block_paths_.back() + "/" + kind);
    ++blocks_entered_or_left_;
  }
  void pop_block() {
    block_paths_.pop_back();
    ++blocks_entered_or_left_;
  }
  // A statement's block path is set again only when a block was entered or left since it
  // last was (statement index -> blocks_entered_or_left_ + 1 then): comparing the path per
  // statement run was a string comparison each (issue #6).
  uint64_t blocks_entered_or_left_ = 0;
  std::vector<uint64_t> block_stamp_;
  // Saved-tensor hooks and checkpoint blocks (issue #4).
  bool recomputing_ = false;  // a checkpoint body runs again: statements are not new statements
  bool run_saved_tensor_hooks(const ProgramItem& item, bool in_try);
  // torch.autocast regions (spec: autocast) and the casts made in them.
  AutocastState autocast_;
  bool run_autocast(const ProgramItem& item, bool in_try);
  bool run_checkpoint(const ProgramItem& item, bool in_try);
  void recompute_checkpoint(const ProgramItem& item, const std::vector<Value>& args, const SplitMix64& rng,
                            size_t record, autograd::SavedTensorHooks& inner);
  bool rerun_statement(const ProgramItem& item, bool in_try);
  void block_error(const ProgramItem& item, const std::string& kind, const std::string& message, bool in_try);

  // Statements and blocks.
  void parse_all();
  void create_leaves();
  // Returns false when an error ended the enclosing try block (or the program).
  bool run_items(const std::vector<ProgramItem>& items, bool in_try);
  bool run_statement(const ProgramItem& item, bool in_try);
  // Raises `limit` when the process's peak resident memory is beyond --max-process-memory.
  void check_process_memory();
  int64_t process_budget_ = 0;
  void mark_not_run(const std::vector<ProgramItem>& items);
  void exec(const Stmt& s);
  void assign(const Expr& target, const Value& v);
  void exec_augmented(const Stmt& s);
  void bind(const std::string& name, const Value& v, int slot = -1);
  // The statement `index` (-1: the leaves' setup) ends: holder changes to the accountant.
  void end_statement(int index, bool raised);
  // The holder changes of the statement ending, into holder_changes_ (and, when verifying,
  // the check that they agree with the full scan).
  void commit_holders();
  std::vector<HolderChange> holder_changes_;  // reused from statement to statement
  HolderScan scan_holders() const;

  // Expressions.
  Value eval(const Expr& e);
  Value eval_name(const Expr& e);
  Value eval_attribute(const Expr& e);
  // `obj.<e.text>`, obj already evaluated (e: the Attribute expression).
  Value attribute_of(Value obj, const Expr& e);
  // What a tensor method call site calls, found at its first call (by Expr::method_slot): the
  // spelling built and looked up per call was ~500 instructions of every `h.tanh()` (issue #6).
  struct MethodSite {
    bool known = false;
    bool data_attribute = false;  // `t.<name>` is data (shape, grad, ...), not a method
    bool backward = false;        // `t.backward(...)`: its receiver's name is the root label
    const ops::OpEntry* entry = nullptr;
    std::string spelling;  // "Tensor.<name>"
  };
  std::vector<MethodSite> method_sites_;
  // The call site of `t.<attr.text>(...)`, whose entry is the op it calls; null when the name
  // is a data attribute or no such method exists (attribute_of then says which).
  const MethodSite* tensor_method(const Tensor& t, const Expr& attr);
  Value eval_call(const Expr& e);
  Value eval_subscript(const Expr& e);
  // The values of x[...]'s indices, as the one tuple Python passes for `x[a,]`.
  std::vector<Value> subscript_indices(const Expr& e);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  // `@`, `**` and number / tensor under autocast: the operands cast as matmul, pow and
  // reciprocal's policies say (the other operators' ops are on no list).
  Value eval_binary_autocast(char code, const Value& a, const Value& b);
  Value eval_compare(const std::string& op, const Value& a, const Value& b);
  Value call_entry(const ops::OpEntry& entry, const std::string& spelling, const Value* self,
                   const std::vector<Value>& positional, const std::vector<std::pair<std::string, Value>>& keywords);
  Value index_tensor(const Tensor& t, const std::vector<Value>& indices);

  // Reports.
  std::vector<int64_t> walk_from(const Shared<autograd::Node>& root) const;
  // The last walk computed, by node address and id. A node's edges never change after it
  // is made and a live root keeps everything it reaches alive, so the walk from that root,
  // or from any node of its leading single-edge chain (the rest of the walk, as the graph
  // is acyclic), is known without visiting the graph again (issue #6: `y.sum().backward()`
  // then the end-of-program walk of y).
  mutable std::vector<const autograd::Node*> walk_nodes_;
  mutable std::vector<int64_t> walk_ids_;
  mutable size_t walk_chain_ = 0;  // walk_nodes_[i] for i < walk_chain_: one edge, to walk_nodes_[i + 1]
  void record_walk(const std::string& key, const Shared<autograd::Node>& root);
  void snapshot_nodes(const std::vector<int64_t>& ids);
  // Fills `s`, a fresh (default) snapshot, in place: a snapshot is made per backward node,
  // and building it aside and moving it in cost a move of every member (issue #6).
  void snapshot_into(const autograd::Node& n, NodeSnapshot& s) const;
  // result_.nodes[n.id] made, or made again unless it still describes `n`.
  void refresh_snapshot(const autograd::Node& n) {
    auto [it, inserted] = result_.nodes.try_emplace(n.id);
    if (!inserted) {
      if (snapshot_current(it->second, n)) return;
      it->second = NodeSnapshot{};
    }
    snapshot_into(n, it->second);
  }
  bool snapshot_current(const NodeSnapshot& s, const autograd::Node& n) const;
  std::string label_of(int64_t tensor_id) const;
  void finish();
};

// ------------------------------------------------------------------ setup

namespace {
// Gives every Name expression under `e` the slot of its text (a new one per new name), and
// every Attribute expression a method slot of its own.
void give_slots(syntax::Expr* e, std::map<std::string, int>& names, int& methods) {
  if (!e) return;
  if (e->kind == syntax::ExprKind::Name) e->name_slot = names.emplace(e->text, static_cast<int>(names.size())).first->second;
  if (e->kind == syntax::ExprKind::Attribute) e->method_slot = methods++;
  give_slots(e->a.get(), names, methods);
  give_slots(e->b.get(), names, methods);
  give_slots(e->c.get(), names, methods);
  for (auto& item : e->items) give_slots(item.get(), names, methods);
  for (auto& kw : e->keywords) give_slots(kw.value.get(), names, methods);
}
}  // namespace

void Interpreter::parse_all() {
  parsed_.resize(sc_.statements.size());
  for (size_t i = 0; i < sc_.statements.size(); ++i) {
    const ProgramItem* item = sc_.statements[i];
    try {
      parsed_[i] = syntax::parse_statement(item->source);
    } catch (InputError& e) {
      e.file = sc_.file;
      e.statement = static_cast<int>(i);
      e.source = item->source;
      if (e.json_pointer.empty()) e.json_pointer = item->pointer;
      throw;
    }
  }
  std::map<std::string, int> names;
  int methods = 0;
  for (syntax::Stmt& st : parsed_) {
    give_slots(st.target.get(), names, methods);
    give_slots(st.value.get(), names, methods);
    for (auto& t : st.targets) give_slots(t.get(), names, methods);
  }
  env_.set_slot_count(names.size());
  method_sites_.assign(static_cast<size_t>(methods), MethodSite{});
}

void Interpreter::create_leaves() {
  statement_ = -1;
  run_position().statement = -1;
  acc_.begin_statement(-1);
  for (const LeafSpec& leaf : sc_.tensors) {
    run_position().op = "leaf " + leaf.name;
    Tensor t;
    if (device_ == "meta") {
      t = empty_tensor(leaf.shape, leaf.dtype, true);
    } else {
      // Refuse a leaf over the memory budget before its values are generated.
      const RunLimits& lim = run_limits();
      const int64_t n = shape_numel(leaf.shape);
      if (n > (lim.max_memory - lim.held) / static_cast<int64_t>(sizeof(double))) {
        InputError e("limit", "tensor '" + leaf.name + "' of " + std::to_string(n) +
                                  " elements exceeds the memory budget of " + std::to_string(lim.max_memory) +
                                  " bytes (raise it with --max-memory, or use --device meta)");
        e.file = sc_.file;
        e.json_pointer = leaf.pointer + "/shape";
        throw e;
      }
      // A cuda scenario's leaves are made on the device (PyTorch: torch.tensor(values,
      // device='cuda')), one storage each, as on the CPU.
      DeviceScope on_device(device_ == "cuda" ? "cuda" : "cpu");
      if (device_ != "cuda" && leaf.dtype == DType::Float32) {
        // Generated straight into the float storage (a large leaf skips a vector of doubles).
        t = uninitialized_tensor(leaf.shape, DType::Float32, false);
        fill_initial_values_f32(leaf, sc_.seed, t->storage->f32());
      } else {
        t = tensor_from_values(leaf.shape, leaf.dtype, initial_values(leaf, sc_.seed));
      }
    }
    t->requires_grad_flag = leaf.requires_grad;
    leaves_.push_back(t);
    bind(leaf.name, Value::tensor(t));
    LeafRecord rec;
    rec.name = leaf.name;
    rec.shape = leaf.shape;
    rec.dtype = leaf.dtype;
    rec.requires_grad = leaf.requires_grad;
    rec.bytes = t->nbytes();
    if (opt_.keep_values) {
      if (opt_.values_limit > 0 && t->numel() > opt_.values_limit && !t->is_meta()) rec.values_elided = t->numel();
      else rec.values = display_values(t);
    }
    result_.leaves.push_back(rec);
  }
  end_statement(-1, false);
}

void Interpreter::bind(const std::string& name, const Value& v, int slot) {
  if (v.kind == Value::Kind::Tensor) {
    ++labels_changed_;
    const InternedString label = env_.interned(name, slot);
    const size_t tid = static_cast<size_t>(v.t->id), sid = static_cast<size_t>(v.t->storage->id);
    // Grown by doubling (entries past the last bound id stay empty, which reads as unbound):
    // grown by one, each bind called the vector's out-of-line append (issue #6).
    if (tid >= tensor_label_.size()) tensor_label_.resize(std::max(tid + 1, 2 * tensor_label_.size()));
    // A declared leaf keeps its declared name when bound again (`h = x`): its gradient is
    // x.grad in PyTorch, and the report says "grad of x", "AccumulateGrad (x)".
    const bool keeps_declared_name = !tensor_label_[tid].empty() && is_declared_leaf(*v.t);
    if (!keeps_declared_name) tensor_label_[tid] = label;
    tracker_.tensor_relabelled(*v.t);
    if (sid >= storage_labels_.size()) storage_labels_.resize(std::max(sid + 1, 2 * storage_labels_.size()));
    storage_labels_[sid] = storage_labels_[sid].merged(label);
  }
  env_.set(name, v, slot);
}

// ------------------------------------------------------------------ statements

RunResult Interpreter::run() {
  autograd::forget_live_nodes();
  forget_live_tensors();
  reset_run_state();
  run_limits().max_memory = opt_.max_memory;
  autograd::set_grad_enabled(true);
  set_event_sink(&tracker_);
  tracker_.attach();
  // A cuda run without a backend given (the command line's) uses lib/cuda's plugin.
  set_device_backend(opt_.device_backend ? opt_.device_backend
                                         : device_ == "cuda" ? device::cuda_backend() : nullptr);
  struct SinkGuard {
    HolderTracker& tracker;
    ~SinkGuard() {
      set_event_sink(nullptr);
      tracker.detach();
      set_device_backend(nullptr);
    }
  } guard{tracker_};

  result_.file = sc_.file;
  result_.scenario = sc_.name;
  result_.description = sc_.description;
  result_.device = device_;
  result_.expect = sc_.expect;
  for (const ProgramItem* item : sc_.statements) {
    StatementResult s;
    s.index = item->index;
    s.source = item->source;
    result_.statements.push_back(s);
  }
  parse_all();
  create_leaves();
  run_items(sc_.program, false);
  finish();
  if (DeviceBackend* backend = device_backend()) {  // a cuda run: the allocator's own figures
    DeviceMeasurement& m = result_.account.device;
    m.present = true;
    m.device = backend->description();
    m.stats = backend->stats();
  }
  // The figures are in result_ now: nobody needs the frees and releases of the teardown
  // below, so the tracker and the accountant stop listening first (issue #6: on a long
  // chain they spent a tenth of the run recording events and dirty ids nothing would read).
  // The device backend stays until the run's guard ends: the teardown gives its buffers back.
  set_event_sink(nullptr);
  tracker_.detach();
  // A .grad made with create_graph=True can hold a graph that saves its own leaf (the
  // reference cycle PyTorch warns about): drop the grads first to break such cycles.
  std::vector<Tensor> grads;
  for (TensorImpl* t : live_tensors())
    if (t->grad) grads.push_back(std::move(t->grad));
  grads.clear();
  env_.clear();
  leaves_.clear();
  return std::move(result_);
}

void Interpreter::mark_not_run(const std::vector<ProgramItem>& items) {
  for (const ProgramItem& it : items) {
    if (it.kind == ProgramItem::Kind::Statement) {
      if (result_.statements[it.index].runs == 0) result_.statements[it.index].status = "not_run";
    } else {
      mark_not_run(it.body);
    }
  }
}

bool Interpreter::run_items(const std::vector<ProgramItem>& items, bool in_try) {
  for (size_t i = 0; i < items.size(); ++i) {
    const ProgramItem& item = items[i];
    bool ok = true;
    switch (item.kind) {
      case ProgramItem::Kind::Statement:
        ok = run_statement(item, in_try);
        break;
      case ProgramItem::Kind::NoGrad:
      case ProgramItem::Kind::EnableGrad:
      case ProgramItem::Kind::SetGradEnabled: {
        const bool on = item.kind == ProgramItem::Kind::SetGradEnabled ? item.grad_mode
                                                                       : item.kind == ProgramItem::Kind::EnableGrad;
        autograd::GradModeGuard g(on);
        push_block(item.kind == ProgramItem::Kind::NoGrad       ? "no_grad"
                   : item.kind == ProgramItem::Kind::EnableGrad ? "enable_grad"
                                                                : "set_grad_enabled");
        ok = run_items(item.body, in_try);
        pop_block();
        break;
      }
      case ProgramItem::Kind::Try: {
        push_block("try");
        run_items(item.body, true);  // an error inside ends the block, not the program
        pop_block();
        break;
      }
      case ProgramItem::Kind::Repeat: {
        push_block("repeat");
        for (int64_t k = 0; k < item.repeat && ok; ++k) ok = run_items(item.body, in_try);
        pop_block();
        break;
      }
      case ProgramItem::Kind::SavedTensorHooks:
        ok = run_saved_tensor_hooks(item, in_try);
        break;
      case ProgramItem::Kind::Checkpoint:
        ok = run_checkpoint(item, in_try);
        break;
      case ProgramItem::Kind::Autocast:
        ok = run_autocast(item, in_try);
        break;
    }
    if (!ok) {
      for (size_t j = i + 1; j < items.size(); ++j) {
        if (items[j].kind == ProgramItem::Kind::Statement) {
          if (result_.statements[items[j].index].runs == 0) result_.statements[items[j].index].status = "not_run";
        } else {
          mark_not_run(items[j].body);
        }
      }
      if (item.kind != ProgramItem::Kind::Statement) mark_not_run(item.body);
      if (!in_try) result_.raised = true;
      return false;
    }
  }
  return true;
}

bool Interpreter::run_statement(const ProgramItem& item, bool in_try) {
  if (recomputing_) return rerun_statement(item, in_try);
  profile::Scope profile_statement(profile::Section::StatementForward, "", item.index);  // --profile
  statement_ = item.index;
  RunPosition& pos = run_position();
  pos.statement = item.index;
  pos.op.clear();
  pos.in_backward = false;
  acc_.begin_statement(item.index);
  StatementResult& sr = result_.statements[item.index];
  sr.runs++;
  const size_t at = static_cast<size_t>(item.index);
  if (at >= block_stamp_.size()) block_stamp_.resize(at + 1, 0);
  if (block_stamp_[at] != blocks_entered_or_left_ + 1) {
    block_stamp_[at] = blocks_entered_or_left_ + 1;
    if (block_paths_.empty())
      sr.block.clear();
    else if (sr.block != block_paths_.back())
      sr.block = block_paths_.back();
  }
  bool raised = false;
  try {
    take_int64_beyond_double();  // a flag left by an earlier statement's caught error is not this one's
    exec(parsed_[item.index]);
    if (take_int64_beyond_double())
      throw ScenarioError("unsupported",
                          "int64 tensor values beyond 2**53 are not supported (agtrace holds int64 elements as "
                          "doubles, which would round them)");
    check_process_memory();
    // A statement run again is usually ok already (two characters compared, not a string).
    if (sr.status.size() != 2 || sr.status[0] != 'o' || sr.status[1] != 'k') sr.status = "ok";
  } catch (ScenarioError& e) {
    raised = true;
    sr.status = "error";
    ErrorRecord err;
    err.statement = item.index;
    err.phase = e.phase.empty() ? "forward" : e.phase;
    err.kind = e.kind;
    err.message = e.what();
    err.facts = e.facts;
    err.caught = in_try;
    if (err.facts.contains("node_id")) err.facts.erase("node_id");
    result_.errors.push_back(err);
  }
  root_label_.clear();
  end_statement(statement_, raised);
  if (opt_.on_statement_end) opt_.on_statement_end(item.index, static_cast<int>(result_.statements.size()), calls_run_);
  return !raised;
}

void Interpreter::check_process_memory() {
  if (process_budget_ == 0)
    process_budget_ = opt_.max_process_memory > 0 ? opt_.max_process_memory : default_process_memory_budget();
  // getrusage is a system call that also sums the threads' CPU times: at every statement
  // end it was about 8 % of a 10,000-statement chain's run (perf). Asked every 32nd
  // statement, and after any statement whose element data moved by a mebibyte or more
  // since the last question: records grow by about 9 KB per op, so between two questions
  // the process grows by a few hundred kilobytes at most besides element data.
  const int64_t live = acc_.live_bytes();
  if (++statements_since_memory_check_ < 32 && std::llabs(live - live_bytes_at_memory_check_) < (int64_t{1} << 20))
    return;
  statements_since_memory_check_ = 0;
  live_bytes_at_memory_check_ = live;
  const int64_t resident = process_peak_resident_bytes();
  if (resident <= process_budget_) return;
  ScenarioError e("limit", "the process's resident memory reached " + std::to_string(resident) +
                               " bytes, beyond its budget of " + std::to_string(process_budget_) +
                               " bytes (--max-process-memory; default half the machine's memory)");
  e.facts = {{"resident_bytes", resident}, {"max_process_memory", process_budget_}};
  throw e;
}

// ------------------------------------------------------------------ saved-tensor hooks and checkpoint

namespace {

// torch.utils.checkpoint(fn, *inputs, use_reentrant=False), PyTorch 1.13
// (_checkpoint_without_reentrant): the forward runs under hooks whose pack keeps only a
// placeholder ("Holder"), so the body's saved values are not kept and outer hooks see no
// packs; the first unpack runs the body again under enable_grad with inner hooks that keep,
// for each placeholder still alive, the recomputed value (detached), and every unpack
// returns the kept value. The kept values die with their placeholders (a WeakKeyDictionary
// in PyTorch), i.e. as the nodes are released by backward; with retain_graph they stay and
// a second backward does not recompute (measured: SUMMARY.md "Checkpoint (non-reentrant)").
class CheckpointHooks : public autograd::SavedTensorHooks {
 public:
  std::function<void()> recompute;
  std::function<void(int64_t bytes)> on_pack;
  int64_t next_slot = 0;
  std::set<int64_t> alive;               // slots whose SavedVariable is not released
  std::map<int64_t, Tensor> recomputed;  // slot -> recomputed value (PyTorch's `storage`)

  std::string kind() const override { return "checkpoint"; }
  Tensor pack(autograd::SavedVariable& v, const Tensor& t) override {
    v.hooked_state().checkpoint_slot = next_slot++;
    alive.insert(v.hooked->checkpoint_slot);
    if (on_pack) on_pack(t->nbytes());
    return nullptr;
  }
  Tensor unpack(autograd::SavedVariable& v) override {
    if (recomputed.empty() && recompute) recompute();
    auto it = recomputed.find(v.hooked->checkpoint_slot);  // pack set it
    if (it == recomputed.end())
      throw ScenarioError("unsupported",
                          "Attempt to retrieve a tensor saved by autograd multiple times without checkpoint "
                          "recomputation being triggered in between, this is not currently supported.");
    return it->second;
  }
  void release(autograd::SavedVariable& v) override {
    alive.erase(v.hooked->checkpoint_slot);
    recomputed.erase(v.hooked->checkpoint_slot);
  }
};

// The inner hooks of the recomputation (inner_pack / inner_unpack): the k-th value saved
// again is kept for the k-th placeholder, if that one is still alive (`inner.detach()`:
// same storage and version counter, no graph).
class RecomputeHooks : public autograd::SavedTensorHooks {
 public:
  explicit RecomputeHooks(CheckpointHooks& outer) : outer_(outer) {}
  std::string kind() const override { return "checkpoint_recompute"; }
  Tensor pack(autograd::SavedVariable&, const Tensor& t) override {
    const int64_t slot = counter_++;
    if (outer_.alive.count(slot)) outer_.recomputed[slot] = make_alias(t, t->sizes, t->strides, t->offset);
    return nullptr;
  }
  Tensor unpack(autograd::SavedVariable&) override {
    throw ScenarioError("unsupported",
                        "You are calling backwards on a tensor that is never exposed. Please open an issue.");
  }

 private:
  CheckpointHooks& outer_;
  int64_t counter_ = 0;
};

void first_last_statement(const std::vector<ProgramItem>& items, int& first, int& last) {
  for (const ProgramItem& it : items) {
    if (it.kind == ProgramItem::Kind::Statement) {
      if (first < 0) first = it.index;
      last = it.index;
    } else {
      first_last_statement(it.body, first, last);
    }
  }
}

}  // namespace

// An error raised by a block itself (not by one of its statements) is reported at the
// block's first statement.
void Interpreter::block_error(const ProgramItem& item, const std::string& kind, const std::string& message,
                              bool in_try) {
  int first = -1, last = -1;
  first_last_statement(item.body, first, last);
  if (first < 0) return;
  ErrorRecord err;
  err.statement = first;
  err.phase = "forward";
  err.kind = kind;
  err.message = message;
  err.caught = in_try;
  result_.errors.push_back(err);
  result_.statements[first].status = "error";
  if (result_.statements[first].runs == 0) result_.statements[first].runs = 1;
}

// `with <hooks>: body` (spec: saved_tensor_hooks). The hooks stay referenced by the values
// saved under them, after the block too.
bool Interpreter::run_saved_tensor_hooks(const ProgramItem& item, bool in_try) {
  std::shared_ptr<autograd::SavedTensorHooks> hooks = autograd::make_block_hooks(item.hooks_kind);
  if (!hooks) {
    block_error(item, "unsupported", "unknown saved_tensor_hooks kind '" + item.hooks_kind + "'", in_try);
    return false;
  }
  autograd::SavedHooksGuard guard(hooks);
  push_block("saved_tensor_hooks");
  const bool ok = run_items(item.body, in_try);
  pop_block();
  return ok;
}

// `with torch.autocast(device_type, dtype=DTYPE): body` (spec: autocast).
bool Interpreter::run_autocast(const ProgramItem& item, bool in_try) {
  if (opt_.autocast_plain) return run_items(item.body, in_try);
  const std::string run_device = device();
  const std::string device_type =
      !item.device_type.empty() ? item.device_type : run_device == "meta" ? std::string("cuda") : run_device;
  if (device_type == "cpu" && item.autocast_dtype != DType::BFloat16) {
    // torch.autocast.__enter__ (1.13) warns "In CPU autocast, but the target dtype is not
    // supported. Disabling autocast." and then raises this RuntimeError (measured).
    block_error(item, "type_error", "Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype", in_try);
    return false;
  }
  autocast_.enter(device_type, item.autocast_dtype);
  push_block("autocast");
  const bool ok = run_items(item.body, in_try);
  pop_block();
  autocast_.exit();
  return ok;
}

// Runs `def fn(*inputs): body; return outputs` under checkpoint's hooks and binds the
// outputs (spec: checkpoint). Names bound in the body are local: the program's names are
// restored after it, and only the outputs are bound.
bool Interpreter::run_checkpoint(const ProgramItem& item, bool in_try) {
  if (autocast_.active()) {
    // checkpoint records the autocast state and recomputes under it; not modelled.
    block_error(item, "unsupported", "checkpoint inside an autocast block", in_try);
    return false;
  }
  std::vector<Value> args;
  for (const std::string& name : item.inputs) {
    const Value* v = env_.find(name);
    if (!v) {
      block_error(item, "name_error", "name '" + name + "' is not defined (checkpoint input)", in_try);
      return false;
    }
    args.push_back(*v);
  }
  const size_t record = result_.checkpoints.size();
  {
    CheckpointRecord rec;
    first_last_statement(item.body, rec.first_statement, rec.last_statement);
    rec.inputs = item.inputs;
    rec.outputs = item.outputs;
    result_.checkpoints.push_back(rec);
  }
  std::shared_ptr<CheckpointHooks> hooks;
  if (!opt_.checkpoint_plain) {
    hooks = std::make_shared<CheckpointHooks>();
    // The recomputation keeps references to the inputs, as PyTorch's closure over `args`
    // does, and starts from the random state the forward started from (preserve_rng_state).
    CheckpointHooks* self = hooks.get();  // the lambda lives in *self: no ownership cycle
    hooks->recompute = [this, &item, args, rng = rng_, record, self]() {
      RecomputeHooks inner(*self);
      recompute_checkpoint(item, args, rng, record, inner);
    };
    hooks->on_pack = [this, record](int64_t bytes) {
      result_.checkpoints[record].packs++;
      result_.checkpoints[record].packed_bytes += bytes;
    };
  }
  std::map<std::string, Value> outer = env_.map();
  for (size_t i = 0; i < args.size(); ++i) bind(item.inputs[i], args[i]);
  push_block("checkpoint");
  bool ok = true;
  {
    std::optional<autograd::SavedHooksGuard> guard;
    if (hooks) guard.emplace(hooks);
    hooks.reset();  // from here on only the values saved in the body hold the hooks
    ok = run_items(item.body, in_try);
  }
  pop_block();
  std::vector<Value> outputs;
  if (ok) {
    for (const std::string& name : item.outputs) {
      const Value* v = env_.find(name);
      if (!v) {
        env_.replace(std::move(outer));
        block_error(item, "name_error", "name '" + name + "' is not defined (checkpoint output)", in_try);
        return false;
      }
      outputs.push_back(*v);
    }
  }
  env_.replace(std::move(outer));
  for (size_t i = 0; i < outputs.size(); ++i) bind(item.outputs[i], outputs[i]);
  return ok;
}

// The recomputation, run from inside an unpack (a backward, or a `_saved_*` read): the
// body's statements run again in a fresh local scope with the same input objects, under
// enable_grad and the inner hooks; their prints print again. Errors propagate to the
// statement that unpacked, as PyTorch raises them from backward.
void Interpreter::recompute_checkpoint(const ProgramItem& item, const std::vector<Value>& args,
                                       const SplitMix64& rng, size_t record,
                                       autograd::SavedTensorHooks& inner) {
  CheckpointRecord& rec = result_.checkpoints[record];
  rec.recomputations++;
  rec.recomputed_at.push_back(statement_);
  RunPosition& pos = run_position();
  Event begin;
  begin.kind = Event::Kind::Recompute;
  begin.what = "begin: checkpoint of statements " + std::to_string(rec.first_statement) + "-" +
               std::to_string(rec.last_statement);
  emit(begin);
  struct Restore {
    Interpreter& in;
    std::map<std::string, Value> env;
    SplitMix64 rng;
    bool recomputing;
    std::string op;
    int recompute_statement;
    ~Restore() {
      in.env_.replace(std::move(env));
      in.rng_ = rng;
      in.recomputing_ = recomputing;
      run_position().op = op;
      run_position().recompute_statement = recompute_statement;
    }
  } restore{*this, env_.map(), rng_, recomputing_, pos.op, pos.recompute_statement};
  rng_ = rng;
  recomputing_ = true;
  for (size_t i = 0; i < args.size(); ++i) bind(item.inputs[i], args[i]);
  autograd::GradModeGuard grad(true);
  // Shared ownership is what the hooks stack holds; `inner` outlives this call's stack use.
  autograd::SavedHooksGuard hooks(std::shared_ptr<autograd::SavedTensorHooks>(&inner, [](autograd::SavedTensorHooks*) {}));
  run_items(item.body, false);
  Event end;
  end.kind = Event::Kind::Recompute;
  end.what = "end: checkpoint of statements " + std::to_string(rec.first_statement) + "-" +
             std::to_string(rec.last_statement);
  emit(end);
}

// A body statement run again by a checkpoint recomputation: it counts as another run and
// its prints print, but it is not a new statement for the report or the accountant (the
// statement that unpacked is the one running). Errors go to that statement.
bool Interpreter::rerun_statement(const ProgramItem& item, bool in_try) {
  RunPosition& pos = run_position();
  pos.recompute_statement = item.index;
  result_.statements[item.index].runs++;
  try {
    exec(parsed_[item.index]);
  } catch (ScenarioError&) {
    if (!in_try) throw;
    return false;
  }
  return true;
}

void Interpreter::end_statement(int index, bool raised) {
  run_position().op.clear();
  commit_holders();
  acc_.end_statement_with(index, raised, holder_changes_);
}

void Interpreter::commit_holders() {
  tracker_.commit(env_.map(), holder_changes_, env_.keys_version());
  if (verify_holders_) {
    const HolderScan full = scan_holders();
    const HolderScan tracked = tracker_.state();
    if (full.holders != tracked.holders || full.category != tracked.category) {
      std::string detail;
      for (const auto& [id, hs] : full.holders) {
        auto it = tracked.holders.find(id);
        if (it == tracked.holders.end() || it->second != hs || tracked.category.at(id) != full.category.at(id))
          detail += " storage " + std::to_string(id) + " is held by " + std::to_string(hs.size()) + " (" +
                    full.category.at(id) + ") in the full scan";
      }
      for (const auto& [id, hs] : tracked.holders)
        if (!full.holders.count(id)) detail += " storage " + std::to_string(id) + " is tracked but not held";
      throw std::logic_error("holder tracker disagrees with the full scan after statement " +
                             std::to_string(statement_) + ":" + detail);
    }
  }
}

HolderScan Interpreter::scan_holders() const {
  HolderScan scan;
  std::map<int64_t, HolderCategory> best;  // storage id -> highest-priority category so far
  auto hold = [&](const Shared<Storage>& st, const std::string& who, HolderCategory cat) {
    if (!st) return;
    auto& hs = scan.holders[st->id];
    if (std::find(hs.begin(), hs.end(), who) == hs.end()) hs.push_back(who);
    auto it = best.find(st->id);
    if (it == best.end() || cat < it->second) best[st->id] = cat;
  };
  std::function<void(const std::string&, const Value&)> visit = [&](const std::string& name, const Value& v) {
    if (v.kind == Value::Kind::Tensor) {
      hold(v.t->storage, "name " + name, name_category(*v.t));
    } else if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) {
      for (const Value& item : v.items) visit(name, item);
    }
  };
  for (const auto& [name, v] : env_.map()) visit(name, v);
  for (TensorImpl* t : live_tensors())
    if (t->grad) hold(t->grad->storage, "grad of " + label_of(t->id), kGrad);
  for (autograd::Node* n : autograd::live_nodes()) {
    for (const auto& e : n->saved)
      if (e.is_tensor && e.var.defined && !e.var.released)
        hold(e.var.held_storage(), "saved " + n->name + "._saved_" + e.name, kGraphOnly);
    if (n->variable) hold(n->variable->storage, "leaf of AccumulateGrad", kGraphOnly);
  }
  for (TensorImpl* t : live_tensors())
    if (!best.count(t->storage->id)) hold(t->storage, "unnamed tensor", kOther);
  for (const auto& [id, cat] : best) scan.category[id] = kHolderCategories[cat];
  return scan;
}

void Interpreter::exec(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::ExprStmt:
      eval(*s.value);
      return;
    case StmtKind::Assign: {
      Value v = eval(*s.value);
      assign(*s.target, v);
      return;
    }
    case StmtKind::AugAssign:
      exec_augmented(s);
      return;
    case StmtKind::Del:
      for (const auto& t : s.targets) {
        if (t->kind == ExprKind::Name) {
          if (!env_.erase(t->text)) fail("name_error", "name '" + t->text + "' is not defined");
        } else if (t->kind == ExprKind::Attribute && t->text == "grad") {
          Value obj = eval(*t->a);
          if (obj.kind != Value::Kind::Tensor) fail("type_error", "del of an attribute of a non-tensor");
          obj.t->grad.reset();
          notify_grad_changed(*obj.t);
        } else {
          fail("unsupported", "del of this target is not supported");
        }
      }
      return;
  }
}

// Python's augmented assignment: `x op= y` calls the in-place method on a tensor (x += y is
// x.add_(y) on the same object) and rebinds x to its result; `x[i] op= y` reads x[i], then
// evaluates y, edits the item in place and writes it back with x[i] = item (CPython's
// order), so PyTorch records the item's own edit and then a setitem of it (measured:
// `y[0] += 1` bumps y's version twice, CopySlices over CopySlices).
void Interpreter::exec_augmented(const Stmt& s) {
  const Expr& target = *s.target;
  Value obj;
  std::vector<Value> idx;
  Value current;
  if (target.kind == ExprKind::Name) {
    current = eval_name(target);
  } else if (target.kind == ExprKind::Subscript) {
    obj = eval(*target.a);
    idx = subscript_indices(target);
    if (obj.kind != Value::Kind::Tensor) fail("unsupported", "augmented assignment to an item of " + type_name(obj));
    current = index_tensor(obj.t, idx);
  } else {
    fail("unsupported", "augmented assignment to this target is not supported");
  }
  Value rhs = eval(*s.value);
  Value result;
  if (current.kind == Value::Kind::Tensor) {
    static const std::map<std::string, std::string> inplace = {{"+", "Tensor.add_"}, {"-", "Tensor.sub_"},
                                                               {"*", "Tensor.mul_"}, {"/", "Tensor.div_"}};
    auto it = inplace.find(s.text);
    if (it == inplace.end()) fail("unsupported", "augmented assignment '" + s.text + "=' on a tensor is not supported");
    const ops::OpEntry* entry = ops::find_op(it->second);
    result = call_entry(*entry, it->second, &current, {rhs}, {});
  } else {
    result = eval_binary(s.text, current, rhs);
  }
  if (target.kind == ExprKind::Name)
    bind(target.text, result, target.name_slot);
  else
    interp::tensor_setitem(obj.t, idx, result);
}

void Interpreter::assign(const Expr& target, const Value& v) {
  switch (target.kind) {
    case ExprKind::Name:
      bind(target.text, v, target.name_slot);
      return;
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) items = v.items;
      else if (v.kind == Value::Kind::Size) for (int64_t x : v.size) items.push_back(Value::integer(x));
      else fail("type_error", "cannot unpack non-iterable " + type_name(v) + " object");
      if (items.size() < target.items.size())
        fail("type_error", "not enough values to unpack (expected " + std::to_string(target.items.size()) + ", got " +
                               std::to_string(items.size()) + ")");
      if (items.size() > target.items.size())
        fail("type_error", "too many values to unpack (expected " + std::to_string(target.items.size()) + ")");
      for (size_t i = 0; i < items.size(); ++i) assign(*target.items[i], items[i]);
      return;
    }
    case ExprKind::Attribute: {
      Value obj = eval(*target.a);
      if (obj.kind != Value::Kind::Tensor) fail("unsupported", "assignment to an attribute of " + type_name(obj));
      if (target.text == "grad") {
        if (v.kind == Value::Kind::None) {
          obj.t->grad.reset();
          notify_grad_changed(*obj.t);
        } else if (v.kind == Value::Kind::Tensor) {
          // THPVariable_set_grad's checks, in its order: the tensor itself, then its type
          // (dtype and device: measured "different type" for an int64 or meta grad, even of
          // another size), then its size.
          if (v.t.get() == obj.t.get()) fail("type_error", "can't assign Variable as its own grad");
          if (v.t->dtype() != obj.t->dtype() || v.t->is_meta() != obj.t->is_meta() ||
              v.t->storage->device != obj.t->storage->device)
            fail("dtype_mismatch", "assigned grad has data of a different type");
          if (v.t->sizes != obj.t->sizes)
            fail("shape_mismatch", "assigned grad has data of a different size");
          obj.t->grad = v.t;
          notify_grad_changed(*obj.t);
        } else {
          fail("type_error", "assigned grad expected to be a Tensor or None but got grad of type " + type_name(v));
        }
        return;
      }
      if (target.text == "requires_grad") {
        // The attribute's setter refuses any non-leaf, True or False (THPVariable_set_
        // requires_grad), where requires_grad_(True) on a non-leaf is a no-op.
        if (!obj.t->is_leaf())
          fail("type_error", std::string("you can only change requires_grad flags of leaf variables.") +
                                 (truthy(v) ? "" : " If you want to use a computed variable in a subgraph that doesn't "
                                                   "require differentiation use var_no_grad = var.detach()."));
        const ops::OpEntry* entry = ops::find_op("Tensor.requires_grad_");
        call_entry(*entry, "Tensor.requires_grad_", &obj, {Value::boolean(truthy(v))}, {});
        return;
      }
      if (target.text == "data") {
        if (v.kind != Value::Kind::Tensor) fail("type_error", "Variable data has to be a tensor, but got " + type_name(v));
        ops::set_data(obj.t, v.t);
        return;
      }
      fail("unsupported", "assignment to Tensor." + target.text + " is not supported");
    }
    case ExprKind::Subscript: {
      Value obj = eval(*target.a);
      const std::vector<Value> idx = subscript_indices(target);
      if (obj.kind != Value::Kind::Tensor) fail("type_error", "'" + type_name(obj) + "' object does not support item assignment");
      interp::tensor_setitem(obj.t, idx, v);
      return;
    }
    default:
      fail("type_error", "cannot assign to this expression");
  }
}

// ------------------------------------------------------------------ expressions

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: return eval_name(e);
    case ExprKind::Int: return Value::integer(e.int_value);
    case ExprKind::Float: return Value::real(e.float_value);
    case ExprKind::Bool: return Value::boolean(e.bool_value);
    case ExprKind::None: return Value::none();
    case ExprKind::String: return Value::str(e.text);
    case ExprKind::Ellipsis: { Value v; v.kind = Value::Kind::Ellipsis; return v; }
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      for (const auto& item : e.items) items.push_back(eval(*item));
      return e.kind == ExprKind::Tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case ExprKind::Unary: {
      if (e.text == "not") return Value::boolean(!truthy(eval(*e.a)));
      Value v = eval(*e.a);
      if (v.kind == Value::Kind::Tensor) {
        if (e.text == "+") return v;
        return Value::tensor(ops::neg(v.t));
      }
      if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool) {
        // The int64 value itself (through a double, 2**63 - 1 read as 2**63); -(-2**63) is
        // beyond int64, as the binary operators refuse it.
        const int64_t x = v.kind == Value::Kind::Int ? v.i : (v.b ? 1 : 0);
        if (e.text != "-") return Value::integer(x);
        if (x == INT64_MIN)
          throw ScenarioError("unsupported", "the integer -(" + std::to_string(x) +
                                                 ") is beyond int64 (agtrace's Python integers are 64-bit)");
        return Value::integer(-x);
      }
      if (v.kind == Value::Kind::Float) return Value::real(e.text == "-" ? -v.f : v.f);
      fail("type_error", "bad operand type for unary " + e.text + ": '" + type_name(v) + "'");
    }
    case ExprKind::Binary: {
      // Arithmetic operators are one or two characters long: `and`/`or` are compared only
      // when the length matches (every tensor operator of a program comes through here).
      if (e.text.size() == 3 && e.text == "and") {
        Value a = eval(*e.a);
        return truthy(a) ? eval(*e.b) : a;
      }
      if (e.text.size() == 2 && e.text == "or") {
        Value a = eval(*e.a);
        return truthy(a) ? a : eval(*e.b);
      }
      Value a = eval(*e.a);
      Value b = eval(*e.b);
      return eval_binary(e.text, a, b);
    }
    case ExprKind::Compare: {
      Value a = eval(*e.a);
      Value b = eval(*e.b);
      return eval_compare(e.text, a, b);
    }
    case ExprKind::Attribute: return eval_attribute(e);
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Subscript: return eval_subscript(e);
    case ExprKind::Slice: {
      Value v;
      v.kind = Value::Kind::Slice;
      for (const Expr* p : {e.a.get(), e.b.get(), e.c.get()}) v.items.push_back(p ? eval(*p) : Value::none());
      return v;
    }
  }
  fail("unsupported", "expression not supported");
}

Value Interpreter::eval_name(const Expr& e) {
  if (const Value* v = env_.find(e.text, e.name_slot)) return *v;
  if (e.text == "torch" || e.text == "F") return Value::module(e.text);
  if (e.text == "print" || e.text == "shares_storage" || e.text == "len" || interp::is_conversion_builtin(e.text))
    return Value::module(e.text);
  std::vector<std::string> known;
  for (const auto& [n, v] : env_.map()) known.push_back(n);
  for (const char* b : {"torch", "F", "print", "shares_storage", "len", "float", "int", "bool"}) known.push_back(b);
  std::string hint = suggest(e.text, known);
  ScenarioError err("name_error", "name '" + e.text + "' is not defined" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  err.facts = {{"name", e.text}, {"column", e.column}};
  throw err;
}

Value Interpreter::eval_attribute(const Expr& e) { return attribute_of(eval(*e.a), e); }

const Interpreter::MethodSite* Interpreter::tensor_method(const Tensor& t, const Expr& attr) {
  // parse_all gives every Attribute expression of the program its slot.
  if (attr.method_slot < 0) throw std::logic_error("tensor_method: an attribute expression without a method slot");
  MethodSite& site = method_sites_[static_cast<size_t>(attr.method_slot)];
  if (!site.known) {
    site.known = true;
    site.data_attribute = is_tensor_attribute(attr.text);
    if (!site.data_attribute) {
      site.spelling = "Tensor." + attr.text;
      site.entry = ops::find_op(site.spelling);
      site.backward = attr.text == "backward";
    }
  }
  if (site.data_attribute) return nullptr;
  // As an attribute read does (PyTorch regenerates a stale view's grad_fn); a method that
  // reads it raises for a rebased multi-output view when its op takes the gradient edge.
  if (!autograd::multi_output_view_rebased(t)) autograd::refresh_view_grad_fn(t);
  return site.entry ? &site : nullptr;  // outlives the call: method_sites_ is sized once, by parse_all
}

Value Interpreter::attribute_of(Value obj, const Expr& e) {
  const std::string& name = e.text;
  switch (obj.kind) {
    case Value::Kind::Module: {
      std::string full = obj.s + "." + name;
      if (obj.s == "torch") {
        if (auto d = torch_dtype_attr(name)) return Value::dtype_of(*d);
        if (name == "autograd" || name == "nn") return Value::module(full);
      }
      if (full == "torch.nn.functional") return Value::module("F");
      if (ops::find_op(full)) return Value::module(full);
      std::string hint = suggest(full, ops::all_spellings());
      ScenarioError err("unsupported", "'" + full + "' is not an operation agtrace supports" +
                                           (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
      err.facts = {{"name", full}, {"column", e.column}};
      throw err;
    }
    case Value::Kind::Tensor: {
      const Tensor& t = obj.t;
      // PyTorch regenerates a stale view's grad_fn on access (raised below for a rebased
      // multi-output view, by the attributes that read grad_fn).
      if (!autograd::multi_output_view_rebased(t)) autograd::refresh_view_grad_fn(t);
      // Attributes first, then methods; names of different lengths are told apart by length
      // alone (most lookups are methods, `h.tanh()`: issue #6).
      for (const auto& [text, attr] : kTensorAttrs) {
        if (name.size() != text.size() || name != text) continue;
        switch (attr) {
          case TensorAttr::GradFn:
            autograd::check_no_grad_view_current(t);
            autograd::refresh_view_grad_fn(t);
            return Value::node_of(t->grad_fn);
          case TensorAttr::Grad: return t->grad ? Value::tensor(t->grad) : Value::none();
          case TensorAttr::RequiresGrad: return Value::boolean(t->requires_grad());
          case TensorAttr::IsLeaf:
            autograd::check_no_grad_view_current(t);
            autograd::refresh_view_grad_fn(t);
            return Value::boolean(t->is_leaf());
          case TensorAttr::Shape: return Value::torch_size(t->sizes);
          case TensorAttr::Dtype: return Value::dtype_of(t->dtype());
          case TensorAttr::Version: return Value::integer(t->version->version);
          case TensorAttr::Ndim: return Value::integer(t->dim());
          case TensorAttr::Base: return t->base ? Value::tensor(t->base) : Value::none();
          case TensorAttr::T: return Value::tensor(ops::reversed_dims(t));
          case TensorAttr::MT: return Value::tensor(ops::matrix_transpose(t));
          case TensorAttr::Data: return Value::tensor(ops::data_alias(t));
          case TensorAttr::RetainsGrad: return Value::boolean(t->retains_grad);
          case TensorAttr::Device:  // PyTorch prints a cuda tensor's device as cuda:0
            return Value::str(t->is_meta() ? "meta" : t->storage->on_device() ? "cuda:0" : "cpu");
        }
      }
      if (ops::find_op("Tensor." + name)) return Value::method(obj, name);
      std::vector<std::string> methods;
      for (const std::string& s : ops::all_spellings())
        if (s.rfind("Tensor.", 0) == 0) methods.push_back(s.substr(7));
      for (const char* p : {"grad_fn", "grad", "requires_grad", "is_leaf", "shape", "dtype", "_version"}) methods.push_back(p);
      std::string hint = suggest(name, methods);
      ScenarioError err("unsupported", "'Tensor." + name + "' is not supported by agtrace" +
                                           (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
      err.facts = {{"name", name}, {"column", e.column}};
      throw err;
    }
    case Value::Kind::Node: {
      autograd::Node& n = *obj.node;
      if (name == "name") return Value::method(obj, name);
      if (name == "next_functions") {
        std::vector<Value> items;
        for (const auto& edge : n.next)
          items.push_back(Value::tuple({Value::node_of(edge.fn), Value::integer(edge.fn ? edge.input_nr : 0)}));
        return Value::tuple(std::move(items));
      }
      if (name == "variable" && n.variable) return Value::tensor(n.variable);
      if (name.rfind("_saved_", 0) == 0) {
        const autograd::SavedEntry* entry = n.find(name.substr(7));
        if (entry) {
          if (!entry->is_tensor) return attr_to_value(entry->attr ? *entry->attr : autograd::AttrValue{});
          try {
            if (entry->as_list) {
              // A list PyTorch saves (IndexBackward0's indices): one entry per item, None
              // for an undefined one.
              std::vector<Value> items;
              for (auto& e : n.saved)
                if (e.name == entry->name) {
                  Tensor item = n.unpack_entry(e);
                  items.push_back(item ? Value::tensor(item) : Value::none());
                }
              return Value::tuple(std::move(items));
            }
            Tensor t = n.unpack(entry->name);
            return t ? Value::tensor(t) : Value::none();
          } catch (ScenarioError& err) {
            err.phase = "backward";  // spec: raised while a saved-value read ran
            throw;
          }
        }
      }
      ScenarioError err("name_error", "'" + n.name + "' object has no attribute '" + name + "'");
      err.facts = {{"name", name}, {"column", e.column}};
      throw err;
    }
    case Value::Kind::DType:
      // torch.dtype.is_floating_point (measured: torch.int64.is_floating_point is False).
      if (name == "is_floating_point") return Value::boolean(is_floating(obj.dtype));
      fail("name_error", "'torch.dtype' object has no attribute '" + name + "'");
    default:
      if (const Value* field = return_type_field(obj, name)) return *field;
      fail("name_error", "'" + type_name(obj) + "' object has no attribute '" + name + "'");
  }
}

Value Interpreter::call_entry(const ops::OpEntry& entry, const std::string& spelling, const Value* self,
                              const std::vector<Value>& positional,
                              const std::vector<std::pair<std::string, Value>>& keywords) {
  ops::Args args;
  args.fn = spelling;
  args.params = &entry.params;
  args.values.resize(entry.params.size());
  // The receiver, then the positional arguments (read in place: no combined copy).
  const size_t given = positional.size() + (self ? 1 : 0);
  auto pos = [&](size_t k) -> const Value& { return self ? (k == 0 ? *self : positional[k - 1]) : positional[k]; };
  auto fname = [&] { return entry.name + "()"; };  // for messages only
  size_t p = 0;
  size_t i = 0;
  for (; i < entry.params.size() && p < given; ++i) {
    const ops::Param& param = entry.params[i];
    if (param.varargs) {
      std::vector<Value> rest;
      for (; p < given; ++p) rest.push_back(pos(p));
      args.values[i] = Value::tuple(std::move(rest));
      break;
    }
    if (param.keyword_only) break;
    args.values[i] = pos(p++);
  }
  if (p < given) {
    size_t max_pos = 0;
    for (const auto& prm : entry.params) if (!prm.keyword_only && !prm.varargs) ++max_pos;
    fail("type_error", fname() + " takes " + std::to_string(max_pos - (self ? 1 : 0)) + " positional arguments but " +
                           std::to_string(given - (self ? 1 : 0)) + " were given");
  }
  for (const auto& [written_kw, written_val] : keywords) {
    const std::string kw = ops::keyword_param(entry, spelling, self != nullptr, written_kw);
    size_t k = 0;
    for (; k < entry.params.size(); ++k)
      if (entry.params[k].name == kw && (!entry.params[k].varargs || entry.params[k].keyword_list)) break;
    Value val = written_val;
    if (k < entry.params.size() && entry.params[k].varargs) {
      // view(size=(6,)): the whole list by its name, never one int (x.permute(dims=1) raises).
      if (val.kind != Value::Kind::Tuple && val.kind != Value::Kind::List && val.kind != Value::Kind::Size)
        fail("type_error", entry.name + "(): argument '" + kw + "' must be tuple of ints, not " + type_name(val));
      val = Value::tuple({val});
    }
    if (k == entry.params.size()) {
      std::vector<std::string> names;
      for (const auto& prm : entry.params) names.push_back(prm.name);
      std::string hint = suggest(written_kw, names);
      fail("type_error", fname() + " got an unexpected keyword argument '" + written_kw + "'" +
                             (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    if (args.values[k]) fail("type_error", fname() + " got multiple values for argument '" + kw + "'");
    args.values[k] = val;
  }
  if (entry.params.size() > ops::Args::kMaxParams)
    throw std::logic_error(entry.name + " has more params than ops::Args::written can mark");
  for (size_t k = 0; k < entry.params.size(); ++k) {
    if (args.values[k].has_value()) args.written |= uint64_t{1} << k;
    if (args.values[k]) continue;
    const ops::Param& prm = entry.params[k];
    if (prm.varargs) args.values[k] = Value::tuple({});
    else if (prm.has_default) args.values[k] = prm.default_value;
    else fail("type_error", fname() + " missing required argument: '" + prm.name + "'");
  }
  profile::Scope profile_op(profile::Section::OpForward, entry.name);  // --profile
  ++calls_run_;
  DeviceScope result_device(device_of_arguments(entry, args));
  if (autocast_.active()) autocast_.cast_arguments(entry.name, spelling, args);
  return entry.impl(args, *this);
}

Value Interpreter::eval_call(const Expr& e) {
  // `tensor.method(...)` is called without making the bound method first (a Value holding a
  // copy of the receiver, and a second lookup of the op; issue #6). The receiver, then the
  // method, then the arguments are evaluated, as before.
  Value callee, receiver;
  const MethodSite* method = nullptr;
  if (e.a->kind == ExprKind::Attribute) {
    Value obj = eval(*e.a->a);
    if (obj.kind == Value::Kind::Tensor && (method = tensor_method(obj.t, *e.a)))
      receiver = std::move(obj);
    else
      callee = attribute_of(std::move(obj), *e.a);
  } else {
    callee = eval(*e.a);
  }
  std::vector<Value> positional;
  for (const auto& arg : e.items) positional.push_back(eval(*arg));
  std::vector<std::pair<std::string, Value>> keywords;
  for (const auto& kw : e.keywords) keywords.push_back({kw.name, eval(*kw.value)});
  if (method) {
    if (method->backward) root_label_ = root_label_of(e.a->a.get());
    return call_entry(*method->entry, method->spelling, &receiver, positional, keywords);
  }

  if (callee.kind == Value::Kind::Method) {
    const Value& receiver = callee.items[0];
    if (receiver.kind == Value::Kind::Node) {
      if (callee.s == "name") {
        if (!positional.empty() || !keywords.empty()) fail("type_error", "name() takes no arguments");
        return Value::str(receiver.node->qualified_name());
      }
    }
    if (receiver.kind == Value::Kind::Tensor) {
      const std::string spelling = "Tensor." + callee.s;
      if (callee.s == "backward") root_label_ = root_label_of(e.a->a.get());
      return call_entry(*ops::find_op(spelling), spelling, &receiver, positional, keywords);
    }
  }
  if (callee.kind == Value::Kind::Module) {
    if (interp::is_conversion_builtin(callee.s)) {
      if (!keywords.empty()) fail("type_error", callee.s + "() takes no keyword arguments");
      return interp::call_conversion_builtin(callee.s, positional);
    }
    if (callee.s == "len") {
      if (positional.size() != 1) fail("type_error", "len() takes exactly one argument");
      const Value& v = positional[0];
      if (v.kind == Value::Kind::Tuple || v.kind == Value::Kind::List) return Value::integer(static_cast<int64_t>(v.items.size()));
      if (v.kind == Value::Kind::Size) return Value::integer(static_cast<int64_t>(v.size.size()));
      if (v.kind == Value::Kind::Str) return Value::integer(static_cast<int64_t>(v.s.size()));
      if (v.kind == Value::Kind::Tensor) {
        if (v.t->dim() == 0) fail("type_error", "len() of a 0-d tensor");
        return Value::integer(v.t->sizes[0]);
      }
      fail("type_error", "object of type '" + type_name(v) + "' has no len()");
    }
    std::string spelling = callee.s;
    if (const ops::OpEntry* entry = ops::find_op(spelling)) {
      if (spelling == "torch.autograd.grad" && !e.items.empty()) root_label_ = root_label_of(e.items[0].get());
      return call_entry(*entry, spelling, nullptr, positional, keywords);
    }
  }
  // PyTorch's nodes are callable (y.grad_fn(g) runs the node's apply and records a graph);
  // agtrace does not model that call.
  if (callee.kind == Value::Kind::Node)
    fail("unsupported", "calling a node (" + type_name(callee) + "(...)) is not supported");
  fail("type_error", "'" + type_name(callee) + "' object is not callable");
}

Value Interpreter::index_tensor(const Tensor& t, const std::vector<Value>& indices) {
  return interp::tensor_getitem(t, indices);
}

std::vector<Value> Interpreter::subscript_indices(const Expr& e) {
  std::vector<Value> idx;
  for (const auto& item : e.items) idx.push_back(eval(*item));
  // `x[a,]` is the tuple (a,): kept as one tuple, so that a lone list in it stays one index.
  if (e.tuple_index && idx.size() == 1) idx = {Value::tuple(std::move(idx))};
  return idx;
}

Value Interpreter::eval_subscript(const Expr& e) {
  Value obj = eval(*e.a);
  std::vector<Value> idx = subscript_indices(e);
  if (obj.kind == Value::Kind::Tensor) return index_tensor(obj.t, idx);
  std::vector<Value> seq;
  if (obj.kind == Value::Kind::Tuple || obj.kind == Value::Kind::List) seq = obj.items;
  else if (obj.kind == Value::Kind::Size) for (int64_t x : obj.size) seq.push_back(Value::integer(x));
  else fail("type_error", "'" + type_name(obj) + "' object is not subscriptable");
  if (idx.size() != 1 || idx[0].kind != Value::Kind::Int)
    fail("type_error", type_name(obj) + " indices must be integers");
  int64_t i = idx[0].i;
  const int64_t n = static_cast<int64_t>(seq.size());
  if (i < -n || i >= n) fail("index_out_of_range", type_name(obj) + " index out of range");
  return seq[static_cast<size_t>(i < 0 ? i + n : i)];
}

Value Interpreter::eval_binary_autocast(char code, const Value& a, const Value& b) {
  const bool ta = a.kind == Value::Kind::Tensor, tb = b.kind == Value::Kind::Tensor;
  Tensor x = ta ? a.t : nullptr, y = tb ? b.t : nullptr;
  std::vector<Tensor*> operands;
  if (ta) operands.push_back(&x);
  if (tb) operands.push_back(&y);
  if (code == '@') {
    if (!(ta && tb)) fail("type_error", "unsupported operand type(s) for @: '" + type_name(a) + "' and '" + type_name(b) + "'");
    autocast_.cast_operands("matmul", operands);
    return Value::tensor(ops::matmul(x, y));
  }
  if (code == 'P') {
    autocast_.cast_operands(ta ? "pow" : "rpow", operands);
    if (ta && tb) return Value::tensor(ops::pow_tensor(x, y));
    if (ta) return Value::tensor(ops::pow_scalar(x, b));
    return Value::tensor(ops::rpow(a, y));
  }
  // number / tensor: tensor.reciprocal() * number (see eval_binary).
  autocast_.cast_operands("rdiv", operands);
  return Value::tensor(ops::mul(ops::reciprocal(y), ops::wrap_number(a)));
}

namespace {
int64_t exact_int(const Value& v) { return v.kind == Value::Kind::Int ? v.i : (v.b ? 1 : 0); }

// Python's int arithmetic on int64 values, exactly: a result beyond int64 (Python would
// make a bigger int) is refused, never wrapped; // and % round toward negative infinity.
Value int_arithmetic(const std::string& op, int64_t x, int64_t y) {
  auto beyond = [&]() -> Value {
    throw ScenarioError("unsupported", "the integer " + std::to_string(x) + " " + op + " " + std::to_string(y) +
                                           " is beyond int64 (agtrace's Python integers are 64-bit)");
  };
  int64_t r = 0;
  if (op == "+") return __builtin_add_overflow(x, y, &r) ? beyond() : Value::integer(r);
  if (op == "-") return __builtin_sub_overflow(x, y, &r) ? beyond() : Value::integer(r);
  if (op == "*") return __builtin_mul_overflow(x, y, &r) ? beyond() : Value::integer(r);
  if (op == "//" || op == "%") {
    if (y == 0) fail("type_error", "ZeroDivisionError: integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return op == "%" ? Value::integer(0) : beyond();
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value::integer(op == "//" ? q : m);
  }
  if (op == "**") {
    if (y < 0) return Value::real(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t result = 1, base = x;
    for (int64_t e = y; e > 0; e >>= 1) {  // by squaring: 2**10**9 takes 30 steps, not 10**9
      if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return beyond();
      // |base| >= 2 here, so a square that does not fit means a result that does not.
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) return beyond();
    }
    return Value::integer(result);
  }
  fail("type_error", "unsupported operand type(s) for " + op + ": 'int' and 'int'");
}
}  // namespace

Value Interpreter::eval_binary(const std::string& op, const Value& a, const Value& b) {
  const bool ta = a.kind == Value::Kind::Tensor, tb = b.kind == Value::Kind::Tensor;
  if (ta || tb) {
    const Value& other = ta ? b : a;
    if (!(ta && tb) && !other.is_number())
      fail("type_error", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
    auto tensor_of = [](const Value& v) { return v.kind == Value::Kind::Tensor ? v.t : ops::wrap_number(v); };
    const std::string& op_name = profile::operator_op_name(op);
    profile::Scope profile_op(profile::Section::OpForward, op_name);  // --profile
    ++calls_run_;
    // `@` is matmul, which checks devices itself (see device_of_arguments(entry, args)).
    // One character tells the operators apart ('P' for **): no string comparisons per op.
    const char code = op.size() == 1 ? op[0] : op == "**" ? 'P' : '\0';
    DeviceScope result_device(device_of_arguments({&a, &b}, op_name, code == '@'));
    if (autocast_.active() && (code == '@' || code == 'P' || (code == '/' && !ta)))
      return eval_binary_autocast(code, a, b);
    if (code == '+') return Value::tensor(ta ? ops::add(a.t, tensor_of(b), Value::integer(1))
                                             : ops::add(b.t, tensor_of(a), Value::integer(1)));  // __radd__
    if (code == '-') return Value::tensor(ta ? ops::sub(a.t, tensor_of(b), Value::integer(1))
                                             : ops::rsub(b.t, a, Value::integer(1)));            // __rsub__
    if (code == '*') return Value::tensor(ta ? ops::mul(a.t, tensor_of(b)) : ops::mul(b.t, tensor_of(a)));
    if (code == '/') {
      if (ta) return Value::tensor(ops::div(a.t, tensor_of(b)));
      // __rtruediv__: number / x is x.reciprocal() * number (measured: MulBackward0 over
      // ReciprocalBackward0, the number saved as a 0-d tensor).
      Tensor r = ops::reciprocal(b.t);
      return Value::tensor(ops::mul(r, ops::wrap_number(a)));
    }
    if (code == 'P') {
      if (ta && tb) return Value::tensor(ops::pow_tensor(a.t, b.t));
      if (ta) return Value::tensor(ops::pow_scalar(a.t, b));
      return Value::tensor(ops::rpow(a, b.t));
    }
    if (code == '@') {
      if (!(ta && tb)) fail("type_error", "unsupported operand type(s) for @: '" + type_name(a) + "' and '" + type_name(b) + "'");
      return Value::tensor(ops::matmul(a.t, b.t));
    }
    fail("unsupported", "operator " + op + " on tensors is not supported yet");
  }
  if (a.is_number() && b.is_number()) {
    const bool ints = a.kind != Value::Kind::Float && b.kind != Value::Kind::Float;
    if (ints && op != "/") return int_arithmetic(op, exact_int(a), exact_int(b));
    const double x = a.number(), y = b.number();
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (op == "/") {
      if (y == 0) fail("type_error", "ZeroDivisionError: division by zero");
      return Value::real(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("type_error", op == "//" ? "ZeroDivisionError: float floor division by zero" : "ZeroDivisionError: float modulo");
      double q = std::floor(x / y);
      if (op == "//") return Value::real(q);
      return Value::real(x - q * y);
    }
    if (op == "**") return Value::real(std::pow(x, y));
  }
  if (op == "+" && a.kind == Value::Kind::Str && b.kind == Value::Kind::Str) return Value::str(a.s + b.s);
  if (op == "+" && a.kind == b.kind && (a.kind == Value::Kind::Tuple || a.kind == Value::Kind::List)) {
    Value r = a;
    r.items.insert(r.items.end(), b.items.begin(), b.items.end());
    return r;
  }
  fail("type_error", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "is") return Value::boolean(py_is(a, b));
  if (op == "is not") return Value::boolean(!py_is(a, b));
  const bool ta = a.kind == Value::Kind::Tensor, tb = b.kind == Value::Kind::Tensor;
  static const std::map<std::string, std::string> names = {{"==", "eq"}, {"!=", "ne"}, {"<", "lt"},
                                                           {"<=", "le"}, {">", "gt"}, {">=", "ge"}};
  if (ta || tb) {
    DeviceScope result_device(device_of_arguments({&a, &b}, names.at(op)));
    if (ta && tb) return Value::tensor(ops::compare(a.t, b.t, names.at(op)));
    const Value& other = ta ? b : a;
    if (!other.is_number()) {
      if (op == "==") return Value::boolean(false);
      if (op == "!=") return Value::boolean(true);
      fail("type_error", "'" + op + "' not supported between '" + type_name(a) + "' and '" + type_name(b) + "'");
    }
    // A reversed comparison flips: 1 < x is x > 1.
    static const std::map<std::string, std::string> flipped = {{"eq", "eq"}, {"ne", "ne"}, {"lt", "gt"},
                                                               {"le", "ge"}, {"gt", "lt"}, {"ge", "le"}};
    if (ta) return Value::tensor(ops::compare(a.t, ops::wrap_number(b), names.at(op)));
    return Value::tensor(ops::compare(b.t, ops::wrap_number(a), flipped.at(names.at(op))));
  }
  if (op == "==") return Value::boolean(py_equal(a, b));
  if (op == "!=") return Value::boolean(!py_equal(a, b));
  if (a.is_number() && b.is_number()) {
    const double x = a.number(), y = b.number();
    if (op == "<") return Value::boolean(x < y);
    if (op == "<=") return Value::boolean(x <= y);
    if (op == ">") return Value::boolean(x > y);
    return Value::boolean(x >= y);
  }
  fail("type_error", "'" + op + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// ------------------------------------------------------------------ backward

Value Interpreter::backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                            bool create_graph, const std::vector<Tensor>* inputs, bool allow_unused,
                            bool accumulate_inputs, const ScenarioError* argument_error) {
  // The walk of each root, recorded before backward runs; snapshots after, so they show
  // what the backward released.
  std::vector<int64_t> reached;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i]->grad_fn) continue;
    std::string key = roots.size() == 1 && !root_label_.empty() ? root_label_ : "";
    if (key.empty()) key = roots.size() == 1 ? "statement " + std::to_string(statement_)
                                             : "statement " + std::to_string(statement_) + " output " + std::to_string(i);
    record_walk(key, roots[i]->grad_fn);
    for (int64_t id : result_.walks.back().nodes) reached.push_back(id);
  }
  std::vector<Shared<autograd::Node>> keep;  // keep the graph alive for the snapshot
  for (const Tensor& r : roots)
    if (r->grad_fn) keep.push_back(r->grad_fn);
  autograd::BackwardRequest req;
  req.roots = roots;
  req.grad_roots = grads;
  req.retain_graph = retain_graph;
  req.capture = inputs != nullptr && !accumulate_inputs;
  req.accumulate_inputs = accumulate_inputs;
  if (inputs) req.inputs = *inputs;
  req.allow_unused = allow_unused;
  req.create_graph = create_graph;
  // The walk's nodes are snapshotted once the pass is over (`keep` holds them), in one sweep
  // in creation order. Taking each node's snapshot as it finished instead, while it was
  // still cached, cost more on a long chain (issue #6: this way the 10,000-op chain takes
  // 0.933x the time, the 1,000-op one 0.991x, reports byte for byte the same): the
  // snapshots' writes interleaved with the pass's own reads and allocations, and a
  // std::function call per node.
  std::vector<Tensor> captured;
  try {
    if (argument_error) throw *argument_error;
    captured = autograd::run_backward(req);
  } catch (ScenarioError& e) {
    if (e.phase.empty()) e.phase = "backward";
    snapshot_nodes(reached);
    throw;
  }
  snapshot_nodes(reached);
  if (!req.capture) return Value::none();
  std::vector<Value> out;
  for (const Tensor& g : captured) out.push_back(g ? Value::tensor(g) : Value::none());
  return Value::tuple(std::move(out));
}

std::vector<int64_t> Interpreter::walk_from(const Shared<autograd::Node>& root) const {
  // Depth-first, next_functions in order, each node once, None skipped (spec: walks);
  // an explicit stack, so a long chain cannot overflow the C++ stack.
  // Seen nodes are marked by id (dense creation-order ids) in a bitmap.
  for (size_t p = 0; p <= walk_chain_ && p < walk_nodes_.size(); ++p)
    if (walk_nodes_[p] == root.get() && walk_ids_[p] == root->id)  // the address alone could be reused
      return std::vector<int64_t>(walk_ids_.begin() + static_cast<std::ptrdiff_t>(p), walk_ids_.end());
  std::vector<int64_t> order;
  walk_nodes_.clear();
  std::vector<bool> seen(static_cast<size_t>(id_counters().node), false);
  auto mark = [&](const autograd::Node* n) {  // false if already seen
    const size_t id = static_cast<size_t>(n->id);
    if (id >= seen.size()) seen.resize(id + 1, false);
    if (seen[id]) return false;
    seen[id] = true;
    return true;
  };
  auto was_seen = [&](const autograd::Node* n) {
    const size_t id = static_cast<size_t>(n->id);
    return id < seen.size() && seen[id];
  };
  std::vector<const autograd::Node*> stack{root.get()};
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (!mark(n)) continue;
    order.push_back(n->id);
    walk_nodes_.push_back(n);
    for (auto it = n->next.rbegin(); it != n->next.rend(); ++it)
      if (it->fn && !was_seen(it->fn.get())) stack.push_back(it->fn.get());
  }
  walk_ids_ = order;
  walk_chain_ = 0;
  while (walk_chain_ + 1 < walk_nodes_.size()) {
    const autograd::Node* n = walk_nodes_[walk_chain_];
    size_t edges = 0;
    for (const autograd::Edge& e : n->next) edges += e.fn ? 1 : 0;
    if (edges != 1 || std::none_of(n->next.begin(), n->next.end(), [&](const autograd::Edge& e) {
          return e.fn.get() == walk_nodes_[walk_chain_ + 1];
        }))
      break;
    ++walk_chain_;
  }
  return order;
}

void Interpreter::record_walk(const std::string& key, const Shared<autograd::Node>& root) {
  WalkRecord w;
  w.key = key;
  w.statement = statement_;
  w.nodes = walk_from(root);
  auto it = std::find_if(result_.walks.begin(), result_.walks.end(), [&](const WalkRecord& r) { return r.key == key; });
  if (it != result_.walks.end()) result_.walks.erase(it);
  result_.walks.push_back(std::move(w));
}

// Wanted ids are marked in a bitmap (node ids are dense). A node whose latest snapshot
// still describes it (nothing it shows changed since: typically the whole graph again at
// the end of a program whose last statement was backward) keeps that snapshot instead of
// being rebuilt (issue #6).
void Interpreter::snapshot_nodes(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  const uint64_t stamp = snapshot_epoch() + 1;
  const size_t size = static_cast<size_t>(*std::max_element(ids.begin(), ids.end())) + 1;
  if (snapshot_stamp_.size() < size) snapshot_stamp_.resize(size, 0);
  std::vector<bool> wanted(size, false);
  bool any = false;
  for (int64_t id : ids) {
    if (id < 0) continue;
    uint64_t& node_stamp = snapshot_stamp_[static_cast<size_t>(id)];
    if (node_stamp == stamp) continue;
    any = wanted[static_cast<size_t>(id)] = true;
  }
  if (!any) return;
  for (autograd::Node* n : autograd::live_nodes()) {
    if (n->id < 0 || static_cast<size_t>(n->id) >= wanted.size() || !wanted[static_cast<size_t>(n->id)]) continue;
    refresh_snapshot(*n);
    snapshot_stamp_[static_cast<size_t>(n->id)] = stamp;
  }
}

std::string Interpreter::label_of(int64_t tensor_id) const {
  const InternedString* label = tensor_label(tensor_id);
  return label ? label->str() : "#" + std::to_string(tensor_id);
}

// Which gradient needs a saved value: derived from the op table's save rules
// (lib/account/save_rules.cpp; issue #4 accountant).
InternedString Interpreter::why_saved_cached(const autograd::Node& n, const autograd::SavedEntry& e) const {
  // `what` names the node and the attribute (interned: compared as pointers).
  const InternedString what = autograd::saved_name(n, e);
  for (const WhyEntry& w : why_cache_)
    if (w.inputs == n.next.size() && w.what == what) return w.why;
  if (why_cache_.size() >= 64) why_cache_.clear();  // a bound; programs use a handful
  why_cache_.push_back({what, n.next.size(), InternedString(agtrace::why_saved(n.name, e.name, 0, n.next.size(), 0).why)});
  return why_cache_.back().why;
}

InternedString Interpreter::attr_text(const autograd::AttrValue& a) const {
  using Kind = autograd::AttrValue::Kind;
  const bool scalar = a.kind == Kind::Int || a.kind == Kind::Double || a.kind == Kind::Bool || a.kind == Kind::None;
  if (!scalar) return InternedString(autograd::attr_repr(a));
  for (const AttrText& t : attr_texts_)
    // Doubles compared by their bits: -0.0 and 0.0 print differently, and a NaN is itself.
    if (t.kind == a.kind && t.i == a.i && std::memcmp(&t.d, &a.d, sizeof(double)) == 0 && t.b == a.b &&
        t.as_uint64 == a.as_uint64)
      return t.text;
  if (attr_texts_.size() >= 64) attr_texts_.clear();  // a bound; programs use a handful
  attr_texts_.push_back({a.kind, a.i, a.d, a.b, a.as_uint64, InternedString(autograd::attr_repr(a))});
  return attr_texts_.back().text;
}

void Interpreter::snapshot_into(const autograd::Node& n, NodeSnapshot& s) const {
  s.id = n.id;
  s.name = n.name;
  s.created_at = n.created_at;
  s.next.reserve(n.next.size());
  for (const auto& e : n.next) s.next.push_back(e.fn ? NodeEdge{e.fn->id, e.input_nr} : NodeEdge{});
  if (n.variable) {
    s.variable = label_of(n.variable->id);
    s.variable_tensor_id = n.variable->id;
  }
  s.released = n.released;
  s.released_at = n.released_at;
  // CopySlices shows the saved values of the node it wraps (they are part of this graph).
  const size_t own = n.saved.size(), count = own + (n.wrapped() ? n.wrapped()->saved.size() : 0);
  if (n.wrapped()) s.wraps = n.wrapped()->name;
  s.saved.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const autograd::SavedEntry& e = i < own ? n.saved[i] : n.wrapped()->saved[i - own];
    SavedSnapshot& ss = s.saved.emplace_back();  // filled in place (reserved above)
    ss.attr = e.name;
    ss.is_tensor = e.is_tensor;
    if (!e.is_tensor) {
      ss.value = attr_text(e.attr ? *e.attr : autograd::AttrValue{});
    } else if (e.var.defined) {
      const auto& v = e.var;
      ss.defined = true;
      ss.is_output = v.is_output;
      ss.tensor_id = v.tensor_id;
      ss.from_python_number = v.from_python_number;
      if (v.hooks) ss.hooks = InternedString(v.hooks->kind());
      ss.packed_bytes = v.packed_bytes();
      ss.packed_storage_id = v.packed() ? v.packed()->storage->id : -1;
      // Under hooks unpack builds a new object (measured: `_saved_self is x` is False).
      if (!v.is_output && !v.from_python_number && !v.hooks) {
        if (const InternedString* label = tensor_label(v.tensor_id)) ss.same_object_as = *label;
      }
      if (const auto* names = storage_labels(v.storage_id)) ss.shares_with = *names;
      ss.shape = v.shape;
      ss.dtype = v.dtype;
      ss.bytes = v.nbytes();
      ss.storage_id = v.storage_id;
      ss.storage_bytes = v.storage_bytes;
      ss.saved_version = v.saved_version;
      ss.saved_at = v.saved_at;
      ss.released = v.released;
      ss.released_at = v.released_at;
      ss.why = why_saved_cached(n.wrapped() ? *n.wrapped() : n, e);
      s.saved_bytes += ss.bytes;
    }
  }
}

// Whether `s`, an earlier snapshot of `n`, still describes it: the same comparisons as
// snapshot() builds, without building anything (no strings allocated). `why` follows from
// the node's and the wrapped node's names, the attribute and the edge count, all compared.
bool Interpreter::snapshot_current(const NodeSnapshot& s, const autograd::Node& n) const {
  if (s.id != n.id || s.name != n.name || s.created_at != n.created_at || s.released != n.released ||
      s.released_at != n.released_at || s.next.size() != n.next.size())
    return false;
  for (size_t i = 0; i < n.next.size(); ++i) {
    const autograd::Edge& e = n.next[i];
    if (!(s.next[i] == (e.fn ? NodeEdge{e.fn->id, e.input_nr} : NodeEdge{}))) return false;
  }
  if (n.variable) {
    if (s.variable_tensor_id != n.variable->id) return false;
    if (s.variable != label_of(n.variable->id)) return false;
  } else if (s.variable_tensor_id != -1 || !s.variable.empty()) {
    return false;
  }
  if (n.wrapped() ? s.wraps != n.wrapped()->name : !s.wraps.empty()) return false;
  const size_t count = n.saved.size() + (n.wrapped() ? n.wrapped()->saved.size() : 0);
  if (s.saved.size() != count) return false;
  for (size_t i = 0; i < count; ++i) {
    const autograd::SavedEntry& e = i < n.saved.size() ? n.saved[i] : n.wrapped()->saved[i - n.saved.size()];
    const SavedSnapshot& ss = s.saved[i];
    if (ss.attr != e.name || ss.is_tensor != e.is_tensor) return false;
    if (!e.is_tensor) {
      if (ss.value != attr_text(e.attr ? *e.attr : autograd::AttrValue{})) return false;
      continue;
    }
    if (ss.defined != e.var.defined) return false;
    if (!e.var.defined) continue;
    const auto& v = e.var;
    if (ss.is_output != v.is_output || ss.tensor_id != v.tensor_id || ss.from_python_number != v.from_python_number ||
        ss.packed_bytes != v.packed_bytes() || ss.packed_storage_id != (v.packed() ? v.packed()->storage->id : -1) ||
        ss.shape != v.shape || ss.dtype != v.dtype || ss.bytes != v.nbytes() || ss.storage_id != v.storage_id ||
        ss.storage_bytes != v.storage_bytes || ss.saved_version != v.saved_version || ss.saved_at != v.saved_at ||
        ss.released != v.released || ss.released_at != v.released_at)
      return false;
    if (v.hooks ? ss.hooks != v.hooks->kind() : !ss.hooks.empty()) return false;
    const std::string* same = nullptr;
    if (!v.is_output && !v.from_python_number && !v.hooks) {
      if (const InternedString* label = tensor_label(v.tensor_id)) same = &label->str();
    }
    if (same ? ss.same_object_as != *same : !ss.same_object_as.empty()) return false;
    const auto* names = storage_labels(v.storage_id);
    if (names ? ss.shares_with != *names : !ss.shares_with.empty()) return false;
  }
  return true;
}

void Interpreter::finish() {
  statement_ = kEndOfProgram;
  // Walks of every name bound to a tensor with a grad_fn at the end (spec: walks).
  for (const auto& [name, v] : env_.map()) {
    // A name whose grad_fn read raises has no walk (the PyTorch runner records none).
    if (v.kind != Value::Kind::Tensor || autograd::multi_output_view_rebased(v.t) || autograd::no_grad_view_stale(v.t))
      continue;
    autograd::refresh_view_grad_fn(v.t);
    if (!v.t->grad_fn) continue;
    record_walk(name, v.t->grad_fn);
  }
  // Latest snapshot of every node still alive that a walk reaches.
  std::vector<int64_t> ids;
  for (const auto& w : result_.walks) ids.insert(ids.end(), w.nodes.begin(), w.nodes.end());
  snapshot_nodes(ids);
  // Gradients of leaves, in creation order, keyed by the name a leaf was declared with in
  // `tensors` (spec: never another name bound to the same object, `h = x`), else by the name
  // bound to it (a leaf the program made).
  std::map<int64_t, std::string> declared;
  for (size_t i = 0; i < leaves_.size() && i < result_.leaves.size(); ++i)
    if (leaves_[i]) declared[leaves_[i]->id] = result_.leaves[i].name;
  for (TensorImpl* t : live_tensors()) {
    if (!t->is_leaf() || !t->requires_grad_flag || !t->grad) continue;
    GradRecord g;
    auto it = declared.find(t->id);
    g.name = it != declared.end() ? it->second : label_of(t->id);
    g.shape = t->grad->sizes;
    g.dtype = t->grad->dtype();
    if (opt_.keep_values) {
      if (opt_.values_limit > 0 && t->grad->numel() > opt_.values_limit && !t->grad->is_meta())
        g.values_elided = t->grad->numel();
      else g.values = display_values(t->grad);
    }
    result_.grads.push_back(g);
  }
  // A storage holds one dtype (no op reinterprets one): the dtype of any live tensor on it.
  std::map<int64_t, DType> storage_dtypes;
  for (TensorImpl* t : live_tensors())
    if (t->storage) storage_dtypes.emplace(t->storage->id, t->dtype());
  acc_.finish(result_, storage_dtypes);
  const std::set<int64_t>& casts = autocast_.cast_storages();
  for (const StorageLifetime& s : result_.storages)
    if (casts.count(s.id)) {
      ++result_.memory.autocast_copies;
      result_.memory.autocast_copy_bytes += s.bytes;
    }
  for (const SavedLifetime& s : result_.saved)
    if (casts.count(s.storage_id)) result_.memory.autocast_saved_bytes += s.bytes;
  const std::set<int64_t>& leaf_casts = autocast_.leaf_cast_storages();
  result_.autocast_leaf_casts.assign(leaf_casts.begin(), leaf_casts.end());
}

}  // namespace

namespace {
bool has_checkpoint(const std::vector<ProgramItem>& items) {
  for (const ProgramItem& it : items)
    if (it.kind == ProgramItem::Kind::Checkpoint || has_checkpoint(it.body)) return true;
  return false;
}

bool has_autocast(const std::vector<ProgramItem>& items) {
  for (const ProgramItem& it : items)
    if (it.kind == ProgramItem::Kind::Autocast || has_autocast(it.body)) return true;
  return false;
}

// What a run leaves alive once its interpreter is gone is kept by reference cycles, which
// PyTorch's reference counting leaks too: a leaf whose .grad has a graph (backward with
// create_graph=True, PyTorch's documented warning) or a node that saved the tensor it became
// the grad_fn of (h.mul_(h)). The report is made by then; cutting every node's hold on a
// tensor frees them, so a `check` of many scenarios does not accumulate them.
void release_what_cycles_keep() {
  std::vector<Tensor> held;
  for (autograd::Node* n : autograd::live_nodes()) {
    for (autograd::SavedEntry& e : n->saved) {
      if (e.var.original) held.push_back(std::move(e.var.original));
      if (e.var.hooked && e.var.hooked->packed) held.push_back(std::move(e.var.hooked->packed));
    }
    if (n->variable) held.push_back(std::move(n->variable));
  }
  held.clear();  // after the sweep: freeing may destroy nodes the sweep would visit
}

RunResult run_once(const Scenario& scenario, const RunOptions& options) {
  RunResult result;
  {
    Interpreter interp(scenario, options);
    result = interp.run();
  }
  release_what_cycles_keep();
  return result;
}

void compare_runs(WithWithout& c, const RunResult& with, const RunResult& without) {
  c.present = true;
  c.saved_bytes_with = with.memory.saved_bytes;
  c.saved_bytes_without = without.memory.saved_bytes;
  c.peak_bytes_with = with.memory.peak_bytes;
  c.peak_bytes_without = without.memory.peak_bytes;
  c.graph_only_bytes_with = with.memory.graph_only_bytes;
  c.graph_only_bytes_without = without.memory.graph_only_bytes;
}
}  // namespace

int64_t default_process_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) * page / 2;
}

int64_t process_peak_resident_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

RunResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  RunResult result = run_once(scenario, options);
  // "With and without checkpointing": the same program once more with every checkpoint
  // block run as a plain call of the same function (same local scope, no hooks), so the
  // figures differ only by what checkpointing changes. Only its memory figures are kept.
  if (!options.checkpoint_plain && has_checkpoint(scenario.program)) {
    RunOptions plain_options = options;
    plain_options.checkpoint_plain = true;
    compare_runs(result.checkpoint_comparison, result, run_once(scenario, plain_options));
  }
  // "Without autocast": the same program once more with every autocast block's body run
  // as plain statements, so the figures differ only by what autocast changes (its casts,
  // the low-precision values its ops save). Only the memory figures and the first error
  // outside try are kept.
  if (!options.autocast_plain && has_autocast(scenario.program)) {
    RunOptions plain_options = options;
    plain_options.autocast_plain = true;
    const RunResult plain = run_once(scenario, plain_options);
    AutocastComparison& c = result.autocast_comparison;
    compare_runs(c, result, plain);
    for (const ErrorRecord& e : plain.errors)
      if (!e.caught) {
        c.raised_at = e.statement;
        c.raised_kind = e.kind;
        c.raised_message = e.message;
        break;
      }
  }
  return result;
}

}  // namespace agtrace
