#include <string>

#include "cuda/allocator.hpp"
#include "cuda/common.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/indexing.cuh"

namespace agtrace::cuda {

namespace {

__device__ inline int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t thread_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Over `n` elements of an iteration shape: dst[dst.at(i) + idx * dst_step] = src[src.at(i) +
// idx * src_step] with idx = index[index.at(i)] (checked against `limit`), copied or added.
// The dims the index moves along have stride 0 in dst/src and their stride in *_step.
// T: the element type for adds (float, double); copies go through double.
template <typename T>
__global__ void indexed_kernel(Strided dst, int64_t dst_step, Strided src, int64_t src_step, Strided index,
                               int64_t limit, int64_t n, bool add, int* bad) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const int64_t idx = static_cast<const int64_t*>(index.data)[index.at(i)];
    if (idx < 0 || idx >= limit) {
      atomicExch(bad, 1);
      continue;
    }
    const int64_t d = dst.at(i) + idx * dst_step, s = src.at(i) + idx * src_step;
    if (add)
      atomicAdd(static_cast<T*>(dst.data) + d, load<T>(src.data, src.dtype, s));
    else
      store<double>(dst.data, dst.dtype, d, load<double>(src.data, src.dtype, s));
  }
}

template <typename T>
__global__ void add_at_kernel(Strided dst, Strided src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    atomicAdd(static_cast<T*>(dst.data) + dst.at(i), load<T>(src.data, src.dtype, src.at(i)));
}

// Launches indexed_kernel with a device flag for out-of-range indices.
void launch(const std::string& op, const Strided& dst, int64_t dst_step, const Strided& src, int64_t src_step,
            const Strided& index, int64_t limit, int64_t n, bool add, DType add_type) {
  if (n == 0) return;
  int* bad = static_cast<int*>(device_alloc(sizeof(int), op.c_str()));
  struct Free {
    int* p;
    ~Free() {
      try {
        device_free(p);
      } catch (...) {
      }
    }
  } guard{bad};
  check(cudaMemset(bad, 0, sizeof(int)), op, "cudaMemset");
  if (add && add_type == DType::Float64)
    indexed_kernel<double><<<grid_for(n), kBlock>>>(dst, dst_step, src, src_step, index, limit, n, add, bad);
  else
    indexed_kernel<float><<<grid_for(n), kBlock>>>(dst, dst_step, src, src_step, index, limit, n, add, bad);
  check_launch(op);
  int host = 0;
  copy_to_host(&host, bad, sizeof(int), op.c_str());
  if (host != 0)
    throw CudaError("CUDA kernel " + op + ": index out of range (every index must be in [0, " +
                    std::to_string(limit) + "))");
}

int64_t wrap(int64_t dim, size_t ndim, const std::string& op) {
  const std::vector<bool> m = dims_mask(ndim == 0 ? 1 : ndim, {dim}, op);
  for (size_t d = 0; d < m.size(); ++d)
    if (m[d]) return static_cast<int64_t>(d);
  return 0;
}

// t's Strided form over `shape` (t's own sizes must cover it), with dim `dim`'s stride set to
// 0; its stride is returned in *step.
Strided over(const DeviceTensorRef& t, const Shape& shape, int64_t dim, int64_t* step, const std::string& op) {
  if (t.sizes.size() != shape.size()) throw CudaError("CUDA kernel " + op + ": operands must have the same number of dims");
  DeviceTensorRef v = t;
  v.sizes = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int64_t>(d) != dim && shape[d] > t.sizes[d])
      throw CudaError("CUDA kernel " + op + ": index is larger than an operand outside dim " + std::to_string(dim));
  Strided s = make_strided(v, op);
  *step = s.strides[dim];
  s.strides[dim] = 0;
  return s;
}

void check_index(const DeviceTensorRef& index, const std::string& op) {
  if (index.dtype != DType::Int64) throw CudaError("CUDA kernel " + op + ": index must be int64");
}

void check_add_type(const std::string& op, DType d) { require_float_or_double(op, d); }

}  // namespace

void gather(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, const DeviceTensorRef& index) {
  const std::string op = "gather";
  check_index(index, op);
  if (out.sizes != index.sizes) throw CudaError("CUDA kernel gather: out and index must have one shape");
  dim = wrap(dim, in.sizes.size(), op);
  int64_t out_step = 0, in_step = 0, unused = 0;
  Strided o = over(out, index.sizes, dim, &out_step, op);
  o.strides[dim] = out_step;  // out walks its own dim
  Strided x = over(in, index.sizes, dim, &in_step, op);
  Strided ix = over(index, index.sizes, dim, &unused, op);
  ix.strides[dim] = unused;
  launch(op, o, 0, x, in_step, ix, in.sizes[dim], index.numel(), false, out.dtype);
}

void scatter(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index, const DeviceTensorRef& src,
             bool add) {
  const std::string op = add ? "scatter_add" : "scatter";
  check_index(index, op);
  if (add) {
    check_add_type(op, out.dtype);
    if (src.dtype != out.dtype) throw CudaError("CUDA kernel " + op + ": src must have out's dtype");
  }
  dim = wrap(dim, out.sizes.size(), op);
  int64_t out_step = 0, src_step = 0, unused = 0;
  Strided o = over(out, index.sizes, dim, &out_step, op);
  Strided s = over(src, index.sizes, dim, &src_step, op);
  s.strides[dim] = src_step;  // src walks its own dim
  Strided ix = over(index, index.sizes, dim, &unused, op);
  ix.strides[dim] = unused;
  launch(op, o, out_step, s, 0, ix, out.sizes[dim], index.numel(), add, out.dtype);
}

void index_select(const DeviceTensorRef& out, const DeviceTensorRef& in, int64_t dim, const DeviceTensorRef& index) {
  const std::string op = "index_select";
  check_index(index, op);
  if (index.sizes.size() > 1) throw CudaError("CUDA kernel index_select: index must be 1-D");
  dim = wrap(dim, in.sizes.size(), op);
  if (out.sizes.size() != in.sizes.size() || out.sizes[dim] != index.numel())
    throw CudaError("CUDA kernel index_select: the result's shape does not match");
  int64_t out_step = 0, in_step = 0;
  Strided o = over(out, out.sizes, dim, &out_step, op);
  o.strides[dim] = out_step;
  Strided x = over(in, out.sizes, dim, &in_step, op);
  // The index, broadcast over the result: stride 0 except along dim.
  Strided ix = make_strided(DeviceTensorRef{index.data, index.dtype, out.sizes, Shape(out.sizes.size(), 0),
                                            index.offset},
                            op);
  ix.strides[dim] = index.strides.empty() ? 1 : index.strides[0];
  launch(op, o, 0, x, in_step, ix, in.sizes[dim], out.numel(), false, out.dtype);
}

void index_add(const DeviceTensorRef& out, int64_t dim, const DeviceTensorRef& index, const DeviceTensorRef& src) {
  const std::string op = "index_add";
  check_index(index, op);
  check_add_type(op, out.dtype);
  if (src.dtype != out.dtype) throw CudaError("CUDA kernel index_add: src must have out's dtype");
  if (index.sizes.size() > 1) throw CudaError("CUDA kernel index_add: index must be 1-D");
  dim = wrap(dim, out.sizes.size(), op);
  if (src.sizes.size() != out.sizes.size() || src.sizes[dim] != index.numel())
    throw CudaError("CUDA kernel index_add: src's shape does not match");
  int64_t out_step = 0, src_step = 0;
  Strided o = over(out, src.sizes, dim, &out_step, op);
  Strided s = over(src, src.sizes, dim, &src_step, op);
  s.strides[dim] = src_step;
  Strided ix = make_strided(DeviceTensorRef{index.data, index.dtype, src.sizes, Shape(src.sizes.size(), 0),
                                            index.offset},
                            op);
  ix.strides[dim] = index.strides.empty() ? 1 : index.strides[0];
  launch(op, o, out_step, s, 0, ix, out.sizes[dim], src.numel(), true, out.dtype);
}

void view_backward(const DeviceTensorRef& out, const DeviceTensorRef& grad, const Shape& view_strides,
                   int64_t view_offset) {
  const std::string op = "view_backward";
  require_float_or_double(op, out.dtype);
  if (grad.dtype != out.dtype) throw CudaError("CUDA kernel view_backward: grad must have out's dtype");
  if (view_strides.size() != grad.sizes.size())
    throw CudaError("CUDA kernel view_backward: one stride per dim of the view");
  int64_t expect = 1;
  for (size_t d = out.sizes.size(); d-- > 0;) {
    if (out.sizes[d] != 1 && out.strides[d] != expect)
      throw CudaError("CUDA kernel view_backward: the base must be contiguous");
    expect *= out.sizes[d];
  }
  // The view must stay inside the base (as_strided's bounds check).
  int64_t last = view_offset;
  for (size_t d = 0; d < grad.sizes.size(); ++d) {
    if (grad.sizes[d] == 0) return fill(out, 0.0);
    if (view_strides[d] < 0) throw CudaError("CUDA kernel view_backward: negative strides are not supported");
    last += (grad.sizes[d] - 1) * view_strides[d];
  }
  if (view_offset < 0 || last >= out.numel())
    throw CudaError("CUDA kernel view_backward: the view reaches outside its base");
  fill(out, 0.0);
  const int64_t n = grad.numel();
  const Strided dst = make_strided(DeviceTensorRef{out.data, out.dtype, grad.sizes, view_strides,
                                                   out.offset + view_offset},
                                   op);
  const Strided src = make_strided(grad, op);
  if (out.dtype == DType::Float64)
    add_at_kernel<double><<<grid_for(n), kBlock>>>(dst, src, n);
  else
    add_at_kernel<float><<<grid_for(n), kBlock>>>(dst, src, n);
  check_launch(op);
}

}  // namespace agtrace::cuda
