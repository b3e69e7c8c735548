// The one device allocator of agtrace: every byte of GPU memory agtrace uses is taken
// from the driver here and counted, so a report can show side by side
//  - requested bytes: what the operations asked for (a tensor's nbytes),
//  - block bytes: the same requests rounded as PyTorch's CUDA caching allocator rounds
//    them (c10/cuda/CUDACachingAllocator.cpp, round_size: kMinBlockSize = 512, so a
//    request of n bytes takes max(512, 512 * ceil(n / 512)) bytes of a block; this is what
//    torch.cuda.memory_allocated() sums),
//  - reserved bytes: what cudaMalloc actually gave us, which the cache keeps after a free
//    (the counterpart of torch.cuda.memory_reserved()).
//
// Caching policy (simple on purpose): a freed block goes to a free list keyed by its
// rounded size and is reused only by a request of exactly that rounded size; blocks are
// never split or merged, and each block is its own cudaMalloc. PyTorch instead carves
// blocks out of 2 MiB (small pool) or 20 MiB+ (large pool) segments and splits them, so
// its reserved figure differs from ours; its allocated figure (block bytes) does not.
// When cudaMalloc fails, the cache is released and the call retried once (PyTorch also
// frees cached blocks and retries before raising out-of-memory).
//
// A block may be freed while a kernel launched earlier still uses it (launches are
// asynchronous): every kernel, copy and cuBLAS call of lib/cuda runs on the legacy default
// stream, in order, so whatever reuses the block runs after that kernel has finished, and
// cudaFree (release_cached) waits for the device. PyTorch's caching allocator relies on the
// same stream order.
//
// No CUDA types: callable from any translation unit of a CUDA build.
#pragma once
#include <cstdint>

namespace agtrace::cuda {

struct AllocatorStats {
  int64_t requested_live = 0, requested_peak = 0;  // logical bytes handed out
  int64_t block_live = 0, block_peak = 0;          // the same, rounded to 512-byte blocks
  int64_t reserved_live = 0, reserved_peak = 0;    // bytes obtained from cudaMalloc, cache included
  int64_t driver_calls = 0;                        // cudaMalloc + cudaFree calls made
  int64_t cache_hits = 0;                          // requests served from the cache
};

// PyTorch's rounding of a request (see above): 0 stays 0.
int64_t round_block_size(int64_t bytes);

// A block of at least `bytes` bytes (aligned to 256 bytes, as cudaMalloc's are). `op`
// names the operation in errors: "CUDA error in <op> (cudaMalloc): out of memory".
// bytes == 0 returns nullptr and counts nothing (PyTorch hands out no block for an empty
// tensor). Throws CudaError.
void* device_alloc(int64_t bytes, const char* op);
// Returns a block to the cache. nullptr is ignored; a pointer device_alloc did not hand
// out throws CudaError.
void device_free(void* p);
AllocatorStats allocator_stats();
// Gives every cached (free) block back to the driver (torch.cuda.empty_cache()).
void release_cached();
// Sets each peak to its live value (torch.cuda.reset_peak_memory_stats()).
void reset_peak_stats();

// Byte copies between host and device memory (synchronous), errors naming `op`.
void copy_to_device(void* dst, const void* src, int64_t bytes, const char* op);
void copy_to_host(void* dst, const void* src, int64_t bytes, const char* op);

}  // namespace agtrace::cuda
