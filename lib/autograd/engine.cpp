#include "autograd/engine.hpp"

#include <atomic>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "errors.hpp"
#include "ops/double_backward.hpp"
#include "ops/ops.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/device_kernels.hpp"
#include "tensor/events.hpp"
#include "tensor/fast_paths.hpp"
#include "tensor/kernels.hpp"
#include "util/profile.hpp"

namespace agtrace::autograd {

namespace {

// Sums gradients arriving at one node before it runs (PyTorch's InputBuffer).
struct InputBuffer {
  std::vector<Tensor> grads;
  void add(int input_nr, const Tensor& g) {
    if (static_cast<int>(grads.size()) <= input_nr) grads.resize(input_nr + 1);
    if (!g) return;
    Tensor& slot = grads[input_nr];
    if (!slot) {
      slot = g;
    } else if (grad_enabled()) {
      // create_graph=True: InputBuffer::accumulate computes `old_var + var` out of place in
      // grad mode, recording AddBackward0 (measured: (x*x).sum() gives g.grad_fn AddBackward0
      // over the two MulBackward0).
      slot = ops::add(slot, g, Value::integer(1));
    } else {
      Tensor sum = kernels::device::any_on_device({&slot, &g})
                       ? kernels::device::binary(cuda::pw::BinaryOp::Add, slot, g, slot->dtype(), "add")
                       // The same sum per element, split over the run's threads for large float32
                       // gradients (a residual stream's gradient is accumulated once per use).
                       : kernels::binary_split(slot, g, slot->dtype(), [](double a, double b) { return a + b; }, "add");
      // Without grad mode InputBuffer::accumulate adds in place into a dense old gradient
      // (old_var.add_(var): its layout), else computes var + old_var (TensorIterator's
      // layout of that operand order).
      if (!sum->storage->on_device() && sum->sizes == slot->sizes) {
        const Shape layout = ops::non_overlapping_and_dense(slot) ? slot->strides.vec()
                                                                  : kernels::iterator_output_strides(sum->sizes, {&g, &slot});
        kernels::relayout_in_place(sum, layout);
      }
      slot = sum;
    }
  }
};

// This pass's state per node (dependency count, input buffer), in dense arrays: a node's
// slot is stamped on the node with the pass number. run_backward has one caller (the
// interpreter's backward statement) and never runs inside itself, which the constructor
// checks: a nested pass would overwrite the outer pass's stamps.
class PassSlots {
 public:
  // Pass numbers are 32-bit (Node::engine_pass); 0 is never one (a new node's stamp).
  PassSlots() : pass_(++next_pass_) {
    if (pass_ == 0) pass_ = ++next_pass_;
    if (active_) throw std::logic_error("run_backward called while another backward pass runs");
    active_ = true;
  }
  ~PassSlots() { active_ = false; }
  PassSlots(const PassSlots&) = delete;
  PassSlots& operator=(const PassSlots&) = delete;

  // False if the node already has a slot in this pass.
  bool discover(Node* n) {
    if (n->engine_pass == pass_) return false;
    n->engine_pass = pass_;
    n->engine_slot = static_cast<uint32_t>(states_.size());
    states_.emplace_back();
    return true;
  }
  int& deps(Node* n) { return at(n).deps; }
  // The buffer gradients for `n` are added to (it has pending inputs from then on).
  InputBuffer& buffer(Node* n) {
    State& s = at(n);
    s.pending = true;
    return s.buffer;
  }
  InputBuffer take(Node* n) {
    State& s = at(n);
    s.pending = false;
    return std::move(s.buffer);
  }
  // Received gradients that no run of the node has taken yet.
  bool pending(Node* n) { return at(n).pending; }

 private:
  struct State {
    int deps = 0;
    bool pending = false;
    InputBuffer buffer;
  };
  State& at(Node* n) {
    discover(n);
    return states_[n->engine_slot];
  }
  static inline std::atomic<uint32_t> next_pass_{0};
  static inline thread_local bool active_ = false;
  uint32_t pass_;
  std::vector<State> states_;
};

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// AccumulateGrad's layout contract (obeys_layout_contract): a non-overlapping, dense leaf's
// gradient has the leaf's strides (sizes-1 dims aside), any other leaf's is contiguous.
bool obeys_layout_contract(const Tensor& g, const Tensor& leaf) {
  if (!ops::non_overlapping_and_dense(leaf)) return g->is_contiguous();
  for (size_t d = 0; d < leaf->sizes.size(); ++d)
    if (leaf->sizes[d] != 1 && g->strides[d] != leaf->strides[d]) return false;
  return true;
}

// A contiguous copy in `dtype` (a cast alone keeps the gradient's layout, as `to` does).
Tensor contiguous_in_dtype(const Tensor& g, DType dtype) {
  if (!g->is_contiguous()) return copy_to(g, dtype, g->storage->device);
  return g->dtype() == dtype ? kernels::copy(g) : kernels::cast(g, dtype);
}
// clone_obey_contract: a copy with the leaf's strides when the leaf is non-overlapping and
// dense (measured: a.t() leaf's .grad is not contiguous, stride (1, 2)), else a contiguous
// copy.
Tensor clone_obey_contract(const Tensor& g, const Tensor& leaf) {
  if (g->sizes == leaf->sizes && ops::non_overlapping_and_dense(leaf) && !(leaf->is_contiguous() && g->is_contiguous())) {
    const Shape strides = leaf->strides.vec();
    return copy_to(g, leaf->dtype(), leaf->storage->device, &strides);
  }
  return contiguous_in_dtype(g, leaf->dtype());
}

// AccumulateGrad::apply: the first gradient becomes .grad (PyTorch steals it when nothing
// else holds it and it obeys the layout contract, otherwise it copies); later ones are
// added in place (`grad += new`).
void accumulate(Node& acc, const Tensor& g) {
  Tensor leaf = acc.variable;
  if (!leaf || !g) return;
  if (!leaf->grad) {
    const bool stealable = g.use_count() <= 2 && g->storage.use_count() == 1 && !g->is_view() &&
                           g->sizes == leaf->sizes && obeys_layout_contract(g, leaf) && g->dtype() == leaf->dtype();
    leaf->grad = stealable ? g : clone_obey_contract(g, leaf);
    if (leaf->grad->sizes != leaf->sizes)
      leaf->grad = make_alias(leaf->grad, leaf->sizes, contiguous_strides(leaf->sizes), 0);
    leaf->grad->grad_fn.reset();
    leaf->grad->requires_grad_flag = false;
    notify_grad_changed(*leaf);
  } else {
    if (kernels::device::any_on_device({&leaf->grad, &g}))
      kernels::device::binary_inplace(cuda::pw::BinaryOp::Add, leaf->grad, g);
    else
      kernels::binary_inplace(leaf->grad, g, [](double a, double b) { return a + b; }, "add_");
    leaf->grad->version->bump();
  }
}

// CopyBackwards (torch/csrc/autograd/functions/tensor.cpp): edges (None, src); the source's
// gradient is grad.to(src options), the gradient itself for the same dtype.
std::vector<Tensor> copy_backwards_backward(Node&, const std::vector<Tensor>& g) { return {nullptr, g[0]}; }

// AccumulateGrad::accumulateGrad in grad mode (create_graph=True): a first gradient is
// copied, `new_empty_strided(...).copy_(new_grad)` (clone_obey_contract), so .grad's grad_fn
// is CopyBackwards with edges (None, new_grad's edge) when new_grad requires grad (measured:
// y.backward(create_graph=True) on a fresh leaf gives x.grad.grad_fn CopyBackwards,
// next_functions ((None, 0), (MulBackward0, 0)); no grad_fn when new_grad has no graph).
// A later gradient is `variable_grad + new_grad` out of place (measured: AddBackward0 with
// next_functions (CopyBackwards, MulBackward0), _saved_alpha 1; x.grad is a new object).
void accumulate_with_graph(Node& acc, const Tensor& g) {
  Tensor leaf = acc.variable;
  if (!leaf || !g) return;
  if (!leaf->grad) {
    Tensor copy = clone_obey_contract(g, leaf);
    if (g->requires_grad()) {
      auto node = make_node("CopyBackwards", copy_backwards_backward, {nullptr, g});
      node->cpp_name_prefix = true;
      node->differentiable_backward = copy_backwards_backward;
      set_history(copy, node);
    }
    leaf->grad = copy;
  } else {
    leaf->grad = ops::add(leaf->grad, g, Value::integer(1));
  }
  notify_grad_changed(*leaf);
}

// Whether any tensor ever asked to retain its gradient: backward only looks for them then.
bool g_retain_grad_requested = false;

// The tensors whose grad_fn is a node of this pass and that retain their gradient, by node.
std::map<const Node*, std::vector<TensorImpl*>> retained_by_node() {
  std::map<const Node*, std::vector<TensorImpl*>> out;
  if (!g_retain_grad_requested) return out;
  for (TensorImpl* t : live_tensors())
    if (t->retains_grad && t->grad_fn) out[t->grad_fn.get()].push_back(t);
  return out;
}

// The retains_grad hook, run on the gradients a node received before it runs (PyTorch calls
// tensor pre-hooks even for a node the pass does not execute: backward(inputs=[h]) with h a
// non-leaf fills h.grad).
void retain_gradients(const std::vector<TensorImpl*>& tensors, const InputBuffer& buf) {
  for (TensorImpl* t : tensors) {
    const size_t nr = static_cast<size_t>(t->output_nr);
    if (nr >= buf.grads.size() || !buf.grads[nr]) continue;
    const Tensor& g = buf.grads[nr];
    t->grad = t->grad ? ops::add(t->grad, g, Value::integer(1)) : ops::clone(g);
    notify_grad_changed(*t);
  }
}

Tensor zeros_for(const OutputMeta& m) {
  DeviceScope scope(m.cuda ? cuda_device_name() : cpu_device_name());
  return kernels::full(m.sizes, 0.0, m.dtype, m.meta);
}

}  // namespace

std::vector<Tensor> run_backward(const BackwardRequest& req) {
  // Backward formulas record a graph only for create_graph=True (the engine runs them in
  // grad mode then, as PyTorch's GraphTask does with grad_mode = create_graph).
  GradModeGuard grad_mode(req.create_graph);
  RunPosition& pos = run_position();
  const bool was_backward = pos.in_backward;
  pos.in_backward = true;
  struct Restore {
    RunPosition& p;
    bool v;
    ~Restore() {
      p.in_backward = v;
      p.op.clear();
      p.backward_node = -1;
    }
  } restore{pos, was_backward};
  profile::Scope profile_pass(profile::Section::StatementBackward, "", pos.statement);  // --profile

  // Root gradients.
  std::vector<std::pair<Edge, Tensor>> root_edges;
  for (size_t i = 0; i < req.roots.size(); ++i) {
    const Tensor& r = req.roots[i];
    if (!r->requires_grad()) {
      ScenarioError e("no_grad_fn", "element " + std::to_string(i) +
                                        " of tensors does not require grad and does not have a grad_fn");
      e.facts = {{"tensor_id", r->id}};
      throw e;
    }
    Tensor g = i < req.grad_roots.size() ? req.grad_roots[i] : nullptr;
    if (!g) {
      if (r->numel() != 1) {
        ScenarioError e("grad_not_scalar", "grad can be implicitly created only for scalar outputs");
        e.facts = {{"shape", r->sizes}};
        throw e;
      }
      pos.op = "ones_like";
      DeviceScope root_device(r->storage->device);  // ones_like: on the root's device
      g = kernels::full(r->sizes, 1.0, r->dtype(), r->is_meta());  // torch.ones_like(root)
    } else if (g->sizes != r->sizes) {
      // PyTorch prints the shapes as torch.Size objects: "Mismatch in shape: grad_output[0]
      // has a shape of torch.Size([3]) and output[0] has a shape of torch.Size([2, 3])."
      ScenarioError e("shape_mismatch", "Mismatch in shape: grad_output[" + std::to_string(i) +
                                            "] has a shape of torch.Size(" + shape_str(g->sizes) +
                                            ") and output[" + std::to_string(i) + "] has a shape of torch.Size(" +
                                            shape_str(r->sizes) + ").");
      e.facts = {{"shapes", {g->sizes, r->sizes}}, {"op", "backward"}};
      throw e;
    }
    root_edges.push_back({gradient_edge(r), g});
  }

  // The engine checks the inputs after the roots (measured: a root without grad_fn raises
  // no_grad_fn first); torch.autograd.grad raises ValueError for none.
  if (req.capture && req.inputs.empty()) throw ScenarioError("type_error", "grad requires non-empty inputs.");

  // backward(inputs=...): torch 1.13's run_backward retains the grad of each input (so a
  // non-leaf input gets .grad and retains_grad; one that does not require grad raises
  // retain_grad's error) after refusing an empty list.
  if (req.accumulate_inputs) {
    if (req.inputs.empty()) throw ScenarioError("type_error", "'inputs' argument to backward() cannot be empty.");
    for (const Tensor& t : req.inputs) retain_grad(t);
  }
  // Capture points for torch.autograd.grad: the edge of each input.
  std::vector<Edge> capture_edges;
  for (const Tensor& t : req.inputs) {
    Edge e = gradient_edge(t);
    if (!e.fn) {
      ScenarioError err("no_grad_fn", "One of the differentiated Tensors does not require grad");
      throw err;
    }
    capture_edges.push_back(e);
  }

  // Dependencies: how many edges point at each node from the reachable graph (iterative DFS).
  // Each node reached gets a slot in this pass's dense arrays, stamped on the node itself
  // (PyTorch's GraphTask keys hash maps by node; on a 10,000-node chain those lookups were
  // a twentieth of the run, issue #6). Nothing iterates the slots in an order that reaches
  // the output.
  PassSlots slots;
  std::vector<Node*> order;  // discovery order
  {
    std::vector<Node*> stack;
    for (auto& [edge, g] : root_edges)
      if (edge.fn && slots.discover(edge.fn.get())) stack.push_back(edge.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next) {
        if (!e.fn) continue;
        const bool discovered = slots.discover(e.fn.get());
        ++slots.deps(e.fn.get());
        if (discovered) stack.push_back(e.fn.get());
      }
    }
  }

  // With inputs, only nodes on a path to an input's edge run (exec_info): for autograd.grad
  // AccumulateGrad never runs; for backward(inputs=...) the inputs' own AccumulateGrad do.
  const bool restricted = req.capture || req.accumulate_inputs;
  std::set<Node*> needed;
  std::map<Node*, std::vector<std::pair<int, size_t>>> captures;  // node -> (input_nr, input index)
  if (restricted) {
    std::set<Node*> targets;
    for (size_t i = 0; i < capture_edges.size(); ++i) {
      targets.insert(capture_edges[i].fn.get());
      if (req.capture) captures[capture_edges[i].fn.get()].push_back({capture_edges[i].input_nr, i});
    }
    // Reverse topological fixpoint: a node is needed if any child is a target or needed.
    bool changed = true;
    while (changed) {
      changed = false;
      for (Node* n : order) {
        if (needed.count(n)) continue;
        for (const Edge& e : n->next)
          if (e.fn && (targets.count(e.fn.get()) || needed.count(e.fn.get()))) {
            needed.insert(n);
            changed = true;
            break;
          }
      }
    }
    if (!req.capture)
      for (Node* target : targets)
        if (target->variable) needed.insert(target);  // a leaf input: its AccumulateGrad runs
  }
  const auto retained = retained_by_node();

  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  std::vector<Tensor> captured(req.inputs.size());
  std::vector<bool> reached(req.inputs.size(), false);

  auto deliver = [&](Node* n, int input_nr, const Tensor& g) {
    slots.buffer(n).add(input_nr, g);
  };
  for (auto& [edge, g] : root_edges)
    if (edge.fn) deliver(edge.fn.get(), edge.input_nr, g);
  for (auto& [edge, g] : root_edges)
    if (edge.fn && slots.deps(edge.fn.get()) == 0) {
      slots.deps(edge.fn.get()) = -1;  // queued
      ready.push(edge.fn.get());
    }

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    InputBuffer buf = slots.take(n);
    buf.grads.resize(std::max<size_t>(buf.grads.size(), n->outputs.size()));

    if (!retained.empty()) {
      auto it = retained.find(n);
      if (it != retained.end()) retain_gradients(it->second, buf);
    }
    if (req.capture) {
      auto it = captures.find(n);
      if (it != captures.end())
        for (auto [input_nr, idx] : it->second) {
          captured[idx] = input_nr < static_cast<int>(buf.grads.size()) ? buf.grads[input_nr] : nullptr;
          reached[idx] = true;
        }
    }
    const bool run = restricted ? needed.count(n) > 0 : true;
    std::vector<Tensor> out;
    if (run) {
      // torch 1.13's CopySlices::apply adds the wrapped node's next functions to the graph
      // task's exec_info (GraphTask::init does not look inside CopySlices), so under
      // torch.autograd.grad they all run and compute: a leaf behind the in-place op gets its
      // .grad accumulated, captured or not (measured: grad(loss, [x]) through
      // h[:, 1].mul_(w) sets w.grad).
      if (restricted && n->wrapped())
        for (const Edge& e : n->wrapped()->next)
          if (e.fn) needed.insert(e.fn.get());
      pos.op = n->name;
      pos.backward_node = n->id;  // events: the node where a backward allocation happened
      // A node's gradients live where its forward outputs did (PyTorch runs each node on
      // its device's ready queue).
      DeviceScope node_device(!n->outputs.empty() && n->outputs[0].cuda ? cuda_device_name() : cpu_device_name());
      profile::Scope profile_node(profile::Section::OpBackward, n->name);  // --profile
      static const InternedString kAccumulateGrad("AccumulateGrad");
      if (n->name == kAccumulateGrad) {  // interned: one pointer comparison
        // AccumulateGrad::apply returns at once when its variable no longer requires grad
        // (measured: x.requires_grad_(False) after the graph is built leaves x.grad None).
        const Tensor incoming = buf.grads.empty() ? nullptr : buf.grads[0];
        if (n->variable && n->variable->requires_grad())
          (req.create_graph ? accumulate_with_graph : accumulate)(*n, incoming);
      } else {
        // PyTorch's generated apply() unpacks every saved variable before its formula runs,
        // so a released or modified one raises here whether or not the formula reads it
        // (MeanBackward1 saves self for its sizes only, and a second backward still fails).
        for (SavedEntry& e : n->saved)
          if (e.is_tensor) n->checked_entry(e);
        if (req.create_graph && !n->differentiable_backward)
          throw ScenarioError("unsupported", "create_graph=True through " + n->name + " is not supported yet");
        for (size_t i = 0; i < n->outputs.size(); ++i)
          if (!buf.grads[i]) buf.grads[i] = zeros_for(n->outputs[i]);
        if (req.create_graph) {
          // Only the gradients that lead to a captured input are computed (and save values).
          if (req.capture) {
            n->task_outputs = std::make_unique<std::vector<bool>>(n->next.size(), false);
            for (size_t i = 0; i < n->next.size(); ++i) {
              Node* c = n->next[i].fn.get();
              (*n->task_outputs)[i] = c && (needed.count(c) > 0 || captures.count(c) > 0);
            }
          }
          struct ClearMask {
            Node* n;
            ~ClearMask() { n->task_outputs.reset(); }
          } clear_mask{n};
          out = n->differentiable_backward(*n, buf.grads);
          // validate_outputs in grad mode: broadcast reductions and dtype casts are recorded.
          for (size_t i = 0; i < out.size() && i < n->next.size(); ++i)
            if (out[i] && n->next[i].fn) out[i] = ops::validate_grad_output(out[i], n->input_meta[i]);
        } else {
          out = n->backward(*n, buf.grads);
        }
      }
      if (!req.retain_graph) n->release_saved(pos.statement);
    }
    buf.grads.clear();
    // PyTorch never queues a node it need not execute (exec_info), so such a node's children
    // keep its dependency counted; only the CopySlices workaround above can make one of them
    // needed afterwards, and then it waits forever (checked below).
    if (!run) continue;
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.fn) continue;
      if (run && i < out.size() && out[i]) deliver(e.fn.get(), e.input_nr, out[i]);
      int& deps = slots.deps(e.fn.get());
      if (--deps == 0) {
        deps = -1;
        ready.push(e.fn.get());
      }
    }
  }

  if (req.capture) {
    // A node made needed by CopySlices' workaround that received a gradient but whose other
    // parents were never executed: torch 1.13 ends the pass with "RuntimeError: could not
    // compute gradients for some functions" (measured: two in-place edits of views of one
    // base, the older one's operand reaching a leaf the newer one also edits with).
    // The oldest such node (creation order: deterministic, unlike the hash map's order).
    Node* stuck = nullptr;
    for (Node* node : order)
      if (slots.pending(node) && needed.count(node) && slots.deps(node) > 0 && (!stuck || node->id < stuck->id))
        stuck = node;
    if (Node* node = stuck)
      throw ScenarioError("unsupported",
                          "torch 1.13 raises RuntimeError: could not compute gradients for some functions here ("
                          "CopySlices made " + node->name + " needed after one of its inputs was skipped); "
                          "agtrace does not reproduce that error yet");
    for (size_t i = 0; i < req.inputs.size(); ++i)
      if (!reached[i] && !req.allow_unused) {
        ScenarioError e("unused_input",
                        "One of the differentiated Tensors appears to not have been used in the graph. "
                        "Set allow_unused=True if this is the desired behavior.");
        e.facts = {{"input", i}};
        throw e;
      }
  }
  return captured;
}

void retain_grad(const Tensor& t) {
  // torch 1.13 Tensor.retain_grad: refused for a tensor that does not require grad, a no-op
  // on a leaf (its .grad is filled anyway).
  if (!t->requires_grad())
    throw ScenarioError("type_error", "can't retain_grad on Tensor that has requires_grad=False");
  if (t->is_leaf()) return;
  t->retains_grad = true;
  g_retain_grad_requested = true;
}

}  // namespace agtrace::autograd
