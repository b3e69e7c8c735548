#include "tensor/kernels.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "errors.hpp"
#include "tensor/cascade_sum.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/device_kernels.hpp"
#include "tensor/lane_sum.hpp"

#ifdef AGTRACE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace agtrace::kernels {

namespace {

bool g_fast_paths = true;  // see fast_paths()

int category(DType d) {
  if (d == DType::Bool) return 0;
  if (d == DType::Int64) return 1;
  return 2;
}

}  // namespace

namespace detail {

// Strides of a tensor seen through a broadcast to `out` (stride 0 on broadcast dims).
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& out) {
  Shape s(out.size(), 0);
  const size_t lead = out.size() - sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d) s[lead + d] = sizes[d] == 1 && out[lead + d] != 1 ? 0 : strides[d];
  return s;
}

Operand<double> double_operand(const Tensor& t, std::vector<double>& copy, Shape& copy_strides) {
  const Storage& s = *t->storage;
  if (!s.holds_float()) return {s.f64(), t->offset, &t->sizes.vec(), &t->strides.vec(), t->is_contiguous(), t->numel()};
  copy = to_values(t);
  copy_strides = contiguous_strides(t->sizes);
  return {copy.data(), 0, &t->sizes.vec(), &copy_strides, true, t->numel()};
}

DoubleResult::DoubleResult(Storage& s) : s_(s) {
  if (s.holds_float()) {
    buf_.resize(static_cast<size_t>(s.held_elements()));
    dst_ = buf_.data();
  } else {
    dst_ = s.f64();
  }
}

void DoubleResult::finish() {
  if (!s_.holds_float()) return;
  float* p = s_.f32();
  for (size_t i = 0; i < buf_.size(); ++i) p[i] = static_cast<float>(buf_[i]);
}

std::vector<double> broadcast_values(const Tensor& t, const Shape& shape) {
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)));
  const Storage& s = *t->storage;
  const Shape st = broadcast_strides(t, shape);
  if (s.holds_float()) {
    const float* p = s.f32();
    for_each_offset(shape, st, t->offset, [&](int64_t i, int64_t off) { out[i] = static_cast<double>(p[off]); });
  } else {
    const double* p = s.f64();
    for_each_offset(shape, st, t->offset, [&](int64_t i, int64_t off) { out[i] = p[off]; });
  }
  return out;
}

// `inner` equals the last dims of `shape` (leading size-1 dims of `inner` dropped): a
// contiguous tensor of that shape repeats every numel(inner) elements of `shape`.
bool is_trailing_shape(const Shape& inner, const Shape& shape) {
  size_t lead = 0;
  while (lead < inner.size() && inner[lead] == 1) ++lead;
  const size_t k = inner.size() - lead;
  if (k > shape.size()) return false;
  for (size_t d = 0; d < k; ++d)
    if (inner[lead + d] != shape[shape.size() - k + d]) return false;
  return true;
}

bool any_meta(std::initializer_list<const Tensor*> ts) {
  for (auto* t : ts)
    if ((*t)->is_meta()) return true;
  return false;
}

void inplace_shape_mismatch(const Shape& a, const Shape& b, const Shape& shape, const std::string& op) {
  ScenarioError e("shape_mismatch",
                  "output with shape " + shape_str(a) + " doesn't match the broadcast shape " + shape_str(shape));
  e.facts = {{"op", op}, {"shapes", {a, b}}};
  throw e;
}

}  // namespace detail

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

Tensor full(const Shape& sizes, double v, DType dtype, bool meta) {
  Tensor r = empty_tensor(sizes, dtype, meta);
  if (meta) return r;
  Storage& s = *r->storage;
  if (s.on_device()) {  // zero-filled by its backend; another value by the fill kernel
    if (v != 0.0 && s.numel > 0) device::fill(r, v);
    return r;
  }
  if (s.holds_float())
    std::fill(s.f32(), s.f32() + s.numel, static_cast<float>(v));
  else
    std::fill(s.f64(), s.f64() + s.numel, round_to_dtype(v, dtype));
  return r;
}

namespace {
// A float32 tensor's elements copied in row-major order: the innermost dim as a strided
// run, the outer rows split between threads (a copy is exact, so the split changes
// nothing). The copies of attention's reshapes and transposes were 4 % of
// bench/scenarios/transformer_block.json element by element through for_each_offset.
void copy_f32(const Tensor& a, float* dst) {
  const float* src = a->storage->f32();
  const size_t nd = a->sizes.size();
  const int64_t inner = nd ? a->sizes.back() : 1, step = nd ? a->strides.back() : 1;
  const int64_t rows = inner > 0 ? a->numel() / inner : 0;
  parallel_for(rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off = a->offset, rem = r;
      for (size_t d = nd - 1; d-- > 0;) {
        off += (rem % a->sizes[d]) * a->strides[d];
        rem /= a->sizes[d];
      }
      const float* s = src + off;
      float* o = dst + r * inner;
      if (step == 1)
        std::copy(s, s + inner, o);
      else
        for (int64_t j = 0; j < inner; ++j) o[j] = s[j * step];
    }
  });
}
}  // namespace

Tensor copy(const Tensor& a) {
  if (device::on_device(a)) return device::copy(a, a->dtype());
  if (g_fast_paths && a->dtype() == DType::Float32 && !a->is_meta() && a->dim() > 0) {
    Tensor r = uninitialized_tensor(a->sizes, DType::Float32, false);
    copy_f32(a, r->storage->f32());
    return r;
  }
  // clone() is contiguous here (unary would keep a's layout).
  if (!a->is_contiguous()) return copy_to(a, a->dtype(), a->storage->device);
  return unary(a, a->dtype(), [](double v) { return v; });
}

Tensor cast(const Tensor& a, DType dtype) {
  if (device::on_device(a)) return device::copy(a, dtype);
  return unary(a, dtype, [](double v) { return v; });
}

namespace {
// o[q] = the sum of row q of x (outer rows of inner elements) in torch 1.13's order
// (tensor/cascade_sum.hpp): one row as torch.sum of everything on this run's threads,
// several rows each as a row, split between threads (torch splits them by whole rows when
// there are at least as many rows as threads; with fewer rows, and 32,768 elements or more,
// it splits the elements instead, which is not modelled: each row is then its one-thread sum).
template <typename T>
void row_sums(const T* x, int64_t outer, int64_t inner, T* o) {
  if (outer == 1) {
    o[0] = full_sum(x, inner, threads());
    return;
  }
  parallel_for(outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) o[q] = row_sum(x + q * inner, inner);
  });
}
}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim, std::optional<DType> out) {
  // Integer and bool sums accumulate in int64, as torch.sum does.
  DType od = out ? *out : (is_floating(a->dtype()) ? a->dtype() : DType::Int64);
  if (device::on_device(a)) return device::sum(a, dims_in, keepdim, od);
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
  Tensor r = uninitialized_tensor(out_shape, od, a->is_meta());  // both paths below write every element
  if (r->is_meta()) return r;
  Shape kstr = contiguous_strides(kept_shape);
  for (size_t d = 0; d < kstr.size(); ++d)
    if (reduce[d]) kstr[d] = 0;
  // The reduced dims are a leading block or a trailing block (a bias gradient, a row sum):
  // plain loops. Rows and columns of a contiguous float32 tensor, and float64 sums of a
  // contiguous tensor, in torch 1.13's orders (tensor/cascade_sum.hpp); other columns in
  // element order in double as the general walk below adds them, other rows in a LaneSum's
  // order below float64 (the general path's block loops add them so too).
  size_t first = 0, last = reduce.size();
  while (first < reduce.size() && !reduce[first]) ++first;
  while (last > first && !reduce[last - 1]) --last;
  bool block = true;
  for (size_t d = first; d < last; ++d) block = block && reduce[d];
  // A sum over every dim counts as trailing: one row, summed in lanes below float64.
  const bool trailing = block && last == reduce.size(), leading = block && first == 0 && !trailing;
  // Rows not in torch's float32 order are summed in a LaneSum's order below float64
  // (tensor/lane_sum.hpp), in element order in float64 (a non-contiguous one).
  const bool in_lanes = od != DType::Float64 && is_floating(od);
  const float* xf = od == DType::Float32 ? contiguous_f32(a) : nullptr;
  if (xf && (leading || trailing) && a->numel() > 0) {
    // Contiguous float32, read from the storage in place: columns (leading) or rows
    // (trailing) split between threads, each sum in its own order whatever the split.
    const int64_t n = a->numel();
    const int64_t outer = leading ? shape_numel(Shape(a->sizes.begin(), a->sizes.begin() + last)) : r->numel();
    const int64_t inner = n / std::max<int64_t>(outer, 1);
    float* o = r->storage->f32();
    if (leading && inner >= 2) {
      // torch 1.13's float order for each column (tensor/cascade_sum.hpp), columns split
      // between threads.
      parallel_for(inner, std::max<int64_t>(1, 32768 / std::max<int64_t>(outer, 1)),
                   [&](int64_t j0, int64_t j1) { column_sums(xf, outer, inner, j0, j1, o + j0); });
    } else if (leading) {
      // One column, an inner reduction to torch (another order): the double sum in row order,
      // as the general path below.
      for (int64_t j = 0; j < inner; ++j) {
        double s = 0.0;
        for (int64_t q = 0; q < outer; ++q) s += static_cast<double>(xf[q * inner + j]);
        o[j] = static_cast<float>(s);
      }
    } else {
      row_sums(xf, outer, inner, o);
    }
    return r;
  }
  std::vector<double> acc(static_cast<size_t>(r->numel()), 0.0);
  std::vector<double> av = to_values(a);
  if (!block && od == DType::BFloat16 && a->dtype() == DType::BFloat16) {
    // Reduced dims in two or more separate runs ((0, 2, 3) of an NCHW tensor: a conv bias's
    // gradient, sum_to of a broadcast [C, 1, 1]): 1.13's cascade_sum reduces the innermost run
    // in float and adds each partial to the bfloat16 output with CastStoreAccumulate (the
    // float rounded to bfloat16, then the add rounded), the other runs' indices in row-major
    // order. Measured: 0 differences on 6 shapes and patterns (three runs, a strided inner
    // run); the exact sum rounded once differs in 3 to 22 of 5 to 32 outputs.
    size_t inner_end = reduce.size();
    while (inner_end > 0 && !reduce[inner_end - 1]) --inner_end;
    size_t inner_begin = inner_end;
    while (inner_begin > 0 && reduce[inner_begin - 1]) --inner_begin;
    Shape part_shape = a->sizes;
    for (size_t d = inner_begin; d < inner_end; ++d) part_shape[d] = 1;
    Shape part_strides = contiguous_strides(part_shape);
    for (size_t d = inner_begin; d < inner_end; ++d) part_strides[d] = 0;
    std::vector<double> part(static_cast<size_t>(shape_numel(part_shape)), 0.0);
    for_each_offset(a->sizes, part_strides, 0, [&](int64_t i, int64_t off) { part[off] += av[i]; });
    for_each_offset(part_shape, kstr, 0, [&](int64_t i, int64_t off) {
      acc[off] = round_bf16(acc[off] + round_bf16(part[i]));
    });
    write_values(r, acc);
    return r;
  }
  if ((leading || trailing) && !av.empty()) {
    const int64_t outer = leading ? shape_numel(Shape(a->sizes.begin(), a->sizes.begin() + last)) : r->numel();
    const int64_t inner = static_cast<int64_t>(av.size()) / std::max<int64_t>(outer, 1);
    // torch's orders for a contiguous float32 sum and for a float64 sum of a contiguous
    // floating tensor (sum(dtype=torch.float64) sums the input cast to double).
    const bool torch_order = (trailing || inner >= 2) && a->is_contiguous() &&
                             ((od == DType::Float32 && a->dtype() == DType::Float32) ||
                              (od == DType::Float64 && is_floating(a->dtype())));
    auto torch_sums = [&](const auto* values, auto* sums) {
      if (leading)
        column_sums(values, outer, inner, 0, inner, sums);
      else
        row_sums(values, outer, inner, sums);
    };
    if (torch_order && od == DType::Float64) {
      torch_sums(av.data(), acc.data());
    } else if (torch_order) {
      // The float32 path's orders above, on a float copy (the values are exact floats).
      std::vector<float> xs(av.begin(), av.end());
      std::vector<float> sums(static_cast<size_t>(r->numel()));
      torch_sums(xs.data(), sums.data());
      acc.assign(sums.begin(), sums.end());
    } else if (leading) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) acc[static_cast<size_t>(j)] += av[static_cast<size_t>(o * inner + j)];
    } else {
      for (int64_t o = 0; o < outer; ++o) {
        LaneSum lanes;
        double s = 0.0;
        for (int64_t j = 0; j < inner; ++j) {
          if (in_lanes) lanes.add(j, av[static_cast<size_t>(o * inner + j)]);
          else s += av[static_cast<size_t>(o * inner + j)];
        }
        acc[static_cast<size_t>(o)] = in_lanes ? lanes.total() : s;
      }
    }
  } else {
    for_each_offset(a->sizes, kstr, 0, [&](int64_t i, int64_t off) { acc[off] += av[i]; });
  }
  write_values(r, acc);  // rounds to od
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

namespace {
int g_threads = 1;

// Copies a strided (rows, cols) matrix into a row-major buffer of T.
template <typename S, typename T>
void pack(const MatRef<S>& x, int64_t rows, int64_t cols, T* dst) {
  const S* base = x.data + x.offset;
  if (x.col_stride == 1) {
    for (int64_t i = 0; i < rows; ++i) {
      const S* row = base + i * x.row_stride;
      T* d = dst + i * cols;
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<T>(row[j]);
    }
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = static_cast<T>(base[i * x.row_stride + j * x.col_stride]);
}

// Like pack, but a column-major operand (a transposed view, row_stride 1) is copied in its
// own order, as the (cols, rows) matrix it is, and BLAS is told to transpose it: reading
// the storage sequentially instead of striding through it.
template <typename S, typename T>
bool pack_for_blas(const MatRef<S>& x, int64_t rows, int64_t cols, T* dst) {
  if (x.col_stride != 1 && x.row_stride == 1 && rows > 1 && cols > 1) {
    pack(MatRef<S>{x.data, x.offset, x.col_stride, 1}, cols, rows, dst);
    return true;
  }
  pack(x, rows, cols, dst);
  return false;
}

#ifdef AGTRACE_HAVE_OPENBLAS
// A float32 operand as sgemm reads it: in place when its layout is the one pack_for_blas
// would produce, only with another leading dimension (the same trans flag, so the same
// sgemm call on the same floats: identical results); else packed into `buf` as before.
struct BlasOperand {
  const float* ptr;
  int ld;
  bool trans;
};
BlasOperand blas_operand(const MatRef<float>& x, int64_t rows, int64_t cols, std::vector<float>& buf) {
  const float* base = x.data + x.offset;
  const int64_t rs = x.row_stride, cs = x.col_stride;
  const bool trans = cs != 1 && rs == 1 && rows > 1 && cols > 1;
  const int64_t int_max = 0x7fffffff;
  if (trans) {
    if (cs >= rows && cs <= int_max) return {base, static_cast<int>(cs), true};
  } else if ((cols == 1 || cs == 1) && (rows == 1 || (rs >= cols && rs <= int_max))) {
    return {base, static_cast<int>(rows == 1 ? cols : rs), false};
  }
  buf.resize(static_cast<size_t>(rows * cols));
  const bool t = pack_for_blas(x, rows, cols, buf.data());
  return {buf.data(), static_cast<int>(t ? rows : cols), t};
}

// out = alpha * (a @ b) + beta * out, row-major (n, m), by sgemm (beta 0: out is not read).
void sgemm_in_place(const MatRef<float>& a, const MatRef<float>& b, int64_t n, int64_t k, int64_t m, float* out,
                    float alpha = 1.0f, float beta = 0.0f) {
  static thread_local std::vector<float> fa, fb;
  const BlasOperand oa = blas_operand(a, n, k, fa), ob = blas_operand(b, k, m, fb);
  cblas_sgemm(CblasRowMajor, oa.trans ? CblasTrans : CblasNoTrans, ob.trans ? CblasTrans : CblasNoTrans,
              static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, oa.ptr, oa.ld, ob.ptr, ob.ld, beta,
              out, static_cast<int>(m));
}
#endif
}  // namespace

#ifdef AGTRACE_HAVE_OPENBLAS
// OpenBLAS (pthreads) starts one worker per core when it is loaded, before main, and each
// worker spins (sched_yield) for about 2^28 cycles waiting for work before it sleeps: with
// one thread nothing ever comes, and a 50 ms run of the 10,000-op chain took 82 ms of CPU
// instead of 49 (measured, 2 cores). Shutting the server down ends the workers; OpenBLAS
// starts it again by itself if a later call asks for more threads (exec_blas checks
// blas_server_avail). With the shared library it is looked up at run time, so another BLAS
// behind the alternative without the function is fine; linked from OpenBLAS's archive it is
// called directly (an executable exports no symbol for dlsym to find: looked up, it was
// missing, and the workers of a one-thread run spun).
#ifdef AGTRACE_OPENBLAS_STATIC
extern "C" int blas_thread_shutdown_(void);
#endif
void stop_idle_blas_workers() {
  if (openblas_get_num_procs() <= 1) return;
#ifdef AGTRACE_OPENBLAS_STATIC
  blas_thread_shutdown_();
#else
  using Shutdown = int (*)();
  static const auto shutdown = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  if (shutdown) shutdown();
#endif
}
#endif

void set_threads(int n) {
  g_threads = std::max(1, n);
#ifdef AGTRACE_HAVE_OPENBLAS
  // OpenBLAS splits a product between its threads statically, so a given thread count
  // always gives the same result; another thread count may round some float32 products
  // differently in the last place, exactly as PyTorch's results do under
  // torch.set_num_threads (measured on this OpenBLAS: 300x200 @ 200x260 with 1 and 2
  // threads differ in ~4% of elements by 1 ulp-level amounts). Splitting the rows ourselves
  // does not help: OpenBLAS rounds a row differently depending on the product's size.
  openblas_set_num_threads(g_threads);
  if (g_threads == 1) stop_idle_blas_workers();
#endif
}

int threads() { return g_threads; }

int blas_threads() {
#ifdef AGTRACE_HAVE_OPENBLAS
  return openblas_get_num_threads();
#else
  return g_threads;
#endif
}

namespace {

// Worker threads for parallel_for, started on first use: one fewer than threads(), waiting
// on a condition variable between jobs. A job is cut into `parts` chunks; the caller runs
// chunk 0, then any chunk no worker has taken yet, and each worker takes the next untaken
// chunk.
//
// The workers may run on every CPU the process may use but the one the caller runs on
// (issue #6). Unpinned, a woken worker was placed on the caller's CPU whenever the other
// CPU looked busy, which it does after every float32 matrix product at 2 threads: OpenBLAS's
// own worker then polls for its next job with sched_yield for about 0.1 s. The two chunks
// then ran one after the other on one CPU: in about half of the processes, every parallel
// kernel of transformer_block at 2 threads took its 1-thread time (measured: the chunks of
// a job right after a product ran on the same CPU in 40 of 40 jobs in such a process, and
// in none once the worker was kept off the caller's CPU). On the other CPU a polling
// OpenBLAS worker yields to ours. The workers are moved only when the caller has moved.
class WorkerPool {
 public:
  WorkerPool() {
    if (sched_getaffinity(0, sizeof allowed_, &allowed_) != 0) CPU_ZERO(&allowed_);
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  void run(int parts, int64_t n, const std::function<void(int64_t, int64_t)>& f) {
    while (static_cast<int>(workers_.size()) < parts - 1) {
      workers_.emplace_back([this] { work(); });
      workers_cpu_ = -1;  // the new worker is not kept off the caller's CPU yet
    }
    keep_workers_off(sched_getcpu());
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &f;
      n_ = n;
      parts_ = parts;
      next_ = 1;
      pending_ = parts - 1;
      ++generation_;
    }
    wake_.notify_all();
    f(0, bound(1));
    std::unique_lock<std::mutex> lk(m_);
    take_chunks(lk);
    done_.wait(lk, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  int64_t bound(int part) const { return n_ * part / parts_; }  // chunk `part` is [bound(part), bound(part + 1))
  // The workers' CPUs: the allowed ones but `caller_cpu`, when at least one other is allowed.
  void keep_workers_off(int caller_cpu) {
    if (caller_cpu < 0 || caller_cpu == workers_cpu_ || caller_cpu >= CPU_SETSIZE || !CPU_ISSET(caller_cpu, &allowed_) ||
        CPU_COUNT(&allowed_) < 2)
      return;
    cpu_set_t others = allowed_;
    CPU_CLR(caller_cpu, &others);
    for (std::thread& t : workers_) pthread_setaffinity_np(t.native_handle(), sizeof others, &others);
    workers_cpu_ = caller_cpu;
  }
  // Runs untaken chunks of the current job until none is left (lk held on entry and exit).
  void take_chunks(std::unique_lock<std::mutex>& lk) {
    while (next_ < parts_) {
      const int part = next_++;
      const int64_t b = bound(part), e = bound(part + 1);
      const std::function<void(int64_t, int64_t)>* job = job_;
      lk.unlock();
      (*job)(b, e);
      lk.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }
  void work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      take_chunks(lk);
    }
  }
  cpu_set_t allowed_;      // the CPUs the process may run on
  int workers_cpu_ = -1;   // the caller's CPU the workers were last kept off (-1: none)
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};
}  // namespace

bool fast_paths() { return g_fast_paths; }
void set_fast_paths(bool on) { g_fast_paths = on; }

const float* contiguous_f32(const Tensor& t) {
  // A cuda tensor has no host elements: its ops take the device route (device_kernels.hpp).
  if (!g_fast_paths || !t || t->dtype() != DType::Float32 || t->is_meta() || t->storage->on_device() ||
      !t->is_contiguous())
    return nullptr;
  return t->storage->f32() + t->offset;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t by_size = grain > 0 ? (n + grain - 1) / grain : n;
  const int parts = static_cast<int>(std::min<int64_t>(g_threads, by_size));
  if (parts <= 1) {
    f(0, n);
    return;
  }
  static WorkerPool pool;
  pool.run(parts, n, f);
}

void keep_freed_buffers() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

namespace {

void gemm_block(DType dtype, const MatrixRef& a, const MatrixRef& b, int64_t n, int64_t k, int64_t m, double* out) {
  if (n == 0 || m == 0) return;
  if (k == 0) {
    std::fill(out, out + n * m, 0.0);
    return;
  }
#ifdef AGTRACE_HAVE_OPENBLAS
  if (dtype == DType::Float32) {
    // PyTorch 1.13's CPU mm calls sgemm: products and sums in float.
    // Float copies in buffers kept between calls (no page faults on every product).
    static thread_local std::vector<float> fa, fb, fc;
    fa.resize(static_cast<size_t>(n * k));
    fb.resize(static_cast<size_t>(k * m));
    fc.resize(static_cast<size_t>(n * m));
    const bool ta = pack_for_blas(a, n, k, fa.data());
    const bool tb = pack_for_blas(b, k, m, fb.data());
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(n),
                static_cast<int>(m), static_cast<int>(k), 1.0f, fa.data(), static_cast<int>(ta ? n : k), fb.data(),
                static_cast<int>(tb ? k : m), 0.0f, fc.data(), static_cast<int>(m));
    for (int64_t i = 0; i < n * m; ++i) out[i] = static_cast<double>(fc[static_cast<size_t>(i)]);
    return;
  }
  if (dtype == DType::Float64) {
    // dgemm reads the storage in place when each operand has a unit stride.
    auto ld_of = [](const MatrixRef& x, bool& trans) -> int64_t {
      if (x.col_stride == 1) { trans = false; return x.row_stride; }
      if (x.row_stride == 1) { trans = true; return x.col_stride; }
      return -1;
    };
    bool ta = false, tb = false;
    const int64_t lda = ld_of(a, ta), ldb = ld_of(b, tb);
    std::vector<double> pa, pb;
    const double* pa_ptr = a.data + a.offset;
    const double* pb_ptr = b.data + b.offset;
    int64_t la = lda, lb = ldb;
    if (lda < std::max<int64_t>(1, ta ? n : k) || n == 1 || k == 1) {
      pa.resize(static_cast<size_t>(n * k));
      pack(a, n, k, pa.data());
      pa_ptr = pa.data(); la = k; ta = false;
    }
    if (ldb < std::max<int64_t>(1, tb ? k : m) || k == 1 || m == 1) {
      pb.resize(static_cast<size_t>(k * m));
      pack(b, k, m, pb.data());
      pb_ptr = pb.data(); lb = m; tb = false;
    }
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(n),
                static_cast<int>(m), static_cast<int>(k), 1.0, pa_ptr, static_cast<int>(la), pb_ptr,
                static_cast<int>(lb), 0.0, out, static_cast<int>(m));
    return;
  }
#endif
  // Reduced-precision floats and integers (and builds without BLAS): accumulate in double
  // over row-major copies, i-p-j order so the inner loop streams both rows.
  std::vector<double> pa(static_cast<size_t>(n * k)), pb(static_cast<size_t>(k * m));
  pack(a, n, k, pa.data());
  pack(b, k, m, pb.data());
  std::fill(out, out + n * m, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* row = out + i * m;
    for (int64_t p = 0; p < k; ++p) {
      const double s = pa[static_cast<size_t>(i * k + p)];
      const double* brow = pb.data() + p * m;
      for (int64_t j = 0; j < m; ++j) row[j] += s * brow[j];
    }
  }
  if (dtype != DType::Float64)
    for (int64_t i = 0; i < n * m; ++i) out[i] = round_to_dtype(out[i], dtype);
}

void configure_blas() {
#ifdef AGTRACE_HAVE_OPENBLAS
  // OpenBLAS starts with one thread per core; agtrace's default is one thread in all.
  // openblas_set_num_threads starts the worker server again when it is down (OpenBLAS
  // re-creates it lazily after a fork), so with one thread it is shut down again: otherwise
  // a worker spun through 110 ms of a 420 ms resnet18 run (perf, one thread).
  static const bool configured = [] {
    openblas_set_num_threads(g_threads);
    if (g_threads == 1) stop_idle_blas_workers();
    return true;
  }();
  (void)configured;
#endif
}

}  // namespace

void gemm(DType dtype, const MatrixRef& a, const MatrixRef& b, int64_t n, int64_t k, int64_t m, double* out) {
  configure_blas();
  gemm_block(dtype, a, b, n, k, m, out);
}

void gemm_storage(DType dtype, const StorageMatrix& a, const StorageMatrix& b, int64_t n, int64_t k, int64_t m,
                  Storage& out, int64_t out_offset) {
  configure_blas();
  if (n == 0 || m == 0) return;
#ifdef AGTRACE_HAVE_OPENBLAS
  if (dtype == DType::Float32 && a.storage->holds_float() && b.storage->holds_float() && out.holds_float()) {
    float* o = out.f32() + out_offset;
    if (k == 0) {
      std::fill(o, o + n * m, 0.0f);
      return;
    }
    sgemm_in_place({a.storage->f32(), a.offset, a.row_stride, a.col_stride},
                   {b.storage->f32(), b.offset, b.row_stride, b.col_stride}, n, k, m, o);
    return;
  }
#endif
  // Every other combination through the double interface (a float storage copied first).
  std::vector<double> ca, cb;
  const MatrixRef ra{storage_as_double(*a.storage, ca), a.offset, a.row_stride, a.col_stride};
  const MatrixRef rb{storage_as_double(*b.storage, cb), b.offset, b.row_stride, b.col_stride};
  if (!out.holds_float()) {
    gemm_block(dtype, ra, rb, n, k, m, out.f64() + out_offset);
    return;
  }
  std::vector<double> tmp(static_cast<size_t>(n * m));
  gemm_block(dtype, ra, rb, n, k, m, tmp.data());
  float* o = out.f32() + out_offset;
  for (size_t i = 0; i < tmp.size(); ++i) o[i] = static_cast<float>(tmp[i]);
}

void gemm_storage_batched(DType dtype, const StorageMatrix& a, int64_t a_step, const StorageMatrix& b, int64_t b_step,
                          int64_t batches, int64_t n, int64_t k, int64_t m, Storage& out, int64_t out_offset) {
  auto products = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      gemm_storage(dtype, {a.storage, a.offset + i * a_step, a.row_stride, a.col_stride},
                   {b.storage, b.offset + i * b_step, b.row_stride, b.col_stride}, n, k, m, out, out_offset + i * n * m);
  };
  if (g_threads < 2 || batches < g_threads) {
    products(0, batches);
    return;
  }
  // A transformer's attention is 16 products of 128x64 by 64x128 (about 2 MFLOP each):
  // split inside OpenBLAS over 2 threads, each one waited for its threads, and the batch
  // took longer at 2 threads than at 1 (BmmBackward0: 1.21 ms at 1 thread, 1.62 ms at 2,
  // warm runs of bench/scenarios/transformer_block.json; issue #6). Each product is
  // computed on one thread (the results of a 1-thread run), the batch split between them.
  configure_blas();
#ifdef AGTRACE_HAVE_OPENBLAS
  openblas_set_num_threads(1);
  struct RestoreBlasThreads {
    ~RestoreBlasThreads() { openblas_set_num_threads(g_threads); }
  } restore;
#endif
  parallel_for(batches, 1, products);
}

double round_f32(double v) { return static_cast<double>(static_cast<float>(v)); }
double round_bf16(double v) { return round_to_dtype(round_f32(v), DType::BFloat16); }

namespace {

// Whether addmm_impl_cpu_ hands an operand with strides (rs, cs) to cpublas::gemm as
// transposed, in its order of checks (a unit row stride first when `col_first`), with the
// leading-dimension bounds ld_rows / ld_cols; `if_cloned` when neither layout fits (it is
// copied contiguous then).
bool blas_transposed(int64_t rs, int64_t cs, int64_t ld_rows, int64_t ld_cols, bool col_first, bool if_cloned) {
  if (col_first) {
    if (rs == 1 && cs >= std::max<int64_t>(1, ld_rows)) return false;
    if (cs == 1 && rs >= std::max<int64_t>(1, ld_cols)) return true;
  } else {
    if (cs == 1 && rs >= std::max<int64_t>(1, ld_cols)) return false;
    if (rs == 1 && cs >= std::max<int64_t>(1, ld_rows)) return true;
  }
  return if_cloned;
}

// One bfloat16 matrix product a (n, k) @ b (k, m), elements read through offsets and strides
// of double arrays, out row-major: beta * c + alpha * (a @ b) as one of 1.13's CPU kernels
// rounds it.
struct Bf16Operand {
  const double* data;
  int64_t offset, row_stride, col_stride;
  double at(int64_t i, int64_t j) const { return data[offset + i * row_stride + j * col_stride]; }
};
enum class Bf16Kernel {
  OneDnn,   // the exact value, rounded once
  Cpublas,  // cpublas::gemm: by layout, a float dot rounded once (gemm_transa_) or rounding after every add
  Naive,    // bmm's small-product loop: rounding after every add whatever the layout
};

// One element of cpublas::gemm's bfloat16 loops: sum over l < k of first(l) * second(l), where
// `second` is the operand gemm scales by alpha (its op(b)), started from c scaled by beta.
// gemm_transa_ (float_dot) takes a float dot product and rounds once; gemm_notrans_,
// gemm_transb_ and gemm_transab_ round every product to bfloat16 and add it to the bfloat16
// element, rounding after every add, in order of l.
template <typename First, typename Second>
double cpublas_bf16_element(bool float_dot, First first, Second second, int64_t k, double alpha, double beta,
                            double c) {
  const double alpha_f = round_f32(alpha), beta_f = round_f32(beta);
  if (float_dot) {
    double s = 0.0;
    for (int64_t l = 0; l < k; ++l) s = round_f32(s + first(l) * second(l));  // bfloat16 products are exact in float
    const double v = beta == 0.0 ? round_f32(alpha_f * s) : round_f32(round_f32(beta_f * c) + round_f32(alpha_f * s));
    return round_bf16(v);
  }
  double v = beta == 0.0 ? 0.0 : beta == 1.0 ? c : round_bf16(c * beta_f);
  for (int64_t l = 0; l < k; ++l) v = round_bf16(round_f32(v + round_bf16(first(l) * round_f32(second(l) * alpha_f))));
  return round_bf16(v);
}

void bf16_product(Bf16Kernel kernel, const Bf16Operand& a, const Bf16Operand& b, int64_t n, int64_t k, int64_t m,
                  const double* c, double beta, double alpha, double* out) {
  auto C = [&](int64_t i, int64_t j) { return beta == 0.0 ? 0.0 : c[i * m + j]; };
  if (kernel == Bf16Kernel::OneDnn) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0.0;
        for (int64_t l = 0; l < k; ++l) s += a.at(i, l) * b.at(l, j);
        out[i * m + j] = round_bf16(alpha * s + beta * C(i, j));
      }
    return;
  }
  // A contiguous (n, m) result is column-major exactly when it has one column.
  const bool swap = m != 1;
  bool float_dot = false;
  if (kernel == Bf16Kernel::Cpublas) {
    bool ta, tb;
    if (swap) {  // gemm's a := mat2 (k, m), b := mat1 (n, k)
      ta = blas_transposed(b.row_stride, b.col_stride, k, m, false, false);
      tb = blas_transposed(a.row_stride, a.col_stride, n, k, false, false);
    } else {  // a := mat1, b := mat2, as given
      ta = blas_transposed(a.row_stride, a.col_stride, n, k, true, true);
      tb = blas_transposed(b.row_stride, b.col_stride, k, m, true, true);
    }
    float_dot = ta && !tb;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      // The kernels scale their second operand by alpha (mat1 when swapped).
      auto mat1 = [&](int64_t l) { return a.at(i, l); };
      auto mat2 = [&](int64_t l) { return b.at(l, j); };
      out[i * m + j] = swap ? cpublas_bf16_element(float_dot, mat2, mat1, k, alpha, beta, C(i, j))
                            : cpublas_bf16_element(float_dot, mat1, mat2, k, alpha, beta, C(i, j));
    }
}

Bf16CpuKernels host_bf16_cpu_kernels() {
  if (const char* forced = std::getenv("AGTRACE_BF16_KERNELS")) {
    if (std::string(forced) == "onednn") return Bf16CpuKernels::OneDnn;
    if (std::string(forced) == "cpublas") return Bf16CpuKernels::Cpublas;
  }
  __builtin_cpu_init();
  const bool avx512_bf16_device = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                                  __builtin_cpu_supports("avx512dq");
  return avx512_bf16_device ? Bf16CpuKernels::OneDnn : Bf16CpuKernels::Cpublas;
}

Bf16CpuKernels& bf16_cpu_kernels_setting() {
  static Bf16CpuKernels setting = host_bf16_cpu_kernels();
  return setting;
}
}  // namespace

// PyTorch 1.13, addmm_impl_cpu_ on bfloat16:
//  * n·k·m > 4096 (mkldnn_bf16 matmul's checksize) on a CPU with AVX-512 (bf16_cpu_kernels):
//    oneDNN's gemm, the exact value rounded once;
//  * otherwise cpublas::gemm. The row-major result is computed as its column-major transpose
//    (mat2 first) unless it has one column; gemm_transa_ (the first operand transposed, the
//    second not) takes each element as a float dot product over k, plus beta * c, rounded
//    once; the other kernels (gemm_notrans_, gemm_transb_, gemm_transab_) add every product,
//    rounded to bfloat16, to the bfloat16 element in order of k, from beta * c.
// Measured against torch.mm and torch.addmm: 480 of 480 products of 8 shapes (one-column
// results included) in every layout of both operands, bit for bit.
std::vector<double> bf16_addmm(const Tensor& a, const Tensor& b, const std::vector<double>& c, double beta,
                               double alpha) {
  const int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
  std::vector<double> ca, cb;
  const Bf16Operand A{storage_as_double(*a->storage, ca), a->offset, a->strides[0], a->strides[1]};
  const Bf16Operand B{storage_as_double(*b->storage, cb), b->offset, b->strides[0], b->strides[1]};
  std::vector<double> out(static_cast<size_t>(n * m));
  const bool onednn = bf16_cpu_kernels() == Bf16CpuKernels::OneDnn && n * k * m > 4096;
  bf16_product(onednn ? Bf16Kernel::OneDnn : Bf16Kernel::Cpublas, A, B, n, k, m, c.data(), beta, alpha, out.data());
  return out;
}

// PyTorch 1.13's bmm on bfloat16 (bmm_out_or_baddbmm_): B·n·k·m > 4096 takes oneDNN (rounded
// once) on a CPU with AVX-512; otherwise products with k·n·m < 400 run its naive loop (rounding after every add in
// every layout), the others cpublas::gemm batch by batch (as bf16_addmm). Measured: 36 of 36
// batched products of 9 shapes in every layout, bit for bit.
std::vector<double> bf16_bmm(const Tensor& a, const Tensor& b) {
  const int64_t batches = a->sizes[0], n = a->sizes[1], k = a->sizes[2], m = b->sizes[2];
  std::vector<double> ca, cb;
  const double* av = storage_as_double(*a->storage, ca);
  const double* bv = storage_as_double(*b->storage, cb);
  const bool onednn = bf16_cpu_kernels() == Bf16CpuKernels::OneDnn && batches * n * k * m > 4096;
  const Bf16Kernel kernel = onednn                     ? Bf16Kernel::OneDnn
                            : k * n * m < 400          ? Bf16Kernel::Naive
                                                       : Bf16Kernel::Cpublas;
  std::vector<double> out(static_cast<size_t>(batches * n * m));
  for (int64_t i = 0; i < batches; ++i) {
    const Bf16Operand A{av, a->offset + i * a->strides[0], a->strides[1], a->strides[2]};
    const Bf16Operand B{bv, b->offset + i * b->strides[0], b->strides[1], b->strides[2]};
    bf16_product(kernel, A, B, n, k, m, nullptr, 0.0, 1.0, out.data() + i * n * m);
  }
  return out;
}

Bf16CpuKernels bf16_cpu_kernels() { return bf16_cpu_kernels_setting(); }
void set_bf16_cpu_kernels(Bf16CpuKernels k) { bf16_cpu_kernels_setting() = k; }

void bf16_cpublas_gemm(bool transa, bool transb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                       int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  const bool float_dot = transa && !transb;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      auto op_a = [&](int64_t l) { return transa ? a[l + i * lda] : a[i + l * lda]; };
      auto op_b = [&](int64_t l) { return transb ? b[j + l * ldb] : b[l + j * ldb]; };
      double& element = c[i + j * ldc];
      element = cpublas_bf16_element(float_dot, op_a, op_b, k, alpha, beta, beta == 0.0 ? 0.0 : element);
    }
}

Tensor mm(const Tensor& a, const Tensor& b) {
  const int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
  DType od = promote(a->dtype(), b->dtype());
  if (device::any_on_device({&a, &b})) return device::mm(a, b, od);
  Tensor r = uninitialized_tensor({n, m}, od, a->is_meta() || b->is_meta());  // gemm writes all
  if (r->is_meta()) return r;
  if (a->dtype() == DType::BFloat16 && b->dtype() == DType::BFloat16) {
    write_values(r, bf16_addmm(a, b, {}, 0.0, 1.0));
    return r;
  }
  gemm_storage(od, {a->storage.get(), a->offset, a->strides[0], a->strides[1]},
               {b->storage.get(), b->offset, b->strides[0], b->strides[1]}, n, k, m, *r->storage, 0);
  return r;
}

Tensor addmm_f32(const Tensor& bias, const Tensor& a, const Tensor& b, double alpha, double beta) {
#ifdef AGTRACE_HAVE_OPENBLAS
  auto on_host_f32 = [](const Tensor& t) {
    return t->dtype() == DType::Float32 && !t->is_meta() && !t->storage->on_device() && t->storage->holds_float();
  };
  const int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
  if (!g_fast_paths || !on_host_f32(bias) || !on_host_f32(a) || !on_host_f32(b) || k == 0 || n == 0 || m == 0)
    return Tensor();
  configure_blas();
  Tensor r = uninitialized_tensor({n, m}, DType::Float32, false);
  float* o = r->storage->f32();
  if (beta != 0.0) {
    // result.copy_(self): the bias expanded to (n, m), usually a row repeated (stride 0).
    const float* src = bias->storage->f32() + bias->offset;
    const int64_t s0 = bias->strides[0], s1 = bias->strides[1];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) o[i * m + j] = src[i * s0 + j * s1];
  }
  sgemm_in_place({a->storage->f32(), a->offset, a->strides[0], a->strides[1]},
                 {b->storage->f32(), b->offset, b->strides[0], b->strides[1]}, n, k, m, o, static_cast<float>(alpha),
                 static_cast<float>(beta));
  return r;
#else
  (void)bias, (void)a, (void)b, (void)alpha, (void)beta;
  return Tensor();
#endif
}

Tensor transposed(const Tensor& a) {
  return make_alias(a, {a->sizes[1], a->sizes[0]}, {a->strides[1], a->strides[0]}, a->offset);
}

Tensor view_backward(const Tensor& g, const Shape& base_sizes, const Shape& view_sizes,
                     const Shape& view_strides, int64_t view_offset, const Shape* base_strides) {
  Tensor r;
  {
    DeviceScope on_grads_device(g->is_meta() ? std::string("cpu") : g->storage->device.str());
    r = full(base_sizes, 0.0, g->dtype(), g->is_meta());
  }
  // A dense base laid out in other strides: the zeros take them (as_strided_backward returns
  // storage.as_strided(input geometry)), so the view's strides address the same elements.
  if (base_strides && *base_strides != r->strides.vec()) r = make_alias(r, base_sizes, *base_strides, 0);
  if (r->is_meta()) return r;
  Tensor window = make_alias(r, view_sizes, view_strides, view_offset);
  if (device::on_device(r)) {
    device::copy_into(window, g);
    return r;
  }
  copy_values(window, g);
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
