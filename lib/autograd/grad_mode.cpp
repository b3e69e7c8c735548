#include "autograd/grad_mode.hpp"

namespace agtrace::autograd {
namespace {
bool g_enabled = true;
}
bool grad_enabled() { return g_enabled; }
void set_grad_enabled(bool on) { g_enabled = on; }
}  // namespace agtrace::autograd
