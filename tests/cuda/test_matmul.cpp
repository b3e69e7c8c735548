// Matrix products through cuBLAS against agtrace's CPU mm (OpenBLAS sgemm/dgemm, or a loop
// accumulating in double for float16/bfloat16).
#include <catch2/catch.hpp>

#include "cuda/matmul.cuh"
#include "support.hpp"

using namespace agtrace;
using namespace agtrace::cuda;
using namespace agtrace::test;

namespace {
// k products summed in float on one side and in float or double on the other.
double mm_tol(DType d) { return d == DType::Float32 ? 2e-5 : tolerance(d) * 2; }

// A [rows, cols] operand in the layout asked for: contiguous, transposed storage, or with
// both strides > 1 (every other element of a wider contiguous tensor: cuBLAS cannot read
// it, so matmul copies it first).
Tensor operand(int64_t rows, int64_t cols, DType d, int layout, double phase) {
  if (layout == 0) return fresh({rows, cols}, d, -1.0, 1.0, phase);
  if (layout == 1) return fresh_transposed({rows, cols}, d, -1.0, 1.0, phase);
  Tensor wide = fresh({rows, 2 * cols}, d, -1.0, 1.0, phase);
  return make_alias(wide, {rows, cols}, {2 * cols * 1, 2}, 1);
}
}  // namespace

TEST_CASE("CUDA mm matches the CPU for every operand layout", "[cuda][matmul]") {
  for (DType d : float_dtypes()) {
    for (int la = 0; la < 3; ++la) {
      for (int lb = 0; lb < 3; ++lb) {
        Tensor a = operand(5, 7, d, la, 0.21), b = operand(7, 3, d, lb, 0.63);
        DeviceTensor da = upload(a), db = upload(b), out = device_empty({5, 3}, d, "test");
        matmul(out.ref, da.ref, db.ref);
        check_close(download(out.ref), kernels::mm(a, b), mm_tol(d),
                    "mm " + dtype_name(d) + " layouts " + std::to_string(la) + std::to_string(lb));
      }
    }
    // A transposed result goes through a temporary.
    Tensor a = fresh({4, 6}, d, -1, 1, 0.3), b = fresh({6, 2}, d, -1, 1, 0.9);
    DeviceTensor da = upload(a), db = upload(b);
    DeviceTensor store = device_empty({2, 4}, d, "test");
    DeviceTensorRef out_t{store.storage.get(), d, {4, 2}, {1, 4}, 0};
    matmul(out_t, da.ref, db.ref);
    check_close(download(out_t), kernels::mm(a, b), mm_tol(d), "mm into a transposed result " + dtype_name(d));
  }
}

TEST_CASE("CUDA bmm matches per-batch CPU products, broadcast batch included", "[cuda][matmul]") {
  for (DType d : {DType::Float32, DType::Float64, DType::Float16}) {
    Tensor a = fresh({3, 4, 5}, d, -1, 1, 0.15);
    Tensor b2 = fresh({5, 2}, d, -1, 1, 0.55);
    // b: the same [5, 2] matrix for every batch (batch stride 0, as an expanded operand).
    Tensor b = make_alias(b2, {3, 5, 2}, {0, 2, 1}, 0);
    DeviceTensor da = upload(a), db = upload(b), out = device_empty({3, 4, 2}, d, "test");
    matmul(out.ref, da.ref, db.ref);
    std::vector<double> want;
    for (int64_t i = 0; i < 3; ++i) {
      Tensor ai = make_alias(a, {4, 5}, {5, 1}, i * 20);
      for (double v : to_values(kernels::mm(ai, b2))) want.push_back(v);
    }
    check_close(download(out.ref), tensor_from_values({3, 4, 2}, d, want), mm_tol(d), "bmm " + dtype_name(d));
  }
}

TEST_CASE("CUDA matmul: k = 0 gives zeros - bad shapes and dtypes throw naming the op", "[cuda][matmul]") {
  Tensor a = fresh({2, 0}, DType::Float32), b = fresh({0, 3}, DType::Float32);
  DeviceTensor da = upload(a), db = upload(b), out = device_empty({2, 3}, DType::Float32, "test");
  matmul(out.ref, da.ref, db.ref);
  check_close(download(out.ref), kernels::full({2, 3}, 0.0, DType::Float32, false), "k = 0");
  Tensor c = fresh({3, 3}, DType::Float32);
  DeviceTensor dc = upload(c);
  try {
    matmul(out.ref, dc.ref, dc.ref);
    FAIL("a [3, 3] @ [3, 3] product into [2, 3] did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("mm") != std::string::npos);
  }
  Tensor i = fresh({2, 2}, DType::Int64, 1, 4);
  DeviceTensor di = upload(i), oi = device_empty({2, 2}, DType::Int64, "test");
  try {
    matmul(oi.ref, di.ref, di.ref);
    FAIL("an int64 product did not throw");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("unsupported dtype for CUDA kernel mm") != std::string::npos);
  }
}
