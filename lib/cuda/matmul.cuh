// Matrix products through cuBLAS. Host launchers with no CUDA types.
//
// matmul: out (n, m) = a (n, k) @ b (k, m), or batched (bmm): out (B, n, m) = a (B, n, k) @
// b (B, k, m), a batch stride of 0 (an expanded operand) included. cuBLAS is column-major;
// a row-major product is computed as its transpose (C^T = B^T A^T), which reads each
// row-major operand as its column-major transpose without a copy. An operand whose rows
// and columns are both strided (neither a row-major nor a transposed matrix) is first
// copied to a contiguous temporary (device_alloc, counted), as PyTorch's addmm/bmm does
// with a non-BLAS-compatible operand (it calls .contiguous()).
//
// float32: cublasSgemm(StridedBatched) in the default math mode, i.e. without TF32, as
// PyTorch 1.13 does by default (torch.backends.cuda.matmul.allow_tf32 = False since 1.12);
// float64: cublasDgemm; float16/bfloat16: cublasGemmEx with float accumulation
// (CUBLAS_COMPUTE_32F), as PyTorch's at::cuda::blas::gemm. Other dtypes throw ("unsupported
// dtype for CUDA kernel mm"; PyTorch has no integer CUDA matmul either). Every cuBLAS status
// is checked and thrown as CudaError naming the call and cuBLAS's own status string.
// cuBLAS's workspace (8.1 MiB, PyTorch's default size) comes from device_alloc on the first
// product and stays live, as in PyTorch.
#pragma once
#include "cuda/device_tensor.hpp"

namespace agtrace::cuda {

void matmul(const DeviceTensorRef& out, const DeviceTensorRef& a, const DeviceTensorRef& b);

}  // namespace agtrace::cuda
