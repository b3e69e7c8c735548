// Backward nodes and saved values (torch/csrc/autograd/function.h, saved_variable.h).
#pragma once
#include <cstdint>
#include <iterator>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "tensor/tensor.hpp"
#include "util/interned_string.hpp"

namespace agtrace::autograd {

struct Node;

// A non-tensor value a node keeps for backward (`_saved_alpha`, `_saved_dim`, ...).
struct AttrValue {
  enum class Kind { None, Int, Double, Bool, IntList, String, RealList };
  Kind kind = Kind::None;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  std::vector<int64_t> list;
  std::string s;
  std::vector<double> reals;  // RealList: upsample's scale_factors, a tuple of floats
  // PyTorch stores dims and indices as uint64 in the node, so -1 reads back as 2**64-1.
  bool as_uint64 = false;

  static AttrValue none() { return {}; }
  static AttrValue integer(int64_t v, bool unsigned_view = false) {
    AttrValue a; a.kind = Kind::Int; a.i = v; a.as_uint64 = unsigned_view; return a;
  }
  static AttrValue real(double v) { AttrValue a; a.kind = Kind::Double; a.d = v; return a; }
  static AttrValue boolean(bool v) { AttrValue a; a.kind = Kind::Bool; a.b = v; return a; }
  static AttrValue ints(std::vector<int64_t> v, bool unsigned_view = false) {
    AttrValue a; a.kind = Kind::IntList; a.list = std::move(v); a.as_uint64 = unsigned_view; return a;
  }
  static AttrValue string(std::string v) { AttrValue a; a.kind = Kind::String; a.s = std::move(v); return a; }
  static AttrValue reals_list(std::vector<double> v) { AttrValue a; a.kind = Kind::RealList; a.reals = std::move(v); return a; }
};

// Python's printed form of an AttrValue (`1`, `2.0`, `(2, 3)`, `18446744073709551615`, `'none'`).
std::string attr_repr(const AttrValue& a);

// ---- Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks) --------------------
// While hooks are installed, every tensor saved for backward is handed to the innermost
// hooks' pack function, and what it returns is all the SavedVariable keeps; unpack builds a
// new tensor object from what the unpack function returns (torch/csrc/autograd/
// saved_variable.cpp, 1.13: `make_variable(hooks_->call_unpack_hook(), ...)`), and the
// version check is skipped (measured: SUMMARY.md "With saved_tensors_hooks").
struct SavedVariable;
class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  // "save_on_cpu", "fp16", "bf16", "count", "checkpoint", "checkpoint_recompute".
  virtual std::string kind() const = 0;
  // What the hooks keep for `t` (may be null: checkpoint keeps nothing).
  virtual Tensor pack(SavedVariable& v, const Tensor& t) = 0;
  // The data of the unpacked tensor (a new tensor object is built around it by the caller).
  virtual Tensor unpack(SavedVariable& v) = 0;
  // The SavedVariable is released (backward without retain_graph, or its node died).
  virtual void release(SavedVariable&) {}
};
// Innermost hooks win, as in PyTorch (a stack of default hooks per thread).
void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks);
void pop_saved_tensor_hooks();
std::shared_ptr<SavedTensorHooks> current_saved_tensor_hooks();
struct SavedHooksGuard {
  explicit SavedHooksGuard(std::shared_ptr<SavedTensorHooks> h) { push_saved_tensor_hooks(std::move(h)); }
  ~SavedHooksGuard() { pop_saved_tensor_hooks(); }
  SavedHooksGuard(const SavedHooksGuard&) = delete;
  SavedHooksGuard& operator=(const SavedHooksGuard&) = delete;
};
// The hooks of a `saved_tensor_hooks` block: "save_on_cpu" (torch.autograd.graph.save_on_cpu),
// "fp16" / "bf16" (floating tensors packed as a copy in that dtype, unpacked back to their
// own dtype; other dtypes kept as they are), "count" (identity). Null for an unknown kind.
std::shared_ptr<SavedTensorHooks> make_block_hooks(const std::string& kind);

// SavedVariable. A saved *input* keeps a reference to the very tensor object, so
// unpacking returns it (`_saved_self is x`). A saved *output* keeps only the data and
// the version counter, not the tensor object, because the object points to this node
// through grad_fn and that would be a reference cycle; unpacking builds a new tensor
// object on the same storage whose grad_fn is the saving node (`_saved_result is e` is
// False). The version at save time is checked at every unpack.
struct SavedVariable {
  // The flags and small numbers first, together: a saved entry is made per saved value and
  // kept with its node, so its padding was bytes of every graph (issue #6: 256 -> 216 bytes
  // with inplace_view_grad_fn moved to Hooked below).
  bool defined = false;        // false: not needed for the gradients asked for; reads as None
  bool is_output = false;
  bool released = false;
  bool from_python_number = false;  // a wrapped Python scalar (x * 3.0 saves 3.0 as a 0-d tensor)
  DType dtype = DType::Float32;
  int output_nr = 0;
  int saved_at = -1;           // statement that saved it
  int released_at = -1;        // statement of the backward that released it
  Tensor original;             // saved input: the object itself
  // Saved output: the data without the object.
  Shared<Storage> storage;
  InternedShape sizes, strides;  // interned: no heap blocks per saved value (issue #6)
  int64_t offset = 0;
  Shared<VersionCounter> version;

  int64_t id = -1;             // creation order of saved values
  int64_t saved_version = 0;
  int64_t tensor_id = -1;      // object id of the tensor that was saved
  // Kept after release, for reports: what was saved, where it lived.
  InternedShape shape;
  int64_t storage_id = -1;
  int64_t storage_bytes = 0;

  // ---- Saved under hooks (null hooks: the ordinary SavedVariable above).
  std::shared_ptr<SavedTensorHooks> hooks;
  // What only a value saved under hooks keeps, made by its pack, and what only the output
  // of an in-place op on a view keeps: most saved values have neither, so it lives outside
  // the entry (issue #6: saved entries were 480 bytes each; SavedEntry 288 -> 248 with the
  // reordering above and the view's grad_fn here, so a one-entry vector is in the pool's
  // 256-byte class, not 320). Whether a value was saved under hooks is `hooks`, never this.
  struct Hooked {
    Tensor packed;                 // what the pack function returned (null: nothing kept)
    bool was_leaf = false;         // metadata kept for unpack (save_metadata in PyTorch)
    bool leaf_requires_grad = false;
    Shared<Node> input_grad_fn;   // saved non-leaf input: its grad_fn at save time
    Weak<Node> grad_accumulator;  // saved leaf: its AccumulateGrad
    std::string device;            // device of the saved tensor (save_on_cpu unpacks back to it)
    int64_t checkpoint_slot = -1;  // checkpoint: the order of this pack inside its block
    // A saved output of an in-place op on a view (SavedVariable's is_inplace_on_view, 1.13):
    // the view's grad_fn at save time, held weakly; unpack uses it while it lives, else the node.
    Weak<Node> inplace_view_grad_fn;
  };
  std::unique_ptr<Hooked> hooked;
  Hooked& hooked_state() {
    if (!hooked) hooked = std::make_unique<Hooked>();
    return *hooked;
  }
  const Tensor& packed() const {
    static const Tensor none;
    return hooked ? hooked->packed : none;
  }
  int64_t packed_bytes() const { return packed() && !released ? packed()->nbytes() : 0; }
  Shared<Node> inplace_view_grad_fn() const {
    return hooked ? hooked->inplace_view_grad_fn.lock() : nullptr;
  }

  int64_t nbytes() const { return defined ? shape_numel(shape) * dtype_size(dtype) : 0; }
  Shared<Storage> held_storage() const {
    if (hooks) return packed() ? packed()->storage : nullptr;
    return original ? original->storage : storage;
  }
};

struct SavedEntry {
  // Attribute without the `_saved_` prefix: self, mat2, result, alpha, ... Interned (issue
  // #6): every report snapshot of the node copies it, which hashed the text once per entry
  // per snapshot when it was a string.
  InternedString name;
  // "<node>._saved_<name>", interned when a tensor is saved (null before): what events,
  // holder labels and snapshots key on, without comparing the two strings again (issue #6).
  InternedString what;
  bool is_tensor = false;
  bool as_list = false;  // PyTorch saves a list of tensors (IndexBackward0._saved_indices)
  SavedVariable var;
  std::unique_ptr<AttrValue> attr;  // a non-tensor value (null for tensors: most entries)
};

// "<node>._saved_<attr>" of an entry of `n`: its interned `what`, or (an entry never
// announced, so without one) the name made again.
InternedString saved_name(const Node& n, const SavedEntry& e);

struct Edge {
  Shared<Node> fn;  // null: the input does not require grad (None in next_functions)
  int input_nr = 0;
};

// A node's edges (next_functions), the first two kept inside the node (issue #6). Every
// walk of a graph (the report's walk, the engine's discovery and run, the teardown) goes
// node -> its edges -> the next node: with the edges in a heap block of their own, each
// step of a long chain waited for two cache misses, one after the other. Most ops have one
// or two inputs. The vector operations the code uses: size, [], iteration (forward and
// reverse), push_back, reserve.
class EdgeList {
 public:
  EdgeList() = default;
  EdgeList(const EdgeList&) = delete;
  EdgeList& operator=(const EdgeList&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Edge& operator[](size_t i) { return data()[i]; }
  const Edge& operator[](size_t i) const { return data()[i]; }
  Edge* begin() { return data(); }
  Edge* end() { return data() + size_; }
  const Edge* begin() const { return data(); }
  const Edge* end() const { return data() + size_; }
  std::reverse_iterator<Edge*> rbegin() { return std::reverse_iterator<Edge*>(end()); }
  std::reverse_iterator<Edge*> rend() { return std::reverse_iterator<Edge*>(begin()); }
  std::reverse_iterator<const Edge*> rbegin() const { return std::reverse_iterator<const Edge*>(end()); }
  std::reverse_iterator<const Edge*> rend() const { return std::reverse_iterator<const Edge*>(begin()); }
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void push_back(Edge e) {
    if (size_ == capacity_) grow(2 * capacity_);
    data()[size_++] = std::move(e);
  }

 private:
  static constexpr uint32_t kInline = 2;
  Edge* data() { return heap_ ? heap_.get() : inline_; }
  const Edge* data() const { return heap_ ? heap_.get() : inline_; }
  void grow(size_t n) {
    auto bigger = std::make_unique<Edge[]>(n);
    for (uint32_t i = 0; i < size_; ++i) bigger[i] = std::move(data()[i]);
    heap_ = std::move(bigger);
    capacity_ = static_cast<uint32_t>(n);
  }
  Edge inline_[kInline];
  std::unique_ptr<Edge[]> heap_;  // more than kInline edges: all of them here
  uint32_t size_ = 0, capacity_ = kInline;
};

// Shape and dtype of each forward output, so the engine can fill a missing gradient.
struct OutputMeta {
  InternedShape sizes;  // one pointer (a node keeps one per input and output; issue #6)
  DType dtype = DType::Float32;
  bool meta = false;
  bool cuda = false;  // on the cuda device (PyTorch's InputMetadata keeps the device)
};

using BackwardFn = std::vector<Tensor> (*)(Node& node, const std::vector<Tensor>& grad_outputs);

struct Node : SharedFromThis<Node> {
  // The fields a backward pass reads first lead (issue #6): the engine's discovery stamps
  // every node it reaches, and on a long graph that first read of each node is a cache miss;
  // with engine_pass at the end of the object it was a second line per node.
  // The engine's per-pass slot of this node (lib/autograd/engine.cpp PassSlots): valid while
  // engine_pass is the running pass's number.
  //
  // The node is laid out to fit 240 bytes (issue #6): with its shared_ptr block that is the
  // pool's 256-byte class, not 320, and a long chain keeps one node per op until backward,
  // reads each again there and at the teardown (a node grown by 64 bytes made the
  // 10,000-op chain 4 % slower; these 40 bytes less measured within noise). So the per-pass
  // fields and registry slot are 32-bit, the sequence number is derived from the id, and
  // CopySlices' wrapped node lives with its geometry.
  uint32_t engine_pass = 0;
  uint32_t engine_slot = 0;
  int64_t id = 0;               // creation order
  // PyTorch's ordering key in the ready queue. Only its order matters (no report shows it),
  // and PyTorch numbers nodes in creation order as the id does, except AccumulateGrad,
  // which runs as soon as it is ready (sequence_nr UINT64_MAX).
  uint64_t sequence_nr() const { return runs_first ? UINT64_MAX : static_cast<uint64_t>(id); }
  EdgeList next;
  std::vector<OutputMeta> outputs;
  BackwardFn backward = nullptr;
  // Class name, e.g. "MmBackward0". Interned (issue #6): the engine names the running node in
  // every event (run_position().op) and each report snapshot copies it, a pointer each.
  InternedString name;
  std::vector<SavedEntry> saved;
  int created_at = -1;
  int released_at = -1;
  uint32_t registry_slot = 0;   // position in the live-node registry (O(1) removal)
  bool released = false;        // saved values released by a backward without retain_graph
  bool cpp_name_prefix = false; // name() of nodes written in C++ carries "torch::autograd::"
  bool runs_first = false;      // AccumulateGrad: sequence_nr() is UINT64_MAX
  // Shape and dtype of each forward input (PyTorch keeps them as the edges' input
  // metadata), so backward formulas can reduce a broadcast gradient without saving data.
  std::vector<OutputMeta> input_meta;
  // create_graph=True: the same formula written with autograd-aware ops (lib/ops), so the
  // gradient computation records its own graph as PyTorch's does. Null: not supported yet.
  BackwardFn differentiable_backward = nullptr;
  // Set by the engine while this node runs for torch.autograd.grad: which inputs' gradients
  // lead to a captured input (PyTorch's task_should_compute_output); null: every edge. Out of
  // line (issue #6): only create_graph passes with captured inputs set it, and inline it took
  // 40 of every node's bytes.
  std::unique_ptr<std::vector<bool>> task_outputs;
  bool should_compute_output(size_t i) const {
    return i < next.size() && next[i].fn && (!task_outputs || (i < task_outputs->size() && (*task_outputs)[i]));
  }
  Tensor variable;              // AccumulateGrad: the leaf
  // CopySlices / AsStridedBackward0: where the view sits in its base's storage, and the
  // base's own geometry (hidden state, not a `_saved_` attribute in PyTorch).
  // Only those two kinds have one, so it lives outside the node (issue #6: inline it was a
  // third of every node's bytes).
  struct Geometry {
    Shape sizes, strides;
    int64_t offset = 0;
    Shape base_sizes, base_strides;
    int64_t base_offset = 0;
    // CopySlices: the node of the in-place op applied to the view, run on the view's slice
    // of the gradient (torch/csrc/autograd/functions/tensor.h). Its saved values belong
    // to this graph, but it is not reachable through next_functions.
    Shared<Node> wrapped;
  };
  std::unique_ptr<Geometry> geometry;
  // CopySlices' wrapped node (null for every other node).
  const Shared<Node>& wrapped() const { return geometry ? geometry->wrapped : kNoWrapped; }
  static inline const Shared<Node> kNoWrapped{};  // constant-initialized: no guard per call

  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::string qualified_name() const { return cpp_name_prefix ? "torch::autograd::" + name : name.str(); }

  // Adds saved values (in the order PyTorch's derivatives.yaml lists them).
  void save_input(const std::string& attr, const Tensor& t, bool needed = true);
  void save_output(const std::string& attr, const Tensor& t, int output_nr, bool needed = true);
  void save_attr(const std::string& attr, AttrValue v);

  SavedEntry* find(const std::string& attr);
  const SavedEntry* find(const std::string& attr) const;
  // Unpacks a saved tensor (checks release and version; throws ScenarioError).
  Tensor unpack(const std::string& attr);
  // A saved output as unpack() checks it (released, version), for a backward formula that
  // only reads its elements; null when it is not a plain saved output (an input, under
  // hooks, undefined), and then the formula unpacks. PyTorch's unpack of an output makes a
  // new tensor object over the saved storage, which such a formula needs no more than its
  // elements: the formula calls skip_unpacked_object() instead of unpack(), which takes the
  // id that object would have had, so that the tensors made afterwards are numbered the same
  // (issue #6: the object made and destroyed was ~700 instructions per TanhBackward0).
  const SavedVariable* saved_output(const std::string& attr);
  static void skip_unpacked_object();
  // The same for one entry of `saved`: PyTorch saves some lists of tensors
  // (IndexBackward0's `indices`), kept as several entries of one name.
  Tensor unpack_entry(SavedEntry& entry);
  Tensor unpack_hooked(const std::string& attr, SavedVariable& v);  // saved under hooks
  // The defined saved tensor `attr`, checked as unpack() checks it before it unpacks (null:
  // no such tensor; under hooks the version is not checked, as PyTorch does not).
  SavedVariable* checked_saved(const std::string& attr);
  SavedVariable* checked_entry(SavedEntry& entry);
  const AttrValue& attr(const std::string& attr) const;
  void release_saved(int statement);
  void release_saved_values(int statement);  // release_saved without counting a change (dying nodes)
  int64_t saved_bytes() const;  // bytes of saved tensors still held

 private:
  SavedEntry& new_saved_entry(const std::string& attr, bool is_tensor);
  bool hooked_save(SavedEntry& e, const Tensor& t, bool is_output, int output_nr);
};

// Registry of live nodes, in creation order (accountant and reports).
const std::vector<Node*>& live_nodes();
// Stops listing the nodes alive now (see forget_live_tensors).
void forget_live_nodes();
// Counts every change to what nodes save or release (save_input, save_output, save_attr,
// release_saved): a report's node snapshot taken when the count was c still describes
// every node if the count is c again and no name was bound since (issue #6).
uint64_t saved_state_changes();

// New node for an op with the given inputs: edges to their grad_fn or AccumulateGrad.
// `saves`: how many values the op will save, when it saves more than one (a saved entry is
// large: growing the vector one by one moved them, issue #6).
Shared<Node> make_node(std::string_view name, BackwardFn fn, const std::vector<Tensor>& inputs,
                       size_t saves = 0);
// The same for inputs written in place, `make_node("MulBackward0", fn, {a, b})`: no vector
// made and freed per op (issue #6).
Shared<Node> make_node(std::string_view name, BackwardFn fn, std::initializer_list<Tensor> inputs,
                       size_t saves = 0);
// The gradient edge of a tensor (its grad_fn, or its leaf's AccumulateGrad; null edge
// when it does not require grad).
Edge gradient_edge(const Tensor& t);
// Connects an op result to its node (result->grad_fn = node, output_nr).
void set_history(const Tensor& result, const Shared<Node>& node, int output_nr = 0);

// After an in-place op on a view: the base's grad_fn becomes CopySlices wrapping `fn`, and
// the view's grad_fn becomes AsStridedBackward0 over it (PyTorch's rebase_history for
// views; measured: `h[0].mul_(2)` gives h CopySlices and h[0] AsStridedBackward0).
void rebase_view_history(const Tensor& view, const Shared<Node>& fn);

// A view whose base was edited in place after the view's grad_fn was set gets a new
// grad_fn, AsStridedBackward0 over the base's current one, as PyTorch regenerates it on
// access. Called wherever a view's grad_fn is read. An output of split / chunk / unbind (or a
// view of one) is not regenerated: reading its grad_fn raises view_inplace
// (handle_view_on_rebase for CreationMeta MULTI_OUTPUT_NODE).
void refresh_view_grad_fn(const Tensor& t);
// Such a view whose grad_fn read would raise (measured: grad_fn, is_leaf and using it in an
// op raise; shape, _version and requires_grad do not).
bool multi_output_view_rebased(const Tensor& t);
// A view made in no_grad (CreationMeta NO_GRAD_MODE, inherited by views of it) whose family
// was edited in place after it was made: PyTorch raises view_inplace where its grad_fn is read
// (the grad_fn and is_leaf attributes, an op in grad mode taking its gradient edge), whether
// the edit ran in grad mode or not (handle_view_on_rebase(indirect=true), measured in 1.13).
void check_no_grad_view_current(const Tensor& t);
bool no_grad_view_stale(const Tensor& t);
// view_inplace for an in-place edit of `view` (indirect: of its base or another view of it)
// that its creation (no_grad mode, a function returning several views) forbids; unsupported
// for a view of a no_grad view, where 1.13 fails an internal assert.
[[noreturn]] void throw_view_rebase_error(const Tensor& view, bool indirect);
// The no_grad-mode creation of a new view of `source`: set when grad mode is off, inherited
// from a source view that has it (propagate_creation_meta, 1.13).
inline bool view_creation_in_no_grad(const Tensor& source) {
  return !grad_enabled() || (source->is_view() && source->view_made_in_no_grad);
}

}  // namespace agtrace::autograd
