// Neural-network layers: layer_norm, batch_norm, dropout, embedding, conv2d, max_pool2d.
//
// For each op: the forward, the node PyTorch 1.13 records, what it saves, and the
// backward formula, side by side. Facts cited as "measured" were checked with
// /usr/bin/python3 and torch 1.13 (see also shared/oracle/SUMMARY.md sections 1-3).
//
// Two rules hold for every node here (measured):
//  - The op-internal outputs a node saves (layer_norm's mean/rstd, batch_norm's batch
//    statistics, max_pool2d's indices) are not differentiable, so they are leaves when
//    saved; PyTorch's SavedVariable then keeps the tensor object itself
//    (saved_variable.cpp: `if (!is_output || is_leaf_) saved_original_ = true`), and
//    `_saved_result1 is _saved_result1` is True with requires_grad False. They are
//    therefore saved with save_input, not save_output.
//  - The generated apply() unpacks every saved tensor before computing, needed or not,
//    so an in-place edit of any saved tensor fails backward (measured: editing a conv
//    weight that does not require grad, or the indices of an embedding, raises the
//    version error). Each backward below unpacks all its saved tensors first.
//
// Values are computed in double and rounded to the tensor's dtype when stored, like the
// rest of agtrace; on the meta device only shapes, nodes and saved values are produced.
#include "ops/nn.hpp"
#include "ops/max_pool_window.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/batch_norm_cpu.hpp"
#include "ops/common.hpp"
#include "ops/layer_norm_cpu.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/fast_paths.hpp"
#include "tensor/kernels_conv.hpp"

namespace agtrace::ops {

using namespace detail;
using autograd::make_node;
using autograd::set_history;

namespace {

// ---------------------------------------------------------------- helpers

[[noreturn]] void fail(const std::string& kind, const std::string& message,
                       nlohmann::json facts = nlohmann::json::object()) {
  ScenarioError e(kind, message);
  e.facts = std::move(facts);
  throw e;
}

// c10::ScalarType names, as PyTorch's dispatch and type-check messages print them.
std::string scalar_name(DType d) {
  switch (d) {
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Int64: return "Long";
    case DType::Bool: return "Bool";
  }
  return "?";
}

// PyTorch runs these layers in float32 / float64 kernels (and int64 for conv2d). Other
// dtypes fail at dispatch with `"kernel" not implemented for 'Half'` (measured for
// Half and Long). BFloat16 kernels exist in PyTorch; where agtrace mirrors one on the CPU
// (bfloat16_on_cpu) the layer runs, elsewhere it is unsupported, not approximated.
void require_kernel_dtype(const Tensor& t, const std::string& kernel, const std::string& op,
                          bool allow_int64 = false, bool bfloat16_on_cpu = false) {
  const DType d = t->dtype();
  if (d == DType::Float32 || d == DType::Float64 || (allow_int64 && d == DType::Int64)) return;
  // Meta kernels have no dtype dispatch: float16 / bfloat16 layers run there (measured in
  // 1.13; needed to account a float16 model on meta).
  if (t->is_meta() && (d == DType::Float16 || d == DType::BFloat16)) return;
  if (bfloat16_on_cpu && d == DType::BFloat16) {
    if (!kernels::device::on_device(t)) return;
    fail("unsupported", op + " of bfloat16 tensors has no cuda kernel");
  }
  if (d == DType::BFloat16) fail("unsupported", op + " of bfloat16 tensors is not supported");
  fail("dtype_mismatch", "\"" + kernel + "\" not implemented for '" + scalar_name(d) + "'",
       {{"op", op}, {"dtype", dtype_name(d)}});
}

// "expected scalar type Float but found Double": a kernel reading a parameter's data as
// the input's type.
void require_same_dtype(const Tensor& input, const Tensor& param, const std::string& op) {
  if (!param || param->dtype() == input->dtype()) return;
  fail("dtype_mismatch",
       "expected scalar type " + scalar_name(input->dtype()) + " but found " + scalar_name(param->dtype()),
       {{"op", op}, {"dtypes", {dtype_name(input->dtype()), dtype_name(param->dtype())}}});
}

// Writes values computed in double into a fresh contiguous tensor, rounding to its dtype.
void store(const Tensor& t, const std::vector<double>& values) {
  if (t->is_meta()) return;
  Storage& s = *t->storage;
  for (size_t i = 0; i < values.size(); ++i) s.set(static_cast<int64_t>(i), values[i]);
}

Tensor fresh(const Shape& sizes, DType d, bool meta) { return empty_tensor(sizes, d, meta); }
// For a result every element of which the op writes (layer_norm's): no zero-fill first.
Tensor written(const Shape& sizes, DType d, bool meta) { return uninitialized_tensor(sizes, d, meta); }

// An in-place edit inside an op (bernoulli_, div_ and zero_ on dropout's own mask):
// PyTorch bumps the tensor's version as for any in-place op, so the saved mask reads
// back at version 2 (measured).
void bump_internal(const Tensor& t) {
  t->version->bump();
  Event e;
  e.kind = Event::Kind::VersionBump;
  e.storage_id = t->storage->id;
  e.version = t->version->version;
  emit(e);
}

bool wants(const Node& n, size_t edge) { return edge < n.next.size() && n.next[edge].fn != nullptr; }

Tensor grad_like(const Node& n, size_t edge, bool meta) {
  const auto& m = n.input_meta[edge];
  return fresh(m.sizes, m.dtype, meta);
}

// The incoming gradient of a double-backward node's output i (null when absent).
Tensor incoming(const std::vector<Tensor>& g, size_t i) { return i < g.size() ? g[i] : nullptr; }

// ---------------------------------------------------------------- layer_norm
//
// derivatives.yaml (1.13):
//   native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (result0, result1, result2)
//   input, weight, bias: native_layer_norm_backward(grad, input, normalized_shape, result1,
//                                                  result2, weight, bias, grad_input_mask)
// result1 = mean and result2 = rstd = 1/sqrt(biased var + eps), both of shape
// input.shape[:axis] + [1] * len(normalized_shape) (measured: f32[2, 1] for a [2, 3]
// input). The saved set does not depend on requires_grad (SUMMARY section 3); weight and
// bias read as None when not given. eps is not saved.

struct RowSplit {
  int64_t rows = 1, cols = 1;
};

RowSplit split_rows(const Shape& sizes, size_t normalized_ndim) {
  RowSplit s;
  const size_t axis = sizes.size() - normalized_ndim;
  for (size_t i = 0; i < sizes.size(); ++i) (i < axis ? s.rows : s.cols) *= sizes[i];
  return s;
}

// A tensor's elements as a contiguous array of T (float for float32, double for float64):
// the storage itself when the tensor is contiguous, else a row-major copy (converted where
// the tensor's dtype is another; the kernels read their inputs through expect_contiguous).
template <typename T>
struct ContiguousElements {
  std::vector<T> copy;
  const T* ptr = nullptr;
  explicit ContiguousElements(const Tensor& t) {
    if (!t) return;
    constexpr DType kDtype = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
    if (t->dtype() == kDtype && t->is_contiguous()) {
      ptr = elements_of<T>(t);
      return;
    }
    const std::vector<double> v = to_values(t);
    copy.assign(v.begin(), v.end());
    ptr = copy.data();
  }
};

// layer_norm's CPU kernel for float32 and float64: 1.13's arithmetic in the tensor's dtype
// (ops/layer_norm_cpu.hpp). Rows are split between threads for the per-row results; the
// weight and bias gradients are summed per range of rows as PyTorch's threads sum them.
template <typename T>
void layer_norm_forward_cpu(const RowSplit& s, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const ContiguousElements<T> xe(x), we(weight), be(bias);
  const T *xp = xe.ptr, *wp = we.ptr, *bp = be.ptr;
  T* op = elements_of<T>(out);
  T* mp = elements_of<T>(mean);
  T* rp = elements_of<T>(rstd);
  const int64_t cols = s.cols;
  kernels::parallel_for(s.rows, std::max<int64_t>(1, kernels::kGrain / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    layer_norm_cpu::forward_rows(xp + r0 * cols, wp, bp, r1 - r0, cols, static_cast<T>(eps), op + r0 * cols, mp + r0,
                                 rp + r0);
  });
}

template <typename T>
void layer_norm_backward_cpu(const RowSplit& s, const Tensor& x, const Tensor& g, const Tensor& mean,
                             const Tensor& rstd, const Tensor& w, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const ContiguousElements<T> xe(x), ge(g), me(mean), re(rstd), we(w);
  const T *xp = xe.ptr, *gp = ge.ptr, *mp = me.ptr, *rp = re.ptr, *wp = we.ptr;
  T* dx = gx ? elements_of<T>(gx) : nullptr;
  const int64_t cols = s.cols;
  const auto ranges = layer_norm_cpu::thread_row_ranges(s.rows, kernels::threads());
  const size_t parts = ranges.size(), width = static_cast<size_t>(cols);
  // One running sum per range for each wanted parameter gradient (the kernel's buffer).
  std::vector<T> dgamma_sums(gw ? parts * width : 0, T(0)), dbeta_sums(gb ? parts * width : 0, T(0));
  kernels::parallel_for(static_cast<int64_t>(parts), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const auto [r0, r1] = ranges[static_cast<size_t>(t)];
      layer_norm_cpu::backward_rows(gp + r0 * cols, xp + r0 * cols, wp, mp + r0, rp + r0, r1 - r0, cols,
                                    dx ? dx + r0 * cols : nullptr, gw ? dgamma_sums.data() + t * cols : nullptr,
                                    gb ? dbeta_sums.data() + t * cols : nullptr);
    }
  });
  // The second pass: each column's sums added onto 0 in range order.
  auto add_up = [&](const std::vector<T>& sums, const Tensor& grad) {
    T* o = elements_of<T>(grad);
    for (size_t j = 0; j < width; ++j) {
      T v = 0;
      for (size_t t = 0; t < parts; ++t) v = v + sums[t * width + j];
      o[j] = v;
    }
  };
  if (gw) add_up(dgamma_sums, gw);
  if (gb) add_up(dbeta_sums, gb);
}

// ---- layer_norm in bfloat16 on the CPU
//
// 1.13's LayerNormKernelImplInternal<BFloat16> keeps mean_val and rstd_val as BFloat16 and
// takes them from RowwiseMoments<BFloat16> (moments_utils.h), whose Welford updates run on
// Vectorized<BFloat16>: every add, subtract, multiply and divide is done in float and rounded
// to bfloat16. rstd = 1 / sqrt(var + eps) rounds after the add, the sqrt and the divide;
// bias = -rstd * mean is a bfloat16 product; the output is (x * rstd + bias) * gamma + beta
// in float, rounded once. Reproduced operation by operation (on 504 random rows of 3 to 513
// elements, with and without weight and bias, and on rows of 1100, every mean, rstd and
// output equals 1.13's).
namespace {

using kernels::round_bf16;
using kernels::round_f32;

// AddMoments / AddMomentsVec in BFloat16: merge (m0_add, m1_add, m2_add) into (m0, m1, m2).
void add_moments_bf16(int64_t m0_add, double m1_add, double m2_add, int64_t m0, double& m1, double& m2) {
  const int64_t n = m0 + m0_add;
  const double c = n == 0 ? 0.0 : round_bf16(round_bf16(static_cast<double>(m0_add)) / round_bf16(static_cast<double>(n)));
  const double delta = round_bf16(m1_add - m1);
  m1 = round_bf16(m1 + round_bf16(c * delta));
  const double term = round_bf16(round_bf16(round_bf16(delta * delta) * c) * round_bf16(static_cast<double>(m0)));
  m2 = round_bf16(m2 + round_bf16(m2_add + term));
}

// RowwiseMomentsImpl<BFloat16>: 16 lanes (Vectorized<BFloat16>::size() with AVX2), chunks of
// 16 vectors, a cascade of partial moments, the scalar tail, then the lanes merged in order.
std::pair<double, double> rowwise_moments_bf16(const double* x, int64_t N) {
  constexpr int64_t kLanes = 16, kChunk = 16;
  const int64_t n = N / kLanes;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int64_t depth = 0;
  while ((int64_t{1} << depth) < chunks) ++depth;  // utils::CeilLog2
  const size_t levels = static_cast<size_t>(std::max<int64_t>(depth, 1));
  std::vector<int64_t> m0_stk(levels, 0);
  std::vector<std::array<double, kLanes>> m1_stk(levels), m2_stk(levels);  // value-initialised: zeros
  auto add_vec = [&](int64_t m0_add, const std::array<double, kLanes>& m1_add, const std::array<double, kLanes>& m2_add,
                     size_t level) {
    for (int64_t lane = 0; lane < kLanes; ++lane)
      add_moments_bf16(m0_add, m1_add[lane], m2_add[lane], m0_stk[level], m1_stk[level][lane], m2_stk[level][lane]);
    m0_stk[level] += m0_add;
  };
  for (int64_t i = 0; i < chunks; ++i) {
    const double* chunk = x + i * kChunk * kLanes;
    const int64_t m0 = std::min(kChunk, n - i * kChunk);
    std::array<double, kLanes> m1v{}, m2v{};
    for (int64_t j = 0; j < m0; ++j) {
      const double c = round_bf16(1.0 / static_cast<double>(j + 1));
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        const double v = chunk[j * kLanes + lane];
        const double delta = round_bf16(v - m1v[lane]);
        m1v[lane] = round_bf16(m1v[lane] + round_bf16(delta * c));
        m2v[lane] = round_bf16(m2v[lane] + round_bf16(delta * round_bf16(v - m1v[lane])));
      }
    }
    add_vec(m0, m1v, m2v, 0);
    int64_t mask = i + 1;
    for (int64_t j = 1; j < depth && (mask & 1) == 0; ++j) {
      const size_t lo = static_cast<size_t>(j - 1);
      add_vec(m0_stk[lo], m1_stk[lo], m2_stk[lo], static_cast<size_t>(j));
      m0_stk[lo] = 0;
      m1_stk[lo].fill(0.0);
      m2_stk[lo].fill(0.0);
      mask >>= 1;
    }
  }
  for (int64_t i = 1; i < depth; ++i) {
    const size_t l = static_cast<size_t>(i);
    add_vec(m0_stk[l], m1_stk[l], m2_stk[l], 0);
  }
  int64_t m0 = 0;
  double m1 = 0.0, m2 = 0.0;
  for (int64_t i = n * kLanes; i < N; ++i) {
    const double delta = round_bf16(x[i] - m1);
    ++m0;
    m1 = round_bf16(m1 + round_bf16(delta / static_cast<double>(m0)));
    m2 = round_bf16(m2 + round_bf16(delta * round_bf16(x[i] - m1)));
  }
  for (int64_t lane = 0; lane < kLanes; ++lane) {
    add_moments_bf16(n, m1_stk[0][lane], m2_stk[0][lane], m0, m1, m2);
    m0 += n;
  }
  // N - ddof as a BFloat16 (static_cast<T>): 1100 becomes 1104.
  return {m1, round_bf16(m2 / round_bf16(static_cast<double>(N)))};
}

void layer_norm_forward_bf16(const RowSplit& s, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const std::vector<double> xv = to_values(x);
  const std::vector<double> wv = weight ? to_values(weight) : std::vector<double>{};
  const std::vector<double> bv = bias ? to_values(bias) : std::vector<double>{};
  std::vector<double> ov(xv.size()), mv(static_cast<size_t>(s.rows)), rv(static_cast<size_t>(s.rows));
  const double eps_bf16 = round_bf16(eps);
  for (int64_t r = 0; r < s.rows; ++r) {
    const double* xr = xv.data() + r * s.cols;
    const auto [m, var] = rowwise_moments_bf16(xr, s.cols);
    const double root = round_bf16(std::sqrt(round_bf16(var + eps_bf16)));
    const double k = round_bf16(1.0 / root);
    const double shift = round_bf16(-k * m);
    mv[static_cast<size_t>(r)] = m;
    rv[static_cast<size_t>(r)] = k;
    for (int64_t c = 0; c < s.cols; ++c) {
      double t = round_f32(round_f32(xr[c] * k) + shift);
      t = round_f32(t * (weight ? wv[static_cast<size_t>(c)] : 1.0));
      ov[static_cast<size_t>(r * s.cols + c)] = round_f32(t + (bias ? bv[static_cast<size_t>(c)] : 0.0));
    }
  }
  store(out, ov);  // rounds each float result to bfloat16 once
  store(mean, mv);
  store(rstd, rv);
}


// LayerNormBackwardKernelImplInternal<BFloat16> (1.13): T_ACC is float, the row sums come from
// functional_bfloat16.h's reduce_all / map2_reduce_all / map3_reduce_all, which return the
// sum as a BFloat16, and the scalar and vector expressions a*b + c are fused multiply-adds
// (the AVX2 kernels are built with FMA contraction). Emulated in float with explicit fmaf.
// Measured against 1.13 on 150 random inputs (rows of 1 to 513 elements, with weight and
// bias, weight only, neither): 0 of 23,047 input-gradient values and no weight or bias
// gradient differ; without the BFloat16 sums 16 of 48 values already differ on a 6x8 input,
// without the fused forms 2 of 9,159.
float to_bf16(float v) { return static_cast<float>(round_bf16(v)); }

// The reduction of functional_bfloat16.h on AVX2: 16 values per Vectorized<BFloat16>, two
// float accumulators of 8 lanes, the tail merged lane by lane, then the 8 lanes reduced by
// vec_reduce_all's shuffles ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); a row shorter than 16 adds
// its two halves lane by lane and sums the lanes in order.
float bf16_functional_sum(const std::vector<float>& v) {
  const size_t n = v.size();
  std::array<float, 8> acc0{}, acc1{};
  auto in_order = [](const std::array<float, 8>& lanes, size_t count) {
    float s = lanes[0];
    for (size_t i = 1; i < count; ++i) s = s + lanes[i];
    return s;
  };
  if (n < 16) {
    for (size_t l = 0; l < std::min<size_t>(n, 8); ++l) acc0[l] = v[l];
    if (n <= 8) return in_order(acc0, n);
    for (size_t l = 0; l + 8 < n; ++l) acc0[l] = acc0[l] + v[8 + l];
    return in_order(acc0, 8);
  }
  for (size_t l = 0; l < 8; ++l) acc0[l] = v[l], acc1[l] = v[8 + l];
  size_t d = 16;
  for (; d < n - n % 16; d += 16)
    for (size_t l = 0; l < 8; ++l) acc0[l] = acc0[l] + v[d + l], acc1[l] = acc1[l] + v[d + 8 + l];
  const size_t tail = n - d;
  if (tail > 8) {
    for (size_t l = 0; l < 8; ++l) acc0[l] = acc0[l] + v[d + l];
    for (size_t l = 0; l + 8 < tail; ++l) acc1[l] = acc1[l] + v[d + 8 + l];
  } else {
    for (size_t l = 0; l < tail; ++l) acc0[l] = acc0[l] + v[d + l];
  }
  for (size_t l = 0; l < 8; ++l) acc0[l] = acc0[l] + acc1[l];
  const float a = acc0[0] + acc0[4], b = acc0[2] + acc0[6], c = acc0[1] + acc0[5], e = acc0[3] + acc0[7];
  return (a + b) + (c + e);
}

void layer_norm_backward_bf16(const RowSplit& s, const Tensor& x, const Tensor& g, const Tensor& mean,
                              const Tensor& rstd, const Tensor& weight, const Tensor& gx, const Tensor& gw,
                              const Tensor& gb) {
  const std::vector<double> xv = to_values(x), gv = to_values(g), mv = to_values(mean), rv = to_values(rstd);
  const std::vector<double> wv = weight ? to_values(weight) : std::vector<double>{};
  const size_t cols = static_cast<size_t>(s.cols);
  const float scale = 1.0f / static_cast<float>(s.cols);
  std::vector<double> dx(gx ? xv.size() : 0);
  std::vector<float> dgamma(cols, 0.0f), dbeta(cols, 0.0f), mapped(cols), dys(cols);
  for (int64_t r = 0; r < s.rows; ++r) {
    const size_t base = static_cast<size_t>(r) * cols;
    const float a = static_cast<float>(rv[static_cast<size_t>(r)]), m = static_cast<float>(mv[static_cast<size_t>(r)]);
    auto dy = [&](size_t c) { return static_cast<float>(gv[base + c]); };
    auto xe = [&](size_t c) { return static_cast<float>(xv[base + c]); };
    auto gamma = [&](size_t c) { return weight ? static_cast<float>(wv[c]) : 1.0f; };
    if (gw) {
      const float shift = -a * m;
      for (size_t c = 0; c < cols; ++c) dgamma[c] = to_bf16(std::fma(dy(c), std::fma(a, xe(c), shift), dgamma[c]));
    }
    if (gb)
      for (size_t c = 0; c < cols; ++c) dbeta[c] = to_bf16(dbeta[c] + dy(c));
    if (!gx) continue;
    for (size_t c = 0; c < cols; ++c) {
      mapped[c] = weight ? (dy(c) * xe(c)) * gamma(c) : dy(c) * xe(c);
      dys[c] = weight ? dy(c) * gamma(c) : dy(c);
    }
    const float ds = to_bf16(bf16_functional_sum(mapped)), db = to_bf16(bf16_functional_sum(dys));
    const float b = ((std::fma(db, m, -ds) * a) * a) * a * scale;
    const float c0 = std::fma(-b, m, -((db * a) * scale));
    for (size_t c = 0; c < cols; ++c)
      dx[base + c] = to_bf16(std::fma(b, xe(c), (a * dy(c)) * gamma(c)) + c0);
  }
  if (gx) store(gx, dx);
  if (gw) store(gw, std::vector<double>(dgamma.begin(), dgamma.end()));
  if (gb) store(gb, std::vector<double>(dbeta.begin(), dbeta.end()));
}
}  // namespace

// native_layer_norm_backward, with xhat = (x - mean) * rstd and gw = grad * weight:
//   d_input  = rstd * (gw - mean_row(gw) - xhat * mean_row(gw * xhat))
//   d_weight = sum over rows of grad * xhat;  d_bias = sum over rows of grad
std::vector<Tensor> layer_norm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor x = n.unpack("input"), mean = n.unpack("result1"), rstd = n.unpack("result2");
  Tensor w = n.unpack("weight");
  n.unpack("bias");  // not used by the formula; unpacked for its version check, as PyTorch does
  const bool meta = x->is_meta();
  if (kernels::device::any_on_device({&g[0], &x})) {
    // cuda/layer_norm.cuh's backward: the same three gradients, allocated in this order.
    const kernels::device::LayerNormGrads d = kernels::device::layer_norm_backward(
        g[0], x, mean, rstd, w, static_cast<int64_t>(n.attr("normalized_shape").list.size()), wants(n, 0),
        wants(n, 1), wants(n, 2));
    return {d.input, d.weight, d.bias};
  }
  auto grad_of = [&](size_t edge) { return written(n.input_meta[edge].sizes, n.input_meta[edge].dtype, meta); };
  Tensor gx = wants(n, 0) ? written(x->sizes, x->dtype(), meta) : nullptr;
  Tensor gw = wants(n, 1) ? grad_of(1) : nullptr;
  Tensor gb = wants(n, 2) ? grad_of(2) : nullptr;
  if (meta) return {gx, gw, gb};

  const RowSplit s = split_rows(x->sizes, n.attr("normalized_shape").list.size());
  if (x->dtype() == DType::BFloat16) {
    layer_norm_backward_bf16(s, x, g[0], mean, rstd, w, gx, gw, gb);
    return {gx, gw, gb};
  }
  if (x->dtype() == DType::Float32) {
    layer_norm_backward_cpu<float>(s, x, g[0], mean, rstd, w, gx, gw, gb);
  } else {
    layer_norm_backward_cpu<double>(s, x, g[0], mean, rstd, w, gx, gw, gb);
  }
  return {gx, gw, gb};
}

// create_graph=True: NativeLayerNormBackward0 records native_layer_norm_backward as one
// NativeLayerNormBackwardBackward0 with outputs (d_input, d_weight, d_bias) and edges
// (grad_out, input, mean, rstd, weight, bias), mean and rstd without an edge, saving
// grad_out, input, mean, normalized_shape, rstd, weight (measured). Its backward is
// layer_norm_double_backward; per row of N elements, with P(a) = a - mean(a) -
// xhat * mean(a * xhat) (the projection native_layer_norm_backward applies), u = ggI (the
// gradient of d_input), v = grad_out * weight, S_u = sum(u xhat), S_v = sum(v xhat) and
// C = sum(u v) - mean(v) sum(u):
//   grad_out: weight * rstd * P(u) + xhat * ggW + ggb
//   weight:   sum over rows of grad_out * rstd * P(u)
//   input:    -(rstd^2 xhat / N) (C - S_u S_v / N) - (rstd^2 / N) (S_u P(v) + S_v P(u))
//             + rstd * P(grad_out * ggW)
// (derived from d xhat / dx = rstd (I - 1/N - xhat xhat^T / N) and d rstd / dx =
// -rstd^2 xhat / N; checked against central differences and torch). Its own create_graph
// formula is not mirrored: third order through it raises unsupported.
std::vector<Tensor> layer_norm_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_out"), x = n.unpack("input"), mean = n.unpack("mean"), rstd = n.unpack("rstd");
  Tensor w = n.unpack("weight");
  if (kernels::device::any_on_device({&go, &x})) {
    // The same formula from the backend's pointwise and reduce kernels; the three results
    // allocated in this order, as below.
    const kernels::device::DoubleGrads d = kernels::device::layer_norm_double_backward(
        go, x, mean, rstd, w, incoming(g, 0), incoming(g, 1), incoming(g, 2),
        static_cast<int64_t>(n.attr("normalized_shape").list.size()), {wants(n, 0), wants(n, 1), wants(n, 4)});
    return {d.grad_out, d.input, nullptr, nullptr, d.weight, nullptr};
  }
  const bool meta = x->is_meta();
  Tensor g_go = wants(n, 0) ? grad_like(n, 0, meta) : nullptr;
  Tensor g_x = wants(n, 1) ? grad_like(n, 1, meta) : nullptr;
  Tensor g_w = wants(n, 4) ? grad_like(n, 4, meta) : nullptr;
  if (meta) return {g_go, g_x, nullptr, nullptr, g_w, nullptr};
  const RowSplit s = split_rows(x->sizes, n.attr("normalized_shape").list.size());
  const size_t cols = static_cast<size_t>(s.cols);
  const double N = static_cast<double>(s.cols);
  // A gradient the engine filled for an output that was not computed (no metadata) reads
  // as zeros of the expected size.
  auto values_or_zeros = [](const Tensor& t, size_t count) {
    return t && static_cast<size_t>(t->numel()) == count ? to_values(t) : std::vector<double>(count, 0.0);
  };
  const std::vector<double> u_all = values_or_zeros(g.size() > 0 ? g[0] : nullptr, static_cast<size_t>(x->numel()));
  const std::vector<double> ggw = values_or_zeros(g.size() > 1 ? g[1] : nullptr, cols);
  const std::vector<double> ggb = values_or_zeros(g.size() > 2 ? g[2] : nullptr, cols);
  const std::vector<double> xv = to_values(x), gov = to_values(go), mv = to_values(mean), rv = to_values(rstd);
  const std::vector<double> wv = w ? to_values(w) : std::vector<double>(cols, 1.0);
  std::vector<double> d_go(xv.size()), d_x(xv.size()), d_w(cols, 0.0);
  // P(a) for one row, given xhat.
  auto project = [&](const std::vector<double>& a, const std::vector<double>& xh) {
    double mean_a = 0, mean_ax = 0;
    for (size_t c = 0; c < cols; ++c) {
      mean_a += a[c] / N;
      mean_ax += a[c] * xh[c] / N;
    }
    std::vector<double> out(cols);
    for (size_t c = 0; c < cols; ++c) out[c] = a[c] - mean_a - xh[c] * mean_ax;
    return out;
  };
  for (int64_t r = 0; r < s.rows; ++r) {
    const size_t base = static_cast<size_t>(r) * cols;
    const double k = rv[static_cast<size_t>(r)];
    std::vector<double> xh(cols), u(cols), v(cols), gw_row(cols);
    double sum_u = 0, sum_v = 0, uv = 0, s_u = 0, s_v = 0;
    for (size_t c = 0; c < cols; ++c) {
      xh[c] = (xv[base + c] - mv[static_cast<size_t>(r)]) * k;
      u[c] = u_all[base + c];
      v[c] = gov[base + c] * wv[c];
      gw_row[c] = gov[base + c] * ggw[c];
      sum_u += u[c];
      sum_v += v[c];
      uv += u[c] * v[c];
      s_u += u[c] * xh[c];
      s_v += v[c] * xh[c];
    }
    const std::vector<double> pu = project(u, xh), pv = project(v, xh), pgw = project(gw_row, xh);
    const double C = uv - (sum_v / N) * sum_u;
    for (size_t c = 0; c < cols; ++c) {
      d_go[base + c] = wv[c] * k * pu[c] + xh[c] * ggw[c] + ggb[c];
      d_w[c] += gov[base + c] * k * pu[c];
      d_x[base + c] = -(k * k * xh[c] / N) * (C - s_u * s_v / N) - (k * k / N) * (s_u * pv[c] + s_v * pu[c]) +
                      k * pgw[c];
    }
  }
  if (g_go) store(g_go, d_go);
  if (g_x) store(g_x, d_x);
  if (g_w) store(g_w, d_w);
  return {g_go, g_x, nullptr, nullptr, g_w, nullptr};
}

std::vector<Tensor> layer_norm_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor x = n.unpack("input"), w = n.unpack("weight"), b = n.unpack("bias");
  std::vector<Tensor> out = layer_norm_backward(n, g);
  // grad_input_mask is should_compute_output (autograd.grad asks only for what leads to
  // its inputs).
  for (size_t i = 0; i < out.size(); ++i)
    if (!n.should_compute_output(i)) out[i] = nullptr;
  if (needs_grad({&g[0], &x, &w, &b})) {
    auto node = make_node("NativeLayerNormBackwardBackward0", layer_norm_bb_backward, {g[0], x, nullptr, nullptr, w, b});
    node->save_input("grad_out", g[0]);
    node->save_input("input", x);
    node->save_input("mean", n.unpack("result1"));
    node->save_attr("normalized_shape", n.attr("normalized_shape"));
    node->save_input("rstd", n.unpack("result2"));
    node->save_input("weight", w, w != nullptr);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i]) set_history(out[i], node, static_cast<int>(i));
  }
  return out;
}

// _check_layer_norm_inputs (aten/src/ATen/native/layer_norm.h), in its order.
void check_layer_norm_inputs(const Tensor& x, const Shape& ns, const Tensor& w, const Tensor& b) {
  if (ns.empty())
    fail("shape_mismatch",
         "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got "
         "normalized_shape = []");
  if (w && w->sizes != ns)
    fail("shape_mismatch", "Expected weight to be of same shape as normalized_shape, but got weight of shape " +
                               shape_str(w->sizes) + " and normalized_shape = " + shape_str(ns),
         {{"shapes", {w->sizes, ns}}});
  if (b && b->sizes != ns)
    fail("shape_mismatch", "Expected bias to be of same shape as normalized_shape, but got bias of shape " +
                               shape_str(b->sizes) + " and normalized_shape = " + shape_str(ns),
         {{"shapes", {b->sizes, ns}}});
  const size_t nd = ns.size(), xd = x->sizes.size();
  if (xd < nd || !std::equal(ns.begin(), ns.end(), x->sizes.end() - static_cast<long>(nd))) {
    std::string expected = "[*";
    for (int64_t v : ns) expected += ", " + std::to_string(v);
    fail("shape_mismatch", "Given normalized_shape=" + shape_str(ns) + ", expected input with shape " + expected +
                               "], but got input of size" + shape_str(x->sizes),
         {{"shapes", {x->sizes, ns}}});
  }
}

// ---------------------------------------------------------------- batch_norm
//
// derivatives.yaml (1.13):
//   native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
//   input, weight, bias: native_batch_norm_backward(grad, input, weight, running_mean,
//       running_var, result1, result2, training, eps, grad_input_mask)
// Saved (measured, whatever requires grad): eps, input, result1 (batch mean, [C]; [0] in
// eval), result2 (1/sqrt(biased var + eps), [C]; [0] in eval), running_mean, running_var
// (same objects, None when not given), training, weight. bias is not saved.

// native_batch_norm_backward (CPU), per channel c over the N * inner elements:
//   training: mean, invstd = result1, result2
//     d_input = (grad - (x - mean) * dot * invstd^2 / count - sum(grad) / count) * invstd * w
//   eval: mean = running_mean, invstd = 1/sqrt(running_var + eps)
//     d_input = grad * invstd * w
//   d_weight = dot * invstd with dot = sum(grad * (x - mean));  d_bias = sum(grad)
std::vector<Tensor> batch_norm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor x = n.unpack("input"), save_mean = n.unpack("result1"), save_invstd = n.unpack("result2");
  Tensor rm = n.unpack("running_mean"), rv = n.unpack("running_var"), w = n.unpack("weight");
  const bool training = n.attr("training").b;
  const double eps = n.attr("eps").d;
  if (kernels::device::any_on_device({&g[0], &x})) {
    // cuda/batch_norm.cuh's backward: the same gradients, allocated in this order.
    auto dtype_of = [&](size_t edge) {
      return wants(n, edge) ? std::optional<DType>(n.input_meta[edge].dtype) : std::nullopt;
    };
    const kernels::device::LayerNormGrads d = kernels::device::batch_norm_backward(
        g[0], x, w, training ? save_mean : rm, training ? save_invstd : rv, training, eps, wants(n, 0), dtype_of(1),
        dtype_of(2));
    return {d.input, d.weight, d.bias};
  }
  const bool meta = x->is_meta();
  // float32 input and gradient: the general loop's arithmetic below (double sums in the
  // same order, results rounded once) on the float32 storages directly.
  const float* x_f32 = meta ? nullptr : kernels::contiguous_f32(x);
  const float* g_f32 = x_f32 ? kernels::contiguous_f32(g[0]) : nullptr;
  Tensor gx = !wants(n, 0) ? nullptr : g_f32 ? written(x->sizes, x->dtype(), meta) : fresh(x->sizes, x->dtype(), meta);
  Tensor gw = wants(n, 1) ? grad_like(n, 1, meta) : nullptr;
  Tensor gb = wants(n, 2) ? grad_like(n, 2, meta) : nullptr;
  if (meta) return {gx, gw, gb};

  const int64_t batch = x->sizes[0], channels = x->sizes[1];
  const int64_t inner = x->numel() / std::max<int64_t>(batch * channels, 1);
  // Contiguous float32 input and gradient: torch's float32 arithmetic (batch_norm_cpu.hpp),
  // its channels-last kernel for one element per plane, on float copies when the fast paths
  // are off.
  const Tensor& mean_t = training ? save_mean : rm;
  const Tensor& stat_t = training ? save_invstd : rv;
  if (x->dtype() == DType::Float32 && g[0]->dtype() == DType::Float32 && x->is_contiguous() &&
      g[0]->is_contiguous() && inner > 0 && mean_t && stat_t && mean_t->dtype() == DType::Float32 &&
      stat_t->dtype() == DType::Float32 && (!w || w->dtype() == DType::Float32)) {
    std::vector<float> x_copy, g_copy, dx_copy;
    const float* xp = g_f32 ? x_f32 : nullptr;
    const float* gp = g_f32;
    if (!gp) {
      const std::vector<double> xd = to_values(x), gd = to_values(g[0]);
      x_copy.assign(xd.begin(), xd.end());
      g_copy.assign(gd.begin(), gd.end());
      xp = x_copy.data();
      gp = g_copy.data();
    }
    float* dxp = nullptr;
    if (gx) {
      if (g_f32) {
        dxp = gx->storage->f32();
      } else {
        dx_copy.resize(static_cast<size_t>(x->numel()));
        dxp = dx_copy.data();
      }
    }
    const std::vector<double> mean_v = to_values(mean_t), stat_v = to_values(stat_t);
    const std::vector<double> wv = w ? to_values(w) : std::vector<double>{};
    std::vector<double> dw(static_cast<size_t>(channels)), db(static_cast<size_t>(channels));
    if (inner == 1) {
      std::vector<float> mean_f(mean_v.begin(), mean_v.end()), weight_f(wv.begin(), wv.end());
      std::vector<float> invstd_f(static_cast<size_t>(channels)), dw_f(dw.size()), db_f(db.size());
      for (int64_t c = 0; c < channels; ++c)
        invstd_f[c] = training ? static_cast<float>(stat_v[c])
                               : batch_norm_cpu::eval_backward_invstd(static_cast<float>(stat_v[c]), eps);
      batch_norm_cpu::backward_channels_last(xp, gp, dxp, batch, channels, mean_f.data(), invstd_f.data(),
                                             w ? weight_f.data() : nullptr, training, kernels::threads(),
                                             dw_f.data(), db_f.data());
      dw.assign(dw_f.begin(), dw_f.end());
      db.assign(db_f.begin(), db_f.end());
    }
    for (int64_t c = 0; c < channels && inner > 1; ++c) {
      const float invstd = training ? static_cast<float>(stat_v[c])
                                    : batch_norm_cpu::eval_backward_invstd(static_cast<float>(stat_v[c]), eps);
      const batch_norm_cpu::ChannelGrads cg =
          batch_norm_cpu::backward_channel(xp, gp, dxp, batch, channels, inner, c, static_cast<float>(mean_v[c]),
                                           invstd, w ? static_cast<float>(wv[c]) : 1.0f, training);
      dw[c] = cg.weight;
      db[c] = cg.bias;
    }
    if (gx && !g_f32) store(gx, std::vector<double>(dx_copy.begin(), dx_copy.end()));
    if (gw) store(gw, dw);
    if (gb) store(gb, db);
    return {gx, gw, gb};
  }
  const double count = static_cast<double>(batch * inner);
  // xp, gp: the input's and the gradient's elements (float32 storages or doubles); dxp: the
  // input gradient's (null when not wanted).
  const std::vector<double> xv = g_f32 ? std::vector<double>{} : to_values(x);
  const std::vector<double> gv = g_f32 ? std::vector<double>{} : to_values(g[0]);
  const std::vector<double> wv = w ? to_values(w) : std::vector<double>{};
  const std::vector<double> mean_v = training ? to_values(save_mean) : to_values(rm);
  const std::vector<double> stat_v = training ? to_values(save_invstd) : to_values(rv);
  DType eval_dtype = x->dtype();
  if (!training && rv) eval_dtype = rv->dtype() == DType::BFloat16 ? DType::Float32 : rv->dtype();
  std::vector<double> dx(gx && !g_f32 ? xv.size() : 0), dw(static_cast<size_t>(channels)),
      db(static_cast<size_t>(channels));
  auto at = [&](int64_t b, int64_t c, int64_t i) { return static_cast<size_t>((b * channels + c) * inner + i); };
  auto channels_loop = [&](const auto* xp, const auto* gp, auto* dxp) {
    for (int64_t c = 0; c < channels; ++c) {
      const double m = mean_v[c];
      // In eval mode PyTorch computes invstd from the running variance in its accumulation
      // type (batch_norm's forward says which).
      const double invstd =
          training ? stat_v[c] : round_to_dtype(1.0 / std::sqrt(stat_v[c] + eps), eval_dtype);
      const double wc = w ? wv[c] : 1.0;
      double sum_g = 0.0, dot = 0.0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          sum_g += gp[at(b, c, i)];
          dot += (xp[at(b, c, i)] - m) * gp[at(b, c, i)];
        }
      dw[c] = dot * invstd;
      db[c] = sum_g;
      if (!dxp) continue;
      const double k = dot * invstd * invstd / count, grad_mean = sum_g / count;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t j = at(b, c, i);
          const double gj = gp[j];
          using Out = std::remove_reference_t<decltype(*dxp)>;
          dxp[j] = static_cast<Out>(training ? (gj - (xp[j] - m) * k - grad_mean) * invstd * wc : gj * invstd * wc);
        }
    }
  };
  if (g_f32) {
    channels_loop(x_f32, g_f32, gx ? gx->storage->f32() : nullptr);
  } else {
    channels_loop(xv.data(), gv.data(), gx ? dx.data() : nullptr);
    if (gx) store(gx, dx);
  }
  if (gw) store(gw, dw);
  if (gb) store(gb, db);
  return {gx, gw, gb};
}

// NativeBatchNormBackwardBackward0 (derivatives.yaml 1.13: native_batch_norm_backward's
// grad_out, input, weight: batchnorm_double_backward). Edges (grad_out, input, weight,
// running_mean, running_var), the last two None (measured next_functions). Per channel c
// over its M = N * inner elements, with k = invstd, xhat = (x - mean) k, w = weight[c]
// (1 without weight), and ggI, ggW, ggB the gradients of d_input, d_weight, d_bias
// (undefined ones read as zeros):
//   training: backward is d_input = w k P(gO), d_weight = sum(gO xhat), d_bias = sum(gO)
//     with P(a) = a - mean(a) - xhat mean(a xhat) (self-adjoint), so, as for layer_norm
//     with a channel in place of a row (u = ggI, v = gO w, S_a = sum(a xhat),
//     C = sum(u v) - sum(u) sum(v) / M):
//     grad_out: w k P(ggI) + ggW xhat + ggB
//     weight:   k sum(gO P(ggI))
//     input:    -(k^2 xhat / M)(C - S_u S_v / M) - (k^2 / M)(S_u P(v) + S_v P(u)) + k P(gO ggW)
//   eval (k from the running variance, a constant): d_input = gO k w, d_weight =
//     sum(gO (x - running_mean) k), so grad_out: ggI k w + ggW (x - running_mean) k + ggB;
//     input: ggW gO k; weight: sum(ggI gO k).
// Checked against central differences and torch 1.13's numbers. Torch composes this node's
// own gradient from ordinary ops; that graph is not mirrored: third order through it raises
// unsupported naming the node.
std::vector<Tensor> batch_norm_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_out"), x = n.unpack("input"), w = n.unpack("weight");
  const bool training = n.attr("train").b;
  if (kernels::device::any_on_device({&go, &x})) {
    // The same formulas from the backend's pointwise and reduce kernels; the three results
    // allocated in this order, as below.
    const kernels::device::DoubleGrads d = kernels::device::batch_norm_double_backward(
        go, x, w, n.unpack(training ? "save_mean" : "running_mean"),
        n.unpack(training ? "save_invstd" : "running_var"), incoming(g, 0), incoming(g, 1), incoming(g, 2), training,
        n.attr("eps").d, {wants(n, 0), wants(n, 1), wants(n, 2)});
    return {d.grad_out, d.input, d.weight, nullptr, nullptr};
  }
  const bool meta = x->is_meta();
  Tensor g_go = wants(n, 0) ? grad_like(n, 0, meta) : nullptr;
  Tensor g_x = wants(n, 1) ? grad_like(n, 1, meta) : nullptr;
  Tensor g_w = wants(n, 2) ? grad_like(n, 2, meta) : nullptr;
  if (meta) return {g_go, g_x, g_w, nullptr, nullptr};
  const int64_t batch = x->sizes[0], channels = x->sizes[1];
  const int64_t inner = x->numel() / std::max<int64_t>(batch * channels, 1);
  const size_t C = static_cast<size_t>(channels);
  auto values_or_zeros = [](const Tensor& t, size_t count) {
    return t && static_cast<size_t>(t->numel()) == count ? to_values(t) : std::vector<double>(count, 0.0);
  };
  const std::vector<double> xv = to_values(x), gov = to_values(go);
  const std::vector<double> ggi = values_or_zeros(g.size() > 0 ? g[0] : nullptr, xv.size());
  const std::vector<double> ggw = values_or_zeros(g.size() > 1 ? g[1] : nullptr, C);
  const std::vector<double> ggb = values_or_zeros(g.size() > 2 ? g[2] : nullptr, C);
  const std::vector<double> wv = w ? to_values(w) : std::vector<double>(C, 1.0);
  const std::vector<double> mean_v = to_values(n.unpack(training ? "save_mean" : "running_mean"));
  const std::vector<double> stat_v = to_values(n.unpack(training ? "save_invstd" : "running_var"));
  const double eps = n.attr("eps").d;
  std::vector<double> d_go(xv.size()), d_x(xv.size()), d_w(C, 0.0);
  for (size_t c = 0; c < C; ++c) {
    // The channel's elements, in order.
    std::vector<size_t> idx;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < inner; ++i)
        idx.push_back(static_cast<size_t>((b * channels + static_cast<int64_t>(c)) * inner + i));
    const double M = static_cast<double>(idx.size());
    const double k = training ? stat_v[c] : round_to_dtype(1.0 / std::sqrt(stat_v[c] + eps), x->dtype());
    const double wc = wv[c];
    if (!training) {
      for (size_t j : idx) {
        d_go[j] = ggi[j] * k * wc + ggw[c] * (xv[j] - mean_v[c]) * k + ggb[c];
        d_x[j] = ggw[c] * gov[j] * k;
        d_w[c] += ggi[j] * gov[j] * k;
      }
      continue;
    }
    std::vector<double> xh(idx.size()), u(idx.size()), v(idx.size()), gw(idx.size());
    double sum_u = 0, sum_v = 0, uv = 0, s_u = 0, s_v = 0;
    for (size_t e = 0; e < idx.size(); ++e) {
      const size_t j = idx[e];
      xh[e] = (xv[j] - mean_v[c]) * k;
      u[e] = ggi[j];
      v[e] = gov[j] * wc;
      gw[e] = gov[j] * ggw[c];
      sum_u += u[e], sum_v += v[e], uv += u[e] * v[e], s_u += u[e] * xh[e], s_v += v[e] * xh[e];
    }
    auto project = [&](const std::vector<double>& a) {
      double mean_a = 0, mean_ax = 0;
      for (size_t e = 0; e < a.size(); ++e) mean_a += a[e] / M, mean_ax += a[e] * xh[e] / M;
      std::vector<double> out(a.size());
      for (size_t e = 0; e < a.size(); ++e) out[e] = a[e] - mean_a - xh[e] * mean_ax;
      return out;
    };
    const std::vector<double> pu = project(u), pv = project(v), pgw = project(gw);
    const double Cuv = uv - sum_u * sum_v / M;
    for (size_t e = 0; e < idx.size(); ++e) {
      const size_t j = idx[e];
      d_go[j] = wc * k * pu[e] + ggw[c] * xh[e] + ggb[c];
      d_w[c] += gov[j] * k * pu[e];
      d_x[j] = -(k * k * xh[e] / M) * (Cuv - s_u * s_v / M) - (k * k / M) * (s_u * pv[e] + s_v * pu[e]) + k * pgw[e];
    }
  }
  if (g_go) store(g_go, d_go);
  if (g_x) store(g_x, d_x);
  if (g_w) store(g_w, d_w);
  return {g_go, g_x, g_w, nullptr, nullptr};
}

std::vector<Tensor> batch_norm_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor x = n.unpack("input"), w = n.unpack("weight");
  std::vector<Tensor> out = batch_norm_backward(n, g);
  for (size_t i = 0; i < out.size(); ++i)
    if (!n.should_compute_output(i)) out[i] = nullptr;
  if (needs_grad({&g[0], &x, &w})) {
    // Saved as measured (dir() of the node); save_mean / save_invstd are
    // NativeBatchNormBackward0's result1 / result2 ([0] in eval).
    auto node = make_node("NativeBatchNormBackwardBackward0", batch_norm_bb_backward, {g[0], x, w, nullptr, nullptr});
    node->save_attr("eps", n.attr("eps"));
    node->save_input("grad_out", g[0]);
    node->save_input("input", x);
    Tensor rm = n.unpack("running_mean"), rv = n.unpack("running_var");
    node->save_input("running_mean", rm, rm != nullptr);
    node->save_input("running_var", rv, rv != nullptr);
    node->save_input("save_invstd", n.unpack("result2"));
    node->save_input("save_mean", n.unpack("result1"));
    node->save_attr("train", n.attr("training"));
    node->save_input("weight", w, w != nullptr);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i]) set_history(out[i], node, static_cast<int>(i));
  }
  return out;
}

// The parameter dtype checks of batch_norm_cpu (measured over float32 / float64 mixes):
// the parameters' type is the first defined of (weight, bias, running_mean, running_var);
// when it differs from the input's, the call is "mixed dtype" and fails with
// "expect parameter ... Float" unless every parameter is float32, then with
// "expect input ... BFloat16". Otherwise a parameter of another type fails when the
// kernel reads it: "expected scalar type Float but found Double".
void check_batch_norm_dtypes(const Tensor& x, const std::vector<Tensor>& params) {
  const Tensor* first = nullptr;
  for (const Tensor& p : params)
    if (p && !first) first = &p;
  if (!first) return;
  if ((*first)->dtype() != x->dtype()) {
    for (const Tensor& p : params)
      if (p && p->dtype() != DType::Float32)
        fail("dtype_mismatch", "mixed dtype (CPU): expect parameter to have scalar type of Float",
             {{"op", "batch_norm"}});
    // A bfloat16 input with float32 parameters is the mixed kernel 1.13 runs (measured).
    if (x->dtype() == DType::BFloat16) return;
    fail("dtype_mismatch", "mixed dtype (CPU): expect input to have scalar type of BFloat16", {{"op", "batch_norm"}});
  }
  for (const Tensor& p : params) require_same_dtype(x, p, "batch_norm");
}

// ---------------------------------------------------------------- embedding
//
// derivatives.yaml (1.13):
//   embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
//   weight: embedding_backward(grad, indices, weight.sym_size(0), padding_idx, scale_grad_by_freq, sparse)
// indices is not differentiable: one edge, to weight (measured `next_functions` is
// (Acc(E),)). Saved: indices and weight (same objects), padding_idx (-1 for None, read
// back as 2**64-1), scale_grad_by_freq, sparse.

// embedding_dense_backward: zeros of weight's shape; each index's row of grad is added
// to that row (skipping padding_idx), divided by the index's count when scale_grad_by_freq.
std::vector<Tensor> embedding_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("indices");
  Tensor weight = n.unpack("weight");
  const bool meta = weight->is_meta();
  Tensor gw = fresh(n.input_meta[0].sizes, n.input_meta[0].dtype, meta);
  if (meta) return {gw};
  const int64_t padding_idx = n.attr("padding_idx").i;
  const bool by_freq = n.attr("scale_grad_by_freq").b;
  const int64_t rows = n.input_meta[0].sizes[0], dim = n.input_meta[0].sizes[1];
  if (kernels::device::any_on_device({&g[0], &indices})) {
    // The grad's rows added at their indices (index_add along dim 0) into the zeros. With a
    // padding row or per-frequency scaling, each index's scale (0 at padding_idx, else 1 or
    // 1 / its count) comes from the indices read on the host (a synchronising copy; PyTorch's
    // CUDA embedding_backward counts them on the device after sorting).
    if (padding_idx == -1 && !by_freq) {
      kernels::device::index_add_rows(gw, indices, g[0]);
      return {gw};
    }
    const std::vector<double> iv = host_values(indices);
    std::vector<double> counts(static_cast<size_t>(rows), 0.0), scales;
    for (double v : iv) counts[static_cast<size_t>(v)] += 1.0;
    for (double v : iv) {
      const auto row = static_cast<int64_t>(v);
      scales.push_back(row == padding_idx ? 0.0 : by_freq ? 1.0 / counts[static_cast<size_t>(row)] : 1.0);
    }
    return {kernels::device::embedding_backward_scaled(g[0], indices, scales, n.input_meta[0].sizes,
                                                       n.input_meta[0].dtype)};
  }
  const std::vector<double> iv = to_values(indices), gv = to_values(g[0]);
  std::vector<double> counts(static_cast<size_t>(rows), 0.0);
  for (double v : iv) counts[static_cast<size_t>(v)] += 1.0;
  std::vector<double> out(static_cast<size_t>(rows * dim), 0.0);
  for (size_t i = 0; i < iv.size(); ++i) {
    const int64_t row = static_cast<int64_t>(iv[i]);
    if (row == padding_idx) continue;
    const double scale = by_freq ? 1.0 / counts[static_cast<size_t>(row)] : 1.0;
    for (int64_t d = 0; d < dim; ++d) out[static_cast<size_t>(row * dim + d)] += gv[i * dim + d] * scale;
  }
  store(gw, out);
  return {gw};
}

// create_graph=True: EmbeddingBackward0 records embedding_dense_backward as
// EmbeddingDenseBackwardBackward0 (edge grad_output, saving indices and padding_idx;
// measured), whose backward is embedding_dense_double_backward:
// grad.index_select(0, indices.reshape(-1)) with padding rows zeroed, viewed as
// indices.sizes() + (-1,).
std::vector<Tensor> embedding_dense_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("indices");
  Tensor flat = ops::reshape(indices, {-1});
  Tensor picked = ops::index_select(g[0], 0, flat);
  const int64_t padding_idx = n.attr("padding_idx").i;
  if (padding_idx >= 0) {
    // indices == padding_idx, a bool tensor without a node (the comparison kernel on cuda).
    Tensor mask = kernels::device::on_device(indices)
                      ? kernels::device::compare_scalar(cuda::pw::BinaryOp::Eq, indices, padding_idx, "eq")
                      : kernels::unary(indices, DType::Bool, [padding_idx](double v) { return v == padding_idx ? 1.0 : 0.0; });
    picked = ops::masked_fill(picked, ops::reshape(mask, {-1, 1}), Value::integer(0));
  }
  std::vector<int64_t> size(indices->sizes.begin(), indices->sizes.end());
  size.push_back(-1);
  return {ops::view(picked, size)};
}

std::vector<Tensor> embedding_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor r = embedding_backward(n, g)[0];
  if (needs_grad({&g[0]})) {
    auto node = make_node("EmbeddingDenseBackwardBackward0", embedding_dense_bb_backward, {g[0]});
    node->differentiable_backward = embedding_dense_bb_backward;
    node->save_input("indices", n.unpack("indices"));
    node->save_attr("padding_idx", n.attr("padding_idx"));
    set_history(r, node);
  }
  return {r};
}

// A 128-bit integer in decimal (std::to_string has no overload for it).
std::string wide_int_str(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  while (v != 0) {
    const int digit = static_cast<int>(v % 10);
    digits.push_back(static_cast<char>('0' + (digit < 0 ? -digit : digit)));
    v /= 10;
  }
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

// ---------------------------------------------------------------- conv2d
//
// derivatives.yaml (1.13):
//   convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
//   input, weight, bias: "grad.defined() ? convolution_backward(grad, input, weight,
//       bias->sym_sizes(), stride, padding, dilation, transposed, output_padding, groups,
//       grad_input_mask) : ..."
// Saved (measured, whatever requires grad): bias_sym_sizes_opt ((C_out,), or (0,) without
// bias), dilation, groups, input, output_padding, padding, stride, transposed=False,
// weight. The lists are kept as the Python parser produced them (padding=(1,) is (1,)).

// A size-1 list applies to every spatial dim (expand_param_if_needed); a 1-D convolution's
// lists get a leading unit entry, as it runs as a 2-D one of height 1.
std::vector<int64_t> expanded(const std::vector<int64_t>& v, size_t spatial, int64_t height_value) {
  if (spatial == 1) return {height_value, v[0]};
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// A 2-D convolution's geometry; a 1-D one (3-D input and weight) is the 2-D convolution of
// height 1 with a 1-row kernel, unit stride and dilation and no padding along the height
// (1.13's _convolution likewise runs a 3-D input as a 2-D one: view1d_as_2d).
struct ConvGeometry {
  int64_t batch, in_channels, height, width;
  int64_t out_channels, group_in, kernel_h, kernel_w;
  int64_t out_h, out_w, groups;
  std::vector<int64_t> stride, padding, dilation;
};

ConvGeometry conv_geometry(const Shape& in, const Shape& w, const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                           int64_t groups) {
  ConvGeometry c{};
  const bool one_d = in.size() == 3;
  const size_t spatial = one_d ? 1 : 2;
  c.batch = in[0], c.in_channels = in[1];
  c.height = one_d ? 1 : in[2], c.width = in.back();
  c.out_channels = w[0], c.group_in = w[1];
  c.kernel_h = one_d ? 1 : w[2], c.kernel_w = w.back();
  c.stride = expanded(stride, spatial, 1), c.padding = expanded(padding, spatial, 0);
  c.dilation = expanded(dilation, spatial, 1);
  c.groups = groups;
  c.out_h = (c.height + 2 * c.padding[0] - c.dilation[0] * (c.kernel_h - 1) - 1) / c.stride[0] + 1;
  c.out_w = (c.width + 2 * c.padding[1] - c.dilation[1] * (c.kernel_w - 1) - 1) / c.stride[1] + 1;
  return c;
}

Shape conv_output_shape(const ConvGeometry& c, size_t spatial) {
  if (spatial == 1) return {c.batch, c.out_channels, c.out_w};
  return {c.batch, c.out_channels, c.out_h, c.out_w};
}

kernels::ConvShape kernel_shape(const ConvGeometry& c) {
  kernels::ConvShape k;
  k.batch = c.batch, k.in_channels = c.in_channels, k.height = c.height, k.width = c.width;
  k.out_channels = c.out_channels, k.group_in = c.group_in, k.kernel_h = c.kernel_h, k.kernel_w = c.kernel_w;
  k.out_h = c.out_h, k.out_w = c.out_w, k.groups = c.groups;
  k.stride_h = c.stride[0], k.stride_w = c.stride[1], k.pad_h = c.padding[0], k.pad_w = c.padding[1];
  k.dilation_h = c.dilation[0], k.dilation_w = c.dilation[1];
  return k;
}

// The geometry for cuda/conv.cuh.
cuda::Conv2dGeometry device_geometry(const ConvGeometry& c) {
  cuda::Conv2dGeometry g;
  g.stride_h = c.stride[0], g.stride_w = c.stride[1];
  g.pad_h = c.padding[0], g.pad_w = c.padding[1];
  g.dilation_h = c.dilation[0], g.dilation_w = c.dilation[1];
  g.groups = c.groups;
  return g;
}

// Visits every (output element, weight element, input element) triple of a grouped,
// strided, dilated, zero-padded 2-D convolution, with flat row-major indices.
template <typename F>
void for_each_tap(const ConvGeometry& c, F&& f) {
  const int64_t out_per_group = c.out_channels / c.groups;
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t co = 0; co < c.out_channels; ++co) {
      const int64_t group = co / out_per_group;
      for (int64_t oh = 0; oh < c.out_h; ++oh)
        for (int64_t ow = 0; ow < c.out_w; ++ow) {
          const int64_t o = ((n * c.out_channels + co) * c.out_h + oh) * c.out_w + ow;
          for (int64_t ci = 0; ci < c.group_in; ++ci) {
            const int64_t cin = group * c.group_in + ci;
            for (int64_t kh = 0; kh < c.kernel_h; ++kh) {
              const int64_t ih = oh * c.stride[0] - c.padding[0] + kh * c.dilation[0];
              if (ih < 0 || ih >= c.height) continue;
              for (int64_t kw = 0; kw < c.kernel_w; ++kw) {
                const int64_t iw = ow * c.stride[1] - c.padding[1] + kw * c.dilation[1];
                if (iw < 0 || iw >= c.width) continue;
                const int64_t wi = ((co * c.group_in + ci) * c.kernel_h + kh) * c.kernel_w + kw;
                const int64_t xi = ((n * c.in_channels + cin) * c.height + ih) * c.width + iw;
                f(static_cast<size_t>(o), static_cast<size_t>(wi), static_cast<size_t>(xi), co);
              }
            }
          }
        }
    }
}

// float32: im2col and sgemm (kernels_conv.hpp), accumulating in float as PyTorch's CPU
// kernels do. float64 stays with the sequential double sum below: its printed digits are
// PyTorch's to the last place (scenarios/create_graph_nn.json prints 17-digit conv
// gradients), which dgemm's blocked, fused summation changes in the last bit.
template <typename T>
void conv_forward_in(const ConvGeometry& c, const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const Tensor& out) {
  const ContiguousElements<T> x(input), w(weight), b(bias);
  kernels::conv_forward<T>(kernel_shape(c), x.ptr, w.ptr, b.ptr, elements_of<T>(out));
}

// float64, bfloat16 and int64 (slow_conv2d's integer kernel, exact sums): accumulated in double in
// (input channel, kernel row, kernel column) order, the bias added last.
void conv_forward_exact(const ConvGeometry& c, const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Tensor& out) {
  const std::vector<double> xv = to_values(input), wv = to_values(weight);
  const std::vector<double> bv = bias ? to_values(bias) : std::vector<double>{};
  std::vector<double> ov(static_cast<size_t>(out->numel()), 0.0);
  for_each_tap(c, [&](size_t o, size_t wi, size_t xi, int64_t) { ov[o] += xv[xi] * wv[wi]; });
  if (bias) {
    const int64_t plane = c.out_h * c.out_w;
    for (size_t o = 0; o < ov.size(); ++o) ov[o] += bv[static_cast<size_t>((static_cast<int64_t>(o) / plane) % c.out_channels)];
  }
  store(out, ov);
}

// bfloat16 on a CPU without AVX-512 (kernels::bf16_cpu_kernels() == Cpublas): 1.13 takes
// slow_conv2d (ConvolutionMM2d.cpp), group by group and sample by sample: the input unfolded
// into columns (CKK x L, exact copies), then cpublas::gemm on bfloat16 (bf16_cpublas_gemm).
//   forward:      out (L x OC) = gemm(N, N) of columns and weight, c preset to the bias (beta 1) or 0;
//   grad_input:   columns' grad = gemm(N, T) of grad_output and weight (beta 0), folded back into
//                 the input with one bfloat16 add per tap (unfolded2d_acc), kernel row, column order;
//   grad_weight:  gemm(T, N) of columns and grad_output with beta 1, sample after sample;
//   grad_bias:    at::sum over (N, H, W), as kernels::sum reduces separate runs of dims in bfloat16.
// slow_conv2d has no dilation (1.13 takes slow_conv_dilated2d there, not reproduced).
struct SlowConvGroup {
  const ConvGeometry& c;
  int64_t rows() const { return c.group_in * c.kernel_h * c.kernel_w; }  // CKK of one group
  int64_t cols() const { return c.out_h * c.out_w; }                      // L
  // Visits the taps of sample t, group g as unfolded2d_copy / unfolded2d_acc walk them: input
  // channel, kernel row, kernel column, output row, output column; f(column element, input
  // element) with flat indices into the [CKK][L] columns and the input, padding skipped.
  template <typename F>
  void for_each_tap(int64_t t, int64_t g, F&& f) const {
    for (int64_t ci = 0; ci < c.group_in; ++ci)
      for (int64_t kh = 0; kh < c.kernel_h; ++kh)
        for (int64_t kw = 0; kw < c.kernel_w; ++kw) {
          const int64_t r = (ci * c.kernel_h + kh) * c.kernel_w + kw;
          const int64_t plane = (t * c.in_channels + g * c.group_in + ci) * c.height;
          for (int64_t oh = 0; oh < c.out_h; ++oh) {
            const int64_t ih = oh * c.stride[0] - c.padding[0] + kh;
            if (ih < 0 || ih >= c.height) continue;
            for (int64_t ow = 0; ow < c.out_w; ++ow) {
              const int64_t iw = ow * c.stride[1] - c.padding[1] + kw;
              if (iw < 0 || iw >= c.width) continue;
              f(static_cast<size_t>(r * cols() + oh * c.out_w + ow), static_cast<size_t>((plane + ih) * c.width + iw));
            }
          }
        }
  }
  // Columns of sample t, group g: [CKK][L] row-major, zero where the tap is padding.
  std::vector<double> unfold(const std::vector<double>& xv, int64_t t, int64_t g) const {
    std::vector<double> col(static_cast<size_t>(rows() * cols()), 0.0);
    for_each_tap(t, g, [&](size_t ci, size_t xi) { col[ci] = xv[xi]; });
    return col;
  }
};

bool conv_bf16_takes_slow_conv2d(const Tensor& input) {
  return input->dtype() == DType::BFloat16 && !input->is_meta() &&
         kernels::bf16_cpu_kernels() == kernels::Bf16CpuKernels::Cpublas;
}

void conv_forward_slow_bf16(const ConvGeometry& c, const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Tensor& out) {
  const std::vector<double> xv = to_values(input), wv = to_values(weight);
  const std::vector<double> bv = bias ? to_values(bias) : std::vector<double>{};
  const SlowConvGroup s{c};
  const int64_t oc_g = c.out_channels / c.groups, L = s.cols(), K = s.rows();
  std::vector<double> ov(static_cast<size_t>(out->numel()), 0.0);
  for (int64_t t = 0; t < c.batch; ++t)
    for (int64_t g = 0; g < c.groups; ++g) {
      const std::vector<double> col = s.unfold(xv, t, g);
      double* o = ov.data() + (t * c.out_channels + g * oc_g) * L;
      if (bias)
        for (int64_t oc = 0; oc < oc_g; ++oc) std::fill(o + oc * L, o + (oc + 1) * L, bv[static_cast<size_t>(g * oc_g + oc)]);
      kernels::bf16_cpublas_gemm(false, false, L, oc_g, K, 1.0, col.data(), L, wv.data() + g * oc_g * K, K,
                                 bias ? 1.0 : 0.0, o, L);
    }
  store(out, ov);
}

void conv_backward_slow_bf16(const ConvGeometry& c, const Tensor& grad, const Tensor& input, const Tensor& weight,
                             const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const std::vector<double> xv = to_values(input), wv = to_values(weight), gv = to_values(grad);
  const SlowConvGroup s{c};
  const int64_t oc_g = c.out_channels / c.groups, L = s.cols(), K = s.rows();
  std::vector<double> dx(gx ? xv.size() : 0, 0.0), dw(gw ? wv.size() : 0, 0.0);
  std::vector<double> fgrad(static_cast<size_t>(K * L));
  for (int64_t g = 0; g < c.groups; ++g)
    for (int64_t t = 0; t < c.batch; ++t) {
      const double* go = gv.data() + (t * c.out_channels + g * oc_g) * L;
      if (gx) {
        kernels::bf16_cpublas_gemm(false, true, L, K, oc_g, 1.0, go, L, wv.data() + g * oc_g * K, K, 0.0,
                                   fgrad.data(), L);
        s.for_each_tap(t, g, [&](size_t ci, size_t xi) { dx[xi] = kernels::round_bf16(dx[xi] + fgrad[ci]); });
      }
      if (gw) {
        const std::vector<double> col = s.unfold(xv, t, g);
        kernels::bf16_cpublas_gemm(true, false, K, oc_g, L, 1.0, col.data(), L, go, L, 1.0, dw.data() + g * oc_g * K,
                                   K);
      }
    }
  if (gb) {
    // at::sum over (N, H, W): kernels::sum's bfloat16 reduction over separate runs of dims
    // (each sample's float partial added to the bfloat16 output with a rounding per add).
    const std::vector<int64_t> dims = grad->dim() == 3 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{0, 2, 3};
    store(gb, to_values(kernels::sum(grad, dims, false, DType::BFloat16)));
  }
  if (gx) store(gx, dx);
  if (gw) store(gw, dw);
}

template <typename T>
void conv_backward_in(const ConvGeometry& c, const Tensor& grad, const Tensor& input, const Tensor& weight,
                      const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  // The bias has the input's dtype (check_convolution refuses another).
  const ContiguousElements<T> go(grad), x(input), w(weight);
  kernels::conv_backward<T>(kernel_shape(c), go.ptr, x.ptr, w.ptr, elements_of<T>(gx), elements_of<T>(gw),
                            elements_of<T>(gb));
}

void conv_backward_exact(const ConvGeometry& c, const Tensor& grad, const Tensor& input, const Tensor& weight,
                         const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const std::vector<double> xv = to_values(input), wv = to_values(weight), gv = to_values(grad);
  std::vector<double> dx(gx ? xv.size() : 0, 0.0), dw(gw ? wv.size() : 0, 0.0);
  for_each_tap(c, [&](size_t o, size_t wi, size_t xi, int64_t) {
    if (gx) dx[xi] += gv[o] * wv[wi];
    if (gw) dw[wi] += gv[o] * xv[xi];
  });
  if (gb) {
    std::vector<double> db(static_cast<size_t>(c.out_channels), 0.0);
    const int64_t plane = c.out_h * c.out_w;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t co = 0; co < c.out_channels; ++co)
        for (int64_t i = 0; i < plane; ++i) db[co] += gv[static_cast<size_t>((b * c.out_channels + co) * plane + i)];
    store(gb, db);
  }
  if (gx) store(gx, dx);
  if (gw) store(gw, dw);
}

// convolution_backward (transposed=False):
//   d_input[x] += grad[o] * weight[w];  d_weight[w] += grad[o] * input[x];  d_bias[co] += grad[o]
std::vector<Tensor> conv2d_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor input = n.unpack("input"), weight = n.unpack("weight");
  if (kernels::device::any_on_device({&g[0], &input})) {
    // cuda/conv.cuh's backward: the same gradients, allocated in this order.
    const ConvGeometry c = conv_geometry(input->sizes, weight->sizes, n.attr("stride").list, n.attr("padding").list,
                                         n.attr("dilation").list, n.attr("groups").i);
    const kernels::device::LayerNormGrads d = kernels::device::conv2d_backward(
        g[0], input, weight, device_geometry(c), wants(n, 0), wants(n, 1),
        wants(n, 2) ? std::optional<DType>(n.input_meta[2].dtype) : std::nullopt);
    return {d.input, d.weight, d.bias};
  }
  const bool meta = input->is_meta();
  // Every element of each gradient is written below: no zero-fill first.
  Tensor gx = wants(n, 0) ? written(input->sizes, input->dtype(), meta) : nullptr;
  Tensor gw = wants(n, 1) ? written(weight->sizes, weight->dtype(), meta) : nullptr;
  Tensor gb = wants(n, 2) ? written(n.input_meta[2].sizes, n.input_meta[2].dtype, meta) : nullptr;
  if (meta) return {gx, gw, gb};
  const ConvGeometry c = conv_geometry(input->sizes, weight->sizes, n.attr("stride").list, n.attr("padding").list,
                                       n.attr("dilation").list, n.attr("groups").i);
  if (input->dtype() == DType::Float32)
    conv_backward_in<float>(c, g[0], input, weight, gx, gw, gb);
  else if (conv_bf16_takes_slow_conv2d(input))
    conv_backward_slow_bf16(c, g[0], input, weight, gx, gw, gb);
  else
    conv_backward_exact(c, g[0], input, weight, gx, gw, gb);
  return {gx, gw, gb};
}

// ConvolutionBackwardBackward0 (derivatives.yaml 1.13: convolution_backward's grad_output,
// input, weight: _convolution_double_backward). Edges (grad_output, input, weight), measured
// from next_functions. Given ggI, ggW, ggb (the gradients of convolution_backward's three
// outputs; undefined ones read as zeros), FunctionsManual's formulas for transposed=False:
//   grad_output: conv(ggI, W) + conv(I, ggW) + ggb broadcast over (N, H, W)
//   input:       convolution_backward's input gradient with gO and ggW
//   weight:      convolution_backward's weight gradient with ggI and gO
// Torch's own create_graph formula for this node is not mirrored: third order through it
// raises unsupported naming ConvolutionBackwardBackward0.
std::vector<Tensor> conv2d_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor go = n.unpack("grad_output"), input = n.unpack("input"), weight = n.unpack("weight");
  if (kernels::device::any_on_device({&go, &input})) {
    // The same three terms from cuda/conv.cuh's forward and backward launchers.
    const ConvGeometry c = conv_geometry(input->sizes, weight->sizes, n.attr("stride").list, n.attr("padding").list,
                                         n.attr("dilation").list, n.attr("groups").i);
    const kernels::device::DoubleGrads d = kernels::device::conv2d_double_backward(
        go, input, weight, incoming(g, 0), incoming(g, 1), incoming(g, 2), device_geometry(c),
        {wants(n, 0), wants(n, 1), wants(n, 2)});
    return {d.grad_out, d.input, d.weight};
  }
  const bool meta = input->is_meta();
  Tensor g_go = wants(n, 0) ? grad_like(n, 0, meta) : nullptr;
  Tensor g_x = wants(n, 1) ? grad_like(n, 1, meta) : nullptr;
  Tensor g_w = wants(n, 2) ? grad_like(n, 2, meta) : nullptr;
  if (meta) return {g_go, g_x, g_w};
  const ConvGeometry c = conv_geometry(input->sizes, weight->sizes, n.attr("stride").list, n.attr("padding").list,
                                       n.attr("dilation").list, n.attr("groups").i);
  auto values_or_zeros = [](const Tensor& t, size_t count) {
    return t && static_cast<size_t>(t->numel()) == count ? to_values(t) : std::vector<double>(count, 0.0);
  };
  const std::vector<double> xv = to_values(input), wv = to_values(weight), gov = to_values(go);
  const std::vector<double> ggi = values_or_zeros(g.size() > 0 ? g[0] : nullptr, xv.size());
  const std::vector<double> ggw = values_or_zeros(g.size() > 1 ? g[1] : nullptr, wv.size());
  const std::vector<double> ggb =
      values_or_zeros(g.size() > 2 ? g[2] : nullptr, static_cast<size_t>(c.out_channels));
  std::vector<double> d_go(gov.size(), 0.0), d_x(xv.size(), 0.0), d_w(wv.size(), 0.0);
  for_each_tap(c, [&](size_t o, size_t wi, size_t xi, int64_t) {
    d_go[o] += ggi[xi] * wv[wi] + xv[xi] * ggw[wi];
    d_x[xi] += gov[o] * ggw[wi];
    d_w[wi] += gov[o] * ggi[xi];
  });
  const int64_t plane = c.out_h * c.out_w;
  for (size_t o = 0; o < d_go.size(); ++o)
    d_go[o] += ggb[static_cast<size_t>((static_cast<int64_t>(o) / plane) % c.out_channels)];
  if (g_go) store(g_go, d_go);
  if (g_x) store(g_x, d_x);
  if (g_w) store(g_w, d_w);
  return {g_go, g_x, g_w};
}

std::vector<Tensor> conv2d_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor input = n.unpack("input"), weight = n.unpack("weight");
  std::vector<Tensor> out = conv2d_backward(n, g);
  // grad_input_mask is should_compute_output (autograd.grad asks only for what leads to
  // its inputs).
  for (size_t i = 0; i < out.size(); ++i)
    if (!n.should_compute_output(i)) out[i] = nullptr;
  if (needs_grad({&g[0], &input, &weight})) {
    // Saved as measured (dir() of the node): the lists as ConvolutionBackward0 holds them.
    auto node = make_node("ConvolutionBackwardBackward0", conv2d_bb_backward, {g[0], input, weight});
    node->save_attr("dilation", n.attr("dilation"));
    node->save_input("grad_output", g[0]);
    node->save_attr("groups", n.attr("groups"));
    node->save_input("input", input);
    node->save_attr("output_padding", n.attr("output_padding"));
    node->save_attr("padding", n.attr("padding"));
    node->save_attr("stride", n.attr("stride"));
    node->save_attr("transposed", n.attr("transposed"));
    node->save_input("weight", weight);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i]) set_history(out[i], node, static_cast<int>(i));
  }
  return out;
}

std::string int_list_str(const std::vector<int64_t>& v) { return shape_str(Shape(v.begin(), v.end())); }

// expand_param_if_needed: one value or one per spatial dim.
std::vector<int64_t> expand_param(const std::vector<int64_t>& v, const std::string& name, int64_t dims) {
  if (v.size() == 1) return std::vector<int64_t>(static_cast<size_t>(dims), v[0]);
  if (static_cast<int64_t>(v.size()) != dims)
    fail("type_error", "expected " + name + " to be a single integer value or a list of " + std::to_string(dims) +
                           " values to match the convolution dimensions, but got " + name + "=" + int_list_str(v));
  return v;
}

// Lower-case type names of check_input_same_type_as_parameters' bias message.
std::string input_type_name(DType d) {
  switch (d) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16: return "c10::Half";
    case DType::BFloat16: return "c10::BFloat16";
    case DType::Int64: return "long int";
    case DType::Bool: return "bool";
  }
  return "?";
}

// The legacy type names of oneDNN's convolution type check (measured: torch.FloatTensor,
// torch.LongTensor; a bfloat16 tensor is CPUBFloat16Type).
std::string legacy_tensor_type(DType d) {
  switch (d) {
    case DType::Float32: return "torch.FloatTensor";
    case DType::Float64: return "torch.DoubleTensor";
    case DType::Float16: return "torch.HalfTensor";
    case DType::BFloat16: return "CPUBFloat16Type";
    case DType::Int64: return "torch.LongTensor";
    case DType::Bool: return "torch.BoolTensor";
  }
  return "?";
}

// The input's rank check of at::conv1d / at::conv2d (batchify), first of all (measured).
void check_conv_input_rank(const Tensor& input, size_t spatial, const char* op) {
  const int64_t batched = static_cast<int64_t>(spatial) + 2;
  if (input->dim() != batched - 1 && input->dim() != batched)
    fail("shape_mismatch", "Expected " + std::to_string(batched - 1) + "D (unbatched) or " + std::to_string(batched) +
                               "D (batched) input to " + op + ", but got input of size: " + shape_str(input->sizes));
}

// at::_convolution and check_shape_forward, in their order (messages measured), on the
// batched input.
void check_convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& a,
                       size_t spatial, const char* op) {
  const int64_t k = weight->dim();
  if (k - 2 <= 0) fail("shape_mismatch", "weight should have at least three dimensions");
  if (a.groups <= 0) fail("type_error", "non-positive groups is not supported");
  const std::vector<int64_t> stride = expand_param(a.stride, "stride", k - 2);
  const std::vector<int64_t> padding = expand_param(a.padding, "padding", k - 2);
  const std::vector<int64_t> dilation = expand_param(a.dilation, "dilation", k - 2);
  expand_param(a.output_padding, "output_padding", k - 2);
  for (int64_t p : padding)
    if (p < 0) fail("type_error", "negative padding is not supported");
  for (int64_t s : stride)
    if (s <= 0) fail("type_error", "non-positive stride is not supported");
  for (int64_t d : dilation) {
    // conv1d: "non-positive dilation is not supported" from oneDNN's path, slow_conv2d's
    // message with the 2-D view's list ([1, 0]) at batch 1 (measured); not mirrored.
    if (d <= 0 && spatial == 1) fail("unsupported", std::string(op) + " with a non-positive dilation is not supported");
    if (d <= 0) fail("type_error", "dilation should be greater than zero, but got " + int_list_str(dilation));
  }
  const Shape& ws = weight->sizes;
  if (k != input->dim())
    fail("shape_mismatch", "Expected " + std::to_string(k) + "-dimensional input for " + std::to_string(k) +
                               "-dimensional weight " + shape_str(ws) + ", but got " + std::to_string(input->dim()) +
                               "-dimensional input of size " + shape_str(input->sizes) + " instead");
  const std::string g = std::to_string(a.groups);
  if (ws[0] < a.groups)
    fail("shape_mismatch", "Given groups=" + g + ", expected weight to be at least " + g +
                               " at dimension 0, but got weight of size " + shape_str(ws) + " instead");
  if (ws[0] % a.groups != 0)
    fail("shape_mismatch", "Given groups=" + g + ", expected weight to be divisible by " + g +
                               " at dimension 0, but got weight of size [" + shape_str(ws) + "] instead");
  if (input->sizes[1] != ws[1] * a.groups)
    fail("shape_mismatch", "Given groups=" + g + ", weight of size " + shape_str(ws) + ", expected input" +
                               shape_str(input->sizes) + " to have " + std::to_string(ws[1] * a.groups) +
                               " channels, but got " + std::to_string(input->sizes[1]) + " channels instead",
         {{"shapes", {input->sizes, ws}}});
  if (bias && (bias->dim() != 1 || bias->sizes[0] != ws[0]))
    fail("shape_mismatch", "Given weight of size " + shape_str(ws) + ", expected bias to be 1-dimensional with " +
                               std::to_string(ws[0]) + " elements, but got bias of size " + shape_str(bias->sizes) +
                               " instead");
  // The padded size and the kernel's extent are computed exactly. 1.13 computes them in
  // int64 and wraps (measured on a 5x5 input and 3x3 kernel: dilation=2**62 passes the check
  // and gives a 5x5 output, padding=2**62 reports a padded size of -9223372036854775803):
  // here such a kernel is reported with its true extent, and a padded size beyond int64 is an
  // error instead of a wrapped shape.
  bool fits = true, padded_fits_int64 = true;
  std::string in_s, k_s;
  for (size_t i = 0; i < spatial; ++i) {
    const __int128 padded = static_cast<__int128>(input->sizes[2 + i]) + 2 * static_cast<__int128>(padding[i]);
    const __int128 span = static_cast<__int128>(dilation[i]) * (ws[2 + i] - 1) + 1;
    if (padded < span) fits = false;
    if (padded > std::numeric_limits<int64_t>::max()) padded_fits_int64 = false;
    in_s += (i ? " x " : "") + wide_int_str(padded);
    k_s += (i ? " x " : "") + wide_int_str(span);
  }
  if (!fits)
    fail("shape_mismatch", "Calculated padded input size per channel: (" + in_s + "). Kernel size: (" + k_s +
                               "). Kernel size can't be greater than actual input size");
  if (!padded_fits_int64)
    fail("shape_mismatch", "Calculated padded input size per channel: (" + in_s + ") does not fit in int64");
  // The backend's type checks come last: the bias first, then the weight (measured with
  // both mismatched: the bias message wins).
  // bfloat16 on the CPU: 1.13 runs oneDNN's bfloat16 convolution on a CPU with AVX-512,
  // whose forward and backward equal the exact sums of the bfloat16 operands rounded once
  // (measured: 0 of 3,584 outputs and 0 of 8,751 gradient values differ, 1-D and 2-D,
  // strided, grouped, with and without bias), as conv_forward_exact computes them; elsewhere
  // slow_conv2d (conv_forward_slow_bf16).
  require_kernel_dtype(input, "slow_conv2d_cpu", op, /*allow_int64=*/true, /*bfloat16_on_cpu=*/true);
  const bool slow_bf16 = conv_bf16_takes_slow_conv2d(input);
  if (slow_bf16)
    for (int64_t d : dilation)
      if (d != 1)
        fail("unsupported", std::string(op) + " of bfloat16 tensors with dilation on a CPU without AVX-512 "
                                              "(1.13's slow_conv_dilated2d rounding) is not supported");
  // oneDNN checks the weight's type before the bias's (measured: a bfloat16 input with a
  // float32 weight and a bfloat16 bias names the weight).
  if (input->dtype() == DType::BFloat16 && !input->is_meta() && !slow_bf16 && weight->dtype() != DType::BFloat16)
    fail("dtype_mismatch", "Input type (CPUBFloat16Type) and weight type (" + legacy_tensor_type(weight->dtype()) +
                               ") should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
         {{"op", op}, {"dtypes", {dtype_name(input->dtype()), dtype_name(weight->dtype())}}});
  if (spatial == 1 && ((bias && bias->dtype() != input->dtype()) || weight->dtype() != input->dtype()))
    // conv1d's dtype messages depend on the backend 1.13 picks for the shape (oneDNN for a
    // batched float32 input: "Input type (torch.FloatTensor) and weight type ... or input
    // should be a MKLDNN tensor ..."; slow_conv2d otherwise, where a float64 bias on a
    // float32 input of batch 1 even runs; measured), which is not mirrored.
    fail("unsupported", std::string(op) + " with input, weight and bias of different dtypes is not supported");
  if (bias && bias->dtype() != input->dtype())
    fail("dtype_mismatch", "Input type (" + input_type_name(input->dtype()) + ") and bias type (" +
                               input_type_name(bias->dtype()) + ") should be the same");
  // slow_conv2d reads the weight as the input's type after the bias check (measured on a CPU
  // without AVX-512: a float32 weight gives this message, a float32 bias the one above).
  if (slow_bf16 && weight->dtype() != DType::BFloat16)
    fail("dtype_mismatch", "expected scalar type BFloat16 but found " + scalar_name(weight->dtype()),
         {{"op", op}, {"dtypes", {dtype_name(input->dtype()), dtype_name(weight->dtype())}}});
  require_same_dtype(input, weight, "conv2d");
}

// ---------------------------------------------------------------- max_pool2d
//
// derivatives.yaml (1.13):
//   max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (result0, result1)
//   self: max_pool2d_with_indices_backward(grad, self, kernel_size, stride, padding, dilation, ceil_mode, result1)
// F.max_pool2d(..., return_indices=False) goes through at::max_pool2d, which records the
// same node (measured). Saved: ceil_mode, dilation, kernel_size, padding, result1 (the
// int64 indices), self (same object), stride (() when not given, measured).

// pooling_output_shape_pad_lr with div_rtn (rounds towards negative infinity).
// Computed exactly in 128 bits (1.13's int64 arithmetic cannot overflow for max_pool2d, whose
// parameters are 32-bit, but can for avg_pool2d's 64-bit ones); a size beyond int64 is an error.
int64_t pooling_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  using Wide = __int128;
  const Wide num = Wide(in) + 2 * Wide(pad) - Wide(dilation) * (Wide(k) - 1) - 1 + (ceil_mode ? Wide(stride) - 1 : 0);
  Wide q = num / stride;
  if ((num % stride != 0) && ((num < 0) != (stride < 0))) --q;
  Wide out = q + 1;
  // ceil_mode: the last window must start inside the input (or its left padding).
  if (ceil_mode && (out - 1) * stride >= Wide(in) + pad) --out;
  if (out > std::numeric_limits<int64_t>::max() || out < std::numeric_limits<int64_t>::min())
    fail("shape_mismatch", "pooling output size " + wide_int_str(out) + " does not fit in int64");
  return static_cast<int64_t>(out);
}

// pooling_output_shape's checks, for one spatial dim.
int64_t checked_pool_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  if (stride == 0) fail("type_error", "stride should not be zero");
  if (pad < 0) fail("type_error", "pad must be non-negative, but got pad: " + std::to_string(pad));
  if (pad > k / 2)
    fail("type_error", "pad should be at most half of kernel size, but got pad=" + std::to_string(pad) +
                           " and kernel_size=" + std::to_string(k));
  return pooling_output_size(in, k, pad, stride, dilation, ceil_mode);
}

// max_pool2d_with_indices_backward: each output's gradient goes to the input element its
// index names (accumulated where windows overlap).
// The window geometry from the node's attributes (an int or a pair each; stride () is the
// kernel size), for the cuda kernel.
cuda::Pool2dGeometry pool_geometry(const Node& n) {
  auto pair = [&](const char* name, int64_t fallback_h, int64_t fallback_w) {
    const std::vector<int64_t>& v = n.attr(name).list;
    if (v.empty()) return std::pair<int64_t, int64_t>{fallback_h, fallback_w};
    return std::pair<int64_t, int64_t>{v[0], v.size() > 1 ? v[1] : v[0]};
  };
  cuda::Pool2dGeometry g;
  std::tie(g.kernel_h, g.kernel_w) = pair("kernel_size", 1, 1);
  std::tie(g.stride_h, g.stride_w) = pair("stride", g.kernel_h, g.kernel_w);
  std::tie(g.pad_h, g.pad_w) = pair("padding", 0, 0);
  std::tie(g.dilation_h, g.dilation_w) = pair("dilation", 1, 1);
  return g;
}

std::vector<Tensor> max_pool2d_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("result1"), self = n.unpack("self");
  if (kernels::device::any_on_device({&g[0], &indices}))  // cuda/pooling.cuh, one new storage
    return {kernels::device::max_pool2d_backward(g[0], indices, self->sizes, self->dtype(), pool_geometry(n))};
  const bool meta = self->is_meta();
  // A contiguous float32 gradient and the forward's own (contiguous) indices are read in
  // place. Where windows overlap, an element may take several gradients: their sum stays in
  // double, rounded once, as in the general loop, and every element of the result is written
  // from it. Where they do not (a stride of at least the dilated window, as in most CNNs'
  // pooling), each element takes at most one gradient, which is added to the zero-filled
  // result in float: 0 + g is exactly the general loop's rounded sum (also for g = -0).
  const float* g_f32 =
      !meta && self->dtype() == DType::Float32 && indices->is_contiguous() ? kernels::contiguous_f32(g[0]) : nullptr;
  const cuda::Pool2dGeometry geometry = pool_geometry(n);
  const bool overlapping = (geometry.kernel_h - 1) * geometry.dilation_h + 1 > geometry.stride_h ||
                           (geometry.kernel_w - 1) * geometry.dilation_w + 1 > geometry.stride_w;
  Tensor gx = g_f32 && overlapping ? written(self->sizes, self->dtype(), meta) : fresh(self->sizes, self->dtype(), meta);
  if (meta) return {gx};
  const int64_t height = self->sizes[self->dim() - 2], width = self->sizes[self->dim() - 1];
  const int64_t plane_in = height * width;
  const int64_t plane_out = indices->sizes[indices->dim() - 2] * indices->sizes[indices->dim() - 1];
  if (g_f32) {
    const double* index = indices->storage->f64() + indices->offset;  // int64 elements are held as doubles
    const int64_t outputs = indices->numel();
    float* out = gx->storage->f32();
    auto target = [&](int64_t o) {
      const int64_t plane = plane_out > 0 ? o / plane_out : 0;
      return static_cast<size_t>(plane * plane_in + static_cast<int64_t>(index[o]));
    };
    if (!overlapping) {
      // Plane by plane: a division per output to find its plane was most of this loop.
      if (plane_out == 0) return {gx};
      for (int64_t plane = 0; plane < outputs / plane_out; ++plane) {
        float* dst = out + plane * plane_in;
        const double* idx = index + plane * plane_out;
        const float* src = g_f32 + plane * plane_out;
        for (int64_t o = 0; o < plane_out; ++o) dst[static_cast<int64_t>(idx[o])] += src[o];
      }
      return {gx};
    }
    std::vector<double> dx(static_cast<size_t>(self->numel()), 0.0);
    for (int64_t o = 0; o < outputs; ++o) dx[target(o)] += g_f32[o];
    for (size_t i = 0; i < dx.size(); ++i) out[i] = static_cast<float>(dx[i]);
    return {gx};
  }
  const std::vector<double> iv = to_values(indices), gv = to_values(g[0]);
  std::vector<double> dx(static_cast<size_t>(self->numel()), 0.0);
  for (size_t o = 0; o < iv.size(); ++o) {
    const int64_t plane = plane_out > 0 ? static_cast<int64_t>(o) / plane_out : 0;
    dx[static_cast<size_t>(plane * plane_in + static_cast<int64_t>(iv[o]))] += gv[o];
  }
  store(gx, dx);
  return {gx};
}

std::vector<Tensor> max_pool2d_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  Tensor r = max_pool2d_backward(n, g)[0];
  if (needs_grad({&g[0], &self})) {
    auto node = make_node("MaxPool2DWithIndicesBackwardBackward0", max_pool_bb_backward, {g[0], self});
    node->save_input("indices", n.unpack("result1"));
    set_history(r, node);
  }
  return {r};
}

}  // namespace

// create_graph=True: MaxPool2DWithIndicesBackward0 records max_pool2d_with_indices_backward
// as MaxPool2DWithIndicesBackwardBackward0 (edges (grad_output, self), saving indices;
// measured). Its backward (derivatives.yaml): grad_output: max_pool_double_backward(grad,
// indices, 2), grad's values gathered at each window's argmax; self: zeros_like(self).
// Its own create_graph formula is not mirrored (third order raises unsupported).
std::vector<Tensor> max_pool_bb_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("indices");
  Tensor a, b;
  if (kernels::device::any_on_device({&g[0], &indices})) {
    // The gather on the cuda device; self's gradient zeros there.
    if (n.next[0].fn) a = kernels::device::max_pool2d_double_backward(g[0], indices, n.input_meta[0].dtype);
    if (n.next[1].fn) {
      DeviceScope scope("cuda");
      b = kernels::full(n.input_meta[1].sizes, 0.0, n.input_meta[1].dtype, false);
    }
    return {a, b};
  }
  if (n.next[0].fn) {
    const auto& m = n.input_meta[0];
    a = fresh(m.sizes, m.dtype, g[0]->is_meta());
    if (!g[0]->is_meta()) {
      const Shape& in = g[0]->sizes;
      const int64_t plane_in = in[in.size() - 2] * in[in.size() - 1];
      const int64_t plane_out = indices->sizes[indices->dim() - 2] * indices->sizes[indices->dim() - 1];
      const std::vector<double> iv = to_values(indices), gv = to_values(g[0]);
      std::vector<double> out(iv.size());
      for (size_t o = 0; o < iv.size(); ++o) {
        const int64_t plane = plane_out > 0 ? static_cast<int64_t>(o) / plane_out : 0;
        out[o] = gv[static_cast<size_t>(plane * plane_in + static_cast<int64_t>(iv[o]))];
      }
      store(a, out);
    }
  }
  if (n.next[1].fn) b = kernels::full(n.input_meta[1].sizes, 0.0, n.input_meta[1].dtype, g[0]->is_meta());
  return {a, b};
}

// ================================================================ forwards

Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  OpScope scope("layer_norm");
  const Shape ns(normalized_shape.begin(), normalized_shape.end());
  check_layer_norm_inputs(x, ns, weight, bias);
  const DType dt = x->dtype();
  const bool meta = x->is_meta();
  // The CPU kernel dispatches float, double and BFloat16 (float16: "not implemented for
  // 'Half'", measured); CUDA and meta take all four.
  const bool bf16_cpu = dt == DType::BFloat16 && !meta && !kernels::device::on_device(x);
  if (!bf16_cpu) require_kernel_dtype(x, "LayerNormKernelImpl", "layer_norm");
  require_same_dtype(x, weight, "layer_norm");
  require_same_dtype(x, bias, "layer_norm");

  const RowSplit s = split_rows(x->sizes, ns.size());
  Shape stat_shape(x->sizes.begin(), x->sizes.end() - static_cast<long>(ns.size()));
  stat_shape.resize(x->sizes.size(), 1);
  // layer_norm_cpu reads X through expect_contiguous(): a strided input is copied first
  // (a temporary PyTorch allocates too).
  Tensor xc = x->is_contiguous() ? x : kernels::copy(x);
  // float16 / bfloat16 input on meta and CUDA: mean and rstd are float32 (measured on meta:
  // _saved_result1.dtype is torch.float32). The CPU's BFloat16 kernel keeps them in
  // bfloat16 (measured: _saved_result1.dtype is torch.bfloat16).
  const DType stat_dt = bf16_cpu ? dt : dt == DType::Float16 || dt == DType::BFloat16 ? DType::Float32 : dt;
  Tensor out, mean, rstd;
  if (kernels::device::on_device(xc)) {
    // cuda/layer_norm.cuh (layer_norm_cuda also reads X contiguous): out, mean, rstd
    // allocated in this order, as below.
    kernels::device::LayerNormResult d =
        kernels::device::layer_norm(xc, weight, bias, static_cast<int64_t>(ns.size()), eps, stat_shape, stat_dt);
    out = d.out;
    mean = d.mean;
    rstd = d.rstd;
  } else {
    out = written(x->sizes, dt, meta);
    mean = written(stat_shape, stat_dt, meta);  // result1
    rstd = written(stat_shape, stat_dt, meta);  // result2
  }
  if (bf16_cpu) {
    layer_norm_forward_bf16(s, xc, weight, bias, eps, out, mean, rstd);
  } else if (!meta && !kernels::device::on_device(xc)) {
    if (dt == DType::Float32) {
      layer_norm_forward_cpu<float>(s, xc, weight, bias, eps, out, mean, rstd);
    } else {
      layer_norm_forward_cpu<double>(s, xc, weight, bias, eps, out, mean, rstd);
    }
  }
  if (needs_grad({&x, &weight, &bias})) {
    auto node = make_node("NativeLayerNormBackward0", layer_norm_backward, {x, weight, bias});
    node->differentiable_backward = layer_norm_dbackward;
    node->save_input("bias", bias, bias != nullptr);
    node->save_input("input", x);
    node->save_attr("normalized_shape", AttrValue::ints(normalized_shape));
    node->save_input("result1", mean);
    node->save_input("result2", rstd);
    node->save_input("weight", weight, weight != nullptr);
    set_history(out, node);
  }
  return out;
}

// One channel's statistics as 1.13's mixed-dtype kernel (bfloat16 input, float32
// parameters: BatchNormCollectStatsImpl<BFloat16, float>, AVX2 build) computes them, in
// float: per batch entry, 16-element blocks added into 8 float lanes (low half, then high
// half), the remainder added to a scalar; the lanes summed in order onto it; mean = sum / N.
// The variance sum runs the same way with each (x - mean)^2 added by a fused multiply-add
// (the compiler contracts the kernel's `acc += d * d`). Measured over 208 channels of 5
// shapes: 0 differences in save_mean and save_invstd (without the fused adds, 23 invstd).
struct MixedChannelStats {
  float mean, var_sum;
};

MixedChannelStats mixed_channel_stats(const std::vector<double>& xv, int64_t batch, int64_t channels, int64_t inner,
                                      int64_t c) {
  const int64_t blocked = inner - inner % 16;
  auto reduce = [&](auto&& add) {
    float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float scalar = 0.0f;
    for (int64_t b = 0; b < batch; ++b) {
      const double* row = xv.data() + (b * channels + c) * inner;
      int64_t d = 0;
      for (; d < blocked; d += 16)
        for (int half = 0; half < 2; ++half)
          for (int lane = 0; lane < 8; ++lane) add(lanes[lane], static_cast<float>(row[d + half * 8 + lane]));
      for (; d < inner; ++d) add(scalar, static_cast<float>(row[d]));
    }
    float across = 0.0f;
    for (float lane : lanes) across += lane;
    return scalar + across;
  };
  const float count = static_cast<float>(batch * inner);
  const float mean = reduce([](float& acc, float v) { acc += v; }) / count;
  auto square_add = [mean](float& acc, float v) {
    const float d = v - mean;
    acc = std::fma(d, d, acc);
  };
  const float var_sum = reduce(square_add);
  return {mean, var_sum};
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  OpScope scope("batch_norm");
  // F.batch_norm's Python-side _verify_batch_size runs first, in training only.
  if (training && x->dim() >= 1) {
    int64_t values = x->sizes[0];
    for (size_t i = 2; i < x->sizes.size(); ++i) values *= x->sizes[i];
    if (values == 1)
      fail("type_error", "Expected more than 1 value per channel when training, got input size torch.Size(" +
                             shape_str(x->sizes) + ")");
  }
  if (x->dim() < 2) fail("unsupported", "batch_norm of a tensor with fewer than 2 dimensions is not supported");
  if (x->numel() == 0) fail("unsupported", "batch_norm of an empty tensor is not supported");
  const int64_t channels = x->sizes[1];
  // _batch_norm_impl_index's checks, in its order.
  auto check_count = [&](const Tensor& t, const char* name) {
    if (t && t->numel() != channels)
      fail("shape_mismatch", std::string(name) + " should contain " + std::to_string(channels) + " elements not " +
                                 std::to_string(t->numel()),
           {{"shapes", {x->sizes, t->sizes}}});
  };
  check_count(running_mean, "running_mean");
  if (!running_mean && !training) fail("type_error", "running_mean must be defined in evaluation mode");
  check_count(running_var, "running_var");
  if (!running_var && !training) fail("type_error", "running_var must be defined in evaluation mode");
  check_count(weight, "weight");
  check_count(bias, "bias");
  // bfloat16 on the CPU, with bfloat16 or (mixed) float32 parameters: 1.13's outputs and
  // input gradients equal the exact values from its saved statistics rounded once, and the
  // statistics the exact ones rounded to the parameters' dtype (measured: 0 of 22,820
  // outputs, 0 of 22,820 input gradients; a few float32 statistics differ in the last bit).
  require_kernel_dtype(x, "batch_norm", "batch_norm", false, /*bfloat16_on_cpu=*/true);
  const DType dt = x->dtype();
  const bool meta = x->is_meta();
  // The meta kernel checks no dtypes (measured: a float16 input with float32 parameters, a
  // float32 one with bfloat16 parameters, run).
  if (!meta) check_batch_norm_dtypes(x, {weight, bias, running_mean, running_var});
  // result1/result2: on the CPU the batch statistics in the parameters' dtype in training,
  // empty [0] tensors in eval; on meta [C] tensors in float32 for a float16 / bfloat16
  // input, in its dtype otherwise, in either mode (measured).
  DType stat_dtype = dt;
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var})
    if (*p) {
      stat_dtype = (*p)->dtype();
      break;
    }
  if (meta) stat_dtype = (dt == DType::Float16 || dt == DType::BFloat16) ? DType::Float32 : dt;
  const Shape stat_shape{training || meta ? channels : 0};
  // Eval mode's invstd comes from the running variance in its accumulation type (float for
  // bfloat16 buffers: rounding it to bfloat16 changes 23 of 72 outputs, measured).
  const DType eval_invstd_dtype = stat_dtype == DType::BFloat16 ? DType::Float32 : stat_dtype;
  const bool on_device = kernels::device::any_on_device({&x, &weight, &bias, &running_mean, &running_var});
  // float32 input and statistics: the general path's arithmetic below (double sums in the
  // same order, results rounded once), reading and writing the float32 storages directly
  // instead of through vectors of doubles.
  const float* x_f32 = !meta && !on_device && dt == DType::Float32 && stat_dtype == DType::Float32
                           ? kernels::contiguous_f32(x)
                           : nullptr;
  Tensor out, save_mean, save_invstd;
  if (on_device) {
    // cuda/batch_norm.cuh: out, save_mean, save_invstd allocated in this order, as below;
    // the kernel updates the running buffers in place (their version stays 0 there too).
    kernels::device::BatchNormResult d =
        kernels::device::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
    out = d.out;
    save_mean = d.save_mean;
    save_invstd = d.save_invstd;
  } else {
    out = x_f32 ? written(x->sizes, dt, meta) : fresh(x->sizes, dt, meta);
    save_mean = fresh(stat_shape, stat_dtype, meta);
    save_invstd = fresh(stat_shape, stat_dtype, meta);
  }
  if (!meta && !on_device) {
    const int64_t batch = x->sizes[0];
    const int64_t inner = x->numel() / (batch * channels);
    const int64_t count = batch * inner;
    auto at = [&](int64_t b, int64_t c, int64_t i) { return static_cast<size_t>((b * channels + c) * inner + i); };
    const std::vector<double> xv = x_f32 ? std::vector<double>{} : to_values(x);
    const std::vector<double> wv = weight ? to_values(weight) : std::vector<double>{};
    const std::vector<double> bv = bias ? to_values(bias) : std::vector<double>{};
    std::vector<double> rmv = running_mean ? to_values(running_mean) : std::vector<double>{};
    std::vector<double> rvv = running_var ? to_values(running_var) : std::vector<double>{};
    std::vector<double> ov(x_f32 ? 0 : xv.size()), smv, siv;
    // xp: the input's elements (float32 storage or doubles), op: the output's.
    auto channels_loop = [&](const auto* xp, auto* op) {
      for (int64_t c = 0; c < channels; ++c) {
        double m, invstd;
        if (training) {
          // batch_norm_cpu_update_stats_template: mean and var_sum accumulated in double.
          double sum = 0.0;
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t i = 0; i < inner; ++i) sum += xp[at(b, c, i)];
          const double mean = sum / static_cast<double>(count);
          double var_sum = 0.0;
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t i = 0; i < inner; ++i) var_sum += (xp[at(b, c, i)] - mean) * (xp[at(b, c, i)] - mean);
          if (dt == DType::BFloat16 && stat_dtype == DType::Float32) {
            const MixedChannelStats st = mixed_channel_stats(xv, batch, channels, inner, c);
            m = st.mean;
            invstd = static_cast<float>(
                1.0 / std::sqrt(static_cast<double>(st.var_sum / static_cast<float>(count)) + eps));
            // The momentum step in float arithmetic, the unbiased variance the float var_sum
            // over n - 1 (measured: 0 differences in 54 running means; in double, 31).
            const float step = static_cast<float>(momentum), keep = 1.0f - step;
            const float unbiased = st.var_sum / static_cast<float>(count - 1);
            if (running_mean) rmv[c] = step * st.mean + keep * static_cast<float>(rmv[c]);
            if (running_var) rvv[c] = step * unbiased + keep * static_cast<float>(rvv[c]);
          } else if (stat_dtype == DType::BFloat16) {
            // bfloat16 parameters: batch_norm_cpu_update_stats_template with param_t =
            // BFloat16 keeps the mean and the variance sum (taken about the unrounded mean) as
            // bfloat16 and runs its divisions and momentum step in BFloat16 arithmetic, n and
            // the momentum rounded first (measured over 800 channels: 0 differences in the
            // statistics and the running buffers; rounding only the results differs in 35 of
            // 240 invstd values and 44 of 240 running means).
            const double mean_b = round_bf16(mean), var_sum_b = round_bf16(var_sum);
            const double step = round_bf16(momentum), keep = round_bf16(1.0 - step);
            m = mean_b;
            invstd = round_bf16(1.0 / std::sqrt(round_bf16(var_sum_b / round_bf16(static_cast<double>(count))) + eps));
            if (running_mean) rmv[c] = round_bf16(round_bf16(step * mean_b) + round_bf16(keep * rmv[c]));
            // momentum * unbiased_var is BFloat16 times float, a float.
            const double unbiased = round_bf16(var_sum_b / round_bf16(static_cast<double>(count - 1)));
            if (running_var) rvv[c] = round_bf16(round_f32(round_f32(step * unbiased) + round_bf16(keep * rvv[c])));
          } else {
            m = round_to_dtype(mean, stat_dtype);
            invstd = round_to_dtype(1.0 / std::sqrt(var_sum / static_cast<double>(count) + eps), stat_dtype);
            // The running buffers take the momentum step with the UNBIASED variance.
            if (running_mean) rmv[c] = momentum * mean + (1.0 - momentum) * rmv[c];
            if (running_var)
              rvv[c] = momentum * (var_sum / static_cast<double>(count - 1)) + (1.0 - momentum) * rvv[c];
          }
          smv.push_back(m);
          siv.push_back(invstd);
        } else {
          m = rmv[c];
          invstd = round_to_dtype(1.0 / std::sqrt(rvv[c] + eps), eval_invstd_dtype);
        }
        const double wc = weight ? wv[c] : 1.0, bc = bias ? bv[c] : 0.0;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t i = 0; i < inner; ++i) {
            using Out = std::remove_reference_t<decltype(*op)>;
            op[at(b, c, i)] = static_cast<Out>((xp[at(b, c, i)] - m) * invstd * wc + bc);
          }
      }
    };
    // A contiguous float32 input: torch's float32 arithmetic (batch_norm_cpu.hpp), its
    // channels-last statistics for one element per plane. The general path (fast paths off)
    // runs the same arithmetic on a float copy of the elements.
    const bool torch_f32_rule =
        dt == DType::Float32 && stat_dtype == DType::Float32 && x->is_contiguous() && inner > 0;
    if (torch_f32_rule) {
      std::vector<float> x_copy, out_copy;
      const float* xp = x_f32;
      if (!xp) {
        x_copy.assign(xv.begin(), xv.end());
        xp = x_copy.data();
      }
      float* op = x_f32 ? out->storage->f32() : nullptr;
      if (!op) {
        out_copy.resize(xv.size());
        op = out_copy.data();
      }
      std::vector<batch_norm_cpu::ChannelStats> stats;
      if (training)
        stats = inner == 1 ? batch_norm_cpu::moments_channels_last(xp, batch, channels, kernels::threads())
                           : batch_norm_cpu::moments(xp, batch, channels, inner);
      for (int64_t c = 0; c < channels; ++c) {
        float mean, invstd;
        if (training) {
          const batch_norm_cpu::ChannelStats& st = stats[static_cast<size_t>(c)];
          mean = st.mean;
          invstd = batch_norm_cpu::training_invstd(st, count, eps);
          float rm = running_mean ? static_cast<float>(rmv[c]) : 0.0f;
          float rv = running_var ? static_cast<float>(rvv[c]) : 0.0f;
          batch_norm_cpu::update_running(st, count, momentum, running_mean ? &rm : nullptr, running_var ? &rv : nullptr);
          if (running_mean) rmv[c] = rm;
          if (running_var) rvv[c] = rv;
          smv.push_back(mean);
          siv.push_back(invstd);
        } else {
          mean = static_cast<float>(rmv[c]);
          invstd = batch_norm_cpu::eval_invstd(static_cast<float>(rvv[c]), eps);
        }
        batch_norm_cpu::normalize_channel(xp, op, batch, channels, inner, c, mean, invstd,
                                          weight ? static_cast<float>(wv[c]) : 1.0f,
                                          bias ? static_cast<float>(bv[c]) : 0.0f);
      }
      if (!x_f32) store(out, std::vector<double>(out_copy.begin(), out_copy.end()));
    } else if (x_f32) {
      channels_loop(x_f32, out->storage->f32());
    } else {
      channels_loop(xv.data(), ov.data());
      store(out, ov);
    }
    store(save_mean, smv);
    store(save_invstd, siv);
    // In place, but not through an autograd-visible in-place op: the kernel writes the
    // buffers' memory directly, so their _version stays 0 (measured) — no bump here.
    if (training && running_mean) write_values(running_mean, rmv);
    if (training && running_var) write_values(running_var, rvv);
  }
  if (needs_grad({&x, &weight, &bias})) {
    auto node = make_node("NativeBatchNormBackward0", batch_norm_backward, {x, weight, bias});
    node->differentiable_backward = batch_norm_dbackward;
    node->save_attr("eps", AttrValue::real(eps));
    node->save_input("input", x);
    node->save_input("result1", save_mean);
    node->save_input("result2", save_invstd);
    node->save_input("running_mean", running_mean, running_mean != nullptr);
    node->save_input("running_var", running_var, running_var != nullptr);
    node->save_attr("training", AttrValue::boolean(training));
    node->save_input("weight", weight, weight != nullptr);
    set_history(out, node);
  }
  return out;
}

// ---------------------------------------------------------------- dropout
//
// at::native::_dropout_impl (1.13, CPU):
//   p == 0, !train or numel == 0  -> return input         (the same object, measured)
//   p == 1                        -> input * at::zeros({}) (MulBackward0, other f32[] at version 1)
//   else noise = empty_like(input).bernoulli_(1 - p); noise.div_(1 - p); return input * noise
// so the node is MulBackward0 with edges (input, None), _saved_other = the mask (a new
// tensor at version 2, values in {0, 1/(1-p)}) and _saved_self = None (measured).
// inplace=True is input.mul_(noise) on the same mask.
//
// The mask cannot follow PyTorch's generator; agtrace's documented rule: one
// uniform01() draw from the run-wide generator per element, in row-major order, and the
// element is kept when u >= p (probability 1 - p).

void check_dropout_probability(double p, const std::string& p_repr) {
  if (p < 0.0 || p > 1.0)
    fail("type_error", "dropout probability has to be between 0 and 1, but got " + p_repr);
}

namespace {

// The mask of dropout: one uniform01() per element in row-major order, kept when u >= p
// (the documented rule above), the same draws on either device, so a cuda run gives the
// CPU run's values and gradients. PyTorch's CUDA masks come from Philox and differ from
// its CPU ones anyway: agtrace mirrors neither generator.
std::vector<bool> dropout_keep(int64_t numel, double p, SplitMix64& gen) {
  std::vector<bool> keep(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) keep[static_cast<size_t>(i)] = gen.uniform01() >= p;
  return keep;
}

// NativeDropoutBackward0 (derivatives.yaml 1.13, native_dropout(input, p, train)):
//   input: native_dropout_backward(grad, result1, scale), scale = !train ? 1 :
//          (p == 1 ? 0.0 : 1.0 / (1.0 - p))
// = grad * mask * scale, one new storage. The CUDA kernel (masked_scale_kernel) takes scale
// as accscalar_t: float for float32, so (float)(1 / (1 - p)) (MulScalar rounds s0 so).
// dropout() reaches native_dropout only with train = True and 0 < p < 1.
double native_dropout_scale(const Node& n) {
  const double p = n.attr("p").d;
  return p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
}

std::vector<Tensor> native_dropout_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor mask = n.unpack("result1");
  Tensor r = kernels::device::binary(cuda::pw::BinaryOp::Mul, g[0], mask, n.input_meta[0].dtype,
                                     "native_dropout_backward");
  kernels::device::unary_inplace(cuda::pw::UnaryOp::MulScalar, r, native_dropout_scale(n));
  return {r};
}

// create_graph=True (GradMode on): infinitely_differentiable_native_dropout_backward(grad,
// result1, scale) = grad * (result1.type_as(grad) * scale): MulBackward0 saving other = the
// scaled float mask and self None (measured with torch.native_dropout on the CPU).
std::vector<Tensor> native_dropout_dbackward(Node& n, const std::vector<Tensor>& g) {
  Tensor mask = n.unpack("result1");
  Tensor scaled = mul(to_dtype(mask, g[0]->dtype()), wrap_number(Value::real(native_dropout_scale(n))));
  return {mul(g[0], scaled)};
}

// at::native::dropout (1.13) takes at::native_dropout when `train &&
// is_fused_kernel_acceptable(input, p)`: input.is_cuda() && p > 0 && p < 1 && numel > 0.
// native_dropout_cuda (Dropout.cu, dropout_cuda<bool>) makes the bool mask first
// (empty_like(self, kBool)), then the result, and writes result = src * mask * scale with
// scale = 1 / (accscalar_t)(1 - p) in one kernel: no version bumps (the mask reads back at
// version 0), node NativeDropoutBackward0 saving p (a float) and result1 = the mask. The
// mask is a non-differentiable output, a leaf, so SavedVariable keeps the object itself
// (measured: _saved_result1 is the mask, bool, numel bytes under pack hooks). The
// signature's `train` (bool?) is saved too but 1.13 exposes no _saved_train (measured).
// The mask's values are drawn on the host and uploaded (dropout_keep).
Tensor native_dropout(const Tensor& x, double p, SplitMix64& gen) {
  const DType d = x->dtype();
  // fused_dropout dispatches on floating types (with Half and BFloat16); what it raises for
  // the others was not measured: unsupported rather than a guessed message.
  if (!is_floating(d)) fail("unsupported", "dropout of " + dtype_name(d) + " tensors on cuda is not supported");
  const std::vector<bool> keep = dropout_keep(x->numel(), p, gen);
  Tensor mask;
  {
    DeviceScope scope("cuda");
    mask = tensor_from_values(x->sizes, DType::Bool, std::vector<double>(keep.begin(), keep.end()));
  }
  // scale in accscalar_t: float for float32 / float16 / bfloat16, double for float64.
  const double scale = d == DType::Float64 ? 1.0 / (1.0 - p)
                                           : round_to_dtype(1.0 / round_to_dtype(1.0 - p, DType::Float32), DType::Float32);
  Tensor r = kernels::device::binary(cuda::pw::BinaryOp::Mul, x, mask, d, "dropout");
  kernels::device::unary_inplace(cuda::pw::UnaryOp::MulScalar, r, scale);
  if (needs_grad({&x})) {
    auto node = make_node("NativeDropoutBackward0", native_dropout_backward, {x});
    node->differentiable_backward = native_dropout_dbackward;
    node->save_attr("p", AttrValue::real(p));
    node->save_input("result1", mask);
    set_history(r, node);
  }
  return r;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, bool inplace, SplitMix64& gen) {
  OpScope scope(inplace ? "dropout_" : "dropout");
  if (p == 0.0 || !training || x->numel() == 0) return x;
  const bool meta = x->is_meta();
  const bool on_device = kernels::device::on_device(x);
  // The in-place form stays _dropout<true> on cuda too (only dropout() checks the fused path).
  if (on_device && !inplace && p > 0.0 && p < 1.0) return native_dropout(x, p, gen);
  // On cuda the _dropout masks (at::zeros({}), empty_like(input)) are cuda tensors too.
  std::optional<DeviceScope> device_scope;
  if (on_device) device_scope.emplace("cuda");
  if (p == 1.0) {
    Tensor zero = kernels::full({}, 0.0, x->dtype(), meta);
    bump_internal(zero);  // at::zeros is empty().zero_()
    device_scope.reset();
    if (inplace) {
      mul_(x, zero);
      return x;
    }
    return mul(x, zero);
  }
  const DType d = x->dtype();
  // On meta no kernel runs: float16 / bfloat16 dropout works there (measured; issue #4).
  const bool half_on_meta = meta && (d == DType::Float16 || d == DType::BFloat16);
  if (d == DType::Float16 && !meta && !on_device)
    fail("dtype_mismatch", "\"bernoulli_scalar_cpu_\" not implemented for 'Half'");
  if (d == DType::Int64)  // the mask's div_(1 - p) on an int64 tensor
    fail("dtype_mismatch", "result type Float can't be cast to the desired output type Long");
  if (d != DType::Float32 && d != DType::Float64 && !half_on_meta)
    fail("unsupported", "dropout of " + dtype_name(d) + " tensors is not supported");
  Tensor mask;
  if (meta) {
    mask = fresh(x->sizes, d, meta);
  } else {
    const double scale = round_to_dtype(1.0 / round_to_dtype(1.0 - p, d), d);
    const std::vector<bool> keep = dropout_keep(x->numel(), p, gen);
    std::vector<double> values(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) values[i] = keep[i] ? scale : 0.0;
    mask = tensor_from_values(x->sizes, d, values);
  }
  device_scope.reset();
  bump_internal(mask);  // bernoulli_
  bump_internal(mask);  // div_
  if (inplace) {
    mul_(x, mask);
    return x;
  }
  return mul(x, mask);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx_in,
                 bool scale_grad_by_freq, bool sparse) {
  OpScope scope("embedding");
  // F.embedding (Python) normalises padding_idx and asserts it is in range first.
  int64_t padding_idx = -1;
  if (padding_idx_in) {
    if (weight->dim() == 0) fail("unsupported", "embedding with a 0-d weight is not supported");
    const int64_t rows = weight->sizes[0];
    padding_idx = *padding_idx_in;
    if ((padding_idx > 0 && padding_idx >= rows) || (padding_idx < 0 && padding_idx < -rows))
      fail("index_out_of_range", "Padding_idx must be within num_embeddings");
    if (padding_idx < 0) padding_idx += rows;
  }
  if (weight->dim() != 2) fail("shape_mismatch", "'weight' must be 2-D", {{"shape", weight->sizes}});
  if (indices->dtype() != DType::Int64) {
    const std::string got =
        indices->dtype() == DType::Bool ? "CPUBoolType" : "torch." + dtype_tensor_type(indices->dtype());
    fail("dtype_mismatch", "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           "Long, Int; but got " + got + " instead (while checking arguments for embedding)");
  }
  const int64_t rows = weight->sizes[0], dim = weight->sizes[1];
  Shape out_shape = indices->sizes;
  out_shape.push_back(dim);
  // weight.index_select(0, indices.reshape(-1)).view(...): one new [numel, dim] storage.
  const bool on_device = kernels::device::any_on_device({&indices, &weight});
  // On cuda: the indices checked on the host first (a synchronising copy: PyTorch's CUDA
  // kernel checks on the device, where a failure is a device-side assert with nothing to
  // report), with the CPU's error, then the index_select kernel.
  if (on_device && !indices->is_meta())
    for (double v : host_values(indices)) {
      const auto row = static_cast<int64_t>(v);
      if (row < 0 || row >= rows) fail("index_out_of_range", "index out of range in self", {{"index", row}});
    }
  Tensor out = on_device ? kernels::device::index_rows(weight, indices)
                         : fresh(out_shape, weight->dtype(), weight->is_meta() || indices->is_meta());
  if (!out->is_meta() && !on_device) {
    const std::vector<double> iv = to_values(indices), wv = to_values(weight);
    std::vector<double> ov;
    ov.reserve(iv.size() * static_cast<size_t>(dim));
    for (double v : iv) {
      const int64_t row = static_cast<int64_t>(v);
      if (row < 0 || row >= rows) fail("index_out_of_range", "index out of range in self", {{"index", row}});
      for (int64_t c = 0; c < dim; ++c) ov.push_back(wv[static_cast<size_t>(row * dim + c)]);
    }
    store(out, ov);
  }
  if (needs_grad({&weight})) {
    auto node = make_node("EmbeddingBackward0", embedding_backward, {weight});
    node->differentiable_backward = embedding_dbackward;
    node->save_input("indices", indices);
    node->save_attr("padding_idx", AttrValue::integer(padding_idx, /*unsigned_view=*/true));
    node->save_attr("scale_grad_by_freq", AttrValue::boolean(scale_grad_by_freq));
    node->save_attr("sparse", AttrValue::boolean(sparse));
    node->save_input("weight", weight);
    set_history(out, node);
  }
  return out;
}

namespace {

// _convolution_mode on the batched input: the padding lists 'valid' and 'same' pass on.
Conv2dArgs padding_mode_args(const std::string& mode, const Tensor& input, const Tensor& weight,
                             const Conv2dArgs& args) {
  Conv2dArgs a = args;
  if (mode == "valid") {
    // _convolution_mode passes padding {0} and output_padding {0} (measured: both read
    // back as (0,)).
    a.padding = {0};
    a.output_padding = {0};
    return a;
  }
  if (mode != "same") fail("type_error", "Invalid padding string: '" + mode + "'");
  // convolution_same
  const int64_t k = weight->dim();
  if (k <= 2) fail("shape_mismatch", "weight should have at least three dimensions");
  if (k != input->dim())
    fail("shape_mismatch", "Expected " + std::to_string(k) + "-dimensional input for " + std::to_string(k) +
                               "-dimensional weight" + shape_str(weight->sizes) + ", but got " +
                               std::to_string(input->dim()) + "-dimensional input of size " +
                               shape_str(input->sizes) + " instead");
  const size_t dims = static_cast<size_t>(k - 2);
  if (a.stride.size() != dims && a.stride.size() != 1)
    fail("type_error", "stride cannot broadcast to " + std::to_string(dims) + " dimensions");
  if (a.dilation.size() != dims && a.dilation.size() != 1)
    fail("type_error", "dilation cannot broadcast to " + std::to_string(dims) + " dimensions");
  for (int64_t s : a.stride)
    if (s != 1) fail("type_error", "padding='same' is not supported for strided convolutions");
  std::vector<int64_t> padding;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t d = a.dilation.size() == 1 ? a.dilation[0] : a.dilation[i];
    const int64_t total = d * (weight->sizes[2 + i] - 1);
    // An odd total pads asymmetrically through F.pad (a ConstantPadNdBackward0 node before
    // the convolution, measured); not mirrored.
    if (total % 2 != 0)
      fail("unsupported", "padding='same' with asymmetric padding (even kernel size and odd dilation) is not "
                          "supported");
    padding.push_back(total / 2);
  }
  a.padding = padding;
  a.output_padding = std::vector<int64_t>(dims, 0);
  return a;
}

// The convolution of a batched input (the node and its saved values are the same for
// conv1d and conv2d, measured: ConvolutionBackward0 with the lists as given).
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args,
                   size_t spatial, const char* op) {
  check_convolution(input, weight, bias, args, spatial, op);
  const ConvGeometry c = conv_geometry(input->sizes, weight->sizes, args.stride, args.padding, args.dilation,
                                       args.groups);
  const bool meta = input->is_meta();
  const bool on_device = kernels::device::any_on_device({&input, &weight, &bias});
  // cuda/conv.cuh takes 4-D tensors only; a 1-D convolution has no cuda route yet.
  if (on_device && spatial == 1) fail("unsupported", std::string(op) + " on cuda is not supported");
  // On cuda: cuda/conv.cuh (im2col and products), the same one new storage. On the host
  // every element is written below: no zero-fill first.
  Tensor out = on_device ? kernels::device::conv2d(input, weight, bias, device_geometry(c), conv_output_shape(c, 2))
                         : written(conv_output_shape(c, spatial), input->dtype(), meta);
  if (!meta && !on_device) {
    if (input->dtype() == DType::Float32)
      conv_forward_in<float>(c, input, weight, bias, out);
    else if (conv_bf16_takes_slow_conv2d(input))
      conv_forward_slow_bf16(c, input, weight, bias, out);
    else
      conv_forward_exact(c, input, weight, bias, out);
  }
  if (needs_grad({&input, &weight, &bias})) {
    auto node = make_node("ConvolutionBackward0", conv2d_backward, {input, weight, bias});
    node->differentiable_backward = conv2d_dbackward;
    node->save_attr("bias_sym_sizes_opt", AttrValue::ints(bias ? std::vector<int64_t>(bias->sizes.begin(), bias->sizes.end())
                                                               : std::vector<int64_t>{0}));
    node->save_attr("dilation", AttrValue::ints(args.dilation));
    node->save_attr("groups", AttrValue::integer(args.groups));
    node->save_input("input", input);
    node->save_attr("output_padding", AttrValue::ints(args.output_padding));
    node->save_attr("padding", AttrValue::ints(args.padding));
    node->save_attr("stride", AttrValue::ints(args.stride));
    node->save_attr("transposed", AttrValue::boolean(false));
    node->save_input("weight", weight);
    set_history(out, node);
  }
  return out;
}

}  // namespace

Conv2dArgs conv2d_padding_mode(const std::string& mode, const Tensor& input, const Tensor& weight,
                               const Conv2dArgs& args) {
  if (mode == "valid") return padding_mode_args(mode, input, weight, args);
  if (mode != "same") fail("type_error", "Invalid padding string: '" + mode + "'");
  check_conv_input_rank(input, 2, "conv2d");
  // An unbatched input is unsqueezed and the output squeezed (UnsqueezeBackward0 and
  // SqueezeBackward1 around the convolution, measured); not mirrored for conv2d yet.
  if (input->dim() == 3) fail("unsupported", "conv2d of an unbatched (3-D) input is not supported");
  return padding_mode_args(mode, input, weight, args);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args) {
  OpScope scope("conv2d");
  check_conv_input_rank(input, 2, "conv2d");
  if (input->dim() == 3) fail("unsupported", "conv2d of an unbatched (3-D) input is not supported");
  return convolution(input, weight, bias, args, 2, "conv2d");
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args,
              const std::string& padding_mode) {
  OpScope scope("conv1d");
  check_conv_input_rank(input, 1, "conv1d");
  // An unbatched (C, L) input runs as unsqueeze(0), the convolution and squeeze(0):
  // SqueezeBackward1 (dim 0) over ConvolutionBackward0, whose saved input is the [1, C, L]
  // view, over UnsqueezeBackward0 (measured).
  const bool batched = input->dim() == 3;
  const Tensor x = batched ? input : unsqueeze(input, 0);
  const Conv2dArgs a = padding_mode.empty() ? args : padding_mode_args(padding_mode, x, weight, args);
  const Tensor y = convolution(x, weight, bias, a, 1, "conv1d");
  return batched ? y : squeeze(y, 0);
}

MaxPool2dResult max_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode) {
  OpScope scope("max_pool2d");
  // max_pool2d_with_indices' meta function, in its order (messages measured).
  if (kernel_size.size() != 1 && kernel_size.size() != 2)
    fail("type_error", "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  if (stride.size() > 2)
    fail("type_error", "max_pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  if (padding.size() != 1 && padding.size() != 2)
    fail("type_error", "max_pool2d: padding must either be a single int, or a tuple of two ints");
  if (dilation.size() != 1 && dilation.size() != 2)
    fail("type_error", "max_pool2d: dilation must be either a single int, or a tuple of two ints");
  // max_pool2d_with_indices' meta function narrows every parameter with safe_downcast<int>
  // (measured: stride, dilation or kernel_size of 2**31 raise "integer out of range").
  for (const std::vector<int64_t>* list : {&kernel_size, &stride, &padding, &dilation})
    for (int64_t v : *list)
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        fail("index_out_of_range", "integer out of range");
  PoolGeometry p{};
  p.kh = kernel_size[0], p.kw = kernel_size.back();
  p.sh = stride.empty() ? p.kh : stride[0];
  p.sw = stride.empty() ? p.kw : stride.back();
  p.ph = padding[0], p.pw = padding.back();
  p.dh = dilation[0], p.dw = dilation.back();
  if (input->dim() != 3 && input->dim() != 4)
    fail("shape_mismatch", "non-empty 3D or 4D (batch mode) tensor expected for input", {{"shape", input->sizes}});
  const int64_t nd = input->dim();
  p.height = input->sizes[nd - 2];
  p.width = input->sizes[nd - 1];
  const int64_t channels = input->sizes[nd - 3];
  p.out_h = checked_pool_size(p.height, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.out_w = checked_pool_size(p.width, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  // pool2d_shape_check
  if (p.kw <= 0 || p.kh <= 0)
    fail("type_error", "kernel size should be greater than zero, but got kH: " + std::to_string(p.kh) +
                           " kW: " + std::to_string(p.kw));
  if (p.sw <= 0 || p.sh <= 0)
    fail("type_error", "stride should be greater than zero, but got dH: " + std::to_string(p.sh) +
                           " dW: " + std::to_string(p.sw));
  if (p.dh <= 0 || p.dw <= 0)
    fail("type_error", "dilation should be greater than zero, but got dilationH: " + std::to_string(p.dh) +
                           " dilationW: " + std::to_string(p.dw));
  const bool valid_dims = input->sizes[1] != 0 && input->sizes[2] != 0;
  if (!((nd == 3 && input->sizes[0] != 0 && valid_dims) || (nd == 4 && valid_dims && input->sizes[3] != 0)))
    fail("shape_mismatch", "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:" +
                               shape_str(input->sizes));
  if (p.out_w < 1 || p.out_h < 1)
    fail("shape_mismatch", "Given input size: (" + std::to_string(channels) + "x" + std::to_string(p.height) + "x" +
                               std::to_string(p.width) + "). Calculated output size: (" + std::to_string(channels) +
                               "x" + std::to_string(p.out_h) + "x" + std::to_string(p.out_w) +
                               "). Output size is too small",
         {{"shape", input->sizes}});
  // bfloat16 on the CPU: a maximum is exact in any dtype (measured equal to float64's).
  require_kernel_dtype(input, "max_pool2d", "max_pool2d", false, /*bfloat16_on_cpu=*/true);

  p.planes = input->numel() / std::max<int64_t>(p.height * p.width, 1);
  Shape out_shape = input->sizes;
  out_shape[nd - 2] = p.out_h;
  out_shape[nd - 1] = p.out_w;
  const bool meta = input->is_meta();
  // A contiguous float32 input is read in place and the results written directly (every
  // element is written: no zero-fill first).
  const float* x_f32 = meta || kernels::device::on_device(input) ? nullptr : kernels::contiguous_f32(input);
  Tensor out = x_f32 ? written(out_shape, input->dtype(), meta) : fresh(out_shape, input->dtype(), meta);
  Tensor indices = x_f32 ? written(out_shape, DType::Int64, meta) : fresh(out_shape, DType::Int64, meta);  // result1
  if (kernels::device::on_device(input)) {
    cuda::Pool2dGeometry g;
    g.kernel_h = p.kh;
    g.kernel_w = p.kw;
    g.stride_h = p.sh;
    g.stride_w = p.sw;
    g.pad_h = p.ph;
    g.pad_w = p.pw;
    g.dilation_h = p.dh;
    g.dilation_w = p.dw;
    kernels::device::max_pool2d(out, indices, input, g);
  } else if (x_f32) {
    // int64 indices are held as doubles.
    max_pool_windows_f32(p, x_f32, out->storage->f32(), indices->storage->f64());
  } else if (!meta) {
    const std::vector<double> xv = to_values(input);
    std::vector<double> ov(static_cast<size_t>(out->numel())), iv(ov.size());
    max_pool_windows(p, xv.data(), ov.data(), iv.data());
    store(out, ov);
    store(indices, iv);
  }
  if (needs_grad({&input})) {
    auto node = make_node("MaxPool2DWithIndicesBackward0", max_pool2d_backward, {input});
    node->differentiable_backward = max_pool2d_dbackward;
    node->save_attr("ceil_mode", AttrValue::boolean(ceil_mode));
    node->save_attr("dilation", AttrValue::ints(dilation));
    node->save_attr("kernel_size", AttrValue::ints(kernel_size));
    node->save_attr("padding", AttrValue::ints(padding));
    node->save_input("result1", indices);
    node->save_input("self", input);
    node->save_attr("stride", AttrValue::ints(stride));
    set_history(out, node);
  }
  return {out, indices};
}

int64_t checked_pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                                    bool ceil_mode) {
  return checked_pool_size(in, kernel, pad, stride, dilation, ceil_mode);
}

}  // namespace agtrace::ops
