// The large-block arena (see large_blocks.hpp for why).
#include "util/large_blocks.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "util/spin_guard.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define AGTRACE_LARGE_BLOCKS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AGTRACE_LARGE_BLOCKS_UNDER_ASAN 1
#endif
#endif

namespace agtrace::large_blocks {
namespace {

// The huge page size on x86-64: the range starts on such a boundary and is made writable in
// steps of it, so that a step can be one huge page.
constexpr size_t kCommitStep = size_t{2} * 1024 * 1024;
// The first bytes of the range stay on 4 KiB pages, so that a small program's resident size
// grows by what it touches: with the advice from the start, the 64 KiB blocks of the report
// writer alone took `agtrace run scenarios/seed_walk.json` from 10.5 to 12.7 MiB.
constexpr size_t kSmallPageBytes = kCommitStep;

size_t round_up(size_t n, size_t step) { return (n + step - 1) / step * step; }

void* malloc_block(size_t bytes) {
  // No object may be larger than PTRDIFF_MAX bytes; glibc's malloc refuses such a size, and
  // AddressSanitizer's aborts instead of returning null.
  if (bytes > static_cast<size_t>(PTRDIFF_MAX)) throw std::bad_alloc();
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

Arena::Arena(size_t reserve_bytes, bool enabled) {
  if (!enabled) return;
  // Address space only (PROT_NONE, no reservation of memory): the kernel's overcommit
  // accounting sees the parts made writable, as it would see malloc's.
  for (size_t bytes = round_up(reserve_bytes, kCommitStep); bytes >= round_up(reserve_bytes / 16, kCommitStep) && bytes > 0;
       bytes /= 2) {
    void* p = mmap(nullptr, bytes + kCommitStep, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) continue;
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = round_up(at, kCommitStep);
    // Give back the unaligned head and tail, so that munmap of [base, base + reserved) frees all.
    if (aligned > at) munmap(p, aligned - at);
    const uintptr_t tail = aligned + bytes;
    const uintptr_t end = at + bytes + kCommitStep;
    if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
    base_ = reinterpret_cast<char*>(aligned);
    reserved_ = bytes;
    // Only advice: without transparent huge pages the blocks are plain 4 KiB pages.
    if (reserved_ > kSmallPageBytes) madvise(base_ + kSmallPageBytes, reserved_ - kSmallPageBytes, MADV_HUGEPAGE);
    return;
  }
}

Arena::~Arena() {
  if (base_) munmap(base_, reserved_);
}

bool Arena::owns(const void* p) const noexcept {
  const char* c = static_cast<const char*>(p);
  return base_ && c >= base_ && c < base_ + reserved_;
}

bool Arena::commit_to(size_t end) noexcept {
  if (end <= committed_) return true;
  const size_t want = std::min(round_up(end, kCommitStep), reserved_);
  if (mprotect(base_ + committed_, want - committed_, PROT_READ | PROT_WRITE) != 0) return false;
  committed_ = want;
  return true;
}

void Arena::take_free(size_t offset, size_t length) {
  free_by_offset_.erase(offset);
  free_by_length_.erase({length, offset});
}

void Arena::put_free(size_t offset, size_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_length_.emplace(length, offset);
}

Block Arena::allocate(size_t bytes) {
  // Beyond the range (or off): malloc's answer, bad_alloc for a size it cannot give (and
  // no rounding up that could wrap round to a small block).
  if (!base_ || bytes > reserved_) return Block{malloc_block(bytes), bytes};
  const size_t length = round_up(std::max<size_t>(bytes, 1), kGranule);
  size_t offset = 0;
  {
    SpinGuard guard(lock_);
    // Best fit among the kept blocks (the smallest that is large enough, the lowest address
    // among equals), the rest of it kept; else from the top of the range.
    const auto fit = free_by_length_.lower_bound({length, 0});
    if (fit != free_by_length_.end()) {
      offset = fit->second;
      const size_t found = fit->first;
      take_free(offset, found);
      if (found > length) put_free(offset + length, found - length);
    } else {
      offset = top_;
      if (length > reserved_ - offset || !commit_to(offset + length)) {
        // The range is used up (or cannot be made writable): malloc serves it.
        return Block{malloc_block(bytes), bytes};
      }
      top_ = offset + length;
    }
    in_use_blocks_.emplace(offset, length);
    in_use_ += length;
    Block block;
    block.data = base_ + offset;
    // Bytes at or above the high-water mark were never handed out: still the kernel's zeros.
    block.dirty_bytes = offset >= high_water_ ? 0 : std::min(bytes, high_water_ - offset);
    high_water_ = std::max(high_water_, offset + length);
    return block;
  }
}

void Arena::release(void* data) noexcept {
  if (!data) return;
  if (!owns(data)) {
    std::free(data);
    return;
  }
  SpinGuard guard(lock_);
  size_t offset = static_cast<size_t>(static_cast<char*>(data) - base_);
  const auto used = in_use_blocks_.find(offset);
  if (used == in_use_blocks_.end()) std::abort();  // not a block of this arena: a double free
  size_t length = used->second;
  in_use_blocks_.erase(used);
  in_use_ -= length;
  // Merge with the free neighbours, so that a later, larger request can use the whole span.
  const auto next = free_by_offset_.find(offset + length);
  if (next != free_by_offset_.end()) {
    const size_t next_length = next->second;
    take_free(offset + length, next_length);
    length += next_length;
  }
  auto prev = free_by_offset_.lower_bound(offset);
  if (prev != free_by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      const size_t prev_offset = prev->first, prev_length = prev->second;
      take_free(prev_offset, prev_length);
      offset = prev_offset;
      length += prev_length;
    }
  }
  if (offset + length == top_) {
    top_ = offset;  // the pages stay writable and resident for the next block from the top
  } else {
    put_free(offset, length);
  }
}

Arena::Stats Arena::stats() const {
  SpinGuard guard(lock_);
  Stats s;
  s.reserved = reserved_;
  s.top = top_;
  s.high_water = high_water_;
  s.in_use = in_use_;
  for (const auto& [offset, length] : free_by_offset_) s.free_bytes += length;
  s.free_blocks = free_by_offset_.size();
  return s;
}

namespace {
bool wanted() {
#if defined(AGTRACE_LARGE_BLOCKS_UNDER_ASAN)
  return false;
#else
  const char* env = std::getenv("AGTRACE_LARGE_BLOCKS");
  return !(env && std::strcmp(env, "0") == 0);
#endif
}

// Made at the first request and never destroyed: a tensor destroyed during exit (after
// static destructors) still gives its block back to a live arena.
Arena& process_arena() {
  alignas(Arena) static unsigned char storage[sizeof(Arena)];
  static Arena* arena = new (storage) Arena(size_t{64} << 30, wanted());
  return *arena;
}
}  // namespace

Block allocate(size_t bytes) { return process_arena().allocate(bytes); }
void release(void* data) noexcept { process_arena().release(data); }
Arena::Stats stats() { return process_arena().stats(); }

}  // namespace agtrace::large_blocks
