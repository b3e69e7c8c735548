// Scoped settings of the CPU kernels for tests that compare paths: the float32 fast paths on
// or off, and the thread count; each guard puts back what it found.
#pragma once
#include "tensor/kernels.hpp"

namespace agtrace::test {

struct FastPathsFor {
  bool before = kernels::fast_paths();
  explicit FastPathsFor(bool on) { kernels::set_fast_paths(on); }
  ~FastPathsFor() { kernels::set_fast_paths(before); }
  FastPathsFor(const FastPathsFor&) = delete;
  FastPathsFor& operator=(const FastPathsFor&) = delete;
};

struct ThreadsFor {
  int before = kernels::threads();
  explicit ThreadsFor(int n) { kernels::set_threads(n); }
  ~ThreadsFor() { kernels::set_threads(before); }
  ThreadsFor(const ThreadsFor&) = delete;
  ThreadsFor& operator=(const ThreadsFor&) = delete;
};

}  // namespace agtrace::test
