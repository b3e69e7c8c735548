// The backward engine (torch/csrc/autograd/engine.cpp, single-threaded).
#pragma once
#include <vector>

#include "autograd/node.hpp"

namespace agtrace::autograd {

struct BackwardRequest {
  std::vector<Tensor> roots;
  std::vector<Tensor> grad_roots;  // null entries: implicit ones (scalar roots only)
  bool retain_graph = false;
  // torch.autograd.grad (capture): the gradients of these tensors are returned instead of
  // accumulated into leaves' .grad. backward(inputs=...) (no capture): only the nodes on a
  // path to these tensors run, so only their .grad are filled. Empty: the whole graph.
  std::vector<Tensor> inputs;
  bool capture = false;
  // backward(inputs=...) was called (inputs may then be empty, which PyTorch refuses).
  bool accumulate_inputs = false;
  bool allow_unused = false;
  // create_graph=True: formulas run in grad mode through Node::differentiable_backward,
  // so the gradients have a graph of their own.
  bool create_graph = false;
};

// Runs backward. For `capture`, returns one gradient per input (null where unused and
// allow_unused). Throws ScenarioError (phase "backward") as PyTorch raises.
std::vector<Tensor> run_backward(const BackwardRequest& req);

// t.retain_grad() on a non-leaf: from then on every backward fills t.grad with the gradient
// arriving at t's grad_fn (torch 1.13's retains_grad hook: a clone the first time, then
// `grad + new` out of place), following t's grad_fn through in-place edits.
void retain_grad(const Tensor& t);

}  // namespace agtrace::autograd
