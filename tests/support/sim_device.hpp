// A host-memory stand-in for the cuda device, for tests on machines without a GPU: cuda
// storages get buffers here (elements kept as double, whatever the dtype), and the byte
// counts follow lib/cuda's allocator (requested bytes, 512-byte blocks; no cache, so
// reserved equals blocks). It runs no kernels: what it checks is placement, transfers and
// accounting, i.e. everything of a cuda run except the GPU's arithmetic (that is
// agtrace_cuda_tests' job, on a GPU).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "tensor/device_backend.hpp"

namespace agtrace::testing {

class SimulatedDevice : public DeviceBackend {
 public:
  ~SimulatedDevice() override;
  std::string description() const override { return "host simulation"; }
  void* allocate(int64_t bytes, const char* op) override;
  void release(void* p) noexcept override;
  void zero(void* p, int64_t bytes, const char* op) override;
  void upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) override;
  void download(double* dst, const void* src, DType dtype, int64_t n, const char* op) override;
  DeviceMemoryStats stats() const override { return stats_; }

  int64_t live_buffers() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t uploads = 0, downloads = 0;  // element copies in each direction

 private:
  struct Block {
    int64_t bytes = 0;
    std::vector<double> elements;  // at most `bytes` elements (bool: one byte each)
  };
  Block& block(const void* p, const char* op);
  std::map<const void*, std::unique_ptr<Block>> blocks_;
  DeviceMemoryStats stats_;
};

}  // namespace agtrace::testing
