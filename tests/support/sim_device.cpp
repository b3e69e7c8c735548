#include "support/sim_device.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace agtrace::testing {

namespace {
int64_t round_block(int64_t bytes) { return bytes == 0 ? 0 : std::max<int64_t>(512, (bytes + 511) / 512 * 512); }
}  // namespace

SimulatedDevice::~SimulatedDevice() = default;

void* SimulatedDevice::allocate(int64_t bytes, const char*) {
  if (bytes == 0) return nullptr;
  auto b = std::make_unique<Block>();
  b->bytes = bytes;
  b->elements.assign(static_cast<size_t>(bytes), 0.0);
  void* p = b.get();
  blocks_[p] = std::move(b);
  stats_.requested_live += bytes;
  stats_.block_live += round_block(bytes);
  stats_.reserved_live += round_block(bytes);
  stats_.requested_peak = std::max(stats_.requested_peak, stats_.requested_live);
  stats_.block_peak = std::max(stats_.block_peak, stats_.block_live);
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved_live);
  ++stats_.driver_calls;
  return p;
}

void SimulatedDevice::release(void* p) noexcept {
  if (!p) return;
  auto it = blocks_.find(p);
  if (it == blocks_.end()) std::terminate();  // a pointer this device never handed out: a bug
  const int64_t bytes = it->second->bytes;
  stats_.requested_live -= bytes;
  stats_.block_live -= round_block(bytes);
  stats_.reserved_live -= round_block(bytes);
  ++stats_.driver_calls;
  blocks_.erase(it);
}

SimulatedDevice::Block& SimulatedDevice::block(const void* p, const char* op) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) throw std::logic_error(std::string(op) + ": not a buffer of the simulated device");
  return *it->second;
}

void SimulatedDevice::zero(void* p, int64_t, const char* op) {
  Block& b = block(p, op);
  std::fill(b.elements.begin(), b.elements.end(), 0.0);
}

void SimulatedDevice::upload(void* dst, DType dtype, const double* src, int64_t n, const char* op) {
  Block& b = block(dst, op);
  if (n * dtype_size(dtype) > b.bytes) throw std::logic_error(std::string(op) + ": upload past the buffer's end");
  std::copy(src, src + n, b.elements.begin());
  uploads += n;
}

void SimulatedDevice::download(double* dst, const void* src, DType dtype, int64_t n, const char* op) {
  const Block& b = block(src, op);
  if (n * dtype_size(dtype) > b.bytes) throw std::logic_error(std::string(op) + ": download past the buffer's end");
  std::copy(b.elements.begin(), b.elements.begin() + n, dst);
  downloads += n;
}

}  // namespace agtrace::testing
