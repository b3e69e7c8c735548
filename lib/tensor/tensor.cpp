#include "tensor/tensor.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "errors.hpp"
#include "tensor/device_backend.hpp"
#include "tensor/events.hpp"
#include "util/large_blocks.hpp"
#include "util/slot_registry.hpp"

namespace agtrace {

namespace {
// At namespace scope, not a function's static: every tensor's construction and destruction
// reached it through an initialisation guard (issue #6). No tensor exists before main.
SlotRegistry<TensorImpl> g_live_tensors;
SlotRegistry<TensorImpl>& registry() { return g_live_tensors; }
}  // namespace

const std::vector<TensorImpl*>& live_tensors() { return registry().live(); }
void forget_live_tensors() { registry().forget_all(); }

ObjectObserver* detail::g_object_observer = nullptr;
void set_object_observer(ObjectObserver* observer) { detail::g_object_observer = observer; }

const InternedString detail::g_interned_cpu_device("cpu");

namespace {
[[noreturn]] __attribute__((noinline, cold)) void throw_over_budget(int64_t n, const RunLimits& lim) {
  ScenarioError e("limit", "allocating " + std::to_string(n) + " elements would exceed the memory budget of " +
                               std::to_string(lim.max_memory) + " bytes (--max-memory; the meta device is exempt)");
  e.facts = {{"elements", n}, {"max_memory", lim.max_memory}, {"held", lim.held}};
  throw e;
}
}  // namespace

// A cuda storage: its bytes come from the device backend (which counts them), none from
// this process's memory budget.
__attribute__((noinline)) void Storage::make_on_device(bool zero_fill) {
  device = allocation_device();
  DeviceBackend* backend = device_backend();
  if (!backend)
    throw ScenarioError("unsupported", "no " + device + " device in this run to allocate " + std::to_string(numel) +
                                           " elements on (agtrace run --device " + device + " loads one)");
  rep_ = Rep::Device;
  device_data_ = device_allocate(nbytes());
  if (zero_fill && numel > 0) {
    try {
      device_zero(device_data_, nbytes());
    } catch (...) {
      backend->release(device_data_);
      throw;
    }
  }
}

Storage::Storage(DType d, int64_t n, bool is_meta, bool zero_fill) : numel(n), dtype(d), meta(is_meta) {
  rep_ = holds_float() ? Rep::Float : Rep::Double;
  if (!meta && !allocating_on_cpu()) {
    make_on_device(zero_fill);
  } else if (!meta) {
    RunLimits& lim = run_limits();
    // 4 bytes per element (float32) or 8: a shift, not a division, for the overflow check.
    // The element count is checked before it is turned into bytes, which cannot overflow then.
    const int elem_shift = holds_float() ? 2 : 3;
    if (n > (lim.max_memory >> elem_shift)) throw_over_budget(n, lim);
    const int64_t need = n * (int64_t{1} << elem_shift);
    if (lim.held + need > lim.max_memory) throw_over_budget(n, lim);
    size_t to_zero = zero_fill ? static_cast<size_t>(need) : 0;
    if (static_cast<size_t>(need) <= kInlineBytes) {
      data_ = inline_data_;
    } else if (static_cast<size_t>(need) < large_blocks::kMinBytes) {
      // operator new's alignment (16) suits float and double alike.
      heap_ = new unsigned char[static_cast<size_t>(need)];
      data_ = heap_;
    } else {
      const large_blocks::Block block = large_blocks::allocate(static_cast<size_t>(need));
      heap_ = block.data;
      large_ = true;
      data_ = heap_;
      to_zero = std::min(to_zero, block.dirty_bytes);  // the rest is still the kernel's zeros
    }
    if (to_zero > 0) std::memset(data_, 0, to_zero);
    lim.held += need;
  }
  id = id_counters().storage++;
  Event e;
  e.kind = Event::Kind::Alloc;
  e.storage_id = id;
  e.bytes = nbytes();
  e.what = current_op_interned();
  e.on_device = rep_ == Rep::Device;
  try {
    emit(e);
  } catch (...) {
    release_heap();  // no destructor runs for a constructor that throws
    throw;
  }
}

void Storage::release_heap() noexcept {
  if (large_) {
    large_blocks::release(heap_);
  } else {
    delete[] static_cast<unsigned char*>(heap_);
  }
  heap_ = nullptr;
}

Storage::~Storage() {
  run_limits().held -= held_bytes();
  release_heap();
  if (rep_ == Rep::Device) {
    // The backend outlives the run's storages (the interpreter installs it for the run);
    // a storage left over after it is gone (a test's) has nothing to give back to.
    if (DeviceBackend* backend = device_backend()) backend->release(device_data_);
  }
  Event e;
  e.kind = Event::Kind::Free;
  e.storage_id = id;
  e.bytes = nbytes();
  emit(e);
}

int64_t Storage::held_bytes() const {
  if (rep_ == Rep::Device) return 0;
  return held_elements() * static_cast<int64_t>(holds_float() ? sizeof(float) : sizeof(double));
}

void Storage::wrong_representation(Rep want) const {
  if (rep_ == Rep::Device) not_on_host();
  // A programming error, never a user's: fail loudly rather than read the wrong array.
  std::fprintf(stderr, "agtrace: internal error: %s elements requested from a %s storage (id %lld)\n",
               want == Rep::Float ? "float" : "double", dtype_name(dtype).c_str(), static_cast<long long>(id));
  std::abort();
}

void Storage::not_on_host() const { throw_no_device_kernel(device); }

const double* storage_as_double(const Storage& s, std::vector<double>& copy) {
  if (s.meta) return nullptr;
  if (!s.holds_float()) return s.f64();
  const float* p = s.f32();
  copy.assign(p, p + s.numel);
  return copy.data();
}

void VersionCounter::bump() {
  ++version;
  last_bump_statement = run_position().statement;
}

TensorImpl::TensorImpl() {
  id = id_counters().tensor++;
  registry().add(this);
  if (ObjectObserver* o = object_observer()) o->tensor_created(*this);
}

TensorImpl::~TensorImpl() {
  if (ObjectObserver* o = object_observer()) o->tensor_destroyed(*this);
  registry().remove(this);
}

int64_t TensorImpl::numel() const { return shape_numel(sizes); }

bool TensorImpl::is_contiguous() const { return is_contiguous_layout(sizes, strides); }

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape s(sizes.size(), 1);
  int64_t acc = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return s;
}

namespace {
// The product of sizes as c10::safe_multiply_u64 forms it: unsigned, with any overflow on
// the way kept, so that a product past int64 is detected rather than wrapped.
bool size_product_overflows(const Shape& s, uint64_t factor, uint64_t& out) {
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t v : s) overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(v), &n);
  overflow |= __builtin_mul_overflow(n, factor, &n);
  out = n;
  return overflow || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}
bool has_negative_size(const Shape& s) {
  return std::any_of(s.begin(), s.end(), [](int64_t v) { return v < 0; });
}
}  // namespace

int64_t shape_numel(const Shape& s) {
  uint64_t n = 1;
  // A negative size is refused by whoever made the shape, with its own message; its
  // product here only has to be free of undefined behaviour.
  if (has_negative_size(s)) {
    for (int64_t v : s) n *= static_cast<uint64_t>(v);
    return static_cast<int64_t>(n);
  }
  // Measured (torch 1.13): x.expand(2**32, 2**32, 3) raises this from TensorImpl's numel.
  if (size_product_overflows(s, 1, n)) throw ScenarioError("shape_mismatch", "numel: integer multiplication overflow");
  return static_cast<int64_t>(n);
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

namespace {
// Measured (torch 1.13): torch.zeros(2**32, 2**32) and torch.zeros(2**62, 2,
// device='meta') raise this (computeStorageNbytesContiguous), before any allocation.
void check_storage_size(const Shape& sizes, DType dtype) {
  uint64_t bytes = 0;
  if (!has_negative_size(sizes) && size_product_overflows(sizes, static_cast<uint64_t>(dtype_size(dtype)), bytes))
    throw ScenarioError("shape_mismatch", "Storage size calculation overflowed with sizes=" + shape_str(sizes));
}

Tensor new_tensor(const InternedShape& sizes, DType dtype, bool meta, bool zero_fill) {
  check_storage_size(sizes, dtype);
  auto t = make_shared_object<TensorImpl>();
  t->storage = make_shared_object<Storage>(dtype, shape_numel(sizes), meta, zero_fill);
  t->sizes = sizes;
  t->strides = t->sizes.contiguous_strides();
  t->version = make_shared_object<VersionCounter>();
  return t;
}
}  // namespace

void check_allocation(const Shape& sizes, DType dtype) {
  check_storage_size(sizes, dtype);
  if (!allocating_on_cpu()) return;  // a device backend counts its own bytes
  const RunLimits& lim = run_limits();
  const int64_t n = shape_numel(sizes);
  const int elem_shift = dtype == DType::Float32 ? 2 : 3;  // as Storage holds elements
  if (n > ((lim.max_memory - lim.held) >> elem_shift)) throw_over_budget(n, lim);
}

Tensor empty_tensor(const InternedShape& sizes, DType dtype, bool meta) { return new_tensor(sizes, dtype, meta, true); }
Tensor uninitialized_tensor(const InternedShape& sizes, DType dtype, bool meta) {
  return new_tensor(sizes, dtype, meta, false);
}

namespace {
// write_values for a fresh tensor on the device (host access to device storage refuses, so
// that ops cannot compute on the host): t's row-major values, rounded to its dtype on the
// host (a cast rounds to nearest even on either side), laid out in its storage order and
// copied over in one transfer. t covers its whole storage (a fresh, dense tensor).
void upload_values(const Tensor& t, const std::vector<double>& values) {
  const Storage& s = *t->storage;
  if (s.numel == 0) return;
  std::vector<double> laid_out(static_cast<size_t>(s.numel), 0.0);
  const size_t given = values.size();
  for_each_offset(t->sizes, t->strides, t->offset, [&](int64_t i, int64_t off) {
    if (static_cast<size_t>(i) < given)
      laid_out[static_cast<size_t>(off)] = round_to_dtype(values[static_cast<size_t>(i)], s.dtype);
  });
  device_upload(s.device_data(), s.dtype, laid_out.data(), s.numel);
}
}  // namespace

namespace {
// A new tensor holding values[0 .. count), rounded to its dtype (count beyond its size ignored).
Tensor tensor_from_doubles(const Shape& sizes, DType dtype, const double* values, size_t count) {
  Tensor t = empty_tensor(sizes, dtype, false);
  Storage& s = *t->storage;
  const size_t n = std::min(count, static_cast<size_t>(s.numel));
  if (s.on_device()) {  // a leaf of a cuda run: made on the host, copied over once
    upload_values(t, std::vector<double>(values, values + count));
    return t;
  }
  if (s.holds_float()) {
    float* p = s.f32();
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(values[i]);
  } else {
    double* p = s.f64();
    for (size_t i = 0; i < n; ++i) p[i] = round_to_dtype(values[i], dtype);
  }
  return t;
}
}  // namespace

Tensor tensor_from_values(const Shape& sizes, DType dtype, const std::vector<double>& values) {
  return tensor_from_doubles(sizes, dtype, values.data(), values.size());
}

// Every wrapped Python number of a program comes through here (issue #6): no vector, no
// shape lookup (the default InternedShape is []), and its one element written once.
Tensor scalar_tensor(double v, DType dtype) {
  Tensor t = uninitialized_tensor(InternedShape(), dtype, false);
  Storage& s = *t->storage;
  if (s.on_device()) upload_values(t, std::vector<double>{v});
  else if (s.holds_float()) *s.f32() = static_cast<float>(v);
  else *s.f64() = round_to_dtype(v, dtype);
  return t;
}

Tensor make_alias(const Tensor& src, const Shape& sizes, const Shape& strides, int64_t offset) {
  shape_numel(sizes);  // a view's numel past int64 raises where PyTorch raises it: making the view
  auto t = make_shared_object<TensorImpl>();
  t->storage = src->storage;
  t->sizes = sizes;
  t->strides = strides;
  t->offset = offset;
  t->version = src->version;
  t->grad_fn_version = src->version->version;
  return t;
}

namespace {
template <typename T>
std::vector<double> gather(const TensorImpl& t, const T* data) {
  if (t.is_contiguous()) return std::vector<double>(data + t.offset, data + t.offset + t.numel());
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for_each_offset(t.sizes, t.strides, t.offset,
                  [&](int64_t i, int64_t off) { out[static_cast<size_t>(i)] = static_cast<double>(data[off]); });
  return out;
}
}  // namespace

// An empty tensor (a zero-size dim) may sit at a non-zero offset of an empty storage, whose
// data pointer is null: return before any pointer arithmetic on it (UBSan, found by fuzzing
// torch.stack of a [0, 3] tensor).
std::vector<double> to_values(const Tensor& t) {
  if (t->is_meta() || t->numel() == 0) return {};
  const Storage& s = *t->storage;
  return s.holds_float() ? gather(*t, s.f32()) : gather(*t, s.f64());
}

double item(const Tensor& t) {
  if (t->is_meta() || t->numel() == 0) return 0.0;
  if (t->storage->on_device()) return host_values(t)[0];  // .item() of a cuda tensor: a copy
  return t->storage->get(t->offset);
}

namespace {
// for_each_offset over the rows of the innermost dim of a tensor with at least one dim:
// f(row-major index of the row's first element, its offset).
template <typename F>
void for_each_row_offset(const Shape& sizes, const Shape& strides, int64_t offset, F&& f) {
  const int64_t len = sizes.back();
  const Shape outer(sizes.begin(), sizes.end() - 1), outer_strides(strides.begin(), strides.end() - 1);
  for_each_offset(outer, outer_strides, offset, [&](int64_t row, int64_t off) { f(row * len, off); });
}

template <typename T>
void copy_elements(const TensorImpl& dst, T* d, const TensorImpl& src, const T* s) {
  const bool one_storage = dst.storage == src.storage;  // dst may overlap src
  // A strided side whose innermost dim has stride 1 (a slice of cat's output, a narrowed
  // split gradient) is copied a row at a time.
  const auto rows_unit = [](const TensorImpl& t) { return t.dim() > 1 && t.strides.back() == 1; };
  if (!one_storage && src.is_contiguous()) {
    const T* from = s + src.offset;
    if (dst.is_contiguous()) std::copy(from, from + src.numel(), d + dst.offset);
    else if (rows_unit(dst)) {
      const int64_t len = dst.sizes.back();
      for_each_row_offset(dst.sizes, dst.strides, dst.offset,
                          [&](int64_t i, int64_t off) { std::copy(from + i, from + i + len, d + off); });
    } else for_each_offset(dst.sizes, dst.strides, dst.offset, [&](int64_t i, int64_t off) { d[off] = from[i]; });
  } else if (!one_storage && dst.is_contiguous()) {
    T* to = d + dst.offset;
    if (rows_unit(src)) {
      const int64_t len = src.sizes.back();
      for_each_row_offset(src.sizes, src.strides, src.offset,
                          [&](int64_t i, int64_t off) { std::copy(s + off, s + off + len, to + i); });
    } else for_each_offset(src.sizes, src.strides, src.offset, [&](int64_t i, int64_t off) { to[i] = s[off]; });
  } else {
    // Through a row-major copy of src, as to_values takes it.
    std::vector<T> row_major(static_cast<size_t>(src.numel()));
    for_each_offset(src.sizes, src.strides, src.offset,
                    [&](int64_t i, int64_t off) { row_major[static_cast<size_t>(i)] = s[off]; });
    for_each_offset(dst.sizes, dst.strides, dst.offset,
                    [&](int64_t i, int64_t off) { d[off] = row_major[static_cast<size_t>(i)]; });
  }
}
}  // namespace

void copy_values(const Tensor& dst, const Tensor& src) {
  if (dst->dtype() != src->dtype() || dst->is_meta() || src->is_meta() || dst->storage->on_device() ||
      src->storage->on_device()) {
    write_values(dst, to_values(src));
    return;
  }
  if (dst->numel() == 0) return;  // see to_values: an empty tensor's data may be null
  Storage& d = *dst->storage;
  const Storage& s = *src->storage;
  if (d.holds_float()) copy_elements(*dst, d.f32(), *src, s.f32());
  else copy_elements(*dst, d.f64(), *src, s.f64());
}

void write_values(const Tensor& t, const std::vector<double>& values) {
  if (t->is_meta() || t->numel() == 0) return;  // see to_values
  Storage& s = *t->storage;
  const DType d = t->dtype();
  if (s.holds_float()) {
    float* data = s.f32();
    if (t->is_contiguous()) {
      float* dst = data + t->offset;
      const int64_t n = t->numel();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(values[static_cast<size_t>(i)]);
      return;
    }
    for_each_offset(t->sizes, t->strides, t->offset, [&](int64_t i, int64_t off) {
      data[off] = static_cast<float>(values[static_cast<size_t>(i)]);
    });
    return;
  }
  double* data = s.f64();
  if (t->is_contiguous()) {
    double* dst = data + t->offset;
    const int64_t n = t->numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = round_to_dtype(values[static_cast<size_t>(i)], d);
    return;
  }
  for_each_offset(t->sizes, t->strides, t->offset, [&](int64_t i, int64_t off) {
    data[off] = round_to_dtype(values[static_cast<size_t>(i)], d);
  });
}

Tensor copy_to(const Tensor& t, DType dtype, const std::string& device, const Shape* strides) {
  Tensor out;
  {
    DeviceScope scope(t->is_meta() ? std::string("cpu") : device);
    out = uninitialized_tensor(t->sizes, dtype, t->is_meta());
  }
  if (strides && *strides != out->strides) out = make_alias(out, t->sizes, *strides, 0);
  if (t->is_meta()) return out;
  std::vector<double> values = host_values(t);
  if (out->storage->on_device())
    upload_values(out, values);
  else
    write_values(out, values);
  return out;
}

std::vector<double> host_values(const Tensor& t) {
  const Storage& s = *t->storage;
  if (!s.on_device()) return to_values(t);
  if (t->numel() == 0) return {};
  // The whole storage comes over (a view may start anywhere in it), then the view's
  // elements are picked out through its strides.
  std::vector<double> all(static_cast<size_t>(s.numel));
  device_download(all.data(), s.device_data(), s.dtype, s.numel);
  std::vector<double> out(static_cast<size_t>(t->numel()));
  for_each_offset(t->sizes, t->strides, t->offset,
                  [&](int64_t i, int64_t off) { out[static_cast<size_t>(i)] = all[static_cast<size_t>(off)]; });
  return out;
}

}  // namespace agtrace
