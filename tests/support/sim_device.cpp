#include "support/sim_device.hpp"

#include <algorithm>
#include <cmath>
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
  const bool dbl = needs_double({&out, &a, &b});
  const int64_t n = a.sizes[0], k = a.sizes[1], m = b.sizes[1];
  const Block& ba = block(a.data, "matmul");
  const Block& bb = block(b.data, "matmul");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ba.elements[static_cast<size_t>(a.offset + i * a.strides[0] + p * a.strides[1])];
        const double y = bb.elements[static_cast<size_t>(b.offset + p * b.strides[0] + j * b.strides[1])];
        s = to_compute(s + to_compute(x * y, dbl), dbl);
      }
      store(out, i * m + j, s);
    }
}

}  // namespace agtrace::testing
