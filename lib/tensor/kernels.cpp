#include "tensor/kernels.hpp"

#include <algorithm>

#include "errors.hpp"

namespace agtrace::kernels {

namespace {

int category(DType d) {
  if (d == DType::Bool) return 0;
  if (d == DType::Int64) return 1;
  return 2;
}

// Strides of `t` seen through a broadcast to `out` (stride 0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& out) {
  Shape s(out.size(), 0);
  const size_t lead = out.size() - t->sizes.size();
  for (size_t d = 0; d < t->sizes.size(); ++d)
    s[lead + d] = t->sizes[d] == 1 && out[lead + d] != 1 ? 0 : t->strides[d];
  return s;
}

bool any_meta(std::initializer_list<const Tensor*> ts) {
  for (auto* t : ts)
    if ((*t)->is_meta()) return true;
  return false;
}

}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  // Same category, different dtypes: only floats remain here.
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  if (a == DType::Float32 || b == DType::Float32) return DType::Float32;
  return DType::Float32;  // float16 with bfloat16 promotes to float32, as in PyTorch
}

DType result_type(const Tensor& a, const Tensor& b) {
  // Three priority tiers: tensors with dimensions, 0-d tensors, wrapped Python numbers.
  // A lower tier only decides the dtype if its category (bool < int < float) is higher.
  struct Tier {
    bool any = false;
    DType d = DType::Bool;
  } tiers[3];
  for (const Tensor* t : {&a, &b}) {
    int tier = (*t)->is_wrapped_number ? 2 : ((*t)->dim() == 0 ? 1 : 0);
    DType d = (*t)->dtype();
    if (tier == 2) {
      // A Python float takes the default dtype, an int int64, a bool bool.
      d = category(d) == 2 ? DType::Float32 : d;
    }
    tiers[tier].d = tiers[tier].any ? promote(tiers[tier].d, d) : d;
    tiers[tier].any = true;
  }
  bool have = false;
  DType r = DType::Bool;
  for (auto& t : tiers) {
    if (!t.any) continue;
    if (!have) {
      r = t.d;
      have = true;
    } else if (category(t.d) > category(r)) {
      r = t.d;
    }
  }
  return r;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  // From the last dimension backwards, as PyTorch's infer_size: the error names the
  // trailing-most mismatch.
  for (size_t i = n; i-- > 0;) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      ScenarioError e("shape_mismatch",
                      "The size of tensor a (" + std::to_string(da) +
                          ") must match the size of tensor b (" + std::to_string(db) +
                          ") at non-singleton dimension " + std::to_string(i));
      e.facts = {{"op", op}, {"shapes", {a, b}}, {"dim", i}};
      throw e;
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor unary(const Tensor& a, DType out, const std::function<double(double)>& f) {
  Tensor r = empty_tensor(a->sizes, out, a->is_meta());
  if (r->is_meta()) return r;
  const double* src = a->storage->data.data();
  double* dst = r->storage->data.data();
  for_each_offset(a->sizes, a->strides, a->offset,
                  [&](int64_t i, int64_t off) { dst[i] = round_to_dtype(f(src[off]), out); });
  return r;
}

Tensor binary(const Tensor& a, const Tensor& b, DType out,
              const std::function<double(double, double)>& f, const std::string& op) {
  Shape shape = broadcast_shapes(a->sizes, b->sizes, op);
  Tensor r = empty_tensor(shape, out, any_meta({&a, &b}));
  if (r->is_meta()) return r;
  Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  std::vector<double> av(static_cast<size_t>(r->numel())), bv(av.size());
  const double* pa = a->storage->data.data();
  const double* pb = b->storage->data.data();
  for_each_offset(shape, sa, a->offset, [&](int64_t i, int64_t off) { av[i] = pa[off]; });
  for_each_offset(shape, sb, b->offset, [&](int64_t i, int64_t off) { bv[i] = pb[off]; });
  double* dst = r->storage->data.data();
  for (size_t i = 0; i < av.size(); ++i) dst[i] = round_to_dtype(f(av[i], bv[i]), out);
  return r;
}

Tensor ternary(const Tensor& a, const Tensor& b, const Tensor& c, DType out,
               const std::function<double(double, double, double)>& f, const std::string& op) {
  Shape shape = broadcast_shapes(broadcast_shapes(a->sizes, b->sizes, op), c->sizes, op);
  Tensor r = empty_tensor(shape, out, any_meta({&a, &b, &c}));
  if (r->is_meta()) return r;
  std::vector<double> v[3];
  const Tensor* ts[3] = {&a, &b, &c};
  for (int k = 0; k < 3; ++k) {
    v[k].resize(static_cast<size_t>(r->numel()));
    const double* p = (*ts[k])->storage->data.data();
    for_each_offset(shape, broadcast_strides(*ts[k], shape), (*ts[k])->offset,
                    [&](int64_t i, int64_t off) { v[k][i] = p[off]; });
  }
  double* dst = r->storage->data.data();
  for (size_t i = 0; i < v[0].size(); ++i) dst[i] = round_to_dtype(f(v[0][i], v[1][i], v[2][i]), out);
  return r;
}

void binary_inplace(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f,
                    const std::string& op) {
  Shape shape = broadcast_shapes(a->sizes, b->sizes, op);
  if (shape != a->sizes) {
    ScenarioError e("shape_mismatch", "output with shape " + shape_str(a->sizes) +
                                          " doesn't match the broadcast shape " + shape_str(shape));
    e.facts = {{"op", op}, {"shapes", {a->sizes, b->sizes}}};
    throw e;
  }
  if (a->is_meta() || b->is_meta()) return;
  std::vector<double> bv(static_cast<size_t>(a->numel()));
  const double* pb = b->storage->data.data();
  for_each_offset(shape, broadcast_strides(b, shape), b->offset,
                  [&](int64_t i, int64_t off) { bv[i] = pb[off]; });
  std::vector<double> av = to_values(a);
  for (size_t i = 0; i < av.size(); ++i) av[i] = f(av[i], bv[i]);
  write_values(a, av);
}

void unary_inplace(const Tensor& a, const std::function<double(double)>& f) {
  if (a->is_meta()) return;
  std::vector<double> av = to_values(a);
  for (double& v : av) v = f(v);
  write_values(a, av);
}

Tensor full(const Shape& sizes, double v, DType dtype, bool meta) {
  Tensor r = empty_tensor(sizes, dtype, meta);
  if (!meta) std::fill(r->storage->data.begin(), r->storage->data.end(), round_to_dtype(v, dtype));
  return r;
}

Tensor copy(const Tensor& a) { return unary(a, a->dtype(), [](double v) { return v; }); }

Tensor cast(const Tensor& a, DType dtype) { return unary(a, dtype, [](double v) { return v; }); }

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim, std::optional<DType> out) {
  // Integer and bool sums accumulate in int64, as torch.sum does.
  DType od = out ? *out : (is_floating(a->dtype()) ? a->dtype() : DType::Int64);
  std::vector<bool> reduce(a->sizes.size(), dims_in.empty());
  for (int64_t d : dims_in) reduce[static_cast<size_t>(d)] = true;
  Shape out_shape, kept_shape;
  for (size_t d = 0; d < a->sizes.size(); ++d) {
    if (reduce[d]) {
      if (keepdim) out_shape.push_back(1);
      kept_shape.push_back(1);
    } else {
      out_shape.push_back(a->sizes[d]);
      kept_shape.push_back(a->sizes[d]);
    }
  }
  Tensor r = empty_tensor(out_shape, od, a->is_meta());
  if (r->is_meta()) return r;
  Shape kstr = contiguous_strides(kept_shape);
  for (size_t d = 0; d < kstr.size(); ++d)
    if (reduce[d]) kstr[d] = 0;
  std::vector<double> acc(static_cast<size_t>(r->numel()), 0.0);
  std::vector<double> av = to_values(a);
  for_each_offset(a->sizes, kstr, 0, [&](int64_t i, int64_t off) { acc[off] += av[i]; });
  double* dst = r->storage->data.data();
  for (size_t i = 0; i < acc.size(); ++i) dst[i] = round_to_dtype(acc[i], od);
  return r;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g->sizes == shape) return g;
  std::vector<int64_t> dims;
  const size_t lead = g->sizes.size() - shape.size();
  for (size_t d = 0; d < g->sizes.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g->sizes[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  Tensor s = sum(g, dims, true, g->dtype());
  // Drop the leading dims and reshape to `shape` (same element order).
  Tensor r = make_alias(s, shape, contiguous_strides(shape), 0);
  return r;
}

Tensor expand_to(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  // grad.expand(sizes), as SumBackward does: a stride-0 view, no new storage.
  Shape kept;
  Shape kept_strides;
  size_t gi = 0;
  std::vector<bool> reduced(shape.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      kept.push_back(1);
      kept_strides.push_back(0);
      if (keepdim) ++gi;
    } else {
      kept.push_back(g->sizes[gi]);
      kept_strides.push_back(g->strides[gi]);
      ++gi;
    }
  }
  Shape strides(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) strides[d] = kept[d] == 1 && shape[d] != 1 ? 0 : kept_strides[d];
  return make_alias(g, shape, strides, g->offset);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  const int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
  DType od = promote(a->dtype(), b->dtype());
  Tensor r = empty_tensor({n, m}, od, a->is_meta() || b->is_meta());
  if (r->is_meta()) return r;
  std::vector<double> av = to_values(a), bv = to_values(b);
  double* dst = r->storage->data.data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) acc += av[i * k + p] * bv[p * m + j];
      dst[i * m + j] = round_to_dtype(acc, od);
    }
  return r;
}

Tensor transposed(const Tensor& a) {
  return make_alias(a, {a->sizes[1], a->sizes[0]}, {a->strides[1], a->strides[0]}, a->offset);
}

Tensor view_backward(const Tensor& g, const Shape& base_sizes, const Shape& view_sizes,
                     const Shape& view_strides, int64_t view_offset) {
  Tensor r = full(base_sizes, 0.0, g->dtype(), g->is_meta());
  if (r->is_meta()) return r;
  Tensor window = make_alias(r, view_sizes, view_strides, view_offset);
  write_values(window, to_values(g));
  return r;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);  // PyTorch treats a 0-d tensor as having one dim here
  if (dim < -n || dim >= n) {
    ScenarioError e("index_out_of_range", "Dimension out of range (expected to be in range of [" +
                                              std::to_string(-n) + ", " + std::to_string(n - 1) +
                                              "], but got " + std::to_string(dim) + ")");
    e.facts = {{"dim", dim}, {"ndim", ndim}};
    throw e;
  }
  return dim < 0 ? dim + n : dim;
}

}  // namespace agtrace::kernels
