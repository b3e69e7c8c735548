// The program's global operator new and delete, routed through the small-object pool
// (lib/util/small_object_pool.hpp: why). Linked into agtrace, agtrace_bench and
// agtrace_tests when CMake's AGTRACE_SMALL_OBJECT_POOL is ON (the default; the sanitizer
// and fuzz builds turn it off so that ASan sees every allocation). The over-aligned forms
// (std::align_val_t) are left to the C++ runtime: they allocate with aligned_alloc and free
// with free, independently of these.
#include <cstddef>
#include <new>

#include "util/small_object_pool_fast.hpp"

namespace {
// operator new's contract: call the new-handler until it succeeds, throw bad_alloc without
// one. The pool's common case is inline here (small_object_pool_fast.hpp: why); the loop
// only runs when malloc, behind the pool, has failed.
__attribute__((noinline)) void* retry_with_new_handler(std::size_t n) {
  for (;;) {
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
    if (void* p = agtrace::pool::detail::allocate_fast(n)) return p;
  }
}
inline void* allocate_or_throw(std::size_t n) {
  if (void* p = agtrace::pool::detail::allocate_fast(n); __builtin_expect(p != nullptr, 1)) return p;
  return retry_with_new_handler(n);
}
void* allocate_or_null(std::size_t n) noexcept {
  try {
    return allocate_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate_or_null(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate_or_null(n); }
void operator delete(void* p) noexcept { agtrace::pool::detail::deallocate_fast(p); }
void operator delete[](void* p) noexcept { agtrace::pool::detail::deallocate_fast(p); }
void operator delete(void* p, std::size_t) noexcept { agtrace::pool::detail::deallocate_fast(p); }
void operator delete[](void* p, std::size_t) noexcept { agtrace::pool::detail::deallocate_fast(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { agtrace::pool::detail::deallocate_fast(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { agtrace::pool::detail::deallocate_fast(p); }
