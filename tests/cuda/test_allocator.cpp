#include <catch2/catch.hpp>

#include <string>

#include "cuda/allocator.hpp"
#include "cuda/runtime.hpp"

using namespace agtrace::cuda;

TEST_CASE("CUDA allocator: PyTorch's 512-byte block rounding", "[cuda][allocator]") {
  CHECK(round_block_size(0) == 0);
  CHECK(round_block_size(1) == 512);
  CHECK(round_block_size(512) == 512);
  CHECK(round_block_size(513) == 1024);
  CHECK(round_block_size(1000000) == 1000448);
}

TEST_CASE("CUDA allocator counts requested, block and reserved bytes and caches freed blocks", "[cuda][allocator]") {
  release_cached();
  reset_peak_stats();
  const AllocatorStats s0 = allocator_stats();
  CHECK(s0.requested_peak == s0.requested_live);
  CHECK(s0.reserved_live == s0.block_live);  // nothing cached after release_cached

  void* p = device_alloc(1000, "test_alloc");
  REQUIRE(p != nullptr);
  AllocatorStats s = allocator_stats();
  CHECK(s.requested_live == s0.requested_live + 1000);
  CHECK(s.block_live == s0.block_live + 1024);
  CHECK(s.reserved_live == s0.reserved_live + 1024);
  CHECK(s.driver_calls == s0.driver_calls + 1);
  CHECK(s.cache_hits == s0.cache_hits);
  CHECK(s.requested_peak == s.requested_live);
  CHECK(s.block_peak == s.block_live);
  CHECK(s.reserved_peak == s.reserved_live);

  void* q = device_alloc(1, "test_alloc");
  s = allocator_stats();
  CHECK(s.requested_live == s0.requested_live + 1001);
  CHECK(s.block_live == s0.block_live + 1536);
  CHECK(s.reserved_live == s0.reserved_live + 1536);
  CHECK(s.driver_calls == s0.driver_calls + 2);

  device_free(p);  // to the cache: reserved bytes stay, peaks stay
  s = allocator_stats();
  CHECK(s.requested_live == s0.requested_live + 1);
  CHECK(s.block_live == s0.block_live + 512);
  CHECK(s.reserved_live == s0.reserved_live + 1536);
  CHECK(s.requested_peak == s0.requested_live + 1001);
  CHECK(s.block_peak == s0.block_live + 1536);
  CHECK(s.reserved_peak == s0.reserved_live + 1536);

  void* r = device_alloc(1020, "test_alloc");  // rounds to 1024: the cached block
  CHECK(r == p);
  s = allocator_stats();
  CHECK(s.driver_calls == s0.driver_calls + 2);
  CHECK(s.cache_hits == s0.cache_hits + 1);
  CHECK(s.requested_live == s0.requested_live + 1021);
  CHECK(s.block_live == s0.block_live + 1536);
  CHECK(s.reserved_live == s0.reserved_live + 1536);

  CHECK(device_alloc(0, "test_alloc") == nullptr);
  CHECK(allocator_stats().requested_live == s.requested_live);
  CHECK(allocator_stats().driver_calls == s.driver_calls);

  device_free(q);
  device_free(r);
  device_free(nullptr);
  s = allocator_stats();
  CHECK(s.requested_live == s0.requested_live);
  CHECK(s.block_live == s0.block_live);
  CHECK(s.reserved_live == s0.reserved_live + 1536);
  release_cached();
  s = allocator_stats();
  CHECK(s.reserved_live == s0.reserved_live);
  CHECK(s.driver_calls == s0.driver_calls + 4);  // two cudaMalloc, two cudaFree
  reset_peak_stats();
  s = allocator_stats();
  CHECK(s.requested_peak == s0.requested_live);
  CHECK(s.block_peak == s0.block_live);
  CHECK(s.reserved_peak == s0.reserved_live);
}

TEST_CASE("CUDA allocator errors name the operation", "[cuda][allocator]") {
  int host = 0;
  CHECK_THROWS_AS(device_free(&host), CudaError);
  release_cached();  // a failed cudaMalloc releases the cache before its retry
  const AllocatorStats before = allocator_stats();
  try {
    device_alloc(int64_t{1} << 52, "huge_op");  // 4 PiB
    FAIL("a 4 PiB allocation succeeded");
  } catch (const CudaError& e) {
    const std::string m = e.what();
    CHECK(m.find("huge_op") != std::string::npos);
    CHECK(m.find("cudaMalloc") != std::string::npos);
  }
  CHECK(allocator_stats().requested_live == before.requested_live);
  CHECK(allocator_stats().reserved_live == before.reserved_live);
  CHECK_THROWS_AS(device_alloc(-1, "neg"), CudaError);
}
