#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/allocator.hpp"
#include "cuda/common.cuh"

namespace agtrace::cuda {

namespace {

struct Live {
  int64_t requested = 0, block = 0;
};

struct State {
  std::mutex mu;
  std::unordered_map<void*, Live> live;     // handed out
  std::multimap<int64_t, void*> cached;     // free, by block size
  AllocatorStats stats;
};

State& state() {
  static State* s = new State;  // never destroyed: frees may run during static teardown
  return *s;
}

void note_peaks(AllocatorStats& s) {
  if (s.requested_live > s.requested_peak) s.requested_peak = s.requested_live;
  if (s.block_live > s.block_peak) s.block_peak = s.block_live;
  if (s.reserved_live > s.reserved_peak) s.reserved_peak = s.reserved_live;
}

// Caller holds the lock.
void release_cached_locked(State& st) {
  for (auto& [size, p] : st.cached) {
    ++st.stats.driver_calls;
    check(cudaFree(p), "release_cached", "cudaFree");
    st.stats.reserved_live -= size;
  }
  st.cached.clear();
}

}  // namespace

int64_t round_block_size(int64_t bytes) {
  constexpr int64_t kMinBlockSize = 512;
  if (bytes <= 0) return 0;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

void* device_alloc(int64_t bytes, const char* op) {
  if (bytes < 0) throw CudaError(std::string("device_alloc for ") + op + ": negative size " + std::to_string(bytes));
  if (bytes == 0) return nullptr;
  const int64_t block = round_block_size(bytes);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  void* p = nullptr;
  auto it = st.cached.find(block);
  if (it != st.cached.end()) {
    p = it->second;
    st.cached.erase(it);
    ++st.stats.cache_hits;
  } else {
    ++st.stats.driver_calls;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(block));
    if (e == cudaErrorMemoryAllocation && !st.cached.empty()) {
      cudaGetLastError();  // clear it before retrying
      release_cached_locked(st);
      ++st.stats.driver_calls;
      e = cudaMalloc(&p, static_cast<size_t>(block));
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw CudaError("CUDA error in " + std::string(op) + " (cudaMalloc of " + std::to_string(block) +
                      " bytes): " + cudaGetErrorString(e));
    }
    st.stats.reserved_live += block;
  }
  st.live[p] = Live{bytes, block};
  st.stats.requested_live += bytes;
  st.stats.block_live += block;
  note_peaks(st.stats);
  return p;
}

void device_free(void* p) {
  if (p == nullptr) return;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.live.find(p);
  if (it == st.live.end()) throw CudaError("device_free: the pointer was not handed out by device_alloc");
  st.stats.requested_live -= it->second.requested;
  st.stats.block_live -= it->second.block;
  st.cached.emplace(it->second.block, p);
  st.live.erase(it);
}

AllocatorStats allocator_stats() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.stats;
}

void release_cached() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  release_cached_locked(st);
}

void reset_peak_stats() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.stats.requested_peak = st.stats.requested_live;
  st.stats.block_peak = st.stats.block_live;
  st.stats.reserved_peak = st.stats.reserved_live;
}

void copy_to_device(void* dst, const void* src, int64_t bytes, const char* op) {
  if (bytes <= 0) return;
  check(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), op, "cudaMemcpy host to device");
}

void copy_to_host(void* dst, const void* src, int64_t bytes, const char* op) {
  if (bytes <= 0) return;
  check(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), op, "cudaMemcpy device to host");
}

}  // namespace agtrace::cuda
