// The cuda backend as agtrace gets it (lib/cuda/device.hpp): the plugin, loaded where a GPU
// is, or the reason there is none. Compiled in CPU and CUDA builds alike.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/device.hpp"
#include "tensor/device_backend.hpp"

using namespace agtrace;

TEST_CASE("CUDA host: the cuda backend plugin loads where a GPU is, and says why not elsewhere", "[cuda_host]") {
  std::string why;
  DeviceBackend* backend = device::cuda_backend(&why);
  if (!backend) {
    // This machine: no GPU, no driver, or a CPU-only build; the reason is what
    // `agtrace run --device cuda` prints.
    CHECK_FALSE(why.empty());
    CHECK_FALSE(device::check("cuda").available);
    return;
  }
  // A GPU machine: the plugin's allocator counts what it hands out.
  CHECK(device::check("cuda").available);
  CHECK_FALSE(backend->description().empty());
  const DeviceMemoryStats before = backend->stats();
  void* p = backend->allocate(1000, "test");
  CHECK(backend->stats().requested_live == before.requested_live + 1000);
  CHECK(backend->stats().block_live == before.block_live + 1024);
  const double values[3] = {1.5, -2.0, 0.25};
  double back[3] = {0, 0, 0};
  backend->upload(p, DType::Float32, values, 3, "test");
  backend->download(back, p, DType::Float32, 3, "test");
  CHECK(back[0] == 1.5);
  CHECK(back[1] == -2.0);
  CHECK(back[2] == 0.25);
  backend->release(p);
  CHECK(backend->stats().requested_live == before.requested_live);
}
