// Reference-counted pointers for the objects of a run: tensors, storages, version counters
// and backward nodes (issue #6).
//
// std::shared_ptr counts references with locked (atomic) instructions as soon as the process
// has a second thread: libstdc++ checks glibc's __libc_single_threaded, which becomes false
// when any thread starts and never turns back. OpenBLAS starts its worker threads when it
// is loaded (OPENBLAS_NUM_THREADS, or one per CPU by default) or when agtrace asks for 2
// threads, so every copy and release of a tensor paid for a locked add. Measured on
// bench/scenarios/tiny_chain.json (10,000 ops, --threads 2, 4 alternated runs of 5 reps):
// 10.8-11.2 ms with the locked counts against 10.0-10.7 ms with the same binary told it was
// single-threaded, and 10.4-10.5 ms at --threads 1 with OpenBLAS at 1 thread.
//
// These objects are only ever copied, released and locked (weak pointers) by the thread
// that runs the scenario: the worker threads of kernels::parallel_for and OpenBLAS receive
// raw element pointers and `Storage&`, never one of these pointers (the rule is stated at
// parallel_for in lib/tensor/kernels.hpp). So the counts need no atomics, and libstdc++'s single-thread
// lock policy (_S_single: plain increments) is used for them. Everything else keeps
// std::shared_ptr.
#pragma once
#include <memory>
#include <utility>

namespace agtrace {

template <class T>
using Shared = std::__shared_ptr<T, __gnu_cxx::_S_single>;
template <class T>
using Weak = std::__weak_ptr<T, __gnu_cxx::_S_single>;
template <class T>
using SharedFromThis = std::__enable_shared_from_this<T, __gnu_cxx::_S_single>;

// make_shared for Shared<T>: object and counts in one allocation, as std::make_shared.
template <class T, class... Args>
Shared<T> make_shared_object(Args&&... args) {
  return std::__make_shared<T, __gnu_cxx::_S_single>(std::forward<Args>(args)...);
}

}  // namespace agtrace
