#include <cublas_v2.h>

#include <climits>
#include <mutex>
#include <string>

#include "cuda/allocator.hpp"
#include "cuda/common.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/matmul.cuh"

namespace agtrace::cuda {

namespace {

void check_cublas(cublasStatus_t s, const std::string& op, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cuBLAS error in " + op + " (" + call + "): " + cublasGetStatusString(s));
}

// cuBLAS's workspace: 4096 KiB x 2 + 16 KiB x 8, PyTorch's default CUBLAS_WORKSPACE_CONFIG
// (":4096:2:16:8", CublasHandlePool.cpp), taken from our allocator as PyTorch takes it from
// its caching allocator, so that every device byte is counted (it stays live once the first
// product has run, as in PyTorch).
constexpr int64_t kCublasWorkspaceBytes = (4096 * 2 + 16 * 8) * int64_t{1024};

// One handle for the process (device 0), created on first use; its math mode is the
// default (no TF32 for float32).
cublasHandle_t handle(const std::string& op) {
  static std::mutex mu;
  static cublasHandle_t h = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (h == nullptr) {
    cublasHandle_t created = nullptr;
    check_cublas(cublasCreate(&created), op, "cublasCreate");
    check_cublas(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH), op, "cublasSetMathMode");
    void* workspace = device_alloc(kCublasWorkspaceBytes, "cublas workspace");
    check_cublas(cublasSetWorkspace(created, workspace, static_cast<size_t>(kCublasWorkspaceBytes)), op,
                 "cublasSetWorkspace");
    h = created;
  }
  return h;
}

// A temporary contiguous tensor freed at the end of the call.
struct Temp {
  void* p = nullptr;
  ~Temp() {
    try {
      device_free(p);
    } catch (...) {
    }
  }
};

// One operand as cuBLAS sees it: pointer to its first element, leading dimension, whether
// it is a transposed (column-major) matrix, and the batch stride (elements).
struct Operand {
  const char* ptr = nullptr;
  int64_t ld = 0, batch_stride = 0;
  bool transposed = false;
};

// rows x cols matrices (batched when t has 3 dims); copies t into `temp` when its strides
// are neither row-major nor column-major.
Operand operand(const DeviceTensorRef& t, Temp& temp, const std::string& op) {
  const size_t nd = t.sizes.size();
  const int64_t rows = t.sizes[nd - 2], cols = t.sizes[nd - 1];
  int64_t rs = t.strides[nd - 2], cs = t.strides[nd - 1];
  if (cols == 1) cs = 1;  // the stride of a size-1 dim does not matter
  if (rows == 1) rs = cols > 1 ? cols : 1;
  Operand o;
  o.batch_stride = nd == 3 ? (t.sizes[0] == 1 ? 0 : t.strides[0]) : 0;
  const int64_t es = dtype_size(t.dtype);
  if (cs == 1 && rs >= (cols > 1 ? cols : 1)) {
    o.ptr = static_cast<const char*>(t.data) + t.offset * es;
    o.ld = rs;
    return o;
  }
  if (rs == 1 && cs >= (rows > 1 ? rows : 1)) {
    o.ptr = static_cast<const char*>(t.data) + t.offset * es;
    o.ld = cs;
    o.transposed = true;
    return o;
  }
  int64_t n = 1;
  for (int64_t s : t.sizes) n *= s;
  temp.p = device_alloc(n * es, op.c_str());
  DeviceTensorRef dense{temp.p, t.dtype, t.sizes, {}, 0};
  dense.strides.assign(nd, 1);
  for (size_t d = nd - 1; d-- > 0;) dense.strides[d] = dense.strides[d + 1] * t.sizes[d + 1];
  copy(dense, t);
  o.ptr = static_cast<const char*>(temp.p);
  o.ld = cols > 1 ? cols : 1;
  o.batch_stride = nd == 3 ? rows * cols : 0;
  return o;
}

int to_int(int64_t v, const std::string& op) {
  if (v > INT_MAX) throw CudaError("CUDA kernel " + op + ": a dimension exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void matmul(const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b) {
  const size_t nd = a.sizes.size();
  const std::string op = nd == 3 ? "bmm" : "mm";
  if (nd < 2 || nd > 3 || b.sizes.size() != nd || out.sizes.size() != nd)
    throw CudaError("CUDA kernel " + op + ": operands must be matrices or batches of matrices");
  const DType dt = out.dtype;
  if (dt != DType::Float32 && dt != DType::Float64 && dt != DType::Float16 && dt != DType::BFloat16)
    unsupported_dtype(op, dt);
  if (a.dtype != dt || b.dtype != dt) throw CudaError("CUDA kernel " + op + ": operands must have the result's dtype");
  const int64_t batch = nd == 3 ? out.sizes[0] : 1;
  const int64_t n = a.sizes[nd - 2], k = a.sizes[nd - 1], m = b.sizes[nd - 1];
  if (b.sizes[nd - 2] != k || out.sizes[nd - 2] != n || out.sizes[nd - 1] != m ||
      (nd == 3 && (a.sizes[0] != batch || b.sizes[0] != batch)))
    throw CudaError("CUDA kernel " + op + ": shapes do not match for a matrix product");
  if (batch == 0 || n == 0 || m == 0) return;
  if (k == 0) {  // an empty sum: zeros (cuBLAS would leave C to beta * C)
    fill(out, 0.0);
    return;
  }
  Temp ta, tb, tc;
  const Operand A = operand(a, ta, op), B = operand(b, tb, op);
  // The result: written in place when row-major, else through a contiguous temporary.
  Operand C;
  {
    const int64_t rs = out.strides[nd - 2], cs = m == 1 ? 1 : out.strides[nd - 1];
    const int64_t es = dtype_size(dt);
    if (cs == 1 && (n == 1 || rs >= m)) {
      C.ptr = static_cast<const char*>(out.data) + out.offset * es;
      C.ld = n == 1 ? m : rs;
      C.batch_stride = nd == 3 ? out.strides[0] : 0;
    } else {
      tc.p = device_alloc(batch * n * m * es, op.c_str());
      C.ptr = static_cast<const char*>(tc.p);
      C.ld = m;
      C.batch_stride = n * m;
    }
  }
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's first operand is B.
  const cublasOperation_t opb = B.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = A.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = to_int(m, op), in = to_int(n, op), ik = to_int(k, op), ib = to_int(batch, op);
  const int lda = to_int(A.ld, op), ldb = to_int(B.ld, op), ldc = to_int(C.ld, op);
  cublasHandle_t h = handle(op);
  void* c_ptr = const_cast<char*>(C.ptr);
  if (dt == DType::Float32) {
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSgemmStridedBatched(h, opb, opa, im, in, ik, &one, reinterpret_cast<const float*>(B.ptr), ldb,
                                           B.batch_stride, reinterpret_cast<const float*>(A.ptr), lda, A.batch_stride,
                                           &zero, static_cast<float*>(c_ptr), ldc, C.batch_stride, ib),
                 op, "cublasSgemmStridedBatched");
  } else if (dt == DType::Float64) {
    const double one = 1.0, zero = 0.0;
    check_cublas(cublasDgemmStridedBatched(h, opb, opa, im, in, ik, &one, reinterpret_cast<const double*>(B.ptr),
                                           ldb, B.batch_stride, reinterpret_cast<const double*>(A.ptr), lda,
                                           A.batch_stride, &zero, static_cast<double*>(c_ptr), ldc, C.batch_stride,
                                           ib),
                 op, "cublasDgemmStridedBatched");
  } else {
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType t = dt == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
    check_cublas(cublasGemmStridedBatchedEx(h, opb, opa, im, in, ik, &one, B.ptr, t, ldb, B.batch_stride, A.ptr, t,
                                            lda, A.batch_stride, &zero, c_ptr, t, ldc, C.batch_stride, ib,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 op, "cublasGemmStridedBatchedEx");
  }
  check_launch(op);
  if (tc.p != nullptr) {
    DeviceTensorRef dense{tc.p, dt, out.sizes, {}, 0};
    dense.strides = nd == 3 ? Shape{n * m, m, 1} : Shape{m, 1};
    copy(out, dense);
  }
}

}  // namespace agtrace::cuda
