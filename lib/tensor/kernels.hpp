// Forward and backward arithmetic on tensors, without autograd. Every function returns
// a new contiguous tensor with its own storage (an allocation the accountant sees),
// except the explicit in-place helpers. On the meta device only shapes are computed.
#pragma once
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "tensor/elementwise.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::kernels {

// PyTorch's type promotion (c10::promoteTypes with the dimensioned / 0-d / wrapped-number
// priority of at::result_type): a Python float with an int tensor gives float32, a 0-d
// float64 tensor with a float32 tensor gives float32.
DType result_type(const Tensor& a, const Tensor& b);
DType promote(DType a, DType b);

// Broadcast shapes; throws ScenarioError shape_mismatch naming both shapes and `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op);

// unary, binary, ternary (with broadcasting), binary_inplace (a = f(a, b), b broadcast to
// a's shape) and unary_inplace: templates over the scalar formula, in tensor/elementwise.hpp.

Tensor full(const Shape& sizes, double v, DType dtype, bool meta);
Tensor copy(const Tensor& a);                    // contiguous copy (clone)
Tensor cast(const Tensor& a, DType dtype);       // new storage of another dtype
// Sum over `dims` (empty = all); keepdim keeps size-1 dims.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> out = {});
// Reduce a broadcast gradient back to `shape` (at::sum_to).
Tensor sum_to(const Tensor& g, const Shape& shape);
// Expand g (shape with reduced dims removed or kept) back to `shape` as a stride-0 view
// (SumBackward's grad.expand), sharing g's storage.
Tensor expand_to(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
Tensor mm(const Tensor& a, const Tensor& b);     // (n,k) @ (k,m)
// addmm of float32 host tensors as PyTorch 1.13's CPU kernel computes it (addmm_impl_cpu_):
// the result first holds `bias_nm` (the bias expanded to (n, m)), then one sgemm computes
// alpha * (a @ b) + beta * result in place, so the bias enters BLAS's float accumulation;
// with beta 0 the bias is not read (NaN included). A null tensor when the operands are not
// all float32 on the host (or a dimension is 0): the caller takes the general path.
Tensor addmm_f32(const Tensor& bias_nm, const Tensor& a, const Tensor& b, double alpha, double beta);
// v rounded as a float operation stores it, and as c10's BFloat16(float(v)) does: to float
// first, then to bfloat16 (what a BFloat16 operation computed in float stores).
double round_f32(double v);
double round_bf16(double v);
// beta * c + alpha * (a @ b) for bfloat16 CPU tensors a (n, k) and b (k, m), read through
// their strides, as PyTorch 1.13's addmm_impl_cpu_ rounds it; c row-major (n, m), ignored
// when beta is 0. Row-major (n, m) values, each a bfloat16.
std::vector<double> bf16_addmm(const Tensor& a, const Tensor& b, const std::vector<double>& c, double beta,
                               double alpha);
// a (B, n, k) @ b (B, k, m) of bfloat16 CPU tensors as PyTorch 1.13's bmm rounds it.
std::vector<double> bf16_bmm(const Tensor& a, const Tensor& b);

// Which bfloat16 kernels PyTorch 1.13 runs on the CPU. oneDNN's bfloat16 matmul and
// convolution are taken only where mkldnn_bf16_device_check() holds: a CPU with avx512bw,
// avx512vl and avx512dq. Elsewhere every bfloat16 product goes to cpublas::gemm's loops and
// a bfloat16 convolution to slow_conv2d, whose roundings differ (measured on an AMD EPYC
// without AVX-512: 345 of 512 conv2d outputs and 3,334 of 4,096 64x64 mm outputs differ
// from the exact value rounded once). agtrace follows the machine it runs on, as PyTorch
// does; AGTRACE_BF16_KERNELS=onednn or =cpublas names the other machine's kernels.
enum class Bf16CpuKernels { OneDnn, Cpublas };
Bf16CpuKernels bf16_cpu_kernels();
void set_bf16_cpu_kernels(Bf16CpuKernels k);  // tests: reproduce either machine
// cpublas::gemm on bfloat16, column-major as BLAS: c (m x n, ldc) = beta * c + alpha * op(a) @ op(b),
// rounded as 1.13's gemm_stub loops round it (gemm_transa_: a float dot rounded once; the
// others: every product rounded to bfloat16 and added to the bfloat16 element in order of k).
void bf16_cpublas_gemm(bool transa, bool transb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                       int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// A matrix inside an array: element (i, j) is data[offset + i*row_stride + j*col_stride].
template <typename S>
struct MatRef {
  const S* data = nullptr;
  int64_t offset = 0, row_stride = 0, col_stride = 0;
};
using MatrixRef = MatRef<double>;
// The same inside a storage (float or double elements).
struct StorageMatrix {
  const Storage* storage = nullptr;
  int64_t offset = 0, row_stride = 0, col_stride = 0;
};
// out[i*m + j] = sum_p a(i, p) * b(p, j) for an (n, k) by (k, m) product, in the precision
// PyTorch's CPU kernel uses for `dtype`: float32 and float64 go through BLAS (sgemm on float
// copies accumulates in float as PyTorch's mm does; dgemm for float64); the other dtypes
// accumulate in double. Values are rounded to dtype. Creates no tensor objects.
void gemm(DType dtype, const MatrixRef& a, const MatrixRef& b, int64_t n, int64_t k, int64_t m, double* out);
// The same product read from and written to storages: out's elements from out_offset on,
// row-major (n, m). Float32 operands are handed to sgemm in place when they are contiguous
// or transposed-contiguous (packed only when genuinely strided) and sgemm writes the float
// result directly: the same call on the same floats as gemm's packed copies, so the same
// results. Other dtypes go through gemm.
void gemm_storage(DType dtype, const StorageMatrix& a, const StorageMatrix& b, int64_t n, int64_t k, int64_t m,
                  Storage& out, int64_t out_offset);
// `batches` such products, the i-th at a.offset + i * a_step, b.offset + i * b_step and
// out_offset + i * n * m (bmm). With several threads and at least as many products as
// threads, the products are shared out between the threads, each one computed by BLAS on
// one thread, as PyTorch 1.13's baddbmm_with_gemm_ runs a parallel_for over the batch;
// otherwise one after the other, each on BLAS's threads.
void gemm_storage_batched(DType dtype, const StorageMatrix& a, int64_t a_step, const StorageMatrix& b, int64_t b_step,
                          int64_t batches, int64_t n, int64_t k, int64_t m, Storage& out, int64_t out_offset);

// Threads for BLAS (--threads; default 1). A given count always gives the same results;
// float32 products may round differently in the last place under another count, as
// PyTorch's do under torch.set_num_threads.
void set_threads(int n);
// The threads BLAS itself splits a product between now (OpenBLAS's count; threads()
// without OpenBLAS): for tests.
int blas_threads();
int threads();

// Direct float32 loops (lib/tensor/fast_paths.hpp and the ops' fast paths, issue #6) are
// taken only where they give exactly the general path's bits; tests switch them off to
// compare both paths bit for bit. On by default.
bool fast_paths();
void set_fast_paths(bool on);
// The tensor's first float32 element when it is a float32 tensor with data (not meta),
// contiguous, and fast paths are on; else null.
const float* contiguous_f32(const Tensor& t);
// Runs f(begin, end) over [0, n) in chunks of at least `grain`, on up to threads() threads
// (the calling thread takes the first chunk). Only for loops whose every element (or row)
// is computed by the same arithmetic whatever the split, so results never depend on the
// thread count; PyTorch's at::parallel_for splits elementwise work the same way (grain
// 32768 elements). A body reads tensors through references and raw element pointers; it
// never copies or releases a Tensor, storage or node pointer, whose reference counts are
// not atomic (lib/util/shared.hpp).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
// The same for a callable of any type: work within one grain runs here without wrapping the
// callable in a std::function (most elementwise calls of a program are that small: issue #6).
template <typename F,
          typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, std::function<void(int64_t, int64_t)>>>>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain > 0 && n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  parallel_for(n, grain, std::function<void(int64_t, int64_t)>(std::forward<F>(f)));
}

// Lets glibc keep freed buffers for reuse instead of unmapping each one: every op result
// was a fresh allocation, and above 128 KiB each was an mmap, page faults on first touch and
// a munmap (measured: -30% CPU time on bench/scenarios/mlp_step.json). Elements of 64 KiB
// and more now come from the large-block arena (util/large_blocks.hpp), which keeps its own;
// this still serves malloc's other users. The process's peak memory is unchanged; memory is
// returned at exit. Called by `agtrace run`.
void keep_freed_buffers();
// A transposed alias of a 2-D tensor (no copy), for mm's backward (grad @ mat2.t()).
Tensor transposed(const Tensor& a);
// Scatter g (the gradient of a view of a tensor of `base_sizes`) into zeros of that shape,
// placing it at the view's sizes/strides/offset relative to a contiguous base, or to a dense
// base of `base_strides`, which the result then has.
Tensor view_backward(const Tensor& g, const Shape& base_sizes, const Shape& view_sizes,
                     const Shape& view_strides, int64_t view_offset, const Shape* base_strides = nullptr);

// Normalises a possibly negative dim; throws index_out_of_range like PyTorch
// ("Dimension out of range (expected to be in range of [-2, 1], but got 2)").
int64_t wrap_dim(int64_t dim, int64_t ndim);

}  // namespace agtrace::kernels
