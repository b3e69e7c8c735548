// write_decimal(p, v): `v` in decimal at `p` (room for 20 characters), returning the end:
// std::to_chars's digits, with the numbers below 100,000,000 (a report's ids, statement
// indices and byte counts) written from a table of digit pairs without its length loop.
// std::to_chars was about a fifth of a 2,000-op chain's text report under callgrind, and the
// ids and byte counts of a 10,000-op chain pass 10,000.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstring>

namespace agtrace {

namespace decimal_detail {
inline constexpr char kPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
// u below 10,000 as exactly four digits, leading zeros kept.
inline char* write_four_digits(char* p, unsigned u) {
  std::memcpy(p, kPairs + 2 * (u / 100), 2);
  std::memcpy(p + 2, kPairs + 2 * (u % 100), 2);
  return p + 4;
}
// u below 10,000, without leading zeros.
inline char* write_below_10000(char* p, unsigned u) {
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
  return write_four_digits(p, u);
}
}  // namespace decimal_detail

inline char* write_decimal(char* p, int64_t v) {
  using namespace decimal_detail;
  if (v >= 0 && v < 10000) return write_below_10000(p, static_cast<unsigned>(v));
  if (v >= 0 && v < 100000000) {
    const unsigned high = static_cast<unsigned>(v / 10000), low = static_cast<unsigned>(v % 10000);
    return write_four_digits(write_below_10000(p, high), low);
  }
  return std::to_chars(p, p + 20, v).ptr;
}

}  // namespace agtrace
