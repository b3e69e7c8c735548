// agtrace_cuda_tests: the CUDA kernels against agtrace's CPU results. Without a usable GPU
// it prints "skipped: <reason>" and exits 77, which ctest (SKIP_RETURN_CODE 77) reports as
// skipped: a machine without a GPU must never count these tests as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "cuda/runtime.hpp"

int main(int argc, char* argv[]) {
  // Listing the tests needs no device (it runs none).
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-l") == 0 ||
              std::strcmp(argv[i], "-t") == 0;
  if (listing) return Catch::Session().run(argc, argv);
  const agtrace::cuda::RuntimeStatus st = agtrace::cuda::runtime_status();
  if (!st.usable) {
    std::printf("skipped: no CUDA device: %s\n", st.reason.c_str());
    return 77;
  }
  std::printf("CUDA device 0: %s (%d device(s))\n", st.device_name.c_str(), st.device_count);
  return Catch::Session().run(argc, argv);
}
