// Where large blocks live: a tensor's elements from kMinBytes on (tensor/tensor.cpp), and
// the executables' other operator-new requests of that size (util/small_object_pool.cpp:
// growing record vectors, kernels' scratch, the report's buffers).
//
// A whole `agtrace run` touches every page of its tensors for the first time. On 4 KiB pages
// (glibc's heap, which `agtrace run` keeps instead of unmapping, kernels.hpp
// keep_freed_buffers) the kernel's page faults were 17-33 % of each model-shaped run (`perf
// record`: clear_page and the fault path). This arena is one address range reserved at the
// first request, made writable as it grows and, past its first 2 MiB, marked for transparent
// huge pages (MADV_HUGEPAGE: one fault per 2 MiB where the kernel allows them; `madvise` is
// the usual setting of /sys/kernel/mm/transparent_hugepage/enabled, `always` works too).
// Freed blocks are kept (merged with free neighbours) and reused best-fit, so a step's
// temporaries reuse pages already there; bytes never handed out before are known to be zero,
// so a zero-filled tensor made there skips its memset. Faults of `agtrace run --format json`
// (perf stat): bench/scenarios/conv_block.json 3,978 -> 1,103, resnet18_b8.json 27,467 ->
// 1,594, nanogpt_step.json 7,253 -> 1,627; peak RSS moves by under 2 MiB either way.
//
// Off (every request goes to malloc) when AGTRACE_LARGE_BLOCKS=0 is in the environment at
// the first request, when the range cannot be reserved, and under AddressSanitizer, which
// must see every block to find overflows.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace agtrace::large_blocks {

constexpr size_t kMinBytes = size_t{64} * 1024;
constexpr size_t kGranule = 4096;  // blocks are whole pages, page-aligned

// A block of at least the bytes asked for. Its first `dirty_bytes` bytes may hold old data;
// the rest are zero (never handed out before). Never null: malloc's failure is
// std::bad_alloc.
struct Block {
  void* data = nullptr;
  size_t dirty_bytes = 0;
};

// One reserved range and its free blocks; the process's is `allocate`/`release` below (tests
// make their own, small ones).
class Arena {
 public:
  // reserve_bytes: the largest range tried (smaller ones after, down to 1/16 of it);
  // enabled false: every request goes to malloc.
  Arena(size_t reserve_bytes, bool enabled);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Block allocate(size_t bytes);
  void release(void* data) noexcept;  // accepts null, the arena's blocks and malloc's
  bool owns(const void* p) const noexcept;
  bool enabled() const noexcept { return base_ != nullptr; }

  struct Stats {
    size_t reserved = 0;     // bytes of address range
    size_t top = 0;          // where the next block not taken from a free block starts
    size_t high_water = 0;   // bytes ever handed out from the start of the range
    size_t in_use = 0;       // bytes in blocks handed out now
    size_t free_bytes = 0;   // bytes in kept free blocks below top
    size_t free_blocks = 0;
  };
  Stats stats() const;

 private:
  void take_free(size_t offset, size_t length);
  void put_free(size_t offset, size_t length);
  bool commit_to(size_t end) noexcept;

  char* base_ = nullptr;
  size_t reserved_ = 0;
  size_t committed_ = 0;
  size_t top_ = 0;
  size_t high_water_ = 0;
  size_t in_use_ = 0;
  mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::map<size_t, size_t> in_use_blocks_;             // offset -> length
  std::map<size_t, size_t> free_by_offset_;            // offset -> length
  std::set<std::pair<size_t, size_t>> free_by_length_;  // (length, offset)
};

// The process's arena (reserved at the first call).
Block allocate(size_t bytes);
void release(void* data) noexcept;
Arena::Stats stats();

}  // namespace agtrace::large_blocks
