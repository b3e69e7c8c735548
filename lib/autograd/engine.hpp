// The backward engine (torch/csrc/autograd/engine.cpp, single-threaded).
#pragma once
#include <vector>

#include "autograd/node.hpp"

namespace agtrace::autograd {

struct BackwardRequest {
  std::vector<Tensor> roots;
  std::vector<Tensor> grad_roots;  // null entries: implicit ones (scalar roots only)
  bool retain_graph = false;
  // torch.autograd.grad: capture the gradients of these tensors instead of accumulating
  // into leaves' .grad; empty for Tensor.backward().
  std::vector<Tensor> inputs;
  bool capture = false;
  bool allow_unused = false;
  // create_graph=True: formulas run in grad mode through Node::differentiable_backward,
  // so the gradients have a graph of their own.
  bool create_graph = false;
};

// Runs backward. For `capture`, returns one gradient per input (null where unused and
// allow_unused). Throws ScenarioError (phase "backward") as PyTorch raises.
std::vector<Tensor> run_backward(const BackwardRequest& req);

}  // namespace agtrace::autograd
