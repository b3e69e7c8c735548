#include "support/sim_device.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace agtrace::testing {

namespace {
int64_t round_block(int64_t bytes) { return bytes == 0 ? 0 : std::max<int64_t>(512, (bytes + 511) / 512 * 512); }
}  // namespace

SimulatedDevice::~SimulatedDevice() = default;

void* SimulatedDevice::allocate(int64_t bytes, const char*) {
  if (bytes == 0) return nullptr;
  auto b = std::make_unique<Block>();
  b->bytes = bytes;
  b->elements.assign(static_cast<size_t>(bytes), 0.0);
  void* p = b.get();
  blocks_[p] = std::move(b);
  stats_.requested_live += bytes;
  stats_.block_live += round_block(bytes);
  stats_.reserved_live += round_block(bytes);
  stats_.requested_peak = std::max(stats_.requested_peak, stats_.requested_live);
  stats_.block_peak = std::max(stats_.block_peak, stats_.block_live);
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved_live);
  ++stats_.driver_calls;
  return p;
}

void SimulatedDevice::release(void* p) noexcept {
  if (!p) return;
  auto it = blocks_.find(p);
  if (it == blocks_.end()) std::terminate();  // a pointer this device never handed out: a bug
  const int64_t bytes = it->second->bytes;
  stats_.requested_live -= bytes;
  stats_.block_live -= round_block(bytes);
  stats_.reserved_live -= round_block(bytes);
  ++stats_.driver_calls;
  blocks_.erase(it);
}

SimulatedDevice::Block& SimulatedDevice::block(const void* p, const char* op) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) throw std::logic_error(std::string(op) + ": not a buffer of the simulated device");
  return *it->second;
}

void SimulatedDevice::zero(void* p, int64_t, const char* op) {
  Block& b = block(p, op);
  std::fill(b.elements.begin(), b.elements.end(), 0.0);
}

void SimulatedDevice::upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) {
  Block& b = block(dst, op);
  if (n * dtype_size(dtype) > b.bytes) throw std::logic_error(std::string(op) + ": upload past the buffer's end");
  std::copy(src, src + n, b.elements.begin());
  uploads += n;
}

void SimulatedDevice::download(double* dst, const void* src, DType dtype, int64_t n, const char* op) {
  const Block& b = block(src, op);
  if (n * dtype_size(dtype) > b.bytes) throw std::logic_error(std::string(op) + ": download past the buffer's end");
  std::copy(b.elements.begin(), b.elements.begin() + n, dst);
  downloads += n;
}

}  // namespace agtrace::testing

namespace agtrace::testing {

namespace {
// A compute type as lib/cuda's kernels choose it: double when an operand (or the result)
// is float64 or int64, float otherwise (PyTorch's opmath for float32/16/bf16).
bool needs_double(std::initializer_list<const cuda::DeviceTensorRef*> ts) {
  for (const cuda::DeviceTensorRef* t : ts)
    if (t->dtype == DType::Float64 || t->dtype == DType::Int64) return true;
  return false;
}

double to_compute(double v, bool dbl) { return dbl ? v : static_cast<double>(static_cast<float>(v)); }

// Storage index of element `linear` of a tensor of `sizes`/`strides`/`offset` broadcast to
// `shape` (aligned from the last dim; a missing or size-1 dim repeats).
int64_t broadcast_offset(const cuda::DeviceTensorRef& t, const Shape& shape, int64_t linear) {
  int64_t off = t.offset;
  const size_t nd = shape.size(), td = t.sizes.size();
  for (size_t k = 0; k < nd; ++k) {
    const size_t d = nd - 1 - k;
    const int64_t i = linear % shape[d];
    linear /= shape[d];
    if (k < td) {
      const size_t e = td - 1 - k;
      if (t.sizes[e] != 1) off += i * t.strides[e];
    }
  }
  return off;
}
}  // namespace

double SimulatedDevice::load(const cuda::DeviceTensorRef& t, const Shape& shape, int64_t linear) {
  const Block& b = block(t.data, "load");
  return b.elements[static_cast<size_t>(broadcast_offset(t, shape, linear))];
}

void SimulatedDevice::store(const cuda::DeviceTensorRef& out, int64_t linear, double v) {
  Block& b = block(out.data, "store");
  double stored = v;
  if (out.dtype == DType::Int64) stored = std::trunc(v);
  else if (out.dtype == DType::Bool) stored = v != 0 ? 1.0 : 0.0;
  else stored = round_to_dtype(v, out.dtype);
  b.elements[static_cast<size_t>(broadcast_offset(out, out.sizes, linear))] = stored;
}

template <typename F>
void SimulatedDevice::pointwise(const cuda::DeviceTensorRef& out, std::initializer_list<const cuda::DeviceTensorRef*> in,
                                F&& f) {
  ++launches;
  const int64_t n = out.numel();
  // Inputs are read before the output is written, element by element in the same order:
  // in place (out aliasing an input at the same index) is fine, as on the GPU.
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < n; ++i) {
    size_t k = 0;
    for (const cuda::DeviceTensorRef* t : in) args[k++] = load(*t, out.sizes, i);
    store(out, i, f(args));
  }
}

void SimulatedDevice::copy(const cuda::DeviceTensorRef& dst, const cuda::DeviceTensorRef& src) {
  pointwise(dst, {&src}, [](const std::vector<double>& v) { return v[0]; });
}

void SimulatedDevice::fill(const cuda::DeviceTensorRef& dst, double value) {
  pointwise(dst, {}, [value](const std::vector<double>&) { return value; });
}

void SimulatedDevice::unary(cuda::pw::UnaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                            double s0, double s1) {
  const bool dbl = needs_double({&out, &in});
  pointwise(out, {&in}, [&](const std::vector<double>& v) {
    if (dbl) return cuda::pw::unary_formula<double>(op, v[0], s0, s1);
    return static_cast<double>(cuda::pw::unary_formula<float>(op, static_cast<float>(v[0]), static_cast<float>(s0),
                                                              static_cast<float>(s1)));
  });
}

void SimulatedDevice::binary(cuda::pw::BinaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                             const cuda::DeviceTensorRef& b, double s0) {
  const bool dbl = needs_double({&out, &a, &b});
  pointwise(out, {&a, &b}, [&](const std::vector<double>& v) {
    if (dbl) return cuda::pw::binary_formula<double>(op, v[0], v[1], s0);
    return static_cast<double>(cuda::pw::binary_formula<float>(op, static_cast<float>(v[0]), static_cast<float>(v[1]),
                                                               static_cast<float>(s0)));
  });
}

void SimulatedDevice::ternary(cuda::pw::TernaryOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                              const cuda::DeviceTensorRef& b, const cuda::DeviceTensorRef& c, double s0, double s1) {
  const bool dbl = op == cuda::pw::TernaryOp::Where ? needs_double({&out, &b, &c}) : needs_double({&out, &a, &b, &c});
  pointwise(out, {&a, &b, &c}, [&](const std::vector<double>& v) {
    if (dbl) return cuda::pw::ternary_formula<double>(op, v[0], v[1], v[2], s0, s1);
    return static_cast<double>(cuda::pw::ternary_formula<float>(op, static_cast<float>(v[0]), static_cast<float>(v[1]),
                                                                static_cast<float>(v[2]), static_cast<float>(s0),
                                                                static_cast<float>(s1)));
  });
}

void SimulatedDevice::reduce(cuda::ReduceOp op, const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                             const std::vector<int64_t>& dims, bool) {
  ++launches;
  // Reduced dims of `in` (empty: all), then one accumulator per output element in the
  // kernel's type: float for float32/16/bf16 inputs, double otherwise (lib/cuda/reduce.cu).
  const size_t nd = in.sizes.size();
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + static_cast<int64_t>(nd) : d)] = true;
  const bool dbl = in.dtype == DType::Float64 || in.dtype == DType::Int64 || in.dtype == DType::Bool ||
                   out.dtype == DType::Float64 || out.dtype == DType::Int64 || out.dtype == DType::Bool;
  const int64_t n_out = out.numel();
  std::vector<double> acc(static_cast<size_t>(n_out), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(n_out), 0);
  const int64_t n_in = in.numel();
  for (int64_t i = 0; i < n_in; ++i) {
    // Output index: the kept dims of i's multi-index, row-major.
    int64_t rest = i, o = 0, scale = 1;
    for (size_t k = nd; k-- > 0;) {
      const int64_t idx = rest % in.sizes[k];
      rest /= in.sizes[k];
      if (!reduced[k]) {
        o += idx * scale;
        scale *= in.sizes[k];
      }
    }
    const double v = load(in, in.sizes, i);
    double& a = acc[static_cast<size_t>(o)];
    if (op == cuda::ReduceOp::Sum || op == cuda::ReduceOp::Mean) a = to_compute(a + v, dbl);
    else if (count[static_cast<size_t>(o)] == 0) a = v;
    else if (op == cuda::ReduceOp::Amax) a = (a != a || v != v) ? (a != a ? a : v) : std::max(a, v);
    else a = (a != a || v != v) ? (a != a ? a : v) : std::min(a, v);
    ++count[static_cast<size_t>(o)];
  }
  for (int64_t o = 0; o < n_out; ++o) {
    double r = acc[static_cast<size_t>(o)];
    if (op == cuda::ReduceOp::Mean) r = to_compute(r * to_compute(1.0 / static_cast<double>(count[static_cast<size_t>(o)]), dbl), dbl);
    store(out, o, r);
  }
}

void SimulatedDevice::matmul(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& a,
                             const cuda::DeviceTensorRef& b) {
  ++launches;
  // (n, k) @ (k, m), accumulating in float for float32 as cuBLAS's sgemm does.
  // Batched (B, n, k) @ (B, k, m) too, as the launcher (a size-1 batch dim broadcasts).
  const bool dbl = needs_double({&out, &a, &b});
  const size_t nd = a.sizes.size();
  if (nd < 2 || nd > 3 || b.sizes.size() != nd || out.sizes.size() != nd)
    throw std::runtime_error("matmul: operands must be matrices or batches of matrices");
  const int64_t batch = nd == 3 ? out.sizes[0] : 1;
  const int64_t n = a.sizes[nd - 2], k = a.sizes[nd - 1], m = b.sizes[nd - 1];
  const int64_t abs_ = nd == 3 && a.sizes[0] != 1 ? a.strides[0] : 0;
  const int64_t bbs = nd == 3 && b.sizes[0] != 1 ? b.strides[0] : 0;
  const Block& ba = block(a.data, "matmul");
  const Block& bb = block(b.data, "matmul");
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = ba.elements[static_cast<size_t>(a.offset + q * abs_ + i * a.strides[nd - 2] +
                                                           p * a.strides[nd - 1])];
          const double y = bb.elements[static_cast<size_t>(b.offset + q * bbs + p * b.strides[nd - 2] +
                                                           j * b.strides[nd - 1])];
          s = to_compute(s + to_compute(x * y, dbl), dbl);
        }
        store(out, (q * n + i) * m + j, s);
      }
}

namespace {
int64_t offset_of(const cuda::DeviceTensorRef& t, const std::vector<int64_t>& idx) {
  int64_t off = t.offset;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
  return off;
}
// The multi-index of element `linear` (row-major) of `sizes`.
std::vector<int64_t> unravel(int64_t linear, const Shape& sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t k = sizes.size(); k-- > 0;) {
    idx[k] = linear % sizes[k];
    linear /= sizes[k];
  }
  return idx;
}
int64_t wrap(int64_t dim, size_t nd) { return dim < 0 ? dim + static_cast<int64_t>(nd) : dim; }
int64_t dim_size(const cuda::DeviceTensorRef& t, int64_t d) {
  return t.sizes.empty() ? 1 : t.sizes[static_cast<size_t>(d)];
}
// idx with its coordinate along d set to k (a 0-d tensor has none).
std::vector<int64_t> at_dim(std::vector<int64_t> idx, int64_t d, int64_t k) {
  if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
  return idx;
}
// An index value, checked against [0, size) as the indexing kernels check it on the device.
int64_t checked_index(double v, int64_t size, const char* op) {
  const int64_t k = static_cast<int64_t>(v);
  if (k < 0 || k >= size) throw std::runtime_error(std::string(op) + ": index " + std::to_string(k) + " out of range");
  return k;
}
// Rows along `dim` of a tensor of `sizes` (every index but dim), as multi-indices with
// idx[dim] = 0, row-major; a 0-d tensor is one row of one element.
std::vector<std::vector<int64_t>> rows_along(const Shape& sizes, int64_t dim) {
  Shape outer = sizes;
  if (!outer.empty()) outer[static_cast<size_t>(dim)] = 1;
  int64_t n = 1;
  for (int64_t s : outer) n *= s;
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(unravel(i, outer));
  return rows;
}
}  // namespace

double SimulatedDevice::load_at(const cuda::DeviceTensorRef& t, const std::vector<int64_t>& idx) {
  return block(t.data, "load").elements[static_cast<size_t>(offset_of(t, idx))];
}

void SimulatedDevice::store_at(const cuda::DeviceTensorRef& t, const std::vector<int64_t>& idx, double v) {
  double stored = v;
  if (t.dtype == DType::Int64) stored = std::trunc(v);
  else if (t.dtype == DType::Bool) stored = v != 0 ? 1.0 : 0.0;
  else stored = round_to_dtype(v, t.dtype);
  block(t.data, "store").elements[static_cast<size_t>(offset_of(t, idx))] = stored;
}

void SimulatedDevice::max_dim(const cuda::DeviceTensorRef& values, const cuda::DeviceTensorRef& indices,
                              const cuda::DeviceTensorRef& in, int64_t dim, bool, bool is_min) {
  ++launches;
  // NaN wins; among equal values the lowest index (GreaterOrNan / LessOrNan).
  const int64_t d = wrap(dim, in.sizes.size());
  const int64_t len = in.sizes.empty() ? 1 : in.sizes[static_cast<size_t>(d)];
  if (len == 0) throw std::runtime_error("max_dim: reduction over an empty dimension");
  int64_t row = 0;
  for (std::vector<int64_t> idx : rows_along(in.sizes, d)) {
    double best = 0;
    int64_t at = 0;
    for (int64_t k = 0; k < len; ++k) {
      if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
      const double v = load_at(in, idx);
      const bool better = k == 0 || (best == best && (v != v || (is_min ? v < best : v > best)));
      if (better) {
        best = v;
        at = k;
      }
    }
    store(values, row, best);
    store(indices, row, static_cast<double>(at));
    ++row;
  }
}

void SimulatedDevice::softmax(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim, bool log) {
  ++launches;
  // Per row: max, then sum of exp(x - max), accumulated in float for float32 (accscalar_t).
  const bool dbl = needs_double({&out, &in});
  const int64_t d = wrap(dim, in.sizes.size());
  const int64_t len = in.sizes.empty() ? 1 : in.sizes[static_cast<size_t>(d)];
  for (std::vector<int64_t> idx : rows_along(in.sizes, d)) {
    std::vector<double> x(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) {
      if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
      x[static_cast<size_t>(k)] = load_at(in, idx);
    }
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (double v : x) mx = std::max(mx, v);
    for (double v : x) sum = to_compute(sum + to_compute(std::exp(to_compute(v - mx, dbl)), dbl), dbl);
    for (int64_t k = 0; k < len; ++k) {
      if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
      const double v = x[static_cast<size_t>(k)];
      const double y = log ? to_compute(to_compute(v - mx, dbl) - to_compute(std::log(sum), dbl), dbl)
                           : to_compute(to_compute(std::exp(to_compute(v - mx, dbl)), dbl) / sum, dbl);
      store_at(out, idx, y);
    }
  }
}

void SimulatedDevice::softmax_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                                       const cuda::DeviceTensorRef& output, int64_t dim, bool log) {
  ++launches;
  // softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g); sums in the acc type.
  const bool dbl = needs_double({&grad_in, &grad_out, &output});
  const int64_t d = wrap(dim, output.sizes.size());
  const int64_t len = output.sizes.empty() ? 1 : output.sizes[static_cast<size_t>(d)];
  for (std::vector<int64_t> idx : rows_along(output.sizes, d)) {
    double acc = 0;
    for (int64_t k = 0; k < len; ++k) {
      if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
      const double g = load_at(grad_out, idx), y = load_at(output, idx);
      acc = to_compute(acc + (log ? g : to_compute(g * y, dbl)), dbl);
    }
    for (int64_t k = 0; k < len; ++k) {
      if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
      const double g = load_at(grad_out, idx), y = load_at(output, idx);
      const double r = log ? to_compute(g - to_compute(to_compute(std::exp(y), dbl) * acc, dbl), dbl)
                           : to_compute(y * to_compute(g - acc, dbl), dbl);
      store_at(grad_in, idx, r);
    }
  }
}

namespace {
// Rows (M) and row length (N) of a layer_norm over the last `normalized_ndim` dims.
std::pair<int64_t, int64_t> rows_cols(const Shape& sizes, int64_t normalized_ndim) {
  int64_t m = 1, n = 1;
  for (size_t k = 0; k < sizes.size(); ++k)
    (static_cast<int64_t>(k) < static_cast<int64_t>(sizes.size()) - normalized_ndim ? m : n) *= sizes[k];
  return {m, n};
}
// The normalized (last normalized_ndim) dims: weight's and bias's shape.
Shape normalized_shape(const Shape& sizes, int64_t normalized_ndim) {
  return Shape(sizes.end() - normalized_ndim, sizes.end());
}
}  // namespace

void SimulatedDevice::layer_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& mean,
                                 const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef& in,
                                 const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias,
                                 int64_t normalized_ndim, double eps) {
  ++launches;
  // The launcher's contract: mean, then the mean of squared deviations (biased), rstd =
  // rsqrt(max(var, 0) + eps), y = (x - mean) * rstd * weight + bias, in float for float32.
  const bool dbl = needs_double({&out, &in});
  const auto [m, n] = rows_cols(in.sizes, normalized_ndim);
  const Shape wshape = normalized_shape(in.sizes, normalized_ndim);
  for (int64_t r = 0; r < m; ++r) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s = to_compute(s + load(in, in.sizes, r * n + j), dbl);
    const double mu = to_compute(s / static_cast<double>(n), dbl);
    double q = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double dv = to_compute(load(in, in.sizes, r * n + j) - mu, dbl);
      q = to_compute(q + to_compute(dv * dv, dbl), dbl);
    }
    const double var = to_compute(q / static_cast<double>(n), dbl);
    const double rs = to_compute(1.0 / std::sqrt(to_compute(std::max(var, 0.0) + eps, dbl)), dbl);
    store(mean, r, mu);
    store(rstd, r, rs);
    for (int64_t j = 0; j < n; ++j) {
      double y = to_compute(to_compute(load(in, in.sizes, r * n + j) - mu, dbl) * rs, dbl);
      if (weight) y = to_compute(y * load(*weight, wshape, j), dbl);
      if (bias) y = to_compute(y + load(*bias, wshape, j), dbl);
      store(out, r * n + j, y);
    }
  }
}

void SimulatedDevice::layer_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                                          const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                                          const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& mean,
                                          const cuda::DeviceTensorRef& rstd, const cuda::DeviceTensorRef* weight,
                                          int64_t normalized_ndim) {
  ++launches;
  // g = dy * weight, xhat = (x - mean) * rstd; dx = rstd / N * (N g - sum(g) - xhat *
  // sum(g xhat)); dweight = sum over rows of dy xhat; dbias = sum over rows of dy.
  const bool dbl = needs_double({&grad_out, &in});
  const auto [m, n] = rows_cols(in.sizes, normalized_ndim);
  const Shape wshape = normalized_shape(in.sizes, normalized_ndim);
  std::vector<double> dw(static_cast<size_t>(n), 0.0), db(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < m; ++r) {
    const double mu = load(mean, mean.sizes, r), rs = load(rstd, rstd.sizes, r);
    std::vector<double> g(static_cast<size_t>(n)), xh(static_cast<size_t>(n));
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double dy = load(grad_out, in.sizes, r * n + j);
      const double x = load(in, in.sizes, r * n + j);
      const size_t jj = static_cast<size_t>(j);
      xh[jj] = to_compute(to_compute(x - mu, dbl) * rs, dbl);
      g[jj] = weight ? to_compute(dy * load(*weight, wshape, j), dbl) : dy;
      sg = to_compute(sg + g[jj], dbl);
      sgx = to_compute(sgx + to_compute(g[jj] * xh[jj], dbl), dbl);
      dw[jj] = to_compute(dw[jj] + to_compute(dy * xh[jj], dbl), dbl);
      db[jj] = to_compute(db[jj] + dy, dbl);
    }
    if (!grad_in) continue;
    const double scale = to_compute(rs / static_cast<double>(n), dbl);
    for (int64_t j = 0; j < n; ++j) {
      const size_t jj = static_cast<size_t>(j);
      const double inner = to_compute(
          to_compute(to_compute(static_cast<double>(n) * g[jj], dbl) - sg, dbl) - to_compute(xh[jj] * sgx, dbl), dbl);
      store(*grad_in, r * n + j, to_compute(scale * inner, dbl));
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    if (grad_weight) store(*grad_weight, j, dw[static_cast<size_t>(j)]);
    if (grad_bias) store(*grad_bias, j, db[static_cast<size_t>(j)]);
  }
}

void SimulatedDevice::index_select(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
                                   const cuda::DeviceTensorRef& index) {
  ++launches;
  const int64_t d = wrap(dim, in.sizes.size());
  const int64_t size = dim_size(in, d);
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx = unravel(i, out.sizes);
    const int64_t pos = idx.empty() ? 0 : idx[static_cast<size_t>(d)];
    store(out, i, load_at(in, at_dim(idx, d, checked_index(load(index, index.sizes, pos), size, "index_select"))));
  }
}

void SimulatedDevice::index_add(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
                                const cuda::DeviceTensorRef& src) {
  ++launches;
  const bool dbl = needs_double({&out, &src});
  const int64_t d = wrap(dim, out.sizes.size());
  const int64_t size = dim_size(out, d);
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx = unravel(i, src.sizes);
    const int64_t pos = idx.empty() ? 0 : idx[static_cast<size_t>(d)];
    const int64_t k = checked_index(load(index, index.sizes, pos), size, "index_add");
    const double v = load(src, src.sizes, i);
    if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
    store_at(out, idx, to_compute(load_at(out, idx) + v, dbl));
  }
}

void SimulatedDevice::max_pool2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& indices,
                                 const cuda::DeviceTensorRef& in, const cuda::Pool2dGeometry& g) {
  ++launches;
  // The launcher's contract: each window clipped to the input, its first valid position the
  // initial index, the maximum from -inf, replaced when `v > max || isnan(v)`.
  const size_t nd = in.sizes.size();
  const int64_t height = in.sizes[nd - 2], width = in.sizes[nd - 1];
  const int64_t out_h = out.sizes[nd - 2], out_w = out.sizes[nd - 1];
  const int64_t planes = in.numel() / std::max<int64_t>(height * width, 1);
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow) {
        int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
        const int64_t h1 = std::min(h0 + (g.kernel_h - 1) * g.dilation_h + 1, height);
        const int64_t w1 = std::min(w0 + (g.kernel_w - 1) * g.dilation_w + 1, width);
        while (h0 < 0) h0 += g.dilation_h;
        while (w0 < 0) w0 += g.dilation_w;
        int64_t best = h0 * width + w0;
        double best_v = -std::numeric_limits<double>::infinity();
        for (int64_t h = h0; h < h1; h += g.dilation_h)
          for (int64_t w = w0; w < w1; w += g.dilation_w) {
            const double v = load(in, in.sizes, plane * height * width + h * width + w);
            if (v > best_v || v != v) {
              best_v = v;
              best = h * width + w;
            }
          }
        const int64_t o = (plane * out_h + oh) * out_w + ow;
        store(out, o, best_v);
        store(indices, o, static_cast<double>(best));
      }
}

void SimulatedDevice::max_pool2d_backward(const cuda::DeviceTensorRef& grad_in, const cuda::DeviceTensorRef& grad_out,
                                          const cuda::DeviceTensorRef& indices, const cuda::Pool2dGeometry&) {
  ++launches;
  // Each output's gradient added at the input element its index names, in its plane.
  const bool dbl = needs_double({&grad_in, &grad_out});
  const size_t nd = grad_in.sizes.size();
  const int64_t plane_in = grad_in.sizes[nd - 2] * grad_in.sizes[nd - 1];
  const int64_t plane_out = grad_out.sizes[nd - 2] * grad_out.sizes[nd - 1];
  std::vector<double> acc(static_cast<size_t>(grad_in.numel()), 0.0);
  const int64_t n = grad_out.numel();
  for (int64_t o = 0; o < n; ++o) {
    const int64_t plane = plane_out > 0 ? o / plane_out : 0;
    const size_t at = static_cast<size_t>(plane * plane_in + static_cast<int64_t>(load(indices, indices.sizes, o)));
    acc[at] = to_compute(acc[at] + load(grad_out, grad_out.sizes, o), dbl);
  }
  for (int64_t i = 0; i < grad_in.numel(); ++i) store(grad_in, i, acc[static_cast<size_t>(i)]);
}

void SimulatedDevice::gather(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in, int64_t dim,
                             const cuda::DeviceTensorRef& index) {
  ++launches;
  const int64_t d = wrap(dim, in.sizes.size());
  const int64_t size = dim_size(in, d);
  const int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx = unravel(i, index.sizes);
    store_at(out, idx, load_at(in, at_dim(idx, d, checked_index(load_at(index, idx), size, "gather"))));
  }
}

void SimulatedDevice::scatter(const cuda::DeviceTensorRef& out, int64_t dim, const cuda::DeviceTensorRef& index,
                              const cuda::DeviceTensorRef& src, bool add) {
  ++launches;
  const bool dbl = needs_double({&out, &src});
  const int64_t d = wrap(dim, out.sizes.size());
  const int64_t size = dim_size(out, d);
  const int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx = unravel(i, index.sizes);
    const double v = load_at(src, idx);
    const int64_t k = checked_index(load_at(index, idx), size, "scatter");
    if (!idx.empty()) idx[static_cast<size_t>(d)] = k;
    store_at(out, idx, add ? to_compute(load_at(out, idx) + v, dbl) : v);
  }
}

}  // namespace agtrace::testing

// ---- batch_norm.cuh and conv.cuh, element by element in the launchers' compute type and order.
namespace agtrace::testing {

namespace {
// [N, C, inner...]: batch, channels and the elements per sample and channel.
struct ChannelSplit {
  int64_t batch = 1, channels = 1, inner = 1;
  int64_t at(int64_t b, int64_t c, int64_t i) const { return (b * channels + c) * inner + i; }
};
ChannelSplit channel_split(const Shape& sizes) {
  ChannelSplit s;
  s.batch = sizes[0];
  s.channels = sizes[1];
  for (size_t d = 2; d < sizes.size(); ++d) s.inner *= sizes[d];
  return s;
}
// conv.cu's dtype check: floating dtypes only (an int64 conv2d, which the CPU runs, fails).
void conv_dtype(const cuda::DeviceTensorRef& in, const char* op) {
  if (in.dtype == DType::Int64 || in.dtype == DType::Bool)
    throw std::runtime_error(std::string("unsupported dtype for CUDA kernel ") + op + ": " + dtype_name(in.dtype));
}
// A temporary of the conv launchers (conv.cu's Temp): its bytes in the allocator's count.
int64_t conv_temp_bytes(std::initializer_list<int64_t> shape, DType dtype) {
  int64_t n = 1;
  for (int64_t v : shape) n *= v;
  return n * (dtype == DType::Float64 ? 8 : dtype == DType::Float32 ? 4 : 2);
}
}  // namespace

void SimulatedDevice::batch_norm(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef* save_mean,
                                 const cuda::DeviceTensorRef* save_invstd, const cuda::DeviceTensorRef& in,
                                 const cuda::DeviceTensorRef* weight, const cuda::DeviceTensorRef* bias,
                                 const cuda::DeviceTensorRef* running_mean, const cuda::DeviceTensorRef* running_var,
                                 bool training, double momentum, double eps) {
  ++launches;
  // The launcher's contract: per channel, the mean, then the mean of squared deviations;
  // invstd = 1 / sqrt(var + eps); running statistics take the momentum step with the
  // unbiased variance; eval reads the running ones. Float for float32 (T = float).
  if (!training && (!running_mean || !running_var))
    throw std::runtime_error("CUDA kernel batch_norm: eval mode needs running_mean and running_var");
  const bool dbl = needs_double({&in});
  const ChannelSplit s = channel_split(in.sizes);
  const int64_t count = s.batch * s.inner;
  if (training && count == 0) throw std::runtime_error("CUDA kernel batch_norm: no elements per channel in training");
  const double mom = to_compute(momentum, dbl), ep = to_compute(eps, dbl);
  auto vec = [&](const cuda::DeviceTensorRef& t, int64_t c) { return load(t, t.sizes, c); };
  for (int64_t c = 0; c < s.channels; ++c) {
    double mean, invstd;
    if (training) {
      double sum = 0;
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < s.inner; ++i) sum = to_compute(sum + load(in, in.sizes, s.at(b, c, i)), dbl);
      mean = to_compute(sum / static_cast<double>(count), dbl);
      double q = 0;
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t i = 0; i < s.inner; ++i) {
          const double d = to_compute(load(in, in.sizes, s.at(b, c, i)) - mean, dbl);
          q = to_compute(q + to_compute(d * d, dbl), dbl);
        }
      const double var = to_compute(q / static_cast<double>(count), dbl);
      invstd = to_compute(1.0 / to_compute(std::sqrt(to_compute(var + ep, dbl)), dbl), dbl);
      if (save_mean) store(*save_mean, c, mean);
      if (save_invstd) store(*save_invstd, c, invstd);
      const double unbiased =
          count > 1 ? to_compute(to_compute(var * static_cast<double>(count), dbl) / static_cast<double>(count - 1), dbl)
                    : var;
      const double keep = to_compute(1.0 - mom, dbl);
      if (running_mean)
        store(*running_mean, c,
              to_compute(to_compute(mom * mean, dbl) + to_compute(keep * vec(*running_mean, c), dbl), dbl));
      if (running_var)
        store(*running_var, c,
              to_compute(to_compute(mom * unbiased, dbl) + to_compute(keep * vec(*running_var, c), dbl), dbl));
    } else {
      mean = vec(*running_mean, c);
      invstd = to_compute(1.0 / to_compute(std::sqrt(to_compute(vec(*running_var, c) + ep, dbl)), dbl), dbl);
    }
    const double wc = weight ? vec(*weight, c) : 1.0, bc = bias ? vec(*bias, c) : 0.0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t j = s.at(b, c, i);
        const double y = to_compute(
            to_compute(to_compute(to_compute(load(in, in.sizes, j) - mean, dbl) * invstd, dbl) * wc, dbl) + bc, dbl);
        store(out, j, y);
      }
  }
}

void SimulatedDevice::batch_norm_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                                          const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                                          const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef* weight,
                                          const cuda::DeviceTensorRef& mean, const cuda::DeviceTensorRef& var_or_invstd,
                                          bool training, double eps) {
  ++launches;
  // sum(dy), dot = sum(dy (x - mean)); dweight = dot * invstd, dbias = sum(dy); training:
  // dx = (dy - (x - mean) * (dot / M * invstd^2) - sum(dy) / M) * (invstd * w); eval: dy * (invstd * w).
  const bool dbl = needs_double({&in});
  const ChannelSplit s = channel_split(in.sizes);
  const int64_t count = s.batch * s.inner;
  auto vec = [&](const cuda::DeviceTensorRef& t, int64_t c) { return load(t, t.sizes, c); };
  for (int64_t c = 0; c < s.channels; ++c) {
    const double m = vec(mean, c), stat = vec(var_or_invstd, c);
    const double invstd =
        training ? stat : to_compute(1.0 / to_compute(std::sqrt(to_compute(stat + to_compute(eps, dbl), dbl)), dbl), dbl);
    double sg = 0, dot = 0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.inner; ++i) {
        const double g = load(grad_out, in.sizes, s.at(b, c, i));
        sg = to_compute(sg + g, dbl);
        dot = to_compute(dot + to_compute(g * to_compute(load(in, in.sizes, s.at(b, c, i)) - m, dbl), dbl), dbl);
      }
    if (grad_weight) store(*grad_weight, c, to_compute(dot * invstd, dbl));
    if (grad_bias) store(*grad_bias, c, sg);
    if (!grad_in) continue;
    const double wc = weight ? vec(*weight, c) : 1.0;
    const double grad_scale = to_compute(invstd * wc, dbl);
    const double proj_scale =
        to_compute(to_compute(to_compute(dot / static_cast<double>(count), dbl) * invstd, dbl) * invstd, dbl);
    const double grad_mean = to_compute(sg / static_cast<double>(count), dbl);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t j = s.at(b, c, i);
        const double g = load(grad_out, in.sizes, j);
        const double v =
            training ? to_compute(to_compute(to_compute(g - to_compute(to_compute(load(in, in.sizes, j) - m, dbl) *
                                                                            proj_scale, dbl), dbl) - grad_mean, dbl) *
                                      grad_scale, dbl)
                     : to_compute(g * grad_scale, dbl);
        store(*grad_in, j, v);
      }
  }
}

void SimulatedDevice::conv2d(const cuda::DeviceTensorRef& out, const cuda::DeviceTensorRef& in,
                             const cuda::DeviceTensorRef& weight, const cuda::DeviceTensorRef* bias,
                             const cuda::Conv2dGeometry& g) {
  ++launches;
  // conv.cu: im2col columns, the weight and the result in contiguous temporaries (counted
  // by the allocator, freed at the end), out = W_g @ columns per group (float accumulation
  // for float32, over (ci, kh, kw) in order), then the bias added.
  const int64_t n = in.sizes[0], cin = in.sizes[1], h = in.sizes[2], w = in.sizes[3];
  const int64_t cout = weight.sizes[0], cin_g = weight.sizes[1], kh = weight.sizes[2], kw = weight.sizes[3];
  const int64_t oh = out.sizes[2], ow = out.sizes[3], cout_g = cout / g.groups, l = oh * ow;
  conv_dtype(in, "conv2d");
  if (n * cout * l == 0) return;
  const bool dbl = needs_double({&in});
  void* temps[3] = {allocate(conv_temp_bytes({n, cin * kh * kw, l}, in.dtype), "conv2d"),
                    allocate(conv_temp_bytes({cout, cin_g * kh * kw}, in.dtype), "conv2d"),
                    allocate(conv_temp_bytes({n, cout, l}, in.dtype), "conv2d")};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double acc = 0;
          for (int64_t ci = 0; ci < cin_g; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = y * g.stride_h - g.pad_h + i * g.dilation_h;
                const int64_t ix = x * g.stride_w - g.pad_w + j * g.dilation_w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const int64_t c = (co / cout_g) * cin_g + ci;
                acc = to_compute(acc + to_compute(load_at(weight, {co, ci, i, j}) * load_at(in, {b, c, iy, ix}), dbl),
                                 dbl);
              }
          if (bias) acc = to_compute(acc + load(*bias, bias->sizes, co), dbl);
          store_at(out, {b, co, y, x}, acc);
        }
  for (void* p : temps) release(p);
}

void SimulatedDevice::conv2d_backward(const cuda::DeviceTensorRef* grad_in, const cuda::DeviceTensorRef* grad_weight,
                                      const cuda::DeviceTensorRef* grad_bias, const cuda::DeviceTensorRef& grad_out,
                                      const cuda::DeviceTensorRef& in, const cuda::DeviceTensorRef& weight,
                                      const cuda::Conv2dGeometry& g) {
  ++launches;
  // conv.cu: grad_bias the sum of grad_out over (N, OH, OW); grad_in = col2im(W_g^T @ grad_out)
  // (each column entry a float sum over the group's output channels, each input element
  // the sum of its entries over (kh, kw)); grad_weight per sample (a sum over OH * OW),
  // then summed over the batch.
  conv_dtype(in, "conv2d_backward");
  if (grad_bias) reduce(cuda::ReduceOp::Sum, *grad_bias, grad_out, {0, 2, 3}, false);
  if (!grad_in && !grad_weight) return;
  const int64_t n = in.sizes[0], cin = in.sizes[1], h = in.sizes[2], w = in.sizes[3];
  const int64_t cout = weight.sizes[0], cin_g = weight.sizes[1], kh = weight.sizes[2], kw = weight.sizes[3];
  const int64_t oh = grad_out.sizes[2], ow = grad_out.sizes[3], cout_g = cout / g.groups, l = oh * ow;
  const bool dbl = needs_double({&in});
  std::vector<void*> temps = {allocate(conv_temp_bytes({n, cout, l}, in.dtype), "conv2d_backward"),
                              allocate(conv_temp_bytes({cout, cin_g * kh * kw}, in.dtype), "conv2d_backward"),
                              allocate(conv_temp_bytes({n, cin * kh * kw, l}, in.dtype), "conv2d_backward")};
  if (grad_in) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < cin; ++c)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x) {
            const int64_t grp = c / cin_g, ci = c % cin_g;
            double acc = 0;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t ty = y + g.pad_h - i * g.dilation_h;
              if (ty < 0 || ty % g.stride_h != 0 || ty / g.stride_h >= oh) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t tx = x + g.pad_w - j * g.dilation_w;
                if (tx < 0 || tx % g.stride_w != 0 || tx / g.stride_w >= ow) continue;
                double col = 0;  // (W_g^T @ grad_out)[row (ci, i, j)][column (ty, tx)]
                for (int64_t k = 0; k < cout_g; ++k) {
                  const int64_t co = grp * cout_g + k;
                  col = to_compute(col + to_compute(load_at(weight, {co, ci, i, j}) *
                                                        load_at(grad_out, {b, co, ty / g.stride_h, tx / g.stride_w}),
                                                    dbl),
                                   dbl);
                }
                acc = to_compute(acc + col, dbl);
              }
            }
            store_at(*grad_in, {b, c, y, x}, acc);
          }
  }
  if (grad_weight) {
    temps.push_back(allocate(conv_temp_bytes({n, cout, cin_g * kh * kw}, in.dtype), "conv2d_backward"));
    temps.push_back(allocate(conv_temp_bytes({cout, cin_g * kh * kw}, in.dtype), "conv2d_backward"));
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t ci = 0; ci < cin_g; ++ci)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t c = (co / cout_g) * cin_g + ci;
            double total = 0;
            for (int64_t b = 0; b < n; ++b) {
              double per_n = 0;
              for (int64_t y = 0; y < oh; ++y)
                for (int64_t x = 0; x < ow; ++x) {
                  const int64_t iy = y * g.stride_h - g.pad_h + i * g.dilation_h;
                  const int64_t ix = x * g.stride_w - g.pad_w + j * g.dilation_w;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  per_n = to_compute(per_n + to_compute(load_at(grad_out, {b, co, y, x}) * load_at(in, {b, c, iy, ix}),
                                                        dbl),
                                     dbl);
                }
              total = to_compute(total + to_compute(per_n, dbl), dbl);
            }
            store_at(*grad_weight, {co, ci, i, j}, total);
          }
  }
  for (size_t k = temps.size(); k-- > 0;) release(temps[k]);
}

}  // namespace agtrace::testing
