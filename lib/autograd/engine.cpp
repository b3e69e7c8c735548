#include "autograd/engine.hpp"

#include <map>
#include <queue>
#include <set>

#include "autograd/grad_mode.hpp"
#include "errors.hpp"
#include "tensor/events.hpp"
#include "tensor/kernels.hpp"

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
    } else {
      slot = kernels::binary(slot, g, slot->dtype(), [](double a, double b) { return a + b; }, "add");
    }
  }
};

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// AccumulateGrad::apply: the first gradient becomes .grad (PyTorch steals it when nothing
// else holds it, otherwise it copies); later ones are added in place (`grad += new`).
void accumulate(Node& acc, const Tensor& g) {
  Tensor leaf = acc.variable;
  if (!leaf || !g) return;
  if (!leaf->grad) {
    const bool stealable = g.use_count() <= 2 && g->storage.use_count() == 1 && !g->is_view() &&
                           g->is_contiguous() && g->sizes == leaf->sizes && g->dtype() == leaf->dtype();
    leaf->grad = stealable ? g : kernels::cast(g, leaf->dtype());
    if (leaf->grad->sizes != leaf->sizes)
      leaf->grad = make_alias(leaf->grad, leaf->sizes, contiguous_strides(leaf->sizes), 0);
    leaf->grad->grad_fn.reset();
    leaf->grad->requires_grad_flag = false;
  } else {
    kernels::binary_inplace(leaf->grad, g, [](double a, double b) { return a + b; }, "add_");
    leaf->grad->version->bump();
  }
}

Tensor zeros_for(const OutputMeta& m) { return kernels::full(m.sizes, 0.0, m.dtype, m.meta); }

}  // namespace

std::vector<Tensor> run_backward(const BackwardRequest& req) {
  GradModeGuard no_grad(false);  // backward formulas record no graph (create_graph=False)
  RunPosition& pos = run_position();
  const bool was_backward = pos.in_backward;
  pos.in_backward = true;
  struct Restore {
    RunPosition& p;
    bool v;
    ~Restore() { p.in_backward = v; p.op.clear(); }
  } restore{pos, was_backward};

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
  std::map<Node*, int> deps;
  std::vector<Node*> order;  // discovery order
  {
    std::set<Node*> seen;
    std::vector<Node*> stack;
    for (auto& [edge, g] : root_edges)
      if (edge.fn && seen.insert(edge.fn.get()).second) stack.push_back(edge.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next) {
        if (!e.fn) continue;
        deps[e.fn.get()]++;
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }

  // For autograd.grad, only nodes on a path to a capture point run (exec_info), and
  // AccumulateGrad never runs.
  std::set<Node*> needed;
  std::map<Node*, std::vector<std::pair<int, size_t>>> captures;  // node -> (input_nr, input index)
  if (req.capture) {
    std::set<Node*> targets;
    for (size_t i = 0; i < capture_edges.size(); ++i) {
      targets.insert(capture_edges[i].fn.get());
      captures[capture_edges[i].fn.get()].push_back({capture_edges[i].input_nr, i});
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
  }

  std::map<Node*, InputBuffer> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  std::vector<Tensor> captured(req.inputs.size());
  std::vector<bool> reached(req.inputs.size(), false);

  auto deliver = [&](Node* n, int input_nr, const Tensor& g) {
    buffers[n].add(input_nr, g);
  };
  for (auto& [edge, g] : root_edges)
    if (edge.fn) deliver(edge.fn.get(), edge.input_nr, g);
  for (auto& [edge, g] : root_edges)
    if (edge.fn && deps[edge.fn.get()] == 0) {
      deps[edge.fn.get()] = -1;  // queued
      ready.push(edge.fn.get());
    }

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    InputBuffer buf = std::move(buffers[n]);
    buffers.erase(n);
    buf.grads.resize(std::max<size_t>(buf.grads.size(), n->outputs.size()));

    if (req.capture) {
      auto it = captures.find(n);
      if (it != captures.end())
        for (auto [input_nr, idx] : it->second) {
          captured[idx] = input_nr < static_cast<int>(buf.grads.size()) ? buf.grads[input_nr] : nullptr;
          reached[idx] = true;
        }
    }
    const bool run = req.capture ? needed.count(n) > 0 : true;
    std::vector<Tensor> out;
    if (run) {
      pos.op = n->name;
      if (n->name == "AccumulateGrad") {
        accumulate(*n, buf.grads.empty() ? nullptr : buf.grads[0]);
      } else {
        for (size_t i = 0; i < n->outputs.size(); ++i)
          if (!buf.grads[i]) buf.grads[i] = zeros_for(n->outputs[i]);
        out = n->backward(*n, buf.grads);
      }
      if (!req.retain_graph) n->release_saved(pos.statement);
    }
    buf.grads.clear();
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.fn) continue;
      if (run && i < out.size() && out[i]) deliver(e.fn.get(), e.input_nr, out[i]);
      if (--deps[e.fn.get()] == 0) {
        deps[e.fn.get()] = -1;
        ready.push(e.fn.get());
      }
    }
  }

  if (req.capture) {
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

}  // namespace agtrace::autograd
