// The small-object pool behind operator new (lib/util/small_object_pool.hpp, issue #6).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "support/command.hpp"
#include "util/small_object_pool.hpp"

using namespace agtrace;

TEST_CASE("pool: every request gets the smallest class that holds it", "[pool]") {
  size_t previous = 0;
  for (size_t bytes = 0; bytes <= pool::kMaxPooledBytes; ++bytes) {
    const size_t c = pool::class_bytes(bytes);
    CHECK(c >= bytes);
    CHECK(c >= 16);
    CHECK(c % pool::kAlignment == 0);
    CHECK(c >= previous);  // monotone in the request
    // No more than a quarter wasted above 128 bytes, 15 bytes below.
    if (bytes > 128) CHECK(c - bytes < c / 4 + 1);
    else CHECK(c - bytes < 16 + (bytes == 0 ? 1 : 0));
    previous = c;
  }
  CHECK(pool::class_bytes(pool::kMaxPooledBytes + 1) == 0);
}

TEST_CASE("pool: objects are aligned, disjoint, kept intact and reused after free", "[pool]") {
  REQUIRE(pool::enabled());
  for (size_t bytes : {1u, 16u, 24u, 100u, 200u, 500u, 1000u, 1024u}) {
    std::vector<unsigned char*> objects;
    for (int i = 0; i < 3000; ++i) {
      auto* p = static_cast<unsigned char*>(pool::allocate(bytes));
      REQUIRE(p != nullptr);
      CHECK(pool::owns(p));
      CHECK(reinterpret_cast<uintptr_t>(p) % pool::kAlignment == 0);
      std::memset(p, i & 0xff, bytes);
      objects.push_back(p);
    }
    // Every object still holds its own pattern: no two overlap.
    size_t intact = 0;
    for (size_t i = 0; i < objects.size(); ++i) {
      bool same = true;
      for (size_t b = 0; b < bytes; ++b) same = same && objects[i][b] == static_cast<unsigned char>(i & 0xff);
      intact += same ? 1 : 0;
    }
    CHECK(intact == objects.size());
    for (auto* p : objects) pool::deallocate(p);
    // The same number again comes from the freed objects: no new slab, and again no two
    // overlap (a free that marked the wrong slot would hand one out twice).
    const uint64_t slabs = pool::stats().slabs;
    for (auto*& p : objects) p = static_cast<unsigned char*>(pool::allocate(bytes));
    CHECK(pool::stats().slabs == slabs);
    std::vector<unsigned char*> sorted = objects;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    for (size_t i = 0; i + 1 < sorted.size(); ++i) CHECK(sorted[i] + bytes <= sorted[i + 1]);
    for (auto* p : objects) pool::deallocate(p);
  }
}

TEST_CASE("pool: freed objects come back in address order, not in the order they were freed", "[pool]") {
  REQUIRE(pool::enabled());
  for (size_t bytes : {80u, 320u}) {
    std::vector<void*> objects;
    for (int i = 0; i < 5000; ++i) objects.push_back(pool::allocate(bytes));
    // Freed in a scrambled order (a graph is freed in an order unrelated to where its
    // objects lie).
    std::vector<void*> scrambled = objects;
    for (size_t i = 0; i < scrambled.size(); ++i) std::swap(scrambled[i], scrambled[(i * 7919 + 13) % scrambled.size()]);
    for (void* p : scrambled) pool::deallocate(p);
    std::vector<uintptr_t> again;
    for (size_t i = 0; i < objects.size(); ++i) again.push_back(reinterpret_cast<uintptr_t>(pool::allocate(bytes)));
    // The first ones may be frees kept aside; after them the cursor walks the slabs
    // upwards, wrapping round once at most.
    size_t descents = 0;
    for (size_t i = pool::kRecentFreesKept; i + 1 < again.size(); ++i) descents += again[i + 1] < again[i] ? 1 : 0;
    CHECK(descents <= 1);
    // (A free list would have handed them back in the reverse of the scrambled order.)
    for (uintptr_t p : again) pool::deallocate(reinterpret_cast<void*>(p));
  }
}

TEST_CASE("pool: requests above the largest class and null go through malloc and free", "[pool]") {
  void* big = pool::allocate(pool::kMaxPooledBytes + 1);
  REQUIRE(big != nullptr);
  CHECK_FALSE(pool::owns(big));
  std::memset(big, 7, pool::kMaxPooledBytes + 1);
  pool::deallocate(big);
  pool::deallocate(nullptr);
  int on_stack = 0;
  CHECK_FALSE(pool::owns(&on_stack));
}

TEST_CASE("pool: an object freed by another thread is reusable there", "[pool]") {
  REQUIRE(pool::enabled());
  std::vector<void*> made;
  made.reserve(1000);
  std::thread maker([&] {
    for (int i = 0; i < 1000; ++i) made.push_back(pool::allocate(48));
  });
  maker.join();
  for (void* p : made) CHECK(pool::owns(p));
  // (Catch2's assertions are not thread-safe: the thread only records what it saw.)
  uint64_t slabs_before = 0, slabs_after = 0;
  size_t reused = 0;
  std::thread freer([&] {
    std::vector<void*> again;
    again.reserve(made.size());  // above the largest class: from malloc, takes no slab
    for (void* p : made) pool::deallocate(p);
    // This thread keeps them (another thread's slabs): it gets them back without a new slab.
    slabs_before = pool::stats().slabs;
    for (size_t i = 0; i < made.size(); ++i) again.push_back(pool::allocate(48));
    slabs_after = pool::stats().slabs;
    for (void* p : again) reused += std::find(made.begin(), made.end(), p) != made.end() ? 1 : 0;
    for (void* p : again) pool::deallocate(p);
  });
  freer.join();
  CHECK(slabs_after == slabs_before);
  CHECK(reused == made.size());
}

#ifdef AGTRACE_POOLED_NEW
TEST_CASE("pool: this program's operator new and delete are the pool's", "[pool]") {
  auto* small = new int(5);
  CHECK(pool::owns(small));
  delete small;
  auto* large = new char[4096];
  CHECK_FALSE(pool::owns(large));
  delete[] large;
  std::vector<int> v(10, 1);
  CHECK(pool::owns(v.data()));
}
#endif

TEST_CASE("pool: agtrace reports the same with and without the pool", "[pool]") {
  const std::string sc = test::source_dir() + "/scenarios/seed_walk.json";
  auto pooled = test::run_shell(std::string(AGTRACE_BINARY) + " run " + sc + " --format json --values");
  auto plain = test::run_shell("AGTRACE_SMALL_OBJECT_POOL=0 " + std::string(AGTRACE_BINARY) + " run " + sc +
                               " --format json --values");
  REQUIRE(pooled.status == 0);
  REQUIRE(plain.status == 0);
  CHECK(pooled.out.size() > 1000);
  CHECK(pooled.out == plain.out);
}
