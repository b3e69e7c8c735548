// The device allocator's counters as the rest of agtrace sees them (plain data).
#pragma once
#include <cstdint>

namespace agtrace {

// The device allocator's figures (the fields of lib/cuda/allocator.hpp's AllocatorStats):
// bytes requested by tensors, the same rounded to PyTorch's 512-byte blocks (what
// torch.cuda.memory_allocated() sums), and bytes reserved from the driver.
struct DeviceMemoryStats {
  int64_t requested_live = 0, requested_peak = 0;
  int64_t block_live = 0, block_peak = 0;
  int64_t reserved_live = 0, reserved_peak = 0;
  int64_t driver_calls = 0;
};

}  // namespace agtrace
