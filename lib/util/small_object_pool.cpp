// Small-object pool (see small_object_pool.hpp for why). Layout: one address range reserved
// at the first request (PROT_NONE, so it costs no memory until used), made writable 2 MiB
// at a time, cut into 64 KiB slabs; each slab serves one size class, and a byte per slab
// records which, so a free that does not know its size (plain `operator delete(void*)`)
// finds its class. Each thread keeps, per class, a free list and the rest of its current
// slab; only taking a new slab takes a lock. This file must not use operator new itself.
#include "util/small_object_pool.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>

namespace agtrace::pool {
namespace {

constexpr size_t kSlabBytes = 64 * 1024;
constexpr size_t kCommitStep = 2 * 1024 * 1024;  // also the huge page size on x86-64
// Beyond this much of the range, the kernel is asked for transparent huge pages
// (MADV_HUGEPAGE): a 10,000-op chain touches about 70 MiB of small objects, and one page
// fault per 4 KiB page was a third of its run time (`perf`, issue #6). Small programs stay
// on 4 KiB pages, so that their resident size grows by what they use (cold start: 10 MiB).
constexpr size_t kSmallPageBytes = 8 * 1024 * 1024;
constexpr size_t kClassSizes[] = {16,  32,  48,  64,  80,  96,  112, 128, 160, 192,
                                  224, 256, 320, 384, 448, 512, 640, 768, 896, 1024};
constexpr int kClasses = sizeof(kClassSizes) / sizeof(kClassSizes[0]);
static_assert(kClassSizes[kClasses - 1] == kMaxPooledBytes, "the last class serves the largest pooled request");
// Reserved address range: the first size that the kernel grants.
constexpr size_t kReserveTries[] = {size_t{32} << 30, size_t{4} << 30, size_t{512} << 20};
constexpr size_t kMaxSlabs = kReserveTries[0] / kSlabBytes;

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
constexpr ClassTable kClassTable;

enum State : int { kUninitialized = 0, kInitializing = 1, kReady = 2, kDisabled = 3 };
// Constant-initialized, so usable by allocations made before any constructor runs.
std::atomic<int> g_state{kUninitialized};
std::atomic<char*> g_base{nullptr};
std::atomic<size_t> g_reserved{0};
std::atomic_flag g_slab_lock = ATOMIC_FLAG_INIT;
// Written under g_slab_lock; atomic only so that stats() can read them without it.
std::atomic<size_t> g_committed{0};  // bytes of the range made writable
std::atomic<size_t> g_next_slab{0};  // bytes of the range handed out as slabs
uint8_t g_slab_class[kMaxSlabs];

struct FreeObject {
  FreeObject* next;
};
// Trivial, so thread_local needs no guard or destructor. A thread that exits leaves its
// lists behind (our worker threads live as long as the process).
struct ThreadCache {
  FreeObject* free[kClasses];
  char* bump[kClasses];
  char* end[kClasses];
};
thread_local ThreadCache t_cache;

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

// A new slab for class `c` in this thread; false when the range is used up or cannot be
// made writable (the caller then uses malloc).
bool refill(ThreadCache& tc, int c) noexcept {
  while (g_slab_lock.test_and_set(std::memory_order_acquire)) {
  }
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
  char* slab = nullptr;
  if (ok) {
    slab = base + next;
    g_slab_class[next / kSlabBytes] = static_cast<uint8_t>(c);
    g_next_slab.store(next + kSlabBytes, std::memory_order_relaxed);
  }
  g_slab_lock.clear(std::memory_order_release);
  if (!ok) return false;
  tc.bump[c] = slab;
  tc.end[c] = slab + (kSlabBytes / kClassSizes[c]) * kClassSizes[c];
  return true;
}

}  // namespace

size_t class_bytes(size_t bytes) noexcept {
  return bytes <= kMaxPooledBytes ? kClassSizes[kClassTable.index[(bytes + kAlignment - 1) / kAlignment]] : 0;
}

namespace {
// Everything but the two common cases: the first request (reserving the range), a new slab,
// requests above the largest class, and a pool that is off. Kept out of line so that
// allocate's fast path saves no registers.
// This thread's free list for the class is empty here: the fast path pops it, and before
// the range exists no object is on any list.
__attribute__((noinline)) void* allocate_slow(size_t bytes) noexcept {
  if (bytes > kMaxPooledBytes || !ready()) return std::malloc(bytes == 0 ? 1 : bytes);
  const int c = kClassTable.index[(bytes + kAlignment - 1) / kAlignment];
  ThreadCache& tc = t_cache;
  if (static_cast<size_t>(tc.end[c] - tc.bump[c]) < kClassSizes[c] && !refill(tc, c)) return std::malloc(bytes);
  return allocate(bytes);  // the fast path, which now has room in the slab
}
}  // namespace

void* allocate(size_t bytes) noexcept {
  if (bytes <= kMaxPooledBytes && g_state.load(std::memory_order_acquire) == kReady) {
    const int c = kClassTable.index[(bytes + kAlignment - 1) / kAlignment];
    ThreadCache& tc = t_cache;
    if (FreeObject* f = tc.free[c]) {
      tc.free[c] = f->next;
      // The next object of this class is usually cold (freed long ago, e.g. by the previous
      // run's teardown): fetch its line now, so that the next request does not wait for it.
      __builtin_prefetch(f->next, 1);
      return f;
    }
    const size_t size = kClassSizes[c];
    if (static_cast<size_t>(tc.end[c] - tc.bump[c]) >= size) {
      char* p = tc.bump[c];
      tc.bump[c] += size;
      return p;
    }
  }
  return allocate_slow(bytes);
}

bool owns(const void* p) noexcept {
  const char* base = g_base.load(std::memory_order_relaxed);
  return base && static_cast<const char*>(p) >= base &&
         static_cast<size_t>(static_cast<const char*>(p) - base) < g_reserved.load(std::memory_order_relaxed);
}

void deallocate(void* p) noexcept {
  if (!p) return;
  if (!owns(p)) {
    std::free(p);
    return;
  }
  const size_t slab = static_cast<size_t>(static_cast<char*>(p) - g_base.load(std::memory_order_relaxed)) / kSlabBytes;
  const int c = g_slab_class[slab];
  ThreadCache& tc = t_cache;
  FreeObject* f = static_cast<FreeObject*>(p);
  f->next = tc.free[c];
  tc.free[c] = f;
}

bool enabled() noexcept { return ready(); }

Stats stats() noexcept {
  Stats s;
  s.committed_bytes = g_committed.load(std::memory_order_relaxed);
  s.slabs = g_next_slab.load(std::memory_order_relaxed) / kSlabBytes;
  return s;
}

}  // namespace agtrace::pool
