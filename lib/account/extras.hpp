// What the accountant adds to a run's result beyond the figures the spec fixes: the
// allocator model, where the peak happened, and the category of the storage behind each
// saved value while it was alive. Plain data (no includes of the interpreter), so
// interp/result.hpp can hold it and the printers read it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device_stats.hpp"
#include "util/interned_string.hpp"

namespace agtrace {

// A model of what PyTorch's CUDA caching allocator hands out (c10/cuda/CUDACachingAllocator.cpp,
// round_size: requests are rounded up to a multiple of kMinBlockSize = 512 bytes; a 0-byte
// tensor takes no block). Segment sizes (2 MiB small pool, 20 MiB / 2 MiB-multiples for
// large blocks), block splitting and caching of freed blocks are NOT modelled: this is the
// sum of rounded live blocks, a lower bound of `torch.cuda.memory_reserved()` and the value
// `torch.cuda.memory_allocated()` reports for the same live tensors.
constexpr int64_t kAllocatorBlock = 512;
inline int64_t allocator_block_bytes(int64_t bytes) {
  return bytes <= 0 ? 0 : (bytes + kAllocatorBlock - 1) / kAllocatorBlock * kAllocatorBlock;
}

struct AllocatorModel {
  int64_t peak_bytes = 0;          // peak of the rounded live blocks
  int peak_statement = -1;
  int64_t live_at_end = 0;
  int64_t saved_unique_bytes = 0;  // rounded blocks of the storages reached by saved tensors
  int64_t graph_only_bytes = 0;    // rounded blocks held only by the graph, at its peak
};

// Where the peak of live bytes happened: the statement and, inside a backward, the node
// that was running (or the op that was allocating in the forward).
struct PeakLocation {
  int statement = -1;
  bool in_backward = false;
  std::string op;
};

// What the device allocator itself counted during a cuda run (tensor/device_backend.hpp):
// measured, beside the model above. Absent (present false) on CPU and meta runs.
struct DeviceMeasurement {
  bool present = false;
  std::string device;      // the backend's description (the GPU's name)
  DeviceMemoryStats stats;  // peaks, and live values at the end before the names are dropped
};

// Saved value id -> the category name (one of the static kHolderCategories strings), ids
// appended in ascending order and found by binary search: a std::map node and a string per
// saved value cost ~1 % of a 10,000-op chain's run (issue #6).
class SavedCategories {
 public:
  using Entry = std::pair<int64_t, const char*>;
  // `id` above every id appended before (the accountant appends in saved value id order).
  void append(int64_t id, const char* category) {
    if (!entries_.empty() && id <= entries_.back().first)
      throw std::logic_error("SavedCategories: ids must be appended in ascending order");
    entries_.emplace_back(id, category);
  }
  // The category of saved value `id`, null when it was never seen held.
  const char* find(int64_t id) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), id,
                               [](const Entry& e, int64_t want) { return e.first < want; });
    return it != entries_.end() && it->first == id ? it->second : nullptr;
  }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
};

struct AccountExtras {
  AllocatorModel model;
  DeviceMeasurement device;
  PeakLocation peak;
  // saved value id -> category of its storage at the last statement end while it was held
  // (grad, leaf_param, leaf_input, named, graph_only, other); absent: never seen held.
  SavedCategories saved_category;
  // storage id -> holders at the last statement end (not the union over the run).
  std::map<int64_t, std::vector<InternedString>> holders_at_end;
};

}  // namespace agtrace
