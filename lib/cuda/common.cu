// Host helpers shared by the kernel families (common.cuh).
#include <vector>

#include "cuda/common.cuh"

namespace agtrace::cuda {

namespace {
// dtype_name's names (lib/tensor/dtype.cpp), repeated: agtrace_cuda uses lib/tensor's headers
// but not its code, so that agtrace_lib -> agtrace_cuda is not a cycle.
const char* dtype_label(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}
}  // namespace

[[noreturn]] void unsupported_dtype(const std::string& op, DType d) {
  throw CudaError("unsupported dtype for CUDA kernel " + op + ": " + dtype_label(d));
}

void require_float_or_double(const std::string& op, DType d) {
  if (d != DType::Float32 && d != DType::Float64) unsupported_dtype(op, d);
}

Strided make_strided(const DeviceTensorRef& t, const std::string& op) { return make_broadcast(t, t.sizes, op); }

Strided make_broadcast(const DeviceTensorRef& t, const Shape& shape, const std::string& op) {
  const int nd = static_cast<int>(shape.size()), td = static_cast<int>(t.sizes.size());
  if (nd > kMaxDims) throw CudaError("CUDA kernel " + op + ": tensors of more than 8 dims are not supported");
  if (td > nd || t.strides.size() != t.sizes.size())
    throw CudaError("CUDA kernel " + op + ": an operand does not broadcast to the result's shape");
  Strided s;
  s.data = t.data;
  s.dtype = dtype_code(t.dtype);
  s.ndim = nd;
  s.offset = t.offset;
  for (int d = 0; d < nd; ++d) {
    s.sizes[d] = shape[d];
    const int src = d - (nd - td);  // aligned from the right, as broadcasting does
    if (src < 0) {
      s.strides[d] = 0;
    } else if (t.sizes[src] == shape[d]) {
      s.strides[d] = t.strides[src];
    } else if (t.sizes[src] == 1) {
      s.strides[d] = 0;
    } else {
      throw CudaError("CUDA kernel " + op + ": an operand does not broadcast to the result's shape");
    }
  }
  return s;
}


void split_dims(const DeviceTensorRef& t, const std::vector<bool>& is_inner, Strided& outer, Strided& inner,
                const std::string& op) {
  if (t.sizes.size() > static_cast<size_t>(kMaxDims) || t.strides.size() != t.sizes.size() ||
      is_inner.size() != t.sizes.size())
    throw CudaError("CUDA kernel " + op + ": tensors of more than 8 dims are not supported");
  outer = Strided{};
  inner = Strided{};
  outer.data = t.data;
  outer.dtype = dtype_code(t.dtype);
  outer.offset = t.offset;
  inner.dtype = outer.dtype;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    Strided& s = is_inner[d] ? inner : outer;
    s.sizes[s.ndim] = t.sizes[d];
    s.strides[s.ndim] = t.strides[d];
    ++s.ndim;
  }
}

std::vector<bool> dims_mask(size_t ndim, const std::vector<int64_t>& dims, const std::string& op) {
  std::vector<bool> m(ndim, dims.empty());
  for (int64_t d : dims) {
    const int64_t w = d < 0 ? d + static_cast<int64_t>(ndim) : d;
    if (w < 0 || w >= static_cast<int64_t>(ndim))
      throw CudaError("CUDA kernel " + op + ": dim " + std::to_string(d) + " out of range for " +
                      std::to_string(ndim) + " dims");
    m[static_cast<size_t>(w)] = true;
  }
  return m;
}

}  // namespace agtrace::cuda
