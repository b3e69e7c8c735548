// A small-object allocator for the objects every operation makes (issue #6).
//
// Each recorded operation allocates and later frees tens of small objects: the tensor and
// its storage, the node, its edge, metadata and saved-value vectors, shared_ptr control
// blocks, event records, short strings. glibc's malloc keeps only 7 freed chunks per size in
// its per-thread cache, so a program that builds a 10,000-node graph and then frees it goes
// through the arena's slow paths (bin unlinking, malloc_consolidate): about a third of the
// time of a 10,000-op chain was in malloc and free. This pool carves per-thread slabs for
// each size class from one reserved address range, so a small allocation or free is a few
// instructions and touches no lock, and hands out free slots in address order (see
// small_object_pool.cpp: why not a free list).
//
// The executables link app/operator_new.cpp, which routes the global operator new/delete
// through the pool's inline fast paths (small_object_pool_fast.hpp; CMake option
// AGTRACE_SMALL_OBJECT_POOL, ON by default, OFF under sanitizers, which must see every
// allocation). AGTRACE_SMALL_OBJECT_POOL=0 in the environment turns it off at start-up
// (e.g. for valgrind's memcheck).
//
// Memory given back to the pool is reused for the same size class and never returned to
// the system; requests above kMaxPooledBytes go to malloc, and from large_blocks::kMinBytes
// on to the large-block arena (util/large_blocks.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace agtrace::pool {

constexpr size_t kMaxPooledBytes = 1024;
// Frees a thread keeps aside per size class (those that find room) and hands out first, the
// last kept first: a temporary freed inside an op is reused while still in the cache. The
// other frees go back to their slab and come out again in address order.
constexpr uint32_t kRecentFreesKept = 16;
constexpr size_t kAlignment = 16;  // __STDCPP_DEFAULT_NEW_ALIGNMENT__ on x86-64 and aarch64

// Never returns null for a size the pool serves; falls back to malloc otherwise (may
// return null when malloc does).
void* allocate(size_t bytes) noexcept;
// Accepts null, pool pointers and malloc pointers.
void deallocate(void* p) noexcept;
// Whether `p` lies in the pool's reserved range.
bool owns(const void* p) noexcept;
// False when the range could not be reserved or AGTRACE_SMALL_OBJECT_POOL=0.
bool enabled() noexcept;

struct Stats {
  uint64_t committed_bytes = 0;  // address range made readable and writable so far
  uint64_t slabs = 0;            // slabs handed to size classes (all threads)
};
Stats stats() noexcept;

// The size a request is served with (its class), or 0 above kMaxPooledBytes.
size_t class_bytes(size_t bytes) noexcept;

}  // namespace agtrace::pool
