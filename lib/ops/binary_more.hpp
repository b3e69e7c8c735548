// Binary and ternary math ops of PyTorch's method tests (binary_more.cpp), listed by
// table_binary.cpp: elementwise maximum / minimum / fmax / fmin, atan2, hypot, remainder,
// fmod, lerp, addcmul, addcdiv, dist, rsub(Tensor, Tensor), and the matrix-vector family
// addmv, addr, addbmm, baddbmm.
//
// Each records the node PyTorch 1.13 records, with the same name, next_functions and saved
// values (measured with /usr/bin/python3 and torch 1.13: type(node).__name__, dir(node),
// `_saved_self is x`, and which saved values are None for each requires_grad pattern). The
// saving rule the measurements follow is that of PyTorch's generated code: a tensor read by
// the formulas of several inputs is always saved; one read only by another input's formula
// is saved when that input requires grad. Host and meta kernels only: a cuda operand is
// `unsupported`, naming the op.
#pragma once
#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// MaximumBackward0 / MinimumBackward0 (torch.maximum, torch.max(a, b), a.max(b)): saves
// other, self. Ties give each side grad / 2 (derivatives.yaml).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// FmaxBackward0 / FminBackward0: saves other, self; the non-NaN side (self on ties) gets grad.
Tensor fmax(const Tensor& a, const Tensor& b);
Tensor fmin(const Tensor& a, const Tensor& b);
// Atan2Backward0: other, self. Integer inputs give float32.
Tensor atan2(const Tensor& a, const Tensor& b);
// HypotBackward0: other, result, self. Floating inputs only ("hypot_cpu" for Long).
Tensor hypot(const Tensor& a, const Tensor& b);
// remainder / fmod with a tensor other: RemainderBackward1 / FmodBackward1 save other and
// self when other requires grad; with a Python number other: RemainderBackward0 /
// FmodBackward0, nothing saved, one edge.
Tensor remainder(const Tensor& a, const Value& other);
// floor_divide: rounds toward minus infinity; no node is modelled (PyTorch's is named
// NotImplemented and its backward raises), so inputs that require grad are unsupported.
Tensor floor_divide(const Tensor& a, const Value& other);
Tensor fmod(const Tensor& a, const Value& other);
// lerp with a number weight: LerpBackward0 saves weight (the number as written); with a
// tensor weight: LerpBackward1 saves weight always, end and self when weight requires grad.
Tensor lerp(const Tensor& self, const Tensor& end, const Value& weight);
// AddcmulBackward0 / AddcdivBackward0: tensor1, tensor2, value (the number as written).
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value);
// DistBackward0: other, p (as written), result, self; a 0-d result.
Tensor dist(const Tensor& a, const Tensor& b, const Value& p);
// torch.rsub(self, other, alpha) = other - alpha * self: RsubBackward0 saves alpha, two edges.
Tensor rsub_tensor(const Tensor& a, const Tensor& b, const Value& alpha);
// AddmvBackward0: alpha, beta, mat (if vec requires grad), vec (if mat requires grad).
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Value& beta, const Value& alpha);
// AddrBackward0: alpha, beta, vec1 (if vec2 requires grad), vec2 (if vec1 requires grad).
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Value& beta, const Value& alpha);
// AddbmmBackward0: alpha, batch1, batch1_argsize_0, batch1_argsize_1, batch2,
// batch2_argsize_2, beta (each batch saved when the other requires grad).
Tensor addbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha);
// BaddbmmBackward0: alpha, batch1, batch2, beta (each batch saved when the other requires grad).
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha);

// In-place forms: the out-of-place node over self's previous history, one version bump,
// CopySlices on a view. Where the formula reads self, the node saves a clone of the old self
// (measured: `_saved_self` has grad_fn CloneBackward0, its own storage, version 0); hypot_
// saves self after the edit as its result. There are no maximum_, minimum_, fmax_, fmin_ or
// dist_ in PyTorch 1.13.
void atan2_(const Tensor& self, const Tensor& other);
void hypot_(const Tensor& self, const Tensor& other);
void remainder_(const Tensor& self, const Value& other);
void fmod_(const Tensor& self, const Value& other);
void lerp_(const Tensor& self, const Tensor& end, const Value& weight);
void addcmul_(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value);
void addcdiv_(const Tensor& self, const Tensor& t1, const Tensor& t2, const Value& value);
void addmv_(const Tensor& self, const Tensor& mat, const Tensor& vec, const Value& beta, const Value& alpha);
void addr_(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Value& beta, const Value& alpha);
void addbmm_(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha);
void baddbmm_(const Tensor& self, const Tensor& b1, const Tensor& b2, const Value& beta, const Value& alpha);

}  // namespace agtrace::ops
