#include "tensor/tensor.hpp"

#include <algorithm>

#include "errors.hpp"
#include "tensor/events.hpp"
#include "util/slot_registry.hpp"

namespace agtrace {

namespace {
SlotRegistry<TensorImpl>& registry() {
  static SlotRegistry<TensorImpl> r;
  return r;
}
}  // namespace

const std::vector<TensorImpl*>& live_tensors() { return registry().live(); }

namespace {
ObjectObserver*& observer_slot() {
  static ObjectObserver* observer = nullptr;
  return observer;
}
}  // namespace
ObjectObserver* object_observer() { return observer_slot(); }
void set_object_observer(ObjectObserver* observer) { observer_slot() = observer; }

Storage::Storage(DType d, int64_t n, bool is_meta) : dtype(d), numel(n), meta(is_meta) {
  if (!meta) {
    RunLimits& lim = run_limits();
    const int64_t need = n * static_cast<int64_t>(sizeof(double));
    if (n > lim.max_memory / static_cast<int64_t>(sizeof(double)) || lim.held + need > lim.max_memory) {
      ScenarioError e("limit", "allocating " + std::to_string(n) + " elements would exceed the memory budget of " +
                                   std::to_string(lim.max_memory) + " bytes (--max-memory; the meta device is exempt)");
      e.facts = {{"elements", n}, {"max_memory", lim.max_memory}, {"held", lim.held}};
      throw e;
    }
    data.assign(static_cast<size_t>(n), 0.0);
    lim.held += need;
  }
  id = id_counters().storage++;
  Event e;
  e.kind = Event::Kind::Alloc;
  e.storage_id = id;
  e.bytes = nbytes();
  e.what = run_position().op;
  emit(e);
}

Storage::~Storage() {
  if (!meta) run_limits().held -= numel * static_cast<int64_t>(sizeof(double));
  Event e;
  e.kind = Event::Kind::Free;
  e.storage_id = id;
  e.bytes = nbytes();
  emit(e);
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

bool TensorImpl::is_contiguous() const {
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

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Tensor empty_tensor(const Shape& sizes, DType dtype, bool meta) {
  auto t = std::make_shared<TensorImpl>();
  t->storage = std::make_shared<Storage>(dtype, shape_numel(sizes), meta);
  t->sizes = sizes;
  t->strides = contiguous_strides(sizes);
  t->version = std::make_shared<VersionCounter>();
  return t;
}

Tensor tensor_from_values(const Shape& sizes, DType dtype, const std::vector<double>& values) {
  Tensor t = empty_tensor(sizes, dtype, false);
  for (size_t i = 0; i < values.size() && i < t->storage->data.size(); ++i)
    t->storage->data[i] = round_to_dtype(values[i], dtype);
  return t;
}

Tensor scalar_tensor(double v, DType dtype) { return tensor_from_values({}, dtype, {v}); }

Tensor make_alias(const Tensor& src, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto t = std::make_shared<TensorImpl>();
  t->storage = src->storage;
  t->sizes = sizes;
  t->strides = strides;
  t->offset = offset;
  t->version = src->version;
  t->grad_fn_version = src->version->version;
  return t;
}

std::vector<double> to_values(const Tensor& t) {
  std::vector<double> out;
  if (t->is_meta()) return out;
  const double* data = t->storage->data.data();
  if (t->is_contiguous()) return std::vector<double>(data + t->offset, data + t->offset + t->numel());
  out.resize(static_cast<size_t>(t->numel()));
  for_each_offset(t->sizes, t->strides, t->offset,
                  [&](int64_t i, int64_t off) { out[static_cast<size_t>(i)] = data[off]; });
  return out;
}

double item(const Tensor& t) {
  if (t->is_meta() || t->numel() == 0) return 0.0;
  return t->storage->data[static_cast<size_t>(t->offset)];
}

void write_values(const Tensor& t, const std::vector<double>& values) {
  if (t->is_meta()) return;
  double* data = t->storage->data.data();
  const DType d = t->dtype();
  if (t->is_contiguous()) {
    double* dst = data + t->offset;
    const int64_t n = t->numel();
    if (d == DType::Float32)
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(static_cast<float>(values[static_cast<size_t>(i)]));
    else
      for (int64_t i = 0; i < n; ++i) dst[i] = round_to_dtype(values[static_cast<size_t>(i)], d);
    return;
  }
  for_each_offset(t->sizes, t->strides, t->offset, [&](int64_t i, int64_t off) {
    data[off] = round_to_dtype(values[static_cast<size_t>(i)], d);
  });
}

}  // namespace agtrace
