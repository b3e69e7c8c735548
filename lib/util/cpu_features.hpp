// What the CPU agtrace runs on offers, asked once: the kernels compiled twice (for any x86-64
// and for AVX2 with FMA, giving the same bits) choose their build by it.
#pragma once

namespace agtrace {

inline bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

}  // namespace agtrace
