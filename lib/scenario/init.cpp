// Initial values of leaf tensors.
//
// THE RANDOM GENERATOR BELOW IS PART OF THE SCENARIO FORMAT: scenarios and golden reports
// depend on the exact values, and other tools may reproduce them. It must never change.
//
// Every value is computed in IEEE double, in row-major order (element i = 0 .. numel-1),
// and then rounded to the leaf's dtype with round_to_dtype (float32: round to nearest;
// float16/bfloat16: round to nearest even; int64: truncate toward zero; bool: v != 0).
//
// Deterministic kinds:
//   zeros            0
//   ones             1
//   full v           v
//   values [...]     the given values, flattened row-major
//   arange [s, d]    s + i * d                       (i converted to double)
//   linspace [a, b]  like torch.linspace(a, b, numel): n = numel; n == 1 gives a;
//                    otherwise step = (b - a) / (n - 1) and, with halfway = n / 2
//                    (integer division), element i is a + i * step when i < halfway and
//                    b - (n - 1 - i) * step otherwise (so both ends are exact). For
//                    float64 this is computed in double; for float32 as PyTorch 1.13's CPU
//                    kernel computes it, bit for bit (linspace_f32 below: fused
//                    multiply-adds and vectors of eight); for the half types in float.
//
// Random kinds: one generator per tensor, so adding, removing or reordering tensors never
// changes another tensor's values.
//   Hash:  FNV-1a 64 over the bytes of the tensor name:
//            h = 0xcbf29ce484222325; for each byte c: h ^= c; h *= 0x100000001b3 (mod 2^64).
//   State: s = scenario_seed XOR h   (uint64).
//   next() (SplitMix64, Steele/Lea/Flood 2014, as published by Vigna):
//            s += 0x9e3779b97f4a7c15
//            z = s
//            z = (z XOR (z >> 30)) * 0xbf58476d1ce4e5b9
//            z = (z XOR (z >> 27)) * 0x94d049bb133111eb
//            return z XOR (z >> 31)                  (all arithmetic mod 2^64)
//   uniform01() = (next() >> 11) * 2^-53             in [0, 1), 53 random bits
//   uniform [lo, hi]   element i: u = uniform01(); lo + (hi - lo) * u
//   normal [mean, std] element i (Box-Muller, cosine branch only, two draws per element):
//            u1 = ((next() >> 11) + 1) * 2^-53       in (0, 1], so log(u1) is finite
//            u2 = uniform01()
//            z  = sqrt(-2 * ln(u1)) * cos((2 * pi) * u2)
//            value = mean + std * z
//          where pi = 3.141592653589793 (the double nearest to pi); u1 is drawn first.
//          (sqrt is exact; log and cos are the C library's, which on glibc are accurate
//          to the last bit or so: a reimplementation elsewhere may differ in the last ulp
//          of a float64 normal value, and only very rarely after rounding to float32.)
//   randint [lo, hi]   element i: u = uniform01(); v = lo + floor(u * (hi - lo));
//          if rounding ever made v >= hi, v = hi - 1 (lo, hi integral, |lo|,|hi| <= 2^53).
// Elements draw in row-major order, one after the other from the same generator.
//
// Note that rounding to a narrow dtype can move a uniform value onto hi itself (the
// interval is half-open before rounding).
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "scenario/normal_math.hpp"
#include "scenario/random.hpp"
#include "scenario/scenario.hpp"
#include "tensor/fast_paths.hpp"
#include "util/gcc_pragma.hpp"

namespace agtrace {
namespace {

constexpr double kPi = 3.141592653589793;

// z of a normal value from its two draws (the recipe above); libm's log and cos.
inline double box_muller(double u1, double u2) { return std::sqrt(-2.0 * std::log(u1)) * std::cos((2.0 * kPi) * u2); }

// Element i of torch.linspace(a, b, n) in float32 (n >= 2) as 1.13's CPU kernel computes it on
// one thread (linspace_kernel through cpu_serial_kernel_vec, AVX2 build):
// step = (b - a) / (n - 1) in float; the first n / 16 * 16 elements are made sixteen at a time
// as two vectors of eight, each from a base, fma(step, c, a) for a vector starting at c below
// n / 2 and fma(-step, n - 1 - c, b) from there on, plus k * step for its k-th element (the
// product rounded to float, then the sum: Vectorized::arange's additions are not fused); the
// elements after them one by one with the base's formula for their own index. GCC fuses
// the scalar a + step * i of that build into one rounding. Measured: 0 differences from
// torch.linspace on 10 ranges of 8 to 32,768 elements (tests/tools/linspace_reference.py),
// where the unfused ends-in formula differs in 1 to 12,665 elements. Above 32,768 elements torch splits the range between its
// threads and each thread's part starts its vectors afresh: one thread's values are these.
float linspace_f32(float a, float b, int64_t n, int64_t i) {
  const float step = (b - a) / static_cast<float>(n - 1);
  const int64_t half = n / 2;
  auto from_ends = [&](int64_t k) {
    return k < half ? std::fma(step, static_cast<float>(k), a) : std::fma(-step, static_cast<float>(n - 1 - k), b);
  };
  if (i >= n / 16 * 16) return from_ends(i);
  const int64_t start = i - i % 8;
  // The product rounded to float on its own (a cast, so that no compiler fuses it into the sum).
  const float offset = static_cast<float>(static_cast<double>(i - start) * static_cast<double>(step));
  return from_ends(start) + offset;
}

}  // namespace

namespace {
// The leaf's element count; false for a negative size or an overflowing product.
bool leaf_numel(const LeafSpec& leaf, int64_t& numel) {
  numel = 1;
  for (int64_t d : leaf.shape)
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) return false;
  return true;
}

// Every value of the leaf, in row-major order, rounded to its dtype, handed to
// sink(index, value): into a vector (initial_values), or straight into a float32 storage
// (fill_initial_values_f32: no intermediate vector of doubles for a large leaf, issue #6).
template <typename Sink>
void generate_initial_values(const LeafSpec& leaf, uint64_t scenario_seed, Sink&& sink) {
  int64_t numel = 1;
  if (!leaf_numel(leaf, numel)) throw std::invalid_argument("initial_values: invalid shape for " + leaf.name);
  const InitSpec& init = leaf.init;
  const std::size_t n = static_cast<std::size_t>(numel);
  if (init.kind == InitSpec::Kind::Values) {
    // The loader has checked the count; a hand-made LeafSpec might not have.
    if (init.values.size() != n)
      throw std::invalid_argument("initial_values: " + leaf.name + " has " +
                                  std::to_string(init.values.size()) + " values for " +
                                  std::to_string(numel) + " elements");
    for (std::size_t i = 0; i < n; ++i) sink(i, round_to_dtype(init.values[i], leaf.dtype));
    return;
  }

  SplitMix64 gen(scenario_seed ^ fnv1a64(leaf.name));
  const double a = init.a, b = init.b;
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0.0;
    switch (init.kind) {
      case InitSpec::Kind::Zeros: v = 0.0; break;
      case InitSpec::Kind::Ones: v = 1.0; break;
      case InitSpec::Kind::Full: v = a; break;
      case InitSpec::Kind::Values: break;  // handled above
      case InitSpec::Kind::Arange: v = a + static_cast<double>(i) * b; break;
      case InitSpec::Kind::Linspace: {
        if (n == 1) {
          v = a;
        } else {
          const std::size_t halfway = n / 2;
          if (leaf.dtype == DType::Float64) {
            const double step = (b - a) / static_cast<double>(n - 1);
            // PyTorch fills from both ends so that the last element is exactly hi.
            v = i < halfway ? a + static_cast<double>(i) * step : b - static_cast<double>(n - 1 - i) * step;
          } else if (leaf.dtype == DType::Float32) {
            v = linspace_f32(static_cast<float>(a), static_cast<float>(b), static_cast<int64_t>(n),
                             static_cast<int64_t>(i));
          } else {
            // The half types: the same ends-in formula in float (within a rounding of
            // torch.linspace, whose half kernels round at each step).
            const float fa = static_cast<float>(a), fb = static_cast<float>(b);
            const float step = (fb - fa) / static_cast<float>(n - 1);
            v = i < halfway ? fa + static_cast<float>(i) * step : fb - static_cast<float>(n - 1 - i) * step;
          }
        }
        break;
      }
      case InitSpec::Kind::Uniform: v = a + (b - a) * gen.uniform01(); break;
      case InitSpec::Kind::Normal: {
        const double u1 = gen.uniform01_open_below();
        const double u2 = gen.uniform01();
        v = a + b * box_muller(u1, u2);
        break;
      }
      case InitSpec::Kind::Randint: {
        const double u = gen.uniform01();
        v = a + std::floor(u * (b - a));
        if (v >= b) v = b - 1;
        break;
      }
    }
    sink(i, round_to_dtype(v, leaf.dtype));
  }
}
}  // namespace

std::vector<double> initial_values(const LeafSpec& leaf, uint64_t scenario_seed) {
  std::vector<double> out;
  int64_t numel = 1;
  if (leaf_numel(leaf, numel)) out.reserve(static_cast<std::size_t>(numel));  // else generate_initial_values throws
  generate_initial_values(leaf, scenario_seed, [&](std::size_t, double v) { out.push_back(v); });
  return out;
}

namespace {
// Uniform float32 leaves without the element loop's per-element switch, vectorized and split
// over the run's threads: draw k of a SplitMix64 generator is a function of k alone (the
// state after k + 1 steps is seed + (k + 1) * gamma), so element i, which takes draw i, can
// be computed anywhere, in any order, with the same bits as generate_initial_values
// (tested: integer arithmetic is exact, (z >> 11) * 2^-53 is exact in double, and the one
// multiply and one add are kept apart, never contracted into an fma). Leaf creation is timed
// in the bench's transformer_block (issue #6).
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
#define AGTRACE_UNIFORM_F32_LOOP                                                   \
  for (int64_t i = begin; i < end; ++i) {                                          \
    uint64_t z = state0 + static_cast<uint64_t>(i + 1) * kGamma;                   \
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;                                   \
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;                                   \
    z ^= z >> 31;                                                                  \
    const double scaled = width * (static_cast<double>(z >> 11) * 0x1.0p-53);     \
    dst[i] = static_cast<float>(lo + scaled);                                      \
  }
// GCC only (util/gcc_pragma.hpp): clang compiles both functions as the same plain loop,
// which gives the same bits.
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC optimize("fp-contract=off", "O3"))
void uniform_block(uint64_t state0, double lo, double width, float* dst, int64_t begin, int64_t end) {
  AGTRACE_UNIFORM_F32_LOOP
}
AGTRACE_GCC_PRAGMA(GCC push_options)
AGTRACE_GCC_PRAGMA(GCC target("avx512f,avx512dq"))
void uniform_block_avx512(uint64_t state0, double lo, double width, float* dst, int64_t begin, int64_t end) {
  AGTRACE_UNIFORM_F32_LOOP
}
AGTRACE_GCC_PRAGMA(GCC pop_options)
AGTRACE_GCC_PRAGMA(GCC pop_options)
#undef AGTRACE_UNIFORM_F32_LOOP

// Normal float32 leaves (every conv and linear weight of a recorded torchvision model: 11.7
// million values for resnet18, which took 0.5 s through libm's log and cos) with the same
// bits as generate_initial_values, which stays the definition: each value is computed with
// polynomial log and cos (lib/scenario/normal_math.hpp, within 1e-15 of libm) and kept only
// when every double within a margin far above that error rounds to the same float32, so the
// definition's value rounds to it too. Otherwise (near a float32 rounding midpoint, or z near
// 0; about 2 values in 100,000) the element is computed by the definition.
void fill_normal_f32(const LeafSpec& leaf, uint64_t scenario_seed, float* dst, int64_t numel) {
  const uint64_t state0 = scenario_seed ^ fnv1a64(leaf.name);
  const double mean = leaf.init.a, stddev = leaf.init.b;
  kernels::parallel_for(numel, kernels::kGrain, [&](int64_t begin, int64_t end) {
    normal_math::fill_normal_f32_block(state0, mean, stddev, dst, begin, end);
  });
}

void fill_uniform_f32(const LeafSpec& leaf, uint64_t scenario_seed, float* dst, int64_t numel) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  const uint64_t state0 = scenario_seed ^ fnv1a64(leaf.name);
  const double lo = leaf.init.a, width = leaf.init.b - leaf.init.a;
  kernels::parallel_for(numel, kernels::kGrain, [&](int64_t begin, int64_t end) {
    if (avx512) uniform_block_avx512(state0, lo, width, dst, begin, end);
    else uniform_block(state0, lo, width, dst, begin, end);
  });
}
}  // namespace

namespace normal_math {
// The definition's value of element i (draws 2i and 2i + 1), by libm, in this file's
// options, so that it computes exactly what generate_initial_values computes.
float normal_element_by_definition(uint64_t state0, int64_t i, double mean, double stddev) {
  SplitMix64 gen(state0 + static_cast<uint64_t>(2 * i) * kGamma);
  const double u1 = gen.uniform01_open_below();
  const double u2 = gen.uniform01();
  return static_cast<float>(mean + stddev * box_muller(u1, u2));
}
}  // namespace normal_math

void fill_initial_values_f32(const LeafSpec& leaf, uint64_t scenario_seed, float* dst) {
  int64_t numel = 1;
  if (leaf.dtype == DType::Float32 && leaf.init.kind == InitSpec::Kind::Uniform && leaf_numel(leaf, numel)) {
    fill_uniform_f32(leaf, scenario_seed, dst, numel);
    return;
  }
  if (leaf.dtype == DType::Float32 && leaf.init.kind == InitSpec::Kind::Normal && leaf_numel(leaf, numel) &&
      std::isfinite(leaf.init.a) && std::isfinite(leaf.init.b)) {
    fill_normal_f32(leaf, scenario_seed, dst, numel);
    return;
  }
  generate_initial_values(leaf, scenario_seed, [dst](std::size_t i, double v) { dst[i] = static_cast<float>(v); });
}

}  // namespace agtrace
