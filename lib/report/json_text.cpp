#include "report/json_text.hpp"

#include <emmintrin.h>

#include <charconv>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "util/decimal.hpp"

namespace agtrace::json_text {

namespace {

// Strings are scanned 16 bytes at a time (SSE2, which every x86-64 CPU has): the report's
// strings are mostly plain ASCII of 10 to 100 bytes (node names, the accountant's why-saved
// sentences), and a byte-by-byte scan of each twice was the JSON report's largest cost (about
// a third of its instructions on a 2,000-op chain under callgrind).

// The last 1 to 15 bytes of a text, zero-padded: a 16-byte load there could read past the
// text's allocation. The register is built from two overlapping integer loads: copying the
// bytes into a zeroed stack buffer and loading that (what this did before) stalls each time
// on store-to-load forwarding, and the tail loads were 4.5 % of a 10,000-op chain's JSON run
// (`perf record`).
__m128i load_tail(const char* p, size_t n) {
  uint64_t low = 0, high = 0;
  if (n >= 8) {
    std::memcpy(&low, p, 8);
    uint64_t last = 0;
    std::memcpy(&last, p + n - 8, 8);
    // `last` holds bytes n-8 .. n-1; bytes 8 .. n-1 are its top n-8.
    if (n > 8) high = last >> (8 * (16 - n));
  } else if (n >= 4) {
    uint32_t first = 0, last = 0;
    std::memcpy(&first, p, 4);
    std::memcpy(&last, p + n - 4, 4);
    low = first | ((uint64_t{last} >> (8 * (8 - n))) << 32);
  } else if (n > 0) {
    low = uint64_t{static_cast<unsigned char>(p[0])} | uint64_t{static_cast<unsigned char>(p[n / 2])} << (8 * (n / 2)) |
          uint64_t{static_cast<unsigned char>(p[n - 1])} << (8 * (n - 1));
  }
  return _mm_set_epi64x(static_cast<long long>(high), static_cast<long long>(low));
}

bool has_byte_above_7f(const char* p, const char* end) {
  __m128i any = _mm_setzero_si128();
  for (; end - p >= 16; p += 16) any = _mm_or_si128(any, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if (p != end) any = _mm_or_si128(any, load_tail(p, static_cast<size_t>(end - p)));
  return _mm_movemask_epi8(any) != 0;
}

// A bit per byte of `v`: set where JSON escapes it (a control character, `"` or `\`). Only
// used on text with no byte above 0x7F, so a signed "less than 0x20" is the control
// characters alone.
unsigned escape_mask(__m128i v) {
  const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                       _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
  return static_cast<unsigned>(_mm_movemask_epi8(special));
}

// The first byte at or after `p` that JSON escapes, or `end`.
const char* next_to_escape(const char* p, const char* end) {
  for (; end - p >= 16; p += 16)
    if (const unsigned mask = escape_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))
      return p + __builtin_ctz(mask);
  if (p == end) return end;
  // The padding's zeros read as control characters: the first of them sits at `end`, so the
  // first set bit is a byte to escape or `end` itself.
  return p + __builtin_ctz(escape_mask(load_tail(p, static_cast<size_t>(end - p))));
}

}  // namespace

void Writer::string(std::string_view s) {
  const char* p = s.data();
  const char* const end = p + s.size();
  // Most of the report's strings (names, kinds, dtypes, attributes) are under 16 bytes and
  // need no escape: one load answers both questions, and the quoted text goes out in one put.
  if (s.size() - 1 < 15) {
    const __m128i v = load_tail(p, s.size());
    if (_mm_movemask_epi8(v) == 0 && __builtin_ctz(escape_mask(v)) == static_cast<int>(s.size())) {
      put('"', s, '"');
      return;
    }
  }
  if (has_byte_above_7f(p, end)) {
    // UTF-8 (or invalid bytes): nlohmann's own checks and escapes, as in the whole dump.
    put(nlohmann::ordered_json(std::string(s)).dump());
    return;
  }
  put('"');
  for (;;) {
    const char* special = next_to_escape(p, end);
    put(std::string_view(p, static_cast<size_t>(special - p)));
    if (special == end) break;
    const unsigned char c = static_cast<unsigned char>(*special);
    p = special + 1;
    switch (c) {
      case '"': put("\\\""); break;
      case '\\': put("\\\\"); break;
      case '\b': put("\\b"); break;
      case '\f': put("\\f"); break;
      case '\n': put("\\n"); break;
      case '\r': put("\\r"); break;
      case '\t': put("\\t"); break;
      default: {
        static const char kHex[] = "0123456789abcdef";  // nlohmann writes \u%04x
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        put(std::string_view(escaped, sizeof escaped));
      }
    }
  }
  put('"');
}

void Writer::integer(int64_t v) {
  if (kSize - used_ < 20) flush();
  used_ = static_cast<size_t>(write_decimal(buf_ + used_, v) - buf_);
}

Layout::Layout(std::string_view indent) {
  const std::string at(indent);
  first_field = "{\n" + at + "  \"";
  next_field = ",\n" + at + "  \"";
  close = "\n" + at + "}";
  first_item = "[\n" + at + "    ";
  first_entry = "{\n" + at + "    ";
  next_item = ",\n" + at + "    ";
  close_array = "\n" + at + "  ]";
  close_object = "\n" + at + "  }";
}

void Minifier::feed(std::string_view pretty, std::string& out) {
  out.reserve(out.size() + pretty.size());
  for (const char c : pretty) {
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      out.push_back(c);
    } else if (c == '"') {
      in_string_ = true;
      out.push_back(c);
    } else if (c != ' ' && c != '\n') {
      out.push_back(c);
    }
  }
}

}  // namespace agtrace::json_text
