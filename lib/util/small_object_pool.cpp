// Small-object pool (see small_object_pool.hpp for why). Layout: one address range reserved
// at the first request (PROT_NONE, so it costs no memory until used), made writable 2 MiB
// at a time, cut into 64 KiB slabs; each slab serves one size class, and a byte per slab
// records which, so a free that does not know its size (plain `operator delete(void*)`)
// finds its class. A slab belongs to the thread that took it and begins with a bitmap of
// its free slots. Each thread keeps, per class, up to kRecentFreesKept frees aside (reused
// first, while cached), 64 slots taken from a bitmap word, and a cursor that walks its slabs
// in address order; only taking a new slab takes a lock. This file must not use operator new
// itself.
#include "util/small_object_pool.hpp"
#include "util/small_object_pool_fast.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>

#include "util/large_blocks.hpp"
#include "util/spin_guard.hpp"

namespace agtrace::pool {
namespace {

using namespace detail;

constexpr size_t kCommitStep = 2 * 1024 * 1024;  // also the huge page size on x86-64
// Beyond this much of the range, the kernel is asked for transparent huge pages
// (MADV_HUGEPAGE): one page fault per 4 KiB page was a third of a 10,000-op chain's run time
// (`perf`). The first 2 MiB stay on 4 KiB pages, so that a small program's resident size
// grows by what it uses (the seed walk's cold start uses under 2 MiB of the pool). Past them,
// the chain's 20 MiB of small objects take 1,251 faults in its whole `agtrace run -q` instead
// of 2,784 with 8 MiB on 4 KiB pages (perf stat), and its run takes 25.7 instead of 28.5 ms
// (medians of 15).
constexpr size_t kSmallPageBytes = 2 * 1024 * 1024;
// Reserved address range: the first size that the kernel grants.
constexpr size_t kReserveTries[] = {kMaxReserve, size_t{4} << 30, size_t{512} << 20};

}  // namespace

// A slab starts with this header and a bitmap of its free slots (bit set: free), then the
// slots. Only the thread that took the slab (its owner) reads or writes the bitmap.
struct detail::SlabHeader {
  uint64_t owner;     // the owner's ThreadCache::id
  SlabHeader* next;   // the owner's next slab of the class, at a higher address (null: last)
  uint32_t free;      // bits set in the bitmap
  uint32_t words;     // bitmap words
};

namespace {
static_assert(sizeof(SlabHeader) % 8 == 0, "the bitmap follows the header");
inline uint64_t* bitmap(SlabHeader* h) { return reinterpret_cast<uint64_t*>(h + 1); }

// Per class: slots in a slab, bitmap words, and where slot 0 starts (16-byte aligned);
// `reciprocal` turns a byte offset from slot 0 into a slot index without a division.
struct SlabLayout {
  uint32_t slots[kClasses];
  uint32_t words[kClasses];
  uint32_t first_slot[kClasses];
  uint64_t reciprocal[kClasses];
  constexpr SlabLayout() : slots{}, words{}, first_slot{}, reciprocal{} {
    for (int c = 0; c < kClasses; ++c) {
      const size_t size = kClassSizes[c];
      size_t n = (kSlabBytes - sizeof(SlabHeader)) / size;
      auto header = [](size_t count) { return (sizeof(SlabHeader) + 8 * ((count + 63) / 64) + 15) / 16 * 16; };
      while (header(n) + n * size > kSlabBytes) --n;
      slots[c] = static_cast<uint32_t>(n);
      words[c] = static_cast<uint32_t>((n + 63) / 64);
      first_slot[c] = static_cast<uint32_t>(header(n));
      // floor(2^32 / size) + 1: exact for offsets below 2^16 that are multiples of size.
      reciprocal[c] = (uint64_t{1} << 32) / size + 1;
    }
  }
};
constexpr SlabLayout kLayout;

}  // namespace

// Constant-initialized, so usable by allocations made before any constructor runs.
std::atomic<int> detail::g_state{kUninitialized};
std::atomic<char*> detail::g_base{nullptr};
std::atomic<size_t> detail::g_reserved{0};
uint8_t detail::g_slab_class[kMaxSlabs];
__thread detail::ThreadCache detail::t_cache;

namespace {
std::atomic_flag g_slab_lock = ATOMIC_FLAG_INIT;
// Written under g_slab_lock; atomic only so that stats() can read them without it.
std::atomic<size_t> g_committed{0};  // bytes of the range made writable
std::atomic<size_t> g_next_slab{0};  // bytes of the range handed out as slabs
std::atomic<uint64_t> g_threads{0};  // ThreadCache ids given so far

// Why bitmaps and not a free list threaded through the objects (issue #6): a list hands
// objects back in the order they were freed, and a program's graph is freed in an order
// unrelated to where its objects lie, so the next run's allocations jumped around memory,
// each one first loading the cold object to read the list's next link. Handing out the
// free slots of a slab in address order from a cursor instead (the bitmap word is taken 64
// slots at a time) makes consecutive objects neighbours, which the hardware prefetches,
// and a free touches only the slab's small bitmap, not the object. Measured on tiny_chain
// (10,000 ops, warm process, runs alternated with the old build on one core): sorting the
// old free lists by address before each run took it from 27.6 to 22.9 ms; this pool from
// 32.0 to 25.2 ms. A single run in a fresh process (slabs never used before) is unchanged.
// (ThreadCache: small_object_pool_fast.hpp.)

bool initialize() noexcept {
  int expected = kUninitialized;
  if (g_state.compare_exchange_strong(expected, kInitializing, std::memory_order_acq_rel)) {
    const char* env = std::getenv("AGTRACE_SMALL_OBJECT_POOL");
    const bool off = env && env[0] == '0' && env[1] == '\0';
    char* base = nullptr;
    size_t reserved = 0;
    for (size_t bytes : kReserveTries) {
      if (off) break;
      // One step more than needed, so that the range can start on a huge page boundary.
      void* p = mmap(nullptr, bytes + kCommitStep, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        base = reinterpret_cast<char*>((at + kCommitStep - 1) / kCommitStep * kCommitStep);
        reserved = bytes;
        // Only a hint: without transparent huge pages nothing changes.
        madvise(base + kSmallPageBytes, reserved - kSmallPageBytes, MADV_HUGEPAGE);
        break;
      }
    }
    g_reserved.store(reserved, std::memory_order_relaxed);
    g_base.store(base, std::memory_order_relaxed);
    g_state.store(base ? kReady : kDisabled, std::memory_order_release);
  } else {
    while (g_state.load(std::memory_order_acquire) == kInitializing) {
    }
  }
  return g_state.load(std::memory_order_acquire) == kReady;
}

inline bool ready() noexcept {
  const int s = g_state.load(std::memory_order_acquire);
  return s == kReady || (s != kDisabled && initialize());
}

// A new slab for class `c` in this thread, made its cursor; false when the range is used up
// or cannot be made writable (the caller then uses malloc).
bool new_slab(ThreadCache& tc, int c) noexcept {
  char* slab = nullptr;
  {
    SpinGuard guard(g_slab_lock);
    char* base = g_base.load(std::memory_order_relaxed);
    const size_t reserved = g_reserved.load(std::memory_order_relaxed);
    const size_t next = g_next_slab.load(std::memory_order_relaxed);
    const size_t committed = g_committed.load(std::memory_order_relaxed);
    bool ok = next + kSlabBytes <= reserved;
    if (ok && next + kSlabBytes > committed) {
      const size_t step = kCommitStep < reserved - committed ? kCommitStep : reserved - committed;
      ok = mprotect(base + committed, step, PROT_READ | PROT_WRITE) == 0;
      if (ok) g_committed.store(committed + step, std::memory_order_relaxed);
    }
    if (ok) {
      slab = base + next;
      g_slab_class[next / kSlabBytes] = static_cast<uint8_t>(c);
      g_next_slab.store(next + kSlabBytes, std::memory_order_relaxed);
    }
  }
  if (!slab) return false;
  auto* h = reinterpret_cast<SlabHeader*>(slab);
  if (tc.id == 0) tc.id = g_threads.fetch_add(1, std::memory_order_relaxed) + 1;
  h->owner = tc.id;
  h->free = kLayout.slots[c];
  h->words = kLayout.words[c];
  uint64_t* bits = bitmap(h);
  for (uint32_t w = 0; w < h->words; ++w) {
    const uint32_t in_word = kLayout.slots[c] - 64 * w;
    bits[w] = in_word >= 64 ? ~uint64_t{0} : (uint64_t{1} << in_word) - 1;
  }
  // Slabs are handed out at rising addresses, so appending keeps the list in address order.
  h->next = nullptr;
  if (tc.last[c]) tc.last[c]->next = h;
  else tc.first[c] = h;
  tc.last[c] = h;
  ++tc.slab_count[c];
  tc.slab[c] = h;
  tc.word[c] = 0;
  return true;
}

// Fills `mask` with the next bitmap word that has free slots, from the cursor on: the rest of
// the current slab, then this thread's other slabs of the class in address order (wrapping
// round), then a new slab. False when no slab can be had.
bool take_word(ThreadCache& tc, int c) noexcept {
  for (;;) {
    if (SlabHeader* h = tc.slab[c]; h && h->free) {
      uint64_t* bits = bitmap(h);
      for (uint32_t w = tc.word[c]; w < h->words; ++w) {
        if (const uint64_t m = bits[w]) {
          bits[w] = 0;
          h->free -= static_cast<uint32_t>(__builtin_popcountll(m));
          tc.mask[c] = m;
          tc.group[c] = reinterpret_cast<char*>(h) + kLayout.first_slot[c] + size_t{64} * w * kClassSizes[c];
          tc.word[c] = w + 1;
          return true;
        }
      }
    }
    // The current slab has nothing at or after the cursor: the next slab with free slots
    // (the current one last, from its start).
    SlabHeader* h = tc.slab[c];
    SlabHeader* with_free = nullptr;
    for (uint32_t k = 0; k < tc.slab_count[c] && !with_free; ++k) {
      h = h && h->next ? h->next : tc.first[c];
      if (h->free) with_free = h;
    }
    if (with_free) {
      tc.slab[c] = with_free;
      tc.word[c] = 0;
    } else if (!new_slab(tc, c)) {
      return false;
    }
  }
}

}  // namespace

size_t class_bytes(size_t bytes) noexcept { return bytes <= kMaxPooledBytes ? kClassSizes[class_of(bytes)] : 0; }

// Everything but the two common cases (allocate_fast): the first request (reserving the
// range), a bitmap word to take (or a new slab), objects freed here from other threads'
// slabs, requests above the largest class, and a pool that is off. Kept out of line so
// that the fast path saves no registers. This thread has no hot object and an empty mask
// for the class here: the fast path takes those first, and before the range exists there
// are none.
__attribute__((noinline)) void* detail::allocate_slow(size_t bytes) noexcept {
  if (!ready()) return std::malloc(bytes == 0 ? 1 : bytes);
  if (bytes > kMaxPooledBytes) {
    if (bytes < large_blocks::kMinBytes) return std::malloc(bytes);
    // Large buffers (growing vectors of events and records, kernels' scratch, the report's
    // blocks) on the large-block arena's huge pages, reused when freed (large_blocks.hpp).
    try {
      return large_blocks::allocate(bytes).data;
    } catch (...) {
      return nullptr;
    }
  }
  const int c = class_of(bytes);
  ThreadCache& tc = t_cache;
  if (FreeObject* f = tc.foreign[c]) {
    tc.foreign[c] = f->next;
    return f;
  }
  if (!take_word(tc, c)) return std::malloc(bytes);
  return allocate_fast(bytes);  // which now has a mask
}

void* allocate(size_t bytes) noexcept { return allocate_fast(bytes); }

bool owns(const void* p) noexcept {
  const char* base = g_base.load(std::memory_order_relaxed);
  return base && static_cast<const char*>(p) >= base &&
         static_cast<size_t>(static_cast<const char*>(p) - base) < g_reserved.load(std::memory_order_relaxed);
}

// Null, malloc's pointers, and pool objects when this thread keeps as many frees of the
// class aside as it may (deallocate_fast keeps the others).
__attribute__((noinline)) void detail::deallocate_slow(void* p) noexcept {
  if (!p) return;
  if (!owns(p)) {
    large_blocks::release(p);  // the arena's blocks, and malloc's (which it frees)
    return;
  }
  char* base = g_base.load(std::memory_order_relaxed);
  const size_t offset = static_cast<size_t>(static_cast<char*>(p) - base);
  const int c = g_slab_class[offset >> kSlabShift];
  ThreadCache& tc = t_cache;
  auto* h = reinterpret_cast<SlabHeader*>(base + (offset & ~(kSlabBytes - 1)));
  if (h->owner == tc.id) {
    const uint64_t from_first = (offset & (kSlabBytes - 1)) - kLayout.first_slot[c];
    const uint64_t slot = (from_first * kLayout.reciprocal[c]) >> 32;
    bitmap(h)[slot >> 6] |= uint64_t{1} << (slot & 63);
    ++h->free;
    return;
  }
  // Another thread's slab: its bitmap is the owner's alone, so the object stays here.
  FreeObject* f = static_cast<FreeObject*>(p);
  f->next = tc.foreign[c];
  tc.foreign[c] = f;
}

void deallocate(void* p) noexcept { deallocate_fast(p); }

bool enabled() noexcept { return ready(); }

Stats stats() noexcept {
  Stats s;
  s.committed_bytes = g_committed.load(std::memory_order_relaxed);
  s.slabs = g_next_slab.load(std::memory_order_relaxed) / kSlabBytes;
  return s;
}

}  // namespace agtrace::pool
