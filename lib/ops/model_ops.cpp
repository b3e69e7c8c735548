// adaptive_avg_pool2d/1d, adaptive_max_pool2d, avg_pool2d/1d, group_norm, upsample (F.interpolate's nearest and
// bilinear) and type_as: forward, node, saved values and backward side by side. Facts
// cited as "measured" were checked with /usr/bin/python3 and torch 1.13.
//
// Values are computed in double and rounded to the tensor's dtype when stored, as the rest
// of agtrace does; where PyTorch's kernel rounds an intermediate that decides an index
// (interpolate's scales and source positions) the rounding is mirrored. On meta only
// shapes, nodes and saved values are produced. There is no cuda kernel for these ops: a
// cuda operand raises unsupported naming the op (the OpScope in force).
#include "ops/model_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/double_backward.hpp"
#include "ops/layer_norm_cpu.hpp"
#include "ops/more_util.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

using namespace more_detail;

namespace {

[[noreturn]] void fail(const std::string& kind, const std::string& message) { throw ScenarioError(kind, message); }

// The CPU kernels of these ops are AT_DISPATCH_FLOATING_TYPES: Half and Long fail with the
// kernel's name (measured for adaptive_avg_pool2d, avg_pool2d, GroupNormKernelImpl,
// compute_indices_weights_nearest/linear). Meta has no dtype dispatch and passes float16.
// A bfloat16 kernel rounds intermediates agtrace does not mirror: unsupported.
void require_float_kernel(const Tensor& t, const std::string& kernel) {
  require_host(t);
  const DType d = t->dtype();
  if (t->is_meta() && (d == DType::Float16 || d == DType::BFloat16)) return;
  if (d == DType::BFloat16) unsupported(kernel + " of bfloat16 tensors");
  act_detail::require_kernel_dtype(t, kernel, false);
}

Tensor new_like_meta(const Shape& sizes, DType d, bool meta) { return empty_tensor(sizes, d, meta); }

// Writes values computed in double into a fresh contiguous tensor (no data on meta).
Tensor filled(const Shape& sizes, DType d, bool meta, const std::vector<double>& values) {
  Tensor t = new_like_meta(sizes, d, meta);
  if (!meta) write_values(t, values);
  return t;
}

// The last two dims as planes: [..., H, W] -> planes x H x W.
struct Planes {
  int64_t count = 0, height = 0, width = 0;
};
Planes planes_of(const Shape& sizes) {
  Planes p;
  const size_t nd = sizes.size();
  p.height = sizes[nd - 2];
  p.width = sizes[nd - 1];
  p.count = 1;
  for (size_t i = 0; i + 2 < nd; ++i) p.count *= sizes[i];
  return p;
}

Shape with_spatial(const Shape& sizes, int64_t h, int64_t w) {
  Shape out = sizes;
  out[out.size() - 2] = h;
  out[out.size() - 1] = w;
  return out;
}

// One output element's window over the input plane and the divisor of its sum, for the
// average poolings (adaptive and fixed). The same windows serve forward and backward.
struct Window {
  int64_t h0, h1, w0, w1;
  double divisor;
};

// Forward: out[o] = sum(window) / divisor. Backward: every input element of a window
// receives grad[o] / divisor (accumulated where windows overlap).
template <typename WindowOf>
std::vector<double> pool_forward(const std::vector<double>& xv, const Planes& in, int64_t oh_n, int64_t ow_n,
                                 WindowOf&& window_of) {
  std::vector<double> out(static_cast<size_t>(in.count * oh_n * ow_n), 0.0);
  for (int64_t p = 0; p < in.count; ++p)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window w = window_of(oh, ow);
        if (w.h0 >= w.h1 || w.w0 >= w.w1) continue;  // an all-padding window: 0 (cpu_avg_pool)
        double sum = 0.0;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c) sum += xv[static_cast<size_t>((p * in.height + h) * in.width + c)];
        out[static_cast<size_t>((p * oh_n + oh) * ow_n + ow)] = sum / w.divisor;
      }
  return out;
}

template <typename WindowOf>
std::vector<double> pool_backward(const std::vector<double>& gv, const Planes& in, int64_t oh_n, int64_t ow_n,
                                  WindowOf&& window_of) {
  std::vector<double> dx(static_cast<size_t>(in.count * in.height * in.width), 0.0);
  for (int64_t p = 0; p < in.count; ++p)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window w = window_of(oh, ow);
        if (w.h0 >= w.h1 || w.w0 >= w.w1) continue;
        const double share = gv[static_cast<size_t>((p * oh_n + oh) * ow_n + ow)] / w.divisor;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c) dx[static_cast<size_t>((p * in.height + h) * in.width + c)] += share;
      }
  return dx;
}

// ---------------------------------------------------------------- adaptive_avg_pool2d
//
// derivatives.yaml (1.13): _adaptive_avg_pool2d(self, output_size)
//   self: _adaptive_avg_pool2d_backward(grad, self)
// Saved: self only (measured: dir(node) lists _saved_self, the same object). Output (oh, ow)
// averages rows [floor(oh*H/OH), ceil((oh+1)*H/OH)) and the same for columns
// (AdaptivePooling.h start_index / end_index).

int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

auto adaptive_windows(const Planes& in, int64_t oh_n, int64_t ow_n) {
  return [=](int64_t oh, int64_t ow) {
    Window w{adaptive_start(oh, in.height, oh_n), adaptive_end(oh, in.height, oh_n), adaptive_start(ow, in.width, ow_n),
             adaptive_end(ow, in.width, ow_n), 0.0};
    w.divisor = static_cast<double>((w.h1 - w.h0) * (w.w1 - w.w0));
    return w;
  };
}

std::vector<Tensor> adaptive_avg_pool2d_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  require_host(g[0]);
  // Measured: PyTorch 1.13 has no meta kernel for _adaptive_avg_pool2d_backward
  // (NotImplementedError "Could not run 'aten::_adaptive_avg_pool2d_backward' with arguments
  // from the 'Meta' backend"); the forward has one.
  if (self->is_meta())
    unsupported("AdaptiveAvgPool2DBackward0 on the meta device (PyTorch 1.13 has no meta kernel for "
                "_adaptive_avg_pool2d_backward)");
  const Planes in = planes_of(self->sizes);
  const Planes out = planes_of(g[0]->sizes);
  return {filled(self->sizes, self->dtype(), false,
                 pool_backward(to_values(g[0]), in, out.height, out.width, adaptive_windows(in, out.height, out.width)))};
}

// derivatives.yaml (1.13): adaptive_max_pool2d(self, output_size) -> (result0, result1)
//   self: adaptive_max_pool2d_backward(grad, self, result1)
// Saved (measured): result1 (the returned indices object, requires_grad False) and self.
// The gradient of each output goes to the input element its index names.
std::vector<Tensor> adaptive_max_pool2d_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor indices = n.unpack("result1"), self = n.unpack("self");
  require_host(g[0]);
  if (self->is_meta()) return {new_like_meta(self->sizes, self->dtype(), true)};
  const Planes in = planes_of(self->sizes);
  const int64_t plane_out = indices->numel() / std::max<int64_t>(in.count, 1);
  const std::vector<double> iv = to_values(indices), gv = to_values(g[0]);
  std::vector<double> dx(static_cast<size_t>(self->numel()), 0.0);
  for (size_t o = 0; o < iv.size(); ++o) {
    const int64_t plane = plane_out > 0 ? static_cast<int64_t>(o) / plane_out : 0;
    dx[static_cast<size_t>(plane * in.height * in.width + static_cast<int64_t>(iv[o]))] += gv[o];
  }
  return {filled(self->sizes, self->dtype(), false, dx)};
}

// ---------------------------------------------------------------- avg_pool2d
//
// derivatives.yaml (1.13): avg_pool2d(self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override)
//   self: avg_pool2d_backward(grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
// Saved (measured): ceil_mode, count_include_pad, divisor_override (None when absent),
// kernel_size, padding, self (same object), stride (() when not given).

struct AvgGeometry {
  int64_t kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
  std::optional<int64_t> divisor_override;
};

AvgGeometry avg_geometry(const std::vector<int64_t>& k, const std::vector<int64_t>& s, const std::vector<int64_t>& p,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  AvgGeometry a{};
  a.kh = k[0];
  a.kw = k.back();
  a.sh = s.empty() ? a.kh : s[0];
  a.sw = s.empty() ? a.kw : s.back();
  a.ph = p[0];
  a.pw = p.back();
  a.count_include_pad = count_include_pad;
  a.divisor_override = divisor_override;
  return a;
}

// cpu_avg_pool's window: the padded extent decides pool_size (count_include_pad), the
// window clipped to the input is what is summed.
auto avg_windows(const Planes& in, const AvgGeometry& a) {
  return [=](int64_t oh, int64_t ow) {
    int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
    int64_t h1 = std::min(h0 + a.kh, in.height + a.ph), w1 = std::min(w0 + a.kw, in.width + a.pw);
    const int64_t pool_size = (h1 - h0) * (w1 - w0);
    h0 = std::max<int64_t>(h0, 0);
    w0 = std::max<int64_t>(w0, 0);
    h1 = std::min(h1, in.height);
    w1 = std::min(w1, in.width);
    Window w{h0, h1, w0, w1, 0.0};
    if (a.divisor_override) w.divisor = static_cast<double>(*a.divisor_override);
    else w.divisor = static_cast<double>(a.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0));
    return w;
  };
}

AvgGeometry avg_geometry_of(const Node& n) {
  const AttrValue& d = n.attr("divisor_override");
  return avg_geometry(n.attr("kernel_size").list, n.attr("stride").list, n.attr("padding").list,
                      n.attr("count_include_pad").b,
                      d.kind == AttrValue::Kind::None ? std::nullopt : std::optional<int64_t>(d.i));
}

std::vector<Tensor> avg_pool2d_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor self = n.unpack("self");
  require_host(g[0]);
  if (self->is_meta()) return {new_like_meta(self->sizes, self->dtype(), true)};
  const Planes in = planes_of(self->sizes);
  const Planes out = planes_of(g[0]->sizes);
  return {filled(self->sizes, self->dtype(), false,
                 pool_backward(to_values(g[0]), in, out.height, out.width, avg_windows(in, avg_geometry_of(n))))};
}

// ---------------------------------------------------------------- group_norm
//
// derivatives.yaml (1.13): native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//   input, weight, bias: native_group_norm_backward(grad.contiguous(), input, result1,
//                        result2, weight, N, C, HxW, group, grad_input_mask)
// Saved (measured): C, HxW, N, eps, group, input (the object passed to native_group_norm),
// result1 = mean and result2 = rstd ([N, group], the input's dtype), weight (None when
// absent; bias is not saved).

struct GroupSplit {
  int64_t n, c, hxw, groups;
  int64_t per_group() const { return (c / groups) * hxw; }
};

GroupSplit group_split_of(const Node& n) {
  return {n.attr("N").i, n.attr("C").i, n.attr("HxW").i, n.attr("group").i};
}

// GroupNormKernel.cpp's backward, with ds = sum_hw(dy * x), db = sum_hw(dy) per (n, c):
//   dx = rstd * gamma * dy + c2 * x + c3, c2 = (db_g * mean - ds_g) * rstd^3 / (D * HxW),
//   c3 = -c2 * mean - db_g * rstd / (D * HxW), where ds_g, db_g sum ds, db * gamma over the group;
//   dgamma[c] = sum_n (ds - db * mean) * rstd;  dbeta[c] = sum_n db.
// In the tensor's dtype S, as the kernel computes (float32 rounding decides the last digits
// where c2 * x + c3 cancels: double arithmetic missed torch's float32 gradient by 1.2e-5
// relative on a [2, 6, 3, 4] input, over the differential tolerance).
//
// ds and db as vec::map2_reduce_all / reduce_all sum them on AVX2 (1.13's CPU capability
// here, measured: torch.__config__.show()): eight lane sums, a partial tail added to the
// first lanes, then ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)); fewer than eight values in order.
// a and b: float32 storages or doubles (a value read either way converts to S alike).
template <typename S, typename P>
S lane_sum(const P* a, const P* b, size_t base, int64_t n) {
  auto term = [&](int64_t k) {
    const size_t e = base + static_cast<size_t>(k);
    return b ? static_cast<S>(static_cast<S>(a[e]) * static_cast<S>(b[e])) : static_cast<S>(a[e]);
  };
  if (n < 8) {
    S acc = n > 0 ? term(0) : S(0);
    for (int64_t k = 1; k < n; ++k) acc = static_cast<S>(acc + term(k));
    return acc;
  }
  S lanes[8];
  for (int64_t k = 0; k < 8; ++k) lanes[k] = term(k);
  int64_t d = 8;
  for (; d < n - (n % 8); d += 8)
    for (int64_t k = 0; k < 8; ++k) lanes[k] = static_cast<S>(lanes[k] + term(d + k));
  for (int64_t k = 0; k < n - d; ++k) lanes[k] = static_cast<S>(lanes[k] + term(d + k));
  const S left = static_cast<S>(static_cast<S>(lanes[0] + lanes[4]) + static_cast<S>(lanes[2] + lanes[6]));
  const S right = static_cast<S>(static_cast<S>(lanes[1] + lanes[5]) + static_cast<S>(lanes[3] + lanes[7]));
  return static_cast<S>(left + right);
}

struct GroupNormGrads {
  std::vector<double> dw, db;
};

// xv, gv: the input's and the gradient's elements (float32 storages or doubles); dx: the
// input gradient's (null when not wanted), written in Out.
template <typename S, typename P, typename Out>
GroupNormGrads group_norm_grads(const GroupSplit& s, const P* xv, const P* gv, const std::vector<double>& mv,
                                const std::vector<double>& rv, const std::vector<double>& wv, Out* dx, bool want_wb) {
  const size_t nc = static_cast<size_t>(s.n * s.c);
  std::vector<S> ds(nc), db(nc);
  for (size_t i = 0; i < nc; ++i) {
    ds[i] = lane_sum<S>(gv, xv, i * static_cast<size_t>(s.hxw), s.hxw);
    db[i] = lane_sum<S>(gv, static_cast<const P*>(nullptr), i * static_cast<size_t>(s.hxw), s.hxw);
  }
  const int64_t d = s.c / s.groups;
  GroupNormGrads out;
  if (dx) {
    const S scale = S(1) / static_cast<S>(s.per_group());
    for (int64_t b = 0; b < s.n; ++b)
      for (int64_t grp = 0; grp < s.groups; ++grp) {
        const size_t gi = static_cast<size_t>(b * s.groups + grp);
        S ds_g = 0, db_g = 0;
        for (int64_t c = grp * d; c < (grp + 1) * d; ++c) {
          const S w = static_cast<S>(wv[static_cast<size_t>(c)]);
          ds_g = static_cast<S>(ds_g + static_cast<S>(ds[static_cast<size_t>(b * s.c + c)] * w));
          db_g = static_cast<S>(db_g + static_cast<S>(db[static_cast<size_t>(b * s.c + c)] * w));
        }
        const S r = static_cast<S>(rv[gi]), mu = static_cast<S>(mv[gi]);
        const S c2 = static_cast<S>(
            static_cast<S>(static_cast<S>(static_cast<S>(static_cast<S>(db_g * mu) - ds_g) * r) * r) * r * scale);
        const S c3 = static_cast<S>(static_cast<S>(-c2 * mu) - static_cast<S>(static_cast<S>(db_g * r) * scale));
        for (int64_t c = grp * d; c < (grp + 1) * d; ++c) {
          const S c1 = static_cast<S>(r * static_cast<S>(wv[static_cast<size_t>(c)]));
          for (int64_t k = 0; k < s.hxw; ++k) {
            const size_t e = static_cast<size_t>((b * s.c + c) * s.hxw + k);
            dx[e] = static_cast<Out>(static_cast<S>(static_cast<S>(static_cast<S>(c1 * static_cast<S>(gv[e])) +
                                                                static_cast<S>(c2 * static_cast<S>(xv[e]))) + c3));
          }
        }
      }
  }
  if (want_wb) {
    out.dw.assign(static_cast<size_t>(s.c), 0.0);
    out.db.assign(static_cast<size_t>(s.c), 0.0);
    for (int64_t c = 0; c < s.c; ++c) {
      S aw = 0, ab = 0;
      for (int64_t b = 0; b < s.n; ++b) {
        const size_t gi = static_cast<size_t>(b * s.groups + c / d), i = static_cast<size_t>(b * s.c + c);
        const S mu = static_cast<S>(mv[gi]), r = static_cast<S>(rv[gi]);
        aw = static_cast<S>(aw + static_cast<S>(static_cast<S>(ds[i] - static_cast<S>(db[i] * mu)) * r));
        ab = static_cast<S>(ab + db[i]);
      }
      out.dw[static_cast<size_t>(c)] = aw;
      out.db[static_cast<size_t>(c)] = ab;
    }
  }
  return out;
}

std::vector<Tensor> group_norm_backward(Node& n, const std::vector<Tensor>& g) {
  Tensor x = n.unpack("input"), mean = n.unpack("result1"), rstd = n.unpack("result2"), w = n.unpack("weight");
  require_host(g[0]);
  const bool meta = x->is_meta();
  const bool want_x = n.next[0].fn != nullptr, want_w = n.next[1].fn != nullptr, want_b = n.next[2].fn != nullptr;
  const auto& m1 = n.input_meta[1];
  const auto& m2 = n.input_meta[2];
  if (meta)
    return {want_x ? new_like_meta(x->sizes, x->dtype(), true) : nullptr,
            want_w ? new_like_meta(m1.sizes, m1.dtype, true) : nullptr,
            want_b ? new_like_meta(m2.sizes, m2.dtype, true) : nullptr};
  const GroupSplit s = group_split_of(n);
  const std::vector<double> mv = to_values(mean), rv = to_values(rstd);
  const std::vector<double> wv = w ? to_values(w) : std::vector<double>(static_cast<size_t>(s.c), 1.0);
  // float32 input and gradient: the same arithmetic on the float32 storages directly, the
  // input gradient written in float32 as filled() would round it.
  const float* x_f32 = kernels::contiguous_f32(x);
  const float* g_f32 = x_f32 ? kernels::contiguous_f32(g[0]) : nullptr;
  Tensor gx;
  GroupNormGrads r;
  if (g_f32) {
    gx = want_x ? uninitialized_tensor(x->sizes, x->dtype(), false) : nullptr;
    r = group_norm_grads<float>(s, x_f32, g_f32, mv, rv, wv, gx ? gx->storage->f32() : nullptr, want_w || want_b);
  } else {
    const std::vector<double> xv = to_values(x), gv = to_values(g[0]);
    std::vector<double> dx(want_x ? xv.size() : 0);
    double* dxp = want_x ? dx.data() : nullptr;
    r = x->dtype() == DType::Float32 ? group_norm_grads<float>(s, xv.data(), gv.data(), mv, rv, wv, dxp, want_w || want_b)
                                     : group_norm_grads<double>(s, xv.data(), gv.data(), mv, rv, wv, dxp, want_w || want_b);
    if (want_x) gx = filled(x->sizes, x->dtype(), false, dx);
  }
  return {gx,
          want_w ? filled(m1.sizes, m1.dtype, false, r.dw) : nullptr,
          want_b ? filled(m2.sizes, m2.dtype, false, r.db) : nullptr};
}

// ---------------------------------------------------------------- upsample
//
// derivatives.yaml (1.13), the .vec overloads F.interpolate calls:
//   upsample_nearest1d.vec / upsample_nearest2d.vec(input, output_size?, scale_factors?)
//   upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?)
// Saved (measured): align_corners (bilinear), input_sym_sizes, output_size and
// scale_factors (exactly one of them not None, as F.interpolate passed it).

// area_pixel_compute_scale<scalar_t> (UpSample.h): the scale in the tensor's dtype, from
// the given scale factor (1 / s) when positive, else in / out; with align_corners
// (in - 1) / (out - 1).
template <typename S>
S pixel_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<S>(in - 1) / static_cast<S>(out - 1) : static_cast<S>(0);
  if (scale && *scale > 0.0) return static_cast<S>(1.0 / *scale);
  return static_cast<S>(in) / static_cast<S>(out);
}

// nearest_neighbor_compute_source_index: min(floorf(dst * scale), in - 1) with the scale as
// a float whatever the dtype (measured: no shortcut when out == in, scale_factor=1.3 on 3
// elements reads 0, 0, 1).
template <typename S>
std::vector<int64_t> nearest_sources(int64_t in, int64_t out, std::optional<double> scale) {
  const float s = static_cast<float>(pixel_scale<S>(in, out, false, scale));
  std::vector<int64_t> src(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i)
    src[static_cast<size_t>(i)] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), in - 1);
  return src;
}

// compute_source_index_and_lambda: the two neighbours and their weights, in the dtype S.
struct LinearTap {
  int64_t i0, i1;
  double l0, l1;
};
template <typename S>
std::vector<LinearTap> linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  const S ratio = pixel_scale<S>(in, out, align_corners, scale);
  std::vector<LinearTap> taps(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    LinearTap& t = taps[static_cast<size_t>(i)];
    if (out == in) {
      t = {i, i, 1.0, 0.0};
      continue;
    }
    S real = align_corners ? static_cast<S>(ratio * static_cast<S>(i))
                           : static_cast<S>(static_cast<double>(ratio) * (static_cast<double>(i) + 0.5) - 0.5);
    if (!align_corners && real < 0) real = 0;
    t.i0 = static_cast<int64_t>(real);
    t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
    const S l1 = std::min(std::max(static_cast<S>(real - static_cast<S>(t.i0)), static_cast<S>(0)), static_cast<S>(1));
    t.l1 = static_cast<double>(l1);
    t.l0 = static_cast<double>(static_cast<S>(1) - l1);
  }
  return taps;
}

std::optional<double> scale_at(const std::optional<std::vector<double>>& scales, size_t i) {
  if (!scales) return std::nullopt;
  return (*scales)[i];
}

std::optional<double> scale_at(const AttrValue& scales, size_t i) {
  if (scales.kind == AttrValue::Kind::None) return std::nullopt;
  return scales.reals[i];
}

struct UpsamplePlan {
  Shape in, out;  // full shapes
  int64_t planes = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
};

UpsamplePlan upsample_plan(const Shape& in, const std::vector<int64_t>& out_spatial) {
  UpsamplePlan p;
  p.in = in;
  p.out = in;
  const size_t sd = out_spatial.size();
  for (size_t i = 0; i < sd; ++i) p.out[in.size() - sd + i] = out_spatial[i];
  for (size_t i = 0; i + sd < in.size(); ++i) p.planes *= in[i];
  p.in_w = in.back();
  p.out_w = p.out.back();
  if (sd == 2) {
    p.in_h = in[in.size() - 2];
    p.out_h = p.out[in.size() - 2];
  }
  return p;
}

// The source taps of every output element of one plane: (input offset, weight) pairs.
using Taps = std::vector<std::vector<std::pair<int64_t, double>>>;

Taps nearest_taps(const UpsamplePlan& p, DType d, std::optional<double> scale_h, std::optional<double> scale_w) {
  auto sources = [&](int64_t in, int64_t out, std::optional<double> s) {
    return d == DType::Float64 ? nearest_sources<double>(in, out, s) : nearest_sources<float>(in, out, s);
  };
  const std::vector<int64_t> hs = p.in.size() == 4 ? sources(p.in_h, p.out_h, scale_h) : std::vector<int64_t>{0};
  const std::vector<int64_t> ws = sources(p.in_w, p.out_w, scale_w);
  Taps taps(static_cast<size_t>(p.out_h * p.out_w));
  for (int64_t oh = 0; oh < p.out_h; ++oh)
    for (int64_t ow = 0; ow < p.out_w; ++ow)
      taps[static_cast<size_t>(oh * p.out_w + ow)] = {
          {hs[static_cast<size_t>(oh)] * p.in_w + ws[static_cast<size_t>(ow)], 1.0}};
  return taps;
}

Taps bilinear_taps(const UpsamplePlan& p, DType d, bool align_corners, std::optional<double> scale_h,
                   std::optional<double> scale_w) {
  auto taps_of = [&](int64_t in, int64_t out, std::optional<double> s) {
    return d == DType::Float64 ? linear_taps<double>(in, out, align_corners, s)
                               : linear_taps<float>(in, out, align_corners, s);
  };
  const std::vector<LinearTap> hs = taps_of(p.in_h, p.out_h, scale_h), ws = taps_of(p.in_w, p.out_w, scale_w);
  Taps taps(static_cast<size_t>(p.out_h * p.out_w));
  for (int64_t oh = 0; oh < p.out_h; ++oh)
    for (int64_t ow = 0; ow < p.out_w; ++ow) {
      const LinearTap& h = hs[static_cast<size_t>(oh)];
      const LinearTap& w = ws[static_cast<size_t>(ow)];
      taps[static_cast<size_t>(oh * p.out_w + ow)] = {{h.i0 * p.in_w + w.i0, h.l0 * w.l0},
                                                      {h.i0 * p.in_w + w.i1, h.l0 * w.l1},
                                                      {h.i1 * p.in_w + w.i0, h.l1 * w.l0},
                                                      {h.i1 * p.in_w + w.i1, h.l1 * w.l1}};
    }
  return taps;
}

std::vector<double> apply_taps(const std::vector<double>& xv, const UpsamplePlan& p, const Taps& taps) {
  const int64_t plane_in = p.in_h * p.in_w, plane_out = p.out_h * p.out_w;
  std::vector<double> out(static_cast<size_t>(p.planes * plane_out), 0.0);
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t o = 0; o < plane_out; ++o) {
      double v = 0.0;
      for (const auto& [src, wgt] : taps[static_cast<size_t>(o)]) v += xv[static_cast<size_t>(pl * plane_in + src)] * wgt;
      out[static_cast<size_t>(pl * plane_out + o)] = v;
    }
  return out;
}

std::vector<double> scatter_taps(const std::vector<double>& gv, const UpsamplePlan& p, const Taps& taps) {
  const int64_t plane_in = p.in_h * p.in_w, plane_out = p.out_h * p.out_w;
  std::vector<double> dx(static_cast<size_t>(p.planes * plane_in), 0.0);
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t o = 0; o < plane_out; ++o)
      for (const auto& [src, wgt] : taps[static_cast<size_t>(o)])
        dx[static_cast<size_t>(pl * plane_in + src)] += gv[static_cast<size_t>(pl * plane_out + o)] * wgt;
  return dx;
}

// The node's saved geometry back as a plan and the taps its forward used.
Taps taps_of_node(const Node& n, const UpsamplePlan& p, DType d) {
  const AttrValue& scales = n.attr("scale_factors");
  const bool two_d = p.in.size() == 4;
  const std::optional<double> sh = two_d ? scale_at(scales, 0) : std::nullopt;
  const std::optional<double> sw = scale_at(scales, two_d ? 1 : 0);
  if (n.name.str().rfind("UpsampleBilinear", 0) == 0) return bilinear_taps(p, d, n.attr("align_corners").b, sh, sw);
  return nearest_taps(p, d, sh, sw);
}

std::vector<Tensor> upsample_backward(Node& n, const std::vector<Tensor>& g) {
  require_host(g[0]);
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {new_like_meta(m.sizes, m.dtype, true)};
  const Shape& out = g[0]->sizes;
  const size_t sd = out.size() - 2;
  const UpsamplePlan p = upsample_plan(m.sizes, std::vector<int64_t>(out.end() - static_cast<long>(sd), out.end()));
  return {filled(m.sizes, m.dtype, false, scatter_taps(to_values(g[0]), p, taps_of_node(n, p, m.dtype)))};
}

// compute_output_size (UpSample.cpp): the given sizes, or floor(in * scale) per spatial dim
// (a double product truncated towards zero).
std::vector<int64_t> upsample_output_size(const Shape& in, const std::optional<std::vector<int64_t>>& output_size,
                                          const std::optional<std::vector<double>>& scales) {
  if (output_size) return *output_size;
  std::vector<int64_t> out;
  const size_t sd = scales->size();
  for (size_t i = 0; i < sd; ++i)
    out.push_back(static_cast<int64_t>(static_cast<double>(in[in.size() - sd + i]) * (*scales)[i]));
  return out;
}

void check_upsample_sizes(const Shape& in, const std::vector<int64_t>& out) {
  // upsample_1d_common_check / upsample_2d_common_check (messages measured).
  if (out.size() == 1) {
    if (in[2] <= 0 || out[0] <= 0)
      fail("shape_mismatch", "Input and output sizes should be greater than 0, but got input (W: " +
                                 std::to_string(in[2]) + ") and output (W: " + std::to_string(out[0]) + ")");
    return;
  }
  if (in[2] <= 0 || in[3] <= 0 || out[0] <= 0 || out[1] <= 0)
    fail("shape_mismatch", "Input and output sizes should be greater than 0, but got input (H: " +
                               std::to_string(in[2]) + ", W: " + std::to_string(in[3]) + ") output (H: " +
                               std::to_string(out[0]) + ", W: " + std::to_string(out[1]) + ")");
}

std::vector<Tensor> upsample_dbackward(Node& n, const std::vector<Tensor>& g);  // create_graph=True, below

Tensor upsample(const Tensor& input, const std::optional<std::vector<int64_t>>& output_size,
                const std::optional<std::vector<double>>& scale_factors, bool bilinear, bool align_corners) {
  const size_t sd = input->dim() - 2;
  const std::vector<int64_t> out = upsample_output_size(input->sizes, output_size, scale_factors);
  check_upsample_sizes(input->sizes, out);
  int64_t non_batch = 1;
  for (size_t i = 1; i < input->sizes.size(); ++i) non_batch *= input->sizes[i];
  if (input->numel() == 0 && non_batch == 0)
    fail("shape_mismatch", "Non-empty " + std::to_string(input->dim()) +
                               "D data tensor expected but got a tensor with sizes " + shape_str(input->sizes));
  require_float_kernel(input, bilinear ? "compute_indices_weights_linear" : "compute_indices_weights_nearest");
  const UpsamplePlan p = upsample_plan(input->sizes, out);
  const bool meta = input->is_meta();
  Tensor result = new_like_meta(p.out, input->dtype(), meta);
  const std::optional<double> sh = sd == 2 ? scale_at(scale_factors, 0) : std::nullopt;
  const std::optional<double> sw = scale_at(scale_factors, sd - 1);
  if (!meta) {
    const Taps taps =
        bilinear ? bilinear_taps(p, input->dtype(), align_corners, sh, sw) : nearest_taps(p, input->dtype(), sh, sw);
    write_values(result, apply_taps(to_values(input), p, taps));
  }
  if (needs_grad({&input})) {
    const char* name = bilinear ? "UpsampleBilinear2DBackward1"
                                : (sd == 1 ? "UpsampleNearest1DBackward1" : "UpsampleNearest2DBackward1");
    auto node = make_node(name, upsample_backward, {input});
    node->differentiable_backward = upsample_dbackward;
    if (bilinear) node->save_attr("align_corners", AttrValue::boolean(align_corners));
    node->save_attr("input_sym_sizes", AttrValue::ints(std::vector<int64_t>(input->sizes.begin(), input->sizes.end())));
    node->save_attr("output_size", output_size ? AttrValue::ints(*output_size) : AttrValue::none());
    node->save_attr("scale_factors", scale_factors ? AttrValue::reals_list(*scale_factors) : AttrValue::none());
    set_history(result, node);
  }
  return result;
}

// ---------------------------------------------------------------- create_graph=True
//
// Each first-order backward above is, in PyTorch 1.13, a dedicated op whose node the graph
// records under create_graph=True (measured with torch.autograd.grad(..., create_graph=True),
// names, edges and saved values read from g.grad_fn). Their formulas (derivatives.yaml):
//   _adaptive_avg_pool2d_backward: grad_output: _adaptive_avg_pool2d(grad, grad_output's H, W)
//     self: zeros_like(self); saves grad_output (the incoming gradient object)
//   avg_pool2d_backward: grad_output: avg_pool2d(grad, <the forward's arguments>)
//     self: zeros_like(self); saves the forward's arguments (not self)
//   adaptive_max_pool2d_backward: grad_output: max_pool_double_backward(grad, indices, 2)
//     self: zeros_like(self); saves indices
//   upsample_*_backward.vec: grad_output: upsample_*(grad, output_size, scale_factors)
//     one edge; saves output_size, scale_factors (and align_corners)
// Third order through these nodes is not mirrored (unsupported).

Tensor zeros_for(const autograd::OutputMeta& m, bool meta) { return kernels::full(m.sizes, 0.0, m.dtype, meta); }

// An average pool's double-backward node: grad_output's gradient is the pool of grad with
// the windows `windows_of(grad's planes, grad_output's planes)` gives; self's is zeros.
template <typename WindowsOf>
std::vector<Tensor> average_pool_bb_backward(Node& n, const std::vector<Tensor>& g, WindowsOf&& windows_of) {
  require_host(g[0]);
  Tensor a, b;
  if (n.should_compute_output(0)) {
    const auto& m = n.input_meta[0];
    const Planes in = planes_of(g[0]->sizes), out = planes_of(m.sizes);
    a = g[0]->is_meta() ? new_like_meta(m.sizes, m.dtype, true)
                        : filled(m.sizes, m.dtype, false,
                                 pool_forward(to_values(g[0]), in, out.height, out.width, windows_of(in, out)));
  }
  if (n.should_compute_output(1)) b = zeros_for(n.input_meta[1], g[0]->is_meta());
  return {a, b};
}

std::vector<Tensor> adaptive_avg_pool2d_bb_backward(Node& n, const std::vector<Tensor>& g) {
  return average_pool_bb_backward(
      n, g, [](const Planes& in, const Planes& out) { return adaptive_windows(in, out.height, out.width); });
}

std::vector<Tensor> adaptive_avg_pool2d_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {record_backward_op(adaptive_avg_pool2d_backward(n, g)[0], "AdaptiveAvgPool2DBackwardBackward0",
                             adaptive_avg_pool2d_bb_backward, {g[0], n.unpack("self")},
                             [&](Node& bb) { bb.save_input("grad_output", g[0]); })};
}

std::vector<Tensor> avg_pool2d_bb_backward(Node& n, const std::vector<Tensor>& g) {
  const AvgGeometry geometry = avg_geometry_of(n);
  return average_pool_bb_backward(n, g, [&](const Planes& in, const Planes&) { return avg_windows(in, geometry); });
}

std::vector<Tensor> avg_pool2d_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {record_backward_op(avg_pool2d_backward(n, g)[0], "AvgPool2DBackwardBackward0", avg_pool2d_bb_backward,
                             {g[0], n.unpack("self")}, [&](Node& bb) {
                               for (const char* name :
                                    {"ceil_mode", "count_include_pad", "divisor_override", "kernel_size", "padding",
                                     "stride"})
                                 bb.save_attr(name, n.attr(name));
                             })};
}

std::vector<Tensor> adaptive_max_pool2d_dbackward(Node& n, const std::vector<Tensor>& g) {
  return {record_backward_op(adaptive_max_pool2d_backward(n, g)[0], "AdaptiveMaxPool2DBackwardBackward0",
                             max_pool_bb_backward, {g[0], n.unpack("self")},
                             [&](Node& bb) { bb.save_input("indices", n.unpack("result1")); })};
}

std::vector<Tensor> upsample_bb_backward(Node& n, const std::vector<Tensor>& g) {
  require_host(g[0]);
  const auto& m = n.input_meta[0];
  if (g[0]->is_meta()) return {new_like_meta(m.sizes, m.dtype, true)};
  const size_t sd = m.sizes.size() - 2;
  const UpsamplePlan p =
      upsample_plan(g[0]->sizes, std::vector<int64_t>(m.sizes.end() - static_cast<long>(sd), m.sizes.end()));
  return {filled(m.sizes, m.dtype, false, apply_taps(to_values(g[0]), p, taps_of_node(n, p, m.dtype)))};
}

std::vector<Tensor> upsample_dbackward(Node& n, const std::vector<Tensor>& g) {
  // UpsampleNearest2DBackward1 -> UpsampleNearest2DBackwardBackward1.
  static const std::string kSuffix = "Backward1";
  const std::string first = n.name.str();
  const std::string name = first.substr(0, first.size() - kSuffix.size()) + "BackwardBackward1";
  const bool bilinear = first.rfind("UpsampleBilinear", 0) == 0;
  return {record_backward_op(upsample_backward(n, g)[0], name, upsample_bb_backward, {g[0]},
                             [&](Node& bb) {
                               if (bilinear) bb.save_attr("align_corners", n.attr("align_corners"));
                               bb.save_attr("output_size", n.attr("output_size"));
                               bb.save_attr("scale_factors", n.attr("scale_factors"));
                             })};
}

}  // namespace

// ================================================================ forwards

Tensor adaptive_avg_pool2d(const Tensor& input, const std::vector<int64_t>& output_size) {
  OpScope scope("adaptive_avg_pool2d");
  if (output_size.size() != 2) fail("shape_mismatch", "adaptive_avg_pool2d: output_size must be 2");
  if (output_size[0] < 0 || output_size[1] < 0)
    fail("shape_mismatch", "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {" +
                               std::to_string(output_size[0]) + ", " + std::to_string(output_size[1]) + "}");
  // ATen's adaptive_avg_pool2d: a 1x1 output is a mean over the last two dims, before any
  // other check (measured: MeanBackward1 with dim (-1, -2), keepdim True, on a 2-D input too).
  // A channels-last input (suggest_memory_format) then gets channels-last strides on the
  // mean, through out.as_strided_({n, c, 1, 1}, {c, 1, c, c}) (AsStridedBackward1, measured).
  if (output_size[0] == 1 && output_size[1] == 1) {
    Tensor out = mean(input, std::vector<int64_t>{-1, -2}, true);
    if (input->dim() == 4 && kernels::strides_like_channels_last(input->sizes, input->strides)) {
      const int64_t c = input->sizes[1];
      restride_in_place(out, {c, 1, c, c});
    }
    return out;
  }
  const int64_t nd = input->dim();
  if (nd != 3 && nd != 4)
    fail("shape_mismatch", "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got " + shape_str(input->sizes));
  for (int64_t i : {nd - 2, nd - 1})
    if (input->sizes[i] <= 0)
      fail("shape_mismatch",
           "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes " +
               shape_str(input->sizes) + " with dimension " + std::to_string(i) + " being empty");
  require_float_kernel(input, "adaptive_avg_pool2d");
  const bool meta = input->is_meta();
  const Planes in = planes_of(input->sizes);
  const Shape out_shape = with_spatial(input->sizes, output_size[0], output_size[1]);
  Tensor out = meta ? new_like_meta(out_shape, input->dtype(), true)
                    : filled(out_shape, input->dtype(), false,
                             pool_forward(to_values(input), in, output_size[0], output_size[1],
                                          adaptive_windows(in, output_size[0], output_size[1])));
  if (needs_grad({&input})) {
    auto node = make_node("AdaptiveAvgPool2DBackward0", adaptive_avg_pool2d_backward, {input});
    node->differentiable_backward = adaptive_avg_pool2d_dbackward;
    node->save_input("self", input);
    set_history(out, node);
  }
  return out;
}

std::pair<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, const std::vector<int64_t>& output_size) {
  OpScope scope("adaptive_max_pool2d");
  // adaptive_max_pool2d's meta function (messages measured).
  const int64_t nd = input->dim();
  if (nd != 3 && nd != 4)
    fail("shape_mismatch", "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: " + shape_str(input->sizes));
  for (int64_t i = 1; i < nd; ++i)
    if (input->sizes[static_cast<size_t>(i)] <= 0)
      fail("shape_mismatch",
           "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes " +
               shape_str(input->sizes) + " with dimension " + std::to_string(i) + " being empty");
  if (output_size.size() != 2)
    fail("shape_mismatch", "adaptive_max_pool2d(): internal error: output_size.size() must be 2");
  if (output_size[0] < 0 || output_size[1] < 0)
    fail("shape_mismatch", "Trying to create tensor with negative dimension " +
                               std::to_string(output_size[0] < 0 ? output_size[0] : output_size[1]) + ": " +
                               shape_str(with_spatial(input->sizes, output_size[0], output_size[1])));
  require_float_kernel(input, "adaptive_max_pool2d");
  const bool meta = input->is_meta();
  const Planes in = planes_of(input->sizes);
  const int64_t oh_n = output_size[0], ow_n = output_size[1];
  const Shape out_shape = with_spatial(input->sizes, oh_n, ow_n);
  Tensor out = new_like_meta(out_shape, input->dtype(), meta);
  Tensor indices = new_like_meta(out_shape, DType::Int64, meta);
  if (!meta) {
    // cpu_adaptive_max_pool: the window's first element as the initial index, max starting
    // at -inf, replaced when `val > maxval || isnan(val)`.
    const std::vector<double> xv = to_values(input);
    std::vector<double> ov(static_cast<size_t>(in.count * oh_n * ow_n)), iv(ov.size());
    const auto window_of = adaptive_windows(in, oh_n, ow_n);
    for (int64_t p = 0; p < in.count; ++p)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const Window w = window_of(oh, ow);
          int64_t best = w.h0 * in.width + w.w0;
          double best_v = -std::numeric_limits<double>::infinity();
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t c = w.w0; c < w.w1; ++c) {
              const double v = xv[static_cast<size_t>((p * in.height + h) * in.width + c)];
              if (v > best_v || std::isnan(v)) {
                best_v = v;
                best = h * in.width + c;
              }
            }
          const size_t o = static_cast<size_t>((p * oh_n + oh) * ow_n + ow);
          ov[o] = best_v;
          iv[o] = static_cast<double>(best);
        }
    write_values(out, ov);
    write_values(indices, iv);
  }
  if (needs_grad({&input})) {
    auto node = make_node("AdaptiveMaxPool2DBackward0", adaptive_max_pool2d_backward, {input});
    node->differentiable_backward = adaptive_max_pool2d_dbackward;
    node->save_input("result1", indices);
    node->save_input("self", input);
    set_history(out, node);
  }
  return {out, indices};
}

// adaptive_avg_pool1d (AdaptiveAveragePooling.cpp): checkDimRange(self, 2, 4) and a one-entry
// output_size, then the 2-D pool over an unsqueezed height (measured walk: SqueezeBackward1,
// AdaptiveAvgPool2DBackward0 or MeanBackward1, UnsqueezeBackward0).
Tensor adaptive_avg_pool1d(const Tensor& input, const std::vector<int64_t>& output_size) {
  OpScope scope("adaptive_avg_pool1d");
  require_host(input);
  if (input->dim() < 2 || input->dim() > 3)
    fail("shape_mismatch", "Expected 2 to 3 dimensions, but got " + std::to_string(input->dim()) +
                               "-dimensional tensor for argument #1 'self' (while checking arguments for "
                               "adaptive_avg_pool1d)");
  if (output_size.size() != 1)
    fail("shape_mismatch", "adaptive_avg_pool1d() argument 'output_size' should contain one int (got " +
                           std::to_string(output_size.size()) + ")");
  return squeeze(adaptive_avg_pool2d(unsqueeze(input, -2), {1, output_size[0]}), -2);
}

Tensor avg_pool2d(const Tensor& input, const AvgPool2dArgs& args) {
  OpScope scope("avg_pool2d");
  // avg_pool2d's meta function, in its order (messages measured).
  if (args.kernel_size.size() != 1 && args.kernel_size.size() != 2)
    fail("type_error", "avg_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  if (args.stride.size() > 2)
    fail("type_error", "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  if (args.padding.size() != 1 && args.padding.size() != 2)
    fail("type_error", "avg_pool2d: padding must either be a single int, or a tuple of two ints");
  if (args.divisor_override && *args.divisor_override == 0) fail("type_error", "divisor must be not zero");
  const AvgGeometry a =
      avg_geometry(args.kernel_size, args.stride, args.padding, args.count_include_pad, args.divisor_override);
  const int64_t nd = input->dim();
  const int64_t channels = input->sizes[static_cast<size_t>(kernels::wrap_dim(-3, nd))];
  const Planes in = planes_of(input->sizes);
  const int64_t oh = checked_pooling_output_size(in.height, a.kh, a.ph, a.sh, 1, args.ceil_mode);
  const int64_t ow = checked_pooling_output_size(in.width, a.kw, a.pw, a.sw, 1, args.ceil_mode);
  // pool2d_shape_check takes its parameters as int: avg_pool2d's meta function passes its
  // int64 ones narrowed, as C++ narrows them (measured: kernel_size=2**31 with padding=2**30
  // says "kH: -2147483648", stride=2**31 says "dH: -2147483648"); the output size above uses
  // the int64 values.
  const auto as_int = [](int64_t v) { return static_cast<int32_t>(static_cast<uint64_t>(v)); };
  if (as_int(a.kw) <= 0 || as_int(a.kh) <= 0)
    fail("type_error", "kernel size should be greater than zero, but got kH: " + std::to_string(as_int(a.kh)) +
                           " kW: " + std::to_string(as_int(a.kw)));
  if (as_int(a.sw) <= 0 || as_int(a.sh) <= 0)
    fail("type_error", "stride should be greater than zero, but got dH: " + std::to_string(as_int(a.sh)) +
                           " dW: " + std::to_string(as_int(a.sw)));
  // Past these checks 1.13 goes on with a mix of the int64 and the narrowed values (measured:
  // kernel_size=2**32+3 with padding=1 gives a 1x1 output, which neither reading gives).
  for (int64_t v : {a.kh, a.kw, a.sh, a.sw, a.ph, a.pw})
    if (v != as_int(v)) unsupported("avg_pool2d with kernel_size, stride or padding beyond int32");
  const bool valid_dims = input->sizes[1] != 0 && input->sizes[2] != 0;
  if (!((nd == 3 && input->sizes[0] != 0 && valid_dims) || (nd == 4 && valid_dims && input->sizes[3] != 0)))
    fail("shape_mismatch", "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:" +
                               shape_str(input->sizes));
  if (ow < 1 || oh < 1)
    fail("shape_mismatch", "Given input size: (" + std::to_string(channels) + "x" + std::to_string(in.height) + "x" +
                               std::to_string(in.width) + "). Calculated output size: (" + std::to_string(channels) +
                               "x" + std::to_string(oh) + "x" + std::to_string(ow) + "). Output size is too small");
  // The CPU kernel also has Long (integer division of the sums), not mirrored.
  if (input->dtype() == DType::Int64 && !input->is_meta()) unsupported("avg_pool2d of int64 tensors");
  require_float_kernel(input, "avg_pool2d");
  const bool meta = input->is_meta();
  const Shape out_shape = with_spatial(input->sizes, oh, ow);
  Tensor out = meta ? new_like_meta(out_shape, input->dtype(), true)
                    : filled(out_shape, input->dtype(), false, pool_forward(to_values(input), in, oh, ow, avg_windows(in, a)));
  if (needs_grad({&input})) {
    auto node = make_node("AvgPool2DBackward0", avg_pool2d_backward, {input});
    node->differentiable_backward = avg_pool2d_dbackward;
    node->save_attr("ceil_mode", AttrValue::boolean(args.ceil_mode));
    node->save_attr("count_include_pad", AttrValue::boolean(args.count_include_pad));
    node->save_attr("divisor_override",
                    args.divisor_override ? AttrValue::integer(*args.divisor_override) : AttrValue::none());
    node->save_attr("kernel_size", AttrValue::ints(args.kernel_size));
    node->save_attr("padding", AttrValue::ints(args.padding));
    node->save_input("self", input);
    node->save_attr("stride", AttrValue::ints(args.stride));
    set_history(out, node);
  }
  return out;
}

// avg_pool1d (Pooling.cpp): stride defaults to the kernel size, checkDimRange(self, 2, 4), one
// entry per argument, then avg_pool2d over an unsqueezed height with (1, k), (1, s), (0, p)
// (measured: the node saves kernel_size (1, k) and stride (1, s)).
Tensor avg_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride_in,
                  const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad) {
  OpScope scope("avg_pool1d");
  require_host(input);
  const std::vector<int64_t> stride = stride_in.empty() ? kernel_size : stride_in;
  if (input->dim() < 2 || input->dim() > 3)
    fail("shape_mismatch", "Expected 2 to 3 dimensions, but got " + std::to_string(input->dim()) +
                               "-dimensional tensor for argument #1 'self' (while checking arguments for avg_pool1d)");
  for (const auto& [name, v] : {std::pair<const char*, const std::vector<int64_t>*>{"kernel_size", &kernel_size},
                                {"stride", &stride}, {"padding", &padding}})
    if (v->size() != 1)
      fail("shape_mismatch", std::string("avg_pool1d() argument '") + name + "' should contain one int (got " +
                             std::to_string(v->size()) + ")");
  AvgPool2dArgs a;
  a.kernel_size = {1, kernel_size[0]};
  a.stride = {1, stride[0]};
  a.padding = {0, padding[0]};
  a.ceil_mode = ceil_mode;
  a.count_include_pad = count_include_pad;
  return squeeze(avg_pool2d(unsqueeze(input, -2), a), -2);
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  OpScope scope("group_norm");
  const int64_t nd = input->dim();
  const int64_t n = input->sizes[static_cast<size_t>(kernels::wrap_dim(0, nd))];
  const int64_t c = input->sizes[static_cast<size_t>(kernels::wrap_dim(1, nd))];
  // F.group_norm's _verify_batch_size([N * C // G, G] + spatial) runs first in Python.
  if (num_groups == 0) fail("type_error", "integer division or modulo by zero");
  int64_t hxw = 1;
  for (int64_t i = 2; i < nd; ++i) hxw *= input->sizes[static_cast<size_t>(i)];
  {
    const int64_t q = n * c, per = q / num_groups - ((q % num_groups != 0 && ((q < 0) != (num_groups < 0))) ? 1 : 0);
    if (per * hxw == 1) {
      std::string listed = "[" + std::to_string(per) + ", " + std::to_string(num_groups);
      for (int64_t i = 2; i < nd; ++i) listed += ", " + std::to_string(input->sizes[static_cast<size_t>(i)]);
      fail("type_error", "Expected more than 1 value per channel when training, got input size " + listed + "]");
    }
  }
  // check_group_norm_inputs (group_norm.cpp, messages measured; the bias message prints the
  // weight's shape, [0] for None, as 1.13 does).
  if (num_groups <= 0) fail("type_error", "Expected num groups to be greater than 0, got " + std::to_string(num_groups));
  if (c % num_groups != 0)
    fail("shape_mismatch", "Expected number of channels in input to be divisible by num_groups, but got input of shape " +
                               shape_str(input->sizes) + " and num_groups=" + std::to_string(num_groups));
  if (weight && (weight->dim() != 1 || weight->numel() != c))
    fail("shape_mismatch", "Expected weight to be a vector of size equal to the number of channels in input, but got "
                           "weight of shape " + shape_str(weight->sizes) + " and input of shape " + shape_str(input->sizes));
  if (bias && (bias->dim() != 1 || bias->numel() != c))
    fail("shape_mismatch", "Expected bias to be a vector of size equal to the number of channels in input, but got "
                           "bias of shape " + (weight ? shape_str(weight->sizes) : std::string("[0]")) +
                               " and input of shape " + shape_str(input->sizes));
  // group_norm reads X, gamma and beta contiguous (a CloneBackward0 copy for a strided input).
  const Tensor x = contiguous(input);
  const Tensor w = weight ? contiguous(weight) : nullptr;
  const Tensor b = bias ? contiguous(bias) : nullptr;
  require_host(w);
  require_host(b);
  require_float_kernel(x, "GroupNormKernelImpl");
  for (const Tensor* p : {&w, &b})
    if (*p && (*p)->dtype() != x->dtype())
      fail("dtype_mismatch", "expected scalar type " + act_detail::scalar_name(x->dtype()) + " but found " +
                                 act_detail::scalar_name((*p)->dtype()));
  const DType dt = x->dtype();
  const bool meta = x->is_meta();
  const Shape stat_shape{n, num_groups};
  Tensor out, mean_t, rstd_t;
  if (meta) {
    out = new_like_meta(x->sizes, dt, true);
    mean_t = new_like_meta(stat_shape, dt, true);
    rstd_t = new_like_meta(stat_shape, dt, true);
  } else {
    // GroupNormKernelImplInternal (1.13, contiguous input) in the dtype T: each group's mean
    // and variance from RowwiseMoments (ops/layer_norm_cpu.hpp), rstd = 1 / sqrt(max(var, 0)
    // + eps); without weight and bias y = (x - mean) * rstd, else per channel scale = rstd *
    // gamma, bias = -scale * mean + beta (rounded apart) and y = fma(scale, x, bias). Measured
    // against torch 1.13 on 1,367 random float32 groups (1 to 4 channels of 1 to 257
    // elements, with weight and bias, weight only, neither): every mean, rstd and output is
    // torch's; with bias fused into one fma 8,473 outputs of 181,043 differ, and with
    // two-pass double arithmetic 101,538 and the mean of 699 groups.
    const int64_t d = c / num_groups, per_group = d * hxw;
    std::vector<double> mv(static_cast<size_t>(n * num_groups)), rv(mv.size());
    out = uninitialized_tensor(x->sizes, dt, false);
    auto groups_loop = [&](auto zero) {
      using T = decltype(zero);
      const T* xp = detail::elements_of<T>(x);
      const T* wp = detail::elements_of<T>(w);
      const T* bp = detail::elements_of<T>(b);
      T* op = detail::elements_of<T>(out);
      for (int64_t gi = 0; gi < n * num_groups; ++gi) {
        const int64_t base = gi * per_group;
        T m, var;
        ops::layer_norm_cpu::rowwise_moments(xp + base, per_group, m, var);
        const T r = T(1) / std::sqrt(std::max(var, zero) + static_cast<T>(eps));
        mv[static_cast<size_t>(gi)] = m;
        rv[static_cast<size_t>(gi)] = r;
        if (!wp && !bp) {
          for (int64_t k = base; k < base + per_group; ++k) op[k] = (xp[k] - m) * r;
          continue;
        }
        for (int64_t ch = (gi % num_groups) * d; ch < (gi % num_groups + 1) * d; ++ch) {
          const T scale = r * (wp ? wp[ch] : T(1));
          const T shift = -scale * m;
          const T bias = shift + (bp ? bp[ch] : zero);
          const int64_t row = (gi / num_groups * c + ch) * hxw;
          for (int64_t k = row; k < row + hxw; ++k) op[k] = std::fma(scale, xp[k], bias);
        }
      }
    };
    if (dt == DType::Float32) {
      groups_loop(0.0f);
    } else {
      groups_loop(0.0);
    }
    mean_t = filled(stat_shape, dt, false, mv);
    rstd_t = filled(stat_shape, dt, false, rv);
  }
  if (needs_grad({&x, &w, &b})) {
    auto node = make_node("NativeGroupNormBackward0", group_norm_backward, {x, w, b});
    node->save_attr("C", AttrValue::integer(c));
    node->save_attr("HxW", AttrValue::integer(hxw));
    node->save_attr("N", AttrValue::integer(n));
    node->save_attr("eps", AttrValue::real(eps));
    node->save_attr("group", AttrValue::integer(num_groups));
    node->save_input("input", x);
    // mean and rstd are outputs 1 and 2 of native_group_norm, differentiable in 1.13's
    // derivatives.yaml (measured: _saved_result1.requires_grad is True), saved as outputs.
    set_history(out, node, 0);
    set_history(mean_t, node, 1);
    set_history(rstd_t, node, 2);
    node->save_output("result1", mean_t, 1);
    node->save_output("result2", rstd_t, 2);
    node->save_input("weight", w, w != nullptr);
  }
  return out;
}

Tensor upsample_nearest(const Tensor& input, const std::optional<std::vector<int64_t>>& output_size,
                        const std::optional<std::vector<double>>& scale_factors) {
  OpScope scope("interpolate");
  return upsample(input, output_size, scale_factors, false, false);
}

Tensor upsample_bilinear2d(const Tensor& input, const std::optional<std::vector<int64_t>>& output_size,
                           bool align_corners, const std::optional<std::vector<double>>& scale_factors) {
  OpScope scope("interpolate");
  return upsample(input, output_size, scale_factors, true, align_corners);
}

Tensor type_as(const Tensor& self, const Tensor& other) {
  OpScope scope("type_as");
  const std::string from = device_name(self), to = device_name(other);
  // Measured (1.13): a meta tensor's type_as(cpu tensor) raises "Cannot copy out of meta
  // tensor; no data!"; agtrace runs a whole program on one of meta or a real device.
  if (from != to && (from == "meta" || to == "meta"))
    unsupported("type_as(other): moving a tensor between the meta device and " + (from == "meta" ? to : from));
  return to_device(self, other->dtype(), to == "meta" ? self->storage->device.str() : to);
}

}  // namespace agtrace::ops
