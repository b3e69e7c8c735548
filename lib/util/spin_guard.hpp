// Holds an std::atomic_flag used as a spin lock for a scope: the interned tables are shared
// by every run in the process, and their critical sections are a few instructions long.
#pragma once
#include <atomic>

namespace agtrace {

class SpinGuard {
 public:
  explicit SpinGuard(std::atomic_flag& flag) : flag_(flag) {
    while (flag_.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~SpinGuard() { flag_.clear(std::memory_order_release); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  std::atomic_flag& flag_;
};

}  // namespace agtrace
