// torch.is_grad_enabled(): off inside no_grad blocks, where ops record no graph.
#pragma once

namespace agtrace::autograd {

bool grad_enabled();
void set_grad_enabled(bool on);

struct GradModeGuard {
  bool previous;
  explicit GradModeGuard(bool on) : previous(grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(previous); }
};

}  // namespace agtrace::autograd
