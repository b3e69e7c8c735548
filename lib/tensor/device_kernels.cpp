#include "tensor/device_kernels.hpp"

#include <algorithm>
#include <memory>

#include "errors.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/events.hpp"
#include "tensor/kernels.hpp"

namespace agtrace::kernels::device {

namespace {

cuda::DeviceTensorRef device_ref(const Tensor& t) {
  return cuda::DeviceTensorRef{t->storage->device_data(), t->dtype(), t->sizes, t->strides, t->offset};
}

// A result on cuda (an accounted storage, as on the CPU).
Tensor device_result(const Shape& sizes, DType dtype) {
  DeviceScope scope("cuda");
  return uninitialized_tensor(sizes, dtype, false);
}

// A contiguous device buffer for an op's intermediate (no tensor: the accountant sees only
// the op's results, as on the CPU, whose loops keep intermediates in registers); freed when
// the op returns.
class Scratch {
 public:
  Scratch(const Shape& sizes, DType dtype) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    buffer_ = device_allocate(n * dtype_size(dtype));
    ref_ = cuda::DeviceTensorRef{buffer_, dtype, sizes, Shape(sizes.size(), 1), 0};
    for (size_t d = sizes.size(); d-- > 1;) ref_.strides[d - 1] = ref_.strides[d] * sizes[d];
  }
  ~Scratch() {
    if (buffer_)
      if (DeviceBackend* b = device_backend()) b->release(buffer_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const cuda::DeviceTensorRef& ref() const { return ref_; }

 private:
  void* buffer_ = nullptr;
  cuda::DeviceTensorRef ref_;
};

// A 0-d CPU operand (a wrapped Python number) for a kernel: its value in the result's dtype
// in a transient device buffer of the backend, not a tensor (PyTorch passes such a scalar
// to its CUDA kernel by value and allocates nothing; the buffer is freed right after the
// launch, so no figure of the report sees it).
class Operand {
 public:
  Operand(const Tensor& t, DType compute) {
    if (on_device(t)) {
      ref_ = device_ref(t);
      return;
    }
    if (t->dim() != 0 || t->is_meta())
      throw ScenarioError("device_mismatch",
                          "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
    hold(item(t), compute);
  }
  // A value in dtype `compute` (a Python number the kernel takes by value).
  Operand(double v, DType compute) { hold(v, compute); }
  const cuda::DeviceTensorRef& ref() const { return ref_; }

 private:
  void hold(double v, DType compute) {
    const double x = round_to_dtype(v, compute);
    scalar_ = std::make_unique<Scratch>(Shape{}, compute);
    ref_ = scalar_->ref();
    device_upload(ref_.data, compute, &x, 1);
  }
  cuda::DeviceTensorRef ref_;
  std::unique_ptr<Scratch> scalar_;
};

}  // namespace

Tensor unary(cuda::pw::UnaryOp op, const Tensor& a, DType out, double s0, double s1) {
  Tensor r = device_result(a->sizes, out);
  Operand in(a, out);
  device_launch([&](DeviceBackend& b) { b.unary(op, device_ref(r), in.ref(), s0, s1); });
  return r;
}

namespace {
bool cpu_scalar(const Tensor& t) { return !on_device(t) && t->dim() == 0 && !t->is_meta(); }
}  // namespace

Tensor binary(cuda::pw::BinaryOp op, const Tensor& a, const Tensor& b, DType out, const std::string& name,
              double s0, std::optional<DType> operands) {
  using cuda::pw::BinaryOp;
  using cuda::pw::UnaryOp;
  // A CPU scalar operand goes to the kernel by value, as PyTorch's CUDA kernels take it
  // (TensorIterator's cpu_scalar: add/sub as x + alpha * s, mul, div as x * (1 / s)), so no
  // device buffer is made for it: torch.cuda.memory_allocated sees none either.
  if (on_device(a) && cpu_scalar(b) && a->dtype() == out) {
    const double v = item(b);
    if (op == BinaryOp::Add) return unary(UnaryOp::AddScalar, a, out, s0 * v);
    if (op == BinaryOp::Sub) return unary(UnaryOp::AddScalar, a, out, -s0 * v);
    if (op == BinaryOp::Mul) return unary(UnaryOp::MulScalar, a, out, v);
    if (op == BinaryOp::Div) return unary(UnaryOp::DivScalar, a, out, v);
  }
  if (cpu_scalar(a) && on_device(b) && b->dtype() == out && s0 == 1 && (op == BinaryOp::Add || op == BinaryOp::Mul))
    return binary(op, b, a, out, name, s0);  // commutative: s + x, s * x
  Shape shape = a->sizes == b->sizes ? a->sizes.vec() : broadcast_shapes(a->sizes, b->sizes, name);
  Tensor r = device_result(shape, out);
  Operand x(a, operands.value_or(out)), y(b, operands.value_or(out));
  device_launch([&](DeviceBackend& be) { be.binary(op, device_ref(r), x.ref(), y.ref(), s0); });
  return r;
}

Tensor ternary(cuda::pw::TernaryOp op, const Tensor& a, const Tensor& b, const Tensor& c, DType out,
               const std::string& name, double s0, double s1) {
  Shape shape = broadcast_shapes(broadcast_shapes(a->sizes, b->sizes, name), c->sizes, name);
  Tensor r = device_result(shape, out);
  Operand x(a, out), y(b, out), z(c, out);
  device_launch([&](DeviceBackend& be) { be.ternary(op, device_ref(r), x.ref(), y.ref(), z.ref(), s0, s1); });
  return r;
}

void binary_inplace(cuda::pw::BinaryOp op, const Tensor& a, const Tensor& b, double s0) {
  Operand y(b, a->dtype());
  device_launch([&](DeviceBackend& be) { be.binary(op, device_ref(a), device_ref(a), y.ref(), s0); });
}

void unary_inplace(cuda::pw::UnaryOp op, const Tensor& a, double s0, double s1) {
  device_launch([&](DeviceBackend& be) { be.unary(op, device_ref(a), device_ref(a), s0, s1); });
}

void copy_into(const Tensor& dst, const Tensor& src) {
  Operand from(src, dst->dtype());
  device_launch([&](DeviceBackend& b) { b.copy(device_ref(dst), from.ref()); });
}

void fill(const Tensor& a, double v) {
  device_launch([&](DeviceBackend& b) { b.fill(device_ref(a), v); });
}

Tensor copy(const Tensor& a, DType out) {
  Tensor r = device_result(a->sizes, out);
  device_launch([&](DeviceBackend& b) { b.copy(device_ref(r), device_ref(a)); });
  return r;
}

namespace {
// t's elements seen as a matrix of rows x cols with the given strides (a vector as a
// column or a row; the stride of a size-1 dim is arbitrary, cuda/matmul.cu ignores it).
cuda::DeviceTensorRef matrix_ref(const Tensor& t, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  return cuda::DeviceTensorRef{t->storage->device_data(), t->dtype(), {rows, cols}, {rs, cs}, t->offset};
}
void product(const Tensor& r, const cuda::DeviceTensorRef& out, const Tensor& a, const cuda::DeviceTensorRef& x,
             const Tensor& b, const cuda::DeviceTensorRef& y) {
  if (!on_device(a) || !on_device(b))
    throw ScenarioError("device_mismatch",
                        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
  (void)r;
  device_launch([&](DeviceBackend& be) { be.matmul(out, x, y); });
}
int64_t stride0(const Tensor& t) { return t->strides.empty() ? 1 : t->strides[0]; }
}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b, DType out) {
  Tensor r = device_result({a->sizes[0], a->sizes[1], b->sizes[2]}, out);
  product(r, device_ref(r), a, device_ref(a), b, device_ref(b));
  return r;
}

Tensor mv(const Tensor& a, const Tensor& v, DType out) {
  const int64_t n = a->sizes[0], k = a->sizes[1];
  Tensor r = device_result({n}, out);
  product(r, matrix_ref(r, n, 1, 1, 1), a, device_ref(a), v, matrix_ref(v, k, 1, stride0(v), 1));
  return r;
}

Tensor outer(const Tensor& a, const Tensor& b, DType out) {
  const int64_t n = a->sizes[0], m = b->sizes[0];
  Tensor r = device_result({n, m}, out);
  product(r, device_ref(r), a, matrix_ref(a, n, 1, stride0(a), 1), b,
          matrix_ref(b, 1, m, std::max<int64_t>(m, 1) * stride0(b), stride0(b)));
  return r;
}

Tensor dot(const Tensor& a, const Tensor& b, DType out) {
  const int64_t k = a->numel();
  Tensor r = device_result({}, out);
  product(r, matrix_ref(r, 1, 1, 1, 1), a, matrix_ref(a, 1, k, std::max<int64_t>(k, 1) * stride0(a), stride0(a)), b,
          matrix_ref(b, k, 1, stride0(b), 1));
  return r;
}

namespace {
Shape reduced_shape(const Shape& sizes, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<bool> reduced(sizes.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  Shape shape;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d]) shape.push_back(sizes[d]);
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}
}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, DType out) {
  Tensor r = device_result(reduced_shape(a->sizes, dims, keepdim), out);
  device_launch([&](DeviceBackend& b) { b.reduce(cuda::ReduceOp::Sum, device_ref(r), device_ref(a), dims, keepdim); });
  return r;
}

Tensor reduce(cuda::ReduceOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor r = device_result(reduced_shape(a->sizes, dims, keepdim), a->dtype());
  device_launch([&](DeviceBackend& b) { b.reduce(op, device_ref(r), device_ref(a), dims, keepdim); });
  return r;
}

std::pair<Tensor, Tensor> max_dim(const Tensor& a, int64_t dim, bool keepdim, bool is_min) {
  const std::vector<int64_t> dims = a->dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim};
  const Shape shape = a->dim() == 0 ? Shape{} : reduced_shape(a->sizes, dims, keepdim);
  Tensor values = device_result(shape, a->dtype());
  Tensor indices = device_result(shape, DType::Int64);
  device_launch([&](DeviceBackend& b) {
    b.max_dim(device_ref(values), device_ref(indices), device_ref(a), dim, keepdim, is_min);
  });
  return {values, indices};
}

Tensor softmax(const Tensor& a, int64_t dim, bool log) {
  Tensor r = device_result(a->sizes, a->dtype());
  device_launch([&](DeviceBackend& b) { b.softmax(device_ref(r), device_ref(a), dim, log); });
  return r;
}

Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, bool log, DType out) {
  if (!on_device(grad) || !on_device(output))
    throw ScenarioError("device_mismatch",
                        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
  Tensor r = device_result(output->sizes, out);
  device_launch([&](DeviceBackend& b) { b.softmax_backward(device_ref(r), device_ref(grad), device_ref(output), dim, log); });
  return r;
}

namespace {
// Every operand of a kernel that takes no CPU scalars: on cuda (null ones skipped).
void require_on_device(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (*t && !on_device(*t))
      throw ScenarioError("device_mismatch",
                          "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
}
}  // namespace

LayerNormResult layer_norm(const Tensor& a, const Tensor& weight, const Tensor& bias, int64_t normalized_ndim,
                           double eps, const Shape& stats_shape, DType stats_dtype) {
  require_on_device({&a, &weight, &bias});
  LayerNormResult r;
  r.out = device_result(a->sizes, a->dtype());
  r.mean = device_result(stats_shape, stats_dtype);
  r.rstd = device_result(stats_shape, stats_dtype);
  std::optional<cuda::DeviceTensorRef> w, bi;
  if (weight) w = device_ref(weight);
  if (bias) bi = device_ref(bias);
  device_launch([&](DeviceBackend& b) {
    b.layer_norm(device_ref(r.out), device_ref(r.mean), device_ref(r.rstd), device_ref(a), w ? &*w : nullptr,
                 bi ? &*bi : nullptr, normalized_ndim, eps);
  });
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& a, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, int64_t normalized_ndim, bool want_input,
                                   bool want_weight, bool want_bias) {
  require_on_device({&grad_out, &a, &mean, &rstd, &weight});
  LayerNormGrads g;
  const Shape wshape(a->sizes.end() - normalized_ndim, a->sizes.end());
  const DType wdtype = weight ? weight->dtype() : a->dtype();
  if (want_input) g.input = device_result(a->sizes, a->dtype());
  if (want_weight) g.weight = device_result(wshape, wdtype);
  if (want_bias) g.bias = device_result(wshape, wdtype);
  std::optional<cuda::DeviceTensorRef> gi, gw, gb, w;
  if (g.input) gi = device_ref(g.input);
  if (g.weight) gw = device_ref(g.weight);
  if (g.bias) gb = device_ref(g.bias);
  if (weight) w = device_ref(weight);
  device_launch([&](DeviceBackend& b) {
    b.layer_norm_backward(gi ? &*gi : nullptr, gw ? &*gw : nullptr, gb ? &*gb : nullptr, device_ref(grad_out),
                          device_ref(a), device_ref(mean), device_ref(rstd), w ? &*w : nullptr, normalized_ndim);
  });
  return g;
}

namespace {
// A 1-D view of an index: itself when 1-D, a 0-d one as [1], a contiguous n-D one
// flattened (callers pass a contiguous one).
cuda::DeviceTensorRef index_vector(const Tensor& index) {
  cuda::DeviceTensorRef r = device_ref(index);
  if (index->dim() != 1) {
    r.sizes = {index->numel()};
    r.strides = {1};
  }
  return r;
}
// t (contiguous) seen with its first `lead` dims merged into one.
cuda::DeviceTensorRef merged_rows(const Tensor& t, int64_t lead) {
  cuda::DeviceTensorRef r = device_ref(t);
  if (lead == 1) return r;
  int64_t rows = 1;
  for (int64_t d = 0; d < lead; ++d) rows *= t->sizes[static_cast<size_t>(d)];
  Shape sizes{rows};
  sizes.insert(sizes.end(), t->sizes.begin() + lead, t->sizes.end());
  r.sizes = sizes;
  r.strides.assign(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d-- > 0;) r.strides[d] = r.strides[d + 1] * sizes[d + 1];
  return r;
}
}  // namespace

namespace {
// t (reduced over `dims` of an ndim-dim tensor, without keepdim) seen with those dims back
// as size-1 dims (restore_reduced_dims); dims empty: all of them.
cuda::DeviceTensorRef kept_dims(const Tensor& t, std::vector<int64_t> dims, size_t ndim, bool keepdim) {
  cuda::DeviceTensorRef r = device_ref(t);
  if (keepdim || r.sizes.size() == ndim) return r;
  if (dims.empty())
    for (size_t d = 0; d < ndim; ++d) dims.push_back(static_cast<int64_t>(d));
  std::sort(dims.begin(), dims.end());
  for (int64_t d : dims) {
    r.sizes.insert(r.sizes.begin() + d, 1);
    r.strides.insert(r.strides.begin() + d, 0);
  }
  return r;
}
}  // namespace

Tensor select_or(const Tensor& cond, const Tensor& t, double other, bool t_where_true, DType out,
                 const std::string& name) {
  Tensor r = device_result(broadcast_shapes(cond->sizes, t->sizes, name), out);
  Operand c(cond, DType::Bool), x(t, out), y(other, out);
  device_launch([&](DeviceBackend& b) {
    b.ternary(cuda::pw::TernaryOp::Where, device_ref(r), c.ref(), t_where_true ? x.ref() : y.ref(),
              t_where_true ? y.ref() : x.ref(), 0, 0);
  });
  return r;
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  using cuda::pw::BinaryOp;
  const Shape kept = reduced_shape(a->sizes, dims, true);
  int64_t count = 1;
  for (size_t d = 0; d < a->sizes.size(); ++d)
    if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end()) count *= a->sizes[d];
  Tensor r = device_result(reduced_shape(a->sizes, dims, keepdim), a->dtype());
  Scratch mean(kept, a->dtype()), sq(a->sizes, a->dtype());
  const double divisor = static_cast<double>(std::max<int64_t>(0, count - correction));
  device_launch([&](DeviceBackend& b) {
    b.reduce(cuda::ReduceOp::Mean, mean.ref(), device_ref(a), dims, true);
    b.binary(BinaryOp::Sub, sq.ref(), device_ref(a), mean.ref(), 1);
    b.binary(BinaryOp::Mul, sq.ref(), sq.ref(), sq.ref(), 1);
    b.reduce(cuda::ReduceOp::Sum, device_ref(r), sq.ref(), dims, keepdim);
    // Divided by max(0, N - correction) (0/0 NaN, x/0 inf, as on the CPU).
    Operand d(divisor, a->dtype());
    b.binary(BinaryOp::Div, device_ref(r), device_ref(r), d.ref(), 1);
  });
  return r;
}

Tensor var_backward(const Tensor& self, const Tensor& grad, const std::vector<int64_t>& dims, bool keepdim, double dof,
                    DType out) {
  require_on_device({&self, &grad});
  using cuda::pw::BinaryOp;
  const size_t nd = self->sizes.size();
  Tensor r = device_result(self->sizes, out);
  Scratch mean(reduced_shape(self->sizes, dims, true), self->dtype());
  device_launch([&](DeviceBackend& b) {
    // (2 / dof) * grad * (self - self.mean(dims, keepdim=True))
    b.reduce(cuda::ReduceOp::Mean, mean.ref(), device_ref(self), dims, true);
    b.binary(BinaryOp::Sub, device_ref(r), device_ref(self), mean.ref(), 1);
    b.binary(BinaryOp::Mul, device_ref(r), device_ref(r), kept_dims(grad, dims, nd, keepdim), 1);
    b.unary(cuda::pw::UnaryOp::MulScalar, device_ref(r), device_ref(r), 2.0 / dof, 0);
  });
  return r;
}

Tensor norm2(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor r = device_result(reduced_shape(a->sizes, dims, keepdim), a->dtype());
  Scratch sq(a->sizes, a->dtype());
  device_launch([&](DeviceBackend& b) {
    b.binary(cuda::pw::BinaryOp::Mul, sq.ref(), device_ref(a), device_ref(a), 1);
    b.reduce(cuda::ReduceOp::Sum, device_ref(r), sq.ref(), dims, keepdim);
    b.unary(cuda::pw::UnaryOp::Sqrt, device_ref(r), device_ref(r), 0, 0);
  });
  return r;
}

Tensor norm2_backward(const Tensor& self, const Tensor& result, const Tensor& grad, const std::vector<int64_t>& dims,
                      bool keepdim, DType out) {
  require_on_device({&self, &result, &grad});
  using cuda::pw::BinaryOp;
  const size_t nd = self->sizes.size();
  const cuda::DeviceTensorRef norm = kept_dims(result, dims, nd, keepdim);
  Tensor r = device_result(self->sizes, out);
  Scratch zero_norm(reduced_shape(self->sizes, dims, true), DType::Bool);
  Operand zero(0.0, out);
  device_launch([&](DeviceBackend& b) {
    // grad * (self / norm), 0 where norm == 0
    b.binary(BinaryOp::Div, device_ref(r), device_ref(self), norm, 1);
    b.binary(BinaryOp::Mul, device_ref(r), device_ref(r), kept_dims(grad, dims, nd, keepdim), 1);
    b.binary(BinaryOp::Eq, zero_norm.ref(), norm, zero.ref(), 1);
    b.ternary(cuda::pw::TernaryOp::Where, device_ref(r), zero_norm.ref(), zero.ref(), device_ref(r), 0, 0);
  });
  return r;
}

namespace {
// A tensor of up to 2 dims seen as (N, C) (a vector as one row) and a target as the (N, 1)
// column of class indices (a 0-d one as [[t]]).
cuda::DeviceTensorRef as_rows(const Tensor& t) {
  cuda::DeviceTensorRef r = device_ref(t);
  if (t->dim() == 1) {
    r.sizes = {1, t->sizes[0]};
    r.strides = {0, t->strides[0]};
  }
  return r;
}
cuda::DeviceTensorRef as_column(const Tensor& t) {
  cuda::DeviceTensorRef r = device_ref(t);
  r.sizes = {t->dim() == 0 ? 1 : t->sizes[0], 1};
  r.strides = {t->dim() == 0 ? 0 : t->strides[0], 0};
  return r;
}
// Each sample's target with ignored ones as class 0 (safe to gather at), and its weight
// (weight[t], or 1; 0 where ignored).
struct NllPicks {
  NllPicks(int64_t n, DType dtype) : target({n, 1}, DType::Int64), weight({n, 1}, dtype), valid({n, 1}, DType::Bool) {}
  Scratch target, weight, valid;
};
void pick_targets(DeviceBackend& b, NllPicks& p, const Tensor& target, const Tensor& weight, int64_t classes,
                  int64_t ignore_index, DType dtype) {
  using cuda::pw::BinaryOp;
  using cuda::pw::TernaryOp;
  const int64_t n = p.target.ref().sizes[0];
  Operand ignored(static_cast<double>(ignore_index), DType::Int64), zero_index(0.0, DType::Int64);
  Operand zero(0.0, dtype), one(1.0, dtype);
  b.binary(BinaryOp::Ne, p.valid.ref(), as_column(target), ignored.ref(), 1);
  b.ternary(TernaryOp::Where, p.target.ref(), p.valid.ref(), as_column(target), zero_index.ref(), 0, 0);
  if (weight) {
    cuda::DeviceTensorRef w = device_ref(weight);
    w.sizes = {n, classes};
    w.strides = {0, weight->strides[0]};
    b.gather(p.weight.ref(), w, 1, p.target.ref());
    b.ternary(TernaryOp::Where, p.weight.ref(), p.valid.ref(), p.weight.ref(), zero.ref(), 0, 0);
  } else {
    b.ternary(TernaryOp::Where, p.weight.ref(), p.valid.ref(), one.ref(), zero.ref(), 0, 0);
  }
}
}  // namespace

NllLossResult nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t reduction,
                       int64_t ignore_index, bool with_total_weight) {
  require_on_device({&input, &target, &weight});
  using cuda::pw::BinaryOp;
  const DType dt = input->dtype();
  const int64_t n = input->dim() == 2 ? input->sizes[0] : 1, classes = input->sizes.back();
  const bool per_sample = reduction == 0 && input->dim() == 2;
  NllLossResult r;
  r.loss = device_result(per_sample ? Shape{n} : Shape{}, dt);
  if (with_total_weight) r.total_weight = device_result({}, dt);
  NllPicks picks(n, dt);
  Scratch picked({n, 1}, dt);
  std::unique_ptr<Scratch> tw_scratch;
  if (!with_total_weight) tw_scratch = std::make_unique<Scratch>(Shape{}, dt);
  const cuda::DeviceTensorRef tw = with_total_weight ? device_ref(r.total_weight) : tw_scratch->ref();
  device_launch([&](DeviceBackend& b) {
    pick_targets(b, picks, target, weight, classes, ignore_index, dt);
    b.gather(picked.ref(), as_rows(input), 1, picks.target.ref());
    // -weight[t] * input[i, t], 0 where ignored
    b.binary(BinaryOp::Mul, picked.ref(), picked.ref(), picks.weight.ref(), 1);
    b.unary(cuda::pw::UnaryOp::Neg, picked.ref(), picked.ref(), 0, 0);
    if (per_sample) {
      b.fill(tw, 0.0);  // stays 0 with a batch and reduction 'none' (measured)
      cuda::DeviceTensorRef column = device_ref(r.loss);
      column.sizes = {n, 1};
      column.strides = {1, 1};
      b.copy(column, picked.ref());
      return;
    }
    b.reduce(cuda::ReduceOp::Sum, tw, picks.weight.ref(), {}, false);
    b.reduce(cuda::ReduceOp::Sum, device_ref(r.loss), picked.ref(), {}, false);
    if (reduction == 1) b.binary(BinaryOp::Div, device_ref(r.loss), device_ref(r.loss), tw, 1);
  });
  return r;
}

Tensor nll_loss_backward(const Tensor& grad, const Shape& input_sizes, DType dtype, const Tensor& target,
                         const Tensor& weight, const Tensor& total_weight, int64_t reduction, int64_t ignore_index) {
  require_on_device({&grad, &target, &weight, &total_weight});
  using cuda::pw::BinaryOp;
  const int64_t n = input_sizes.size() == 2 ? input_sizes[0] : 1, classes = input_sizes.back();
  Tensor r;
  {
    DeviceScope scope("cuda");
    r = full(input_sizes, 0.0, dtype, false);
  }
  NllPicks picks(n, dtype);
  Scratch src({n, 1}, dtype);
  const bool per_sample = reduction == 0 && input_sizes.size() == 2;
  device_launch([&](DeviceBackend& b) {
    pick_targets(b, picks, target, weight, classes, ignore_index, dtype);
    b.binary(BinaryOp::Mul, src.ref(), picks.weight.ref(), per_sample ? as_column(grad) : device_ref(grad), 1);
    b.unary(cuda::pw::UnaryOp::Neg, src.ref(), src.ref(), 0, 0);
    if (reduction == 1) b.binary(BinaryOp::Div, src.ref(), src.ref(), device_ref(total_weight), 1);
    cuda::DeviceTensorRef rows = device_ref(r);
    rows.sizes = {n, classes};
    rows.strides = {classes, 1};
    b.scatter(rows, 1, picks.target.ref(), src.ref(), false);
  });
  return r;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction, DType out) {
  require_on_device({&input, &target});
  using cuda::pw::BinaryOp;
  Tensor r = device_result(reduction == 0 ? input->sizes.vec() : Shape{}, out);
  std::unique_ptr<Scratch> sq;
  if (reduction != 0) sq = std::make_unique<Scratch>(input->sizes, out);
  const cuda::DeviceTensorRef d = sq ? sq->ref() : device_ref(r);
  device_launch([&](DeviceBackend& b) {
    b.binary(BinaryOp::Sub, d, device_ref(input), device_ref(target), 1);  // (x - y) in `out`, then squared
    b.binary(BinaryOp::Mul, d, d, d, 1);
    if (reduction != 0)
      b.reduce(reduction == 1 ? cuda::ReduceOp::Mean : cuda::ReduceOp::Sum, device_ref(r), d, {}, false);
  });
  return r;
}

Tensor mse_loss_backward(const Tensor& grad, const Tensor& a, const Tensor& b, double norm, DType out) {
  require_on_device({&a, &b});
  using cuda::pw::BinaryOp;
  Tensor r = device_result(broadcast_shapes(broadcast_shapes(a->sizes, b->sizes, "mse_loss_backward"), grad->sizes,
                                            "mse_loss_backward"),
                           out);
  Operand g(grad, out);
  device_launch([&](DeviceBackend& be) {
    be.binary(BinaryOp::Sub, device_ref(r), device_ref(a), device_ref(b), 1);
    be.binary(BinaryOp::Mul, device_ref(r), device_ref(r), g.ref(), 1);
    be.unary(cuda::pw::UnaryOp::MulScalar, device_ref(r), device_ref(r), norm, 0);
  });
  return r;
}

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& in, const cuda::Pool2dGeometry& g) {
  require_on_device({&out, &indices, &in});
  device_launch([&](DeviceBackend& b) { b.max_pool2d(device_ref(out), device_ref(indices), device_ref(in), g); });
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& in_sizes, DType dtype,
                           const cuda::Pool2dGeometry& g) {
  require_on_device({&grad, &indices});
  Tensor r = device_result(in_sizes, dtype);  // every element written by the kernel
  device_launch([&](DeviceBackend& b) { b.max_pool2d_backward(device_ref(r), device_ref(grad), device_ref(indices), g); });
  return r;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index, DType out) {
  require_on_device({&a, &index});
  Tensor r = device_result(index->sizes, out);
  device_launch([&](DeviceBackend& b) { b.gather(device_ref(r), device_ref(a), dim, device_ref(index)); });
  return r;
}

Tensor max_dim_backward(const Shape& self_sizes, DType dtype, const Tensor& grad, const Tensor& indices, int64_t dim,
                        bool keepdim) {
  require_on_device({&grad, &indices});
  Tensor r;
  {
    DeviceScope scope("cuda");
    r = full(self_sizes, 0.0, dtype, false);  // zeros, as the CPU's first storage
  }
  if (self_sizes.empty()) {  // a 0-d input: the gradient itself
    copy_into(r, grad);
    return r;
  }
  const size_t nd = self_sizes.size();
  device_launch([&](DeviceBackend& b) {
    b.scatter(device_ref(r), dim, kept_dims(indices, {dim}, nd, keepdim), kept_dims(grad, {dim}, nd, keepdim), false);
  });
  return r;
}

Tensor amax_backward(const Tensor& self, const Tensor& result, const Tensor& grad, const std::vector<int64_t>& dims,
                     bool keepdim, DType out) {
  require_on_device({&self, &result, &grad});
  using cuda::pw::BinaryOp;
  const size_t nd = self->sizes.size();
  Tensor r = device_result(self->sizes, out);
  const cuda::DeviceTensorRef res = kept_dims(result, dims, nd, keepdim), g = kept_dims(grad, dims, nd, keepdim);
  Scratch count(reduced_shape(self->sizes, dims, true), out);
  device_launch([&](DeviceBackend& b) {
    b.binary(BinaryOp::Eq, device_ref(r), device_ref(self), res, 1);  // the mask, 1 or 0
    b.reduce(cuda::ReduceOp::Sum, count.ref(), device_ref(r), dims, true);
    b.binary(BinaryOp::Mul, device_ref(r), device_ref(r), g, 1);
    b.binary(BinaryOp::Div, device_ref(r), device_ref(r), count.ref(), 1);
  });
  return r;
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  require_on_device({&a, &index});
  Shape shape = a->sizes;
  if (!shape.empty()) shape[static_cast<size_t>(dim)] = index->numel();
  Tensor r = device_result(shape, a->dtype());
  device_launch([&](DeviceBackend& b) { b.index_select(device_ref(r), device_ref(a), dim, index_vector(index)); });
  return r;
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  require_on_device({&out, &index, &src});
  cuda::DeviceTensorRef s = device_ref(src);
  if (index->dim() == 0 && !s.sizes.empty()) {  // a 0-d index keeps the dim with size 1
    s.sizes.insert(s.sizes.begin() + dim, 1);
    s.strides.insert(s.strides.begin() + dim, 1);
  }
  device_launch([&](DeviceBackend& b) { b.index_add(device_ref(out), dim, index_vector(index), s); });
}

Tensor index_rows(const Tensor& self, const Tensor& idx) {
  require_on_device({&self, &idx});
  if (!idx->is_contiguous()) throw_no_device_kernel("cuda");
  Shape shape = idx->sizes;
  shape.insert(shape.end(), self->sizes.begin() + 1, self->sizes.end());
  Tensor r = device_result(shape, self->dtype());
  device_launch([&](DeviceBackend& b) {
    b.index_select(merged_rows(r, idx->dim()), device_ref(self), 0, index_vector(idx));
  });
  return r;
}

void index_add_rows(const Tensor& out, const Tensor& idx, const Tensor& src) {
  require_on_device({&out, &idx, &src});
  if (!idx->is_contiguous() || (idx->dim() != 1 && !src->is_contiguous())) throw_no_device_kernel("cuda");
  device_launch([&](DeviceBackend& b) { b.index_add(device_ref(out), 0, index_vector(idx), merged_rows(src, idx->dim())); });
}

Tensor mm(const Tensor& a, const Tensor& b, DType out) {
  Tensor r = device_result({a->sizes[0], b->sizes[1]}, out);
  device_launch([&](DeviceBackend& be) { be.matmul(device_ref(r), device_ref(a), device_ref(b)); });
  return r;
}

// ---- comparisons with a Python number
Tensor compare_scalar(cuda::pw::BinaryOp op, const Tensor& a, double v, const std::string& name) {
  Tensor number;
  {
    DeviceScope on_cpu("cpu");
    number = scalar_tensor(v, a->dtype());
  }
  return binary(op, a, number, DType::Bool, name, 1, a->dtype());
}

// ---- batch_norm, conv2d and the double backwards of the nn layers (ops/nn.cpp).
namespace {
using Ref = cuda::DeviceTensorRef;
using cuda::pw::BinaryOp;
using cuda::pw::UnaryOp;

std::optional<Ref> ref_if(const Tensor& t) {
  if (!t) return std::nullopt;
  return device_ref(t);
}
const Ref* ptr(const std::optional<Ref>& r) { return r ? &*r : nullptr; }

// A [C] vector as [1, C, 1, ...] of `rank` dims (broadcast over all but the channel dim 1).
Ref channel_view(const Tensor& t, size_t rank) {
  Ref r = device_ref(t);
  r.sizes = Shape(rank, 1);
  r.strides = Shape(rank, 0);
  r.sizes[1] = t->sizes[0];
  r.strides[1] = t->strides[0];
  return r;
}
// t's dims as the trailing ones of `rank` dims (size-1 dims in front).
Ref trailing_view(const Tensor& t, size_t rank) {
  Ref r = device_ref(t);
  const size_t pad = rank - r.sizes.size();
  r.sizes.insert(r.sizes.begin(), pad, 1);
  r.strides.insert(r.strides.begin(), pad, 0);
  return r;
}
// An incoming gradient of a double-backward node: defined when it has the expected
// number of elements (the engine's undefined gradients read as zeros, as on the CPU).
bool defined(const Tensor& g, int64_t numel) { return g && g->numel() == numel; }

// A zero-filled transient buffer standing for an undefined incoming gradient.
struct Zeros {
  Scratch s;
  Zeros(const Shape& sizes, DType d) : s(sizes, d) {
    device_launch([&](DeviceBackend& b) { b.fill(s.ref(), 0.0); });
  }
};

// The operands of the shared double backward of layer_norm and batch_norm in training,
// all broadcast to x's shape: per group (a layer_norm row, a batch_norm channel) of
// `count` elements, mean and k = rstd / invstd; per element or channel, weight and the
// incoming gradients of d_weight and d_bias (null: absent).
struct NormOperands {
  Ref x, go, mean, k;
  const Ref *w = nullptr, *ggi = nullptr, *ggw = nullptr, *ggb = nullptr;
  Shape stat_shape;                             // x's shape with the group dims as 1
  std::vector<int64_t> group_dims, param_dims;  // reduced for group sums / d_weight
  double count = 1;
};

// ops/nn.cpp's formula (layer_norm_bb_backward / batch_norm_bb_backward in training), with
// xhat = (x - mean) k, u = ggI, v = gO w, P(a) = a - sum(a)/N - xhat sum(a xhat)/N:
//   grad_out = w k P(u) + ggW xhat + ggB;  weight = sum(gO k P(u)) over param_dims
//   input = -(k^2 xhat / N)(C - S_u S_v / N) - (k^2 / N)(S_u P(v) + S_v P(u)) + k P(gO ggW)
// with C = sum(u v) - sum(u) sum(v) / N, S_a = sum(a xhat). Each step one kernel in x's
// dtype (float for float32, as PyTorch's composed CUDA formula computes).
void norm_double_backward(const NormOperands& o, const Ref* d_go, const Ref* d_x, const Ref* d_w) {
  const Shape& X = o.x.sizes;
  const DType dt = o.x.dtype;
  const double N = o.count;
  Scratch xh(X, dt), v(X, dt), pu(X, dt), t(X, dt), t2(X, dt);
  Scratch sum_u(o.stat_shape, dt), s_u(o.stat_shape, dt), sum_v(o.stat_shape, dt), s_v(o.stat_shape, dt),
      ms(o.stat_shape, dt), c(o.stat_shape, dt), c2(o.stat_shape, dt), kk(o.stat_shape, dt);
  std::unique_ptr<Zeros> zero_u;
  if (!o.ggi) zero_u = std::make_unique<Zeros>(X, dt);
  const Ref& u = o.ggi ? *o.ggi : zero_u->s.ref();
  device_launch([&](DeviceBackend& b) {
    auto sums = [&](const Ref& a, const Ref& sum_a, const Ref& sum_ax) {
      b.reduce(cuda::ReduceOp::Sum, sum_a, a, o.group_dims, true);
      b.binary(BinaryOp::Mul, t.ref(), a, xh.ref(), 1);
      b.reduce(cuda::ReduceOp::Sum, sum_ax, t.ref(), o.group_dims, true);
    };
    auto project = [&](const Ref& p, const Ref& a, const Ref& sum_a, const Ref& sum_ax) {
      b.unary(UnaryOp::DivScalar, ms.ref(), sum_a, N, 0);
      b.binary(BinaryOp::Sub, p, a, ms.ref(), 1);
      b.unary(UnaryOp::DivScalar, ms.ref(), sum_ax, N, 0);
      b.binary(BinaryOp::Mul, t.ref(), xh.ref(), ms.ref(), 1);
      b.binary(BinaryOp::Sub, p, p, t.ref(), 1);
    };
    b.binary(BinaryOp::Sub, xh.ref(), o.x, o.mean, 1);
    b.binary(BinaryOp::Mul, xh.ref(), xh.ref(), o.k, 1);
    if (o.w) b.binary(BinaryOp::Mul, v.ref(), o.go, *o.w, 1);
    else b.copy(v.ref(), o.go);
    sums(u, sum_u.ref(), s_u.ref());
    sums(v.ref(), sum_v.ref(), s_v.ref());
    project(pu.ref(), u, sum_u.ref(), s_u.ref());
    if (d_go) {
      b.binary(BinaryOp::Mul, *d_go, pu.ref(), o.k, 1);
      if (o.w) b.binary(BinaryOp::Mul, *d_go, *d_go, *o.w, 1);
      if (o.ggw) {
        b.binary(BinaryOp::Mul, t.ref(), xh.ref(), *o.ggw, 1);
        b.binary(BinaryOp::Add, *d_go, *d_go, t.ref(), 1);
      }
      if (o.ggb) b.binary(BinaryOp::Add, *d_go, *d_go, *o.ggb, 1);
    }
    if (d_w) {
      b.binary(BinaryOp::Mul, t.ref(), o.go, pu.ref(), 1);
      b.binary(BinaryOp::Mul, t.ref(), t.ref(), o.k, 1);
      b.reduce(cuda::ReduceOp::Sum, *d_w, t.ref(), o.param_dims, false);
    }
    if (!d_x) return;
    b.binary(BinaryOp::Mul, t.ref(), u, v.ref(), 1);
    b.reduce(cuda::ReduceOp::Sum, c.ref(), t.ref(), o.group_dims, true);  // sum(u v)
    b.binary(BinaryOp::Mul, c2.ref(), sum_u.ref(), sum_v.ref(), 1);
    b.unary(UnaryOp::DivScalar, c2.ref(), c2.ref(), N, 0);
    b.binary(BinaryOp::Sub, c.ref(), c.ref(), c2.ref(), 1);  // C
    b.binary(BinaryOp::Mul, c2.ref(), s_u.ref(), s_v.ref(), 1);
    b.unary(UnaryOp::DivScalar, c2.ref(), c2.ref(), N, 0);
    b.binary(BinaryOp::Sub, c.ref(), c.ref(), c2.ref(), 1);  // C - S_u S_v / N
    b.binary(BinaryOp::Mul, kk.ref(), o.k, o.k, 1);
    b.unary(UnaryOp::DivScalar, kk.ref(), kk.ref(), N, 0);  // k^2 / N
    b.binary(BinaryOp::Mul, *d_x, xh.ref(), c.ref(), 1);
    b.binary(BinaryOp::Mul, *d_x, *d_x, kk.ref(), 1);
    b.unary(UnaryOp::Neg, *d_x, *d_x, 0, 0);
    project(t2.ref(), v.ref(), sum_v.ref(), s_v.ref());  // P(v)
    b.binary(BinaryOp::Mul, t2.ref(), t2.ref(), s_u.ref(), 1);
    b.binary(BinaryOp::Mul, v.ref(), pu.ref(), s_v.ref(), 1);  // v is no longer needed
    b.binary(BinaryOp::Add, t2.ref(), t2.ref(), v.ref(), 1);
    b.binary(BinaryOp::Mul, t2.ref(), t2.ref(), kk.ref(), 1);
    b.binary(BinaryOp::Sub, *d_x, *d_x, t2.ref(), 1);
    if (o.ggw) {  // + k P(gO ggW)
      b.binary(BinaryOp::Mul, v.ref(), o.go, *o.ggw, 1);
      sums(v.ref(), sum_v.ref(), s_v.ref());
      project(t2.ref(), v.ref(), sum_v.ref(), s_v.ref());
      b.binary(BinaryOp::Mul, t2.ref(), t2.ref(), o.k, 1);
      b.binary(BinaryOp::Add, *d_x, *d_x, t2.ref(), 1);
    }
  });
}

struct DoubleResults {
  DoubleGrads g;
  std::optional<Ref> go, x, w;
};
DoubleResults double_results(const Tensor& grad_out, const Tensor& x, const Tensor& weight, DoubleWants want) {
  DoubleResults r;
  if (want.grad_out) r.g.grad_out = device_result(grad_out->sizes, grad_out->dtype());
  if (want.input) r.g.input = device_result(x->sizes, x->dtype());
  if (want.weight) r.g.weight = device_result(weight->sizes, weight->dtype());
  r.go = ref_if(r.g.grad_out);
  r.x = ref_if(r.g.input);
  r.w = ref_if(r.g.weight);
  return r;
}
}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps) {
  require_on_device({&x, &weight, &bias, &running_mean, &running_var});
  BatchNormResult r;
  const Shape stat{training ? x->sizes[1] : 0};
  r.out = device_result(x->sizes, x->dtype());
  r.save_mean = device_result(stat, x->dtype());
  r.save_invstd = device_result(stat, x->dtype());
  const std::optional<Ref> sm = training ? ref_if(r.save_mean) : std::nullopt;
  const std::optional<Ref> si = training ? ref_if(r.save_invstd) : std::nullopt;
  const std::optional<Ref> w = ref_if(weight), bi = ref_if(bias), rm = ref_if(running_mean), rv = ref_if(running_var);
  device_launch([&](DeviceBackend& b) {
    b.batch_norm(device_ref(r.out), ptr(sm), ptr(si), device_ref(x), ptr(w), ptr(bi), ptr(rm), ptr(rv), training,
                 momentum, eps);
  });
  return r;
}

LayerNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& var_or_invstd, bool training, double eps, bool want_input,
                                   std::optional<DType> weight_grad, std::optional<DType> bias_grad) {
  require_on_device({&grad_out, &x, &weight, &mean, &var_or_invstd});
  LayerNormGrads g;
  const Shape channels{x->sizes[1]};
  if (want_input) g.input = device_result(x->sizes, x->dtype());
  if (weight_grad) g.weight = device_result(channels, *weight_grad);
  if (bias_grad) g.bias = device_result(channels, *bias_grad);
  const std::optional<Ref> gi = ref_if(g.input), gw = ref_if(g.weight), gb = ref_if(g.bias), w = ref_if(weight);
  device_launch([&](DeviceBackend& b) {
    b.batch_norm_backward(ptr(gi), ptr(gw), ptr(gb), device_ref(grad_out), device_ref(x), ptr(w), device_ref(mean),
                          device_ref(var_or_invstd), training, eps);
  });
  return g;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const cuda::Conv2dGeometry& g,
              const Shape& out_sizes) {
  require_on_device({&input, &weight, &bias});
  Tensor r = device_result(out_sizes, input->dtype());
  const std::optional<Ref> bi = ref_if(bias);
  device_launch([&](DeviceBackend& b) { b.conv2d(device_ref(r), device_ref(input), device_ref(weight), ptr(bi), g); });
  return r;
}

LayerNormGrads conv2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                               const cuda::Conv2dGeometry& g, bool want_input, bool want_weight,
                               std::optional<DType> bias_grad) {
  require_on_device({&grad_out, &input, &weight});
  LayerNormGrads r;
  if (want_input) r.input = device_result(input->sizes, input->dtype());
  if (want_weight) r.weight = device_result(weight->sizes, weight->dtype());
  if (bias_grad) r.bias = device_result({weight->sizes[0]}, *bias_grad);
  const std::optional<Ref> gi = ref_if(r.input), gw = ref_if(r.weight), gb = ref_if(r.bias);
  device_launch([&](DeviceBackend& b) {
    b.conv2d_backward(ptr(gi), ptr(gw), ptr(gb), device_ref(grad_out), device_ref(input), device_ref(weight), g);
  });
  return r;
}

DoubleGrads conv2d_double_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                                   const Tensor& ggI, const Tensor& ggW, const Tensor& ggB,
                                   const cuda::Conv2dGeometry& g, DoubleWants want) {
  require_on_device({&grad_out, &input, &weight});
  const bool has_i = defined(ggI, input->numel()), has_w = defined(ggW, weight->numel());
  const bool has_b = defined(ggB, weight->sizes[0]);
  DoubleResults r = double_results(grad_out, input, weight, want);
  if (has_i) require_on_device({&ggI});
  if (has_w) require_on_device({&ggW});
  if (has_b) require_on_device({&ggB});
  std::unique_ptr<Zeros> zi, zw;
  if (!has_i) zi = std::make_unique<Zeros>(input->sizes, input->dtype());
  if (!has_w) zw = std::make_unique<Zeros>(weight->sizes, weight->dtype());
  const Ref gi = has_i ? device_ref(ggI) : zi->s.ref(), gw = has_w ? device_ref(ggW) : zw->s.ref();
  const std::optional<Ref> gb = has_b ? ref_if(ggB) : std::nullopt;
  std::unique_ptr<Scratch> second;
  if (r.go) second = std::make_unique<Scratch>(grad_out->sizes, grad_out->dtype());
  device_launch([&](DeviceBackend& b) {
    if (r.go) {  // conv(ggI, W) + ggB, then + conv(I, ggW)
      b.conv2d(*r.go, gi, device_ref(weight), ptr(gb), g);
      b.conv2d(second->ref(), device_ref(input), gw, nullptr, g);
      b.binary(BinaryOp::Add, *r.go, *r.go, second->ref(), 1);
    }
    if (r.x) b.conv2d_backward(&*r.x, nullptr, nullptr, device_ref(grad_out), device_ref(input), gw, g);
    if (r.w) b.conv2d_backward(nullptr, &*r.w, nullptr, device_ref(grad_out), gi, device_ref(weight), g);
  });
  return r.g;
}

DoubleGrads layer_norm_double_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& weight, const Tensor& ggI,
                                       const Tensor& ggW, const Tensor& ggB, int64_t normalized_ndim,
                                       DoubleWants want) {
  require_on_device({&grad_out, &x, &mean, &rstd, &weight});
  const size_t rank = x->sizes.size(), lead = rank - static_cast<size_t>(normalized_ndim);
  int64_t cols = 1;
  for (size_t d = lead; d < rank; ++d) cols *= x->sizes[d];
  NormOperands o;
  o.x = device_ref(x);
  o.go = device_ref(grad_out);
  o.mean = device_ref(mean);
  o.k = device_ref(rstd);
  o.stat_shape = mean->sizes;
  o.count = static_cast<double>(cols);
  for (size_t d = 0; d < rank; ++d) (d < lead ? o.param_dims : o.group_dims).push_back(static_cast<int64_t>(d));
  std::optional<Ref> w, gi, gw, gb;
  if (weight) w = trailing_view(weight, rank);
  if (defined(ggI, x->numel())) gi = device_ref(ggI);
  if (defined(ggW, cols)) gw = trailing_view(ggW, rank);
  if (defined(ggB, cols)) gb = trailing_view(ggB, rank);
  o.w = ptr(w), o.ggi = ptr(gi), o.ggw = ptr(gw), o.ggb = ptr(gb);
  DoubleResults r = double_results(grad_out, x, weight, want);
  norm_double_backward(o, ptr(r.go), ptr(r.x), ptr(r.w));
  return r.g;
}

DoubleGrads batch_norm_double_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                       const Tensor& mean, const Tensor& stat, const Tensor& ggI, const Tensor& ggW,
                                       const Tensor& ggB, bool training, double eps, DoubleWants want) {
  require_on_device({&grad_out, &x, &weight, &mean, &stat});
  const size_t rank = x->sizes.size();
  const int64_t channels = x->sizes[1];
  std::optional<Ref> w, gi, gw, gb;
  if (weight) w = channel_view(weight, rank);
  if (defined(ggI, x->numel())) gi = device_ref(ggI);
  if (defined(ggW, channels)) gw = channel_view(ggW, rank);
  if (defined(ggB, channels)) gb = channel_view(ggB, rank);
  std::vector<int64_t> group_dims;
  for (size_t d = 0; d < rank; ++d)
    if (d != 1) group_dims.push_back(static_cast<int64_t>(d));
  Shape stat_shape(rank, 1);
  stat_shape[1] = channels;
  DoubleResults r = double_results(grad_out, x, weight, want);
  if (training) {
    NormOperands o;
    o.x = device_ref(x);
    o.go = device_ref(grad_out);
    o.mean = channel_view(mean, rank);
    o.k = channel_view(stat, rank);
    o.stat_shape = stat_shape;
    o.count = static_cast<double>(x->numel() / std::max<int64_t>(channels, 1));
    o.group_dims = o.param_dims = group_dims;
    o.w = ptr(w), o.ggi = ptr(gi), o.ggw = ptr(gw), o.ggb = ptr(gb);
    norm_double_backward(o, ptr(r.go), ptr(r.x), ptr(r.w));
    return r.g;
  }
  // eval: k = 1 / sqrt(running_var + eps), a constant; grad_out = ggI k w + ggW (x - mean) k
  // + ggB, input = ggW gO k, weight = sum(ggI gO k) per channel.
  const DType dt = x->dtype();
  Scratch k(stat_shape, dt), t(x->sizes, dt);
  const Ref m = channel_view(mean, rank);
  device_launch([&](DeviceBackend& b) {
    b.unary(UnaryOp::AddScalar, k.ref(), channel_view(stat, rank), eps, 0);
    b.unary(UnaryOp::Rsqrt, k.ref(), k.ref(), 0, 0);
    if (r.go) {
      if (gi) {
        b.binary(BinaryOp::Mul, *r.go, *gi, k.ref(), 1);
        if (w) b.binary(BinaryOp::Mul, *r.go, *r.go, *w, 1);
      } else {
        b.fill(*r.go, 0.0);
      }
      if (gw) {
        b.binary(BinaryOp::Sub, t.ref(), device_ref(x), m, 1);
        b.binary(BinaryOp::Mul, t.ref(), t.ref(), k.ref(), 1);
        b.binary(BinaryOp::Mul, t.ref(), t.ref(), *gw, 1);
        b.binary(BinaryOp::Add, *r.go, *r.go, t.ref(), 1);
      }
      if (gb) b.binary(BinaryOp::Add, *r.go, *r.go, *gb, 1);
    }
    if (r.x) {
      if (gw) {
        b.binary(BinaryOp::Mul, *r.x, device_ref(grad_out), *gw, 1);
        b.binary(BinaryOp::Mul, *r.x, *r.x, k.ref(), 1);
      } else {
        b.fill(*r.x, 0.0);
      }
    }
    if (r.w) {
      if (gi) {
        b.binary(BinaryOp::Mul, t.ref(), *gi, device_ref(grad_out), 1);
        b.binary(BinaryOp::Mul, t.ref(), t.ref(), k.ref(), 1);
        b.reduce(cuda::ReduceOp::Sum, *r.w, t.ref(), group_dims, false);
      } else {
        b.fill(*r.w, 0.0);
      }
    }
  });
  return r.g;
}

Tensor max_pool2d_double_backward(const Tensor& grad, const Tensor& indices, DType dtype) {
  require_on_device({&grad, &indices});
  Tensor r = device_result(indices->sizes, dtype);
  const size_t nd = indices->sizes.size();
  const int64_t plane_out = indices->sizes[nd - 2] * indices->sizes[nd - 1];
  const int64_t plane_in = grad->sizes[nd - 2] * grad->sizes[nd - 1];
  const int64_t planes = plane_out > 0 ? indices->numel() / plane_out : 0;
  if (r->numel() == 0 || plane_in == 0) return r;
  // Each operand as [planes, H * W] rows (contiguous copies where they are not).
  std::unique_ptr<Scratch> gc, ic;
  Ref g = device_ref(grad), idx = device_ref(indices);
  if (!grad->is_contiguous()) {
    gc = std::make_unique<Scratch>(grad->sizes, grad->dtype());
    device_launch([&](DeviceBackend& b) { b.copy(gc->ref(), g); });
    g = gc->ref();
  }
  if (!indices->is_contiguous()) {
    ic = std::make_unique<Scratch>(indices->sizes, indices->dtype());
    device_launch([&](DeviceBackend& b) { b.copy(ic->ref(), idx); });
    idx = ic->ref();
  }
  auto rows = [&](Ref t, int64_t cols) {
    t.sizes = {planes, cols};
    t.strides = {cols, 1};
    return t;
  };
  device_launch([&](DeviceBackend& b) { b.gather(rows(device_ref(r), plane_out), rows(g, plane_in), 1, rows(idx, plane_out)); });
  return r;
}

// ---- indices read on the host, embedding's backward, p-norms (issue #8)

namespace {
// A contiguous int64 device copy of host index values (the kernel's index vector).
std::unique_ptr<Scratch> uploaded_index(const std::vector<int64_t>& values) {
  auto s = std::make_unique<Scratch>(Shape{static_cast<int64_t>(values.size())}, DType::Int64);
  const std::vector<double> v(values.begin(), values.end());
  if (!v.empty()) device_upload(s->ref().data, DType::Int64, v.data(), static_cast<int64_t>(v.size()));
  return s;
}
bool plain_index(const Tensor& idx, const std::vector<int64_t>& rows) {
  if (!idx->is_contiguous()) return false;
  for (int64_t r : rows)
    if (r < 0) return false;
  const std::vector<double> given = host_values(idx);  // rows are the wrapped values: equal unless one was negative
  for (size_t i = 0; i < given.size(); ++i)
    if (static_cast<int64_t>(given[i]) != rows[i]) return false;
  return true;
}
// A contiguous tensor's (or buffer's) elements seen as rows x cols.
cuda::DeviceTensorRef as_matrix(cuda::DeviceTensorRef r, int64_t rows, int64_t cols) {
  r.sizes = {rows, cols};
  r.strides = {cols, 1};
  return r;
}
}  // namespace

Tensor index_rows_wrapped(const Tensor& self, const Tensor& idx, const std::vector<int64_t>& rows) {
  require_on_device({&self, &idx});
  if (plain_index(idx, rows)) return index_rows(self, idx);
  Shape shape = idx->sizes;
  shape.insert(shape.end(), self->sizes.begin() + 1, self->sizes.end());
  Tensor r = device_result(shape, self->dtype());
  std::unique_ptr<Scratch> index = uploaded_index(rows);
  device_launch([&](DeviceBackend& b) { b.index_select(merged_rows(r, idx->dim()), device_ref(self), 0, index->ref()); });
  return r;
}

void index_add_rows_wrapped(const Tensor& out, const Tensor& idx, const std::vector<int64_t>& rows, const Tensor& src) {
  require_on_device({&out, &idx, &src});
  if (plain_index(idx, rows) && (idx->dim() == 1 || src->is_contiguous())) return index_add_rows(out, idx, src);
  // src (idx.shape + rows' shape) into a contiguous transient buffer when it is not, then
  // its rows added at the wrapped indices.
  const int64_t n = static_cast<int64_t>(rows.size());
  std::unique_ptr<Scratch> dense;
  cuda::DeviceTensorRef s = device_ref(src);
  if (!src->is_contiguous()) {
    dense = std::make_unique<Scratch>(src->sizes, src->dtype());
    device_launch([&](DeviceBackend& b) { b.copy(dense->ref(), device_ref(src)); });
    s = dense->ref();
  }
  Shape row_sizes{n};
  row_sizes.insert(row_sizes.end(), out->sizes.begin() + 1, out->sizes.end());
  s.sizes = row_sizes;
  s.strides.assign(row_sizes.size(), 1);
  for (size_t d = row_sizes.size() - 1; d-- > 0;) s.strides[d] = s.strides[d + 1] * row_sizes[d + 1];
  std::unique_ptr<Scratch> index = uploaded_index(rows);
  device_launch([&](DeviceBackend& b) { b.index_add(device_ref(out), 0, index->ref(), s); });
}

Tensor embedding_backward_scaled(const Tensor& grad, const Tensor& indices, const std::vector<double>& scales,
                                 const Shape& weight_sizes, DType dtype) {
  require_on_device({&grad, &indices});
  const int64_t n = static_cast<int64_t>(scales.size()), dim = weight_sizes[1];
  Tensor r;
  {
    DeviceScope scope("cuda");
    r = full(weight_sizes, 0.0, dtype, false);  // zeros, as the CPU's one new storage
  }
  if (n == 0) return r;
  // grad (indices.shape + [dim], any strides) times each index's scale (a column of
  // indices.shape + [1]) into a contiguous transient buffer, then added at the indices.
  Shape column = indices->sizes;
  column.push_back(1);
  Scratch scale(column, dtype), scaled(grad->sizes, dtype);
  std::vector<double> rounded(scales);
  for (double& v : rounded) v = round_to_dtype(v, dtype);  // the upload takes values representable in dtype
  device_upload(scale.ref().data, dtype, rounded.data(), n);
  Scratch kept(column, DType::Bool);
  Operand zero(0.0, dtype);
  device_launch([&](DeviceBackend& b) {
    b.binary(cuda::pw::BinaryOp::Mul, scaled.ref(), device_ref(grad), scale.ref(), 1);
    // A padding row's gradient is skipped, not multiplied by 0 (an inf or NaN there stays out).
    b.binary(cuda::pw::BinaryOp::Ne, kept.ref(), scale.ref(), zero.ref(), 1);
    b.ternary(cuda::pw::TernaryOp::Where, scaled.ref(), kept.ref(), scaled.ref(), zero.ref(), 0, 0);
    b.index_add(device_ref(r), 0, index_vector(indices), as_matrix(scaled.ref(), n, dim));
  });
  return r;
}

Tensor norm_p(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  using cuda::pw::BinaryOp;
  using cuda::pw::UnaryOp;
  Tensor r = device_result(reduced_shape(a->sizes, dims, keepdim), a->dtype());
  Scratch t(a->sizes, a->dtype());
  Operand zero(0.0, a->dtype());
  device_launch([&](DeviceBackend& b) {
    if (p == 0.0) {  // the count of non-zero elements
      b.binary(BinaryOp::Ne, t.ref(), device_ref(a), zero.ref(), 1);
      b.reduce(cuda::ReduceOp::Sum, device_ref(r), t.ref(), dims, keepdim);
      return;
    }
    b.unary(UnaryOp::Abs, t.ref(), device_ref(a), 0, 0);
    if (std::isinf(p)) {  // max / min of |x| (NaN propagates)
      b.reduce(p > 0 ? cuda::ReduceOp::Amax : cuda::ReduceOp::Amin, device_ref(r), t.ref(), dims, keepdim);
      return;
    }
    if (p != 1.0) b.unary(UnaryOp::PowScalar, t.ref(), t.ref(), p, 0);
    b.reduce(cuda::ReduceOp::Sum, device_ref(r), t.ref(), dims, keepdim);
    if (p != 1.0) b.unary(UnaryOp::PowScalar, device_ref(r), device_ref(r), 1.0 / p, 0);
  });
  return r;
}

Tensor norm_p_backward(const Tensor& self, const Tensor& result, const Tensor& grad, double p,
                       const std::vector<int64_t>& dims, bool keepdim, DType out) {
  require_on_device({&self, &result, &grad});
  using cuda::pw::BinaryOp;
  using cuda::pw::TernaryOp;
  using cuda::pw::UnaryOp;
  const size_t nd = self->sizes.size();
  const cuda::DeviceTensorRef norm = kept_dims(result, dims, nd, keepdim), g = kept_dims(grad, dims, nd, keepdim);
  const Shape kept = reduced_shape(self->sizes, dims, true);
  Tensor r = device_result(self->sizes, out);
  Scratch ab(self->sizes, out), k(kept, out), z(kept, DType::Bool), zs(self->sizes, DType::Bool);
  Operand zero(0.0, out);
  device_launch([&](DeviceBackend& b) {
    const cuda::DeviceTensorRef x = device_ref(self), rr = device_ref(r);
    if (p == 1.0) {  // self.sgn() * grad
      b.binary(BinaryOp::AbsBackward, rr, g, x, 1);
      return;
    }
    b.unary(UnaryOp::Abs, ab.ref(), x, 0, 0);
    if (std::isinf(p)) {
      // self.sign() * (grad / mask.sum(dim, true)) * mask, mask = |self| == norm or NaN
      b.binary(BinaryOp::Eq, rr, ab.ref(), norm, 1);
      b.binary(BinaryOp::Ne, zs.ref(), ab.ref(), ab.ref(), 1);
      b.binary(BinaryOp::Maximum, rr, rr, zs.ref(), 1);  // the mask, 1 or 0
      b.reduce(cuda::ReduceOp::Sum, k.ref(), rr, dims, true);
      b.binary(BinaryOp::Div, k.ref(), g, k.ref(), 1);  // grad / count
      b.binary(BinaryOp::Mul, rr, k.ref(), rr, 1);
      b.binary(BinaryOp::AbsBackward, rr, rr, x, 1);
      return;
    }
    if (p < 1.0) {
      // self.sgn() * |self|^(p-1) (0 where self == 0) * grad * norm^(1-p)
      b.unary(UnaryOp::PowScalar, ab.ref(), ab.ref(), p - 1, 0);
      b.binary(BinaryOp::AbsBackward, rr, ab.ref(), x, 1);
      b.binary(BinaryOp::Eq, zs.ref(), x, zero.ref(), 1);
      b.ternary(TernaryOp::Where, rr, zs.ref(), zero.ref(), rr, 0, 0);
      b.binary(BinaryOp::Mul, rr, rr, g, 1);
      b.unary(UnaryOp::PowScalar, k.ref(), norm, 1 - p, 0);
      b.binary(BinaryOp::Mul, rr, rr, k.ref(), 1);
      return;
    }
    // grad / norm^(p-1), 0 where norm == 0; times self.sgn() * |self|^(p-1) (p < 2) or
    // self * |self|^(p-2)
    b.unary(UnaryOp::PowScalar, k.ref(), norm, p - 1, 0);
    b.binary(BinaryOp::Div, k.ref(), g, k.ref(), 1);
    b.binary(BinaryOp::Eq, z.ref(), norm, zero.ref(), 1);
    b.ternary(TernaryOp::Where, k.ref(), z.ref(), zero.ref(), k.ref(), 0, 0);
    if (p < 2.0) {
      b.unary(UnaryOp::PowScalar, ab.ref(), ab.ref(), p - 1, 0);
      b.binary(BinaryOp::AbsBackward, ab.ref(), ab.ref(), x, 1);
    } else {
      b.unary(UnaryOp::PowScalar, ab.ref(), ab.ref(), p - 2, 0);
      b.binary(BinaryOp::Mul, ab.ref(), x, ab.ref(), 1);
    }
    b.binary(BinaryOp::Mul, rr, ab.ref(), k.ref(), 1);
  });
  return r;
}

Tensor softmax_data_grad_output(const Tensor& G, const Tensor& o, int64_t dim, bool log, DType out) {
  require_on_device({&G, &o});
  if (!log) return softmax_backward(G, o, dim, false, out);  // _softmax_backward_data(G, o)
  using cuda::pw::BinaryOp;
  Tensor r = device_result(o->sizes, out);
  Scratch t(o->sizes, out), s(reduced_shape(o->sizes, {dim}, true), out);
  device_launch([&](DeviceBackend& b) {
    b.unary(cuda::pw::UnaryOp::Exp, t.ref(), device_ref(o), 0, 0);
    b.binary(BinaryOp::Mul, t.ref(), device_ref(G), t.ref(), 1);
    b.reduce(cuda::ReduceOp::Sum, s.ref(), t.ref(), {dim}, true);
    b.binary(BinaryOp::Sub, device_ref(r), device_ref(G), s.ref(), 1);
  });
  return r;
}

Tensor softmax_data_grad_result(const Tensor& G, const Tensor& go, const Tensor& o, int64_t dim, bool log, DType out) {
  require_on_device({&G, &go, &o});
  using cuda::pw::BinaryOp;
  Tensor r = device_result(o->sizes, out);
  const Shape kept = reduced_shape(o->sizes, {dim}, true);
  Scratch t(o->sizes, out), s1(kept, out), s2(kept, out);
  device_launch([&](DeviceBackend& b) {
    const cuda::DeviceTensorRef rr = device_ref(r);
    if (log) {  // -G * exp(o) * sum(go)
      b.reduce(cuda::ReduceOp::Sum, s1.ref(), device_ref(go), {dim}, true);
      b.unary(cuda::pw::UnaryOp::Exp, rr, device_ref(o), 0, 0);
      b.binary(BinaryOp::Mul, rr, device_ref(G), rr, 1);
      b.binary(BinaryOp::Mul, rr, rr, s1.ref(), 1);
      b.unary(cuda::pw::UnaryOp::Neg, rr, rr, 0, 0);
      return;
    }
    b.binary(BinaryOp::Mul, t.ref(), device_ref(o), device_ref(go), 1);
    b.reduce(cuda::ReduceOp::Sum, s1.ref(), t.ref(), {dim}, true);  // sum(o * go)
    b.binary(BinaryOp::Mul, t.ref(), device_ref(o), device_ref(G), 1);
    b.reduce(cuda::ReduceOp::Sum, s2.ref(), t.ref(), {dim}, true);  // sum(o * G)
    b.binary(BinaryOp::Mul, rr, device_ref(go), device_ref(G), 1);
    b.binary(BinaryOp::Mul, t.ref(), s1.ref(), device_ref(G), 1);
    b.binary(BinaryOp::Sub, rr, rr, t.ref(), 1);
    b.binary(BinaryOp::Mul, t.ref(), device_ref(go), s2.ref(), 1);
    b.binary(BinaryOp::Sub, rr, rr, t.ref(), 1);
  });
  return r;
}

Tensor mse_bb_reduced(const Tensor& g, const Tensor& self, const Tensor& target, double scale, DType out) {
  require_on_device({&g, &self, &target});
  using cuda::pw::BinaryOp;
  Tensor r = device_result({}, out);
  Scratch t(self->sizes, out);
  device_launch([&](DeviceBackend& b) {
    b.binary(BinaryOp::Sub, t.ref(), device_ref(self), device_ref(target), 1);
    b.binary(BinaryOp::Mul, t.ref(), t.ref(), device_ref(g), 1);
    b.reduce(cuda::ReduceOp::Sum, device_ref(r), t.ref(), {}, false);
    b.unary(cuda::pw::UnaryOp::MulScalar, device_ref(r), device_ref(r), scale, 0);
  });
  return r;
}

namespace {
// r with its first k dims merged into one of their product (they must be contiguous among
// themselves: each stride the next one's times its size).
cuda::DeviceTensorRef merge_leading(cuda::DeviceTensorRef r, int64_t k) {
  int64_t rows = 1;
  for (int64_t d = 0; d < k; ++d) rows *= r.sizes[static_cast<size_t>(d)];
  const int64_t stride = r.strides[static_cast<size_t>(k - 1)];
  r.sizes.erase(r.sizes.begin(), r.sizes.begin() + k);
  r.strides.erase(r.strides.begin(), r.strides.begin() + k);
  r.sizes.insert(r.sizes.begin(), rows);
  r.strides.insert(r.strides.begin(), stride);
  return r;
}
bool leading_merge(const Tensor& t, int64_t k) {
  for (int64_t d = 0; d + 1 < k; ++d) {
    const auto u = static_cast<size_t>(d);
    if (t->sizes[u + 1] != 1 && t->strides[u] != t->strides[u + 1] * t->sizes[u + 1]) return false;
  }
  return true;
}
}  // namespace

Tensor masked_rows(const Tensor& self, int64_t k, const std::vector<int64_t>& positions) {
  require_on_device({&self});
  Shape shape{static_cast<int64_t>(positions.size())};
  shape.insert(shape.end(), self->sizes.begin() + k, self->sizes.end());
  Tensor r = device_result(shape, self->dtype());
  if (positions.empty()) return r;
  std::unique_ptr<Scratch> dense;
  cuda::DeviceTensorRef in = device_ref(self);
  if (!leading_merge(self, k)) {
    dense = std::make_unique<Scratch>(self->sizes, self->dtype());
    device_launch([&](DeviceBackend& b) { b.copy(dense->ref(), device_ref(self)); });
    in = dense->ref();
  }
  std::unique_ptr<Scratch> index = uploaded_index(positions);
  device_launch([&](DeviceBackend& b) { b.index_select(device_ref(r), merge_leading(in, k), 0, index->ref()); });
  return r;
}

void masked_rows_add(const Tensor& out, int64_t k, const std::vector<int64_t>& positions, const Tensor& grad) {
  require_on_device({&out, &grad});
  if (positions.empty()) return;
  std::unique_ptr<Scratch> index = uploaded_index(positions);
  device_launch([&](DeviceBackend& b) { b.index_add(merge_leading(device_ref(out), k), 0, index->ref(), device_ref(grad)); });
}

}  // namespace agtrace::kernels::device
