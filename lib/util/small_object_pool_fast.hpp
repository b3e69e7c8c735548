// The small-object pool's common cases inline (issue #6): a request served from this
// thread's frees kept aside or from its current bitmap word, and a free kept aside. The
// replaced operator new and delete (app/pooled_new/operator_new.cpp) and the pool's own
// allocate/deallocate use them; everything else is in small_object_pool.cpp.
//
// Why inline: every tensor, storage, node and event record is one operator new and one
// delete (about 277,000 of each for a warm-up and one run of the 10,000-op chain), and each
// went operator new -> pool::allocate, two calls where one does; measured, the calls and
// returns cost more time than their instruction count suggests.
//
// Internal to the pool: nothing but small_object_pool.cpp and operator_new.cpp includes it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/small_object_pool.hpp"

namespace agtrace::pool::detail {

constexpr int kSlabShift = 16;
constexpr size_t kSlabBytes = size_t{1} << kSlabShift;  // 64 KiB
constexpr size_t kClassSizes[] = {16,  32,  48,  64,  80,  96,  112, 128, 160, 192,
                                  224, 256, 320, 384, 448, 512, 640, 768, 896, 1024};
constexpr int kClasses = sizeof(kClassSizes) / sizeof(kClassSizes[0]);
static_assert(kClassSizes[kClasses - 1] == kMaxPooledBytes, "the last class serves the largest pooled request");
// The largest range reserved (small_object_pool.cpp tries smaller ones if refused).
constexpr size_t kMaxReserve = size_t{32} << 30;
constexpr size_t kMaxSlabs = kMaxReserve / kSlabBytes;

// Class of a request, indexed by its size in 16-byte units, rounded up.
struct ClassTable {
  uint8_t index[kMaxPooledBytes / kAlignment + 1];
  constexpr ClassTable() : index{} {
    int c = 0;
    for (size_t units = 0; units <= kMaxPooledBytes / kAlignment; ++units) {
      while (kClassSizes[c] < units * kAlignment) ++c;
      index[units] = static_cast<uint8_t>(c);
    }
  }
};
inline constexpr ClassTable kClassTable;
inline int class_of(size_t bytes) { return kClassTable.index[(bytes + kAlignment - 1) / kAlignment]; }

enum State : int { kUninitialized = 0, kInitializing = 1, kReady = 2, kDisabled = 3 };
// Constant-initialized, so usable by allocations made before any constructor runs.
extern std::atomic<int> g_state;
extern std::atomic<char*> g_base;
extern std::atomic<size_t> g_reserved;
extern uint8_t g_slab_class[kMaxSlabs];  // class of each slab handed out

struct SlabHeader;
struct FreeObject {
  FreeObject* next;
};
// Trivial, so thread-local storage needs no guard or destructor (declared __thread, not
// thread_local, so that other files reach it without a TLS wrapper call). A thread that
// exits leaves its objects behind (our worker threads live as long as the process).
struct ThreadCache {
  // This thread's number, given with its first slab (0: none yet). Not the cache's address:
  // a thread started after another exited may get the same thread-local address.
  uint64_t id;
  void* hot[kClasses][kRecentFreesKept];  // frees kept aside (small_object_pool.hpp), last on top
  uint32_t hot_count[kClasses];
  uint64_t mask[kClasses];        // free slots taken from a bitmap word, not handed out yet
  char* group[kClasses];          // slot of bit 0 of `mask`
  SlabHeader* slab[kClasses];     // slab the cursor is in (null: none yet)
  uint32_t word[kClasses];        // next bitmap word of `slab` to look at
  // This thread's slabs of the class, linked through their headers in address order (kept
  // in the pool's own memory: the thread-local cache owns nothing a thread's exit would leak).
  SlabHeader* first[kClasses];
  SlabHeader* last[kClasses];
  uint32_t slab_count[kClasses];
  FreeObject* foreign[kClasses];  // freed here when full of hot objects, from other threads' slabs
};
extern __thread ThreadCache t_cache;

// Everything the inline paths do not serve (small_object_pool.cpp).
void* allocate_slow(size_t bytes) noexcept;
void deallocate_slow(void* p) noexcept;

// A kept-aside free of the class (the last one first), else the next slot of the bitmap
// word taken; null-free: the slow path otherwise.
inline void* allocate_fast(size_t bytes) noexcept {
  if (bytes <= kMaxPooledBytes && g_state.load(std::memory_order_acquire) == kReady) {
    const int c = class_of(bytes);
    ThreadCache& tc = t_cache;
    if (const uint32_t n = tc.hot_count[c]) {
      tc.hot_count[c] = n - 1;
      return tc.hot[c][n - 1];
    }
    if (const uint64_t m = tc.mask[c]) {
      tc.mask[c] = m & (m - 1);
      return tc.group[c] + static_cast<size_t>(__builtin_ctzll(m)) * kClassSizes[c];
    }
  }
  return allocate_slow(bytes);
}

// A pool object kept aside while the class has room; null, malloc's pointers and the rest
// go to the slow path.
inline void deallocate_fast(void* p) noexcept {
  // Unsigned: a pointer below the range wraps round to an offset beyond it (null included).
  const uintptr_t offset =
      reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(g_base.load(std::memory_order_relaxed));
  if (offset < g_reserved.load(std::memory_order_relaxed)) {
    const int c = g_slab_class[offset >> kSlabShift];
    ThreadCache& tc = t_cache;
    if (const uint32_t n = tc.hot_count[c]; n < kRecentFreesKept) {
      tc.hot[c][n] = p;
      tc.hot_count[c] = n + 1;
      return;
    }
  }
  deallocate_slow(p);
}

}  // namespace agtrace::pool::detail
