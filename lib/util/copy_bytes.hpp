// copy_bytes(d, s, n): memcpy for the report writers' pieces, which are mostly a few to a few
// dozen bytes (keys, separators, names, numbers). Those are copied inline with two
// overlapping loads and stores; a call to the C library's memcpy cost more than the copy
// itself (7 % of a 2,000-op chain's JSON run under callgrind).
#pragma once
#include <cstddef>
#include <cstring>

namespace agtrace {

// GCC's -Warray-bounds and -Wstringop-overread flag the wide branches where a short buffer is
// inlined into a call whose length it cannot pin down; each branch runs only for its lengths.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
[[gnu::always_inline]] inline void copy_bytes(char* d, const char* s, size_t n) {
  if (n > 32) {
    std::memcpy(d, s, n);
  } else if (n >= 16) {
    std::memcpy(d, s, 16);
    std::memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(d, s, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(d, s, 4);
    std::memcpy(d + n - 4, s + n - 4, 4);
  } else if (n > 0) {
    d[0] = s[0];
    d[n / 2] = s[n / 2];
    d[n - 1] = s[n - 1];
  }
}
#pragma GCC diagnostic pop

}  // namespace agtrace
