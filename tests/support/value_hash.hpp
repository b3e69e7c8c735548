// FNV-1a over a tensor's elements in its dtype's bytes (float32 or float64), row-major: how the
// bit-for-bit tests compare agtrace's results with the hashes tests/tools/*_reference.py print
// of torch's (tests/tools/fnv_hash.py hashes the same bytes).
#pragma once
#include <cstddef>
#include <cstdint>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::test {

inline uint64_t fnv(const Tensor& t) {
  uint64_t h = 0xCBF29CE484222325ull;
  auto add = [&](const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  };
  for (double v : to_values(t)) {
    if (t->dtype() == DType::Float32) {
      const float f = static_cast<float>(v);
      add(&f, sizeof f);
    } else {
      add(&v, sizeof v);
    }
  }
  return h;
}

}  // namespace agtrace::test
