// The steps every in-place op takes, in PyTorch's order (VariableType's in-place kernels,
// 1.13): refuse a self whose elements overlap, refuse the edit where autograd forbids it,
// build the node before the edit (a formula may need the old value), write, bump the
// version once, then rebase the history (a view's base gets CopySlices). Shared by
// inplace.cpp and every op file that has a `_` form.
#pragma once
#include <string>

#include <optional>

#include "autograd/node.hpp"
#include "tensor/device_kernels.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops::detail {

// "more than one element of the written-to tensor refers to a single memory location"
// (an expanded self), raised grad mode or not, after check_inplace_allowed: the autograd
// checks come first (measured: x.expand(2, 3).mul_(2) of a leaf x requiring grad is
// view_of_leaf_inplace; of a non-leaf, the overlap error).
void check_no_internal_overlap(const Tensor& self);
// leaf_inplace, view_of_leaf_inplace, view_inplace (an output of split/chunk/unbind, a view
// made in no_grad), checked in grad mode when self or one of `others` requires grad
// (VariableTypeUtils.h check_inplace(self, compute_requires_grad(inputs...)), 1.13).
void check_inplace_allowed(const Tensor& self, std::initializer_list<const Tensor*> others = {});
// The new node becomes self's grad_fn, or on a view its base's CopySlices wraps it.
void record_history(const Tensor& self, const Shared<autograd::Node>& node);
// Bumps self's version counter once and announces it.
void bump(const Tensor& self);
// PyTorch's "result type X can't be cast to the desired output type Y".
void check_castable(const Tensor& self, const Tensor& other, const std::string& op);

// What the in-place form of a unary op records (VariableType's in-place kernels, 1.13): the
// out-of-place op's node over self's previous history, saving a clone of self made before
// the edit when the formula reads self (measured: x.sin_() saves `_saved_self` with
// grad_fn CloneBackward0, its own storage, version 0), or self itself after the edit when it
// reads the result (x.sqrt_() saves `_saved_result` on x's storage at version 1).
struct UnaryRecipe {
  enum class Saves { Nothing, Self, Result };
  const char* op;    // "sin"
  const char* node;  // "SinBackward0"
  double (*f)(double);
  autograd::BackwardFn backward;
  autograd::BackwardFn dbackward;  // create_graph=True formula; null where not written
  Saves saves;
  bool float_only;  // an integer self cannot hold the result (x.sin_() on int64 raises)
  cuda::pw::UnaryOp device_op;
  // The formula as a float32 block loop, o[0..n) from x[0..n), where its float result is
  // always the general path's bits (tensor/fast_paths.hpp; relu); null where there is none.
  void (*exact_f32)(const float* x, float* o, int64_t n) = nullptr;
};
void unary_inplace(const Tensor& self, const UnaryRecipe& recipe);
// The recipes, from the files of the out-of-place ops.
std::optional<UnaryRecipe> pointwise_recipe(const std::string& op);   // unary.cpp: exp log sqrt tanh sigmoid relu
std::optional<UnaryRecipe> activation_recipe(const std::string& op);  // activations.cpp: abs sin cos rsqrt
std::optional<UnaryRecipe> arith_recipe(const std::string& op);       // arith.cpp: neg

}  // namespace agtrace::ops::detail
