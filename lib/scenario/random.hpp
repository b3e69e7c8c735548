// The documented, version-stable random generator of agtrace (recipe: lib/scenario/init.cpp).
// Leaf initialisers use one generator per tensor (seed XOR fnv1a64(name)); random
// operations inside the program (dropout masks) draw from one run-wide generator seeded
// with seed XOR fnv1a64("__program__"), in the order the operations run.
#pragma once
#include <cstdint>
#include <string>

namespace agtrace {

inline uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// SplitMix64 (Steele, Lea, Flood 2014; as published by Vigna).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // 53 random bits scaled to [0, 1): exactly representable, evenly spaced.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform01_open_below() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // Draw k (0-based) of a generator seeded with `seed`, computed from k alone: the state after
  // k + 1 steps is seed + (k + 1) * gamma. Lets vector loops compute draws in any order.
  static uint64_t draw(uint64_t seed, uint64_t k) {
    uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

}  // namespace agtrace
