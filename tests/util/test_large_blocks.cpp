// The large-block arena behind big tensors' elements (lib/util/large_blocks.hpp): blocks are
// page-aligned, disjoint and kept intact; freed ones are reused best-fit and merged with free
// neighbours; which bytes may hold old data is reported exactly (a zero-filled tensor skips
// its memset for the rest); a request the range cannot hold goes to malloc. Then the storages
// that use the process's arena: a zero-filled tensor made where a written one was is zero.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "tensor/tensor.hpp"
#include "util/large_blocks.hpp"

namespace lb = agtrace::large_blocks;

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

bool all_bytes(const void* p, size_t n, unsigned char value) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != value) return false;
  return true;
}

}  // namespace

TEST_CASE("large blocks: fresh blocks are zero, page-aligned, disjoint and kept intact", "[large_blocks]") {
  lb::Arena arena(16 * kMiB, true);
  REQUIRE(arena.enabled());
  std::vector<lb::Block> blocks;
  for (size_t i = 0; i < 6; ++i) {
    const size_t bytes = 100 * kKiB + i * 333;
    lb::Block b = arena.allocate(bytes);
    CHECK(arena.owns(b.data));
    CHECK(reinterpret_cast<uintptr_t>(b.data) % lb::kGranule == 0);
    CHECK(b.dirty_bytes == 0);
    CHECK(all_bytes(b.data, bytes, 0));
    std::memset(b.data, static_cast<int>(i + 1), bytes);
    blocks.push_back(b);
  }
  for (size_t i = 0; i < blocks.size(); ++i) CHECK(all_bytes(blocks[i].data, 100 * kKiB + i * 333, static_cast<unsigned char>(i + 1)));
  const auto s = arena.stats();
  CHECK(s.in_use == 100 * kKiB + 5 * 104 * kKiB);  // whole pages: 100 KiB is 25, 100 KiB and a few bytes 26
  CHECK(s.top == s.in_use);
  CHECK(s.high_water == s.top);
  for (const auto& b : blocks) arena.release(b.data);
  const auto after = arena.stats();
  CHECK(after.in_use == 0);
  CHECK(after.top == 0);  // every block merged back into the top of the range
  CHECK(after.free_blocks == 0);
  CHECK(after.high_water == s.high_water);
}

TEST_CASE("large blocks: a freed block is reused and its old bytes are reported dirty", "[large_blocks]") {
  lb::Arena arena(16 * kMiB, true);
  REQUIRE(arena.enabled());
  lb::Block a = arena.allocate(64 * kKiB), b = arena.allocate(64 * kKiB), c = arena.allocate(64 * kKiB);
  std::memset(b.data, 0x5a, 64 * kKiB);
  arena.release(b.data);
  CHECK(arena.stats().free_blocks == 1);
  lb::Block again = arena.allocate(60 * kKiB);
  CHECK(again.data == b.data);
  CHECK(again.dirty_bytes == 60 * kKiB);  // never more than asked for
  CHECK(arena.stats().free_blocks == 1);  // the 4 KiB rest of b's block
  CHECK(arena.stats().free_bytes == 4 * kKiB);
  arena.release(again.data);
  arena.release(c.data);  // c, then b's span, merge into the top
  CHECK(arena.stats().top == 64 * kKiB);
  // Written data was there up to c's end; a block from the top now covers b and c and more:
  // only the part handed out before may be dirty.
  lb::Block big = arena.allocate(200 * kKiB);
  CHECK(big.data == b.data);
  CHECK(big.dirty_bytes == 128 * kKiB);
  CHECK(all_bytes(static_cast<char*>(big.data) + 128 * kKiB, 72 * kKiB, 0));
  arena.release(big.data);
  arena.release(a.data);
  CHECK(arena.stats().top == 0);
}

TEST_CASE("large blocks: free neighbours merge, and the smallest block that fits is taken", "[large_blocks]") {
  lb::Arena arena(16 * kMiB, true);
  REQUIRE(arena.enabled());
  std::vector<lb::Block> b;
  for (int i = 0; i < 8; ++i) b.push_back(arena.allocate(64 * kKiB));
  // Free 1, 2, 3 (released out of order: 3, 1, then 2 joins both) and 5; 0, 4, 6, 7 stay.
  arena.release(b[3].data);
  arena.release(b[1].data);
  CHECK(arena.stats().free_blocks == 2);
  arena.release(b[2].data);
  CHECK(arena.stats().free_blocks == 1);
  CHECK(arena.stats().free_bytes == 192 * kKiB);
  arena.release(b[5].data);
  CHECK(arena.stats().free_blocks == 2);
  // 64 KiB fits both free spans: the smaller one (5's) is taken, the 192 KiB span stays whole.
  lb::Block small = arena.allocate(64 * kKiB);
  CHECK(small.data == b[5].data);
  lb::Block wide = arena.allocate(192 * kKiB);
  CHECK(wide.data == b[1].data);
  CHECK(arena.stats().free_blocks == 0);
  // A request larger than any free span comes from the top.
  lb::Block more = arena.allocate(64 * kKiB);
  CHECK(more.data == static_cast<char*>(b[7].data) + 64 * kKiB);
  for (void* p : {b[0].data, b[4].data, b[6].data, b[7].data, small.data, wide.data, more.data}) arena.release(p);
  const auto s = arena.stats();
  CHECK(s.in_use == 0);
  CHECK(s.top == 0);
  CHECK(s.free_blocks == 0);
}

TEST_CASE("large blocks: what the range cannot hold, and a disabled arena, go to malloc", "[large_blocks]") {
  lb::Arena arena(2 * kMiB, true);
  REQUIRE(arena.enabled());
  lb::Block inside = arena.allocate(1536 * kKiB);
  CHECK(arena.owns(inside.data));
  lb::Block outside = arena.allocate(1 * kMiB);  // 512 KiB left in the range
  CHECK_FALSE(arena.owns(outside.data));
  CHECK(outside.dirty_bytes == 1 * kMiB);
  std::memset(outside.data, 7, 1 * kMiB);
  arena.release(outside.data);
  CHECK(arena.stats().in_use == 1536 * kKiB);
  arena.release(inside.data);

  // A size no memory can hold is bad_alloc, never a small block (rounding it up to whole
  // pages would wrap round).
  CHECK_THROWS_AS(arena.allocate(SIZE_MAX - 10), std::bad_alloc);
  CHECK(arena.stats().in_use == 0);

  lb::Arena off(2 * kMiB, false);
  CHECK_FALSE(off.enabled());
  lb::Block b = off.allocate(128 * kKiB);
  CHECK_FALSE(off.owns(b.data));
  CHECK(b.dirty_bytes == 128 * kKiB);
  off.release(b.data);
  off.release(nullptr);
}

TEST_CASE("large blocks: a zero-filled tensor made where a written one was is zero", "[large_blocks]") {
  using agtrace::DType;
  using agtrace::InternedShape;
  const int64_t n = 48 * 1024;  // 192 KiB of float32: above large_blocks::kMinBytes
  for (int round = 0; round < 3; ++round) {
    {
      agtrace::Tensor t = agtrace::uninitialized_tensor(InternedShape{n}, DType::Float32, false);
      float* f = t->storage->f32();
      for (int64_t i = 0; i < n; ++i) f[i] = 1.5f;
      if (lb::stats().reserved > 0) CHECK(lb::stats().in_use >= static_cast<size_t>(n) * 4);
    }
    agtrace::Tensor z = agtrace::empty_tensor(InternedShape{n + round * 1000}, DType::Float32, false);
    const float* f = z->storage->f32();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < z->storage->numel; ++i) nonzero += f[i] != 0.0f ? 1 : 0;
    CHECK(nonzero == 0);
  }
  // float64 and the other dtypes hold doubles: the same through the arena.
  {
    agtrace::Tensor t = agtrace::uninitialized_tensor(InternedShape{n}, DType::Float64, false);
    double* d = t->storage->f64();
    for (int64_t i = 0; i < n; ++i) d[i] = -2.0;
  }
  agtrace::Tensor z = agtrace::empty_tensor(InternedShape{n}, DType::Int64, false);
  const double* d = z->storage->f64();
  int64_t nonzero = 0;
  for (int64_t i = 0; i < n; ++i) nonzero += d[i] != 0.0 ? 1 : 0;
  CHECK(nonzero == 0);
}
