// write_decimal(p, v): `v` in decimal at `p` (room for 20 characters), returning the end:
// std::to_chars's digits, with the numbers below 10,000 (most of a report's ids, statement
// indices and small byte counts) written from a table of digit pairs without its length
// loop. std::to_chars was about a fifth of a 2,000-op chain's text report under callgrind.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstring>

namespace agtrace {

inline char* write_decimal(char* p, int64_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  if (v >= 0 && v < 10000) {
    const unsigned u = static_cast<unsigned>(v);
    if (u < 10) {
      *p = static_cast<char>('0' + u);
      return p + 1;
    }
    if (u < 100) {
      std::memcpy(p, kPairs + 2 * u, 2);
      return p + 2;
    }
    if (u < 1000) {
      *p = static_cast<char>('0' + u / 100);
      std::memcpy(p + 1, kPairs + 2 * (u % 100), 2);
      return p + 3;
    }
    std::memcpy(p, kPairs + 2 * (u / 100), 2);
    std::memcpy(p + 2, kPairs + 2 * (u % 100), 2);
    return p + 4;
  }
  return std::to_chars(p, p + 20, v).ptr;
}

}  // namespace agtrace
