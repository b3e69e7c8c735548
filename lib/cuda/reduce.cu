#include <string>

#include "cuda/block_reduce.cuh"
#include "cuda/reduce.cuh"

namespace agtrace::cuda {

namespace {

// outer: the kept dims of `in`; inner: its reduced dims; out: the kept dims of `out`.
template <typename T>
__global__ void reduce_kernel(int op, Strided out, Strided outer, Strided inner, int64_t rows, int64_t count) {
  __shared__ T shared[kBlock];
  const bool is_max = op == static_cast<int>(ReduceOp::Amax), is_min = op == static_cast<int>(ReduceOp::Amin);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = outer.at(row);
    if (is_max || is_min) {
      // amin(x) = -amax(-x): one tree for both.
      T acc = -infinity<T>();
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        T v = load<T>(outer.data, outer.dtype, base + inner.at(i));
        if (is_min) v = -v;
        acc = (acc != acc) ? acc : ((v != v) ? v : (v > acc ? v : acc));
      }
      T r = block_max(acc, shared);
      if (is_min) r = -r;
      if (threadIdx.x == 0) store<T>(out.data, out.dtype, out.at(row), r);
    } else {
      T acc = 0;
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
        acc += load<T>(outer.data, outer.dtype, base + inner.at(i));
      T r = block_sum(acc, shared);
      // MeanOps multiplies by factor = (output numel) / (input numel), computed once.
      if (op == static_cast<int>(ReduceOp::Mean)) r *= T(1) / static_cast<T>(count);
      if (threadIdx.x == 0) store<T>(out.data, out.dtype, out.at(row), r);
    }
  }
}

// GreaterOrNan / LessOrNan of SharedReduceOps.h: is (a, ia) the better candidate?
template <typename T>
__device__ inline bool better(T a, int64_t ia, T b, int64_t ib, bool is_min) {
  if (a != a) return (b != b) ? ia < ib : true;
  if (b != b) return false;
  if (a == b) return ia < ib;
  return is_min ? a < b : a > b;
}

template <typename T>
__global__ void max_dim_kernel(Strided values, Strided indices, Strided outer, Strided inner, int64_t rows,
                               int64_t count, bool is_min) {
  __shared__ T sv[kBlock];
  __shared__ int64_t si[kBlock];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = outer.at(row);
    T best = 0;
    int64_t best_i = -1;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const T v = load<T>(outer.data, outer.dtype, base + inner.at(i));
      if (best_i < 0 || better(v, i, best, best_i, is_min)) best = v, best_i = i;
    }
    sv[threadIdx.x] = best;
    si[threadIdx.x] = best_i;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) {
        const int64_t j = si[threadIdx.x + s];
        if (j >= 0 && (si[threadIdx.x] < 0 || better(sv[threadIdx.x + s], j, sv[threadIdx.x], si[threadIdx.x], is_min))) {
          sv[threadIdx.x] = sv[threadIdx.x + s];
          si[threadIdx.x] = j;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      store<T>(values.data, values.dtype, values.at(row), sv[0]);
      static_cast<int64_t*>(indices.data)[indices.at(row)] = si[0];
    }
    __syncthreads();
  }
}

bool in_double(DType d) { return d == DType::Float64 || d == DType::Int64 || d == DType::Bool; }

// The kept dims of `out`, which has in's shape with `mask`ed dims reduced (keepdim or not).
Strided kept_out(const DeviceTensorRef& out, const DeviceTensorRef& in, const std::vector<bool>& mask, bool keepdim,
                 const std::string& op) {
  size_t kept = 0;
  for (bool m : mask) kept += m ? 0 : 1;
  const size_t expect = keepdim ? in.sizes.size() : kept;
  if (out.sizes.size() != expect) throw CudaError("CUDA kernel " + op + ": the result has the wrong number of dims");
  if (keepdim) {
    Strided o, unused;
    split_dims(out, mask, o, unused, op);
    return o;
  }
  return make_strided(out, op);
}

}  // namespace

void reduce(ReduceOp op, const DeviceTensorRef& out, const DeviceTensorRef& in, const std::vector<int64_t>& dims,
            bool keepdim) {
  const char* names[] = {"sum", "mean", "amax", "amin"};
  const std::string name = names[static_cast<int>(op)];
  const std::vector<bool> mask = dims_mask(in.sizes.size(), dims, name);
  Strided outer, inner;
  split_dims(in, mask, outer, inner, name);
  const Strided o = kept_out(out, in, mask, keepdim, name);
  int64_t rows = 1, count = 1;
  for (int d = 0; d < outer.ndim; ++d) rows *= outer.sizes[d];
  for (int d = 0; d < inner.ndim; ++d) count *= inner.sizes[d];
  if (rows != out.numel()) throw CudaError("CUDA kernel " + name + ": the result's shape does not match");
  if (rows == 0) return;
  if (count == 0 && (op == ReduceOp::Amax || op == ReduceOp::Amin))
    throw CudaError("CUDA kernel " + name + ": cannot reduce over a dimension of size 0");
  if (in_double(in.dtype) || in_double(out.dtype))
    reduce_kernel<double><<<row_grid(rows), kBlock>>>(static_cast<int>(op), o, outer, inner, rows, count);
  else
    reduce_kernel<float><<<row_grid(rows), kBlock>>>(static_cast<int>(op), o, outer, inner, rows, count);
  check_launch(name);
}

void max_dim(const DeviceTensorRef& values, const DeviceTensorRef& indices, const DeviceTensorRef& in, int64_t dim,
             bool keepdim, bool is_min) {
  const std::string name = is_min ? "min" : "max";
  if (indices.dtype != DType::Int64) throw CudaError("CUDA kernel " + name + ": indices must be int64");
  if (in.sizes.empty()) throw CudaError("CUDA kernel " + name + ": a 0-d tensor has no dim to reduce");
  const std::vector<bool> mask = dims_mask(in.sizes.size(), {dim}, name);
  Strided outer, inner;
  split_dims(in, mask, outer, inner, name);
  const Strided v = kept_out(values, in, mask, keepdim, name), ix = kept_out(indices, in, mask, keepdim, name);
  int64_t rows = 1;
  for (int d = 0; d < outer.ndim; ++d) rows *= outer.sizes[d];
  const int64_t count = inner.sizes[0];
  if (rows != values.numel() || rows != indices.numel())
    throw CudaError("CUDA kernel " + name + ": the result's shape does not match");
  if (rows == 0) return;
  if (count == 0) throw CudaError("CUDA kernel " + name + ": cannot reduce over a dimension of size 0");
  if (in_double(in.dtype))
    max_dim_kernel<double><<<row_grid(rows), kBlock>>>(v, ix, outer, inner, rows, count, is_min);
  else
    max_dim_kernel<float><<<row_grid(rows), kBlock>>>(v, ix, outer, inner, rows, count, is_min);
  check_launch(name);
}

}  // namespace agtrace::cuda
